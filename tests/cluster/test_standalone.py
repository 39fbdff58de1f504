"""The job on a real Spark standalone cluster: a master and two workers started from pip's
pyspark on 127.0.0.1 (tests/cluster/standalone.py), ``./spark-submit.sh --master spark://…`` on a
writer-made kafka-dump-log.sh dump, every table compared with a local run of the same dump (chispa: the
session's shared ``./spark-submit.sh`` run of those dumps, same ``--cluster`` and ``--as-of``,
tests/e2e/shared.py), and exactly the started processes stopped. ``--driver-max-bytes 0``: the Python steps run in executors on
the workers, not in the driver (a small input would otherwise never leave the driver process).

The cluster (:func:`cluster`) is started for the module, and its stop is checked when the module is done."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.standalone import ROOT, StandaloneCluster
from tests.e2e.shared import MESSY_AS_OF, MESSY_CLUSTER
from tests.e2e.test_previous_pipeline import TABLES

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]  # a loaded machine: a cluster start and a job run on it

AS_OF, CLUSTER = MESSY_AS_OF, MESSY_CLUSTER  # fixed: the cluster runs and the local one are the same (cluster, as_of)


@pytest.fixture(scope="module")
def dumps(messy_incident) -> Path:
    """The writer's messy_incident scenario (seed 3) as each broker's kafka-dump-log.sh files."""
    return messy_incident.dumps


@pytest.fixture(scope="module")
def local(messy_dumps_run) -> Path:
    """The same dumps, same cluster and as_of, run locally (./spark-submit.sh, the session's shared run):
    what every cluster run must write."""
    return Path(messy_dumps_run.out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers for the module's tests; stopped at the end: exactly the processes
    it started, none left."""
    with StandaloneCluster(tmp_path_factory.mktemp("standalone") / "cluster", workers=2, cores=1) as started:
        yield started
        pids = [p.pid for p in started.procs.values()]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _app_dirs(cluster: StandaloneCluster) -> set[Path]:
    """Each worker's directory of each application it ran an executor for."""
    return set((cluster.work / "work").glob("w*/app-*"))


def _assert_same_tables(spark, got: Path, expected: Path) -> None:
    from chispa import assert_df_equality

    from txnlog.output.delta import read_table

    rows = 0
    for table in TABLES:
        a = read_table(str(got), table)
        b = read_table(str(expected), table)
        assert a.num_rows == b.num_rows, table
        rows += a.num_rows
        if a.num_rows:
            assert_df_equality(
                spark.createDataFrame(a),
                spark.createDataFrame(b),
                ignore_row_order=True,
                ignore_nullable=True,
            )
    assert rows > 0


def test_a_worker_lost_mid_run_still_gives_the_local_tables(dumps, local, tmp_path, spark, cluster) -> None:
    """The job submitted to the standalone master, its executors on both workers; then one worker SIGKILLed (the
    pid the test started) while the driver is between two tables' commits (tests/e2e/test_faults_job.py's seam),
    and the driver let go once the master has removed that worker (no fixed wait: Spark's master drops a worker
    whose connection closes, and tells the application its executor there is lost): its executor and the cached
    blocks on it are gone; Spark recomputes them on the other worker and the run completes with the local tables. A run that loses no worker is this run up to the kill, so it has no test of
    its own (it was one more run of the job on the cluster, as long as this one)."""
    from tests.e2e.test_faults_job import _start, _wait_for
    from txnlog.output.delta import read_table

    paused = tmp_path / "paused"
    before = _app_dirs(cluster)
    args = [a for d in sorted(dumps.iterdir()) for a in ("--dump-log", str(d))]
    proc = _start(
        "--master", cluster.master_url, "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
        *args, "--output", str(tmp_path / "out"), "--cluster", CLUSTER, "--as-of", AS_OF,
        "--driver-max-bytes", "0", cwd=ROOT, pause=f"transactions:{paused}",
    )  # fmt: skip
    try:
        _wait_for(paused, proc)
        apps = cluster.state().get("completedapps", []) + cluster.state().get("activeapps", [])
        assert apps, "the job did not run on the standalone master"
        # the executors did the work: each worker that ran an executor keeps the application's dir
        assert len(_app_dirs(cluster) - before) >= 2, "both workers ran executors"
        cluster.kill_worker(1)
        # the master has removed the worker (and told the driver its executor is lost): the driver goes on
        cluster.wait_alive_workers(1)
        paused.unlink()
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    [run] = read_table(str(tmp_path / "out"), "runs").to_pylist()
    assert run["status"] == "SUCCEEDED"
    _assert_same_tables(spark, tmp_path / "out", local)
