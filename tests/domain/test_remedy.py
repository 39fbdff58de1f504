"""A remedy for every finding (txnlog.rules.remedy): the remedy, the exact commands with the Kafka version each
needs, when it is safe, and advice that names only commands and verbs that exist."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from txnlog.broker import classify as C
from txnlog.rules.remedy import REMEDY_COLUMNS, remedy_columns, remedy_of

B = "kafka-1:9092"
BASE = {
    "topic": "inventory",
    "partition": 1,
    "start_offset": 455,
    "producer_id": 40017,
    "producer_epoch": 3,
    "transactional_id": "cart-writer",
    "coordinator_partition": 38,
}

CASES = {
    # reason, coordinator state, timeout, safety -> remedy, command, its version, fallback, its version
    "hanging SAFE": (
        ("COORDINATOR_COMPLETED", "CompleteCommit", 60000, "SAFE"),
        "ABORT",
        f"kafka-transactions.sh --bootstrap-server {B} abort --topic inventory --partition 1 --start-offset 455",
        "3.0+",
        f"kafka-transactions.sh --bootstrap-server {B} abort --topic inventory --partition 1 --producer-id 40017 "
        "--producer-epoch 3 --coordinator-epoch 0",
        "before 3.0",
    ),
    "overdue Ongoing": (
        ("COORDINATOR_TIMEOUT_OVERDUE", "Ongoing", 60000, None),
        "FENCE",
        f"kafka-transactions.sh --bootstrap-server {B} forceTerminateTransaction --transactionalId cart-writer",
        "4.1+",
        f"txnlog fence --bootstrap-server {B} --transactional-id cart-writer --producer-id 40017 --producer-epoch 3",
        "3.2+",
    ),
    "stuck Ongoing": (
        ("COORDINATOR_STUCK", "Ongoing", 60000, None),
        "FENCE",
        f"kafka-transactions.sh --bootstrap-server {B} forceTerminateTransaction --transactionalId cart-writer",
        "4.1+",
        f"txnlog fence --bootstrap-server {B} --transactional-id cart-writer --producer-id 40017 --producer-epoch 3",
        "3.2+",
    ),
    "two-phase in doubt": (
        ("TWO_PHASE_IN_DOUBT", "Ongoing", 2147483647, None),
        "WAIT",
        f"kafka-transactions.sh --bootstrap-server {B} forceTerminateTransaction --transactionalId cart-writer",
        "4.1+",
        f"txnlog fence --bootstrap-server {B} --transactional-id cart-writer --producer-id 40017 --producer-epoch 3 "
        "--two-phase-decided",
        "4.1+",
    ),
    "markers pending": (
        ("MARKERS_PENDING", "PrepareCommit", 60000, None),
        "DELIVER_MARKERS",
        f"kafka-transactions.sh --bootstrap-server {B} describe --transactional-id cart-writer",
        "3.0+",
        None,
        None,
    ),
    "stuck PrepareAbort": (
        ("COORDINATOR_STUCK", "PrepareAbort", 60000, None),
        "DELIVER_MARKERS",
        f"kafka-transactions.sh --bootstrap-server {B} describe --transactional-id cart-writer",
        "3.0+",
        None,
        None,
    ),
    "overdue PrepareEpochFence": (
        ("COORDINATOR_TIMEOUT_OVERDUE", "PrepareEpochFence", 60000, None),
        "DELIVER_MARKERS",
        f"kafka-transactions.sh --bootstrap-server {B} describe --transactional-id cart-writer",
        "3.0+",
        None,
        None,
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_remedy_per_finding(case: str) -> None:
    (reason, state, timeout, safety), remedy, command, needs, fallback, fallback_needs = CASES[case]
    r = remedy_of({**BASE, "reason": reason, "coordinator_state": state, "timeout_ms": timeout, "safety": safety}, B)
    assert r.remedy == remedy
    assert r.command == command
    assert (r.kafka_version is None) == (needs is None) and (needs is None or needs in r.kafka_version)
    assert r.fallback_command == fallback
    assert (r.fallback_kafka_version is None) == (fallback_needs is None)
    assert fallback_needs is None or fallback_needs in r.fallback_kafka_version
    assert r.condition and r.advice.endswith(".")


def test_fence_condition_names_the_live_check_and_the_restart() -> None:
    r = remedy_of({**BASE, "reason": "COORDINATOR_TIMEOUT_OVERDUE", "coordinator_state": "Ongoing"}, B)
    assert "producer 40017 epoch 3, Ongoing and past its timeout" in r.condition
    assert "ProducerFencedException" in r.condition and "must restart" in r.condition
    assert "before 3.2: no command" in r.condition


def test_two_phase_is_never_automatic() -> None:
    r = remedy_of({**BASE, "reason": "TWO_PHASE_IN_DOUBT", "coordinator_state": "Ongoing"}, B)
    assert r.condition.startswith("never automatically")
    assert "completeTransaction" in r.advice


def test_markers_pending_names_the_leaders_and_the_failover() -> None:
    r = remedy_of({**BASE, "reason": "MARKERS_PENDING", "coordinator_state": "PrepareCommit"}, B)
    assert "the leader of inventory-1 accepts them" in r.advice and "__transaction_state-38" in r.advice
    assert "CONCURRENT_TRANSACTIONS" in r.condition
    stuck = remedy_of(
        {
            **BASE,
            "topic": None,
            "partition": None,
            "reason": "COORDINATOR_STUCK",
            "state": "PrepareAbort",
            "partitions": ["a-0", "b-1"],
        },
        B,
    )
    assert "the leaders of a-0, b-1 accept them" in stuck.advice
    assert "topic deleted during the prepare" in stuck.advice


def test_verify_first_abort_says_so() -> None:
    r = remedy_of({**BASE, "reason": "NO_TRANSACTIONAL_ID", "safety": "VERIFY_FIRST"}, None)
    assert r.remedy == "ABORT" and r.condition.startswith("VERIFY_FIRST")
    assert "<bootstrap>" in r.command


def test_no_transactional_id_late_finding_has_nothing_to_run() -> None:
    r = remedy_of({**BASE, "transactional_id": None, "reason": "COORDINATOR_TIMEOUT_OVERDUE"}, B)
    assert r.remedy == "NONE" and r.command is None


#: the verbs kafka-transactions.sh has (TransactionsCommand) and txnlog's
REAL_VERBS = {
    "kafka-transactions.sh": {
        "list",
        "describe",
        "describe-producers",
        "abort",
        "find-hanging",
        "forceTerminateTransaction",
    },
    "txnlog": {"fence", "abort", "plan", "find-hanging", "describe", "list"},
}


@pytest.mark.parametrize("reason", list(C.Reason), ids=str)
@pytest.mark.parametrize("state", ["Ongoing", "PrepareCommit", "PrepareAbort", "CompleteAbort", None])
def test_advice_and_commands_name_real_verbs(reason: str, state: str | None) -> None:
    r = remedy_of({**BASE, "reason": reason, "coordinator_state": state, "safety": "SAFE"}, B)
    text = " ".join(x for x in (r.advice, r.command, r.fallback_command, r.condition) if x)
    for tool, verbs in REAL_VERBS.items():
        for m in re.finditer(rf"{re.escape(tool)}(?: --bootstrap-server \S+)? ([\w-]+)", text):
            assert m.group(1) in verbs, f"{tool} {m.group(1)}: not a real verb ({text})"
    assert "force-terminate" not in text


def test_remedy_columns_per_row_null_without_reason() -> None:
    rows = pa.Table.from_pylist(
        [
            {**BASE, "reason": "COORDINATOR_TIMEOUT_OVERDUE", "coordinator_state": "Ongoing"},
            {**BASE, "reason": None, "coordinator_state": "Ongoing"},
        ]
    )
    cols = remedy_columns(rows, B)
    assert list(cols) == list(REMEDY_COLUMNS)
    assert cols["remedy"].to_pylist() == ["FENCE", None]
