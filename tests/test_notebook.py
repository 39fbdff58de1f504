"""The forensic notebook runs the job itself, top to bottom, in a real Jupyter kernel (its own Spark
session), on a written incident; tests/reports/test_notebooks.py runs both notebooks over a sample history."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.kernel import execute
from txnlog.brokerlog.scenarios import write_scenario

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "forensics.ipynb"


@pytest.mark.spark
def test_forensics_notebook_runs_the_job(tmp_path):
    truth = write_scenario("coordinator_completed", tmp_path / "logs", seed=1)
    done = execute(
        NOTEBOOK,
        tmp_path / "executed",
        {"LOGS": str(tmp_path / "logs"), "OUTPUT": str(tmp_path / "out"), "CLUSTER": "nb"},
        collect='{"findings": len(findings), "plan": len(plan), "anomalies": len(anomalies)}',
    )
    printed = done.text()
    hanging = [f for f in truth.findings if f.verdict == "HANGING"]
    assert hanging
    for f in hanging:
        assert f"--start-offset {f.start_offset}" in printed
        assert f"[HANGING {f.reason}] {f.topic}-{f.partition}" in printed
    assert done.values == {"findings": len(truth.findings), "plan": len(hanging), "anomalies": 0}  # no fault injected
    assert len(done.figures) == 4, "the notebook should draw its four plots"
