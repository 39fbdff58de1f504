"""Who is blocked, live and offline alike, on the session broker: one rule (txnlog.rules.blocked), two inputs.

On a topic of its own: a committed transaction on partition 0, then a read_committed consumer of a classic group
(``GROUP``) that reads everything it can and commits its position, the last stable offset; then a transactional
producer that writes to partition 0, commits group ``PENDING_GROUP``'s offset of partition 1 in the same transaction
(TxnOffsetCommit, ``PENDING_GROUP`` having committed a plain offset of partition 1 before) and is SIGKILLed with a 1 s transaction timeout, so that its transaction
stays Ongoing past it (the session broker checks for timed-out transactions once an hour): LATE,
COORDINATOR_TIMEOUT_OVERDUE, a fence is its remedy.

* The live run (``--bootstrap-servers``, this topic): ``GROUP`` is BLOCKED at the LSO, with its member named
  (DescribeConsumerGroups) and ``source`` live, and ``PENDING_GROUP`` is UNSTABLE_OFFSET_COMMIT (requireStable);
* the broker's log dir copied while it runs, and the job on it: the same group, partition and committed offset
  BLOCKED from the copy's ``__consumer_offsets`` (``source`` segments), the pending offset held by the killed
  producer, and that producer's transaction in ``__consumer_offsets`` saying compaction there has stopped;
* the finding's fence run, a second live run: nothing blocked on the topic.

The session broker holds other tests' open transactions and groups: every assertion is about this topic's rows.
"""

from __future__ import annotations

import io
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from tests.live.capture import _create_topic
from tests.live.killed import run_and_kill
from tests.live.logdir_scenario import _await_checkpoint, _copy_running
from txnlog.live import admin as live
from txnlog.ops.cli import main as txnlog_main

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

TOPIC = "blocked-live"
GROUP = "blocked-live-readers"
PENDING_GROUP = "blocked-live-etl"
KILLED_ID = "blocked-live-killed"
#: the job's as_of, ahead of now: past transaction.max.timeout.ms (900 s), short of producer.id.expiration.ms
AHEAD_MS = 3_600_000

_KILLED = r"""
import json, sys, time
import confluent_kafka
bootstrap, topic, tid, group = sys.argv[1:5]
p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                              "transaction.timeout.ms": 1000, "linger.ms": 5, "log_level": 3})
p.init_transactions(30)
p.begin_transaction()
delivered = []
def cb(err, msg):
    delivered.append([msg.partition(), msg.offset(), None if err is None else str(err)])
for i in range(3):
    p.produce(topic, value=b"stuck-%d" % i, partition=0, on_delivery=cb)
assert p.flush(30) == 0
c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
p.send_offsets_to_transaction([confluent_kafka.TopicPartition(topic, 1, 2)], c.consumer_group_metadata(), 30)
print(json.dumps(delivered), flush=True)
time.sleep(600)
"""


def _committed_transaction(bootstrap: str) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "blocked-live-done", "log_level": 3}
    )
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, value=b"done-%d" % i, partition=0)
    p.commit_transaction(30)


def _reader(bootstrap: str) -> Any:
    """GROUP's member: subscribed, read_committed, reads what it can and commits its position."""
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": "read_committed",
         "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": "blocked-reader", "log_level": 3}
    )  # fmt: skip
    c.subscribe([TOPIC])
    got, deadline = 0, time.monotonic() + 60
    while got < 3:
        assert time.monotonic() < deadline, "the reader got no records within 60 s"
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    return c


def _wait_for_lso(bootstrap: str, consumer: Any, lso: int) -> int:
    """Polls ``consumer`` until its position reaches ``lso`` (past the COMMIT marker) and commits it."""
    import confluent_kafka

    deadline = time.monotonic() + 60
    while True:
        consumer.poll(0.2)
        (pos,) = consumer.position([confluent_kafka.TopicPartition(TOPIC, 0)])
        if pos.offset >= lso:
            consumer.commit(asynchronous=False)
            return int(pos.offset)
        assert time.monotonic() < deadline, f"position {pos.offset} never reached the LSO {lso}"


def _plain_commit(bootstrap: str, group: str, offset: int) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 1, offset)], asynchronous=False)
    c.close()


def _job(spark: Any, out: Path, as_of: int, **inputs: Any) -> dict[str, list[dict[str, Any]]]:
    from tests.e2e.truth import rows
    from tests.oracle.test_coordinator import run_txnlog

    run_txnlog(spark, out, as_of=as_of, cluster="blocked", **inputs)
    return {t: rows(str(out), t) for t in ("blocked_consumers", "findings", "partition_health", "quarantine")}


def _ours(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["group"], r["topic"], r["partition"]): r for r in rows if r["group"] in (GROUP, PENDING_GROUP)}


