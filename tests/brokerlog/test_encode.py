"""Encoders checked against kafka-python's decoder and against hand-built bytes from the spec."""

from __future__ import annotations

import gzip
import struct
import zlib

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from tests.brokerlog.kafka_python import iter_entries, parse_producer_snapshot, parse_txn_log_value
from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import RecordSpec
from txnlog.kafka.wire import Compression, ControlType, TimestampType, TransactionState

CODECS = list(Compression)
BASE_TS = 1_717_401_600_000


def _records(n: int = 30) -> list[RecordSpec]:
    return [
        RecordSpec(
            offset_delta=i,
            timestamp_delta=i * 7,
            key=None if i % 5 == 0 else b"key-%d" % i,
            value=None if i % 7 == 3 else (b"value %d " % i) * (i + 1),
            headers=() if i % 3 else (("trace", b"abc"), ("empty", b""), ("null", None)),
        )
        for i in range(n)
    ]


def _decode_one(data: bytes):
    entries = list(iter_entries(data))
    assert len(entries) == 1 and entries[0][0] == 0
    batch = entries[0][1]
    assert batch.size_in_bytes == len(data)
    return batch


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"is_transactional": True, "producer_id": 4711, "producer_epoch": 3, "base_sequence": 17},
        {"producer_id": 9, "producer_epoch": 0, "base_sequence": 2_147_483_640},
        {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": BASE_TS + 999_999},
        {"partition_leader_epoch": 42, "has_delete_horizon": True},
    ],
    ids=["plain", "transactional", "idempotent-seq-wrap", "log-append-time", "leader-epoch-delete-horizon"],
)
def test_record_batch_decodes_with_kafka_python(codec: Compression, flags: dict) -> None:
    records = _records()
    data = encode.encode_record_batch(
        base_offset=1000, records=records, base_timestamp=BASE_TS, compression=codec, **flags
    )
    batch = _decode_one(data)
    assert batch.validate_crc()
    assert batch.magic == 2
    assert batch.base_offset == 1000
    assert batch.last_offset == 1000 + len(records) - 1
    assert batch.compression_type == codec
    assert batch.is_transactional == flags.get("is_transactional", False)
    assert not batch.is_control_batch
    assert batch.producer_id == flags.get("producer_id", -1)
    assert batch.producer_epoch == flags.get("producer_epoch", -1)
    assert batch.base_sequence == flags.get("base_sequence", -1)
    assert batch.leader_epoch == flags.get("partition_leader_epoch", 0)
    assert batch.records_count == len(records)
    assert bool(batch.attributes & 0x40) == flags.get("has_delete_horizon", False)
    log_append = flags.get("timestamp_type") == TimestampType.LOG_APPEND_TIME
    assert batch.timestamp_type == (1 if log_append else 0)
    assert batch.first_timestamp == BASE_TS
    assert batch.max_timestamp == flags.get("max_timestamp", BASE_TS + records[-1].timestamp_delta)
    decoded = list(batch)
    assert [r.offset for r in decoded] == [1000 + r.offset_delta for r in records]
    assert [r.key for r in decoded] == [r.key for r in records]
    assert [r.value for r in decoded] == [r.value for r in records]
    assert [list(r.headers) for r in decoded] == [list(r.headers) for r in records]
    if not log_append:
        assert [r.timestamp for r in decoded] == [BASE_TS + r.timestamp_delta for r in records]
    else:
        assert {r.timestamp for r in decoded} == {batch.max_timestamp}


