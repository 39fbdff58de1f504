"""The coordinator, judged by Kafka: txnlog's ``coordinator_history`` and ``coordinator_state`` of every
writer scenario equal what Apache Kafka's own code reads from the same ``__transaction_state`` bytes.

Per scenario (``bulk`` is left out: it takes size parameters and is the benchmarks' mix, its records are
those of the others), the copy and the in-process job run at the scenario's ``as_of`` that every scenario
module reads (the ``scenario_run`` fixture, tests/conftest.py), and two oracle JVMs:

* ``dump --transaction-log-decoder`` (Kafka's ``DumpLogSegments`` with ``TransactionLog.formatRecordKeyAndValue``)
  over every non-empty ``__transaction_state`` segment: each record's offset, timestamp, key and payload
  (producer id and epoch, state, partitions, last update timestamp, timeout; ``<DELETE>`` for a tombstone).
  That is Kafka's view of each record: ``coordinator_history`` must hold the same records, in offset order.
* ``txn-state`` (``TransactionStateManager.loadTransactionMetadata``'s loop with ``TransactionLog.readTxnRecordKey``
  / ``readTxnRecordValue``): the state the coordinator loads per transactional.id, every field of
  ``TransactionMetadata``. ``coordinator_state`` must hold the same, for the ids not tombstoned (a tombstone
  removes the id from Kafka's map; txnlog keeps the row, ``is_tombstoned``, for ``TRANSACTIONAL_ID_EXPIRED``).
  One JVM replays all the partitions (``kafka.txn_state_merged``): transactional.ids never span partitions,
  which the test checks from the dump before it relies on it; replica copies with the same bytes are read once.

Damaged coordinator input: ``partial_txn_state`` leaves 20 of the 50 partitions out of the copy (Kafka reads
the 30 present, as txnlog does: the missing ones simply have no dir, so both sides are compared on what is
there); ``corrupt_and_truncated`` and ``messy_incident`` damage data partitions, not ``__transaction_state``
(its replicas there are byte-identical copies). A batch that fails its CRC in ``__transaction_state`` would be a
real difference: ``DumpLogSegments`` and the load loop do not check CRCs (the broker's ``LogSegment.recover``
does, and truncates there on an unclean restart), while txnlog quarantines the batch — no scenario has one.

Fields neither side has are not compared: Kafka's load sets ``lastProducerEpoch`` to -1 (NO_PRODUCER_EPOCH)
and does not keep ``NextProducerEpoch`` (tag 3); txnlog's ``coordinator_epoch`` (the partition's leader
epoch) and ``value_version`` are not in Kafka's metadata.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.truth import rows
from tests.oracle.judge import ScenarioRun

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CLUSTER = ScenarioRun.CLUSTER
SEED = ScenarioRun.SEED
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: the largest epoch ms a datetime holds (9999-12-31T23:59:59.999Z); txnlog nulls timestamps outside [0, this]
_MAX_MS = 253402300799999


def _scenarios() -> list[str]:
    from txnlog.brokerlog.scenarios import scenario_names

    return [n for n in scenario_names() if n != "bulk"]  # bulk: a benchmark's size parameters


SCENARIOS = _scenarios()

_RECORD = re.compile(r"^\| offset: (-?\d+) (\w+): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) ")
_KEY = " key: transaction_metadata::transactionalId="
_PAYLOAD = re.compile(
    r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
    r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)$"
)


def parse_txn_log_dump(text: str) -> dict[str, list[dict[str, Any]]]:
    """``kafka-dump-log.sh --transaction-log-decoder`` output → per dumped file, its records in file order."""
    files: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = files.setdefault(line[len("Dumping ") :], [])
            continue
        m = _RECORD.match(line)
        if not m:
            continue
        record: dict[str, Any] = {"offset": int(m[1]), "timestamp": int(m[3])}
        if _KEY not in line:  # TransactionLog's UnknownKey: "key: unknown::version=N", no payload
            record["unknown_key"] = line[line.index(" key: ") + len(" key: ") :]
            current.append(record)
            continue
        tid, _, payload = line[line.index(_KEY) + len(_KEY) :].rpartition(" payload: ")
        record["transactional_id"] = tid
        if payload == "<DELETE>":
            record["tombstone"] = True
        else:
            p = _PAYLOAD.match(payload)
            assert p, f"unexpected TransactionLog payload: {payload!r}"
            record.update(
                tombstone=False,
                producer_id=int(p[1]),
                producer_epoch=int(p[2]),
                state=p[3],
                partitions=sorted(p[4].split(",")) if p[4] else [],
                last_update_ms=int(p[5]),
                timeout_ms=int(p[6]),
            )
        current.append(record)
    return files


def _ms(value: datetime | None) -> int | None:
    return None if value is None else (value - _EPOCH) // timedelta(milliseconds=1)


def _time(kafka_ms: int) -> int | None:
    """What txnlog's timestamp column holds for a Kafka epoch-ms value: null where a datetime cannot."""
    return kafka_ms if 0 <= kafka_ms <= _MAX_MS else None


