"""``python -m txnlog.brokerlog`` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from txnlog.brokerlog.__main__ import main, parse_size


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1GiB", 1 << 30),
        ("256MiB", 256 << 20),
        ("100MB", 100_000_000),
        ("64k", 65536),
        ("1048576", 1 << 20),
        ("1.5G", 3 << 29),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


def test_writes_scenario_summary_and_ground_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dump"
    assert main(["--out", str(out), "--scenario", "markers_pending", "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "MARKERS_PENDING" in printed and "as_of" in printed
    truth = json.loads((out / "ground-truth.json").read_text())
    assert truth["seed"] == 3 and [f["reason"] for f in truth["findings"]] == ["MARKERS_PENDING"]
    assert (out / "broker-1" / "__transaction_state-0").is_dir()
    # Not empty any more: refused without --force, one line on stderr, exit code 2.
    assert main(["--out", str(out), "--scenario", "healthy"]) == 2
    assert "--force" in capsys.readouterr().err


def test_usage_errors_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", "sample"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--scenario", "nope"]) == 2
    assert "unknown --scenario" in capsys.readouterr().err
    assert main(["--list"]) == 0
    assert "bulk" in capsys.readouterr().out.split()


def test_help_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "txnlog.brokerlog", "--help"], capture_output=True, text=True, check=True
    )
    assert "--scenario" in done.stdout and "partial_txn_state" in done.stdout
