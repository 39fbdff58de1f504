"""The forensic notebook runs top to bottom on a written incident (cells executed in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnlog.brokerlog.scenarios import write_scenario

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "forensics.ipynb"


@pytest.mark.spark
def test_forensics_notebook_runs(spark, tmp_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    truth = write_scenario("coordinator_completed", tmp_path / "logs", seed=1)
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    exec("".join(cells[0]["source"]), namespace)  # the parameters cell
    namespace.update(LOGS=str(tmp_path / "logs"), OUTPUT=str(tmp_path / "out"), CLUSTER="nb")
    for cell in cells[1:]:
        exec("".join(cell["source"]), namespace)
    printed = capsys.readouterr().out
    hanging = [f for f in truth.findings if f.verdict == "HANGING"]
    assert hanging
    for f in hanging:
        assert f"--start-offset {f.start_offset}" in printed
        assert f"[HANGING {f.reason}] {f.topic}-{f.partition}" in printed
    assert len(namespace["findings"]) == len(truth.findings)
    import matplotlib.pyplot as plt

    assert plt.get_fignums(), "the notebook should draw its plots"
    plt.close("all")