def test_compression_framings_match_the_java_producer() -> None:
    raw = encode.encode_records(_records(200))
    snappy = encode.compress(Compression.SNAPPY, raw)
    assert snappy[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    first_block = struct.unpack_from(">i", snappy, 16)[0]
    assert 0 < first_block < 32 * 1024
    lz4 = encode.compress(Compression.LZ4, raw)
    # Lz4BlockOutputStream: magic, FLG 0x60 (v1, independent blocks), BD 0x40 (64 KiB), HC.
    assert lz4[:7] == bytes.fromhex("04224d18604082")
    assert lz4.endswith(b"\x00\x00\x00\x00")
    gz = encode.compress(Compression.GZIP, raw)
    assert gz[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
    assert gzip.decompress(gz) == raw


def test_lz4_incompressible_block_is_stored_raw() -> None:
    rng = np.random.default_rng(1)
    noise = rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    framed = encode.compress(Compression.LZ4, noise)
    size = struct.unpack_from("<I", framed, 7)[0]
    assert size & 0x80000000 and size & 0x7FFFFFFF == 64 * 1024
    batch = _decode_one(
        encode.encode_record_batch(
            base_offset=0, records=[RecordSpec(0, 0, None, noise)], base_timestamp=1, compression=Compression.LZ4
        )
    )
    assert [r.value for r in batch] == [noise]


@pytest.mark.parametrize("control_type", [ControlType.ABORT, ControlType.COMMIT], ids=["abort", "commit"])
def test_end_txn_marker(control_type: ControlType) -> None:
    data = encode.encode_end_txn_marker_batch(
        offset=77,
        producer_id=4711,
        producer_epoch=5,
        control_type=control_type,
        coordinator_epoch=12,
        timestamp=BASE_TS,
    )
    assert len(data) == 78  # 61-byte header + one 17-byte control record
    batch = _decode_one(data)
    assert batch.validate_crc()
    assert batch.attributes == 0x30
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 4711, 5, -1)
    assert batch.first_timestamp == batch.max_timestamp == BASE_TS
    (record,) = list(batch)
    assert (record.version, record.type) == (0, int(control_type))
    assert record.value == struct.pack(">hi", 0, 12)
    assert record.timestamp == BASE_TS


def test_marker_rejects_other_types() -> None:
    with pytest.raises(ValueError):
        encode.encode_end_txn_marker_batch(
            offset=0,
            producer_id=1,
            producer_epoch=0,
            control_type=ControlType.LEADER_CHANGE,
            coordinator_epoch=0,
            timestamp=0,
        )


def test_control_batch_with_zero_records_and_unknown_type() -> None:
    empty = _decode_one(encode.encode_control_batch(offset=9, producer_id=3, producer_epoch=1, timestamp=BASE_TS))
    assert empty.validate_crc() and empty.is_control_batch and empty.records_count == 0
    assert empty.last_offset == 9 and list(empty) == []
    odd = _decode_one(
        encode.encode_control_batch(
            offset=10,
            producer_id=3,
            producer_epoch=1,
            timestamp=BASE_TS,
            records=[(encode.encode_control_record_key(99), b"\x00\x00whatever")],
            is_transactional=False,
        )
    )
    assert odd.validate_crc() and not odd.is_transactional
    (record,) = list(odd)
    assert record.type == 99


def test_data_batch_fast_path_equals_full_encoder() -> None:
    records = _records(12)
    for codec in CODECS:
        payload = encode.encode_records_payload(records, codec)
        fast = encode.encode_data_batch(
            base_offset=5,
            payload=payload,
            base_timestamp=BASE_TS,
            producer_id=8,
            producer_epoch=2,
            base_sequence=40,
            is_transactional=True,
            partition_leader_epoch=3,
        )
        full = encode.encode_record_batch(
            base_offset=5,
            records=records,
            base_timestamp=BASE_TS,
            producer_id=8,
            producer_epoch=2,
            base_sequence=40,
            is_transactional=True,
            partition_leader_epoch=3,
            compression=codec,
        )
        assert fast == full


def test_vectorized_batches_equal_one_at_a_time_and_have_valid_crcs() -> None:
    payload = encode.encode_records_payload(_records(4), Compression.ZSTD)
    n = 300
    offsets = np.arange(n, dtype=np.int64) * 4 + 1_000_000
    ts = BASE_TS + np.arange(n, dtype=np.int64) * 13 - 5
    rows = encode.encode_data_batches(
        base_offsets=offsets,
        payload=payload,
        base_timestamps=ts,
        producer_ids=np.arange(n) % 3 + 10,
        producer_epochs=np.arange(n) % 2,
        base_sequences=np.arange(n) * 4,
        is_transactional=True,
        partition_leader_epoch=7,
    )
    assert rows.shape == (n, 61 + len(payload.data))
    for i in (0, 1, 2, 57, n - 1):
        assert rows[i].tobytes() == encode.encode_data_batch(
            base_offset=int(offsets[i]),
            payload=payload,
            base_timestamp=int(ts[i]),
            producer_id=int(i % 3 + 10),
            producer_epoch=int(i % 2),
            base_sequence=int(i * 4),
            is_transactional=True,
            partition_leader_epoch=7,
        )
    entries = list(iter_entries(rows.tobytes()))
    assert len(entries) == n
    assert all(b.validate_crc() for _, b in entries)
    assert [b.base_offset for _, b in entries] == offsets.tolist()


def test_legacy_messages_decode_with_kafka_python() -> None:
    v0 = encode.encode_legacy_message(offset=3, magic=0, key=b"k", value=b"v0")
    v1 = encode.encode_legacy_message(offset=4, magic=1, key=None, value=b"v1", timestamp=BASE_TS)
    wrapper = encode.encode_legacy_wrapper(
        last_offset=9, magic=1, messages=[(b"a", b"x", BASE_TS), (None, b"y", BASE_TS + 1), (b"c", None, BASE_TS + 2)]
    )
    snappy_v0 = encode.encode_legacy_wrapper(
        last_offset=12, magic=0, messages=[(b"a", b"x", None), (b"b", b"y", None)], compression=Compression.SNAPPY
    )
    entries = list(iter_entries(v0 + v1 + wrapper + snappy_v0))
    assert [b.magic for _, b in entries] == [0, 1, 1, 0]
    assert all(b.validate_crc() for _, b in entries)
    (r0,) = list(entries[0][1])
    assert (r0.offset, r0.key, r0.value) == (3, b"k", b"v0")
    (r1,) = list(entries[1][1])
    assert (r1.offset, r1.key, r1.value, r1.timestamp) == (4, None, b"v1", BASE_TS)
    inner = list(entries[2][1])
    assert [(r.offset, r.key, r.value) for r in inner] == [(7, b"a", b"x"), (8, None, b"y"), (9, b"c", None)]
    assert [(r.offset, r.value) for r in entries[3][1]] == [(11, b"x"), (12, b"y")]
    # Plain CRC-32 over magic..end.
    assert struct.unpack_from(">I", v0, 12)[0] == zlib.crc32(v0[16:])


def test_transaction_log_key_bytes() -> None:
    assert encode.encode_transaction_log_key("tx-é") == b"\x00\x00\x00\x05tx-\xc3\xa9"


def test_transaction_log_value_v0_bytes() -> None:
    value = encode.encode_transaction_log_value(
        version=0,
        producer_id=4711,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [1, 4], "pay": [0]},
        last_update_timestamp_ms=BASE_TS + 5,
        start_timestamp_ms=BASE_TS,
    )
    expected = (
        struct.pack(">hqhib", 0, 4711, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iii", 2, 1, 4)
        + struct.pack(">h", 3)
        + b"pay"
        + struct.pack(">ii", 1, 0)
        + struct.pack(">qq", BASE_TS + 5, BASE_TS)
    )
    assert value == expected
    empty = encode.encode_transaction_log_value(
        version=0,
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1,
        state=TransactionState.EMPTY,
        partitions=None,
        last_update_timestamp_ms=2,
        start_timestamp_ms=-1,
    )
    assert empty[17:21] == b"\xff\xff\xff\xff"
    with pytest.raises(ValueError):
        encode.encode_transaction_log_value(
            version=0,
            producer_id=1,
            producer_epoch=0,
            transaction_timeout_ms=1,
            state=0,
            partitions=None,
            last_update_timestamp_ms=2,
            start_timestamp_ms=-1,
            client_transaction_version=2,
        )


def test_transaction_log_value_v1_bytes_and_tags() -> None:
    value = encode.encode_transaction_log_value(
        version=1,
        producer_id=4711,
        producer_epoch=32767,
        transaction_timeout_ms=60000,
        state=TransactionState.PREPARE_COMMIT,
        partitions={"orders": [2]},
        last_update_timestamp_ms=BASE_TS + 5,
        start_timestamp_ms=BASE_TS,
        previous_producer_id=4711,
        next_producer_id=5000,
        client_transaction_version=2,
        next_producer_epoch=0,
        unknown_tagged_fields={7: b"\x01\x02", 4: b""},
    )
    expected = (
        struct.pack(">hqhib", 1, 4711, 32767, 60000, 2)
        + b"\x02"  # one topic (+1)
        + b"\x07orders"
        + b"\x02"
        + struct.pack(">i", 2)
        + b"\x00"
        + struct.pack(">qq", BASE_TS + 5, BASE_TS)
        + b"\x06"  # six tagged fields, ascending
        + b"\x00\x08"
        + struct.pack(">q", 4711)
        + b"\x01\x08"
        + struct.pack(">q", 5000)
        + b"\x02\x02"
        + struct.pack(">h", 2)
        + b"\x03\x02"
        + struct.pack(">h", 0)
        + b"\x04\x00"
        + b"\x07\x02\x01\x02"
    )
    assert value == expected
    parsed = parse_txn_log_value(value)
    assert parsed["next_producer_epoch"] == 0 and parsed["unknown_tags"] == {4: b"", 7: b"\x01\x02"}
    defaults = encode.encode_transaction_log_value(
        version=1,
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1,
        state=TransactionState.EMPTY,
        partitions=None,
        last_update_timestamp_ms=2,
        start_timestamp_ms=-1,
    )
    assert defaults.endswith(b"\x00") and defaults[17] == 0  # null partitions, no tags
    complete = encode.encode_transaction_log_value(
        version=1,
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=1,
        state=TransactionState.COMPLETE_COMMIT,
        partitions={},
        last_update_timestamp_ms=2,
        start_timestamp_ms=1,
    )
    assert complete[17] == 1  # empty (not null) array


def test_producer_snapshot_layout() -> None:
    entries = [
        encode.ProducerSnapshotEntry(4711, 3, 99, 1234, 4, BASE_TS, 7, 1200),
        encode.ProducerSnapshotEntry(5, 0),
    ]
    data = encode.encode_producer_snapshot(entries)
    assert len(data) == 10 + 2 * 46
    parsed = parse_producer_snapshot(data)
    assert parsed[0] == {
        "producer_id": 4711,
        "epoch": 3,
        "last_sequence": 99,
        "last_offset": 1234,
        "offset_delta": 4,
        "timestamp": BASE_TS,
        "coordinator_epoch": 7,
        "current_txn_first_offset": 1200,
    }
    assert parsed[1]["last_offset"] == -1 and parsed[1]["current_txn_first_offset"] == -1
    assert encode.encode_producer_snapshot([]) == struct.pack(
        ">hI", 1, google_crc32c.value(b"\x00\x00\x00\x00")
    ) + bytes(4)


def test_index_entries() -> None:
    assert encode.encode_aborted_txn(producer_id=1, first_offset=2, last_offset=3, last_stable_offset=4) == struct.pack(
        ">hqqqq", 0, 1, 2, 3, 4
    )
    assert encode.encode_offset_index_entry(5, 4096) == struct.pack(">ii", 5, 4096)
    assert encode.encode_time_index_entry(BASE_TS, 5) == struct.pack(">qi", BASE_TS, 5)


_header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8)))
_record = st.tuples(
    st.integers(-(2**40), 2**40),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(_header, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(_record, min_size=1, max_size=12),  # producers never send empty batches
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    pid=st.integers(-1, 2**62),
    transactional=st.booleans(),
)
def test_any_batch_round_trips_through_kafka_python(records, codec, base_offset, pid, transactional) -> None:
    specs = [RecordSpec(i, ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(records)]
    data = encode.encode_record_batch(
        base_offset=base_offset,
        records=specs,
        base_timestamp=BASE_TS,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_transactional=transactional,
        compression=codec,
    )
    batch = next(iter(MemoryRecords(data)))
    assert batch.validate_crc()
    decoded = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded] == [
        (base_offset + s.offset_delta, BASE_TS + s.timestamp_delta, s.key, s.value, list(s.headers)) for s in specs
    ]
