"""Logs and kafka-dump-log.sh files on S3, run as a user runs it: ``./spark-submit.sh --logs s3a://…``.

moto's S3 server (``moto[server]``: a real HTTP S3 endpoint) is started on 127.0.0.1 at a free port,
a bucket is filled with the writer-made sample cluster's log dirs and its kafka-dump-log.sh files (with
:data:`INTERNAL_PARTITIONS` partitions of each internal topic, not Kafka's 50: every upload and read is a
round trip to the server, and the internal topics' near-empty partitions would be most of them), and
the job reads them through ``pyarrow.fs`` (txnlog.sources.storage) — the listing in the driver, every segment,
snapshot and checkpoint file in the Spark tasks (``--driver-max-bytes 0``) — writing to a local
``--output``. Every table is compared with a run on the same files from a local path (the job script's
``main`` in process, on the shared Spark session, with the same options: tests/e2e/jobrun.py).

The endpoint and a planted secret key are given only in the ``--config`` file's ``storage`` mapping
(the AWS environment has none), so a task can reach the bucket only if the driver's settings reach
it; the secret must appear in no output line and no table.

What may differ between the two runs is what names the input: a ``quarantine`` row's ``file`` is the
path the run was given (``s3a://bucket/logs/broker-1/…`` vs ``/tmp/…/logs/broker-1/…``), so that
prefix is mapped back before comparing; and the ``runs`` row (run id, wall-clock times, ``inputs``,
the config) is per run by design: only its counts are compared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.jobrun import run_in_process
from tests.e2e.shared import render_broker_dumps
from tests.moto_s3 import moto_server
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.sources.sample import SAMPLE_SEED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

BUCKET = "kafka-copies"
PLANTED = "planted-S3-secret-7f3a9c"  # the secret key: must never be printed or written
CLUSTER = "shared-storage"
#: the partitions of __transaction_state and __consumer_offsets in the copy (as in the oracle's scenario runs,
#: tests/oracle/judge.py), given to both runs as ``transaction_state_partitions`` in the config file
INTERNAL_PARTITIONS = 4


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def copies(s3_endpoint, tmp_path_factory) -> dict[str, Any]:
    """The sample cluster's log dirs and its dumps, on local disk and in the bucket."""
    from pyarrow import fs as pafs

    work = tmp_path_factory.mktemp("shared-storage")
    write_scenario("sample", work / "logs", seed=SAMPLE_SEED, internal_partitions=INTERNAL_PARTITIONS)
    render_broker_dumps(work / "logs", work / "dumps")
    s3 = pafs.S3FileSystem(
        endpoint_override=s3_endpoint, scheme="http", region="us-east-1", access_key="test", secret_key=PLANTED,
        allow_bucket_creation=True,
    )  # fmt: skip
    s3.create_dir(BUCKET)
    for name in ("logs", "dumps"):
        pafs.copy_files(str(work / name), f"{BUCKET}/{name}", destination_filesystem=s3)
    config = work / "storage.yaml"
    config.write_text(
        f"transaction_state_partitions: {INTERNAL_PARTITIONS}\n"  # the copy's, as Kafka's broker config says
        f"storage:\n  s3.endpoint: {s3_endpoint}\n  s3.region: us-east-1\n"
        f"  s3.access_key: test\n  s3.secret_key: {PLANTED}\n"
    )
    return {"work": work, "config": str(config), "endpoint": s3_endpoint}


