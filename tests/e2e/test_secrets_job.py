"""A planted secret never leaves the configuration.

A SASL password (and an S3-style secret key in the Spark settings) comes in through the environment, as the
README tells operators to pass it (``${NAME}`` in the YAML). The test runs what a user runs with it, then
greps everything those runs produced: the job's stdout and stderr (success and a failure that talks to a
broker), every byte of every file under the output (Delta logs, Parquet data, the lock file), every string
in every table (``runs.config`` included), Spark's event log, the ``txnlog`` verbs' output in every format,
``txnlog abort``'s dry run and failure, ``txnlog plan --script``'s script, and the forensic notebook
executed in a real kernel.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.e2e.jobrun import finish_job, start_job
from tests.reports.kernel import ROOT, execute
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.model.contract import TABLES
from txnlog.ops import cli
from txnlog.output.delta import read_table

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SECRET = f"Pl4nted-{uuid.uuid4().hex}"
CONFIG = """\
kafka:
  security.protocol: SASL_PLAINTEXT
  sasl.mechanism: PLAIN
  sasl.username: txnlog
  sasl.password: ${TXNLOG_PLANTED_PASSWORD}
spark:
  spark.hadoop.fs.s3a.secret.key: ${TXNLOG_PLANTED_PASSWORD}
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("secrets")
    write_scenario("no_transactional_id", root / "logs", seed=7)
    (root / "secret.yaml").write_text(CONFIG)
    (root / "events").mkdir()
    return root


@pytest.fixture(scope="module")
def started(work) -> Iterator[dict[str, subprocess.Popen]]:
    """The module's three runs, started side by side (none reads what another writes): the job, the job
    failing against a closed port, ``txnlog abort`` failing against one. The two failures spend most of their
    time waiting for the Kafka clients' timeouts (30 s), the job on the CPU."""
    env = {"TXNLOG_PLANTED_PASSWORD": SECRET}
    events = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{work / 'events'}"]
    runs: dict[str, subprocess.Popen] = {}
    try:
        runs["ok"] = start_job(
            *events, "--config", "secret.yaml", "--logs", "logs", "--output", "out", "--cluster", "secrets",
            cwd=work, env=env,
        )  # fmt: skip
        # --verify-live with the SASL settings against a port nobody listens on: a failure that used them
        runs["failed"] = start_job(
            "--config", "secret.yaml", "--logs", "logs", "--output", "out-failed", "--verify-live",
            "--bootstrap-servers", f"127.0.0.1:{_closed_port()}", cwd=work, env=env,
        )  # fmt: skip
        abort = [sys.executable, "-m", "txnlog.ops.cli", "abort", "--config", str(work / "secret.yaml")]
        abort += ["--bootstrap-servers", f"127.0.0.1:{_closed_port()}", "--topic", "orders", "--partition", "0"]
        abort += ["--producer-id", "1", "--producer-epoch", "0", "--coordinator-epoch", "0"]
        runs["abort"] = subprocess.Popen(
            abort, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TXNLOG_PLANTED_PASSWORD": SECRET, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    except BaseException:
        for p in runs.values():
            p.kill()
            p.wait()
        raise
    yield runs
    for p in runs.values():  # a test that failed before waiting for its run
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def job(started) -> list[subprocess.CompletedProcess]:
    ok = finish_job(started["ok"])
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    failed = finish_job(started["failed"])
    assert failed.returncode != 0
    return [ok, failed]


def _assert_clean(text: str | bytes, where: str) -> None:
    blob = text if isinstance(text, bytes) else text.encode()
    assert SECRET.encode() not in blob, f"the planted secret leaked into {where}"


def test_the_job_prints_no_secret(job):
    for proc in job:
        _assert_clean(proc.stdout + proc.stderr, f"the job's output ({' '.join(map(str, proc.args[-6:]))})")


def test_no_file_under_the_output_holds_the_secret(job, work):
    files = [p for p in (work / "out").rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(p.suffix == ".json" for p in files)
    for p in files:
        _assert_clean(p.read_bytes(), str(p))


def test_no_table_value_holds_the_secret_and_runs_config_says_it_was_redacted(job, work):
    for name in TABLES:
        table = read_table(str(work / "out"), name)
        for column in table.column_names:
            if pa.types.is_string(table.schema.field(column).type) or pa.types.is_large_string(
                table.schema.field(column).type
            ):
                _assert_clean("\n".join(v for v in table.column(column).to_pylist() if v), f"{name}.{column}")
            elif pa.types.is_list(table.schema.field(column).type):
                _assert_clean(repr(table.column(column).to_pylist()), f"{name}.{column}")
    [config] = read_table(str(work / "out"), "runs").column("config").to_pylist()
    assert '"sasl.password": "***"' in config and '"sasl.username": "txnlog"' in config


def test_sparks_event_log_holds_no_secret(job, work):
    logs = [p for p in (work / "events").rglob("*") if p.is_file()]
    assert logs, "spark.eventLog.enabled wrote an event log"
    for p in logs:
        _assert_clean(p.read_bytes(), f"Spark's event log {p.name}")


def test_the_txnlog_command_shows_no_secret(job, work, monkeypatch):
    monkeypatch.setenv("TXNLOG_PLANTED_PASSWORD", SECRET)
    out = str(work / "out")
    for verb in ("list", "find-hanging", "describe-producers", "plan", "timeline"):
        for fmt in ("table", "json", "csv"):
            args = [verb, "--output", out, "--format", fmt]
            if verb in ("describe-producers", "timeline"):
                args += ["--topic", "orders", "--partition", "0"]
            printed = io.StringIO()
            cli.main(args, printed)
            _assert_clean(printed.getvalue(), f"txnlog {' '.join(args)}")
    script = work / "unblock.sh"
    cli.main(["plan", "--output", out, "--script", str(script)], io.StringIO())
    if script.exists():
        _assert_clean(script.read_bytes(), "txnlog plan --script's script")


def test_abort_shows_no_secret_in_its_dry_run_or_its_failure(started):
    stdout, stderr = started["abort"].communicate(timeout=300)
    proc = subprocess.CompletedProcess(started["abort"].args, started["abort"].returncode, stdout, stderr)
    assert proc.returncode != 0 or proc.stdout
    _assert_clean(proc.stdout + proc.stderr, "txnlog abort")


def test_the_forensic_notebook_shows_no_secret(job, work):
    done = execute(
        ROOT / "notebooks" / "forensics.ipynb",
        work / "notebook",
        {"OUTPUT": str(work / "out"), "CLUSTER": "secrets", "RUN_JOB": False},
        collect="{}",
    )
    _assert_clean(done.path.read_bytes(), "the executed forensics notebook")
