"""The Kafka oracle's tests skip, with the reason, only where the oracle or java is absent."""

from __future__ import annotations

import pytest

from tests.oracle import kafka


@pytest.fixture(scope="session")
def oracle():  # type: ignore[no-untyped-def]
    reason = kafka.skip_reason()
    if reason:
        pytest.skip(reason)
    return kafka
