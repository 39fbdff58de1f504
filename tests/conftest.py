"""Shared fixtures: one local Spark session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # noqa: F821
    """A local[2] session (UI off, 4 shuffle partitions), shared by every Spark test."""
    from txnlog.spark.session import get_session

    session = get_session(
        "txnlog-tests",
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
              "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "1g"},
    )
    yield session
    session.stop()
