"""The committed offsets replayed as ``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker`` do, case by
case, on ``__consumer_offsets`` partitions written by our writer (the expected offsets are the cases' own,
written out by hand from Kafka's rules; tests/live/test_consumer_offsets.py checks the same rules against a real
broker's ListConsumerGroupOffsets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value
from txnlog.kafka.consumer_offsets import decode_records
from txnlog.kafka.consumer_offsets_scan import scan_consumer_offsets_file
from txnlog.rules import consumer_offsets
from txnlog.rules.consumer_offsets import replay_offsets

P1, P2 = (9001, 0), (9002, 3)


def _commit(w: OffsetsPartitionWriter, offset: int, *, group: str = "g", partition: int = 0, producer=None) -> None:
    w.append(
        [(offset_commit_key(group, "t", partition), offset_commit_value(offset, commit_timestamp=w.now))],
        producer=producer,
    )


def _delete(w: OffsetsPartitionWriter, *, group: str = "g", partition: int = 0) -> None:
    w.append([(offset_commit_key(group, "t", partition), None)])


def _replay(w: OffsetsPartitionWriter) -> list[tuple]:
    w.close()
    records, markers, damage = scan_consumer_offsets_file(w.log.dir / "00000000000000000000.log")
    decoded, quarantine = decode_records(records)
    assert damage == quarantine == []
    table = replay_offsets(decoded, markers)
    return [
        (r["group"], r["partition"], r["state"], r["producer_id"], r["committed_offset"]) for r in table.to_pylist()
    ]


CASES = {
    # a plain commit sets the offset; the newest plain commit wins
    "plain commits": (lambda w: (_commit(w, 5), _commit(w, 9)), [("g", 0, "committed", None, 9)]),
    # a tombstone removes the committed offset
    "tombstone": (lambda w: (_commit(w, 5), _delete(w)), []),
    # a transactional commit is pending until its COMMIT marker, then applied
    "open transaction": (
        lambda w: (_commit(w, 5), _commit(w, 8, producer=P1)),
        [("g", 0, "committed", None, 5), ("g", 0, "pending", 9001, 8)],
    ),
    "committed transaction": (
        lambda w: (_commit(w, 5), _commit(w, 8, producer=P1), w.end_transaction(P1, commit=True)),
        [("g", 0, "committed", None, 8)],
    ),
    # ABORT drops the pending offsets; the committed one stays
    "aborted transaction": (
        lambda w: (_commit(w, 5), _commit(w, 8, producer=P1), w.end_transaction(P1, commit=False)),
        [("g", 0, "committed", None, 5)],
    ),
    # a plain commit written after the transactional one is newer by record offset: the COMMIT keeps it
    "plain commit after the transactional one": (
        lambda w: (_commit(w, 8, producer=P1), _commit(w, 6), w.end_transaction(P1, commit=True)),
        [("g", 0, "committed", None, 6)],
    ),
    # a tombstone also removes the pending offsets of the group's open transactions
    "tombstone over a pending offset": (
        lambda w: (_commit(w, 8, producer=P1), _delete(w), w.end_transaction(P1, commit=True)),
        [],
    ),
    # the same producer's later pending commit of a partition replaces its earlier one
    "two pending commits of one producer": (
        lambda w: (_commit(w, 7, producer=P1), _commit(w, 8, producer=P1), w.end_transaction(P1, commit=True)),
        [("g", 0, "committed", None, 8)],
    ),
    # a marker ends only its producer's pending offsets; a marker with nothing pending does nothing
    "two producers": (
        lambda w: (
            _commit(w, 7, producer=P1, partition=0),
            _commit(w, 9, producer=P2, partition=1),
            w.end_transaction(P2, commit=False),
            w.end_transaction(P2, commit=True),
            w.end_transaction(P1, commit=True),
        ),
        [("g", 0, "committed", None, 7)],
    ),
    # a commit after a tombstone sets the offset again
    "commit after a tombstone": (
        lambda w: (_commit(w, 5), _delete(w), _commit(w, 3)),
        [("g", 0, "committed", None, 3)],
    ),
    # keys a producer touched beside keys it did not, in key order whatever the log order
    "touched and untouched keys": (
        lambda w: (
            _commit(w, 4, group="c"),
            _commit(w, 6, group="b", producer=P1),
            _commit(w, 2, group="a", partition=1),
            _commit(w, 3, group="a", partition=1),
            _commit(w, 1, group="b"),
            _commit(w, 9, group="d"),
            _delete(w, group="d"),
        ),
        [
            ("a", 1, "committed", None, 3),
            ("b", 0, "committed", None, 1),
            ("b", 0, "pending", 9001, 6),
            ("c", 0, "committed", None, 4),
        ],
    ),
    # groups with the same partition are apart
    "groups": (
        lambda w: (_commit(w, 1, group="a"), _commit(w, 2, group="b", producer=P1), _delete(w, group="a")),
        [("b", 0, "pending", 9001, 2)],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_replay(case: str, tmp_path: Path) -> None:
    write, expected = CASES[case]
    w = OffsetsPartitionWriter(tmp_path)
    write(w)
    assert _replay(w) == expected


@pytest.mark.parametrize("case", ["touched and untouched keys", "groups", "two producers"])
def test_keys_told_apart_without_one_integer_per_key(case: str, tmp_path: Path, monkeypatch) -> None:
    """Where a key does not fit one integer (more group and topic pairs than 2**31), the keys are sorted column
    by column, to the same answer."""
    monkeypatch.setattr(consumer_offsets, "_ONE_INT64", 0)
    write, expected = CASES[case]
    w = OffsetsPartitionWriter(tmp_path)
    write(w)
    assert _replay(w) == expected
