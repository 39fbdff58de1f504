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

import re

import pytest

from tests.e2e import truth as T
from tests.oracle.judge import kafka_answers, truth_differences, txnlog_differences
from txnlog.brokerlog.scenarios import scenario_names

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SCENARIOS = [n for n in scenario_names() if n != "bulk"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_loads_in_kafka_as_txnlog_and_the_truth_say(oracle, scenario_run, name):
    run = scenario_run(name)  # the copy and txnlog's run over it (tests/conftest.py)
    kafka = kafka_answers(oracle, run.truth)
    problems = truth_differences(run.truth, kafka)
    problems += txnlog_differences(run.truth, kafka, run.out)
    assert not problems, f"{name}: " + "\n".join(problems)


_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: \d+ .*producerId: (-?\d+) .*isControl: (true|false)")
_MARKER = re.compile(r"endTxnMarker: (\w+)")


def test_a_rolled_over_producer_ids_transaction_hangs_as_kafka_says(oracle, scenario_run):
    """A transaction of an id's previous producer id, on a partition its new producer id's transaction lists.

    Kafka's own code says who ends it: ``DumpLogSegments`` shows the new producer id's COMMIT marker on the
    partition after the old producer id's first batch, and ``LogLoader``/``ProducerStateManager`` still hold
    the old producer id's transaction open past it (a marker ends only its own producer's transaction); the
    coordinator's loaded state (``TransactionLog.readTxnRecordValue``) has the new producer id as the id's
    current one and the old as its previous, and every marker is written with the current one
    (``TransactionMarkerChannelManager.addTxnMarkersToSend``). find-hanging's rule on that state (an id
    whose current producer id is the open transaction's, ``TransactionsCommand``) finds none: HANGING. The
    ground truth and txnlog must say so, and call the new producer id's own transaction LATE. (The record
    right after the rollover, Complete*, names the old producer id as the previous one: txnlog no longer
    counts that as owning it, tests/domain/test_classify.py.)"""
    run = scenario_run("rolled_over_producer_id")
    truth, out = run.truth, run.out
    hang = next(f for f in truth.findings if f.verdict == "HANGING")
    late = next(f for f in truth.findings if f.verdict == "LATE")
    assert (hang.topic, hang.partition) == (late.topic, late.partition)
    tp = f"{hang.topic}-{hang.partition}"
    old_pid, new_pid = hang.producer_id, late.producer_id
    (data_dir,) = sorted(truth.root.glob(f"broker-*/{tp}"))

    batches: list[tuple[int, int, bool, str | None]] = []
    for line in oracle.dump(data_dir, options=("--deep-iteration",)).splitlines():
        if m := _BATCH.search(line):
            batches.append((int(m[1]), int(m[2]), m[3] == "true", None))
        elif (m := _MARKER.search(line)) and batches:
            batches[-1] = (*batches[-1][:3], m[1])
    later_markers = [
        (o, kind) for o, pid, control, kind in batches if control and pid == new_pid and o > hang.start_offset
    ]
    assert "COMMIT" in {kind for _, kind in later_markers}, batches
    assert not [o for o, pid, control, _ in batches if control and pid == old_pid and o > hang.start_offset]

    (loaded,) = oracle.load_partitions([data_dir], "--now", str(truth.as_of_ms))
    still_open = {p["producerId"]: p["currentTxnStartOffset"] for p in loaded["producers"]}
    assert still_open[old_pid] == hang.start_offset, loaded["producers"]

    (state_dir,) = sorted(truth.root.glob(f"broker-*/__transaction_state-{late.coordinator_partition}"))
    state = {r["transactionalId"]: r for r in oracle.txn_state(state_dir)}
    ledger = state[late.transactional_id]
    # every transition after the rollover's Complete* record writes the current producer id as the previous one
    # (TransactionMetadata.prepareTransitionTo): only that record named the old one
    assert (ledger["producerId"], ledger["previousProducerId"]) == (new_pid, new_pid)
    assert ledger["state"] == "Ongoing" and tp in ledger["topicPartitions"]
    assert not [tid for tid, r in state.items() if r["producerId"] == old_pid]  # find-hanging finds no id

    assert (hang.reason, hang.safety, hang.transactional_id) == ("NO_TRANSACTIONAL_ID", "SAFE", None)
    assert late.reason == "COORDINATOR_TIMEOUT_OVERDUE"
    assert T.actual_findings(str(out), T.recommendations_by_key(str(out))) == T.expected_findings(truth)
    (evidence,) = [r["evidence"] for r in T.rows(str(out), "findings") if r["producer_id"] == old_pid]
    assert f"it was last seen under {late.transactional_id}" in evidence
