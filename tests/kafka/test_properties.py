"""Property tests: round trips for every decoder, and "never raises, loses nothing outside the damage"."""

from __future__ import annotations

import struct

import google_crc32c
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from tests.kafka import encoders as E
from tests.kafka.scans import assert_same_scan
from tests.kafka.strategies import PROPERTIES, apply_mutations, batch_specs, mutations, segments, txn_values
from txnlog.kafka.control import ControlStatus, decode_control_key, decode_end_txn_marker
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.indexes import decode_offset_index, decode_time_index, decode_txn_index
from txnlog.kafka.producer_snapshot import decode_producer_snapshot
from txnlog.kafka.record_batch import SegmentScan, _scan, as_uint8, scan_segment
from txnlog.kafka.txn_state import decode_transaction_log_key, decode_transaction_log_value, scan_transaction_log

SEGMENT_REASONS = {"crc_mismatch", "bad_length", "bad_magic", "truncated_tail"}


def assert_every_byte_accounted_for(scan: SegmentScan) -> None:
    """Batches, damaged regions, legacy entries and zero padding partition the buffer exactly.

    (Two batches may share a few bytes after bytes went missing: ``overlap_bytes``.)
    """
    b = scan.batches
    regions = [(int(p), int(p) + 12 + int(n), "batch") for p, n in zip(b["position"], b["batch_length"])]
    regions += [(q.position, q.position + q.length, q.reason) for q in scan.quarantine if q.reason in SEGMENT_REASONS]
    regions.sort()
    shared = 0
    for (_, end, kind), (start, _, next_kind) in zip(regions, regions[1:]):
        if end > start:
            assert kind == next_kind == "batch" and end - start <= 8, regions
            shared += end - start
    assert shared == scan.overlap_bytes
    assert all(0 <= s < e <= scan.size for s, e, _ in regions)
    covered = sum(e - s for s, e, _ in regions) - shared
    assert covered + scan.legacy_bytes + scan.zero_padding_bytes == scan.size


def header_rows(scan: SegmentScan) -> dict[int, tuple[object, ...]]:
    cols = [c for c in scan.batches if c != "position"]
    return {int(p): tuple(scan.batches[c][i].item() for c in cols) for i, p in enumerate(scan.batches["position"])}


# --------------------------------------------------------------------------- round trips


@PROPERTIES
@given(segments())
def test_segment_round_trip(specs: list) -> None:  # type: ignore[type-arg]
    raw = b""
    starts = []
    for spec in specs:
        starts.append(len(raw))
        raw += spec.encode()
    scan = scan_segment(raw)
    assert scan.quarantine == []
    assert scan.batches["position"].tolist() == starts
    assert_every_byte_accounted_for(scan)
    for i, spec in enumerate(specs):
        bs = spec.batch
        row = {name: col[i].item() for name, col in scan.batches.items()}
        kb = DefaultRecordBatch(raw[starts[i] : starts[i] + 12 + row["batch_length"]])
        assert kb.validate_crc()
        assert row["base_offset"] == bs.base_offset == kb.base_offset
        assert row["last_offset"] == kb.last_offset
        assert row["partition_leader_epoch"] == bs.partition_leader_epoch
        assert row["compression"] == bs.attributes & 7
        assert row["timestamp_type"] == (bs.attributes >> 3) & 1
        assert row["is_transactional"] == bool(bs.attributes & 0x10)
        assert row["is_control"] == bool(bs.attributes & 0x20)
        assert (row["base_timestamp"], row["max_timestamp"]) == (bs.base_timestamp, bs.max_timestamp)
        assert (row["producer_id"], row["producer_epoch"], row["base_sequence"]) == (
            bs.producer_id,
            bs.producer_epoch,
            bs.base_sequence,
        )
        assert row["record_count"] == kb.records_count
        expected_status = {
            "data": ControlStatus.NOT_CONTROL,
            "marker": ControlStatus.END_TXN_MARKER,
            "control-other": ControlStatus.OTHER_TYPE,
            "control-empty": ControlStatus.ZERO_RECORDS,
        }[spec.kind]
        assert row["control_status"] == expected_status
        assert row["control_type"] == spec.control_type
        assert row["coordinator_epoch"] == spec.coordinator_epoch
        if spec.kind in ("marker", "control-other"):
            log_append = bs.attributes & 0x08
            assert row["marker_timestamp"] == (
                bs.max_timestamp if log_append else bs.base_timestamp + spec.timestamp_delta
            )


