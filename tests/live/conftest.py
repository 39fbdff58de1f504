"""Live tests: real Kafka clients against a noida-db server on 127.0.0.1 (see tests/live/noida.py)."""

from __future__ import annotations

import warnings

import pytest

# kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls at import time.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
    import kafka.admin  # noqa: F401
    import kafka.record.default_records  # noqa: F401

from tests.live.noida import attach_log_on_failure, noida  # noqa: E402,F401  (the session fixture)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    attach_log_on_failure(item, outcome.get_result())
