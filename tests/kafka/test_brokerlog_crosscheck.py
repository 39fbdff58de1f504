"""Three independent readings of the same bytes: txnlog.brokerlog writes, kafka-python and we read.

Over 100,000 batches of every codec and flag combination the writer offers,
kafka-python's DefaultRecordBatch and our scan must agree on every header field
and on every control record.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatch

from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import BATCH_COLUMNS, scan_segment
from txnlog.kafka.txn_state import scan_transaction_log
from txnlog.kafka.wire import Compression, ControlType, TimestampType, TransactionState

encode = pytest.importorskip(
    "txnlog.brokerlog.encode", reason="txnlog.brokerlog (the broker-log writer) is not present"
)

N_BULK = 100_000
BLOCK = 500


def build_segment(seed: int = 7) -> bytes:
    """~100k bulk data batches in blocks of BLOCK, each block followed by a few hand-made batches."""
    rng = np.random.default_rng(seed)
    payloads = []
    for codec in Compression:
        for size in (1, 5):
            records = [
                encode.RecordSpec(
                    i,
                    3 * i,
                    b"k%d" % i if i % 2 else None,
                    bytes(rng.integers(0, 4, 40 + i, dtype=np.uint8)),
                    [("h", b"v")] if i == 2 else [],
                )
                for i in range(size)
            ]
            payloads.append(encode.encode_records_payload(records, codec))
    out = bytearray()
    offset = 1_000_000
    ts = 1_700_000_000_000
    for block in range(N_BULK // BLOCK):
        payload = payloads[block % len(payloads)]
        n = BLOCK
        base_offsets = offset + np.arange(n, dtype=np.int64) * (payload.last_offset_delta + 1)
        transactional = bool(block % 3)
        pids = rng.integers(0, 1 << 40, n) if transactional or block % 2 else np.full(n, -1)
        raw = encode.encode_data_batches(
            base_offsets=base_offsets,
            payload=payload,
            base_timestamps=ts + np.arange(n),
            producer_ids=pids,
            producer_epochs=np.where(pids >= 0, rng.integers(0, 32767, n), -1),
            base_sequences=np.where(pids >= 0, rng.integers(0, 1 << 31, n), -1),
            partition_leader_epoch=block,
            is_transactional=transactional,
            timestamp_type=TimestampType.LOG_APPEND_TIME if block % 5 == 4 else TimestampType.CREATE_TIME,
        )
        out += raw.tobytes()
        offset = int(base_offsets[-1]) + payload.last_offset_delta + 1
        ts += n
        # Markers, other control types, an emptied control batch, a cleaned batch with a delete horizon.
        for control_type in (ControlType.ABORT, ControlType.COMMIT):
            out += encode.encode_end_txn_marker_batch(
                offset=offset,
                producer_id=block,
                producer_epoch=block % 32767,
                control_type=control_type,
                coordinator_epoch=block * 7,
                timestamp=ts,
            )
            offset += 1
        other = ControlType(2 + block % 5)
        out += encode.encode_control_batch(
            offset=offset,
            producer_id=-1,
            producer_epoch=-1,
            timestamp=ts,
            records=[(encode.encode_control_record_key(other), b"{}")],
            is_transactional=False,
        )
        offset += 1
        out += encode.encode_control_batch(offset=offset, producer_id=block, producer_epoch=1, timestamp=ts, records=[])
        offset += 1
        out += encode.encode_record_batch(
            base_offset=offset,
            records=[encode.RecordSpec(0, 0, b"k", None), encode.RecordSpec(2, 1, b"k2", b"v")],
            base_timestamp=ts + 86_400_000,
            max_timestamp=ts,
            compression=Compression(block % 5),
            has_delete_horizon=True,
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
        )
        offset += 3
    return bytes(out)


def kafka_python_columns(raw: bytes, positions: np.ndarray, sizes: np.ndarray) -> dict[str, list[int]]:
    cols: dict[str, list[int]] = {
        name: []
        for name in (
            "base_offset",
            "last_offset",
            "partition_leader_epoch",
            "magic",
            "crc",
            "compression",
            "timestamp_type",
            "is_transactional",
            "is_control",
            "last_offset_delta",
            "base_timestamp",
            "max_timestamp",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "record_count",
        )
    }
    view = memoryview(raw)
    for p, size in zip(positions.tolist(), sizes.tolist()):
        b = DefaultRecordBatch(view[p : p + size])
        cols["base_offset"].append(b.base_offset)
        cols["last_offset"].append(b.last_offset)
        cols["partition_leader_epoch"].append(b.leader_epoch)
        cols["magic"].append(b.magic)
        cols["crc"].append(b.crc)
        cols["compression"].append(b.compression_type)
        cols["timestamp_type"].append(b.timestamp_type)
        cols["is_transactional"].append(b.is_transactional)
        cols["is_control"].append(b.is_control_batch)
        cols["last_offset_delta"].append(b.last_offset_delta)
        cols["base_timestamp"].append(b.first_timestamp)
        cols["max_timestamp"].append(b.max_timestamp)
        cols["producer_id"].append(b.producer_id)
        cols["producer_epoch"].append(b.producer_epoch)
        cols["base_sequence"].append(b.base_sequence)
        cols["record_count"].append(b.records_count)
    return cols


def test_100k_writer_batches_agree_with_kafka_python() -> None:
    raw = build_segment()
    scan = scan_segment(raw)
    b = scan.batches
    assert scan.quarantine == [] and scan.legacy_entries == 0 and scan.zero_padding_bytes == 0
    assert scan.batch_count >= N_BULK + 5 * (N_BULK // BLOCK)
    sizes = b["batch_length"].astype(np.int64) + 12
    # The batches tile the file.
    assert b["position"][0] == 0 and np.array_equal(b["position"][1:], b["position"][:-1] + sizes[:-1])
    assert int(b["position"][-1] + sizes[-1]) == len(raw)
    expected = kafka_python_columns(raw, b["position"], sizes)
    for name, values in expected.items():
        np.testing.assert_array_equal(b[name], np.asarray(values, dtype=BATCH_COLUMNS[name]), err_msg=name)
    # Every codec and flag combination is present.
    assert set(b["compression"].tolist()) == {0, 1, 2, 3, 4}
    assert set(b["timestamp_type"].tolist()) == {0, 1}
    assert b["is_transactional"].any() and (~b["is_transactional"]).any()
    # Every CRC, checked by kafka-python too, on a sample (the scan already checked them all).
    view = memoryview(raw)
    for i in range(0, scan.batch_count, 997):
        p = int(b["position"][i])
        assert DefaultRecordBatch(view[p : p + int(sizes[i])]).validate_crc()


def test_every_control_record_agrees_with_kafka_python() -> None:
    raw = build_segment()
    b = scan_segment(raw).batches
    idx = np.flatnonzero(b["is_control"])
    assert idx.size == 4 * (N_BULK // BLOCK)
    view = memoryview(raw)
    statuses = set()
    for i in idx.tolist():
        p, size = int(b["position"][i]), int(b["batch_length"][i]) + 12
        batch = DefaultRecordBatch(view[p : p + size])
        records = list(batch)
        status = int(b["control_status"][i])
        statuses.add(status)
        if not records:
            assert status == ControlStatus.ZERO_RECORDS and b["control_type"][i] == -1
            continue
        first = records[0]
        assert (b["control_key_version"][i], b["control_type"][i]) == (first.version, first.type)
        assert b["marker_timestamp"][i] == first.timestamp
        if first.type in (ControlType.ABORT, ControlType.COMMIT):
            version, epoch = struct.unpack(">hi", first.value)
            assert status == ControlStatus.END_TXN_MARKER
            assert (b["control_value_version"][i], b["coordinator_epoch"][i]) == (version, epoch)
        else:
            assert status == ControlStatus.OTHER_TYPE and b["coordinator_epoch"][i] == -1
    assert statuses == {ControlStatus.END_TXN_MARKER, ControlStatus.OTHER_TYPE, ControlStatus.ZERO_RECORDS}


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
def test_writer_transaction_log_values_decode(codec: Compression) -> None:
    values = []
    for i, state in enumerate(TransactionState):
        for version in (0, 1):
            tagged = (
                {}
                if version == 0
                else {
                    "previous_producer_id": i,
                    "next_producer_id": i + 1,
                    "client_transaction_version": 2,
                    "next_producer_epoch": 3,
                    "unknown_tagged_fields": {9: b"x"},
                }
            )
            values.append(
                (
                    f"txn-{i}-{version}",
                    encode.encode_transaction_log_value(
                        version=version,
                        producer_id=100 + i,
                        producer_epoch=i,
                        transaction_timeout_ms=60_000,
                        state=state,
                        partitions=None if state == TransactionState.EMPTY else {"orders": [0, i], "pay": [i]},
                        last_update_timestamp_ms=1_700_000_000_000 + i,
                        start_timestamp_ms=1_699_000_000_000,
                        **tagged,
                    ),
                    version,
                    tagged,
                )
            )
    records = [
        encode.RecordSpec(i, i, encode.encode_transaction_log_key(t), v) for i, (t, v, _, _) in enumerate(values)
    ]
    records.append(encode.RecordSpec(len(records), 0, encode.encode_transaction_log_key("gone"), None))
    raw = encode.encode_record_batch(
        base_offset=0, records=records, base_timestamp=1_700_000_000_000, compression=codec
    )
    scan = scan_transaction_log(raw)
    assert scan.quarantine == []
    assert scan.transactional_ids().tolist() == [t for t, _, _, _ in values] + ["gone"]
    r = scan.records
    assert r["is_tombstone"].tolist() == [False] * len(values) + [True]
    assert r["value_version"][:-1].tolist() == [v for _, _, v, _ in values]
    assert r["state"][:-1].tolist() == [int(s) for s in TransactionState for _ in (0, 1)]
    assert r["previous_producer_id"][:-1].tolist() == [t.get("previous_producer_id", -1) for _, _, _, t in values]
    assert r["next_producer_epoch"][:-1].tolist() == [t.get("next_producer_epoch", -1) for _, _, _, t in values]
    assert r["unknown_tag_count"][:-1].tolist() == [len(t.get("unknown_tagged_fields", {})) for _, _, _, t in values]
    strings = scan.topic_partition_strings().tolist()
    assert strings[:3] == ["orders-0", "orders-0", "pay-0"] or strings[:3] == ["orders-0", "orders-1", "pay-1"]
