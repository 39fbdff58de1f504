"""txnlog.live.verify and ``verify_live`` against a real Kafka broker with a SIGKILLed transactional producer.

Real clients, a real broker on 127.0.0.1 (tests/live/broker.py), no mocks: DescribeProducers lists the killed
producer's open transactions, so live findings come from find-hanging's own candidates; a hanging transaction
no coordinator owns (tests/live/orphan.py) gets an abort recommendation with the coordinator epoch
DescribeProducers reports.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from tests.live.capture import _create_topic
from tests.live.killed import run_and_kill
from tests.live.orphan import init_producer_id, produce_transactional
from tests.live.test_live_cluster import _KILLED_PRODUCER
from txnlog.live import admin as live
from txnlog.live import hanging as live_hanging
from txnlog.live.verify import LIVE_TABLES, live_rows
from txnlog.model import contract as tables
from txnlog.model.config import load_config
from txnlog.model.errors import UsageError

pytestmark = pytest.mark.live

TOPIC = "verify-live-txn"
ORPHAN_TOPIC = "verify-live-orphan"
TID_KILLED = "vl-killed"
FUTURE_MS = 86_400_000  # a day ahead: every open transaction is a find-hanging candidate


def _kill_mid_transaction(bootstrap: str) -> dict[int, list[int]]:
    """test_live_cluster's killed producer (own transactional.id, own topic): partition → offsets it wrote."""
    script = _KILLED_PRODUCER.replace('"tx-killed"', json.dumps(TID_KILLED))
    return run_and_kill(script, bootstrap, TOPIC)


def _commit(bootstrap: str, tid: str, partition: int, n: int) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce(TOPIC, value=f"{tid}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0
    p.commit_transaction(30)


@pytest.fixture(scope="module")
def stuck(kafka_broker) -> dict[str, Any]:
    """partition 0: 3 committed records + COMMIT; a SIGKILLed producer's open transaction on 1 and 2."""
    b = kafka_broker.bootstrap
    _create_topic(b, TOPIC, 3)
    _commit(b, "vl-commit", 0, 3)
    return {"bootstrap": b, "killed": _kill_mid_transaction(b)}


def _config(bootstrap: str, **over: Any):
    return load_config(None, {"bootstrap_servers": bootstrap, "cluster": "kafka", **over})


def test_partition_health_has_the_real_lso(stuck) -> None:
    b, killed = stuck["bootstrap"], stuck["killed"]
    got = live_rows(_config(b), [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)], as_of_ms=int(time.time() * 1000))
    assert (
        set(got) == {"findings", "abort_recommendations", "partition_health", "coordinator_state"} == set(LIVE_TABLES)
    )
    for name, table in got.items():
        assert table.schema.equals(tables.TABLES[name]), name  # exactly the contract
    rows = {r["partition"]: r for r in got["partition_health"].to_pylist()}
    assert sorted(rows) == [0, 1, 2]
    assert all(r["source"] == "live" and r["topic"] == TOPIC and r["cluster"] == "kafka" for r in rows.values())
    # healthy: everything committed, LSO = high watermark (3 records + COMMIT marker)
    assert (rows[0]["last_stable_offset"], rows[0]["log_end_offset"], rows[0]["lso_lag"]) == (4, 4, 0)
    assert rows[0]["open_transactions"] == 0 and rows[0]["has_late_transaction"] is False
    # stuck: the killed producer's first record pins the LSO; the high watermark is past its last record
    for p in (1, 2):
        assert rows[p]["last_stable_offset"] == min(killed[p])
        assert rows[p]["log_end_offset"] == max(killed[p]) + 1
        assert rows[p]["lso_lag"] == len(killed[p]) > 0
        assert rows[p]["log_start_offset"] == 0
    assert rows[1]["open_transactions"] == 1 and rows[1]["has_late_transaction"] is False


