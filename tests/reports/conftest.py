"""The sample history every test here reads: one job run per as_of, once per session."""

from __future__ import annotations

import pytest

from tests.reports.history import History, build


@pytest.fixture(scope="session")
def sample_history(spark, tmp_path_factory) -> History:
    return build(spark, tmp_path_factory.mktemp("sample-history"))