def _partition_of(directory: Path) -> int:
    return int(directory.name.rsplit("-", 1)[1])


def _content(directory: Path) -> str:
    h = hashlib.sha256()
    for seg in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        h.update(seg.name.encode())
        h.update(seg.read_bytes())
    return h.hexdigest()


def run_txnlog(spark: Any, out: Path, *, as_of: int, cluster: str, **inputs: Any) -> None:
    """The job in this process (the shared ``spark`` session), at a fixed ``as_of`` and ``cluster``."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    config = load_config(
        None, {**inputs, "output": str(out), "as_of": str(as_of), "cluster": cluster, "progress": False}
    )
    run(config, spark=spark, progress=lambda _m: None)


class Judged:
    """A scenario, txnlog's run on it, and Kafka's reading of its ``__transaction_state`` dirs."""

    def __init__(self, run: ScenarioRun, root: Path, oracle: Any) -> None:
        self.name = run.name
        self.truth = run.truth
        self.out = run.out
        dirs = sorted(d for d in run.logs.rglob("__transaction_state-*") if d.is_dir())
        self.all_dirs = dirs
        self.dirs = [d for d in dirs if any(f.stat().st_size > 0 for f in d.glob("*.log"))]
        # replica copies with the same bytes give the same answers: each content is read once
        self.representative: dict[Path, Path] = {}
        seen: dict[tuple[str, str], Path] = {}
        for d in self.dirs:
            self.representative[d] = seen.setdefault((d.name, _content(d)), d)
        reps = sorted(set(self.representative.values()))
        segments = [s for d in reps for s in sorted(d.glob("*.log"), key=lambda p: int(p.stem))]
        dumped = parse_txn_log_dump(oracle.dump(*segments, options=("--transaction-log-decoder",)))
        self.records: dict[Path, list[dict[str, Any]]] = {
            d: [r for s in sorted(d.glob("*.log"), key=lambda p: int(p.stem)) for r in dumped.get(str(s), [])]
            for d in reps
        }
        self.loaded: dict[Path, list[dict[str, Any]]] = {d: [] for d in reps}
        for n, layer in enumerate(self._layers(reps)):
            owner = {tid: d for d in layer for tid in self._ids(d)}
            for row in oracle.txn_state_merged(layer, root / f"txn-state-{n}"):
                self.loaded[owner[row["transactionalId"]]].append(row)

    def _ids(self, d: Path) -> set[str]:
        return {r["transactional_id"] for r in self.records[d] if "transactional_id" in r}

    def _layers(self, reps: list[Path]) -> list[list[Path]]:
        """Groups of dirs no transactional.id spans, so that one ``txn-state`` replay answers for each."""
        layers: list[tuple[list[Path], set[str]]] = []
        for d in reps:
            ids = self._ids(d)
            for dirs, taken in layers:
                if not ids & taken:
                    dirs.append(d)
                    taken |= ids
                    break
            else:
                layers.append(([d], set(ids)))
        return [dirs for dirs, _ in layers]


@pytest.fixture(scope="module", params=SCENARIOS)
def judged(request, scenario_run, oracle, tmp_path_factory) -> Judged:
    return Judged(scenario_run(request.param), tmp_path_factory.mktemp(f"coord-{request.param}"), oracle)


def _history_row(r: dict[str, Any]) -> dict[str, Any]:
    """A ``coordinator_history`` row in the dump's terms (what ``formatRecordKeyAndValue`` prints)."""
    out: dict[str, Any] = {
        "offset": r["record_offset"],
        "timestamp": _ms(r["record_timestamp"]),
        "transactional_id": r["transactional_id"],
        "tombstone": bool(r["is_tombstone"]),
    }
    if not r["is_tombstone"]:
        out.update(
            producer_id=r["producer_id"],
            producer_epoch=r["producer_epoch"],
            state=r["state"],
            # TransactionLog.readTxnRecordValue: an Empty state loads no partitions; a null array is none
            partitions=sorted(r["partitions"] or []) if r["state"] != "Empty" else [],
            last_update_ms=_ms(r["last_update_timestamp"]),
            timeout_ms=r["timeout_ms"],
        )
    return out


