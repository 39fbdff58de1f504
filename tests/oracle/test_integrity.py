"""The integrity audit judged by Kafka's read path: ``oracle read-committed`` (Kafka's ``LocalLog.read`` with
the copy's ``.txnindex`` files as they are, drained by the consumer's real ``CompletedFetch``) lists the batches a
read_committed consumer receives although they were aborted, and the committed ones it drops. txnlog's
``integrity`` rows must name the same transactions, on writer scenarios with each fault and on one without.
Each scenario's copy and txnlog's run over it are the session's one (``scenario_run``, tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import truth as T
from tests.oracle import kafka
from tests.oracle.judge import INTERNAL, ScenarioRun, run_txnlog
from txnlog.brokerlog import encode
from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
from txnlog.brokerlog.scenarios import scenario_names, write_scenario

_KINDS = {"aborted-data-visible": "ABORTED_DATA_VISIBLE", "committed-data-hidden": "COMMITTED_DATA_HIDDEN"}


def read_committed(dirs: list[Path]) -> list[dict[str, Any]]:
    """``oracle read-committed`` over ``dirs`` in one JVM: one answer per directory."""
    proc = kafka.call("read-committed", *map(str, dirs), "--jsonl", timeout=900)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(dirs), proc.stderr[-3000:]
    return rows


Key = tuple[str, str, str, int, int, int]


def kafka_discrepancies(log_dirs: tuple[Path, ...]) -> set[Key]:
    """(check, replica, topic, partition, producer id, marker offset) of every batch Kafka's consumer, fetching
    from that replica (log dir), got wrong."""
    dirs = sorted(
        d for log_dir in log_dirs for d in log_dir.iterdir() if d.is_dir() and not d.name.startswith(INTERNAL)
    )
    found = set()
    for directory, answer in zip(dirs, read_committed(dirs), strict=True):
        assert "error" not in answer, answer
        topic, _, part = answer["partition"].rpartition("-")
        for d in answer["discrepancies"]:
            if d["kind"] in _KINDS:
                kind = _KINDS[d["kind"]]
                found.add((kind, directory.parent.name, topic, int(part), d["producerId"], d["markerOffset"]))
    return found


def audit(rows: list[dict[str, Any]], *severities: str) -> set[Key]:
    return {
        (r["check"], r["replica"], r["topic"], r["partition"], r["producer_id"], r["marker_offset"])
        for r in rows
        if r["check"] in _KINDS.values() and r["severity"] in severities
    }


# markers_pending, healthy and sample (the embedded sample) have no fault: a hanging transaction; a busy 3-broker cluster (replicas, every
# producer kind, TV0 to TV2)
NAMES = ["index_entry_missing", "index_entry_spurious", "txnindex_file_lost", "markers_pending", "healthy", "sample"]


@pytest.mark.parametrize("name", NAMES)
def test_the_audit_names_what_kafkas_read_committed_consumer_gets_wrong(oracle, scenario_run, name):
    run = scenario_run(name)  # the copy and txnlog's run over it (tests/conftest.py)
    truth = run.truth
    rows = T.rows(str(run.out), "integrity")
    kafka_says = kafka_discrepancies(truth.log_dirs)
    certain, possible = audit(rows, "ERROR"), audit(rows, "ERROR", "WARNING")
    assert certain <= kafka_says <= possible, (sorted(certain), sorted(kafka_says), sorted(possible))
    injected = {
        (t["check"], t["replica"], t["topic"], t["partition"], t["producer_id"], t["marker_offset"])
        for t in truth.notes.get("integrity", [])  # type: ignore[union-attr]
    }
    assert certain == injected, (sorted(certain), sorted(injected))
    assert not [r for r in rows if r["check"] not in _KINDS.values()]  # no split outcome, nothing unchecked


def test_a_partition_aborted_by_hand_under_a_committed_transaction_is_a_split_outcome(scenario_run):
    run = scenario_run("split_outcome")
    truth = run.truth
    rows = T.rows(str(run.out), "integrity")
    split = {
        (r["topic"], r["partition"], r["producer_id"], r["marker_offset"])
        for r in rows
        if r["check"] == "SPLIT_OUTCOME"
    }
    injected = {(t["topic"], t["partition"], t["producer_id"], t["marker_offset"]) for t in truth.notes["integrity"]}  # type: ignore[union-attr]
    assert split == injected
    assert not [r for r in rows if r["check"] in _KINDS.values()]


def test_a_partition_written_by_kafkas_own_builders_gives_no_row(oracle, tmp_path):
    logs = tmp_path / "logs"
    oracle.write_sample(logs / "sample-0")
    out = tmp_path / "out"
    run_txnlog(None, logs, out, 1_700_000_000_000 + 86_400_000, "kafka-sample")
    assert kafka_discrepancies((logs,)) == set()
    assert T.rows(str(out), "integrity") == []


def _the_noted_row(run) -> tuple[Any, dict[str, Any], Path]:
    """The scenario's one audit row, once the run's rows are exactly the faults the writer noted (by check,
    partition, producer and marker); with the scenario's truth and its one log dir."""
    truth = run.truth
    rows = T.rows(str(run.out), "integrity")
    key = ("check", "topic", "partition", "producer_id", "marker_offset")
    assert {tuple(r[k] for k in key) for r in rows} == {tuple(t[k] for k in key) for t in truth.notes["integrity"]}
    (row,) = rows
    (log_dir,) = truth.log_dirs
    return truth, row, log_dir


