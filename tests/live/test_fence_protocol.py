"""``txnlog fence`` where the session's broker cannot show it: a cluster without DescribeTransactions (a Kafka 2.8
broker's ApiVersions, on the recorded-response double of tests/live/test_admin_protocol.py), and the refusals whose
coordinator state a client cannot make a broker hold on purpose (a two-phase-commit transaction, markers pending), on
DescribeTransactions answers as :func:`txnlog.live.admin.describe_transactions` returns them."""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from typing import Any

import pytest

from tests.live.test_admin_protocol import BOOTSTRAP, LEADERS, metadata_answer, wire  # noqa: F401 (fixture)
from txnlog.ops import cli
from txnlog.ops.fence import FenceRefused, FenceRequest, validate_fence

NOW = 1_760_000_000_000


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = cli.main(["fence", "--bootstrap-server", BOOTSTRAP, *argv], out)
    return code, out.getvalue(), err.getvalue()


def test_a_cluster_without_describe_transactions_names_the_version(wire: Any) -> None:  # noqa: F811
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    from kafka.protocol.metadata import FindCoordinatorResponse

    def find(node: Any, request: Any) -> Any:  # FindCoordinator v3 (one key): a 2.8 broker's
        assert request.key == "cart-writer" and request.key_type == 1
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=0, error_message=None, node_id=1, host="b1", port=9092
        )

    brokers = wire(
        {"Metadata": metadata_answer(LEADERS), "FindCoordinator": find}, api_versions=BROKER_API_VERSIONS[(2, 8)]
    )
    code, out, err = _run("--transactional-id", "cart-writer", "--execute")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "does not answer DescribeTransactions" in line and "needs Kafka 3.2+" in line, line
    assert "forceTerminateTransaction" in line
    assert "DescribeTransactions" not in brokers.apis() and "InitProducerId" not in brokers.apis()


def _description(**over: Any) -> dict[str, Any]:
    return {
        "transactional_id": "xa-bridge",
        "coordinator_id": 1,
        "state": "Ongoing",
        "producer_id": 40018,
        "producer_epoch": 0,
        "timeout_ms": 60_000,
        "txn_start_timestamp": NOW - 3_600_000,
        "partitions": ["settlements-0", "settlements-1"],
        **over,
    }


def test_two_phase_is_refused_unless_decided() -> None:
    d = _description(timeout_ms=2147483647)
    with pytest.raises(FenceRefused, match="two-phase-commit transaction .* pass --two-phase-decided"):
        validate_fence(FenceRequest("xa-bridge", 40018, 0), d, NOW)
    plan = validate_fence(FenceRequest("xa-bridge", 40018, 0, two_phase_decided=True), d, NOW)
    assert plan.two_phase and plan.partitions == ("settlements-0", "settlements-1")
    assert "its manager has decided" in plan.evidence(NOW)


@pytest.mark.parametrize("state", ["PrepareCommit", "PrepareAbort", "PrepareEpochFence"])
def test_markers_pending_is_never_fenced(state: str) -> None:
    with pytest.raises(FenceRefused, match="CONCURRENT_TRANSACTIONS"):
        validate_fence(FenceRequest("xa-bridge"), _description(state=state), NOW)


def test_past_its_timeout_is_measured_from_the_transaction_start() -> None:
    d = _description(txn_start_timestamp=NOW - 60_000)  # exactly at its timeout: the coordinator's turn
    with pytest.raises(FenceRefused, match="still within its 60000 ms timeout"):
        validate_fence(FenceRequest("xa-bridge"), d, NOW)
    assert validate_fence(FenceRequest("xa-bridge"), d, NOW + 1).producer_epoch == 0
    with pytest.raises(FenceRefused, match="no transaction start time"):
        validate_fence(FenceRequest("xa-bridge"), _description(txn_start_timestamp=-1), NOW)
