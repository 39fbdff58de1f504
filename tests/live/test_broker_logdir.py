"""Offline = live, on a real broker's bytes: txnlog on the log dir of a Kafka broker that served real clients
gives the answers the broker gave, and what Kafka's own ``LogLoader`` loads from the same files.

A broker of this module's own (tests/live/broker.py, 16 KiB segments so transactions cross rolls) gets, from
confluent-kafka producers: committed (gzip) and aborted transactions on ``orders-0``; 24 committed lz4
transactions on ``orders-1`` over several segments; a producer SIGKILLed mid-transaction, left open on
``orders-1`` and ``orders-2``; and a hanging transaction no coordinator owns on ``orders-0``
(tests/live/orphan.py). The live answers are taken (DescribeProducers, ListOffsets read_committed,
find-hanging an hour ahead). Its log dir (``__transaction_state`` with one partition, as
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
  = DescribeProducers' = Kafka's loaded producer state

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
        killed = _kill_mid_transaction(b)
        orphan = init_producer_id(b)
        orphan_start = produce_transactional(b, orphan, TOPIC, 0, [b"o-1", b"o-2"])
        as_of = int(time.time() * 1000) + AHEAD_MS
        answers = {"live": _answers(b, as_of)}
        # the copy of the running broker, once its high watermarks are checkpointed (every second here)
        time.sleep(2)
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
    dirs = [logs / "broker-1" / f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    loaded = dict(enumerate(oracle.load_partitions(dirs, "--now", str(as_of))))
    assert not (work / "logs-running" / "broker-1" / ".kafka_cleanshutdown").exists()
    return {
        "out": {
            "clean": out,
            "running": work / "out-running",
            "crashed": work / "out-crashed",
            "unset": work / "out-unset",
        },
        "logs": logs,
        "as_of": as_of,
        "answers": answers,
        **answers["live"],
        "loaded": loaded,
        "killed": killed,
        "orphan": (orphan, orphan_start),
        "segments": {p: len(list(d.glob("*.log"))) for p, d in enumerate(dirs)},
    }


def _answers(bootstrap: str, as_of: int) -> dict[str, Any]:
    """find-hanging at ``as_of``, DescribeProducers and ListOffsets, asked of the broker now; right after a start
    the coordinator may still be loading (COORDINATOR_LOAD_IN_PROGRESS): asked again for up to 60 s."""
    tps = [(TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    while True:
        admin = live.admin_client(bootstrap)
        try:
            return {
                "found": live.find_hanging_live(admin, tps, bootstrap=bootstrap, now_ms=as_of),
                "producers": live.describe_producers(admin, TOPIC, list(range(PARTITIONS))),
                "offsets": {o["partition"]: o for o in live.partition_offsets(bootstrap, {}, tps)},
            }
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
        finally:
            admin.close()


def _copy_running(src: Path, dst: Path) -> None:
    """Copy a running broker's log dir: a file the broker replaces meanwhile (a checkpoint's ``.tmp``) is skipped."""

    def copy(a: str, b: str) -> None:
        try:
            shutil.copy2(a, b)
        except FileNotFoundError:
            pass

    shutil.copytree(src, dst, copy_function=copy)


def _rows(scenario: dict[str, Any], table: str, copy: str) -> list[dict[str, Any]]:
    from tests.e2e.truth import rows

    return [r for r in rows(str(scenario["out"][copy]), table, cluster=CLUSTER) if r["topic"] == TOPIC]


def test_the_scenario_is_what_was_written(scenario) -> None:
    """The live answers hold what the clients did (so the comparisons below compare something)."""
    assert scenario["segments"][1] > 2  # orders-1's transactions cross segment rolls
    orphan, start = scenario["orphan"]
    opened = sorted(
        (p["partition"], p["current_transaction_start_offset"])
        for p in scenario["producers"]
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


COPIES = ["clean", "running", "crashed"]


@pytest.mark.parametrize("restart", ["after clean restart", "after crash restart"])
def test_a_restarted_broker_serves_what_it_served(scenario, restart: str) -> None:
    """What the broker answers after a restart on its log dir (the clean one, then after a SIGKILL) is what it
    answered before: the copies' offline answers stand for both."""
    before, after = scenario["answers"]["live"], scenario["answers"][restart]

    def key(a: dict[str, Any]) -> tuple:
        return (
            sorted((f["partition"], f["start_offset"], f["verdict"], f["reason"]) for f in a["found"]),
            sorted(tuple(sorted(p.items())) for p in a["producers"]),
            a["offsets"],
        )

    assert key(after) == key(before)


@pytest.mark.parametrize("copy", COPIES)
def test_findings_offline_equal_live(scenario, copy: str) -> None:
    live_found = {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in scenario["found"]}
    offline = {
        (f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in _rows(scenario, "findings", copy)
    }
    assert offline == live_found


@pytest.mark.parametrize("copy", COPIES)
def test_partition_health_offline_equals_live_and_kafka(scenario, copy: str) -> None:
    """Kafka's load of the clean copy is the restarted broker's answer, the same as the live one here: the
    high watermark is the log end (one replica), so no transaction is cut off by it."""
    health = {r["partition"]: r for r in _rows(scenario, "partition_health", copy)}
    assert sorted(health) == list(range(PARTITIONS))
    for p in range(PARTITIONS):
        h, o, k = health[p], scenario["offsets"][p], scenario["loaded"][p]
        offline = (h["log_start_offset"], h["last_stable_offset"], h["log_end_offset"])
        assert offline == (o["log_start_offset"], o["last_stable_offset"], o["high_watermark"]), p
        assert offline == (k["logStartOffset"], k["lastStableOffset"], k["logEndOffset"]), p
        assert h["open_transactions"] == sum(x["currentTxnStartOffset"] >= 0 for x in k["producers"]) == 1


@pytest.mark.parametrize("copy", COPIES)
def test_producer_state_offline_equals_describe_producers_and_kafka(scenario, copy: str) -> None:
    for p in range(PARTITIONS):
        offline = sorted(
            _producer_key({**r, "ts": r["last_timestamp_ms"], "start": r["current_txn_start_offset"]})
            for r in _rows(scenario, "producer_state", copy)
            if r["partition"] == p
        )
        described = sorted(
            _producer_key({**r, "ts": r["last_timestamp"], "start": r["current_transaction_start_offset"]})
            for r in scenario["producers"]
            if r["partition"] == p
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
            for x in scenario["loaded"][p]["producers"]
        )
        assert offline == described == kafka, p


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
    unset = _rows(scenario, "findings", "unset")
    assert {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in unset} == live_found
    safety = {
        copy: {(r["partition"], r["start_offset"]): r["safety"] for r in _rows(scenario, "abort_recommendations", copy)}
        for copy in ("clean", "unset")
    }
    assert safety["unset"] == safety["clean"] and "SAFE" in safety["unset"].values(), safety
    (orphan,) = [f for f in unset if f["reason"] == "NO_TRANSACTIONAL_ID"]
    assert safety["unset"][(orphan["partition"], orphan["start_offset"])] == "SAFE"
    assert "KRaft metadata log of broker-1" in orphan["evidence"], orphan["evidence"]