def _kafka_record(r: dict[str, Any]) -> dict[str, Any]:
    out = dict(r, timestamp=_time(r["timestamp"]))
    if "last_update_ms" in out:
        out["last_update_ms"] = _time(out["last_update_ms"])
    return out


def test_history_is_every_record_kafka_reads(judged: Judged):
    history = rows(str(judged.out), "coordinator_history", cluster=CLUSTER)
    by_partition: dict[int, list[dict[str, Any]]] = {}
    for r in history:
        by_partition.setdefault(r["coordinator_partition"], []).append(r)
    problems: list[str] = []
    for d in judged.dirs:
        rep = judged.representative[d]
        want = [_kafka_record(r) for r in judged.records[rep]]
        got = [
            _history_row(r) for r in sorted(by_partition.get(_partition_of(d), []), key=lambda r: r["record_offset"])
        ]
        if want != got:
            pairs = [(w, g) for w, g in zip(want, got, strict=False) if w != g][:3]
            problems.append(f"{d}: Kafka {len(want)} records, txnlog {len(got)}; first differences: {pairs}")
    # nothing in the history that no copied dir holds
    present = {_partition_of(d) for d in judged.dirs}
    problems += [
        f"txnlog has records of __transaction_state-{p}, no dir holds any" for p in set(by_partition) - present
    ]
    assert judged.dirs, "no __transaction_state records: nothing judged"
    assert not problems, "\n".join(problems)


def _state_row(r: dict[str, Any]) -> dict[str, Any]:
    """A ``coordinator_state`` row in ``txn-state``'s terms (``TransactionMetadata`` as loaded)."""
    start = _ms(r["txn_start_timestamp"])
    return {
        "transactionalId": r["transactional_id"],
        "state": r["state"],
        "producerId": r["producer_id"],
        "producerEpoch": r["producer_epoch"],
        "previousProducerId": r["previous_producer_id"],
        "nextProducerId": r["next_producer_id"],
        "txnTimeoutMs": r["timeout_ms"],
        "topicPartitions": sorted(r["partitions"] or []),
        "txnStartTimestamp": start,
        "txnLastUpdateTimestamp": _ms(r["last_update_timestamp"]),
        "clientTransactionVersion": r["client_transaction_version"],
        "recordOffset": r["record_offset"],
        "partition": r["coordinator_partition"],
    }


def _kafka_state(row: dict[str, Any], partition: int) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "lastProducerEpoch"}  # always -1 on load
    out["topicPartitions"] = sorted(out["topicPartitions"])
    out["txnStartTimestamp"] = _time(out["txnStartTimestamp"])  # -1: none (null in txnlog)
    out["txnLastUpdateTimestamp"] = _time(out["txnLastUpdateTimestamp"])
    out["partition"] = partition
    return out


