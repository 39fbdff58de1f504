"""Offline = live, on a real broker's bytes: txnlog on the log dir of a Kafka broker that served real clients
gives the answers the broker gave, and what Kafka's own ``LogLoader`` loads from the same files.

A broker of this module's own (tests/live/broker.py, 16 KiB segments so transactions cross rolls) gets, from
confluent-kafka producers: committed (gzip) and aborted (zstd) transactions on ``orders-0``; 24 committed lz4
transactions on ``orders-1`` over several segments; a producer fenced by a new instance of its transactional.id
on ``orders-2`` (uncompressed: the coordinator aborts the old one's transaction, the new one commits); a
transactional offset commit (snappy, ``send_offsets_to_transaction``: a transactional batch and its marker in
``__consumer_offsets-0``); a producer SIGKILLed mid-transaction (snappy), left open on ``orders-1`` and
``orders-2``; and a hanging transaction no coordinator owns on ``orders-0`` (tests/live/orphan.py). Once the
coordinator has written every ended transaction's markers, the live answers are taken (DescribeProducers and
ListOffsets read_committed of every partition, ``__consumer_offsets-0`` included; ListTransactions and
DescribeTransactions of every transactional.id; find-hanging an hour ahead). Its log dir (``__transaction_state`` with one partition, as
``transaction.state.log.num.partitions=1`` makes it) is copied twice, while it runs (once the high watermarks are
checkpointed: no ``.kafka_cleanshutdown``) and after a clean stop; the broker is restarted on it, answers
again, is SIGKILLed (a third copy, of the crashed log dir), restarted and answers again. Each copy is read
offline by its own run of the job, with ``logs`` and ``transaction_state_partitions: 1`` - the cluster's setting;
the clean copy once more with no setting, the count then read from the copy's own ``__cluster_metadata-0``
(txnlog.broker.cluster_image). No client writes
between the live answers and the copies, the restarted broker answers what it answered before, and for every
copy:

* findings (verdict, reason, start offset) = find-hanging's on the live broker;
* partition_health LSO / log end = ListOffsets' LSO / high watermark = ``oracle load-partition``'s;
* producer_state (id, epoch, last sequence and timestamp, coordinator epoch, open transaction's first offset)
  = DescribeProducers' = Kafka's loaded producer state;
* coordinator_state (id, producer id and epoch, state, timeout, partitions, start time) = ListTransactions' and
  DescribeTransactions' = what Kafka's ``TransactionStateManager`` loads from ``__transaction_state-0``
  (``oracle txn-state``)

(Kafka's load: ``load-partition`` of the clean copy, the broker as restarted on it.)
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.live.broker import SESSION_CONFIGS, KafkaBroker, start_or_skip
from tests.live.capture import _create_topic
from tests.live.killed import run_and_kill
from tests.live.orphan import init_producer_id, produce_transactional
from tests.oracle import kafka as oracle
from txnlog.live import admin as live

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

TOPIC = "orders"
PARTITIONS = 3
CLUSTER = "broker-logdir"
OFFSETS = "__consumer_offsets"
GROUP = "orders-group"
#: the partitions whose answers are compared: the data partitions and the group's offsets partition (one
#: partition of ``__consumer_offsets``, the kafka-broker default)
TPS = [(TOPIC, p) for p in range(PARTITIONS)] + [(OFFSETS, 0)]
#: find-hanging's and the job's as_of, ahead of now: past the killed producer's 600 s timeout and
#: transaction.max.timeout.ms (900 s), so every open transaction is a candidate, and short of
#: producer.id.expiration.ms (a day), so no producer has expired (DescribeProducers lists them all)
AHEAD_MS = 3_600_000

_KILLED = r"""
import json, sys, time
import confluent_kafka
bootstrap, topic = sys.argv[1], sys.argv[2]
p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "orders-killed",
                              "transaction.timeout.ms": 600000, "compression.type": "snappy", "linger.ms": 5,
                              "log_level": 3})
p.init_transactions(30)
p.begin_transaction()
delivered = []
def cb(err, msg):
    delivered.append([msg.partition(), msg.offset(), None if err is None else str(err)])
for part in (1, 2):
    for i in range(3):
        p.produce(topic, value=b"killed-%d" % i, partition=part, on_delivery=cb)