def test_a_completed_transaction_whose_marker_a_partition_lost_is_marker_missing(oracle, scenario_run):
    """The coordinator completed a commit on two partitions; one never got its marker and another producer's
    transaction went on past it there. Kafka's TransactionStateManager load shows the id CompleteCommit; Kafka's
    LogLoader leaves the partition's last stable offset pinned at the open transaction's first offset with the
    high watermark past it, and Kafka's read_committed consumer stops there. txnlog names exactly that
    transaction, and the KAFKA-14053 late batch (coordinator_completed, a clean scenario below) is not one."""
    truth, row, log_dir = _the_noted_row(scenario_run("marker_missing"))
    owner = re.search(r"__transaction_state-\d+", row["evidence"])
    assert owner, row["evidence"]
    (state,) = [s for s in oracle.txn_state(log_dir / owner[0]) if s["transactionalId"] == row["transactional_id"]]
    assert (state["state"], state["producerId"]) == ("CompleteCommit", row["producer_id"]), state
    part = log_dir / f"{row['topic']}-{row['partition']}"
    (loaded,) = oracle.load_partitions([part], "--now", str(truth.as_of_ms))
    assert loaded["lastStableOffset"] == row["first_offset"] < loaded["highWatermark"] - 1, loaded
    (read,) = read_committed([part])
    assert read["consumerPosition"] == row["first_offset"] and not read["discrepancies"], read["consumerPosition"]
    assert row["consumers_received"] == "NONE" and row["consumers_should_receive"] == "ALL"


