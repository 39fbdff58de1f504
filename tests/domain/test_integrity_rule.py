"""The integrity rule on hand-made rows (what CompletedFetch and LogLoader imply), and damaged ``.txnindex`` files
read as quarantine rows. The rule against Kafka's own read path: tests/oracle/test_integrity.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA
from txnlog.kafka.wire import ControlType
from txnlog.model import contract
from txnlog.model.rows import TXN_INDEX_SCHEMA, TXN_SEGMENT_SCHEMA, Checkpoint
from txnlog.rules.blocked import groups_past
from txnlog.rules.integrity import (
    MS_SCHEMA,
    NOT_YET,
    compacted_gaps,
    decisions,
    integrity,
    partition_integrity,
    unserved,
    with_readers,
)
from txnlog.sources.logdirs import discover
from txnlog.sources.txnindex import read_txn_indexes

ABORT, COMMIT = int(ControlType.ABORT), int(ControlType.COMMIT)


def _txn(pid: int, first: int, last: int, marker: int, control: int) -> dict:
    return {
        "topic": "t",
        "partition": 0,
        "producer_id": pid,
        "producer_epoch": 0,
        "first_offset": first,
        "last_offset": last,
        "marker_offset": marker,
        "control_type": control,
        "replicas": ["b1"],
        "open_replicas": [],
        "record_count": last - first + 1,
        "size_bytes": 100,
        "first_timestamp": 1_000,
        "last_timestamp": 2_000,
    }


def _entry(pid: int, first: int, last: int) -> dict:
    return {
        "broker": "b1",
        "topic": "t",
        "partition": 0,
        "segment_offset": 0,
        "file": "00000000000000000000.txnindex",
        "producer_id": pid,
        "first_offset": first,
        "last_offset": last,
        "last_stable_offset": last + 1,
    }


def _run(txns: list[dict], entries: list[dict], *, has_index: bool = True, recovery: int | None = None) -> list[dict]:
    segments = [
        {
            "broker": "b1",
            "topic": "t",
            "partition": 0,
            "base_offset": 0,
            "has_txnindex": has_index,
            "recovery_point": recovery,
        },
        {
            "broker": "b1",
            "topic": "t",
            "partition": 0,
            "base_offset": 100,
            "has_txnindex": False,
            "recovery_point": recovery,
        },
    ]
    out = integrity(
        pa.Table.from_pylist(txns),
        pa.Table.from_pylist(entries, schema=TXN_INDEX_SCHEMA),
        pa.Table.from_pylist(segments, schema=TXN_SEGMENT_SCHEMA),
        contract.COORDINATOR_HISTORY.empty_table(),
    )
    assert out.schema.names == [f.name for f in contract.INTEGRITY if f.name not in ("cluster", "as_of")]
    return out.to_pylist()


def test_an_index_matching_every_abort_gives_no_row():
    txns = [_txn(1, 0, 2, 3, ABORT), _txn(1, 4, 5, 6, COMMIT), _txn(2, 7, 8, 9, COMMIT)]
    assert _run(txns, [_entry(1, 0, 3)]) == []


def test_an_abort_missing_from_the_index_is_delivered_and_only_an_unclean_restart_may_repair_it():
    txns = [_txn(1, 0, 2, 3, ABORT), _txn(1, 4, 5, 6, COMMIT)]
    (row,) = _run(txns, [], has_index=False)
    assert (row["check"], row["severity"], row["consumers_received"], row["consumers_should_receive"]) == (
        "ABORTED_DATA_VISIBLE",
        "ERROR",
        "ALL",
        "NONE",
    )
    assert (row["marker_offset"], row["records_affected"], row["restart_repairs"]) == (3, 3, "UNCLEAN_RESTART")
    assert "no .txnindex file" in row["evidence"]
    # the segment [0, 100) lies wholly before the recovery point: LogLoader.recoverLog does not recover it
    (row,) = _run(txns, [], recovery=150)
    assert row["restart_repairs"] == "NO"


def test_a_false_entry_hides_the_commit_it_covers_and_maybe_more_until_the_producers_next_abort():
    txns = [
        _txn(1, 0, 2, 3, COMMIT),  # covered by the entry: dropped in every fetch
        _txn(1, 4, 5, 6, COMMIT),  # after it: dropped when the same fetch holds it
        _txn(1, 7, 8, 9, ABORT),  # CompletedFetch forgets producer 1 here
        _txn(1, 10, 11, 12, COMMIT),
    ]
    rows = _run(txns, [_entry(1, 0, 3), _entry(1, 7, 9)])
    got = [(r["check"], r["marker_offset"], r["severity"], r["consumers_received"]) for r in rows]
    assert got == [
        ("COMMITTED_DATA_HIDDEN", 3, "ERROR", "NONE"),
        ("COMMITTED_DATA_HIDDEN", 6, "WARNING", "DEPENDS_ON_FETCH"),
    ]


def test_a_damaged_txnindex_is_a_quarantine_row_and_its_whole_entries_are_kept(tmp_path: Path):
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"")
    entry = (0).to_bytes(2, "big") + b"".join(v.to_bytes(8, "big") for v in (7, 1, 3, 4))
    (part / "00000000000000000000.txnindex").write_bytes(entry + entry[:20])  # a partial second entry
    (part / "00000000000000000100.log").write_bytes(b"")
    (part / "00000000000000000100.txnindex").write_bytes(b"\x05" + entry[1:])  # a version Kafka rejects
    inventory = discover([str(tmp_path / "logs")])
    found = read_txn_indexes(inventory.segments, inventory.txn_indexes)
    assert found.entries.column("producer_id").to_pylist() == [7]
    assert sorted(q.reason for _, q in found.quarantine) == ["bad_index", "truncated_tail"]
    assert found.segments.column("has_txnindex").to_pylist() == [True, True]


def test_a_sequence_gap_is_an_error_unless_the_cleaner_compacted_past_it():
    """A transaction whose batch at 12 is out of sequence: a SEQUENCE_GAP (ProducerAppendInfo.checkSequence); where
    the partition's cleaner-offset-checkpoint is past the transaction, the log cleaner may have removed the batches
    between, so the row says so as a WARNING."""
    gap = {**_txn(7, 10, 15, 16, COMMIT), "sequence_gap": 12}
    (row,) = _run([{**_txn(5, 0, 4, 5, COMMIT), "sequence_gap": None}, gap], [])  # from_pylist: the first row's keys
    assert (row["check"], row["severity"], row["first_offset"], row["marker_offset"]) == (
        "SEQUENCE_GAP",
        "ERROR",
        10,
        16,
    )
    assert "offset 12" in row["evidence"]
    rows = pa.Table.from_pylist([{**row, "from_time": None, "to_time": None}], schema=MS_SCHEMA)
    below = compacted_gaps(rows, [Checkpoint("b1", "t", 0, 20, 0, 20, cleaner_offset=8)]).to_pylist()
    past = compacted_gaps(rows, [Checkpoint("b1", "t", 0, 20, 0, 20, cleaner_offset=17)]).to_pylist()
    assert below[0]["severity"] == "ERROR"
    assert past[0]["severity"] == "WARNING" and "compacted this partition up to offset 17" in past[0]["evidence"]


def _history(pid: int, outcome: str, epoch: int, *, offset: int = 0, partitions: tuple[str, ...] = ("t-0", "u-0")):
    """A transaction the coordinator completed: its Prepare* (listing ``partitions``) and Complete* records."""
    rows = []
    for i, state in enumerate((f"Prepare{outcome}", f"Complete{outcome}")):
        listed = list(partitions) if state.startswith("Prepare") else []
        rows.append(
            {
                "transactional_id": "app",
                "coordinator_partition": 3,
                "record_offset": offset + i,
                "producer_id": pid,
                "producer_epoch": epoch,
                "state": state,
                "partitions": listed,
            }
        )
    return rows


def _audit(txns: list[dict], history: list[dict]) -> list[dict]:
    full = {"min_epoch": None, "prev_marker_epoch": None, "marker_offset": None, "control_type": None}
    table = pa.Table.from_pylist([{**full, **t} for t in txns])
    out = integrity(
        table,
        TXN_INDEX_SCHEMA.empty_table(),
        TXN_SEGMENT_SCHEMA.empty_table(),
        pa.Table.from_pylist(history),
    )
    return [r for r in out.to_pylist() if r["check"] != "INDEX_NOT_CHECKED"]


def _open(pid: int, first: int, last: int, epoch: int, prev_marker_epoch: int | None) -> dict:
    t = _txn(pid, first, last, 0, COMMIT)
    return {**t, "marker_offset": None, "control_type": None, "open_replicas": ["b1"], "producer_epoch": epoch,
            "min_epoch": epoch, "prev_marker_epoch": prev_marker_epoch}  # fmt: skip


def test_a_completed_transaction_with_no_marker_on_a_partition_whose_log_goes_on_is_marker_missing():
    """Transaction version 2: the coordinator committed at epoch 5 (the data's 4 + 1); t-0 never got the marker
    while another producer's transactions go on after it."""
    txns = [_open(1, 10, 12, 4, None), _txn(2, 20, 21, 22, COMMIT)]
    (row,) = _audit(txns, _history(1, "Commit", 5))
    assert (row["check"], row["severity"], row["first_offset"], row["marker_offset"]) == (
        "MARKER_MISSING",
        "ERROR",
        10,
        None,
    )
    assert (row["consumers_received"], row["consumers_should_receive"], row["transactional_id"]) == (
        "NONE",
        "ALL",
        "app",
    )
    assert "decided COMMIT at epoch 5" in row["evidence"] and "offset 22" in row["evidence"]
    # nothing after it on the partition: an ongoing or just-decided transaction, not a lost marker
    assert _audit([_open(1, 10, 12, 4, None)], _history(1, "Commit", 5)) == []


def test_a_late_batch_after_the_decisions_own_marker_is_not_marker_missing():
    """KAFKA-14053: the marker at the decision's epoch is there (3), the producer's batch after it opens a
    transaction the coordinator never knew of: the findings' hanging transaction, not a lost marker."""
    tv1 = [{**_txn(1, 0, 2, 3, ABORT), "producer_epoch": 3}, _open(1, 4, 4, 3, 3), _txn(2, 5, 6, 7, COMMIT)]
    assert _audit(tv1, _history(1, "Abort", 3)) == []
    # transaction version 2: the late batch carries the data's epoch, below the marker's: an EPOCH_REGRESSION only
    tv2 = [{**_txn(1, 0, 2, 3, ABORT), "producer_epoch": 4}, _open(1, 4, 4, 4, 5), _txn(2, 5, 6, 7, COMMIT)]
    assert [r["check"] for r in _audit(tv2, _history(1, "Abort", 5))] == ["EPOCH_REGRESSION"]


def test_a_lost_marker_shifts_the_pairing_of_the_older_transactions_rather_than_splitting_them():
    """The producer's committed transaction (epoch 4's marker) then one the coordinator aborted at epoch 5 whose
    marker t-0 lost: paired by order from the newest without the missing marker, the COMMIT would meet the ABORT
    decision (a false SPLIT_OUTCOME)."""
    txns = [{**_txn(1, 0, 1, 2, COMMIT), "producer_epoch": 3}, _open(1, 5, 6, 4, 4), _txn(2, 8, 9, 10, COMMIT)]
    history = _history(1, "Commit", 4) + _history(1, "Abort", 5, offset=2)
    (row,) = _audit(txns, history)
    assert (row["check"], row["first_offset"], row["consumers_should_receive"]) == ("MARKER_MISSING", 5, "NONE")


def test_a_false_entry_after_one_whose_last_stable_offset_ends_every_scan_is_never_read():
    """TransactionIndex.collectAbortedTxns stops at the first entry whose last stable offset reaches the fetch's
    upper bound, at most the next segment's base offset (100 here): a false entry after such an entry is never
    read; after one whose last stable offset is only above its first offset, it depends on where fetches end."""
    txns = [_txn(1, 0, 2, 50, ABORT), _txn(2, 10, 20, 30, COMMIT)]
    stopping = {**_entry(1, 0, 50), "last_stable_offset": 100}
    assert _run(txns, [stopping, _entry(2, 10, 30)]) == []
    partial = {**_entry(1, 0, 50), "last_stable_offset": 15}
    (row,) = _run(txns, [partial, _entry(2, 10, 30)])
    assert (row["check"], row["severity"], row["consumers_received"]) == ("COMMITTED_DATA_HIDDEN", "WARNING",
                                                                         "DEPENDS_ON_FETCH")  # fmt: skip
    assert "scan stops there" in row["evidence"]


def _ms_rows(txns: list[dict], entries: list[dict]) -> pa.Table:
    segments = [{"broker": "b1", "topic": "t", "partition": 0, "base_offset": 0, "has_txnindex": True}]
    return partition_integrity(
        pa.Table.from_pylist(txns),
        pa.Table.from_pylist(entries, schema=TXN_INDEX_SCHEMA),
        pa.Table.from_pylist(segments, schema=TXN_SEGMENT_SCHEMA),
        decisions(contract.COORDINATOR_HISTORY.empty_table()),
    )


def test_an_index_fault_at_or_above_the_last_stable_offset_is_not_served_yet():
    """A read_committed fetch stops at the LSO (UnifiedLog.read): an ABORT missing from the index in a transaction
    starting there is a WARNING that no consumer received yet; one below it stays an ERROR."""
    txns = [_txn(1, 0, 2, 3, ABORT), _txn(2, 4, 5, 6, ABORT)]
    rows = _ms_rows(txns, [])
    health = pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32()), "last_stable_offset": [4]})
    got = [(r["marker_offset"], r["severity"], r["consumers_received"]) for r in unserved(rows, health).to_pylist()]
    assert got == [(3, "ERROR", "ALL"), (6, "WARNING", NOT_YET)]
    assert "last stable offset 4" in unserved(rows, health).column("evidence")[1].as_py()
    # the LSO inside the transaction: a fetch returns only the batches wholly below it (UnifiedLog.read)
    health = health.set_column(2, "last_stable_offset", pa.array([5]))
    got = [(r["marker_offset"], r["severity"], r["consumers_received"]) for r in unserved(rows, health).to_pylist()]
    assert got == [(3, "ERROR", "ALL"), (6, "WARNING", "DEPENDS_ON_FETCH")]


