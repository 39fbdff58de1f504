"""Cross-check against kafka-python's independent decoder (kafka.record.default_records).

Batches are written by kafka-python's own DefaultRecordBatchBuilder for the codecs it supports in this
environment (none, gzip), and by our test encoder for the rest and for control batches (the builder
cannot write those); kafka-python then reads every batch and must agree with us on every header field.
"""

from __future__ import annotations

import random
import struct

import kafka.codec
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from tests.kafka import encoders as E
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import scan_segment

KP_CODECS = [c for c, ok in ((0, True), (1, kafka.codec.has_gzip())) if ok]


def kafka_python_batch(rng: random.Random, codec: int, transactional: bool, base_offset: int) -> bytes:
    pid = rng.randrange(0, 1 << 40) if transactional or rng.random() < 0.5 else -1
    epoch = rng.randrange(0, 32767) if pid >= 0 else -1
    seq = rng.randrange(0, 1 << 31) if pid >= 0 else -1
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    ts = rng.randrange(1_500_000_000_000, 1_800_000_000_000)
    offset = 0
    for _ in range(rng.randrange(1, 20)):
        headers = [("h", b"v")] if rng.random() < 0.2 else []
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))) if rng.random() < 0.9 else None
        builder.append(offset, ts + rng.randrange(-5, 1000), b"key" if rng.random() < 0.5 else None, value, headers)
        offset += rng.randrange(1, 3)  # gaps, as after compaction
    raw = bytearray(builder.build())
    # The broker assigns baseOffset and partitionLeaderEpoch after the producer computed the CRC.
    struct.pack_into(">qii", raw, 0, base_offset, len(raw) - 12, rng.randrange(0, 1000))
    return bytes(raw)


def our_batch(rng: random.Random, base_offset: int) -> bytes:
    kind = rng.choice(["codec", "marker", "control-other", "log-append"])
    pid = rng.randrange(0, 1 << 40)
    if kind == "marker":
        return E.marker_batch(
            rng.choice([0, 1]),
            base_offset=base_offset,
            producer_id=pid,
            producer_epoch=rng.randrange(0, 32767),
            coordinator_epoch=rng.randrange(0, 1000),
            timestamp=rng.randrange(1_500_000_000_000, 1_800_000_000_000),
        )
    if kind == "control-other":
        return E.Batch(
            [E.record(0, 0, E.control_key(rng.randrange(2, 7)), b"{}")],
            base_offset=base_offset,
            attributes=0x20,
            producer_id=-1,
        ).encode()
    codec = rng.choice([2, 3, 4]) if kind == "codec" else 0
    recs = [E.record(i, i, None, b"v" * rng.randrange(0, 300)) for i in range(rng.randrange(1, 10))]
    return E.Batch(
        recs,
        base_offset=base_offset,
        attributes=codec | (0x08 if kind == "log-append" else 0) | 0x10,
        producer_id=pid,
        producer_epoch=1,
        base_sequence=0,
        max_timestamp=1_800_000_000_000,
        compression_variant=rng.choice(["", "raw", "java"]),
    ).encode()


def mixed_segment(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    offset = rng.randrange(0, 1 << 40)
    for _ in range(n):
        if rng.random() < 0.7:
            raw = kafka_python_batch(rng, rng.choice(KP_CODECS), rng.random() < 0.5, offset)
        else:
            raw = our_batch(rng, offset)
        out += raw
        offset += DefaultRecordBatch(raw).last_offset_delta + 1 + rng.randrange(0, 3)
    return bytes(out)


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed-{s}")
def test_every_header_field_agrees_with_kafka_python(seed: int) -> None:
    raw = mixed_segment(seed, 250)
    scan = scan_segment(raw)
    assert scan.quarantine == []
    b = {name: col.tolist() for name, col in scan.batches.items()}
    records = MemoryRecords(raw)
    position = 0
    i = 0
    while records.has_next():
        kb = records.next_batch()
        assert isinstance(kb, DefaultRecordBatch)
        assert kb.validate_crc()
        got = {name: b[name][i] for name in b}
        assert got["position"] == position
        assert got["base_offset"] == kb.base_offset
        assert got["last_offset"] == kb.last_offset
        assert got["last_offset_delta"] == kb.last_offset_delta
        assert got["batch_length"] + 12 == kb.size_in_bytes
        assert got["partition_leader_epoch"] == kb.leader_epoch
        assert got["magic"] == kb.magic
        assert got["crc"] == kb.crc
        assert got["compression"] == kb.compression_type
        assert got["timestamp_type"] == kb.timestamp_type
        assert got["is_transactional"] == kb.is_transactional
        assert got["is_control"] == kb.is_control_batch
        assert got["base_timestamp"] == kb.first_timestamp
        assert got["max_timestamp"] == kb.max_timestamp
        assert got["producer_id"] == kb.producer_id
        assert got["producer_epoch"] == kb.producer_epoch
        assert got["base_sequence"] == kb.base_sequence
        assert got["record_count"] == kb.records_count
        if kb.is_control_batch:
            first = next(iter(kb))
            assert got["control_key_version"] == first.version
            assert got["control_type"] == first.type
            assert got["marker_timestamp"] == first.timestamp
            if first.type in (0, 1):
                version, epoch = struct.unpack(">hi", first.value)
                assert (got["control_value_version"], got["coordinator_epoch"]) == (version, epoch)
                assert got["control_status"] == ControlStatus.END_TXN_MARKER
            else:
                assert got["control_status"] == ControlStatus.OTHER_TYPE
        else:
            assert got["control_status"] == ControlStatus.NOT_CONTROL
        position += kb.size_in_bytes
        i += 1
    assert i == scan.batch_count
