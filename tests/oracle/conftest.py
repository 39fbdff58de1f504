"""The Kafka oracle's tests skip, with the reason, only where the oracle or java is absent.

The session's one run per writer scenario (``scenario_run``) is in tests/conftest.py: the placement tests read
it too.
"""

from __future__ import annotations

import pytest

from tests.oracle import kafka


@pytest.fixture(scope="session")
def oracle():  # type: ignore[no-untyped-def]
    reason = kafka.skip_reason()
    if reason:
        pytest.skip(reason)
    return kafka