assert p.flush(30) == 0
print(json.dumps(delivered), flush=True)
time.sleep(900)
"""


def _transactions(bootstrap: str, tid: str, partition: int, sizes: list[int], commit: bool, codec: str) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "compression.type": codec, "log_level": 3}
    )
    p.init_transactions(30)
    for t, n in enumerate(sizes):
        p.begin_transaction()
        for i in range(n):
            # incompressible values, so that orders-1's transactions fill several 16 KiB segments
            p.produce(TOPIC, value=f"{tid}-{t}-{i}|".encode() + os.urandom(300), partition=partition)
        assert p.flush(30) == 0
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    p.flush(10)


def _fenced_by_a_new_instance(bootstrap: str) -> None:
    """orders-fenced: the first instance opens a transaction on orders-2; a second instance's InitProducerId
    bumps the epoch and the coordinator aborts the first one's transaction (TransactionCoordinator
    .handleInitProducerId); the first one's commit is then fenced, and the second commits one of its own."""
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "transactional.id": "orders-fenced", "compression.type": "none"}
    old = confluent_kafka.Producer({**conf, "log_level": 0})
    old.init_transactions(30)
    old.begin_transaction()
    for i in range(3):
        old.produce(TOPIC, value=b"fenced-old-%d" % i, partition=2)
    assert old.flush(30) == 0
    new = confluent_kafka.Producer({**conf, "log_level": 3})
    new.init_transactions(30)
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value  # PRODUCER_FENCED: the old instance is done
    new.begin_transaction()
    for i in range(2):
        new.produce(TOPIC, value=b"fenced-new-%d" % i, partition=2)
    assert new.flush(30) == 0
    new.commit_transaction(30)


