"""A realistic, deterministic Kafka broker-log writer: the job's embedded sample, test and benchmark input.

Layers, each usable on its own:

* :mod:`txnlog.brokerlog.encode` — wire encoders (record batches v2 with every
  codec in Java-client framing, markers, control batches, legacy magic 0/1,
  ``__transaction_state`` key/value v0/v1, producer snapshots, index entries),
  plus a vectorized fast path for bulk data;
* :mod:`txnlog.brokerlog.partition` — :class:`PartitionLog`, one replica's
  directory appended to as a broker does (offsets, segment rolls, indexes,
  ``.txnindex``, producer state and snapshots, retention, damage injection);
* :mod:`txnlog.brokerlog.cluster` — :class:`Cluster`, brokers, replicas, a
  transaction coordinator and producers on a simulated clock;
* :mod:`txnlog.brokerlog.workload` — a busy cluster's background traffic and the plumbing every
  scenario shares; :mod:`txnlog.brokerlog.situations` — one known kind of open transaction each;
* :mod:`txnlog.brokerlog.scenarios` — the registry of named scenarios that return a
  :class:`ScenarioResult` with the ground truth (``python -m txnlog.brokerlog``); the larger ones live in
  :mod:`~txnlog.brokerlog.incidents`, :mod:`~txnlog.brokerlog.damaged` and :mod:`~txnlog.brokerlog.bulk`.

Example::

    from txnlog.brokerlog import write_scenario
    result = write_scenario("sample", "/tmp/sample")
    print(result.summary())          # what the job should find, and as_of
"""

from txnlog.brokerlog.cluster import Cluster, SimClock, TransactionalProducer
from txnlog.brokerlog.encode import EncodedRecords, ProducerSnapshotEntry, RecordSpec
from txnlog.brokerlog.ground_truth import (
    ExpectedCoordinatorState,
    ExpectedFinding,
    ExpectedOpenTransaction,
    ExpectedPartition,
    ExpectedTransaction,
    ScenarioResult,
)
from txnlog.brokerlog.partition import PartitionLog
from txnlog.brokerlog.scenarios import SCENARIOS, bulk, scenario_names, write_scenario

__all__ = [
    "SCENARIOS",
    "Cluster",
    "EncodedRecords",
    "ExpectedCoordinatorState",
    "ExpectedFinding",
    "ExpectedOpenTransaction",
    "ExpectedPartition",
    "ExpectedTransaction",
    "PartitionLog",
    "ProducerSnapshotEntry",
    "RecordSpec",
    "ScenarioResult",
    "SimClock",
    "TransactionalProducer",
    "bulk",
    "scenario_names",
    "write_scenario",
]
