"""Every scenario of the writer, judged by Kafka's own ``LogLoader`` and ``ProducerStateManager``.

For each scenario in the writer's own list (a new scenario is covered without editing this file), every
data partition of every replica is loaded by the oracle's ``load-partition`` (one JVM per scenario and
way of loading), and its log start/end offset, high watermark, LSO and active producers must equal (a) the
writer's ground truth and (b) the ``partition_health``, ``producer_state`` and OPEN ``transactions`` rows
txnlog wrote in one run over the same copy (this process's build; tests/e2e/test_placement.py holds the
Spark build to it).

Which broker a copy speaks for. ``load-partition`` answers as a broker restarted on the copy, deciding clean
or unclean shutdown from ``.kafka_cleanshutdown`` as ``LogManager`` does. A cleanly shut-down broker's copy
speaks for that restart, so Kafka's answer is compared as it is. A running broker's copy (no marker file)
speaks for what its leader served, which a restart changes in two named ways, each compared with the ground
truth's live answer:

* *a restart truncates*: an unclean restart recovers the active segment (``LogLoader.recoverLog``,
  ``LogSegment.recover``) and truncates the log at the first invalid batch. Where the copy holds such
  damage the served answer is Kafka's load of the same bytes without recovery (``--shutdown clean``), and
  the restart's log end must be where the damaged region begins;
  Where the damaged batch is the log's last (a marker with a bad CRC at the tail), the served log end is
  known only from that batch's own header, which Kafka's load without recovery reads
  (``LogSegment.readNextOffset``) and txnlog does not trust; txnlog then says what the restart loads (the
  log ends where the region begins, the producer state rebuilt without it), and is compared with that;
* *a completed transaction whose marker is not yet below the high watermark* still holds the live LSO
  (``ProducerStateManager.unreplicatedTxns``); a restart rebuilds the producer state from the snapshot at
  the log end and does not. There the LSO is the ground truth's (and txnlog's), and Kafka's restart LSO is
  the high watermark.

``bulk`` takes size parameters and is the benchmarks' input: it is left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oracle.judge import kafka_answers, run_txnlog, truth_differences, txnlog_differences
from txnlog.brokerlog.scenarios import scenario_names, write_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SCENARIOS = [n for n in scenario_names() if n != "bulk"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oracle-scenarios")


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_loads_in_kafka_as_txnlog_and_the_truth_say(oracle, spark, workdir, name):
    truth = write_scenario(name, workdir / name / "logs", seed=3)
    kafka = kafka_answers(oracle, truth)
    problems = truth_differences(truth, kafka)
    out = workdir / name / "out"
    run_txnlog(spark, truth.root, out, truth.as_of_ms, name)
    problems += txnlog_differences(truth, kafka, out)
    assert not problems, f"{name}: " + "\n".join(problems)