def _offsets_in_a_transaction(bootstrap: str) -> None:
    """orders-offsets: a consume-transform-produce step, its output and its group's offset committed in one
    transaction (AddOffsetsToTxn + TxnOffsetCommit: a transactional batch in ``__consumer_offsets-0``)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "log_level": 3})
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "orders-offsets", "compression.type": "snappy"}
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, value=b"transformed", partition=0)
    assert p.flush(30) == 0
    offsets = [confluent_kafka.TopicPartition(TOPIC, 0, 3)]
    p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    consumer.close()


def _await_markers(bootstrap: str) -> None:
    """Until no transaction is in PrepareCommit / PrepareAbort: a commit or abort returns once the coordinator
    has logged the prepare record, and its markers follow (TransactionMarkerChannelManager)."""
    deadline = time.monotonic() + 30
    admin = live.admin_client(bootstrap)
    try:
        while True:
            pending = [t for t in live.list_transactions(admin).values() if t["state"].startswith("Prepare")]
            if not pending:
                return
            assert time.monotonic() < deadline, f"markers not written within 30 s: {pending}"
            time.sleep(0.1)
    finally:
        admin.close()


def _kill_mid_transaction(bootstrap: str) -> dict[int, list[int]]:
    return run_and_kill(_KILLED, bootstrap, TOPIC)


def _producer_key(p: dict[str, Any]) -> tuple:
    return (p["producer_id"], p["producer_epoch"], p["last_sequence"], p["ts"], p["coordinator_epoch"], p["start"])


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("broker-logdir")
    configs = [*SESSION_CONFIGS, "log.segment.bytes=16384", "replica.high.watermark.checkpoint.interval.ms=1000"]
    broker = start_or_skip(KafkaBroker(work / "broker", configs=configs))
    try:
        b = broker.bootstrap
        _create_topic(b, TOPIC, PARTITIONS)
        _transactions(b, "orders-commit", 0, [3, 4], commit=True, codec="gzip")
        _transactions(b, "orders-abort", 0, [2], commit=False, codec="zstd")
        _transactions(b, "orders-many", 1, [5] * 24, commit=True, codec="lz4")
        _fenced_by_a_new_instance(b)
        _offsets_in_a_transaction(b)
        killed = _kill_mid_transaction(b)
        orphan = init_producer_id(b)
        orphan_start = produce_transactional(b, orphan, TOPIC, 0, [b"o-1", b"o-2"])
        _await_markers(b)
        as_of = int(time.time() * 1000) + AHEAD_MS
        answers = {"live": _answers(b, as_of)}
        # the copy of the running broker, once its high watermarks are checkpointed (every second here)
        _await_checkpoint(broker.log_dir, answers["live"]["offsets"])
        _copy_running(broker.log_dir, work / "logs-running" / "broker-1")
    finally:
        assert broker.stop() == 0, broker.report()  # a clean shutdown
    assert (broker.log_dir / ".kafka_cleanshutdown").exists()
    logs = work / "logs"
    shutil.copytree(broker.log_dir, logs / "broker-1")
    # a restart on the clean log dir, then a SIGKILL (a crash: no clean-shutdown marker) and a restart again
    try:
        answers["after clean restart"] = _answers(broker.start().bootstrap, as_of)
        broker.kill()
        assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
        shutil.copytree(broker.log_dir, work / "logs-crashed" / "broker-1")
        answers["after crash restart"] = _answers(broker.start().bootstrap, as_of)
    finally:
        assert broker.stop() == 0, broker.report()
    out = work / "out"
    from tests.oracle.test_coordinator import run_txnlog

    run_txnlog(spark, out, as_of=as_of, cluster=CLUSTER, logs=[str(logs)], transaction_state_partitions=1)
    # the same copy with no setting: the count comes from the copy's own KRaft metadata log
    run_txnlog(spark, work / "out-unset", as_of=as_of, cluster=CLUSTER, logs=[str(logs)])
    for copy in ("running", "crashed"):
        logs_copy = [str(work / f"logs-{copy}")]
        run_txnlog(
            spark, work / f"out-{copy}", as_of=as_of, cluster=CLUSTER, logs=logs_copy, transaction_state_partitions=1
        )
    dirs = [logs / "broker-1" / f"{t}-{p}" for t, p in TPS]
    loaded = dict(zip(TPS, oracle.load_partitions(dirs, "--now", str(as_of)), strict=True))
    coordinator = oracle.txn_state(logs / "broker-1" / "__transaction_state-0")
    assert not (work / "logs-running" / "broker-1" / ".kafka_cleanshutdown").exists()
    return {
        "out": {
            "clean": out,
            "running": work / "out-running",
            "crashed": work / "out-crashed",
            "unset": work / "out-unset",
        },
        "logs": logs,
        "logs_running": work / "logs-running",
        "as_of": as_of,
        "answers": answers,
        **answers["live"],
        "loaded": loaded,
        "coordinator": coordinator,
        "killed": killed,
        "orphan": (orphan, orphan_start),
        "segments": {tp: len(list(d.glob("*.log"))) for tp, d in zip(TPS, dirs, strict=True)},
    }


def _answers(bootstrap: str, as_of: int) -> dict[str, Any]:
    """find-hanging at ``as_of``, DescribeProducers and ListOffsets of every compared partition, ListTransactions
    and DescribeTransactions of every id, asked of the broker now; right after a start the coordinator may still
    be loading (COORDINATOR_LOAD_IN_PROGRESS): asked again for up to 60 s."""
    data = [(TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    while True:
        admin = live.admin_client(bootstrap)
        try:
            listed = live.list_transactions(admin)
            return {
                "found": live.find_hanging_live(admin, data, bootstrap=bootstrap, now_ms=as_of),
                "producers": {tp: live.describe_producers(admin, tp[0], [tp[1]]) for tp in TPS},
                "offsets": {(o["topic"], o["partition"]): o for o in live.partition_offsets(bootstrap, {}, TPS)},
                "listed": listed,
                "described": live.describe_transactions(admin, {t["transactional_id"] for t in listed.values()}),
            }
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
        finally:
            admin.close()


def _await_checkpoint(log_dir: Path, offsets: dict[tuple[str, int], dict[str, Any]]) -> None:
    """Until ``replication-offset-checkpoint`` (version, count, then ``topic partition offset`` lines:
    OffsetCheckpointFile) holds every compared partition's high watermark as ListOffsets gave it."""
    want = {tp: o["high_watermark"] for tp, o in offsets.items()}
    deadline = time.monotonic() + 30
    while True:
        try:
            lines = (log_dir / "replication-offset-checkpoint").read_text().splitlines()[2:]
        except OSError:
            lines = []
        have = {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines if line.strip())}
        if all(have.get(tp) == hw for tp, hw in want.items()):
            return
        assert time.monotonic() < deadline, f"high watermarks not checkpointed within 30 s: {have} != {want}"
        time.sleep(0.1)


def _copy_running(src: Path, dst: Path) -> None:
    """Copy a running broker's log dir: a file the broker replaces meanwhile (a checkpoint's ``.tmp``) is skipped."""

    def copy(a: str, b: str) -> None:
        try:
            shutil.copy2(a, b)
        except FileNotFoundError:
            pass

    shutil.copytree(src, dst, copy_function=copy)


def _rows(scenario: dict[str, Any], table: str, copy: str) -> list[dict[str, Any]]:
    """``table``'s rows of the run on ``copy``."""
    from tests.e2e.truth import rows

    return rows(str(scenario["out"][copy]), table, cluster=CLUSTER)


def _tp(r: dict[str, Any]) -> tuple[str, int]:
    return (r["topic"], r["partition"])


