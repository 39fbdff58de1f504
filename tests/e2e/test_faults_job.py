"""Faults during the write, run as a user runs the job (``./spark-submit.sh``): a driver killed between two
tables' commits, and two runs writing one output at once.

The protocol under test (txnlog.pipeline.run.run, txnlog.output.output_dir.output_lock): a run's ``runs`` row says RUNNING
before its first table and SUCCEEDED after its last; every reader shows the newest SUCCEEDED run; runs into
one local output take turns on ``<output>/_txnlog_write.lock`` (flock: a killed holder frees it).

The driver is paused between two commits through the ``TXNLOG_TEST_PAUSE_AFTER`` seam
(txnlog.pipeline.write._pause_for_fault_tests) and then killed with SIGKILL, process group and all, as an OOM
killer or a lost node would. Every run that is paused, killed or gives up is ``./spark-submit.sh``; the others
-- the reference run, the complete run before a killed one, the rerun after it, the run that waits for a
paused one's lock -- are the job script's ``main`` in this process, on the shared Spark session
(tests/e2e/jobrun.py): another process to the paused one, as the lock (flock) sees it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import pytest

from tests.e2e.jobrun import SUBMIT, run_in_process, run_job
from tests.reports.test_dashboards import DASHBOARDS, _duckdb
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.ops import cli
from txnlog.output import output_dir
from txnlog.output.delta import read_table
from txnlog.output.output_dir import LOCK_FILE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CLUSTER = "faults"
T1 = "2024-06-10T12:00:00.000Z"
T2 = "2024-06-10T13:00:00.000Z"
TABLES = ("transactions", "findings", "abort_recommendations", "partition_health", "coordinator_state", "runs")


def _start(*args: str, cwd: Path, pause: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["TXNLOG_TEST_PAUSE_AFTER"] = pause
    return subprocess.Popen(
        [str(SUBMIT), "--driver-memory", "1g", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kill takes the JVM and the Python driver
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the job ended (rc {proc.returncode}) before pausing:\n{err[-4000:]}")
        assert time.monotonic() < deadline, f"the job did not reach the pause point ({path})"
        time.sleep(0.2)


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def _rows(output: str, table: str, as_of: str) -> list[dict]:
    moment = datetime.fromisoformat(as_of.replace("Z", "+00:00")).astimezone(UTC)
    return [r for r in read_table(output, table).to_pylist() if r["cluster"] == CLUSTER and r["as_of"] == moment]


def _content(rows: list[dict]) -> Counter:
    """A run's rows as a multiset, without the columns that name the run (its id and times)."""
    volatile = {"run_id", "started_at", "finished_at", "config", "inputs"}
    return Counter(
        json.dumps({k: v for k, v in r.items() if k not in volatile}, default=str, sort_keys=True) for r in rows
    )


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli.main(list(argv), out), out.getvalue()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    write_scenario("no_transactional_id", root / "logs", seed=3)
    return root


