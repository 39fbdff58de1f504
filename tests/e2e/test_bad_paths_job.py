"""Paths and configuration a user gets wrong, through ``./spark-submit.sh``: each is
one line on stderr naming the path or key and what to do, exit code 2, and nothing written (no output
directory appears). These checks run before spark-submit starts a JVM (``--validate-only``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.jobrun import run_job
from txnlog.brokerlog.scenarios import write_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad-paths")
    write_scenario("healthy", root / "logs", seed=2)
    (root / "loop").mkdir()
    os.symlink(root / "loop" / "b", root / "loop" / "a")
    os.symlink(root / "loop" / "a", root / "loop" / "b")
    os.symlink(root / "self", root / "self")
    (root / "notes.txt").write_text("an operator's notes, not a log dir\n")
    (root / "unknown.yaml").write_text("outptu: ./elsewhere\n")
    (root / "wrong-type.yaml").write_text("max_transaction_timeout_ms: fifteen minutes\n")
    (root / "wrong-list.yaml").write_text("logs: {a: 1}\n")
    return root


CASES = {
    "missing path": (["--logs", "nowhere/kafka-logs"], ("nowhere/kafka-logs", "no such file")),
    "symlink loop in a log dir": (["--logs", "loop"], ("loop",)),
    "a symlink to itself": (["--logs", "self"], ("self",)),
    "a file that is not a log": (["--logs", "notes.txt"], ("notes.txt",)),
    "missing dump file": (["--dump-log", "gone.txt"], ("gone.txt",)),
    "unknown config key": (["--config", "unknown.yaml", "--logs", "logs"], ("outptu", "unknown.yaml")),
    "wrong type": (["--config", "wrong-type.yaml", "--logs", "logs"], ("max_transaction_timeout_ms", "integer")),
    "wrong container type": (["--config", "wrong-list.yaml", "--logs", "logs"], ("logs",)),
    "missing config file": (["--config", "absent.yaml", "--logs", "logs"], ("absent.yaml",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_path_or_config_is_one_line_exit_2_and_writes_nothing(work, case):
    args, named = CASES[case]
    out = work / f"out-{case.replace(' ', '-')}"
    proc = run_job(*args, "--output", str(out), cwd=work, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("txnlog: error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for word in named:
        assert word in errors[0], errors[0]
    assert not out.exists(), "nothing is written for a run that was refused"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: an unreadable path cannot be made")
def test_unreadable_log_dir(work, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        proc = run_job("--logs", str(locked), "--output", str(tmp_path / "out"), cwd=work, timeout=300)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2
    assert str(locked) in proc.stderr and "Traceback" not in proc.stderr
