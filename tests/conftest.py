"""Shared fixtures: one local Spark session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

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


# --- pytest-xdist: which tests go to one worker ---------------------------------------------------------------

#: test files that read the session's shared job runs above (tests/e2e/shared.py): one worker runs them all,
#: so that each run is made once, not once per worker
_SHARED_RUNS = (
    "tests/cluster/test_standalone.py",
    "tests/e2e/test_job.py",
    "tests/e2e/test_messy.py",
    "tests/e2e/test_placement.py",
    "tests/e2e/test_previous_pipeline.py",
)
#: test files that judge every writer scenario on the session's one run over it (tests/oracle/conftest.py's
#: ``scenario_run``): one worker runs them all, so that each scenario is written and run once
_SCENARIO_RUNS = (
    "tests/oracle/test_coordinator.py",
    "tests/oracle/test_dump_log.py",
    "tests/oracle/test_integrity.py",
    "tests/oracle/test_scenarios.py",
)
#: directories whose files share a session fixture of their own (the sample history, the noida-db server)
_SHARED_DIRS = ("tests/reports/", "tests/live/")


def _work_unit(nodeid: str) -> str:
    """The unit a worker takes whole: a test file, or the group of files that share a session fixture."""
    path = nodeid.split("::", 1)[0]
    if path in _SHARED_RUNS:
        return "shared-runs"
    if path in _SCENARIO_RUNS:
        return "scenario-runs"
    return next((d for d in _SHARED_DIRS if path.startswith(d)), path)


#: the longest units (a job run per scenario or per module): handed out first, one to each worker, so that no
#: worker starts one of them when the other is almost done
_LONG_UNITS = ("shared-runs", "scenario-runs")


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