def test_the_scenario_is_what_was_written(scenario) -> None:
    """The live answers hold what the clients did (so the comparisons below compare something)."""
    assert scenario["segments"][(TOPIC, 1)] > 2  # orders-1's transactions cross segment rolls
    orphan, start = scenario["orphan"]
    opened = sorted(
        (p["partition"], p["current_transaction_start_offset"])
        for rows in scenario["producers"].values()
        for p in rows
        if p["current_transaction_start_offset"] is not None
    )
    killed = scenario["killed"]
    assert opened == sorted([(0, start), (1, min(killed[1])), (2, min(killed[2]))])
    found = {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in scenario["found"]}
    assert found == {
        (0, start): ("HANGING", "NO_TRANSACTIONAL_ID"),
        (1, min(killed[1])): ("LATE", "COORDINATOR_TIMEOUT_OVERDUE"),
        (2, min(killed[2])): ("LATE", "COORDINATOR_TIMEOUT_OVERDUE"),
    }
    described = scenario["described"]
    assert described["orders-fenced"]["state"] == "CompleteCommit"
    # the fence bumps the epoch once for the abort (TransactionMetadata.prepareFenceProducerEpoch: the markers carry
    # epoch 1), and the second instance's retried InitProducerId once more
    assert described["orders-fenced"]["producer_epoch"] == 2
    assert described["orders-offsets"]["state"] == "CompleteCommit"
    assert described["orders-killed"]["state"] == "Ongoing"
    # the offset commit is a transactional batch of orders-offsets' producer in the group's partition
    (offsets_writer,) = scenario["producers"][(OFFSETS, 0)]
    assert offsets_writer["producer_id"] == described["orders-offsets"]["producer_id"]


COPIES = ["clean", "running", "crashed"]


def _comparable(a: dict[str, Any]) -> tuple:
    return (
        sorted((f["partition"], f["start_offset"], f["verdict"], f["reason"]) for f in a["found"]),
        {tp: sorted(tuple(sorted(p.items())) for p in rows) for tp, rows in a["producers"].items()},
        a["offsets"],
        {pid: {k: v for k, v in t.items() if k != "coordinator_id"} for pid, t in a["listed"].items()},
        {tid: {k: v for k, v in d.items() if k != "coordinator_id"} for tid, d in a["described"].items() if d},
    )


@pytest.mark.parametrize("restart", ["after clean restart", "after crash restart"])
def test_a_restarted_broker_serves_what_it_served(scenario, restart: str) -> None:
    """What the broker answers after a restart on its log dir (the clean one, then after a SIGKILL) is what it
    answered before: the copies' offline answers stand for both."""
    assert _comparable(scenario["answers"][restart]) == _comparable(scenario["answers"]["live"])


@pytest.mark.parametrize("copy", COPIES)
def test_findings_offline_equal_live(scenario, copy: str) -> None:
    live_found = {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in scenario["found"]}
    offline = {
        (f["partition"], f["start_offset"]): (f["verdict"], f["reason"])
        for f in _rows(scenario, "findings", copy)
        if f["topic"] == TOPIC
    }
    assert offline == live_found
    assert not [f for f in _rows(scenario, "findings", copy) if f["topic"] == OFFSETS]


@pytest.mark.parametrize("copy", COPIES)
def test_partition_health_offline_equals_live_and_kafka(scenario, copy: str) -> None:
    """Kafka's load of the clean copy is the restarted broker's answer, the same as the live one here: the
    high watermark is the log end (one replica), so no transaction is cut off by it."""
    health = {_tp(r): r for r in _rows(scenario, "partition_health", copy)}
    assert set(TPS) <= set(health)
    for tp in TPS:
        h, o, k = health[tp], scenario["offsets"][tp], scenario["loaded"][tp]
        offline = (h["log_start_offset"], h["last_stable_offset"], h["log_end_offset"])
        assert offline == (o["log_start_offset"], o["last_stable_offset"], o["high_watermark"]), tp
        assert offline == (k["logStartOffset"], k["lastStableOffset"], k["logEndOffset"]), tp
        assert h["open_transactions"] == sum(x["currentTxnStartOffset"] >= 0 for x in k["producers"]), tp


@pytest.mark.parametrize("copy", COPIES)
def test_producer_state_offline_equals_describe_producers_and_kafka(scenario, copy: str) -> None:
    for tp in TPS:
        offline = sorted(
            _producer_key({**r, "ts": r["last_timestamp_ms"], "start": r["current_txn_start_offset"]})
            for r in _rows(scenario, "producer_state", copy)
            if _tp(r) == tp
        )
        described = sorted(
            _producer_key({**r, "ts": r["last_timestamp"], "start": r["current_transaction_start_offset"]})
            for r in scenario["producers"][tp]
        )
        kafka = sorted(
            (
                x["producerId"],
                x["producerEpoch"],
                x["lastSequence"],
                x["lastTimestamp"],
                x["coordinatorEpoch"],
                None if x["currentTxnStartOffset"] < 0 else x["currentTxnStartOffset"],
            )
            for x in scenario["loaded"][tp]["producers"]
        )
        assert offline == described == kafka, tp


