"""Segment walk: header columns, control records, and every kind of bad bytes (docs/design.md §4a)."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.kafka import encoders as E
from tests.kafka.scans import assert_same_scan
from txnlog.kafka import record_batch
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import BATCH_COLUMNS, SegmentScan, as_uint8, scan_segment, scan_segment_file
from txnlog.kafka.wire import ControlType

TS = 1_700_000_000_000


def data_batch(base_offset: int, n: int = 3, **kw: object) -> bytes:
    recs = [E.record(i, 10 * i, f"k{i}".encode(), f"value-{i}".encode()) for i in range(n)]
    kw.setdefault("max_timestamp", TS + 10 * (n - 1))
    return E.Batch(recs, base_offset=base_offset, base_timestamp=TS, **kw).encode()  # type: ignore[arg-type]


def txn_batch(base_offset: int, pid: int = 4711, epoch: int = 3, n: int = 2) -> bytes:
    return data_batch(base_offset, n, attributes=0x10, producer_id=pid, producer_epoch=epoch, base_sequence=0)


def chain(*base_offsets: int) -> tuple[bytes, list[int]]:
    """Consecutive data batches; returns (bytes, positions)."""
    out = b""
    positions = []
    for bo in base_offsets:
        positions.append(len(out))
        out += data_batch(bo)
    return out, positions


def reasons(scan: SegmentScan) -> list[tuple[int, int, str]]:
    return [(q.position, q.length, q.reason) for q in scan.quarantine]


# --------------------------------------------------------------------------- columns


def test_columns_and_dtypes_are_exactly_batch_columns() -> None:
    scan = scan_segment(txn_batch(0))
    assert list(scan.batches) == list(BATCH_COLUMNS)
    for name, dtype in BATCH_COLUMNS.items():
        assert scan.batches[name].dtype == dtype, name
    empty = scan_segment(b"")
    assert list(empty.batches) == list(BATCH_COLUMNS)
    assert all(empty.batches[n].dtype == d and empty.batches[n].size == 0 for n, d in BATCH_COLUMNS.items())
    assert empty.quarantine == [] and empty.size == 0


def test_header_fields_of_a_transactional_batch() -> None:
    raw = E.Batch(
        [E.record(0, 0, None, b"a"), E.record(1, 5, None, b"b"), E.record(2, 9, None, b"c")],
        base_offset=1234,
        partition_leader_epoch=17,
        attributes=0x10,
        base_timestamp=TS,
        max_timestamp=TS + 9,
        producer_id=4711,
        producer_epoch=3,
        base_sequence=42,
    ).encode()
    scan = scan_segment(raw, file="seg.log")
    row = {name: col[0].item() for name, col in scan.batches.items()}
    crc = struct.unpack_from(">I", raw, 17)[0]
    assert row == {
        "position": 0,
        "base_offset": 1234,
        "last_offset": 1236,
        "batch_length": len(raw) - 12,
        "partition_leader_epoch": 17,
        "magic": 2,
        "crc": crc,
        "crc_valid": True,
        "compression": 0,
        "timestamp_type": 0,
        "is_transactional": True,
        "is_control": False,
        "has_delete_horizon": False,
        "last_offset_delta": 2,
        "base_timestamp": TS,
        "max_timestamp": TS + 9,
        "producer_id": 4711,
        "producer_epoch": 3,
        "base_sequence": 42,
        "record_count": 3,
        "control_key_version": -1,
        "control_type": -1,
        "control_value_version": -1,
        "coordinator_epoch": -1,
        "marker_timestamp": -1,
        "control_status": 0,
    }
    assert scan.file == "seg.log" and scan.size == len(raw) and scan.crc_checked


ATTRIBUTE_CASES = [
    # (attributes, compression, timestamp_type, transactional, control)
    (0x00, 0, 0, False, False),
    (0x01, 1, 0, False, False),
    (0x02, 2, 0, False, False),
    (0x03, 3, 0, False, False),
    (0x04, 4, 0, False, False),
    (0x08, 0, 1, False, False),
    (0x10, 0, 0, True, False),
    (0x40, 0, 0, False, False),  # delete horizon: base_timestamp holds it; nothing else changes
    (0x1B, 3, 1, True, False),
    (0x07, 7, 0, False, False),  # codec 7 does not exist, but the CRC is valid: Kafka only fails on decompression
    (0x80, 0, 0, False, False),  # unused bit 7 set: ignored, as Kafka ignores it
]


@pytest.mark.parametrize(
    "attributes,compression,timestamp_type,transactional,control",
    ATTRIBUTE_CASES,
    ids=[f"attr-0x{c[0]:02x}" for c in ATTRIBUTE_CASES],
)
def test_attribute_bits(
    attributes: int, compression: int, timestamp_type: int, transactional: bool, control: bool
) -> None:
    raw = E.Batch([E.record(0, 0, None, b"x")], base_offset=5, attributes=attributes, body=b"opaque payload").encode()
    b = scan_segment(raw).batches
    assert b["compression"][0] == compression
    assert b["timestamp_type"][0] == timestamp_type
    assert b["is_transactional"][0] == transactional
    assert b["is_control"][0] == control
    assert b["has_delete_horizon"][0] == bool(attributes & 0x40)


def test_input_types_are_equivalent(tmp_path: object) -> None:
    raw, _ = chain(0, 3, 6)
    arr = np.frombuffer(raw, np.uint8)
    variants = {
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "ndarray": arr.copy(),
        "readonly-ndarray": arr,
        "strided-ndarray": np.repeat(arr, 2)[::2],
        "int8-ndarray": arr.view(np.int8),
    }
    expected = scan_segment(raw).batches
    for name, buf in variants.items():
        got = scan_segment(buf).batches
        for col in BATCH_COLUMNS:
            np.testing.assert_array_equal(got[col], expected[col], err_msg=f"{name}:{col}")


def test_scan_segment_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw, positions = chain(0, 3, 6)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(raw + data_batch(9)[:30])
    scan = scan_segment_file(path)
    assert scan.batches["position"].tolist() == positions
    assert scan.file == str(path)
    assert reasons(scan) == [(len(raw), 30, "truncated_tail")]
    empty = tmp_path / "00000000000000000009.log"
    empty.write_bytes(b"")
    assert scan_segment_file(empty).batch_count == 0


# --------------------------------------------------------------------------- truncation

FULL = txn_batch(0x0102030405060708)  # a base offset whose first byte is not zero
TRUNCATIONS = list(range(1, 61)) + [61, 62, 70, len(FULL) - 1]


@pytest.mark.parametrize("k", TRUNCATIONS, ids=[f"cut-at-{k}" for k in TRUNCATIONS])
@pytest.mark.parametrize("with_previous", [False, True], ids=["alone", "after-a-batch"])
def test_every_truncation_length_is_a_truncated_tail(k: int, with_previous: bool) -> None:
    prefix = data_batch(1000) if with_previous else b""
    scan = scan_segment(prefix + FULL[:k])
    assert scan.batch_count == (1 if with_previous else 0)
    assert reasons(scan) == [(len(prefix), k, "truncated_tail")]
    assert scan.zero_padding_bytes == 0


@pytest.mark.parametrize("k", range(1, 61), ids=[f"cut-at-{k}" for k in range(1, 61)])
def test_truncation_of_a_realistic_batch(k: int) -> None:
    """Base offset 1234: a cut inside the leading zero bytes is indistinguishable from zero padding."""
    prefix = data_batch(1000)
    part = txn_batch(1234)[:k]
    scan = scan_segment(prefix + part)
    assert scan.batch_count == 1
    if not any(part):
        assert scan.quarantine == [] and scan.zero_padding_bytes == k
    else:
        assert reasons(scan) == [(len(prefix), k, "truncated_tail")]


def test_truncated_legacy_entry_is_a_truncated_tail() -> None:
    legacy = E.legacy_entry(7, b"hello", magic=1)
    scan = scan_segment(legacy + E.legacy_entry(8, b"world", magic=1)[:20])
    assert scan.legacy_entries == 1 and reasons(scan) == [(len(legacy), 20, "truncated_tail")]


# --------------------------------------------------------------------------- damage inside a segment


def test_bad_crc_in_the_middle_is_quarantined_and_the_rest_decodes() -> None:
    raw, pos = chain(0, 3, 6, 9)
    bad = bytearray(raw)
    bad[pos[1] + 70] ^= 0xFF  # inside batch 2's records
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0, 6, 9]
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "crc_mismatch")]
    # Without CRC checking the batch is accepted as is.
    unchecked = scan_segment(bytes(bad), check_crc=False)
    assert unchecked.batches["base_offset"].tolist() == [0, 3, 6, 9] and not unchecked.crc_checked
    assert unchecked.batches["crc_valid"].all()


def test_bad_length_below_minimum() -> None:
    raw, pos = chain(0, 3, 6)
    bad = bytearray(raw)
    struct.pack_into(">i", bad, pos[1] + 8, 48)
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0, 6]
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "bad_length")]


def test_length_past_the_end_while_a_valid_batch_follows_is_bad_length() -> None:
    raw, pos = chain(0, 3, 6)
    bad = bytearray(raw)
    struct.pack_into(">i", bad, pos[1] + 8, 1 << 30)
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0, 6]
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "bad_length")]


@pytest.mark.parametrize("magic", [3, 4, 0x7F, 0x80, 0xFF], ids=lambda m: f"magic-{m}")
def test_unknown_magic(magic: int) -> None:
    raw, pos = chain(0, 3, 6)
    bad = bytearray(raw)
    bad[pos[1] + 16] = magic
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0, 6]
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "bad_magic")]


def test_magic_damaged_to_legacy_is_not_skipped_as_legacy() -> None:
    raw, pos = chain(0, 3, 6)
    bad = bytearray(raw)
    bad[pos[1] + 16] = 1
    scan = scan_segment(bytes(bad))
    assert scan.legacy_entries == 0
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "crc_mismatch")]
    assert scan.batches["base_offset"].tolist() == [0, 6]


@pytest.mark.parametrize("garbage", [b"\x01" * 7, b"\xff" * 100, bytes(range(256)) * 3], ids=["7B", "100B", "768B"])
def test_garbage_between_batches_is_one_entry(garbage: bytes) -> None:
    a, b = data_batch(0), data_batch(3)
    scan = scan_segment(a + garbage + b)
    assert scan.batches["base_offset"].tolist() == [0, 3]
    assert [(q.position, q.length) for q in scan.quarantine] == [(len(a), len(garbage))]


def test_bad_crc_in_the_last_batch() -> None:
    raw, pos = chain(0, 3)
    bad = bytearray(raw)
    bad[-1] ^= 1
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0]
    assert reasons(scan) == [(pos[1], len(raw) - pos[1], "crc_mismatch")]


def test_consecutive_bad_batches_are_one_entry() -> None:
    raw, pos = chain(0, 3, 6, 9, 12)
    bad = bytearray(raw)
    for i in (1, 2, 3):
        bad[pos[i] + 65] ^= 0x55
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [0, 12]
    assert reasons(scan) == [(pos[1], pos[4] - pos[1], "crc_mismatch")]


def test_every_batch_bad_is_linear_and_complete() -> None:
    raw, pos = chain(*range(0, 3000, 3))
    bad = np.frombuffer(raw, np.uint8).copy()
    bad[np.array(pos) + 65] ^= 0x55
    scan = scan_segment(bad)
    assert scan.batch_count == 0
    assert reasons(scan) == [(0, len(raw), "crc_mismatch")]


def test_damage_then_zero_padding() -> None:
    raw, pos = chain(0, 3)
    bad = bytearray(raw)
    bad[-1] ^= 1
    scan = scan_segment(bytes(bad) + bytes(4096))
    assert reasons(scan) == [(pos[1], len(raw) - pos[1], "crc_mismatch")]
    assert scan.zero_padding_bytes == 4096


def test_garbage_tail_then_zero_padding() -> None:
    raw, _ = chain(0, 3)
    scan = scan_segment(raw + b"\xee" * 40 + bytes(1000))
    assert reasons(scan) == [(len(raw), 40, "bad_magic")]  # the magic byte is read before the length
    assert scan.zero_padding_bytes == 1000


def test_zero_padding_is_not_quarantine() -> None:
    raw, _ = chain(0, 3, 6)
    scan = scan_segment(raw + bytes(1 << 16))
    assert scan.batch_count == 3 and scan.quarantine == [] and scan.zero_padding_bytes == 1 << 16
    only_zeros = scan_segment(bytes(100))
    assert only_zeros.quarantine == [] and only_zeros.zero_padding_bytes == 100


def test_zeros_in_the_middle_are_damage() -> None:
    a, b = data_batch(0), data_batch(3)
    scan = scan_segment(a + bytes(500) + b)
    assert scan.batches["base_offset"].tolist() == [0, 3]
    assert reasons(scan) == [(len(a), 500, "bad_length")]


def test_resync_skips_a_batch_embedded_in_a_damaged_payload() -> None:
    """A valid batch inside a record value (base offset 0, as producers write) is not the next batch."""
    embedded = data_batch(0)
    carrier = E.Batch([E.record(0, 0, None, embedded)], base_offset=100, base_timestamp=TS).encode()
    first = data_batch(97)
    bad = bytearray(first + carrier + data_batch(101))
    struct.pack_into(">i", bad, len(first) + 8, 20)  # the carrier's length is now impossible
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [97, 101]
    assert reasons(scan) == [(len(first), len(carrier), "bad_length")]


def test_resync_falls_back_when_base_offsets_go_backwards() -> None:
    """baseOffset is not covered by the CRC: a corrupt one must not hide everything after it."""
    raw, pos = chain(0, 3, 6, 9)
    bad = bytearray(raw)
    struct.pack_into(">q", bad, pos[0], 1 << 40)  # batch 1 stays valid, with a wrong base offset
    bad[pos[1] + 70] ^= 0xFF  # batch 2 damaged
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [1 << 40, 6, 9]
    assert reasons(scan) == [(pos[1], pos[2] - pos[1], "crc_mismatch")]


def test_leader_epoch_is_not_covered_by_the_crc() -> None:
    raw = bytearray(data_batch(0))
    struct.pack_into(">i", raw, 12, 99)
    scan = scan_segment(bytes(raw))
    assert scan.quarantine == [] and scan.batches["partition_leader_epoch"].tolist() == [99]


# --------------------------------------------------------------------------- legacy entries


def test_legacy_entries_are_counted_not_quarantined() -> None:
    v0 = E.legacy_entry(0, b"a", magic=0)
    v1 = E.legacy_entry(1, b"bb", key=b"k", magic=1, timestamp=TS)
    v2 = data_batch(2)
    scan = scan_segment(v0 + v1 + v2)
    assert scan.legacy_entries == 2 and scan.legacy_bytes == len(v0) + len(v1)
    assert scan.batches["position"].tolist() == [len(v0) + len(v1)]
    assert scan.quarantine == []


def test_legacy_entry_with_bad_crc_is_damage() -> None:
    v1 = bytearray(E.legacy_entry(0, b"abc", magic=1))
    v1[-1] ^= 1
    v2 = data_batch(1)
    scan = scan_segment(bytes(v1) + v2)
    assert scan.legacy_entries == 0
    assert reasons(scan) == [(0, len(v1), "crc_mismatch")]
    assert scan.batch_count == 1
    assert scan_segment(bytes(v1) + v2, check_crc=False).legacy_entries == 1


# --------------------------------------------------------------------------- control records


def control(records: list[bytes], **kw: object) -> bytes:
    kw.setdefault("attributes", 0x30)
    kw.setdefault("producer_id", 4711)
    kw.setdefault("producer_epoch", 4)
    return E.Batch(records, base_offset=50, base_timestamp=TS, **kw).encode()  # type: ignore[arg-type]


def ctrl_row(raw: bytes) -> dict[str, int]:
    b = scan_segment(raw).batches
    return {
        k: b[k][0].item()
        for k in (
            "control_key_version",
            "control_type",
            "control_value_version",
            "coordinator_epoch",
            "marker_timestamp",
            "control_status",
        )
    }


@pytest.mark.parametrize("control_type", [0, 1], ids=["ABORT", "COMMIT"])
def test_end_txn_markers(control_type: int) -> None:
    raw = E.marker_batch(
        control_type, base_offset=50, producer_id=4711, producer_epoch=4, coordinator_epoch=17, timestamp=TS
    )
    assert ctrl_row(raw) == {
        "control_key_version": 0,
        "control_type": control_type,
        "control_value_version": 0,
        "coordinator_epoch": 17,
        "marker_timestamp": TS,
        "control_status": ControlStatus.END_TXN_MARKER,
    }


OTHER_TYPES = [t for t in ControlType if t not in (ControlType.ABORT, ControlType.COMMIT)] + [7, 99, -5, 32767]


@pytest.mark.parametrize("control_type", OTHER_TYPES, ids=[getattr(t, "name", str(t)) for t in OTHER_TYPES])
def test_other_control_types_are_ignored(control_type: int) -> None:
    raw = control([E.record(0, 3, E.control_key(int(control_type)), b"whatever")])
    row = ctrl_row(raw)
    assert row["control_status"] == ControlStatus.OTHER_TYPE
    assert row["control_type"] == control_type and row["coordinator_epoch"] == -1
    assert row["marker_timestamp"] == TS + 3
    assert scan_segment(raw).quarantine == []


def test_zero_record_control_batch() -> None:
    raw = control([], record_count=0, last_offset_delta=0)
    row = ctrl_row(raw)
    assert row["control_status"] == ControlStatus.ZERO_RECORDS and row["control_type"] == -1
    assert scan_segment(raw).quarantine == []


BAD_CONTROL = {
    "key-null": ([E.record(0, 0, None, E.end_txn_marker(1))], ControlStatus.BAD_KEY),
    "key-3-bytes": ([E.record(0, 0, b"\x00\x00\x00", E.end_txn_marker(1))], ControlStatus.BAD_KEY),
    "key-negative-version": (
        [E.record(0, 0, E.control_key(0, version=-1), E.end_txn_marker(1))],
        ControlStatus.BAD_KEY,
    ),
    "key-implausible-version": (
        [E.record(0, 0, E.control_key(0, version=0x6F70), E.end_txn_marker(1))],
        ControlStatus.BAD_KEY,
    ),
    "value-null": ([E.record(0, 0, E.control_key(1), None)], ControlStatus.BAD_VALUE),
    "value-5-bytes": ([E.record(0, 0, E.control_key(1), b"\x00\x00\x00\x00\x01")], ControlStatus.BAD_VALUE),
    "value-negative-version": (
        [E.record(0, 0, E.control_key(1), E.end_txn_marker(1, version=-2))],
        ControlStatus.BAD_VALUE,
    ),
    "value-text": ([E.record(0, 0, E.control_key(0), b"opaque-control-message")], ControlStatus.BAD_VALUE),
    "framing": ([b"\x7f\x00"], ControlStatus.BAD_KEY),
}


@pytest.mark.parametrize("case", list(BAD_CONTROL), ids=list(BAD_CONTROL))
def test_unreadable_control_records(case: str) -> None:
    records, status = BAD_CONTROL[case]
    raw = control(records)
    scan = scan_segment(raw)
    row = ctrl_row(raw)
    assert row["control_status"] == status
    assert row["coordinator_epoch"] == -1
    if status == ControlStatus.BAD_KEY:
        assert row["control_type"] == -1
    assert scan.batch_count == 1  # the header still counts
    assert [(q.reason, q.position, q.length) for q in scan.quarantine] == [("bad_control_record", 0, len(raw))]
    assert scan.quarantine[0].detail.startswith("offset 50: ")


def test_higher_versions_are_read_as_version_0() -> None:
    raw = control([E.record(0, 0, E.control_key(1, version=1) + b"future", E.end_txn_marker(9, version=3) + b"more")])
    assert ctrl_row(raw) == {
        "control_key_version": 1,
        "control_type": 1,
        "control_value_version": 3,
        "coordinator_epoch": 9,
        "marker_timestamp": TS,
        "control_status": ControlStatus.END_TXN_MARKER,
    }


def test_log_append_time_marker_uses_max_timestamp() -> None:
    raw = control([E.record(0, 5, E.control_key(0), E.end_txn_marker(2))], attributes=0x38, max_timestamp=TS + 777)
    assert ctrl_row(raw)["marker_timestamp"] == TS + 777


def test_only_the_first_control_record_counts() -> None:
    raw = control([E.record(0, 0, E.control_key(1), E.end_txn_marker(5)), E.record(1, 0, E.control_key(0), b"")])
    assert ctrl_row(raw)["control_type"] == 1 and ctrl_row(raw)["coordinator_epoch"] == 5


@pytest.mark.parametrize(
    "codec,variant",
    [(1, ""), (2, ""), (2, "raw"), (3, ""), (3, "java"), (4, "")],
    ids=["gzip", "snappy-xerial", "snappy-raw", "lz4", "lz4-java-frame", "zstd"],
)
def test_compressed_control_batch_is_decoded(codec: int, variant: str) -> None:
    raw = control(
        [E.record(0, 2, E.control_key(1), E.end_txn_marker(33))], attributes=0x30 | codec, compression_variant=variant
    )
    row = ctrl_row(raw)
    assert row["control_status"] == ControlStatus.END_TXN_MARKER and row["coordinator_epoch"] == 33


def test_undecompressable_control_batch() -> None:
    raw = control([E.record(0, 0, E.control_key(1), E.end_txn_marker(1))], attributes=0x31, body=b"not gzip at all")
    scan = scan_segment(raw)
    assert scan.batches["control_status"].tolist() == [ControlStatus.BAD_KEY]
    assert [q.reason for q in scan.quarantine] == ["decompression_failed"]


def test_control_and_data_batches_mix() -> None:
    segment = (
        txn_batch(0)
        + E.marker_batch(1, base_offset=2, producer_id=4711, producer_epoch=3, coordinator_epoch=5)
        + txn_batch(3)
    )
    b = scan_segment(segment).batches
    assert b["is_control"].tolist() == [False, True, False]
    assert b["control_status"].tolist() == [0, 1, 0]
    assert b["control_type"].tolist() == [-1, 1, -1]
    assert b["coordinator_epoch"].tolist() == [-1, 5, -1]


def test_a_corrupt_length_that_lands_on_a_later_batch_skips_nothing() -> None:
    """Equal-sized batches: a flipped length bit can point exactly at the batch after next."""
    raw, pos = chain(0, 3, 6, 9)
    size = pos[1] - pos[0]
    bad = bytearray(raw)
    struct.pack_into(">i", bad, pos[0] + 8, size - 12 + size)  # batch 1 now "ends" where batch 3 starts
    scan = scan_segment(bytes(bad))
    assert scan.batches["base_offset"].tolist() == [3, 6, 9]
    assert reasons(scan) == [(0, size, "crc_mismatch")]


def test_a_deleted_trailing_zero_byte_loses_no_batch() -> None:
    """Deleting the last byte of a batch (0x00: no headers) lets it borrow the next batch's first byte
    (0x00: high byte of the base offset) and still pass its CRC; the next batch must not be lost."""
    raw, pos = chain(0, 3, 6)
    assert raw[pos[2] - 1] == 0 and raw[pos[2]] == 0
    damaged = raw[: pos[2] - 1] + raw[pos[2] :]
    scan = scan_segment(damaged)
    assert scan.batches["base_offset"].tolist() == [0, 3, 6]
    assert scan.batches["position"].tolist() == [pos[0], pos[1], pos[2] - 1]
    assert scan.quarantine == [] and scan.overlap_bytes == 1


# --------------------------------------------------------------------------- fast path and output memory


def _fast_and_careful(raw: bytes, check_crc: bool = True) -> tuple[SegmentScan, SegmentScan]:
    arr = as_uint8(raw)
    return (
        record_batch._scan(arr, "seg.log", check_crc, tight_loop=True),
        record_batch._scan(arr, "seg.log", check_crc, tight_loop=False),
    )


def _entry_mix() -> dict[str, bytes]:
    raw, pos = chain(0, 3, 6, 9)
    crc = bytearray(raw)
    crc[pos[1] + 40] ^= 0xFF
    length = bytearray(raw)
    struct.pack_into(">i", length, pos[2] + 8, 7)
    v0 = E.legacy_entry(12, b"a", magic=0)
    v1 = E.legacy_entry(13, b"bb", key=b"k", magic=1, timestamp=TS)
    return {
        "clean": raw,
        "bad-crc": bytes(crc),
        "bad-length": bytes(length),
        "bad-magic": raw[: pos[1] + 16] + b"\x07" + raw[pos[1] + 17 :],
        "legacy-between": raw[: pos[2]] + v0 + v1 + raw[pos[2] :],
        "legacy-first": v0 + raw,
        "cut-tail": raw + data_batch(12)[:40],
        "cut-tail-short": raw + data_batch(12)[:11],
        "zero-padding": raw + bytes(5000),
        "overlap": raw[: pos[2] - 1] + raw[pos[2] :],
        "garbage-between": raw[: pos[2]] + b"\xee" * 77 + raw[pos[2] :],
        "only-zeros": bytes(100),
        "empty": b"",
        "control": raw
        + E.marker_batch(1, base_offset=12, producer_id=4711, producer_epoch=4, coordinator_epoch=17, timestamp=TS),
    }


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "no-crc"])
@pytest.mark.parametrize("name", list(_entry_mix()))
def test_fast_path_equals_careful_walk(name: str, check_crc: bool) -> None:
    fast, careful = _fast_and_careful(_entry_mix()[name], check_crc)
    assert_same_scan(fast, careful)


def _big_segment(first_offset: int, min_bytes: int) -> tuple[bytes, int]:
    """A clean segment of at least ``min_bytes`` (large enough for reused output blocks)."""
    unit = b"".join(txn_batch(first_offset + 2 * i, pid=first_offset + i) for i in range(64))
    copies = -(-min_bytes // len(unit))
    return unit * copies, 64 * copies


def test_large_segments_use_blocks_and_agree_with_small_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    raw, n = _big_segment(0, record_batch._BLOCK_MIN_INPUT)
    raw = raw + b"\xee" * 100 + raw[:5000] + data_batch(1)[:30]
    in_block = scan_segment(raw)
    assert in_block.batches["position"].base is not None  # a view into a block
    monkeypatch.setattr(record_batch, "_BLOCK_MIN_INPUT", 1 << 62)
    separate = scan_segment(raw)
    assert separate.batches["position"].base is None
    assert in_block.batch_count > n
    assert_same_scan(in_block, separate)


@pytest.mark.parametrize("name", list(_entry_mix()))
def test_a_mapped_file_walked_in_windows_equals_the_whole_walk(
    name: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """scan_log_file walks a local file a window at a time, giving back the mapped pages behind: the scan is the
    whole walk's (rows, control columns, quarantine, counters), windows of a few batches or of a big segment."""
    from txnlog.engine.segments import scan_log_file

    raw = _entry_mix()[name]
    big, _ = _big_segment(0, record_batch._BLOCK_MIN_INPUT)
    for data, window in ((raw, 50), (big + raw, 1 << 20)):
        path = tmp_path / f"{len(data)}.log"
        path.write_bytes(data)
        monkeypatch.setattr(record_batch, "SCAN_WINDOW_BYTES", window)
        whole = scan_segment(data, file=str(path))
        assert_same_scan(scan_log_file(str(path), True), whole)


