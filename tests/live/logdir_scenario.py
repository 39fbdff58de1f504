"""The broker of the tests that read a real broker's own files: one broker, started fresh and used in phases by
tests/live/test_no_coordinator.py, tests/live/test_cluster_metadata.py and tests/live/test_broker_logdir.py
(a session fixture, :func:`broker_logdir`: one broker start instead of three, the live phase's time).

1. Fresh (no ``__transaction_state`` yet): a hanging transaction no coordinator owns on ``fresh-0``, the live
   run of the job and find-hanging on it, and a copy of the running log dir (no ``__transaction_state-<n>/``).
2. Metadata: ``md-orders`` with 3 partitions raised to 5, ``md-gone`` with 2 then deleted; the topics the
   broker's Metadata answer lists.
3. The log-dir scenario of tests/live/test_broker_logdir.py (its docstring), ending in a clean stop, a restart,
   a SIGKILL and a restart; the clean copy's ``__cluster_metadata-0`` is phase 2's metadata log (a clean stop
   writes PartitionChangeRecords: every partition loses its leader).
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
from txnlog.live import hanging as live_hanging

#: the broker's settings: 16 KiB segments (transactions cross rolls), high watermarks checkpointed every second
#: (the session broker's setting: the running copy), a KRaft metadata snapshot every 2 KiB of records (QuorumController's SnapshotGenerator: the
#: copy's metadata log is a snapshot and the log after it), and topics created on Metadata requests that allow it
#: (so that the no-coordinator phase shows asking about ``__transaction_state`` does not create it)
CONFIGS = [
    *SESSION_CONFIGS,
    "log.segment.bytes=16384",
    "metadata.log.max.record.bytes.between.snapshots=2048",
    "auto.create.topics.enable=true",
]
FRESH, FRESH_CLUSTER = "fresh", "no-coordinator"
MD_ORDERS, MD_GONE = "md-orders", "md-gone"
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


@pytest.fixture(scope="session")
def broker_logdir(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("broker-logdir")
    broker = start_or_skip(KafkaBroker(work / "broker", configs=CONFIGS))
    try:
        b = broker.bootstrap
        fresh = _fresh(spark, broker, work)
        _metadata_changes(b)
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
        served = _served_topics(b)
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
        listed = len(answers["live"]["listed"])
        answers["after clean restart"] = _answers(broker.start().bootstrap, as_of, listed)
        broker.kill()
        assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
        shutil.copytree(broker.log_dir, work / "logs-crashed" / "broker-1")
        answers["after crash restart"] = _answers(broker.start().bootstrap, as_of, listed)
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
        "fresh": fresh,
        "metadata": {"served": served, "log_dir": logs / "broker-1"},
    }


def _fresh(spark: Any, broker: KafkaBroker, work: Path) -> dict[str, Any]:
    """Phase 1, before any transactional.id has been used: a hanging transaction on ``fresh-0`` no coordinator
    owns; find-hanging and the job's live run on the cluster with no ``__transaction_state``; a copy of the running
    log dir and the job's offline run on it (tests/live/test_no_coordinator.py)."""
    from tests.oracle.test_coordinator import run_txnlog
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs

    b = broker.bootstrap
    _create_topic(b, FRESH, 2)
    start = produce_transactional(b, init_producer_id(b), FRESH, 0, [b"o-1", b"o-2"])
    before = live.check_cluster(b)
    as_of = int(time.time() * 1000) + AHEAD_MS
    admin = live.admin_client(b)
    try:
        found = live_hanging.find_hanging_live(admin, [(FRESH, 0), (FRESH, 1)], bootstrap=b, now_ms=as_of)
    finally:
        admin.close()
    (lso,) = [o["last_stable_offset"] for o in live.partition_offsets(b, {}, [(FRESH, 0)])]
    note = plan_inputs(load_config(None, {"bootstrap_servers": b, "progress": False})).note
    out = {"live": work / "fresh-live", "offline": work / "fresh-offline"}
    run_txnlog(spark, out["live"], as_of=as_of, cluster=FRESH_CLUSTER, bootstrap_servers=b, topics=[FRESH])
    after = live.check_cluster(b)
    logs = work / "logs-fresh"
    _copy_running(broker.log_dir, logs / "broker-1")
    run_txnlog(spark, out["offline"], as_of=as_of, cluster=FRESH_CLUSTER, logs=[str(logs)])
    return {"start": start, "lso": lso, "found": found, "note": note, "before": before, "after": after,
            "out": out, "logs": logs}  # fmt: skip


def _metadata_changes(bootstrap: str) -> None:
    """Phase 2: ``md-orders`` with 3 partitions raised to 5, ``md-gone`` with 2 then deleted, until the broker's
    Metadata answer shows both changes."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    _create_topic(bootstrap, MD_ORDERS, 3)
    _create_topic(bootstrap, MD_GONE, 2)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for f in admin.delete_topics([MD_GONE]).values():
        f.result(30)
    for f in admin.create_partitions([NewPartitions(MD_ORDERS, 5)]).values():
        f.result(30)
    served: dict[str, int] = {}
    for _ in range(100):  # until Metadata shows the deletion and the new partitions
        served = {t: len(m.partitions) for t, m in admin.list_topics(timeout=10).topics.items()}
        if MD_GONE not in served and served.get(MD_ORDERS) == 5:
            return
        time.sleep(0.1)
    raise AssertionError(f"Metadata did not show {MD_GONE} deleted and {MD_ORDERS} with 5 partitions: {served}")


def _served_topics(bootstrap: str) -> dict[str, int]:
    """Each topic's partition count as the broker's Metadata answer gives it now."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    return {t: len(m.partitions) for t, m in admin.list_topics(timeout=10).topics.items()}


def _answers(bootstrap: str, as_of: int, listed_before: int = 0) -> dict[str, Any]:
    """find-hanging at ``as_of``, DescribeProducers and ListOffsets of every compared partition, ListTransactions
    and DescribeTransactions of every id, asked of the broker now. Right after a start the coordinator may still
    be loading ``__transaction_state`` (COORDINATOR_LOAD_IN_PROGRESS, or a ListTransactions answer without the ids
    it had listed before the restart, ``listed_before`` of them, on a slow machine): asked again for up to 60 s,
    then the answer stands as it is."""
    data = [(TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    while True:
        admin = live.admin_client(bootstrap)
        try:
            listed = live.list_transactions(admin)
            if len(listed) < listed_before and time.monotonic() < deadline:
                time.sleep(1)  # the coordinator's state not loaded yet
                continue
            return {
                "found": live_hanging.find_hanging_live(admin, data, bootstrap=bootstrap, now_ms=as_of),
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
