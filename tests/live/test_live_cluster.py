"""Live cluster reading, checks and remedies against a real Kafka broker with real transactional producers.

The session broker (tests/live/broker.py) serves transactions, read_committed, ListTransactions,
DescribeTransactions, DescribeProducers with the real producers, WriteTxnMarkers and ``__transaction_state``:
committed, aborted, and a producer SIGKILLed mid-transaction seen Ongoing with its LSO stuck; find-hanging with
its candidates from DescribeProducers; an executed ``abort`` of a hanging transaction (tests/live/orphan.py) that
moves the LSO, twice on one producer, the second time with the coordinator epoch of the first marker; the live
``__transaction_state`` source on the coordinator's own records and on writer-made ones served from a topic.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.live.capture import _create_topic
from tests.live.killed import run_and_kill
from tests.live.orphan import init_producer_id, produce_transactional
from txnlog.broker import classify
from txnlog.live import abort as live_abort
from txnlog.live import admin as live
from txnlog.live import hanging as live_hanging
from txnlog.ops.cli import main as txnlog_main

pytestmark = pytest.mark.live

TOPIC = "live-txn"
ORPHAN_TOPIC = "live-orphan"
COPY_TOPIC = "txnstate-copy"
COPY_PARTITIONS = 4

# A producer that opens a transaction on partitions 1 and 2, reports what it wrote, and waits to be killed.
_KILLED_PRODUCER = r"""
import json, sys, time
import confluent_kafka
bootstrap, topic = sys.argv[1], sys.argv[2]
p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-killed",
                              "transaction.timeout.ms": 600000, "linger.ms": 5, "log_level": 3})
p.init_transactions(30)
p.begin_transaction()
delivered = []
def cb(err, msg):
    delivered.append([msg.partition(), msg.offset(), None if err is None else str(err)])
for i in range(4):
    p.produce(topic, value=b"killed-%d" % i, partition=1, on_delivery=cb)
for i in range(2):
    p.produce(topic, value=b"killed-p2-%d" % i, partition=2, on_delivery=cb)
