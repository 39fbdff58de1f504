"""The forensic notebook runs the job itself, top to bottom, in a real Jupyter kernel (its own Spark
session), on a written incident (consumer groups behind a hanging transaction and a transactional offset commit
left pending); tests/reports/test_notebooks.py runs both notebooks over a sample history."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.kernel import execute
from txnlog.brokerlog.scenarios import write_scenario

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "forensics.ipynb"


@pytest.mark.spark
def test_forensics_notebook_runs_the_job(tmp_path):
    truth = write_scenario("groups_behind_hanging_transaction", tmp_path / "logs", seed=1)
    done = execute(
        NOTEBOOK,
        tmp_path / "executed",
        {"LOGS": str(tmp_path / "logs"), "OUTPUT": str(tmp_path / "out"), "CLUSTER": "nb"},
        collect='{"findings": len(findings), "plan": len(plan), "anomalies": len(anomalies), '
        '"who": who[["group", "status", "topic", "partition", "holding_producer_id", "remedy"]].to_dict("records")}',
    )
    printed = done.text()
    hanging = [f for f in truth.findings if f.verdict == "HANGING"]
    assert hanging
    for f in hanging:
        assert f"--start-offset {f.start_offset}" in printed
        assert f"[HANGING {f.reason}] {f.topic}-{f.partition}" in printed
    who = done.values.pop("who")
    # the plan: an abort per HANGING finding, a fence per partition of a transaction overdue on its coordinator
    fences = [f for f in truth.findings if f.reason == "COORDINATOR_TIMEOUT_OVERDUE"]
    assert done.values == {"findings": len(truth.findings), "plan": len(hanging) + len(fences), "anomalies": 0}
    # who is blocked, first: the groups the scenario stalled (its notes), behind which transaction, what unblocks them
    stalled = [b for b in truth.notes["blocked_consumers"] if b["status"] in ("BLOCKED", "UNSTABLE_OFFSET_COMMIT")]
    assert sorted(
        (w["group"], w["status"], w["topic"], w["partition"], w["holding_producer_id"]) for w in who
    ) == sorted((b["group"], b["status"], b["topic"], b["partition"], b["holding_producer_id"]) for b in stalled)
    remedies = {w["group"]: w["remedy"] for w in who}
    assert remedies["dashboards"] == "ABORT"  # the hanging transaction's abort (abort_recommendations.blocked_groups)
    assert remedies["billing"] == "FENCE"  # the LATE transaction in __consumer_offsets: the coordinator must end it
    assert printed.index("[BLOCKED] dashboards on page-views-0") < printed.index("[HANGING NO_TRANSACTIONAL_ID]")
    assert "kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic page-views --partition 0" in printed
    assert len(done.figures) == 5, "the notebook should draw its five plots"