def test_state_is_what_the_coordinator_loads(judged: Judged):
    state = rows(str(judged.out), "coordinator_state", cluster=CLUSTER)
    want = _kafka_states(judged)
    assert want, "Kafka loaded no transactional.id: nothing judged"
    got = {r["transactional_id"]: _state_row(r) for r in state if not r["is_tombstoned"]}
    tombstoned = {r["transactional_id"] for r in state if r["is_tombstoned"]}
    problems = [
        f"{tid}: Kafka {want.get(tid)} txnlog {got.get(tid)}"
        for tid in sorted(set(want) | set(got))
        if want.get(tid) != got.get(tid)
    ]
    # a tombstoned id: Kafka's load removed it, and its newest record is a tombstone
    newest = {}
    for d in judged.records:
        for r in judged.records[d]:
            if "transactional_id" in r:
                newest[r["transactional_id"]] = r
    problems += [
        f"{tid}: txnlog says tombstoned, Kafka's newest record is not a tombstone"
        for tid in tombstoned
        if not newest.get(tid, {}).get("tombstone")
    ]
    assert not problems, "\n".join(problems)


def _kafka_states(judged: Judged) -> dict[str, dict[str, Any]]:
    return {
        row["transactionalId"]: _kafka_state(row, _partition_of(d))
        for d in sorted(set(judged.representative.values()))
        for row in judged.loaded[d]
    }


def test_ground_truth_coordinator_is_what_kafka_loads(judged: Judged):
    """The writer's ground truth (``ExpectedCoordinatorState``) against the same Kafka answers."""
    want = _kafka_states(judged)
    truth = judged.truth.coordinator
    got = {
        tid: {
            "transactionalId": tid,
            "state": c.state,
            "producerId": c.producer_id,
            "producerEpoch": c.producer_epoch,
            "previousProducerId": c.previous_producer_id,
            "nextProducerId": c.next_producer_id,
            "txnTimeoutMs": c.timeout_ms,
            "topicPartitions": sorted(c.partitions) if c.state != "Empty" else [],
            "txnStartTimestamp": _time(c.txn_start_timestamp),
            "txnLastUpdateTimestamp": _time(c.last_update_timestamp),
            "clientTransactionVersion": c.client_transaction_version,
            "partition": c.coordinator_partition,
        }
        for tid, c in truth.items()
        if not c.is_tombstoned
    }
    want = {tid: {k: v for k, v in row.items() if k != "recordOffset"} for tid, row in want.items()}
    problems = [
        f"{tid}: Kafka {want.get(tid)} ground truth {got.get(tid)}"
        for tid in sorted(set(want) | set(got))
        if want.get(tid) != got.get(tid)
    ]
    counts: dict[str, int] = {}
    for d in set(judged.representative.values()):
        for r in judged.records[d]:
            if "transactional_id" in r:
                counts[r["transactional_id"]] = counts.get(r["transactional_id"], 0) + 1
    problems += [
        f"{tid}: Kafka reads {counts.get(tid, 0)} records, the ground truth says {c.records}"
        for tid, c in truth.items()
        if counts.get(tid, 0) != c.records
    ]
    assert not problems, "\n".join(problems)


_BATCH = re.compile(
    r"^baseOffset: (-?\d+) lastOffset: (-?\d+) .* position: (\d+) .* size: (\d+) .* isvalid: (true|false)$"
)
#: a v2 batch's CRC field: after baseOffset (8), batchLength (4), partitionLeaderEpoch (4) and magic (1)
_CRC_AT = 17


