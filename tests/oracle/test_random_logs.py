"""Random logs, judged by Kafka: hypothesis workloads written by the broker-log writer load in Kafka's own
``LogLoader`` + ``ProducerStateManager`` with the answers of the ground truth and of txnlog.

Each workload (:class:`Workload`, drawn by :func:`workloads`) is a small cluster, one broker, a topic of 1-3
partitions with small segments (transactions cross segment rolls), driven by a list of operations:
idempotent and plain sends, three transactional ids (each TV0, TV1 or TV2: TV2 markers carry epoch + 1;
optionally one id seeded near epoch exhaustion, so TV2 rolls over to a new producer id), commits, aborts,
a new producer instance for an id (InitProducerId: an epoch bump, fencing the ongoing transaction with
ABORT markers at the bumped epoch), a crashed producer whose transaction the coordinator aborts once the
clock passes its timeout, clock advances (producers expire after ``producer.id.expiration.ms``), retention
and DeleteRecords moving the log start (the writer deletes the snapshots Kafka deletes with them), and a
forced roll. Transactions still open at the end are left open. The copy is then taken from a broker shut
down cleanly (``.kafka_cleanshutdown``, the final snapshot at the log end) or from a running one (its
snapshot at the log end kept or not: a running broker writes one only when it rolls), with the checkpointed
high watermark at or a few offsets behind the log end.

Batched: the examples of a run are drawn first (hypothesis, a fixed seed, no database: the same examples on
every machine), written into one directory each, then every data partition of all of them is loaded by the
oracle in two JVMs for the whole set (as the broker restarted on the copy, and as stored, ``--shutdown
clean``: :func:`tests.oracle.judge.kafka_answers` picks which answer a copy speaks for), all at one
``as_of`` (the newest broker time over the set: ``--now`` is one value per call; the ground truth and
txnlog are given the same). txnlog runs once per example (a small input: the driver placement, ~1-3 s).
A failing example is printed as its :class:`Workload` (paste it into ``EXPLICIT`` to replay it first).

Which broker a copy speaks for is said in tests/oracle/test_scenarios.py's docstring. ``load-partition``
answers as a restarted broker; on a running broker's copy the live answer differs in two known ways, each
compared with the ground truth's live answer (and txnlog with that) instead of Kafka's restart:

* *unreplicated*: a completed transaction whose marker is not yet below the high watermark holds the live
  LSO (``ProducerStateManager.unreplicatedTxns``); the judge's ``held_by_unreplicated`` handles it;
* *a restart rebuilds from the log start*: where retention or DeleteRecords moved the log start and no
  snapshot lies above it up to the base of the segment holding the log end, the running leader still
  holds what the bytes below the log start and the snapshots at or below it fed it: moving the log start
  removes no producer (``UnifiedLog.maybeIncrementLogStartOffset``,
  ``ProducerStateManager.onLogStartOffsetIncremented``) and deletes only the segments wholly below it with
  the snapshots named after them (``UnifiedLog.deleteSegments``); the segment DeleteRecords cut into stays
  on disk with the snapshot at its base. A restart rebuilds from the log start: it deletes every snapshot at
  or below the log start (``ProducerStateManager.truncateAndReload``), and an unclean one also recovers the
  active segment from the snapshot at its base, overwriting the one at the log end (``LogLoader.recoverLog``,
  ``UnifiedLog.rebuildProducerState``). Producers seen only below the log start are gone, and an ongoing
  transaction whose first batch is below it starts at its next batch, or not at all. There (and only where
  Kafka's answer differs) the LSO and producers compared, the ground truth's and txnlog's, are the ground
  truth's live answer, which is what the copy's files show of the leader's state
  (``PartitionLog.producers_on_disk`` where deleted segments fed producers no snapshot on disk holds);
  every offset is still Kafka's.

Everything else (log start/end, high watermark, LSO, every active producer, OPEN transactions) is Kafka's.

It found two disagreements with Kafka, each now a regression test at the end. A cleanly shut-down copy
emptied by DeleteRecords (log start = log end) kept the live producers in the ground truth and in txnlog,
while the restart deletes the snapshot at the log start and holds none: both follow Kafka. A running copy
whose log start DeleteRecords moved past the batches of a producer: txnlog gave that producer (its batches
are on disk below the log start), Kafka's restart none; the leader the copy speaks for holds it, so the
judge names the difference. Kafka's sources read for that one showed two writer errors, fixed: it deleted
the snapshots below a DeleteRecords log start, which a running broker keeps, and it took a snapshot at a
roll right after DeleteRecords up to the log end, where ``ProducerStateManager.takeSnapshot`` takes none
(``onLogStartOffsetIncremented`` sets the last snapshot offset to the log start when no snapshot file is
left).

Not generated: damaged batches (tests/oracle/test_scenarios.py covers them), replicas on several brokers,
a checkpointed high watermark below the log start (it is clamped to it here), compaction.

Cost and knobs: ``TXNLOG_RANDOM_LOGS_EXAMPLES`` (default 12) examples per run and
``TXNLOG_RANDOM_LOGS_SEED`` (default 0) pick the set; a campaign is e.g.
``TXNLOG_RANDOM_LOGS_EXAMPLES=300 TXNLOG_RANDOM_LOGS_SEED=7 ./run-tests.sh tests/oracle/test_random_logs.py``
(still two JVMs for the set; txnlog ~0.3 s per example). The default run, with the tests at the end, adds
about 30 s to the suite (0.5 CI minutes); 150 examples take about 60 s, 200 about 2 minutes.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.e2e import truth as T
from tests.oracle.judge import (
    _producers,
    draw_distinct,
    kafka_answers,
    run_txnlog,
    truth_differences,
    txnlog_differences,
)
from txnlog.brokerlog.cluster import DEFAULT_START_MS, Cluster, ProducerFencedError, TransactionalProducer
from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.brokerlog.partition import PartitionLog, segment_file_name
from txnlog.brokerlog.truth import assemble
from txnlog.kafka.wire import Compression

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

EXAMPLES = int(os.environ.get("TXNLOG_RANDOM_LOGS_EXAMPLES", "12"))
SEED = int(os.environ.get("TXNLOG_RANDOM_LOGS_SEED", "0"))

MINUTE = 60_000
HOUR = 60 * MINUTE
TOPIC = "events"
TXN_IDS = ("txn-a", "txn-b", "txn-c")
#: transaction.timeout.ms of each id: a crashed producer's transaction is aborted by the coordinator once
#: the clock passes it; within it, it stays open
TIMEOUTS = (60_000, 15 * MINUTE, 60_000)

Op = tuple[Any, ...]


@dataclass(frozen=True)
class Workload:
    """One random cluster: what the writer is told to do, in order (see the module's docstring)."""

    seed: int
    partitions: int
    segment_bytes: int
    transaction_versions: tuple[int, int, int]
    rollover: bool  # txn-c starts near epoch exhaustion (TV2: rolls over to a new producer id)
    ops: tuple[Op, ...]
    clean_shutdown: bool
    final_snapshot: bool  # a running broker's copy: the snapshot at the log end kept (a clean one always has it)
    hw_lag: tuple[int, ...]  # per partition: the checkpointed high watermark this far behind the log end


def _ops(partitions: int) -> st.SearchStrategy[Op]:
    part = st.integers(0, partitions - 1)
    txn = st.integers(0, len(TXN_IDS) - 1)
    send = st.tuples(st.just("send"), txn, part)
    end = st.tuples(st.sampled_from(["commit", "commit", "abort"]), txn)
    return st.one_of(
        send,
        send,
        send,
        end,
        end,
        st.tuples(st.just("idem"), st.integers(0, 1), part),
        st.tuples(st.just("plain"), part),
        st.tuples(st.sampled_from(["init", "crash"]), txn),
        st.tuples(st.just("advance"), st.sampled_from([50, 2_000, 70_000, 20 * MINUTE, 25 * HOUR])),
        st.tuples(st.sampled_from(["retention", "delete_records", "roll"]), part, st.integers(1, 100) | st.just(100)),
    )


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    partitions = draw(st.integers(1, 3))
    clean = draw(st.booleans())
    n_ops = draw(st.integers(8, 60))
    return Workload(
        seed=draw(st.integers(0, 2**16)),
        partitions=partitions,
        segment_bytes=draw(st.sampled_from([700, 1500, 4000])),
        transaction_versions=draw(st.tuples(*[st.sampled_from([0, 1, 2, 2])] * 3)),
        rollover=draw(st.booleans()),
        ops=tuple(draw(st.lists(_ops(partitions), min_size=n_ops, max_size=n_ops))),
        clean_shutdown=clean,
        final_snapshot=clean or draw(st.booleans()),
        hw_lag=tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=partitions, max_size=partitions))),
    )