@PROPERTIES
@given(txn_values(), st.sampled_from([0, 1]), st.text(max_size=30))
def test_txn_state_round_trip_and_bulk_agrees(spec: E.TxnValue, version: int, tid: str) -> None:
    raw = spec.encode(version)
    value = decode_transaction_log_value(raw)
    assert value is not None
    assert (value.producer_id, value.producer_epoch, value.transaction_timeout_ms, int(value.state)) == (
        spec.producer_id,
        spec.producer_epoch,
        spec.transaction_timeout_ms,
        spec.state,
    )
    expected_parts = None if spec.partitions is None else tuple((t, tuple(p)) for t, p in spec.partitions)
    assert value.partitions == expected_parts
    assert (value.last_update_timestamp_ms, value.start_timestamp_ms) == (
        spec.last_update_timestamp_ms,
        spec.start_timestamp_ms,
    )
    if version == 1:
        assert (
            value.previous_producer_id,
            value.next_producer_id,
            value.next_producer_epoch,
            value.client_transaction_version,
        ) == (
            spec.previous_producer_id,
            spec.next_producer_id,
            spec.next_producer_epoch,
            spec.client_transaction_version,
        )
        assert value.unknown_tags == tuple(sorted(spec.extra_tags))
    else:
        assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (-1, -1, 0)
    key = E.txn_log_key(tid)
    assert decode_transaction_log_key(key) == tid
    scan = scan_transaction_log(E.txn_log_batch([(key, raw), (key, None)]))
    assert scan.quarantine == []
    assert scan.transactional_ids().tolist() == [tid, tid]
    row = {n: c[0].item() for n, c in scan.records.items()}
    for name in (
        "producer_id",
        "producer_epoch",
        "transaction_timeout_ms",
        "last_update_timestamp_ms",
        "start_timestamp_ms",
        "previous_producer_id",
        "next_producer_id",
        "next_producer_epoch",
        "client_transaction_version",
    ):
        assert row[name] == getattr(value, name), name
    assert row["state"] == value.state and row["value_version"] == version
    assert row["unknown_tag_count"] == len(value.unknown_tags)
    assert scan.records["is_tombstone"].tolist() == [False, True]
    strings = scan.topic_partition_strings().tolist()
    assert strings == [f"{t}-{p}" for t, ps in (expected_parts or ()) for p in ps]


@PROPERTIES
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2**63 - 1),
            st.integers(-(2**15), 2**15 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-1, 2**63 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-1, 2**63 - 1),
        ),
        max_size=30,
    )
)
def test_producer_snapshot_round_trip(entries: list) -> None:  # type: ignore[type-arg]
    snap = decode_producer_snapshot(E.producer_snapshot(entries))
    assert snap.crc_valid
    assert list(zip(*(c.tolist() for c in snap.entries.values()))) == entries


@PROPERTIES
@given(
    st.integers(0, 255),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(0, 255),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=4),
)
def test_control_round_trip(key_version: int, ctype: int, value_version: int, epoch: int, tail: bytes) -> None:
    key = decode_control_key(E.control_key(ctype, version=key_version) + tail)
    assert (key.version, key.type) == (key_version, ctype)
    marker = decode_end_txn_marker(E.end_txn_marker(epoch, version=value_version) + tail)
    assert (marker.version, marker.coordinator_epoch) == (value_version, epoch)


# --------------------------------------------------------------------------- never raise


@PROPERTIES
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    for check in (True, False):
        scan = scan_segment(data, check_crc=check)
        assert_every_byte_accounted_for(scan)
        scan_transaction_log(data, check_crc=check)
    decode_offset_index(data)
    decode_time_index(data)
    decode_txn_index(data)
    for strict in (
        decode_producer_snapshot,
        decode_control_key,
        decode_end_txn_marker,
        decode_transaction_log_key,
        decode_transaction_log_value,
    ):
        try:
            strict(data)
        except DecodeError:
            pass