@pytest.fixture(scope="module")
def clean(spark, logs) -> str:
    """One uninterrupted run at T2 into its own output: what every interrupted output must end up holding
    (in this process, on the shared session)."""
    proc = run_in_process(spark, "--logs", "logs", "--output", "clean", "--cluster", CLUSTER, "--as-of", T2, cwd=logs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return str(logs / "clean")


def test_a_driver_killed_between_commits_leaves_no_visible_run_and_the_rerun_replaces_it(spark, logs, clean):
    out = str(logs / "killed")
    done = run_in_process(spark, "--logs", "logs", "--output", "killed", "--cluster", CLUSTER, "--as-of", T1, cwd=logs)
    assert done.returncode == 0, done.stderr[-3000:]

    paused = logs / "paused-findings"
    proc = _start(
        "--logs", "logs", "--output", "killed", "--cluster", CLUSTER, "--as-of", T2,
        cwd=logs, pause=f"findings:{paused}",
    )  # fmt: skip
    _wait_for(paused, proc)
    _kill(proc)

    # The killed run wrote transactions and findings, then died: its runs row says RUNNING.
    assert _rows(out, "findings", T2), "the pause came after the findings commit: its rows are in the table"
    assert [r["status"] for r in _rows(out, "runs", T2)] == ["RUNNING"]
    assert [r["status"] for r in _rows(out, "runs", T1)] == ["SUCCEEDED"]
    # Readers show the newest complete run (T1), not the killed one.
    rc, printed = _cli("find-hanging", "--output", out, "--format", "json", "--verdict", "all")
    shown = [json.loads(line) for line in printed.splitlines() if line.strip()]
    assert shown, "the complete run at T1 has findings (no_transactional_id hangs)"
    t1_findings = _rows(out, "findings", T1)
    assert len(shown) == len(t1_findings)
    assert rc == 1  # HANGING in the shown run
    dashboard = _duckdb(out).sql((DASHBOARDS / "current_findings.sql").read_text()).fetchall()
    assert {r[1].astimezone(UTC) for r in dashboard} == {datetime(2024, 6, 10, 12, tzinfo=UTC)}
    # The lock died with the driver: the rerun does not wait, and replaces the killed run's rows.
    rerun = run_in_process(spark, "--logs", "logs", "--output", "killed", "--cluster", CLUSTER, "--as-of", T2, cwd=logs)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "waiting for the run writing" not in rerun.stdout + rerun.stderr
    for table in TABLES:
        assert _content(_rows(out, table, T2)) == _content(_rows(clean, table, T2)), table
    assert _content(_rows(out, "findings", T1)) == _content(t1_findings)


def test_two_runs_into_one_output_write_in_turn(spark, logs, clean):
    """Two first runs of one (cluster, as_of) at once: the second (this process) waits for the first's lock,
    then replaces its rows; one copy of each row, one SUCCEEDED runs row.

    The first holds the lock, paused after its first commit, until the second has found the lock taken (the
    lock's holder read for the line it prints): then the pause ends and the first goes on while the second
    waits (the assertion below checks that the second did wait)."""
    out = str(logs / "shared")
    paused = logs / "paused-transactions"
    first = _start(
        "--logs", "logs", "--output", "shared", "--cluster", CLUSTER, "--as-of", T2,
        cwd=logs, pause=f"transactions:{paused}",
    )  # fmt: skip
    try:
        _wait_for(paused, first)
        assert (Path(out) / LOCK_FILE).read_text().startswith("run ")
        holder = output_dir._lock_holder

        def release_the_first(path: str) -> str:
            paused.unlink(missing_ok=True)  # the second found the lock taken: the first may go on
            return holder(path)

        with mock.patch.object(output_dir, "_lock_holder", release_the_first):
            second = run_in_process(
                spark, "--logs", "logs", "--output", "shared", "--cluster", CLUSTER, "--as-of", T2, cwd=logs
            )
        first_out, first_err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            _kill(first)
    assert first.returncode == 0, first_err[-3000:]
    assert second.returncode == 0, second.stderr[-3000:]
    assert "waiting for the run writing" in second.stdout + second.stderr, "the second run overlapped the first's write"
    assert not paused.exists(), "the first was let go by the second's wait, not by its pause's end"
    for table in TABLES:
        assert _content(_rows(out, table, T2)) == _content(_rows(clean, table, T2)), table


def test_a_run_that_cannot_take_the_lock_in_time_fails_with_one_line_and_writes_nothing(logs):
    out = logs / "busy"
    paused = logs / "paused-busy"
    holder = _start(
        "--logs", "logs", "--output", "busy", "--cluster", CLUSTER, "--as-of", T1,
        cwd=logs, pause=f"transactions:{paused}",
    )  # fmt: skip
    try:
        _wait_for(paused, holder)
        (logs / "short-wait.yaml").write_text("write_lock_wait_s: 1\n")
        before = sorted(p.name for p in (out / "findings").glob("*")) if (out / "findings").exists() else []
        proc = run_job(
            "--config", "short-wait.yaml", "--logs", "logs", "--output", "busy", "--cluster", CLUSTER,
            "--as-of", T2, cwd=logs,
        )  # fmt: skip
        assert proc.returncode == 3, proc.stderr[-3000:]
        # spark-submit runs the Python driver with its stderr joined to stdout (PythonRunner)
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("txnlog: error:")]
        assert len(errors) == 1 and "another run is writing" in errors[0] and "write_lock_wait_s" in errors[0]
        assert "pid" in errors[0], errors[0]
        after = sorted(p.name for p in (out / "findings").glob("*")) if (out / "findings").exists() else []
        assert after == before
        assert not _rows(str(out), "transactions", T2)
    finally:
        _kill(holder)