#: Workloads replayed before the random ones (a failing example's repr goes here).
EXPLICIT: list[Workload] = []


def write(w: Workload, root: Path, start_ms: int = DEFAULT_START_MS) -> Cluster:
    """Run ``w`` against a fresh one-broker cluster in ``root``, its clock starting at ``start_ms``, and close it
    (the copy)."""
    c = Cluster(root, seed=w.seed, name=root.parent.name, start_ms=start_ms, broker_ids=(1,), txn_state_partitions=1)
    c.create_topic(TOPIC, w.partitions, segment_bytes=w.segment_bytes)
    small = {"value_bytes": 60, "records_per_batch": (1, 5), "compression": Compression.NONE}
    idem = [c.idempotent_producer(**small) for _ in range(2)]  # type: ignore[arg-type]
    plain = c.plain_producer(**small)  # type: ignore[arg-type]
    if w.rollover:
        c.coordinator.seed_transactional_id(
            TXN_IDS[2], producer_epoch=32764, timeout_ms=TIMEOUTS[2], client_transaction_version=2
        )
    txn: dict[int, TransactionalProducer] = {}

    def instance(t: int, new: bool = False) -> TransactionalProducer:
        if new or t not in txn:
            txn[t] = c.transactional_producer(
                TXN_IDS[t],
                transaction_version=w.transaction_versions[t],
                transaction_timeout_ms=TIMEOUTS[t],
                **small,  # type: ignore[arg-type]
            ).init_transactions()
        return txn[t]

    for op in w.ops:
        kind, log = op[0], None
        if kind in ("retention", "delete_records", "roll"):
            log = c.partition(TOPIC, op[1]).leader_log
        try:
            if kind == "send":
                p = instance(op[1], new=not _alive(txn.get(op[1])))  # a dead instance's application restarts
                if not p.in_transaction:
                    p.begin_transaction()
                p.send(TOPIC, op[2])
            elif kind in ("commit", "abort"):  # this id's transaction, else the first id's that is open
                ongoing = [t for t in (op[1], *range(len(TXN_IDS))) if _alive(txn.get(t)) and txn[t].in_transaction]
                if ongoing:
                    p = txn[ongoing[0]]
                    p.commit_transaction() if kind == "commit" else p.abort_transaction()
            elif kind == "init":
                instance(op[1], new=True)
            elif kind == "crash" and op[1] in txn:
                txn[op[1]].crash()
            elif kind == "idem":
                idem[op[1]].send(TOPIC, op[2])
            elif kind == "plain":
                plain.send(TOPIC, op[1])
            elif kind == "advance":
                c.advance(op[1])
            elif kind == "retention" and log is not None and len(log.segments) > 1:
                log.delete_segments_before(log.segments[min(op[2], len(log.segments) - 1)].base_offset)
            elif kind == "delete_records" and log is not None:
                target = log.log_start_offset + (log.log_end_offset - log.log_start_offset) * op[2] // 100
                if target > log.log_start_offset:
                    log.delete_records(target)
            elif kind == "roll" and log is not None and log.active_segment.size > 0:
                log.roll()
        except ProducerFencedError:
            pass  # this instance is dead (crashed, fenced or timed out): its next op needs an "init"
        c.tick(1, 20)
    for part in range(w.partitions):
        log = c.partition(TOPIC, part).leader_log
        c.high_watermarks[(1, TOPIC, part)] = max(log.log_start_offset, log.log_end_offset - w.hw_lag[part])
    if w.clean_shutdown:
        c.clean_shutdown_brokers.add(1)
    c.close()
    if not w.final_snapshot:
        for part in range(w.partitions):
            _drop_final_snapshot(c.partition(TOPIC, part).leader_log)
    return c