@pytest.mark.spark
def test_the_audit_runs_in_spark_as_here(oracle, spark, scenario_run, tmp_path):
    """A Spark-placed run (every file decoded in tasks) gives the same rows as the oracle and as a run here."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    truth = scenario_run("index_entry_spurious").truth  # the shared copy; this test's own Spark-placed run
    out = tmp_path / "out"
    options = {"logs": [str(truth.root)], "output": str(out), "as_of": str(truth.as_of_ms), "cluster": "c"}
    options |= ScenarioRun.options(truth)
    run(load_config(None, {**options, "progress": False, "driver_max_bytes": 0}), spark=spark, progress=lambda _m: None)
    rows = T.rows(str(out), "integrity")
    assert audit(rows, "ERROR") <= kafka_discrepancies(truth.log_dirs) <= audit(rows, "ERROR", "WARNING")
    assert audit(rows, "ERROR") and len(rows) == len(audit(rows, "ERROR", "WARNING"))


_BATCH = re.compile(r"baseOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) .*?isControl: (true|false)")
_SEQUENCES = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?baseSequence: (-?\d+) lastSequence: (-?\d+) "
                        r"producerId: (-?\d+)")  # fmt: skip


def test_a_batch_whose_sequence_skips_a_lost_one_is_a_sequence_gap(oracle, scenario_run, tmp_path):
    """The writer copies in, as a follower does, a batch whose base sequence skips a lost batch's. Kafka's own
    DumpLogSegments shows the gap (the batch's baseSequence is not the previous batch's lastSequence + 1), and
    Kafka's log load accepts it: LogSegment.recover and UnifiedLog.loadProducersFromRecords append with
    AppendOrigin.REPLICATION, for which ProducerAppendInfo checks no sequence. txnlog names exactly that
    transaction, at that batch."""
    truth, row, log_dir = _the_noted_row(scenario_run("sequence_gap"))
    part = log_dir / f"{row['topic']}-{row['partition']}"
    mine = [
        (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        for m in _SEQUENCES.finditer(oracle.dump(*sorted(part.glob("*.log"))))
        if int(m[5]) == row["producer_id"] and row["first_offset"] <= int(m[1]) <= row["last_offset"]
    ]
    gaps = [b[0] for a, b in zip(mine, mine[1:], strict=False) if b[2] != a[3] + 1]
    assert gaps and str(gaps[0]) in row["evidence"], (mine, row["evidence"])
    replay = tmp_path / "replay" / part.name  # no snapshot: every batch through ProducerAppendInfo
    shutil.copytree(part, replay, ignore=shutil.ignore_patterns("*.snapshot"))
    (loaded,) = oracle.load_partitions([replay], "--now", str(truth.as_of_ms), "--shutdown", "unclean",
                                       "--recovery-point", "0")  # fmt: skip
    assert "error" not in loaded and loaded["logEndOffset"] > row["marker_offset"], loaded


def test_a_zombies_batch_below_the_last_marker_epoch_is_an_epoch_regression(oracle, scenario_run, tmp_path):
    """The writer appends, as a follower copies, a batch at the epoch before the producer's last marker (a leader's
    ProducerAppendInfo refuses it from a client). Kafka's own DumpLogSegments shows that batch below the marker
    before it, and Kafka's ProducerStateManager replays the log without refusing it (it only logs a regression
    it replicates or recovers): nothing in the broker repairs it, and txnlog names exactly that transaction."""
    truth, row, log_dir = _the_noted_row(scenario_run("epoch_regression"))
    part = log_dir / f"{row['topic']}-{row['partition']}"
    batches = [
        (int(m[1]), int(m[2]), int(m[3]), m[4] == "true")
        for m in _BATCH.finditer(oracle.dump(*sorted(part.glob("*.log"))))
    ]
    mine = [b for b in batches if b[1] == row["producer_id"]]
    markers_before = [epoch for offset, _, epoch, control in mine if control and offset < row["first_offset"]]
    data = [epoch for offset, _, epoch, control in mine if not control and offset >= row["first_offset"]]
    assert data[0] < markers_before[-1], (data, markers_before)
    replay = tmp_path / "replay" / part.name  # no snapshot: every batch through ProducerAppendInfo
    shutil.copytree(part, replay, ignore=shutil.ignore_patterns("*.snapshot"))
    (loaded,) = oracle.load_partitions([replay], "--now", str(truth.as_of_ms), "--shutdown", "unclean",
                                       "--recovery-point", "0")  # fmt: skip
    assert "error" not in loaded and loaded["logEndOffset"] > row["marker_offset"], loaded


_FAULTS = {
    "index_entry_missing",
    "index_entry_spurious",
    "txnindex_file_lost",
    "split_outcome",
    "marker_missing",
    "epoch_regression",
    "sequence_gap",
}
# bulk: the benchmarks' large data set (its transactions are those of healthy's kinds)
CLEAN = [n for n in scenario_names() if n not in _FAULTS and n != "bulk"]


@pytest.mark.parametrize("name", CLEAN)
def test_a_scenario_without_a_fault_gives_no_anomaly(scenario_run, name):
    """No false alarm: every writer scenario that injects no integrity fault (hanging transactions, damage,
    replicas that disagree, restarts, every producer kind and transaction version) gives no anomaly row."""
    run = scenario_run(name)
    assert not run.truth.notes.get("integrity")
    rows = [r for r in T.rows(str(run.out), "integrity") if r["severity"] != "NOT_CHECKED"]
    assert rows == [], [(r["check"], r["evidence"]) for r in rows[:3]]


def test_the_rows_name_the_consumer_groups_that_read_the_faulty_range(oracle, tmp_path):
    """An ABORT missing from the .txnindex, and a ``__consumer_offsets`` partition in the copy: group ``reader``
    committed past the transaction (it consumed the aborted records as committed, if read_committed), ``slow`` at
    the partition's start (it has not read them yet). Kafka's consumer gets the transaction wrong; the row names
    ``reader``, not ``slow``."""
    truth = write_scenario("index_entry_missing", tmp_path / "logs")
    (fault, *_) = truth.notes["integrity"]  # type: ignore[union-attr]
    log_dir = next(d for d in truth.log_dirs if d.name == fault["replica"])
    empty = next(
        d for d in sorted(log_dir.glob("__consumer_offsets-*")) if not sum(f.stat().st_size for f in d.glob("*.log"))
    )
    shutil.rmtree(empty)  # an empty partition of the scenario's, written again with the groups' commits
    writer = OffsetsPartitionWriter(log_dir, int(empty.name.rpartition("-")[2]), now=truth.as_of_ms - 60_000)
    for group, offset in (("reader", fault["marker_offset"] + 1), ("slow", 0)):
        key = encode.encode_offset_commit_key(group, fault["topic"], fault["partition"])
        writer.append([(key, encode.encode_offset_commit_value(offset, -1, "", writer.now))])
    writer.close()
    out = tmp_path / "out"
    run_txnlog(None, truth.root, out, truth.as_of_ms, "index_entry_missing-groups")
    rows = T.rows(str(out), "integrity")
    assert audit(rows, "ERROR") <= kafka_discrepancies(truth.log_dirs)
    (row,) = [
        r
        for r in rows
        if (r["replica"], r["topic"], r["partition"], r["marker_offset"])
        == (fault["replica"], fault["topic"], fault["partition"], fault["marker_offset"])
    ]
    assert row["check"] == "ABORTED_DATA_VISIBLE" and row["severity"] == "ERROR", row
    assert f"past {row['first_offset']}): reader;" in row["evidence"], row["evidence"]
    assert "slow" not in row["evidence"], row["evidence"]