@pytest.fixture(scope="module")
def stalled(kafka_broker, spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    b, work = kafka_broker.bootstrap, tmp_path_factory.mktemp("blocked-live")
    _create_topic(b, TOPIC, 2)
    _committed_transaction(b)
    (done,) = live.partition_offsets(b, {}, [(TOPIC, 0)])
    reader = _reader(b)
    position = _wait_for_lso(b, reader, done["last_stable_offset"])
    _plain_commit(b, PENDING_GROUP, 1)
    killed = run_and_kill(_KILLED, b, TOPIC, KILLED_ID, PENDING_GROUP)
    time.sleep(1.5)  # past the killed producer's 1 s transaction timeout: the fence's precondition
    (held,) = live.partition_offsets(b, {}, [(TOPIC, 0)])
    as_of = int(time.time() * 1000) + AHEAD_MS
    try:
        runs = {"live": _job(spark, work / "live", as_of, bootstrap_servers=b, topics=[TOPIC])}
    finally:
        reader.close()
    offsets = {(t, p): o for t, p, o in _log_dir_offsets(b)}
    _await_checkpoint(kafka_broker.log_dir, offsets)
    _copy_running(kafka_broker.log_dir, work / "logs" / "broker-1")
    runs["offline"] = _job(spark, work / "offline", as_of, logs=[str(work / "logs")])
    return {"bootstrap": b, "work": work, "as_of": as_of, "position": position, "held": held, "killed": killed,
            "runs": runs}  # fmt: skip


def _log_dir_offsets(bootstrap: str) -> list[tuple[str, int, dict[str, Any]]]:
    return [(o["topic"], o["partition"], o) for o in live.partition_offsets(bootstrap, {}, [(TOPIC, 0)])]


def test_the_reader_waits_at_the_lso(stalled) -> None:
    held, start = stalled["held"], min(stalled["killed"][0])
    assert held["last_stable_offset"] == start == stalled["position"] < held["high_watermark"]


@pytest.mark.parametrize("run", ["live", "offline"])
def test_blocked_live_and_offline_alike(stalled, run: str) -> None:
    start = min(stalled["killed"][0])
    tables = stalled["runs"][run]
    ours = _ours(tables["blocked_consumers"])
    blocked = ours[(GROUP, TOPIC, 0)]
    assert blocked["status"] == "BLOCKED", blocked
    assert (blocked["committed_offset"], blocked["last_stable_offset"]) == (start, start)
    assert blocked["high_watermark"] == stalled["held"]["high_watermark"]
    assert blocked["source"] == ("live" if run == "live" else "segments")
    (finding,) = [f for f in tables["findings"] if f["topic"] == TOPIC]
    assert (finding["start_offset"], finding["reason"], finding["remedy"]) == (
        start, "COORDINATOR_TIMEOUT_OVERDUE", "FENCE"
    )  # fmt: skip
    assert blocked["holding_producer_id"] == finding["producer_id"]
    assert GROUP in finding["blocked_groups"]
    # the pending transactional offset commit: requireStable answers UNSTABLE_OFFSET_COMMIT live; the copy's
    # __consumer_offsets holds the TxnOffsetCommit of the killed producer
    unstable = ours[(PENDING_GROUP, TOPIC, 1)]
    assert unstable["status"] == "UNSTABLE_OFFSET_COMMIT" and unstable["committed_offset"] == 1
    assert unstable["pending_transactional_offsets"] == [f"{TOPIC}-1"]
    assert not [
        q for q in tables["quarantine"] if q["topic"] == "__consumer_offsets" and q["reason"] == "group_unreadable"
    ]


def test_live_names_the_members(stalled) -> None:
    blocked = _ours(stalled["runs"]["live"]["blocked_consumers"])[(GROUP, TOPIC, 0)]
    assert [m["client_id"] for m in blocked["members"]] == ["blocked-reader"]


def test_offline_the_offsets_transaction_stops_compaction(stalled) -> None:
    """The copy holds the killed producer's transaction in ``__consumer_offsets-0`` too: its finding names the
    group whose offset is pending there and says the partition's compaction has stopped."""
    tables = stalled["runs"]["offline"]
    (finding,) = [f for f in tables["findings"] if f["topic"] == TOPIC]
    offsets = [
        f for f in tables["findings"]
        if f["topic"] == "__consumer_offsets" and f["producer_id"] == finding["producer_id"]
    ]  # fmt: skip
    assert len(offsets) == 1, offsets
    assert PENDING_GROUP in offsets[0]["blocked_groups"]
    assert f"{PENDING_GROUP} ({TOPIC}-1)" in offsets[0]["evidence"], offsets[0]["evidence"]
    assert "compaction of __consumer_offsets-0 has stopped" in offsets[0]["evidence"], offsets[0]["evidence"]
    unstable = _ours(tables["blocked_consumers"])[(PENDING_GROUP, TOPIC, 1)]
    assert unstable["holding_producer_id"] == finding["producer_id"]


def test_after_the_fence_nothing_is_blocked(stalled, spark, capsys) -> None:
    (finding,) = [f for f in stalled["runs"]["live"]["findings"] if f["topic"] == TOPIC]
    command = shlex.split(finding["remedy_fallback_command"])
    assert command[:2] == ["txnlog", "fence"] and KILLED_ID in command, command
    buf = io.StringIO()
    assert txnlog_main([*command[1:], "--execute"], out=buf) == 0, capsys.readouterr().err
    b = stalled["bootstrap"]
    deadline = time.monotonic() + 30
    while True:  # the coordinator's ABORT markers follow the fence
        (now,) = live.partition_offsets(b, {}, [(TOPIC, 0)])
        if now["last_stable_offset"] == now["high_watermark"]:
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.2)
    again = _job(spark, stalled["work"] / "after", int(time.time() * 1000) + AHEAD_MS, bootstrap_servers=b,
                 topics=[TOPIC])  # fmt: skip
    assert [f for f in again["findings"] if f["topic"] == TOPIC] == []
    assert _ours(again["blocked_consumers"]) == {}