@PROPERTIES
@given(st.binary(max_size=300))
def test_garbage_after_a_header_prefix_never_raises(tail: bytes) -> None:
    """Bytes that start like a batch (magic 2, sane length) are the interesting garbage."""
    head = struct.pack(">qiib", 5, 49 + len(tail) // 2, 0, 2)
    for check in (True, False):
        scan = scan_segment(head + tail, check_crc=check)
        assert_every_byte_accounted_for(scan)
        scan_transaction_log(head + tail, check_crc=check)


@PROPERTIES
@given(st.binary(max_size=200), st.sampled_from([0, 1]))
def test_strict_txn_decoders_raise_only_decode_errors(data: bytes, version: int) -> None:
    for candidate in (struct.pack(">h", version) + data, data):
        try:
            decode_transaction_log_value(candidate)
        except DecodeError as e:
            assert e.reason in ("bad_txn_log_value", "unknown_value_version")
        try:
            decode_transaction_log_key(candidate)
        except DecodeError as e:
            assert e.reason == "bad_txn_log_key"


@PROPERTIES
@given(txn_values(), st.sampled_from([0, 1]), st.data())
def test_bulk_and_strict_agree_on_mutated_values(spec: E.TxnValue, version: int, data: st.DataObject) -> None:
    raw = bytearray(spec.encode(version))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        value = decode_transaction_log_value(bytes(raw))
        error = None
    except DecodeError as e:
        value, error = None, e.reason
    scan = scan_transaction_log(E.txn_log_batch([(E.txn_log_key("t"), bytes(raw))]))
    if error is None:
        assert scan.quarantine == [] and scan.record_count == 1
        assert value is not None and scan.records["producer_id"][0] == value.producer_id
        assert scan.records["partition_count"][0] == (
            -1 if value.partitions is None else sum(len(p) for _, p in value.partitions)
        )
    else:
        assert scan.record_count == 0 and [q.reason for q in scan.quarantine] == [error]


# --------------------------------------------------------------------------- damage


def _encoded(specs: list) -> tuple[bytes, list[tuple[int, int]]]:  # type: ignore[type-arg]
    """The batches of ``specs`` back to back, and where each one lies."""
    raw = b""
    spans = []
    for spec in specs:
        encoded = spec.encode()
        spans.append((len(raw), len(raw) + len(encoded)))
        raw += encoded
    return raw, spans


def _mutated(specs: list, data: st.DataObject) -> np.ndarray:  # type: ignore[type-arg]
    """The batches of ``specs``, damaged by mutations ``data`` draws."""
    raw, spans = _encoded(specs)
    mutated, _, _ = apply_mutations(raw, spans, data.draw(mutations(len(raw))))
    return as_uint8(mutated)


@PROPERTIES
@given(segments(max_batches=12), st.data())
def test_mutated_segment_keeps_every_batch_outside_the_damage(specs: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    raw, spans = _encoded(specs)
    clean = header_rows(scan_segment(raw))
    ops = data.draw(mutations(len(raw)))
    mutated, moved, (lo, hi) = apply_mutations(raw, spans, ops)
    scan = scan_segment(mutated)
    assert_every_byte_accounted_for(scan)
    got = header_rows(scan)
    for (old_start, _), new in zip(spans, moved):
        if new is None:
            continue  # touched by a mutation
        if new[1] <= lo or new[0] >= hi:
            assert new[0] in got, (new, ops, scan.quarantine)
            assert got[new[0]] == clean[old_start]
    # Whatever was emitted is a CRC-valid batch.
    arr = np.frombuffer(mutated, np.uint8)
    for p, n, crc in zip(scan.batches["position"], scan.batches["batch_length"], scan.batches["crc"]):
        assert google_crc32c.value(arr[p + 21 : p + 12 + n].tobytes()) == crc
    # Without CRC checks nothing raises either.
    assert_every_byte_accounted_for(scan_segment(mutated, check_crc=False))


@PROPERTIES
@given(
    st.lists(st.tuples(st.text(max_size=8), txn_values(), st.sampled_from([0, 1])), min_size=1, max_size=6), st.data()
)
def test_mutated_transaction_log_never_raises(entries: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    raw = b""
    for i, (tid, value, version) in enumerate(entries):
        raw += E.txn_log_batch(
            [(E.txn_log_key(tid), value.encode(version))], base_offset=i, codec=data.draw(st.integers(0, 4))
        )
    mutated, _, _ = apply_mutations(raw, [], data.draw(mutations(len(raw))))
    for check in (True, False):
        scan = scan_transaction_log(mutated, check_crc=check)
        assert scan.transactional_id_offsets.size == scan.record_count + 1
        assert_every_byte_accounted_for(scan.segment)


@PROPERTIES
@given(batch_specs(base_offset=10), st.integers(1, 60))
def test_any_batch_cut_short_is_a_truncated_tail(spec, cut: int) -> None:  # type: ignore[no-untyped-def]
    raw = spec.encode()
    part = raw[: min(cut, len(raw) - 1)]
    scan = scan_segment(E.Batch([E.record(0, 0, None, b"x")], base_offset=0).encode() + part)
    assert scan.batch_count == 1
    if any(part):
        assert [q.reason for q in scan.quarantine] == ["truncated_tail"]
    assert_every_byte_accounted_for(scan)


@PROPERTIES
@given(segments(max_batches=12), st.data(), st.booleans())
def test_tight_loop_and_careful_walk_agree(specs: list, data: st.DataObject, check_crc: bool) -> None:  # type: ignore[type-arg]
    """The walk's fast path for runs of valid batches changes nothing: same rows, quarantine and counters."""
    arr = _mutated(specs, data)
    fast = _scan(arr, "seg.log", check_crc, tight_loop=True)
    careful = _scan(arr, "seg.log", check_crc, tight_loop=False)
    assert_same_scan(fast, careful)


@PROPERTIES
@given(segments(max_batches=12), st.data(), st.booleans(), st.integers(1, 400))
def test_a_walk_in_windows_equals_the_whole_walk(
    specs: list, data: st.DataObject, check_crc: bool, window: int
) -> None:  # type: ignore[type-arg]
    """A segment walked a window at a time (its mapped pages given back behind the walk) gives the whole walk's
    rows, quarantine and counters, whatever the damage, and gives back only what the walk has passed."""
    import pytest

    from txnlog.kafka import record_batch

    arr = _mutated(specs, data)
    whole = _scan(arr, "seg.log", check_crc, tight_loop=True)
    released: list[int] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record_batch, "SCAN_WINDOW_BYTES", window)
        windows = _scan(arr, "seg.log", check_crc, tight_loop=True, release=released.append)
    assert released == sorted(released) and all(0 < r < arr.size for r in released)
    assert_same_scan(windows, whole)
