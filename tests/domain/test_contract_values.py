"""The enums' values are the output contract's text (docs/design.md §3, §4), spelled out here by hand: renaming
a member is free, changing a value changes every dashboard's filter and must fail here first."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from txnlog.broker import classify
from txnlog.broker.classify import Owner, Reason, Safety, Verdict
from txnlog.kafka.wire import ControlType, TransactionState
from txnlog.model.contract import InputSource, Outcome

# docs/design.md §3 (findings.verdict, abort_recommendations.safety, transactions.outcome, every source
# column) and §4 (the reasons, in the order of its table). Literals on purpose: this is the contract.
CONTRACT = {
    Verdict: ["HANGING", "LATE"],
    Reason: [
        "NO_TRANSACTIONAL_ID",
        "TRANSACTIONAL_ID_EXPIRED",
        "COORDINATOR_COMPLETED",
        "PARTITION_NOT_IN_TRANSACTION",
        "MARKERS_PENDING",
        "COORDINATOR_TIMEOUT_OVERDUE",
        "TWO_PHASE_IN_DOUBT",
        "COORDINATOR_STUCK",
    ],
    Safety: ["SAFE", "VERIFY_FIRST"],
    InputSource: ["segments", "dump_log", "live_log", "live"],
    Outcome: ["COMMIT", "ABORT", "OPEN", "UNKNOWN"],
    # not an output column, but the Spark steps and classify.verdicts meet on these values
    Owner: ["current", "next", "expired", "none"],
}


@pytest.mark.parametrize("enum", list(CONTRACT), ids=lambda e: e.__name__)
def test_values_are_the_contracts(enum) -> None:
    assert [m.value for m in enum] == CONTRACT[enum]
    # what lands in a table is the value, as a plain string: Arrow, numpy, str() and f-strings alike
    assert pa.array(list(enum), pa.string()).to_pylist() == CONTRACT[enum]
    assert [str(m) for m in enum] == [f"{m}" for m in enum] == CONTRACT[enum]


def test_verdict_arrays_hold_plain_strings() -> None:
    """classify.verdicts' arrays go into Arrow and Spark as they are: plain str, not enum members."""
    row = {
        "owner_match": Owner.NONE,
        "owner_state": None,
        "owner_partitions": None,
        "owner_timeout_ms": None,
        "owner_txn_start_ms": None,
        "topic": "orders",
        "partition": 0,
    }
    schema = {"owner_partitions": pa.list_(pa.string()), "owner_timeout_ms": pa.int64()}
    table = pa.table({k: pa.array([v], schema.get(k)) for k, v in row.items()})
    verdict, reason, safety = classify.verdicts(table, classify.Thresholds(as_of_ms=0))
    assert [type(a[0]) for a in (verdict, reason, safety)] == [str, str, str]
    assert (verdict[0], reason[0], safety[0]) == ("HANGING", "NO_TRANSACTIONAL_ID", "SAFE")
    assert np.isin(reason, classify.HANGING_REASONS).all()


def test_state_sets_are_kafkas_names() -> None:
    """The state sets compare with the coordinator_state.state column, which holds Kafka's names."""
    assert classify.COMPLETED_STATES == ("Empty", "CompleteCommit", "CompleteAbort")
    assert classify.PREPARE_STATES == ("PrepareCommit", "PrepareAbort")
    assert classify.IN_FLIGHT_STATES == ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
    assert {s.kafka_name for s in TransactionState} >= {*classify.COMPLETED_STATES, *classify.IN_FLIGHT_STATES}


def test_outcomes_of_markers_are_control_type_names() -> None:
    """transactions.outcome of a marker and the evidence's 'ABORT marker' are ControlType's names."""
    assert Outcome.ABORT == ControlType.ABORT.name and Outcome.COMMIT == ControlType.COMMIT.name