def _env() -> dict[str, str]:
    """No AWS settings in the environment: the config's storage mapping is the only way to the bucket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance-metadata lookups on a machine without EC2
    return env


def _start(copies: dict[str, Any], out: str, *inputs: str) -> subprocess.Popen:
    """``./spark-submit.sh`` on ``inputs``, started: :func:`_finish` waits for it (the test's local run in between)."""
    work = copies["work"]
    full = {**_env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [str(Path(__file__).resolve().parents[2] / "spark-submit.sh"), "--driver-memory", "1g", *inputs,
         "--config", copies["config"], "--cluster", CLUSTER, "--output", str(work / out), "--driver-max-bytes", "0"],
        cwd=work, env={k: v for k, v in full.items() if not k.startswith("PYSPARK_")}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if done.returncode != 0:
        sys.stderr.write(stdout[-5000:] + stderr[-10000:])
    return done


def _run(copies: dict[str, Any], out: str, *inputs: str) -> subprocess.CompletedProcess:
    return _finish(_start(copies, out, *inputs))


def _run_local(spark: Any, copies: dict[str, Any], out: str, *inputs: str) -> subprocess.CompletedProcess:
    """What :func:`_run` runs, on local paths, in this process (Spark tasks included: --driver-max-bytes 0)."""
    work = copies["work"]
    args = [*inputs, "--config", copies["config"], "--cluster", CLUSTER, "--output", str(work / out)]
    try:
        return run_in_process(spark, *args, "--driver-max-bytes", "0", cwd=work)
    finally:
        from txnlog.sources import storage

        storage.configure(None)  # the config's S3 settings stay with that run, not this process's later ones


def _tables(output: str) -> list[str]:
    return sorted(p.name for p in Path(output).iterdir() if p.is_dir() and not p.name.startswith("_"))


def _rows(output: str, table: str, prefix: str, local: str) -> list[tuple]:
    """The table's rows, sorted, with every string that starts with ``prefix`` re-rooted at ``local``."""
    from txnlog.output.delta import read_table

    def norm(v: Any) -> Any:
        if isinstance(v, str) and v.startswith(prefix):
            return local + v[len(prefix) :]
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    rows = read_table(output, table).to_pylist()
    return sorted(tuple((k, repr(norm(v))) for k, v in sorted(r.items())) for r in rows)


def _assert_same_tables(work: Path, remote: str, local: str, prefix: str, local_root: str) -> int:
    from txnlog.output.delta import read_table

    assert _tables(str(work / remote)) == _tables(str(work / local))
    total = 0
    for table in _tables(str(work / local)):
        if table == "runs":
            a, b = read_table(str(work / remote), table).to_pylist(), read_table(str(work / local), table).to_pylist()
            assert len(a) == len(b) == 1
            for key in a[0]:
                if key.endswith("_count") or key in (
                    "partitions_with_late_transactions",
                    "status",
                    "as_of",
                    "as_of_source",
                    "cluster",
                ):
                    assert a[0][key] == b[0][key], key
            continue
        got = _rows(str(work / remote), table, prefix, local_root)
        want = _rows(str(work / local), table, prefix, local_root)
        assert got == want, table
        total += len(want)
    return total


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert PLANTED not in text


@pytest.fixture(scope="module")
def logs_runs(spark, copies) -> dict[str, subprocess.CompletedProcess]:
    """The S3 run and the local one at once: the one waits on its JVM's start and moto's answers while the other
    works (they write to different outputs)."""
    remote = _start(copies, "out-s3a", "--logs", f"s3a://{BUCKET}/logs")
    try:
        local = _run_local(spark, copies, "out-local", "--logs", str(copies["work"] / "logs"))
    finally:
        done = _finish(remote)
    return {"local": local, "remote": done}


def test_logs_on_s3_give_the_local_tables(copies, logs_runs) -> None:
    local, remote = logs_runs["local"], logs_runs["remote"]
    assert local.returncode == 0, local.stderr[-3000:]
    assert remote.returncode == 0, remote.stderr[-3000:]
    # the same files were found: the input line names the same counts
    found = [next(line for line in p.stderr.splitlines() + p.stdout.splitlines() if "segments and" in line)
             for p in (local, remote)]  # fmt: skip
    assert found[0].split("found ", 1)[-1] == found[1].split("found ", 1)[-1]
    work = copies["work"]
    rows = _assert_same_tables(work, "out-s3a", "out-local", f"s3a://{BUCKET}/logs", str(work / "logs"))
    assert rows > 100
    from txnlog.output.delta import read_table

    files = [r["file"] for r in read_table(str(work / "out-s3a"), "quarantine").to_pylist() if r["file"]]
    assert files and all(f.startswith(f"s3a://{BUCKET}/logs/") for f in files)  # named as the user wrote them


def test_the_secret_is_never_printed_or_written(copies, logs_runs) -> None:
    from txnlog.output.delta import read_table

    for proc in logs_runs.values():
        _no_secret(proc.stdout, proc.stderr)
    for out in ("out-s3a", "out-local"):
        for table in _tables(str(copies["work"] / out)):
            _no_secret(repr(read_table(str(copies["work"] / out), table).to_pylist()))
    (config,) = [r["config"] for r in read_table(str(copies["work"] / "out-s3a"), "runs").to_pylist()]
    assert "s3.secret_key" in str(config) and "***" in str(config)


def test_dump_log_on_s3_gives_the_local_tables(spark, copies) -> None:
    work = copies["work"]
    started = _start(copies, "out-dump-s3", "--dump-log", f"s3://{BUCKET}/dumps")  # beside the local run
    try:
        local = _run_local(spark, copies, "out-dump-local", "--dump-log", str(work / "dumps"))
    finally:
        remote = _finish(started)
    assert local.returncode == 0, local.stderr[-3000:]
    assert remote.returncode == 0, remote.stderr[-3000:]
    _no_secret(remote.stdout, remote.stderr)
    rows = _assert_same_tables(work, "out-dump-s3", "out-dump-local", f"s3://{BUCKET}/dumps", str(work / "dumps"))
    assert rows > 100


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--logs", "s3a://no-such-bucket/logs"), "--logs s3a://no-such-bucket/logs: bucket 'no-such-bucket' does "
            "not exist", id="logs-bucket-missing",
        ),
        pytest.param(
            ("--logs", f"s3a://{BUCKET}/nothing-here"), f"--logs s3a://{BUCKET}/nothing-here: no such file or "
            "directory", id="logs-path-missing",
        ),
        pytest.param(
            ("--dump-log", "s3://no-such-bucket/dumps"), "--dump-log s3://no-such-bucket/dumps: bucket "
            "'no-such-bucket' does not exist", id="dump-bucket-missing",
        ),
        pytest.param(("--logs", "ftp://host/logs"), "the ftp:// scheme is not supported", id="unknown-scheme"),
    ],
)  # fmt: skip
def test_storage_mistakes_are_one_line(copies, args: tuple[str, ...], message: str) -> None:
    proc = _run(copies, "out-bad", *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert line.startswith("txnlog: error: ") and message in line, line
    assert not (copies["work"] / "out-bad").exists()


def test_refused_credentials_are_one_line(tmp_path) -> None:
    """A server that checks credentials (moto with IAM authentication from the first request) refuses an
    unknown access key: one line naming the path and the settings to check, exit 2, nothing written."""
    with moto_server(tmp_path, {"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as endpoint:
        config = tmp_path / "storage.yaml"
        config.write_text(
            f"storage:\n  s3.endpoint: {endpoint}\n  s3.region: us-east-1\n"
            f"  s3.access_key: AKIAUNKNOWN\n  s3.secret_key: {PLANTED}\n"
        )
        proc = subprocess.run(
            [str(Path(__file__).resolve().parents[2] / "spark-submit.sh"), "--logs", f"s3a://{BUCKET}/logs",
             "--config", str(config), "--output", str(tmp_path / "out")],
            cwd=tmp_path, env={k: v for k, v in _env().items() if not k.startswith("PYSPARK_")},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert line.startswith(f"txnlog: error: --logs s3a://{BUCKET}/logs: the storage refused the credentials"), line
    assert "AWS_ACCESS_KEY_ID" in line and "s3.secret_key" in line
    _no_secret(proc.stdout, proc.stderr)
    assert not (tmp_path / "out").exists()