def test_a_kept_result_is_never_overwritten_and_a_dropped_one_is_reused() -> None:
    record_batch._OUTPUT_BLOCKS.clear()
    a_raw, _ = _big_segment(0, record_batch._BLOCK_MIN_INPUT)
    b_raw, _ = _big_segment(1000, record_batch._BLOCK_MIN_INPUT)
    a = scan_segment(a_raw)
    a_copy = {k: v.copy() for k, v in a.batches.items()}
    b = scan_segment(b_raw)
    c = scan_segment(b_raw)
    assert not np.shares_memory(a.batches["producer_id"], b.batches["producer_id"])
    assert not np.shares_memory(b.batches["producer_id"], c.batches["producer_id"])
    for name, col in a_copy.items():
        np.testing.assert_array_equal(a.batches[name], col, err_msg=name)
    address = b.batches["producer_id"].ctypes.data
    del b, c
    d = scan_segment(a_raw)
    assert d.batches["producer_id"].ctypes.data == address  # b's block, free again
    for name, col in a_copy.items():
        np.testing.assert_array_equal(d.batches[name], col, err_msg=name)


def test_scans_in_threads_get_their_own_columns() -> None:
    raws = [_big_segment(1000 * i, record_batch._BLOCK_MIN_INPUT)[0] for i in range(4)]
    expected = [{k: v.copy() for k, v in scan_segment(r).batches.items()} for r in raws]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda r: scan_segment(r), raws * 3))
    for i, scan in enumerate(results):
        for name, col in expected[i % 4].items():
            np.testing.assert_array_equal(scan.batches[name], col, err_msg=name)


def test_at_most_two_free_blocks_are_kept() -> None:
    record_batch._OUTPUT_BLOCKS.clear()
    raw, _ = _big_segment(0, record_batch._BLOCK_MIN_INPUT)
    kept = [scan_segment(raw) for _ in range(4)]
    assert len(record_batch._OUTPUT_BLOCKS._free) == 0
    del kept
    assert len(record_batch._OUTPUT_BLOCKS._free) == 2