def test_coordinator_state_from_list_and_describe_transactions(stuck) -> None:
    """ListTransactions + DescribeTransactions (real answers): the killed id is Ongoing listing both partitions."""
    got = live_rows(_config(stuck["bootstrap"]), [(TOPIC, 1)], as_of_ms=int(time.time() * 1000))
    rows = {r["transactional_id"]: r for r in got["coordinator_state"].to_pylist()}
    assert TID_KILLED in rows and "vl-commit" not in rows  # only ids in flight on the partitions asked about
    k = rows[TID_KILLED]
    assert k["state"] == "Ongoing" and k["source"] == "live" and k["is_tombstoned"] is False
    assert k["partitions"] == [f"{TOPIC}-1", f"{TOPIC}-2"] and k["timeout_ms"] == 600000
    assert k["producer_id"] >= 0 and k["txn_start_timestamp"] is not None
    from txnlog.kafka.wire import transaction_state_partition_for

    assert k["coordinator_partition"] == transaction_state_partition_for(TID_KILLED, 50)


def test_live_findings(stuck) -> None:
    b, killed = stuck["bootstrap"], stuck["killed"]
    now = live_rows(_config(b), [(TOPIC, 1), (TOPIC, 2)], as_of_ms=int(time.time() * 1000))
    assert now["findings"].num_rows == 0  # idle for seconds: not a candidate
    later = live_rows(_config(b), [(TOPIC, 1), (TOPIC, 2)], as_of_ms=int(time.time() * 1000) + FUTURE_MS)
    findings = later["findings"].to_pylist()
    by_p = {f["partition"]: f for f in findings}
    assert set(by_p) == {1, 2}
    for p in (1, 2):  # Ongoing, listing the partition, far past its 600 s timeout
        assert (by_p[p]["verdict"], by_p[p]["reason"], by_p[p]["source"]) == (
            "LATE",
            "COORDINATOR_TIMEOUT_OVERDUE",
            "live",
        )
        assert by_p[p]["start_offset"] == min(killed[p]) and by_p[p]["lso_lag"] == len(killed[p])