def _alive(p: TransactionalProducer | None) -> bool:
    try:
        return p is not None and p._check_alive() is not None
    except ProducerFencedError:
        return False


def _drop_final_snapshot(log: PartitionLog) -> None:
    """A running broker's copy: no snapshot at the log end (the broker writes one at a roll, or on shutdown):
    the one the writer's close wrote goes; one a roll wrote at the base of an empty active segment stays."""
    if (
        log.snapshot_offsets
        and log.snapshot_offsets[-1] == log.log_end_offset
        and log.active_segment.base_offset < log.log_end_offset
    ):
        (log.dir / segment_file_name(log.log_end_offset, ".snapshot")).unlink()
        log.snapshot_offsets.pop()


def write_all(examples: list[Workload], root: Path) -> list[Cluster]:
    """Every workload written into ``root/wNNN/logs``, each starting so many whole hours late that they all end
    within the hour before the longest one ends: one ``as_of`` for the set (``--now`` is one value per oracle
    call) leaves no example idle for long (a producer expires after a day). Whole hours keep every time the
    coordinator acts on (``transactional.id`` expiry checks are hourly, abort checks every 10 s) aligned, so
    the workload writes the same offsets, only later."""
    lengths = [write(w, root / "scratch" / f"w{i:03d}").now - DEFAULT_START_MS for i, w in enumerate(examples)]
    shutil.rmtree(root / "scratch")
    return [
        write(w, root / f"w{i:03d}" / "logs", DEFAULT_START_MS + (max(lengths) - n) // HOUR * HOUR)
        for i, (w, n) in enumerate(zip(examples, lengths, strict=True))
    ]


class _Answers:
    """The oracle's answers of one batched call per way of loading, handed to :func:`kafka_answers` by
    directory (it asks per scenario; the answers were computed for the whole set at once)."""

    def __init__(self, oracle: Any, dirs: list[Path], now_ms: int) -> None:
        self.now_ms = now_ms
        options = ("--now", str(now_ms), "--apply-expiration")
        self.answers = {
            (str(d), clean): a
            for clean, extra in ((False, ()), (True, ("--shutdown", "clean")))
            for d, a in zip(dirs, oracle.load_partitions(dirs, *options, *extra), strict=True)
        }

    def load_partitions(self, dirs: list[Path], *options: str) -> list[dict[str, Any]]:
        assert options[:2] == ("--now", str(self.now_ms)), options
        clean = options[-2:] == ("--shutdown", "clean")
        return [self.answers[(str(d), clean)] for d in dirs]


def _data_dirs(truth: ScenarioResult) -> list[Path]:
    return [truth.root / f"broker-{b}" / f"{t}-{p}" for b, t, p in sorted(truth.replica_partitions)]


def _restart_rebuilds_from_log_start(c: Cluster, key: tuple[int, str, int]) -> bool:
    """A running broker's copy, the log start moved, and no snapshot above the log start at or below the base of
    the segment holding the log end: a restart rebuilds the producer state from the log start (see the module's
    docstring), while the running broker's state still holds what the deleted bytes and snapshots fed it."""
    if key[0] in c.clean_shutdown_brokers:
        return False
    log = c.partition(*key[1:]).logs[key[0]]
    recovered = max(s.base_offset for s in log.segments if s.base_offset <= log.log_end_offset)
    snapshots = [int(s.stem) for s in log.dir.glob("*.snapshot")]
    return log.log_start_offset > 0 and not any(log.log_start_offset < o <= recovered for o in snapshots)


def _leader_expired_a_producer(c: Cluster, key: tuple[int, str, int]) -> bool:
    """A running broker's copy whose leader's periodic check removed a producer between two of its batches
    (``UnifiedLog.producerExpireCheck`` → ``ProducerStateManager.removeExpiredProducers``): its next batch
    started from an empty entry (coordinator epoch −1), which a restart, replaying the batches without
    expiring between them (``UnifiedLog.rebuildProducerState``), does not do. Judged by Kafka's own code in
    :func:`test_a_producer_idle_past_its_expiration_restarts_from_an_empty_entry`."""
    if key[0] in c.clean_shutdown_brokers:
        return False
    return bool(c.partition(*key[1:]).logs[key[0]].expired_between)


def _live_answer(truth: ScenarioResult, key: tuple[int, str, int], kafka: dict[str, Any]) -> dict[str, Any]:
    """Kafka's answer with the LSO and producers of the ground truth's live answer (the offsets stay Kafka's; an
    LSO held by an unreplicated transaction stays Kafka's restart answer, which the judge compares as such)."""
    ep = truth.replica_partitions[key]
    producers = [
        {
            "producerId": p.producer_id,
            "producerEpoch": p.producer_epoch,
            "lastSequence": p.last_sequence,
            "lastTimestamp": p.last_timestamp,
            "coordinatorEpoch": p.coordinator_epoch,
            "currentTxnStartOffset": -1 if p.current_txn_start_offset is None else p.current_txn_start_offset,
        }
        for p in truth.producers
        if (p.broker, p.topic, p.partition) == key
    ]
    lso = kafka["lastStableOffset"] if ep.held_by_unreplicated else ep.last_stable_offset
    return {**kafka, "lastStableOffset": lso, "producers": producers}


@pytest.fixture(scope="module")
def examples() -> list[Workload]:
    return EXPLICIT + draw_distinct(workloads(), EXAMPLES, SEED)


def test_random_workloads_load_in_kafka_as_txnlog_and_the_truth_say(oracle, spark, tmp_path, examples):
    clusters = write_all(examples, tmp_path)
    as_of = max(c.now for c in clusters)  # at or after every example's last write: --now is one value per call
    truths = [
        assemble(c, name=c.name, description="random workload", as_of_ms=as_of, strict_intents=False) for c in clusters
    ]
    answers = _Answers(oracle, [d for t in truths for d in _data_dirs(t) if d.exists()], as_of)
    failures: list[str] = []
    named: list[tuple[int, tuple[int, str, int]]] = []
    for i, (w, c, truth) in enumerate(zip(examples, clusters, truths, strict=True)):
        out = tmp_path / f"w{i:03d}" / "out"
        run_txnlog(spark, truth.root, out, as_of, f"random-{i}")
        problems, named_here = _differences(c, truth, kafka_answers(answers, truth), out)
        # no false alarm: a random workload injects no integrity fault (the audit's NOT_CHECKED rows aside)
        problems += [f"integrity: {r['check']} {r['evidence']}" for r in T.rows(str(out), "integrity")
                     if r["severity"] != "NOT_CHECKED"]  # fmt: skip
        named += [(i, key) for key in named_here]
        if problems:
            failures.append(f"example {i}: {w!r}, start_ms={c.start_ms}, as_of={as_of}\n  " + "\n  ".join(problems))
    print(f"{len(examples)} workloads; restart-rebuilds-from-log-start differences (live answer compared): {named}")
    assert not failures, "\n".join(failures)


def _differences(
    c: Cluster, truth: ScenarioResult, kafka: dict[tuple[int, str, int], dict[str, Any]], out: Path
) -> tuple[list[str], list[tuple[int, str, int]]]:
    """The ground truth's and txnlog's differences from Kafka, the named live-vs-restart ones compared with the
    ground truth's live answer (module docstring); and the replicas where that was done."""
    for_txnlog, named = dict(kafka), []
    for key, k in kafka.items():
        live = _live_answer(truth, key, k)
        differs = (live["lastStableOffset"], _producers(live["producers"])) != (
            k["lastStableOffset"],
            _producers(k["producers"]),
        )
        if differs and (_restart_rebuilds_from_log_start(c, key) or _leader_expired_a_producer(c, key)):
            named.append(key)
            kafka[key] = for_txnlog[key] = live
    return truth_differences(truth, kafka) + txnlog_differences(truth, for_txnlog, out), named


@dataclass
class _Judged:
    """One workload judged alone: the differences, the replicas named, Kafka's restart answer, the truth,
    txnlog's producer_state rows and the written cluster."""

    problems: list[str]
    named: list[tuple[int, str, int]]
    restart: dict[tuple[int, str, int], dict[str, Any]]
    truth: ScenarioResult
    txnlog_producers: list[dict[str, Any]]
    cluster: Cluster


def _judge_one(oracle: Any, spark: Any, w: Workload, root: Path) -> _Judged:
    from tests.e2e import truth as T

    c = write(w, root / "logs")
    truth = assemble(c, name=c.name, description="random workload", as_of_ms=c.now, strict_intents=False)
    kafka = kafka_answers(_Answers(oracle, [d for d in _data_dirs(truth) if d.exists()], c.now), truth)
    restart = dict(kafka)
    run_txnlog(spark, truth.root, root / "out", c.now, "one")
    problems, named = _differences(c, truth, kafka, root / "out")
    return _Judged(problems, named, restart, truth, T.rows(str(root / "out"), "producer_state"), c)


#: one idempotent batch on a partition of one segment, then DeleteRecords up to the log end
_IDEM_THEN_DELETE_RECORDS = (("idem", 0, 0), ("delete_records", 0, 100))


def test_a_clean_copy_emptied_by_delete_records(oracle, spark, tmp_path):
    """Found by the random run, fixed in the ground truth and txnlog: the restart deletes the snapshot at the
    log start (ProducerStateManager.truncateAndReload) and rebuilds from the log start, so it holds none of
    the producers whose batches lie below it."""
    w = Workload(0, 1, 4000, (2, 2, 2), False, _IDEM_THEN_DELETE_RECORDS, True, True, (0,))
    judged = _judge_one(oracle, spark, w, tmp_path)
    assert not judged.problems and not judged.named
    assert not judged.truth.producers and not judged.txnlog_producers


def test_a_running_copy_keeps_the_producers_below_a_delete_records_log_start(oracle, spark, tmp_path):
    """Found by the random run. DeleteRecords moves the log start only (UnifiedLog.maybeIncrementLogStartOffset):
    the running leader keeps every producer in memory (ProducerStateManager.onLogStartOffsetIncremented removes
    none) and the bytes below the log start stay on disk in the segment it cut into. A running copy's tables
    say what that leader served, so txnlog and the ground truth give the producer of the batch below the log
    start; Kafka's restart rebuilds from the log start (UnifiedLog.rebuildProducerState) and holds none: the
    judge names that difference and compares the live answer."""
    w = Workload(0, 1, 4000, (2, 2, 2), False, _IDEM_THEN_DELETE_RECORDS, False, False, (0,))
    judged = _judge_one(oracle, spark, w, tmp_path)
    key = (1, TOPIC, 0)
    assert not judged.problems
    assert judged.named == [key]
    assert judged.restart[key]["producers"] == []
    assert judged.restart[key]["logStartOffset"] == judged.restart[key]["logEndOffset"] > 0
    (expected,) = judged.truth.producers
    assert [(r["producer_id"], r["last_sequence"]) for r in judged.txnlog_producers] == [
        (expected.producer_id, expected.last_sequence)
    ]


def test_a_running_copy_whose_producers_no_byte_shows(oracle, spark, tmp_path):
    """DeleteRecords up to the log end, a roll (no snapshot: nothing was appended past the log start,
    ProducerStateManager.takeSnapshot after onLogStartOffsetIncremented), then the segment below the log start
    deleted (UnifiedLog.deleteSegments): the running leader still holds the producer in memory, but no byte
    of the copy shows it. The tables say what the copy shows: the ground truth and txnlog give no producer,
    as Kafka's restart does."""
    ops = (*_IDEM_THEN_DELETE_RECORDS, ("roll", 0, 1), ("retention", 0, 1))
    w = Workload(0, 1, 4000, (2, 2, 2), False, ops, False, False, (0,))
    judged = _judge_one(oracle, spark, w, tmp_path)
    key = (1, TOPIC, 0)
    assert not judged.problems and not judged.named
    assert not list((judged.truth.root / "broker-1" / f"{TOPIC}-0").glob("*.snapshot"))
    assert judged.restart[key]["producers"] == [] and not judged.txnlog_producers
    assert not judged.truth.producers


def test_a_producer_idle_past_its_expiration_restarts_from_an_empty_entry(oracle, spark, tmp_path):
    """A running broker removes a producer idle for ``producer.id.expiration.ms`` with no transaction open at
    the next run of its periodic check (``UnifiedLog.producerExpireCheck`` every
    ``producer.id.expiration.check.interval.ms`` → ``ProducerStateManager.removeExpiredProducers``,
    ``isProducerExpired``); its next batch starts a new entry (``ProducerStateEntry.empty``: coordinator epoch
    −1). The copy's bytes show the gap (the marker, then a batch 25 hours later). Kafka's own code says what
    the leader held, in the two steps the leader took: the log up to that batch, loaded at the check's time
    with the check applied, has no producer (Kafka's ``removeExpiredProducers`` removed it); the whole log,
    loaded from a producer snapshot at that batch holding that state, gives the leader's answer. The ground
    truth and txnlog say the same; Kafka's restart on the copy keeps the marker's coordinator epoch (it
    replays without expiring), the difference the judge names (``_leader_expired_a_producer``)."""
    from txnlog.brokerlog.encode import encode_producer_snapshot

    w = Workload(
        0,
        1,
        4000,
        (0, 0, 0),
        False,
        (("send", 0, 0), ("commit", 0), ("advance", 25 * HOUR), ("send", 0, 0)),
        False,
        False,
        (0,),
    )
    judged = _judge_one(oracle, spark, w, tmp_path)
    key = (1, TOPIC, 0)
    assert not judged.problems and judged.named == [key]
    log = judged.truth.root / "broker-1" / f"{TOPIC}-0"
    c_log = _leader_log(judged)
    ((check, offset, pid),) = c_log.expired_between

    # where the batch after the gap starts, and its time, as Kafka's DumpLogSegments reads them
    segment = max((p for p in log.glob("*.log") if int(p.stem) <= offset), key=lambda p: int(p.stem))
    dumped = {
        int(m[1]): (int(m[2]), int(m[3]))
        for m in re.finditer(r"baseOffset: (\d+) .* position: (\d+) CreateTime: (-?\d+)", oracle.dump(segment))
    }
    position, batch_time = dumped[offset]
    assert check < batch_time  # the check ran in the gap, before that batch

    # 1. the log up to that batch, at the check's time, the check applied (Kafka's removeExpiredProducers)
    before = tmp_path / "before" / log.name
    shutil.copytree(log, before)
    for f in before.iterdir():
        if f.suffix == ".log" and int(f.stem) > int(segment.stem) or f.suffix in (".index", ".timeindex"):
            f.unlink()
        elif f.suffix == ".snapshot" and int(f.stem) > offset:
            f.unlink()
    with open(before / segment.name, "r+b") as fh:
        fh.truncate(position)
    (at_check,) = oracle.load_partitions([before], "--now", str(check), "--apply-expiration")
    assert at_check["logEndOffset"] == offset
    assert [p["producerId"] for p in at_check["producers"]] == []

    # 2. the whole log, from a producer snapshot at that batch holding that state
    after = tmp_path / "after" / log.name
    shutil.copytree(log, after)
    for f in after.glob("*.snapshot"):
        f.unlink()
    (after / f"{offset:020d}.snapshot").write_bytes(encode_producer_snapshot([]))
    (leader,) = oracle.load_partitions(
        [after], "--now", str(judged.truth.as_of_ms), "--apply-expiration", "--shutdown", "clean"
    )
    kafka_live = _producers(leader["producers"])

    truth = sorted(
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in judged.truth.producers
    )
    txnlog = sorted(
        (
            r["producer_id"],
            r["producer_epoch"],
            r["last_sequence"],
            r["last_timestamp_ms"],
            r["coordinator_epoch"],
            r["current_txn_start_offset"],
        )
        for r in judged.txnlog_producers
    )
    assert truth == txnlog == kafka_live
    ((producer_id, *_, coordinator_epoch, current_txn),) = kafka_live
    assert (producer_id, coordinator_epoch) == (pid, -1) and current_txn == offset
    # Kafka's restart on the copy replays without expiring: the marker's coordinator epoch
    (marker,) = c_log.markers
    assert [p["coordinatorEpoch"] for p in judged.restart[key]["producers"]] == [marker.coordinator_epoch] != [-1]


def _leader_log(judged: _Judged) -> PartitionLog:
    return judged.cluster.partition(TOPIC, 0).leader_log