def test_the_evidence_names_the_groups_whose_committed_offset_is_past_a_served_fault():
    txns = [_txn(1, 0, 2, 3, ABORT), _txn(2, 4, 5, 6, ABORT)]
    health = pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32()), "last_stable_offset": [4]})
    rows = unserved(_ms_rows(txns, []), health)
    offsets = pa.Table.from_pylist(
        [
            {
                "kind": "offset",
                "state": "committed",
                "group": g,
                "group_bytes": g.encode(),
                "topic": "t",
                "partition": 0,
                "committed_offset": o,
            }  # fmt: skip
            for g, o in (("late", 0), ("billing", 2), ("audit", 1), ("audit", 5), ("other-topic", 9))
        ],
        schema=SOURCE_SCHEMA,
    )
    offsets = offsets.set_column(offsets.schema.get_field_index("topic"), "topic", pa.array(["t"] * 4 + ["u"]))
    groups = groups_past(offsets, rows)
    assert groups.to_pylist() == [["audit", "billing"], ["audit"]]  # "late" has not read past offset 0
    evidence = with_readers(rows, groups).column("evidence").to_pylist()
    assert "past 0): audit, billing;" in evidence[0]
    assert "Consumer groups" not in evidence[1]  # not served yet: a group past it reads read_uncommitted
    # no __consumer_offsets in the input (kafka-dump-log.sh text): no group named, no clause
    assert with_readers(rows, groups_past(None, rows)).equals(rows)
