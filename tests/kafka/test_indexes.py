"""Offset, time and aborted-transaction indexes (spec §1.1, §1.6)."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from txnlog.kafka.indexes import decode_offset_index, decode_time_index, decode_txn_index, decode_txn_indexes


def test_offset_index_stops_at_preallocated_zeros() -> None:
    raw = struct.pack(">ii", 0, 0) + struct.pack(">ii", 40, 4096) + struct.pack(">ii", 90, 8192) + bytes(8 * 100)
    idx = decode_offset_index(raw, base_offset=1000, file="00000000000000001000.index")
    assert idx.entries["offset"].tolist() == [1000, 1040, 1090]
    assert idx.entries["position"].tolist() == [0, 4096, 8192]
    assert idx.unused_entries == 100 and idx.quarantine == []


def test_time_index_and_partial_entry() -> None:
    raw = struct.pack(">qi", 1_700_000_000_000, 0) + struct.pack(">qi", 1_700_000_000_500, 12) + bytes(12) + b"\x01\x02"
    idx = decode_time_index(raw, base_offset=50)
    assert idx.entries["timestamp"].tolist() == [1_700_000_000_000, 1_700_000_000_500]
    assert idx.entries["offset"].tolist() == [50, 62]
    assert idx.unused_entries == 1
    assert [(q.position, q.length, q.reason) for q in idx.quarantine] == [(36, 2, "truncated_tail")]


def test_empty_indexes() -> None:
    assert decode_offset_index(b"").entry_count == 0
    assert decode_time_index(b"").entry_count == 0
    assert decode_txn_index(b"").entry_count == 0


def aborted(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    return struct.pack(">hqqqq", version, pid, first, last, lso)


def test_txn_index() -> None:
    raw = aborted(4711, 10, 20, 10) + aborted(4712, 30, 31, 25)
    idx = decode_txn_index(raw)
    assert list(idx.entries) == ["version", "producer_id", "first_offset", "last_offset", "last_stable_offset"]
    assert idx.entries["producer_id"].tolist() == [4711, 4712]
    assert idx.entries["last_offset"].tolist() == [20, 31]
    assert idx.entries["version"].tolist() == [0, 0]


def test_txn_index_version_is_the_first_byte_as_kafka_reads_it() -> None:
    # AbortedTxn.version() reads one byte: an int16 of 1 is version 0 to Kafka; 256 (first byte 1) is not.
    raw = aborted(1, 1, 2, 1) + aborted(2, 3, 4, 3, version=1) + aborted(3, 5, 6, 5, version=256) + aborted(4, 7, 8, 7)
    idx = decode_txn_index(raw, file="x.txnindex")
    assert idx.entries["producer_id"].tolist() == [1, 2]
    assert [(q.position, q.length, q.reason) for q in idx.quarantine] == [(68, 68, "bad_index")]


def _entry(version: int, pid: int) -> bytes:
    return struct.pack(">hqqqq", version, pid, 10 * pid, 10 * pid + 5, 10 * pid)


#: a file: (entries' versions as Kafka's reader sees them, a partial tail's length)
_FILES = st.lists(st.tuples(st.lists(st.sampled_from([0, 0, 0, 1 << 8]), max_size=4), st.integers(0, 3)), max_size=6)


@settings(max_examples=60, deadline=None)
@given(_FILES)
def test_many_txn_indexes_decode_as_each_alone(files: list[tuple[list[int], int]]) -> None:
    """Decoded together, every file gives what it gives decoded alone (a later version and a partial entry
    included), each entry tagged with its file's position."""
    bufs = [
        b"".join(_entry(v, 100 * k + i) for i, v in enumerate(vs)) + bytes(tail) for k, (vs, tail) in enumerate(files)
    ]
    names = [f"{k:020d}.txnindex" for k in range(len(bufs))]
    together = decode_txn_indexes(bufs, names)
    alone = [decode_txn_index(b, file=n) for b, n in zip(bufs, names, strict=True)]
    for name in ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset"):
        want = np.concatenate([a.entries[name] for a in alone]) if alone else np.zeros(0)
        assert together.entries[name].tolist() == want.tolist()
    assert together.entries["file_index"].tolist() == [k for k, a in enumerate(alone) for _ in range(a.entry_count)]
    assert sorted(together.quarantine, key=lambda q: (q.file, q.position)) == sorted(
        (q for a in alone for q in a.quarantine), key=lambda q: (q.file, q.position)
    )
