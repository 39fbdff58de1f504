"""Shared fixtures: one local Spark session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:  # noqa: F821
    """A local[2] session (UI off, 4 shuffle partitions), shared by every Spark test."""
    from txnlog.engine.spark.session import get_session

    session = get_session(
        "txnlog-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "1g",
            # The status store keeps every SQL execution's plan (up to ~1 MB each after adaptive
            # re-planning) even with the UI off; hundreds of job runs in one session (-m slow) would
            # fill the 1 GiB driver heap with them.
            "spark.sql.ui.retainedExecutions": "20",
            "spark.ui.retainedJobs": "100",
            "spark.ui.retainedStages": "100",
        },
    )
    yield session
    session.stop()


# --- job runs several modules read (tests/e2e/shared.py says which): one each per test session ----------


@pytest.fixture(scope="session")
def readme_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``./spark-submit.sh`` as the README runs it (the embedded sample), in a fresh directory."""
    from tests.e2e import shared

    return shared.readme_run(tmp_path_factory.mktemp("readme"))


@pytest.fixture(scope="session")
def messy_incident(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The writer's messy_incident scenario (seed 3): its log dirs and the brokers' kafka-dump-log.sh files."""
    from tests.e2e import shared

    return shared.messy_incident(tmp_path_factory.mktemp("messy-incident"))


@pytest.fixture(scope="session")
def messy_dumps_run(messy_incident, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``./spark-submit.sh --dump-log`` over the messy incident's dumps (cluster messy-dumps, its as_of)."""
    from tests.e2e import shared

    return shared.messy_dumps_run(messy_incident, tmp_path_factory.mktemp("messy-dumps"))


# --- one run per writer scenario, read by the modules that judge every scenario -------------------------------


@pytest.fixture(scope="session")
def scenario_run(spark, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``scenario_run(name)``: scenario ``name`` written (seed ``ScenarioRun.SEED``, ``ScenarioRun.INTERNAL_PARTITIONS``
    internal partitions) and txnlog's tables over it
    (cluster ``ScenarioRun.CLUSTER``, the shared ``spark`` session, the default placement: a scenario is a small
    input, decoded in this process), made on first use (tests/oracle/judge.py). The copy and the tables are read
    only: the oracle's scenario modules and the placement tests (the driver's side) judge the same run."""
    from tests.oracle.judge import ScenarioRun, run_txnlog
    from txnlog.brokerlog.scenarios import write_scenario

    made: dict[str, ScenarioRun] = {}

    def get(name: str) -> ScenarioRun:
        if name not in made:
            work = tmp_path_factory.mktemp(f"scenario-{name}")
            truth = write_scenario(
                name, work / "logs", seed=ScenarioRun.SEED, internal_partitions=ScenarioRun.INTERNAL_PARTITIONS
            )
            progress = run_txnlog(
                spark, truth.root, work / "out", truth.as_of_ms, ScenarioRun.CLUSTER, **ScenarioRun.options(truth)
            )
            made[name] = ScenarioRun(name, truth, work / "logs", work / "out", tuple(progress))
        return made[name]

    return get


@pytest.fixture(scope="session")
def scenario_tasks_run(spark, scenario_run, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``scenario_tasks_run(name)``: the output of txnlog over ``scenario_run(name)``'s copy at its ``as_of`` and
    cluster, placed in Spark's tasks (``driver_max_bytes`` 0), made on first use: the other side of the placement
    tests (tests/e2e/test_placement.py, test_blocked_consumers_job.py)."""
    from tests.oracle.judge import ScenarioRun, run_txnlog

    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            run = scenario_run(name)
            out = tmp_path_factory.mktemp(f"scenario-tasks-{name}") / "out"
            progress = run_txnlog(
                spark,
                run.truth.root,
                out,
                run.truth.as_of_ms,
                ScenarioRun.CLUSTER,
                driver_max_bytes=0,
                **ScenarioRun.options(run.truth),
            )
            assert any("in Spark" in line for line in progress), progress
            made[name] = out
        return made[name]

    return get


# --- pytest-xdist: which tests go to one worker ---------------------------------------------------------------

#: test files that read the session's shared job runs (``readme_run``, ``messy_incident``, ``messy_dumps_run``,
#: tests/e2e/shared.py): one worker runs them all,
#: so that each run is made once, not once per worker
_SHARED_RUNS = (
    "tests/cluster/test_standalone.py",
    "tests/e2e/test_job.py",
    "tests/e2e/test_messy.py",
    "tests/e2e/test_placement.py",
    "tests/e2e/test_previous_pipeline.py",
)
#: test files (or one test of a file) that judge writer scenarios on the session's one run over each
#: (``scenario_run`` and ``scenario_tasks_run`` above): the tests of one scenario go to one worker, so that each
#: scenario is written and run once; the scenarios are split in two halves, one per worker (:func:`_scenario_half`)
_SCENARIO_RUNS = (
    "tests/e2e/test_blocked_consumers_job.py",
    "tests/e2e/test_placement.py::test_every_scenario_gives_the_same_tables_in_both_placements",
    "tests/oracle/test_coordinator.py",
    "tests/oracle/test_dump_log.py",
    "tests/oracle/test_integrity.py",
    "tests/oracle/test_scenarios.py",
)
#: the scenario a test of :data:`_SCENARIO_RUNS` reads where its id does not name it (its parameter does
#: otherwise); a test missing here still passes, at the cost of that scenario's run made on both workers
_SCENARIO_OF = {
    "tests/e2e/test_blocked_consumers_job.py": "groups_behind_hanging_transaction",
    "tests/oracle/test_scenarios.py::test_a_rolled_over_producer_ids_transaction_hangs_as_kafka_says": (
        "rolled_over_producer_id"
    ),
    "tests/oracle/test_integrity.py::test_a_partition_aborted_by_hand_under_a_committed_transaction_is_a_split_outcome": (
        "split_outcome"
    ),
    "tests/oracle/test_integrity.py::test_a_completed_transaction_whose_marker_a_partition_lost_is_marker_missing": (
        "marker_missing"
    ),
    "tests/oracle/test_integrity.py::test_the_audit_runs_in_spark_as_here": "index_entry_spurious",
    "tests/oracle/test_integrity.py::test_a_batch_whose_sequence_skips_a_lost_one_is_a_sequence_gap": "sequence_gap",
    "tests/oracle/test_integrity.py::test_a_zombies_batch_below_the_last_marker_epoch_is_an_epoch_regression": (
        "epoch_regression"
    ),
}
#: directories whose files share a session fixture of their own (the sample history, the noida-db server)
_SHARED_DIRS = ("tests/reports/", "tests/live/")


def _scenario_half(nodeid: str) -> str:
    """``scenario-runs-0`` or ``-1``: the half of the writer's scenarios (every other one, in the writer's order)
    that the scenario a test reads falls in (its parameter's first ``-`` part, or :data:`_SCENARIO_OF`); a test
    that reads no scenario's run is a unit with its file's other such tests."""
    from txnlog.brokerlog.scenarios import scenario_names

    test = nodeid.split("[", 1)[0]
    param = nodeid[len(test) + 1 : -1].split("-", 1)[0] if "[" in nodeid else ""
    names = scenario_names()
    name = param if param in names else _SCENARIO_OF.get(test, _SCENARIO_OF.get(test.split("::", 1)[0], ""))
    return f"scenario-runs-{names.index(name) % 2}" if name in names else test.split("::", 1)[0]


def _work_unit(nodeid: str) -> str:
    """The unit a worker takes whole: a test file, or the group of files (or tests) that share a session fixture."""
    path, test = nodeid.split("::", 1)[0], nodeid.split("[", 1)[0]
    if path in _SCENARIO_RUNS or test in _SCENARIO_RUNS:
        return _scenario_half(nodeid)
    if path in _SHARED_RUNS:
        return "shared-runs"
    return next((d for d in _SHARED_DIRS if path.startswith(d)), path)


#: the longest units (a job run per scenario or per module, a Spark or S3 run per test), longest first: handed out
#: first, so that no worker starts one of them when the other is almost done (the rest fill in behind them)
_LONG_UNITS = (
    "scenario-runs-0",
    "scenario-runs-1",
    "shared-runs",
    "tests/spark/test_splits.py",
    "tests/live/",
    "tests/dump_log/test_equivalence.py",
    "tests/e2e/test_shared_storage_job.py",
    "tests/e2e/test_inputs_job.py",
    "tests/e2e/test_faults_job.py",
    "tests/test_whole_read_edges.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the tests of :data:`_LONG_UNITS` first (the scheduler hands units out in the order
    they are collected); in one process (``-n 0``) the order is left as it is."""
    if not hasattr(config, "workerinput"):
        return
    rank = {unit: n for n, unit in enumerate(_LONG_UNITS)}
    items.sort(key=lambda item: rank.get(_work_unit(item.nodeid), len(rank)))


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """``--dist loadfile`` (pyproject's addopts) by file, but the files that share a session fixture go to
    one worker, in the order they are collected (not the largest unit first: a unit of many fast tests is
    not a long one; but :data:`_LONG_UNITS` are collected first)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    config.option.loadscopereorder = False
    return SharedFixtureScheduling(config, log)