assert p.flush(30) == 0
print(json.dumps(delivered), flush=True)
time.sleep(600)
"""


def _producer(bootstrap: str, tid: str) -> Any:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    return p


def _transaction(bootstrap: str, tid: str, partition: int, n: int, commit: bool) -> None:
    p = _producer(bootstrap, tid)
    p.begin_transaction()
    for i in range(n):
        p.produce(TOPIC, value=f"{tid}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0
    p.commit_transaction(30) if commit else p.abort_transaction(30)
    p.flush(10)


def _kill_mid_transaction(bootstrap: str) -> dict[int, list[int]]:
    """Run the killed producer in a subprocess, SIGKILL it once it flushed; partition → offsets."""
    return run_and_kill(_KILLED_PRODUCER, bootstrap, TOPIC)


@pytest.fixture(scope="module")
def cluster(kafka_broker) -> dict[str, Any]:
    """commit + abort on partition 0, a SIGKILLed producer open on 1 and 2, then a commit after it on 1."""
    b = kafka_broker.bootstrap
    _create_topic(b, TOPIC, 3)
    _transaction(b, "tx-commit", 0, 3, commit=True)  # offsets 0-2, COMMIT at 3
    _transaction(b, "tx-abort", 0, 2, commit=False)  # offsets 4-5, ABORT at 6
    killed = _kill_mid_transaction(b)
    _transaction(b, "tx-after", 1, 3, commit=True)  # after the killed one's records on partition 1
    admin = live.admin_client(b)
    yield {"bootstrap": b, "killed": killed, "admin": admin}
    admin.close()


# --- ListTransactions / DescribeTransactions / offsets ------------------------------------------------------


def test_killed_producer_is_ongoing_with_its_partitions(cluster) -> None:
    admin = cluster["admin"]
    listed = live.list_transactions(admin)
    by_id = {v["transactional_id"]: v for v in listed.values()}
    assert by_id["tx-killed"]["state"] == "Ongoing"
    assert by_id["tx-commit"]["state"] == "CompleteCommit"
    assert by_id["tx-abort"]["state"] == "CompleteAbort"
    killed_pid = by_id["tx-killed"]["producer_id"]
    # The producer-id filter (spec §6.2 step 4) returns just that id; an empty filter asks nothing.
    assert [v["transactional_id"] for v in live.list_transactions(admin, [killed_pid]).values()] == ["tx-killed"]
    assert live.list_transactions(admin, []) == {}

    d = live.describe_transactions(admin, ["tx-killed", "tx-commit", "tx-abort", "no-such-id"])
    assert d["tx-killed"]["state"] == "Ongoing"
    assert d["tx-killed"]["producer_id"] == killed_pid
    assert d["tx-killed"]["partitions"] == [f"{TOPIC}-1", f"{TOPIC}-2"]
    assert d["tx-killed"]["timeout_ms"] == 600000 and d["tx-killed"]["txn_start_timestamp"] > 0
    assert d["tx-commit"]["state"] == "CompleteCommit" and d["tx-commit"]["partitions"] == []
    assert d["tx-abort"]["state"] == "CompleteAbort"
    assert d["no-such-id"] is None  # TRANSACTIONAL_ID_NOT_FOUND


def test_lso_is_stuck_at_the_killed_transaction(cluster) -> None:
    killed = cluster["killed"]
    rows = {r["partition"]: r for r in live.partition_offsets(cluster["bootstrap"], {}, [(TOPIC, p) for p in range(3)])}
    # partition 0: 3 committed + COMMIT, 2 aborted + ABORT: nothing open, LSO = HW.
    assert rows[0]["high_watermark"] == 7 and rows[0]["last_stable_offset"] == 7 and rows[0]["lso_lag"] == 0
    # partition 1: the killed producer's first record pins the LSO; the later commit is beyond it.
    first = min(killed[1])
    assert rows[1]["last_stable_offset"] == first
    assert rows[1]["high_watermark"] == max(killed[1]) + 1 + 3 + 1  # + tx-after's 3 records and its COMMIT
    assert rows[1]["lso_lag"] == rows[1]["high_watermark"] - first > 0
    assert rows[2]["last_stable_offset"] == min(killed[2]) and rows[2]["lso_lag"] == len(killed[2])
    assert all(r["log_start_offset"] == 0 for r in rows.values())


def test_verdicts_on_real_coordinator_answers(cluster) -> None:
    """classify's rules over real ListTransactions/DescribeTransactions and the real DescribeProducers rows of
    the killed producer, plus made-up rows for what the broker cannot show at once (its producer open on a
    partition its coordinator does not list; a producer id no transactional.id owns)."""
    admin, killed = cluster["admin"], cluster["killed"]
    listings = live.list_transactions(admin)
    descriptions = live.describe_transactions(admin, [v["transactional_id"] for v in listings.values()])
    pid = next(p for p, v in listings.items() if v["transactional_id"] == "tx-killed")
    epoch = descriptions["tx-killed"]["producer_epoch"]
    start_ms = descriptions["tx-killed"]["txn_start_timestamp"]

    def row(partition: int, producer_id: int = pid) -> dict[str, Any]:
        return {
            "topic": TOPIC,
            "partition": partition,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "last_sequence": 3,
            "last_timestamp": start_ms,
            "coordinator_epoch": -1,
            "current_transaction_start_offset": min(killed.get(partition, [0])),
        }

    now = classify.Thresholds(as_of_ms=start_ms + 1000, max_transaction_timeout_ms=900_000)
    later = classify.Thresholds(as_of_ms=start_ms + 86_400_000, max_transaction_timeout_ms=900_000)
    real = {r["partition"]: r for r in live.describe_producers(admin, TOPIC, [1, 2]) if r["producer_id"] == pid}
    for p in (1, 2):  # DescribeProducers: the killed producer, open at its first offset, no marker yet
        assert (real[p]["producer_epoch"], real[p]["current_transaction_start_offset"]) == (epoch, min(killed[p]))
        assert real[p]["coordinator_epoch"] == -1
    rows = [real[1], real[2], row(0), row(1, producer_id=987654321)]
    assert live_hanging.live_verdicts(rows, listings, descriptions, now)[:2] == [("", "", ""), ("", "", "")]
    got = live_hanging.live_verdicts(rows, listings, descriptions, later)
    # Ongoing, listed, past its 600 s; then live-txn-0, not in its owner's set
    assert got[0][:2] == (classify.Verdict.LATE, classify.Reason.COORDINATOR_TIMEOUT_OVERDUE)
    assert got[2][:2] == (classify.Verdict.HANGING, classify.Reason.PARTITION_NOT_IN_TRANSACTION)
    assert got[3] == (classify.Verdict.HANGING, classify.Reason.NO_TRANSACTIONAL_ID, classify.Safety.SAFE)


def test_find_hanging_live(cluster) -> None:
    admin = cluster["admin"]
    tps = live.topic_partitions(cluster["bootstrap"], {}, [TOPIC])
    assert tps == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    # Far in the future every open transaction is a candidate; now none is.
    future = int(time.time() * 1000) + 86_400_000
    assert live_hanging.find_hanging_live(admin, tps, bootstrap=cluster["bootstrap"]) == []
    found = live_hanging.find_hanging_live(admin, tps, bootstrap=cluster["bootstrap"], now_ms=future)
    # DescribeProducers' candidates: the killed producer's open transactions on partitions 1 and 2, nothing else
    assert sorted((f["partition"], f["start_offset"]) for f in found) == [
        (p, min(cluster["killed"][p])) for p in (1, 2)
    ]
    killed = [f for f in found if f["start_offset"] == min(cluster["killed"][1]) and f["partition"] == 1]
    assert killed and killed[0]["verdict"] == classify.Verdict.LATE and killed[0]["source"] == "live"
    assert killed[0]["lso_lag"] > 0


# --- txnlog abort ------------------------------------------------------------------------------------------


def _abort(argv: list[str], capsys) -> tuple[int, str, str]:
    out = io.StringIO()
    code = txnlog_main(["abort", *argv], out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_abort_dry_run_prints_the_plan(cluster, capsys) -> None:
    start = min(cluster["killed"][1])
    code, out, err = _abort(
        [
            "--bootstrap-servers",
            cluster["bootstrap"],
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--start-offset",
            str(start),
        ],
        capsys,
    )
    assert f"txnlog abort [DRY RUN (pass --execute to send the abort)] on {cluster['bootstrap']}" in out
    assert f"target: the open transaction starting at offset {start} on {TOPIC}-1" in out
    assert "re-validate against live state: DescribeProducers live-txn-1" in out
    assert "WriteTxnMarkers ABORT to the leader of live-txn-1" in out
    # Written to seconds ago: not a candidate yet
    assert code == 2 and err.endswith("not a hanging candidate\n") and err.count("\n") == 1
    # A candidate at once (threshold 0), and the coordinator says: Ongoing, listing this partition
    code, _, err = _abort(
        [
            "--bootstrap-servers",
            cluster["bootstrap"],
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--start-offset",
            str(start),
        ]
        + ["--max-transaction-timeout-ms", "0"],
        capsys,
    )
    assert code == 2 and f"{TOPIC}-1 @ {start}: verdict is not hanging" in err and err.count("\n") == 1


def test_abort_execute_refuses_and_sends_nothing(cluster, capsys) -> None:
    b, start = cluster["bootstrap"], min(cluster["killed"][1])
    before = live.partition_offsets(b, {}, [(TOPIC, 1)])[0]
    code, out, err = _abort(
        [
            "--bootstrap-servers",
            b,
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--start-offset",
            str(start),
            "--execute",
            "--max-transaction-timeout-ms",
            "0",
        ],
        capsys,
    )
    assert "txnlog abort [EXECUTE]" in out
    assert code == 2 and err.startswith("txnlog: refused: ") and err.count("\n") == 1
    assert "aborted" not in out
    # Nothing was sent: the LSO is still stuck and the coordinator still has it Ongoing.
    assert live.partition_offsets(b, {}, [(TOPIC, 1)])[0] == before
    assert live.describe_transactions(cluster["admin"], ["tx-killed"])["tx-killed"]["state"] == "Ongoing"


def test_abort_legacy_form_revalidates_producer(cluster, capsys) -> None:
    admin = cluster["admin"]
    d = live.describe_transactions(admin, ["tx-killed"])["tx-killed"]
    code, out, err = _abort(
        [
            "--bootstrap-servers",
            cluster["bootstrap"],
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--producer-id",
            str(d["producer_id"]),
            "--producer-epoch",
            str(d["producer_epoch"]),
            "--coordinator-epoch",
            "-1",
            "--max-transaction-timeout-ms",
            "0",
        ],
        capsys,
    )
    assert f"target: the open transaction of producer {d['producer_id']} epoch {d['producer_epoch']}" in out
    assert code == 2 and err.count("\n") == 1
    # DescribeProducers finds it open at its first offset; its coordinator still owns it
    assert f"{TOPIC}-1 @ {min(cluster['killed'][1])}: verdict is not hanging" in err


def test_abort_usage_errors(cluster, capsys) -> None:
    b = cluster["bootstrap"]
    code, _, err = _abort(["--bootstrap-servers", b, "--topic", TOPIC, "--partition", "1"], capsys)
    assert code == 2 and "must be identified either with --start-offset" in err
    code, _, err = _abort(
        [
            "--bootstrap-servers",
            b,
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--producer-id",
            "5",
            "--coordinator-epoch",
            "0",
        ],
        capsys,
    )
    assert code == 2 and "missing required argument --producer-epoch" in err
    code, _, err = _abort(["--topic", TOPIC, "--partition", "1", "--start-offset", "0"], capsys)
    assert code == 2 and "pass --bootstrap-servers" in err


def test_abort_validation_rules(cluster) -> None:
    """validate_abort over real coordinator answers (ListTransactions finds no owner for an unknown producer
    id) with the DescribeProducers rows a real broker would return."""
    admin = cluster["admin"]
    now = int(time.time() * 1000)
    th = classify.Thresholds(as_of_ms=now, max_transaction_timeout_ms=900_000)
    stale = {
        "topic": TOPIC,
        "partition": 1,
        "producer_id": 987654321,
        "producer_epoch": 3,
        "last_sequence": 9,
        "last_timestamp": now - 3_600_000,
        "coordinator_epoch": -1,
        "current_transaction_start_offset": 42,
    }
    listings = live.list_transactions(admin, [stale["producer_id"]])
    assert listings == {}
    plan = live_abort.validate_abort(live_abort.AbortRequest(TOPIC, 1, start_offset=42), [stale], listings, {}, th)
    assert (plan.producer_id, plan.producer_epoch, plan.coordinator_epoch, plan.reason) == (
        987654321,
        3,
        0,
        classify.Reason.NO_TRANSACTIONAL_ID,
    )
    legacy = live_abort.AbortRequest(TOPIC, 1, producer_id=987654321, producer_epoch=3, coordinator_epoch=7)
    assert live_abort.validate_abort(legacy, [stale], listings, {}, th).coordinator_epoch == 7
    with pytest.raises(live_abort.AbortRefused, match="is at epoch 3 on live-txn-1, not 2"):
        live_abort.validate_abort(
            live_abort.AbortRequest(TOPIC, 1, producer_id=987654321, producer_epoch=2, coordinator_epoch=0),
            [stale],
            listings,
            {},
            th,
        )
    with pytest.raises(live_abort.AbortRefused, match="Could not find any open transactions starting at offset 41"):
        live_abort.validate_abort(live_abort.AbortRequest(TOPIC, 1, start_offset=41), [stale], listings, {}, th)
    fresh = {**stale, "last_timestamp": now - 1000}
    with pytest.raises(live_abort.AbortRefused, match="not a hanging candidate"):
        live_abort.validate_abort(live_abort.AbortRequest(TOPIC, 1, start_offset=42), [fresh], listings, {}, th)
    # The killed producer: its coordinator (real answer) is Ongoing listing the partition -> not hanging.
    all_listings = live.list_transactions(admin)
    pid = next(p for p, v in all_listings.items() if v["transactional_id"] == "tx-killed")
    desc = live.describe_transactions(admin, ["tx-killed"])
    killed = {
        **stale,
        "producer_id": pid,
        "producer_epoch": desc["tx-killed"]["producer_epoch"],
        "current_transaction_start_offset": min(cluster["killed"][1]),
    }
    with pytest.raises(live_abort.AbortRefused, match="not hanging.*tx-killed Ongoing listing live-txn-1"):
        live_abort.validate_abort(
            live_abort.AbortRequest(TOPIC, 1, start_offset=killed["current_transaction_start_offset"]),
            [killed],
            {pid: all_listings[pid]},
            desc,
            th,
        )


def test_abort_executes_on_a_hanging_transaction(cluster, capsys) -> None:
    """A transaction no coordinator owns (tests/live/orphan.py) pins the LSO; ``abort --execute`` re-validates
    it on DescribeProducers/ListTransactions, sends WriteTxnMarkers and the LSO moves. Then the same producer
    opens another one: the partition now holds its marker, so the abort must carry the coordinator epoch
    DescribeProducers reports (ProducerStateManager fences an older one, as kafka-python's default -1 is)."""
    from kafka.errors import TransactionCoordinatorFencedError

    b = cluster["bootstrap"]
    _create_topic(b, ORPHAN_TOPIC, 1)
    orphan = init_producer_id(b)
    argv = ["--bootstrap-servers", b, "--topic", ORPHAN_TOPIC, "--partition", "0", "--max-transaction-timeout-ms", "0"]
    for round_ in (1, 2):
        first = produce_transactional(b, orphan, ORPHAN_TOPIC, 0, [b"orphan-%d-%d" % (round_, i) for i in range(3)])
        before = live.partition_offsets(b, {}, [(ORPHAN_TOPIC, 0)])[0]
        assert before["last_stable_offset"] == first and before["high_watermark"] == first + 3
        (row,) = live.describe_producers(cluster["admin"], ORPHAN_TOPIC, [0])
        assert (row["producer_id"], row["current_transaction_start_offset"]) == (orphan.producer_id, first)
        assert live.list_transactions(cluster["admin"], [orphan.producer_id]) == {}  # no transactional.id owns it
        if round_ == 1:
            assert row["coordinator_epoch"] == -1  # no marker for this producer yet
        else:
            assert row["coordinator_epoch"] == 0  # the first abort's marker
            stale = live_abort.AbortPlan(
                ORPHAN_TOPIC, 0, orphan.producer_id, orphan.producer_epoch, -1, first, "", "", None, ""
            )
            with pytest.raises(TransactionCoordinatorFencedError):
                live_abort.send_abort(cluster["admin"], stale)
        time.sleep(0.01)  # idle > the 0 ms threshold
        if round_ == 1:  # a dry run passes the re-validation and sends nothing
            code, out, err = _abort([*argv, "--start-offset", str(first)], capsys)
            assert code == 0 and "DRY RUN" in out, err
            assert live.partition_offsets(b, {}, [(ORPHAN_TOPIC, 0)])[0] == before
        code, out, err = _abort([*argv, "--start-offset", str(first), "--execute"], capsys)
        assert code == 0, err
        assert "txnlog abort [EXECUTE]" in out and "aborted" in out, out
        after = live.partition_offsets(b, {}, [(ORPHAN_TOPIC, 0)])[0]
        # the ABORT marker is one more offset; nothing open: LSO = high watermark
        assert after["high_watermark"] == first + 4 and after["last_stable_offset"] == after["high_watermark"]
        (row,) = live.describe_producers(cluster["admin"], ORPHAN_TOPIC, [0])
        assert row["current_transaction_start_offset"] is None
    # A second look finds nothing to abort: refused, exit 2
    code, _, err = _abort([*argv, "--start-offset", str(first), "--execute"], capsys)
    assert code == 2 and "Could not find any open transactions" in err


def test_console_command(cluster) -> None:
    exe = Path(sys.executable).with_name("txnlog")
    if not exe.exists():
        pytest.skip(f"no txnlog console script next to {sys.executable}")
    r = subprocess.run(
        [
            str(exe),
            "abort",
            "--bootstrap-servers",
            cluster["bootstrap"],
            "--topic",
            TOPIC,
            "--partition",
            "2",
            "--start-offset",
            "999",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "DRY RUN" in r.stdout
    assert r.stderr.startswith("txnlog: refused: Could not find any open transactions starting at offset 999")


# --- the live Data Source -----------------------------------------------------------------------------------


def test_live_source_reads_the_coordinators_transaction_state(cluster, spark) -> None:
    """The live source on the broker's own ``__transaction_state`` (Fetch of the internal topic): each
    transactional.id's last record says what DescribeTransactions says now."""
    from txnlog.engine.spark.live_source import LiveTxnStateSource, live_options
    from txnlog.model.rows import TXN_STATE_SCHEMA

    b, admin = cluster["bootstrap"], cluster["admin"]
    spark.dataSource.register(LiveTxnStateSource)
    table = spark.read.format("txnlog_live_txn_state").options(**live_options(b, {})).load().toArrow()
    assert table.schema.equals(TXN_STATE_SCHEMA)
    rows = sorted(table.to_pylist(), key=lambda r: (r["coordinator_partition"], r["record_offset"]))
    assert [r for r in rows if r["kind"] != "record"] == []  # every record the coordinator wrote decodes
    assert {r["file"] for r in rows} == {"kafka://__transaction_state-0"}  # one partition on this broker
    last = {r["transactional_id"]: r for r in rows}
    tids = ["tx-commit", "tx-abort", "tx-killed", "tx-after"]
    described = live.describe_transactions(admin, tids)
    from txnlog.kafka.wire import TransactionState

    def name(state: int) -> str:
        return TransactionState(state).kafka_name

    for tid in tids:
        d, r = described[tid], last[tid]
        assert (name(r["state"]), r["producer_id"], r["producer_epoch"]) == (
            d["state"],
            d["producer_id"],
            d["producer_epoch"],
        ), tid
        assert r["timeout_ms"] == d["timeout_ms"]
    assert sorted(last["tx-killed"]["partitions"]) == [f"{TOPIC}-1", f"{TOPIC}-2"]  # in the coordinator's set order
    # Ongoing -> PrepareCommit -> CompleteCommit, in that order, for a committed id
    states = [name(r["state"]) for r in rows if r["transactional_id"] == "tx-commit"]
    assert states[-3:] == ["Ongoing", "PrepareCommit", "CompleteCommit"], states


def _written_records() -> list[dict[str, Any]]:
    """TransactionLogKey/Value records as a coordinator would write them (v0 and v1, tombstones)."""
    from txnlog.kafka.wire import TransactionState as S

    t0 = 1_790_000_000_000
    recs = []
    for i in range(40):
        tid = f"app-{i % 9}"
        state = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT][
            i % 7
        ]
        parts = (
            None
            if state == S.EMPTY
            else ({} if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else {"orders": [i % 5, 7], "payments": [i % 3]})
        )
        recs.append(
            {
                "transactional_id": tid,
                "version": i % 2,
                "producer_id": 5000 + i % 9,
                "producer_epoch": i // 9,
                "transaction_timeout_ms": 60000,
                "state": int(state),
                "partitions": parts,
                "last_update_timestamp_ms": t0 + 1000 * i,
                "start_timestamp_ms": -1 if state == S.EMPTY else t0 + 900 * i,
                "previous_producer_id": 4000 + i if i % 4 == 1 else -1,
                "next_producer_id": 6000 + i if i % 4 == 3 else -1,
                "client_transaction_version": 2 if i % 2 else 0,
            }
        )
    recs.append({"transactional_id": "app-gone", "tombstone": True})
    return recs


def _partition_for(tid: str) -> int:
    from txnlog.kafka.wire import transaction_state_partition_for

    return transaction_state_partition_for(tid, COPY_PARTITIONS - 1)  # partition 3 stays empty


def test_live_source_reads_writer_made_records(cluster, spark) -> None:
    import confluent_kafka

    from txnlog.brokerlog.encode import encode_transaction_log_key, encode_transaction_log_value
    from txnlog.engine.spark.live_source import LiveTxnStateSource, live_options
    from txnlog.model.rows import TXN_STATE_SCHEMA

    b = cluster["bootstrap"]
    _create_topic(b, COPY_TOPIC, COPY_PARTITIONS)
    records = _written_records()
    p = confluent_kafka.Producer({"bootstrap.servers": b, "linger.ms": 20, "log_level": 3})
    delivered: dict[int, tuple[int, int, int]] = {}

    def cb(i: int):
        def done(err, msg):
            assert err is None, err
            delivered[i] = (msg.partition(), msg.offset(), msg.timestamp()[1])

        return done

    # Record timestamps near now: a broker deletes records older than its retention.
    t_now = int(time.time() * 1000) - 60_000
    for i, r in enumerate(records):
        value = (
            None
            if r.get("tombstone")
            else encode_transaction_log_value(**{k: v for k, v in r.items() if k != "transactional_id"})
        )
        p.produce(
            COPY_TOPIC,
            key=encode_transaction_log_key(r["transactional_id"]),
            value=value,
            partition=_partition_for(r["transactional_id"]),
            timestamp=t_now + i,
            on_delivery=cb(i),
        )
    # One record that is not a TransactionLogKey: a quarantine row, the rest still read.
    p.produce(COPY_TOPIC, key=b"\x00\x07junk", value=b"x", partition=0, on_delivery=cb(len(records)))
    assert p.flush(30) == 0

    spark.dataSource.register(LiveTxnStateSource)
    df = spark.read.format("txnlog_live_txn_state").options(**live_options(b, {}, topic=COPY_TOPIC)).load()
    assert df.rdd.getNumPartitions() == COPY_PARTITIONS
    table = df.toArrow()
    assert table.schema.equals(TXN_STATE_SCHEMA)  # exactly the offline schema
    rows = table.to_pylist()
    got = {(r["coordinator_partition"], r["record_offset"]): r for r in rows if r["kind"] == "record"}
    assert len(got) == len(records)
    for i, w in enumerate(records):
        part, offset, ts = delivered[i]
        r = got[(part, offset)]
        assert (r["broker"], r["file"], r["record_timestamp"], r["transactional_id"]) == (
            "live",
            f"kafka://{COPY_TOPIC}-{part}",
            ts,
            w["transactional_id"],
        )
        if w.get("tombstone"):
            assert r["is_tombstone"] and r["producer_id"] is None and r["partitions"] is None
            continue
        assert not r["is_tombstone"] and r["key_version"] == 0 and r["value_version"] == w["version"]
        assert (r["producer_id"], r["producer_epoch"], r["timeout_ms"], r["state"]) == (
            w["producer_id"],
            w["producer_epoch"],
            w["transaction_timeout_ms"],
            w["state"],
        )
        assert (r["last_update_timestamp"], r["txn_start_timestamp"]) == (
            w["last_update_timestamp_ms"],
            w["start_timestamp_ms"],
        )
        want_parts = None if w["partitions"] is None else [f"{t}-{p}" for t, ps in w["partitions"].items() for p in ps]
        assert r["partitions"] == want_parts
        if w["version"] == 1:  # tagged fields exist only in v1
            assert (r["previous_producer_id"], r["next_producer_id"], r["client_transaction_version"]) == (
                w["previous_producer_id"],
                w["next_producer_id"],
                w["client_transaction_version"],
            )
    quarantine = [r for r in rows if r["kind"] == "quarantine"]
    junk_offset = delivered[len(records)][1]
    assert len(quarantine) == 1
    assert (quarantine[0]["coordinator_partition"], quarantine[0]["position"]) == (0, junk_offset)
    assert f"offset {junk_offset}" in quarantine[0]["detail"]