def _ms(t: Any) -> int | None:
    return None if t is None else int(t.timestamp() * 1000)


@pytest.mark.parametrize("copy", COPIES)
def test_coordinator_state_offline_equals_list_describe_and_kafka(scenario, copy: str) -> None:
    """Every transactional.id: txnlog's coordinator_state = ListTransactions + DescribeTransactions = Kafka's
    load of ``__transaction_state-0`` (TransactionStateManager.loadTransactionMetadata)."""
    state = {r["transactional_id"]: r for r in _rows(scenario, "coordinator_state", copy) if not r["is_tombstoned"]}
    offline = {
        tid: (
            r["producer_id"],
            r["producer_epoch"],
            r["state"],
            r["timeout_ms"],
            sorted(r["partitions"] or []),
            _ms(r["txn_start_timestamp"]),
        )
        for tid, r in state.items()
    }
    listed = {t["transactional_id"]: (pid, t["state"]) for pid, t in scenario["listed"].items()}
    assert {tid: (o[0], o[2]) for tid, o in offline.items()} == listed
    described = {
        tid: (
            d["producer_id"],
            d["producer_epoch"],
            d["state"],
            d["timeout_ms"],
            d["partitions"],
            None if d["txn_start_timestamp"] < 0 else d["txn_start_timestamp"],
        )
        for tid, d in scenario["described"].items()
    }
    kafka = {
        k["transactionalId"]: (
            k["producerId"],
            k["producerEpoch"],
            k["state"],
            k["txnTimeoutMs"],
            sorted(k["topicPartitions"]),
            None if k["txnStartTimestamp"] < 0 else k["txnStartTimestamp"],
        )
        for k in scenario["coordinator"]
    }
    assert offline == described == kafka


def test_the_coordinator_partition_count_comes_from_the_copy_itself(scenario) -> None:
    """With no ``transaction_state_partitions`` given, the copy's KRaft metadata log says the cluster has one
    ``__transaction_state`` partition (not the default 50): the input reads "1/1", and the findings - the
    unowned producer's HANGING abort SAFE, not VERIFY_FIRST - are the live ones, the evidence saying what
    decided."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs

    inputs = plan_inputs(load_config(None, {"logs": [str(scenario["logs"])], "progress": False}))
    assert "of 1/1 partitions" in inputs.note, inputs.note
    assert "KRaft metadata log of broker-1" in inputs.note, inputs.note
    live_found = {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in scenario["found"]}
    unset = [f for f in _rows(scenario, "findings", "unset") if f["topic"] == TOPIC]
    assert {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in unset} == live_found
    safety = {
        copy: {
            (r["partition"], r["start_offset"]): r["safety"]
            for r in _rows(scenario, "abort_recommendations", copy)
            if r["topic"] == TOPIC
        }
        for copy in ("clean", "unset")
    }
    assert safety["unset"] == safety["clean"] and "SAFE" in safety["unset"].values(), safety
    (orphan,) = [f for f in unset if f["reason"] == "NO_TRANSACTIONAL_ID"]
    assert safety["unset"][(orphan["partition"], orphan["start_offset"])] == "SAFE"
    assert "KRaft metadata log of broker-1" in orphan["evidence"], orphan["evidence"]


def test_the_copys_metadata_says_which_replica_led(scenario) -> None:
    """A single node's log dir: ``meta.properties`` names node 1; the copy of the running broker's metadata has it
    leading every partition with itself the ISR, the clean copy has no leader (a controlled shutdown moves the
    leadership off the stopping broker, and there is no other: ``-1``), the ISR still the broker."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs

    for copy, leader in (("logs_running", 1), ("logs", -1)):
        inputs = plan_inputs(load_config(None, {"logs": [str(scenario[copy])], "progress": False}))
        assert inputs.inventory.node_ids == (("broker-1", 1),)
        roles, _deleted = inputs.metadata_notes() or (None, None)
        assert roles is not None
        got = {(r["topic"], r["partition"]): r for r in roles.to_pylist()}
        for tp in TPS:
            r = got[tp]
            expected = (leader, "broker-1" if leader == 1 else None, ["broker-1"])
            assert (r["leader"], r["leader_replica"], r["in_sync_replicas"]) == expected, (copy, tp)