def test_a_batch_failing_its_crc_in_the_coordinator_log(spark, oracle, tmp_path):
    """The one difference by design: a ``__transaction_state`` batch whose CRC fails (only the CRC field
    flipped, its records intact), the newest record of a transactional.id.

    Kafka: ``DumpLogSegments`` prints it (``isvalid: false``) and ``TransactionStateManager``'s load replays
    it like any other (``loadTransactionMetadata`` reads the log without ``ensureValid``), so a coordinator
    that already had the batch below its recovery point loads that record as the id's state; one whose
    unclean restart recovers that segment stops there instead (``LogSegment.recover`` validates each batch and
    truncates the log at the first invalid one) and loads the record before it.
    txnlog cannot tell which: it quarantines the batch (``crc_mismatch``, its file and position), leaves its
    records out of ``coordinator_history`` and ``coordinator_state`` (the state is the record before it, the
    truncating restart's, which Kafka's load of the segment cut at the batch confirms), and a finding whose
    owner lives in that partition is ``VERIFY_FIRST`` (README, "How txnlog decides" 5). Every other record
    equals Kafka's."""
    from txnlog.brokerlog.scenarios import write_scenario

    truth = write_scenario("coordinator_completed", tmp_path / "logs", seed=SEED)
    dirs = sorted(d for d in (tmp_path / "logs").rglob("__transaction_state-*") if d.is_dir())
    d = max(dirs, key=lambda p: sum(f.stat().st_size for f in p.glob("*.log")))
    (segment,) = d.glob("*.log")
    before = oracle.dump(segment, options=("--transaction-log-decoder",))
    batches = [m for m in map(_BATCH.match, before.splitlines()) if m]
    records = parse_txn_log_dump(before)[str(segment)]
    # the newest record of the id whose history is longest; one record per batch, as the coordinator writes
    ids = [r["transactional_id"] for r in records]
    victim_id = max(set(ids), key=ids.count)
    victim = max(r["offset"] for r in records if r["transactional_id"] == victim_id)
    (batch,) = [b for b in batches if int(b[1]) <= victim <= int(b[2])]
    assert batch[1] == batch[2], "the coordinator writes one record per batch"
    position, size = int(batch[3]), int(batch[4])
    data = bytearray(segment.read_bytes())
    data[position + _CRC_AT] ^= 0xFF
    segment.write_bytes(bytes(data))

    after = oracle.dump(segment, options=("--transaction-log-decoder",))
    assert [m[5] for m in map(_BATCH.match, after.splitlines()) if m].count("false") == 1
    assert parse_txn_log_dump(after)[str(segment)] == records, "Kafka still reads every record, the damaged one too"
    loaded = {r["transactionalId"]: r for r in oracle.txn_state(d)}
    assert loaded[victim_id]["recordOffset"] == victim, "Kafka's load takes the damaged record as the state"

    out = tmp_path / "out"
    run_txnlog(spark, out, as_of=truth.as_of_ms, cluster=CLUSTER, logs=[str(tmp_path / "logs")])
    history = sorted(
        (
            r
            for r in rows(str(out), "coordinator_history", cluster=CLUSTER)
            if r["coordinator_partition"] == _partition_of(d)
        ),
        key=lambda r: r["record_offset"],
    )
    assert [_history_row(r) for r in history] == [_kafka_record(r) for r in records if r["offset"] != victim]
    (q,) = [q for q in rows(str(out), "quarantine", cluster=CLUSTER) if str(segment) in (q["file"] or "")]
    assert (q["reason"], q["position"], q["length"]) == ("crc_mismatch", position, size)
    # txnlog's state is the record before the damaged one: Kafka's load as the truncating restart leaves it
    previous = max(r["offset"] for r in records if r["transactional_id"] == victim_id and r["offset"] < victim)
    (state,) = [r for r in rows(str(out), "coordinator_state", cluster=CLUSTER) if r["transactional_id"] == victim_id]
    assert state["record_offset"] == previous
    cut = tmp_path / "cut" / d.name
    cut.mkdir(parents=True)
    (cut / segment.name).write_bytes(bytes(data[:position]))  # LogSegment.recover truncates at the invalid batch
    restarted = {r["transactionalId"]: r for r in oracle.txn_state(cut)}
    assert _state_row(state) == _kafka_state(restarted[victim_id], _partition_of(d))
