"""A run's ``runs`` row tells whether it is complete: RUNNING while it writes, SUCCEEDED
after its last table, FAILED with the error when a write fails; the output's write lock makes a second run
wait or fail with one line. In-process, on the shared Spark session; the killed-driver and concurrent-run
cases run the real job in tests/e2e/test_faults_job.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from txnlog.brokerlog.scenarios import write_scenario
from txnlog.output.delta import read_table
from txnlog.output.output_dir import LOCK_FILE, OutputBusy, output_lock

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

AS_OF = "2024-06-10T12:00:00Z"


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("run-status")
    write_scenario("no_transactional_id", root / "logs", seed=5)
    return root / "logs"


def _config(logs: Path, out: Path):
    from txnlog.model.config import load_config

    return load_config(None, {"logs": [str(logs)], "output": str(out), "cluster": "status", "as_of": AS_OF})


def test_a_complete_run_says_succeeded_and_holds_no_lock(spark, logs, tmp_path):
    from txnlog.pipeline import run

    run(_config(logs, tmp_path / "out"), spark=spark, progress=lambda _: None)
    [row] = read_table(str(tmp_path / "out"), "runs").to_pylist()
    assert (row["status"], row["error"]) == ("SUCCEEDED", None)
    assert row["finished_at"] >= row["started_at"]
    assert row["findings_count"] > 0
    assert (tmp_path / "out" / LOCK_FILE).read_text() == ""  # released: no holder named


def test_a_run_whose_write_fails_says_failed_with_the_error(spark, logs, tmp_path):
    """The findings table's directory is a file: its commit fails after `transactions` was written."""
    from txnlog.pipeline import run

    out = tmp_path / "out"
    out.mkdir()
    (out / "findings").write_text("not a table")
    with pytest.raises(Exception) as raised:
        run(_config(logs, out), spark=spark, progress=lambda _: None)
    [row] = read_table(str(out), "runs").to_pylist()
    assert row["status"] == "FAILED"
    assert row["as_of"] == datetime(2024, 6, 10, 12, tzinfo=UTC)
    assert type(raised.value).__name__ in row["error"]
    assert "\n" not in row["error"]  # one line, whatever the exception's message held
    assert read_table(str(out), "transactions").num_rows > 0  # written before the failure, invisible to readers


HOLDER = textwrap.dedent(
    """
    import sys, time
    from txnlog.output.output_dir import output_lock
    with output_lock(sys.argv[1], "holder-run", wait_s=0):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


@pytest.fixture
def holder(tmp_path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "out"), "30"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_the_lock_names_its_holder_when_a_run_gives_up(holder, tmp_path):
    told: list[str] = []
    with pytest.raises(OutputBusy) as busy, output_lock(str(tmp_path / "out"), "me", wait_s=0.3, progress=told.append):
        pass
    message = str(busy.value)
    assert "holder-run" in message and f"pid {holder.pid}" in message and "write_lock_wait_s" in message
    assert busy.value.exit_code == 3 and "\n" not in message
    assert told and "holder-run" in told[0]


def test_a_killed_holder_frees_the_lock(holder, tmp_path):
    holder.kill()
    holder.wait()
    with output_lock(str(tmp_path / "out"), "next", wait_s=0):
        assert "run next" in (tmp_path / "out" / LOCK_FILE).read_text()