def test_live_abort_recommendations(stuck) -> None:
    """A HANGING live finding gets an abort_recommendations row with both command forms.

    Real: a transaction no coordinator owns (tests/live/orphan.py) on its own topic is a HANGING
    NO_TRANSACTIONAL_ID finding with DescribeProducers' producer and coordinator epoch; the killed producer's
    (Ongoing, listed) is LATE, with no recommendation. Then find-hanging's later steps run on made-up
    DescribeProducers rows for states one broker cannot show at once (a committed id's producer still open),
    ListTransactions, DescribeTransactions and ListOffsets asked of the broker.
    """
    b, killed = stuck["bootstrap"], stuck["killed"]
    _create_topic(b, ORPHAN_TOPIC, 1)
    orphan = init_producer_id(b)
    first = produce_transactional(b, orphan, ORPHAN_TOPIC, 0, [b"a", b"b"])
    now = int(time.time() * 1000)
    later = live_rows(_config(b), [(TOPIC, 1), (TOPIC, 2), (ORPHAN_TOPIC, 0)], as_of_ms=now + FUTURE_MS)
    recs = later["abort_recommendations"]
    assert recs.schema.equals(tables.TABLES["abort_recommendations"])
    found = {(f["topic"], f["partition"]): f for f in later["findings"].to_pylist()}
    assert {k: (f["verdict"], f["reason"]) for k, f in found.items()} == {
        (TOPIC, 1): ("LATE", "COORDINATOR_TIMEOUT_OVERDUE"),
        (TOPIC, 2): ("LATE", "COORDINATOR_TIMEOUT_OVERDUE"),
        (ORPHAN_TOPIC, 0): ("HANGING", "NO_TRANSACTIONAL_ID"),
    }
    (rec,) = recs.to_pylist()
    head = f"kafka-transactions.sh --bootstrap-server {b} abort --topic {ORPHAN_TOPIC}"
    assert rec["command"] == f"{head} --partition 0 --start-offset {first}"
    assert rec["legacy_command"] == (
        f"{head} --partition 0 --producer-id {orphan.producer_id} --producer-epoch {orphan.producer_epoch} "
        "--coordinator-epoch 0"  # DescribeProducers' -1 (no marker yet), sent as 0 as kafka-transactions.sh does
    )
    assert (rec["safety"], rec["transactional_id"], rec["coordinator_epoch"]) == ("SAFE", None, 0)

    admin = live.admin_client(b)
    try:
        d = live.describe_transactions(admin, ["vl-commit", TID_KILLED])
        hour_ago = now - 3_600_000

        def producer(partition: int, pid: int, epoch: int, ce: int, start: int) -> dict[str, Any]:
            return {
                "topic": TOPIC,
                "partition": partition,
                "producer_id": pid,
                "producer_epoch": epoch,
                "last_sequence": 0,
                "last_timestamp": hour_ago,
                "coordinator_epoch": ce,
                "current_transaction_start_offset": start,
            }

        rows = [
            # the committed id's producer, open at offset 1: its coordinator says CompleteCommit
            producer(0, d["vl-commit"]["producer_id"], d["vl-commit"]["producer_epoch"], 3, 1),
            # a producer id no transactional.id owns (ListTransactions answers nothing for it)
            producer(1, 987654321, 4, -1, min(killed[1])),
            # the killed producer: Ongoing, listing this partition, inside its 600 s timeout: no finding
            producer(2, d[TID_KILLED]["producer_id"], d[TID_KILLED]["producer_epoch"], 0, min(killed[2])),
        ]
        findings = live_hanging.findings_from_producers(
            admin, rows, bootstrap=b, max_transaction_timeout_ms=900_000, now_ms=now
        )
    finally:
        admin.close()
    by_p = {f["partition"]: f for f in findings}
    assert sorted(by_p) == [0, 1]
    assert (by_p[0]["verdict"], by_p[0]["reason"], by_p[0]["coordinator_state"]) == (
        "HANGING",
        "COORDINATOR_COMPLETED",
        "CompleteCommit",
    )
    assert (by_p[1]["verdict"], by_p[1]["reason"]) == ("HANGING", "NO_TRANSACTIONAL_ID")
    assert by_p[0]["lso_lag"] == 0 and by_p[1]["lso_lag"] == len(killed[1])  # real ListOffsets
    recs = {r["partition"]: r for r in live_hanging.abort_recommendations(findings)}
    head = f"kafka-transactions.sh --bootstrap-server {b} abort --topic {TOPIC}"
    assert recs[0]["command"] == f"{head} --partition 0 --start-offset 1"
    assert recs[0]["legacy_command"] == (
        f"{head} --partition 0 --producer-id {d['vl-commit']['producer_id']} "
        f"--producer-epoch {d['vl-commit']['producer_epoch']} --coordinator-epoch 3"
    )
    assert recs[1]["command"] == f"{head} --partition 1 --start-offset {min(killed[1])}"
    assert (
        recs[1]["legacy_command"]
        == f"{head} --partition 1 --producer-id 987654321 --producer-epoch 4 --coordinator-epoch 0"
    )
    assert (recs[0]["safety"], recs[1]["safety"]) == ("SAFE", "SAFE")
    assert (recs[0]["transactional_id"], recs[1]["transactional_id"]) == ("vl-commit", None)
    assert recs[0]["coordinator_epoch"] == 3 and recs[1]["coordinator_epoch"] == 0


def test_topics_and_missing_partitions(stuck) -> None:
    b = stuck["bootstrap"]
    notes: list[str] = []
    got = live_rows(
        _config(b, topics=[TOPIC]),
        [("no-such-topic", 0), (TOPIC, 9)],
        as_of_ms=int(time.time() * 1000),
        progress=notes.append,
    )
    assert sorted(r["partition"] for r in got["partition_health"].to_pylist()) == [0, 1, 2]
    assert any("2 partitions not on" in n and "no-such-topic-0" in n for n in notes)
    with pytest.raises(UsageError, match=r"--topic nope-topic: no such topic on 127\.0\.0\.1:"):
        live_rows(_config(b, topics=["nope-topic"]), [], as_of_ms=0)


