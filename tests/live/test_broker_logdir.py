"""Offline = live, on a real broker's bytes: txnlog on the log dir of a Kafka broker that served real clients
gives the answers the broker gave, and what Kafka's own ``LogLoader`` loads from the same files.

A broker not the session's (tests/live/logdir_scenario.py, shared in phases with test_no_coordinator and
test_cluster_metadata; 16 KiB segments so transactions cross rolls) gets, after those phases' topics, from
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

from typing import Any

import pytest

from tests.live.logdir_scenario import CLUSTER, OFFSETS, TOPIC, TPS, _producer_key

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def scenario(broker_logdir: dict[str, Any]) -> dict[str, Any]:
    """The log-dir scenario's answers and runs (tests/live/logdir_scenario.py, shared with two other modules)."""
    return broker_logdir


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
        assert inputs.offline.inventory.node_ids == (("broker-1", 1),)
        roles, _deleted = inputs.said.notes or (None, None)
        assert roles is not None
        got = {(r["topic"], r["partition"]): r for r in roles.to_pylist()}
        for tp in TPS:
            r = got[tp]
            expected = (leader, "broker-1" if leader == 1 else None, ["broker-1"])
            assert (r["leader"], r["leader_replica"], r["in_sync_replicas"]) == expected, (copy, tp)
