"""Verdict rules (docs/design.md §4) on hand-built candidate rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from txnlog.broker import classify as C
from txnlog.rules.remedy import evidence_and_advice

AS_OF = 10_000_000_000
BASE = {
    "topic": "orders",
    "partition": 3,
    "producer_id": 4711,
    "producer_epoch": 3,
    "start_offset": 552,
    "last_offset": 560,
    "batch_count": 2,
    "last_timestamp_ms": AS_OF - 3_600_000,
    "idle_ms": 3_600_000,
    "owner_match": C.Owner.CURRENT,
    "owner_state": "Ongoing",
    "owner_partitions": ["orders-3"],
    "owner_timeout_ms": 60_000,
    "owner_txn_start_ms": AS_OF - 60_000 + 1,
}

CASES = [
    (
        "never-seen",
        {"owner_match": C.Owner.NONE, "owner_state": None, "owner_partitions": None},
        "HANGING",
        "NO_TRANSACTIONAL_ID",
        "SAFE",
    ),
    (
        "expired",
        {"owner_match": C.Owner.EXPIRED, "owner_state": "CompleteCommit"},
        "HANGING",
        "TRANSACTIONAL_ID_EXPIRED",
        "SAFE",
    ),
    ("dead", {"owner_state": "Dead", "owner_partitions": []}, "HANGING", "TRANSACTIONAL_ID_EXPIRED", "SAFE"),
    ("empty", {"owner_state": "Empty", "owner_partitions": []}, "HANGING", "COORDINATOR_COMPLETED", "SAFE"),
    (
        "complete-abort",
        {"owner_state": "CompleteAbort", "owner_partitions": []},
        "HANGING",
        "COORDINATOR_COMPLETED",
        "SAFE",
    ),
    # the next producer id of a rollover under way owns nothing yet; a batch of it means the copy of
    # __transaction_state is older than the record that made it the id's
    (
        "next-producer-id-of-a-prepare",
        {"owner_match": C.Owner.NEXT, "owner_state": "PrepareCommit"},
        "HANGING",
        "NO_TRANSACTIONAL_ID",
        "VERIFY_FIRST",
    ),
    ("other-partition", {"owner_partitions": ["orders-4"]}, "HANGING", "PARTITION_NOT_IN_TRANSACTION", "SAFE"),
    ("prepare-commit", {"owner_state": "PrepareCommit"}, "LATE", "MARKERS_PENDING", None),
    (
        "prepare-abort-2pc",
        {"owner_state": "PrepareAbort", "owner_timeout_ms": 2147483647},
        "LATE",
        "MARKERS_PENDING",
        None,
    ),
    ("two-phase", {"owner_timeout_ms": 2147483647, "owner_txn_start_ms": 0}, "LATE", "TWO_PHASE_IN_DOUBT", None),
    ("overdue", {"owner_txn_start_ms": AS_OF - 120_000}, "LATE", "COORDINATOR_TIMEOUT_OVERDUE", None),
    ("within-own-timeout", {}, None, None, None),
    # a 2.x/3.x dump prints no TxnStartTimestamp: the last update (never earlier) stands in for it
    (
        "overdue-start-unknown",
        {"owner_txn_start_ms": None, "owner_last_update_ms": AS_OF - 120_000},
        "LATE",
        "COORDINATOR_TIMEOUT_OVERDUE",
        None,
    ),
    (
        "start-unknown-recent-update",
        {"owner_txn_start_ms": None, "owner_last_update_ms": AS_OF - 1_000},
        None,
        None,
        None,
    ),
]


@pytest.mark.parametrize("override,verdict,reason,safety", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdicts(override, verdict, reason, safety):
    table = pa.Table.from_pylist([{**BASE, **override}])
    v, r, s = C.verdicts(table, C.Thresholds(as_of_ms=AS_OF))
    assert (v[0] or None, r[0] or None, s[0] or None) == (verdict, reason, safety)


def test_partial_txn_state_needs_verification():
    table = pa.Table.from_pylist([{**BASE, "owner_match": C.Owner.NONE, "owner_state": None, "owner_partitions": None}])
    _, r, s = C.verdicts(table, C.Thresholds(as_of_ms=AS_OF, all_txn_state_partitions_read=False))
    assert (r[0], s[0]) == ("NO_TRANSACTIONAL_ID", "VERIFY_FIRST")


def test_seed_case_evidence_names_the_abort_marker():
    row = {
        **BASE,
        "owner_state": "CompleteAbort",
        "owner_partitions": [],
        "transactional_id": "txn-7",
        "prev_marker_type": 0,
        "prev_marker_offset": 551,
        "prev_marker_epoch": 3,
        "owner_last_update_ms": 1763777647000,
    }
    evidence, advice = evidence_and_advice(row, "COORDINATOR_COMPLETED", C.Thresholds(as_of_ms=AS_OF))
    assert evidence.startswith(
        "2 batches of producer 4711 epoch 3 at offsets 552–560 follow that producer's ABORT marker at offset 551"
    )
    assert "txn-7 CompleteAbort since 2025-11-22 02:14:07Z" in evidence
    assert "KAFKA-14053" in evidence
    assert advice.startswith("Abort it")


@pytest.mark.parametrize("replicas", [["live"], ["broker-1"]])
def test_no_marker_evidence_says_what_was_read(replicas):
    """A transaction with no marker of its producer before it: read live, the evidence says the claim is
    about the offsets read (the Kafka source reads the unstable tail and a look-back)."""
    row = {**BASE, "transactional_id": "txn-7", "replicas": replicas, "log_start_offset": 500}
    evidence, _ = evidence_and_advice(row, "NO_TRANSACTIONAL_ID", C.Thresholds(as_of_ms=AS_OF))
    assert evidence.startswith(
        "2 batches of producer 4711 epoch 3 at offsets 552–560 are in a transaction that has no marker"
    )
    live = "no earlier marker of that producer lies in the offsets read live (from offset 500; --live-lookback-bytes"
    assert (live in evidence) == (replicas == ["live"])


def test_commands_match_the_contract():
    assert C.abort_command(None, "orders", 3, 552) == (
        "kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic orders --partition 3 --start-offset 552"
    )
    assert C.legacy_abort_command("k1:9092", "orders", 3, 4711, 3, -1) == (
        "kafka-transactions.sh --bootstrap-server k1:9092 abort --topic orders --partition 3 --producer-id 4711 "
        "--producer-epoch 3 --coordinator-epoch 0"
    )


def test_coordinator_stuck():
    rows = [
        # Ongoing, 60 s timeout, stuck 2 h, partitions not in input -> stuck
        {
            "state": "Ongoing",
            "timeout_ms": 60_000,
            "txn_start_timestamp": AS_OF - 7_200_000,
            "last_update_timestamp": AS_OF - 7_200_000,
            "is_tombstoned": False,
            "any_partition_in_input": False,
        },
        # same, but a listed partition is in the input -> the partition finding tells the story
        {
            "state": "Ongoing",
            "timeout_ms": 60_000,
            "txn_start_timestamp": AS_OF - 7_200_000,
            "last_update_timestamp": AS_OF - 7_200_000,
            "is_tombstoned": False,
            "any_partition_in_input": True,
        },
        # 2PC never stuck by time
        {
            "state": "Ongoing",
            "timeout_ms": 2147483647,
            "txn_start_timestamp": 0,
            "last_update_timestamp": 0,
            "is_tombstoned": False,
            "any_partition_in_input": False,
        },
        # final state
        {
            "state": "CompleteCommit",
            "timeout_ms": 60_000,
            "txn_start_timestamp": 0,
            "last_update_timestamp": 0,
            "is_tombstoned": False,
            "any_partition_in_input": False,
        },
        # PrepareCommit only 10 minutes: within timeout + max timeout (16 min)
        {
            "state": "PrepareCommit",
            "timeout_ms": 60_000,
            "txn_start_timestamp": AS_OF - 600_000,
            "last_update_timestamp": AS_OF - 600_000,
            "is_tombstoned": False,
            "any_partition_in_input": False,
        },
    ]
    mask = C.coordinator_stuck(pa.Table.from_pylist(rows), C.Thresholds(as_of_ms=AS_OF))
    assert mask.tolist() == [True, False, False, False, False]


def test_has_late_transaction_is_past_max_timeout_plus_the_buffer() -> None:
    limit = 900_000 + C.LATE_TRANSACTION_BUFFER_MS
    idle = pa.array([None, limit - 1, limit, limit + 1], pa.int64())
    assert C.has_late_transaction(idle, 900_000).to_pylist() == [None, False, False, True]


def test_only_the_current_producer_id_owns_a_transaction():
    """The record a KIP-890 rollover completes with names the old producer id as the previous one, and a record
    in Prepare* names the new one as the next: neither is the id's producer id for its markers
    (``TransactionMarkerChannelManager.addTxnMarkersToSend`` sends ``txnMetadata.producerId``), so neither owns
    an open transaction; a batch of the next one is NO_TRANSACTIONAL_ID, VERIFY_FIRST (README, "How txnlog
    decides")."""
    from txnlog.rules.coordinator_tables import producer_owners

    def record(tid, state, pid, previous, next_pid, partitions, offset):
        return {
            "transactional_id": tid, "state": state, "partitions": partitions, "timeout_ms": 60_000,
            "txn_start_timestamp": 0, "last_update_timestamp": 0, "coordinator_partition": 7,
            "coordinator_epoch": 0, "producer_id": pid, "record_offset": offset, "is_tombstoned": False,
            "previous_producer_id": previous, "next_producer_id": next_pid,
        }  # fmt: skip

    state = pa.Table.from_pylist(
        [
            record("fx-ledger", "CompleteCommit", 39005, 39004, -1, [], 10),  # rolled over from 39004
            record("fx-rates", "PrepareCommit", 5000, 5000, 5001, ["orders-3"], 11),  # rolling over to 5001
        ]
    )
    owners = {r["pid"]: (r["transactional_id"], r["owner_match"]) for r in producer_owners(state).to_pylist()}
    assert owners == {39005: ("fx-ledger", "current"), 5000: ("fx-rates", "current"), 5001: ("fx-rates", "next")}
