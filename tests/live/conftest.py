"""Live tests: real Kafka clients against a real Apache Kafka broker on 127.0.0.1 (see tests/live/broker.py).

One broker per test session (:func:`tests.live.broker.kafka_broker`, started in a temp dir and stopped at the end,
also on failure), a topic per test module. The tests that stop a broker and read its files (test_no_coordinator,
test_cluster_metadata, test_broker_logdir) share one more, used in phases (:func:`tests.live.logdir_scenario
.broker_logdir`); tests/live/test_lost_txnindex.py starts one of its own.
A failed test's report carries the broker's start/stop output and the ends of its logs.

noida-db (tests/live/noida.py, a third-party Kafka-protocol server) is no longer a live fixture: the real broker
does everything the tests used it for and what it could not (DescribeProducers with the real producers,
WriteTxnMarkers, ``__transaction_state``, a coordinator's own timeouts). It stays only for
scripts/capture_real_batches.py, where it gives a capture of client-written batches in a second with no JVM
and no broker build (tests/live/test_noida.py checks that wrapper).
"""

from __future__ import annotations

import warnings

import pytest

# kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls at import time.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
    import kafka.admin  # noqa: F401
    import kafka.record.default_records  # noqa: F401

from tests.live.broker import attach_broker_logs_on_failure, kafka_broker  # noqa: E402,F401  (the session fixture)
from tests.live.logdir_scenario import broker_logdir  # noqa: E402,F401  (the shared stopped broker's phases)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    attach_broker_logs_on_failure(item, outcome.get_result())
