"""Offset, time and aborted-transaction indexes (spec §1.1, §1.6)."""

from __future__ import annotations

import struct

from txnlog.kafka.indexes import decode_offset_index, decode_time_index, decode_txn_index


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