def test_unreachable_cluster_is_one_line_usage_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bootstrap = f"127.0.0.1:{port}"
    t0 = time.monotonic()
    with pytest.raises(UsageError) as err:
        live_rows(_config(bootstrap, topics=["x"]), [], as_of_ms=0, timeout_s=3)
    assert time.monotonic() - t0 < 20
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"--bootstrap-servers {bootstrap}: cannot verify live")
    assert "drop --verify-live" in msg
    with pytest.raises(UsageError, match="needs bootstrap_servers"):
        live_rows(load_config(None, {}), [], as_of_ms=0)


def test_pipeline_verify_live(stuck, spark, tmp_path) -> None:
    """pipeline.run with verify_live: the live rows are in the Delta tables; the offline rows are exactly
    the scenario's ground truth (one Spark run: the test stays under a minute)."""
    from collections import Counter

    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.output.delta import read_table
    from txnlog.pipeline import run

    b, killed = stuck["bootstrap"], stuck["killed"]
    truth = write_scenario("healthy", tmp_path / "logs", seed=1)
    notes: list[str] = []
    config = load_config(
        None,
        {
            "logs": [str(tmp_path / "logs")],
            "output": str(tmp_path / "out"),
            "cluster": "kafka",
            "bootstrap_servers": b,
            "topics": [TOPIC],
            "verify_live": True,
        },
    )
    result = run(config, spark=spark, progress=notes.append)
    assert result.as_of == truth.as_of
    assert any(n.startswith(f"verify-live: 3 partitions on {b}") for n in notes), notes

    def rows(name: str) -> list[dict[str, Any]]:
        got = read_table(str(tmp_path / "out"), name).to_pylist()
        assert all(r["cluster"] == "kafka" and r["as_of"] == result.as_of for r in got), name
        return got

    # live rows, source = live
    health = rows("partition_health")
    live_health = {r["partition"]: r for r in health if r["source"] == "live"}
    assert sorted(live_health) == [0, 1, 2] and all(r["topic"] == TOPIC for r in live_health.values())
    assert live_health[0]["lso_lag"] == 0
    for p in (1, 2):
        assert (live_health[p]["last_stable_offset"], live_health[p]["lso_lag"]) == (min(killed[p]), len(killed[p]))
    coord = rows("coordinator_state")
    assert [r["transactional_id"] for r in coord if r["source"] == "live"] == [TID_KILLED]
    findings = rows("findings")
    # healthy offline; live: the killed producer's transactions, Ongoing and listed, idle for seconds: none yet
    assert findings == []

    # offline rows, source = segments, exactly the ground truth
    offline = {(r["topic"], r["partition"]): r for r in health if r["source"] == "segments"}
    assert len(offline) + 3 == len(health) == result.counts["partition_health"]
    assert set(offline) == set(truth.partitions)
    for (topic, partition), w in truth.partitions.items():
        got = offline[(topic, partition)]
        assert (got["log_end_offset"], got["last_stable_offset"], got["open_transactions"]) == (
            w.log_end_offset,
            w.last_stable_offset,
            w.open_transactions,
        ), (topic, partition)
    txns = rows("transactions")
    assert {r["source"] for r in txns} == {"segments"}
    assert Counter((t["topic"], t["partition"], t["outcome"]) for t in txns) == Counter(
        (t.topic, t.partition, t.outcome) for t in truth.transactions
    )
    assert {r["transactional_id"] for r in coord if r["source"] == "segments"} == set(truth.coordinator)
    assert rows("runs")[0]["partition_health_count"] == len(health)
