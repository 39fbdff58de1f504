"""Shared fixtures: one local Spark session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:  # noqa: F821
    """A local[2] session (UI off, 4 shuffle partitions), shared by every Spark test."""
    from txnlog.spark.session import get_session

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
