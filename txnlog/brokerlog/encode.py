"""Wire encoders for everything a Kafka broker writes into a log dir.

Writer side only, and written without looking at our own decoders
(``txnlog.kafka``): tests check these bytes with kafka-python's independent
decoder. Byte layouts are in docs/formats.md; the grammar of each format is
repeated next to its encoder.

Record batch v2 (DefaultRecordBatch, docs/formats.md §2)::

    baseOffset:int64 batchLength:int32 partitionLeaderEpoch:int32 magic:int8(2)
    crc:uint32 attributes:int16 lastOffsetDelta:int32 baseTimestamp:int64
    maxTimestamp:int64 producerId:int64 producerEpoch:int16 baseSequence:int32
    recordsCount:int32 records...
    crc = CRC-32C over [attributes, end)

Record (DefaultRecord, docs/formats.md §3)::

    length:varint attributes:int8 timestampDelta:varlong offsetDelta:varint
    keyLength:varint key valueLength:varint value
    headersCount:varint [headerKeyLength:varint headerKey headerValueLength:varint headerValue]

Two properties of the header make a realistic writer cheap, and the broker
relies on both: ``baseOffset`` and ``partitionLeaderEpoch`` sit *outside* the
CRC, so a broker (and :mod:`txnlog.brokerlog.partition`) assigns offsets by
patching bytes 0-8 and 12-16 of a producer's batch without re-checksumming.
For bulk data, :func:`encode_data_batches` reuses one pre-encoded (and
pre-compressed) records payload for many batches and computes all their CRCs at
once with numpy, using the linearity of CRCs over GF(2).

Pure module: stdlib + numpy + google_crc32c + cramjam.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import cramjam
import google_crc32c
import numpy as np

from txnlog.kafka import wire
from txnlog.kafka.consumed import BATCH_HEADER_DTYPE
from txnlog.kafka.wire import Compression, ControlType, TimestampType, TransactionState

__all__ = [
    "BATCH_HEADER",
    "EncodedRecords",
    "ProducerSnapshotEntry",
    "RecordSpec",
    "compress",
    "encode_aborted_txn",
    "encode_control_batch",
    "encode_control_record_key",
    "encode_data_batch",
    "encode_data_batches",
    "encode_end_txn_marker_batch",
    "encode_end_txn_marker_value",
    "encode_legacy_message",
    "encode_legacy_wrapper",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "encode_offset_index_entry",
    "encode_producer_snapshot",
    "encode_record_batch",
    "encode_records",
    "encode_records_payload",
    "encode_time_index_entry",
    "encode_transaction_log_key",
    "encode_transaction_log_value",
]

#: The 61-byte v2 batch header, field order as on the wire.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
assert BATCH_HEADER.size == wire.RECORD_BATCH_OVERHEAD

_CRC_REGION = slice(wire.CRC_COVERAGE_START, None)
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (40 bytes)


# --------------------------------------------------------------------------
# Primitives
# --------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    """Unsigned LEB128 varint (ByteUtils.writeUnsignedVarint)."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint(value: int) -> bytes:
    """Zig-zag signed varint/varlong (ByteUtils.writeVarint / writeVarlong)."""
    return _uvarint((value << 1) if value >= 0 else ((-value) << 1) - 1)


def _int16_string(s: str) -> bytes:
    data = s.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _compact_string(s: str) -> bytes:
    data = s.encode("utf-8")
    return _uvarint(len(data) + 1) + data


# --------------------------------------------------------------------------
# Compression framings (as Kafka's Java producer writes them)
# --------------------------------------------------------------------------

# Lz4BlockOutputStream: FLG = version 01, block independence; no block checksum,
# no content size, no content checksum. BD = 64 KiB max block size (value 4).
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
# Header checksum: (XXH32(FLG, BD) >> 8) & 0xFF. The descriptor is fixed, so the byte is
# too: 0x82, as in real frames from Kafka clients (04 22 4d 18 60 40 82, seen in the
# librdkafka batches captured by tests/live). cramjam's frame decoder verifies it.
_LZ4_HC = 0x82
_LZ4_HEADER = struct.pack("<I", wire.LZ4_FRAME_MAGIC) + bytes([_LZ4_FLG, _LZ4_BD, _LZ4_HC])
_LZ4_UNCOMPRESSED_BIT = 0x80000000

_XERIAL_HEADER = wire.XERIAL_SNAPPY_MAGIC + struct.pack(
    ">ii", wire.XERIAL_SNAPPY_VERSION, wire.XERIAL_SNAPPY_MIN_COMPATIBLE_VERSION
)

#: CompressionType default levels (gzip: Deflater default 6; zstd: 3; lz4: fast compressor).
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3


def _snappy_xerial(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    size = wire.XERIAL_SNAPPY_BLOCK_SIZE
    for start in range(0, len(data), size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + size]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_kafka_frame(data: bytes) -> bytes:
    parts = [_LZ4_HEADER]
    size = wire.LZ4_FRAME_BLOCK_SIZE
    for start in range(0, len(data), size):
        chunk = data[start : start + size]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # incompressible: stored raw, high bit set
            parts.append(struct.pack("<I", len(chunk) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(chunk)
        else:
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # end mark; Kafka writes no content checksum
    return b"".join(parts)


def _gzip(data: bytes) -> bytes:
    out = bytearray(cramjam.gzip.compress(data, level=_GZIP_LEVEL))
    # java.util.zip.GZIPOutputStream writes MTIME 0, XFL 0, OS 0; keep bytes stable and Java-like.
    out[4:10] = b"\x00\x00\x00\x00\x00\x00"
    return bytes(out)


def compress(codec: Compression | int, data: bytes) -> bytes:
    """Compress a records stream the way Kafka's Java producer frames it.

    >>> compress(Compression.NONE, b"abc")
    b'abc'
    """
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return _gzip(data)
    if codec is Compression.SNAPPY:
        return _snappy_xerial(data)
    if codec is Compression.LZ4:
        return _lz4_kafka_frame(data)
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise ValueError(f"unknown compression codec {codec}")  # pragma: no cover - IntEnum guards


# --------------------------------------------------------------------------
# Records and record batches (magic 2)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """One record of a v2 batch, relative to the batch's base offset and timestamp."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def encode_records(records: Sequence[RecordSpec]) -> bytes:
    """The uncompressed records stream of a v2 batch (no count prefix)."""
    out = bytearray()
    for r in records:
        body = bytearray(b"\x00")  # record attributes: unused
        body += _varint(r.timestamp_delta)
        body += _varint(r.offset_delta)
        if r.key is None:
            body += _varint(-1)
        else:
            body += _varint(len(r.key))
            body += r.key
        if r.value is None:
            body += _varint(-1)
        else:
            body += _varint(len(r.value))
            body += r.value
        body += _varint(len(r.headers))
        for hkey, hvalue in r.headers:
            kb = hkey.encode("utf-8")
            body += _varint(len(kb))
            body += kb
            if hvalue is None:
                body += _varint(-1)
            else:
                body += _varint(len(hvalue))
                body += hvalue
        out += _varint(len(body))
        out += body
    return bytes(out)


@dataclass(frozen=True, slots=True)
class EncodedRecords:
    """A records payload encoded (and compressed) once, reusable for many batches.

    ``data`` is what follows ``recordsCount`` in the batch. Offsets and
    timestamps inside are deltas, so the same payload is valid at any base
    offset / base timestamp.
    """

    data: bytes
    record_count: int
    last_offset_delta: int
    max_timestamp_delta: int
    compression: Compression = Compression.NONE
    uncompressed_size: int = 0


def encode_records_payload(
    records: Sequence[RecordSpec], compression: Compression | int = Compression.NONE
) -> EncodedRecords:
    """Encode and compress ``records`` once (the fast path's input).

    >>> p = encode_records_payload([RecordSpec(0, 0, b"k", b"v")])
    >>> (p.record_count, p.last_offset_delta)
    (1, 0)
    """
    raw = encode_records(records)
    return EncodedRecords(
        data=compress(compression, raw),
        record_count=len(records),
        last_offset_delta=max((r.offset_delta for r in records), default=0),
        max_timestamp_delta=max((r.timestamp_delta for r in records), default=0),
        compression=Compression(compression),
        uncompressed_size=len(raw),
    )


def _attributes(
    compression: Compression | int,
    timestamp_type: TimestampType | int,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    attrs = int(compression) & wire.COMPRESSION_CODEC_MASK
    if int(timestamp_type) == TimestampType.LOG_APPEND_TIME:
        attrs |= wire.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= wire.TRANSACTIONAL_MASK
    if is_control:
        attrs |= wire.CONTROL_MASK
    if has_delete_horizon:
        attrs |= wire.DELETE_HORIZON_MASK
    return attrs


def _assemble(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    data: bytes,
) -> bytes:
    after_crc = _HEADER_AFTER_CRC.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    crc = google_crc32c.extend(google_crc32c.value(after_crc), data)
    batch_length = wire.RECORD_BATCH_OVERHEAD - wire.LOG_OVERHEAD + len(data)
    head = struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, wire.CURRENT_MAGIC, crc)
    return head + after_crc + data


def encode_record_batch(
    *,
    base_offset: int,
    records: Sequence[RecordSpec],
    base_timestamp: int,
    max_timestamp: int | None = None,
    producer_id: int = wire.NO_PRODUCER_ID,
    producer_epoch: int = wire.NO_PRODUCER_EPOCH,
    base_sequence: int = wire.NO_SEQUENCE,
    partition_leader_epoch: int = 0,
    is_transactional: bool = False,
    is_control: bool = False,
    compression: Compression | int = Compression.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    last_offset_delta: int | None = None,
    has_delete_horizon: bool = False,
) -> bytes:
    """One complete v2 record batch (61-byte header + records), CRC included.

    ``max_timestamp`` defaults to ``base_timestamp + max(timestamp_delta)``
    (for LogAppendTime pass the broker's append time). ``last_offset_delta``
    defaults to the last record's offset delta (0 for an empty batch).

    >>> b = encode_record_batch(base_offset=5, records=[RecordSpec(0, 0, None, b"x")], base_timestamp=1)
    >>> len(b) - 12 == int.from_bytes(b[8:12], "big")
    True
    """
    payload = encode_records_payload(records, compression)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    if max_timestamp is None:
        max_timestamp = base_timestamp + payload.max_timestamp_delta
    return _assemble(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(compression, timestamp_type, is_transactional, is_control, has_delete_horizon),
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
        data=payload.data,
    )


def encode_data_batch(
    *,
    base_offset: int,
    payload: EncodedRecords,
    base_timestamp: int,
    max_timestamp: int | None = None,
    producer_id: int = wire.NO_PRODUCER_ID,
    producer_epoch: int = wire.NO_PRODUCER_EPOCH,
    base_sequence: int = wire.NO_SEQUENCE,
    partition_leader_epoch: int = 0,
    is_transactional: bool = False,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
) -> bytes:
    """A data batch around a pre-encoded payload: only the header and CRC are computed."""
    if max_timestamp is None:
        max_timestamp = base_timestamp + payload.max_timestamp_delta
    return _assemble(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(payload.compression, timestamp_type, is_transactional, False, False),
        last_offset_delta=payload.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=payload.record_count,
        data=payload.data,
    )


def batch_dtype(payload_size: int) -> np.dtype:
    """numpy structured dtype of one v2 batch with a ``payload_size``-byte records section."""
    return np.dtype(BATCH_HEADER_DTYPE.descr + [("records", "u1", (payload_size,))])


_CRC_VARIABLE_BYTES = wire.RECORDS_OFFSET - wire.CRC_COVERAGE_START  # 40 header bytes inside the CRC


@lru_cache(maxsize=64)
def _crc_contribution_table(region_length: int) -> np.ndarray:
    """T[i, b]: how byte value ``b`` at header position ``i`` changes the CRC of a region.

    CRC-32C is affine over GF(2): for equal-length inputs, crc(a) ^ crc(b) =
    crc(a ^ b) ^ crc(zeros). So the CRC of any batch that shares its payload
    with a reference batch is crc(reference) ^ XOR_i T[i, delta_i], where delta
    is the byte-wise XOR of the two 40-byte header regions.
    """
    zeros = bytes(region_length)
    base = google_crc32c.value(zeros)
    table = np.zeros((_CRC_VARIABLE_BYTES, 256), dtype=np.uint32)
    probe = bytearray(region_length)
    for i in range(_CRC_VARIABLE_BYTES):
        bits = []
        for bit in range(8):
            probe[i] = 1 << bit
            bits.append(google_crc32c.value(bytes(probe)) ^ base)
        probe[i] = 0
        values = np.arange(256)
        column = np.zeros(256, dtype=np.uint32)
        for bit in range(8):
            column ^= np.where((values >> bit) & 1, np.uint32(bits[bit]), np.uint32(0)).astype(np.uint32)
        table[i] = column
    return table


def encode_data_batches(
    *,
    base_offsets: np.ndarray | Sequence[int],
    payload: EncodedRecords,
    base_timestamps: np.ndarray | Sequence[int],
    max_timestamps: np.ndarray | Sequence[int] | None = None,
    producer_ids: np.ndarray | Sequence[int] | int = wire.NO_PRODUCER_ID,
    producer_epochs: np.ndarray | Sequence[int] | int = wire.NO_PRODUCER_EPOCH,
    base_sequences: np.ndarray | Sequence[int] | int = wire.NO_SEQUENCE,
    partition_leader_epoch: int = 0,
    is_transactional: bool = False,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    is_control: bool = False,
) -> np.ndarray:
    """Many data batches sharing one payload, vectorized: returns a (n, 61 + payload) uint8 array.

    Row ``i`` is a complete batch; ``array.tobytes()`` is a valid run of
    batches. Header fields may be scalars or per-batch arrays. GB/s: no Python
    work per batch (the CRCs come from :func:`_crc_contribution_table`).
    ``is_control`` makes them control batches (e.g. end-transaction markers
    around one pre-encoded control record).
    """
    base_offsets = np.asarray(base_offsets, dtype=np.int64)
    n = int(base_offsets.shape[0])
    size = len(payload.data)
    out = np.empty(n, dtype=batch_dtype(size))
    if n == 0:
        return out.view(np.uint8).reshape(0, wire.RECORD_BATCH_OVERHEAD + size)
    base_ts = np.asarray(base_timestamps, dtype=np.int64)
    out["base_offset"] = base_offsets
    out["batch_length"] = wire.RECORD_BATCH_OVERHEAD - wire.LOG_OVERHEAD + size
    out["partition_leader_epoch"] = partition_leader_epoch
    out["magic"] = wire.CURRENT_MAGIC
    out["crc"] = 0
    out["attributes"] = _attributes(payload.compression, timestamp_type, is_transactional, is_control, False)
    out["last_offset_delta"] = payload.last_offset_delta
    out["base_timestamp"] = base_ts
    out["max_timestamp"] = (
        base_ts + payload.max_timestamp_delta if max_timestamps is None else np.asarray(max_timestamps, np.int64)
    )
    out["producer_id"] = producer_ids
    out["producer_epoch"] = producer_epochs
    out["base_sequence"] = base_sequences
    out["records_count"] = payload.record_count
    raw = out.view(np.uint8).reshape(n, wire.RECORD_BATCH_OVERHEAD + size)
    raw[:, wire.RECORDS_OFFSET :] = np.frombuffer(payload.data, dtype=np.uint8)

    region = raw[:, wire.CRC_COVERAGE_START : wire.RECORDS_OFFSET]
    crc0 = google_crc32c.value(raw[0, wire.CRC_COVERAGE_START :].tobytes())
    delta = region ^ region[0]
    columns = np.flatnonzero(delta.any(axis=0))
    if columns.size:
        table = _crc_contribution_table(_CRC_VARIABLE_BYTES + size)
        contributions = table[columns[None, :], delta[:, columns]]
        crcs = np.bitwise_xor.reduce(contributions, axis=1) ^ np.uint32(crc0)
    else:
        crcs = np.full(n, crc0, dtype=np.uint32)
    out["crc"] = crcs
    return raw


# --------------------------------------------------------------------------
# Control records (ControlRecordType, EndTransactionMarker; docs/formats.md §6)
# --------------------------------------------------------------------------


def encode_control_record_key(
    control_type: ControlType | int, version: int = wire.CURRENT_CONTROL_KEY_VERSION
) -> bytes:
    """ControlRecordKey: ``version:int16 type:int16``."""
    return struct.pack(">hh", version, int(control_type))


def encode_end_txn_marker_value(coordinator_epoch: int, version: int = wire.CURRENT_END_TXN_MARKER_VERSION) -> bytes:
    """EndTxnMarker value: ``version:int16 coordinatorEpoch:int32``."""
    return struct.pack(">hi", version, coordinator_epoch)


def encode_control_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    records: Sequence[tuple[bytes | None, bytes | None]] = (),
    partition_leader_epoch: int = 0,
    is_transactional: bool = True,
    last_offset_delta: int | None = None,
) -> bytes:
    """A control batch with arbitrary (key, value) records: any or unknown control type, or none.

    Zero records models a control batch emptied by the log cleaner; its header
    keeps the offset range (``last_offset_delta`` defaults to 0).
    """
    specs = [RecordSpec(i, 0, key, value) for i, (key, value) in enumerate(records)]
    return encode_record_batch(
        base_offset=offset,
        records=specs,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=True,
        last_offset_delta=last_offset_delta,
    )


def encode_end_txn_marker_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    control_type: ControlType | int,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = 0,
) -> bytes:
    """An ABORT/COMMIT transaction marker as the broker writes it (MemoryRecordsBuilder.appendEndTxnMarker).

    Attributes 0x30 (transactional, control, no compression, CreateTime), base
    sequence −1, exactly one record whose timestamp is the marker write time.
    """
    if int(control_type) not in (ControlType.ABORT, ControlType.COMMIT):
        raise ValueError(f"an end-transaction marker is ABORT or COMMIT, not {control_type}")
    return encode_control_batch(
        offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        timestamp=timestamp,
        records=[(encode_control_record_key(control_type), encode_end_txn_marker_value(coordinator_epoch))],
        partition_leader_epoch=partition_leader_epoch,
    )


# --------------------------------------------------------------------------
# __transaction_state (TransactionLog; docs/formats.md §7)
# --------------------------------------------------------------------------


def encode_transaction_log_key(transactional_id: str, version: int = wire.TXN_LOG_KEY_VERSION) -> bytes:
    """TransactionLogKey: ``version:int16 transactionalId:string(int16 length)``."""
    return struct.pack(">h", version) + _int16_string(transactional_id)


def encode_transaction_log_value(
    *,
    version: int,
    producer_id: int,
    producer_epoch: int,
    transaction_timeout_ms: int,
    state: TransactionState | int,
    partitions: Mapping[str, Sequence[int]] | None,
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
    previous_producer_id: int = wire.NO_PRODUCER_ID,
    next_producer_id: int = wire.NO_PRODUCER_ID,
    next_producer_epoch: int = wire.NO_PRODUCER_EPOCH,
    client_transaction_version: int = 0,
    unknown_tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """TransactionLogValue v0 or v1 (TransactionLogValue.json, docs/formats.md §7).

    ``partitions`` maps topic → partition ids; ``None`` writes a null array
    (what the coordinator writes for Empty). v1 is flexible: compact arrays and
    strings, a tag buffer after every partitions entry, and the top-level
    tagged fields PreviousProducerId (0), NextProducerId (1),
    ClientTransactionVersion (2), NextProducerEpoch (3) written only when they
    differ from their defaults, in ascending tag order. ``unknown_tagged_fields``
    (tag → raw payload) are merged in tag order, to test decoders' skipping.

    >>> v = encode_transaction_log_value(version=0, producer_id=7, producer_epoch=0,
    ...     transaction_timeout_ms=60000, state=TransactionState.EMPTY, partitions=None,
    ...     last_update_timestamp_ms=1, start_timestamp_ms=-1)
    >>> len(v)
    37
    """
    head = struct.pack(">hqhib", version, producer_id, producer_epoch, transaction_timeout_ms, int(state))
    tail = struct.pack(">qq", last_update_timestamp_ms, start_timestamp_ms)
    if version == wire.TXN_LOG_VALUE_V0:
        if (
            previous_producer_id != wire.NO_PRODUCER_ID
            or next_producer_id != wire.NO_PRODUCER_ID
            or next_producer_epoch != wire.NO_PRODUCER_EPOCH
            or client_transaction_version != 0
            or unknown_tagged_fields
        ):
            raise ValueError("TransactionLogValue v0 has no tagged fields")
        if partitions is None:
            body = struct.pack(">i", -1)
        else:
            body = struct.pack(">i", len(partitions))
            for topic, ids in partitions.items():
                body += _int16_string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
        return head + body + tail
    if version != wire.TXN_LOG_VALUE_V1:
        raise ValueError(f"unsupported TransactionLogValue version {version}")
    if partitions is None:
        body = _uvarint(0)
    else:
        body = _uvarint(len(partitions) + 1)
        for topic, ids in partitions.items():
            body += _compact_string(topic) + _uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids)
            body += _uvarint(0)  # no tagged fields in the entry
    tags: dict[int, bytes] = {}
    if previous_producer_id != wire.NO_PRODUCER_ID:
        tags[wire.TAG_PREVIOUS_PRODUCER_ID] = struct.pack(">q", previous_producer_id)
    if next_producer_id != wire.NO_PRODUCER_ID:
        tags[wire.TAG_NEXT_PRODUCER_ID] = struct.pack(">q", next_producer_id)
    if client_transaction_version != 0:
        tags[wire.TAG_CLIENT_TRANSACTION_VERSION] = struct.pack(">h", client_transaction_version)
    if next_producer_epoch != wire.NO_PRODUCER_EPOCH:
        tags[wire.TAG_NEXT_PRODUCER_EPOCH] = struct.pack(">h", next_producer_epoch)
    for tag, payload in (unknown_tagged_fields or {}).items():
        if tag in tags:
            raise ValueError(f"tag {tag} is a known field")
        tags[tag] = bytes(payload)
    tag_buffer = _uvarint(len(tags))
    for tag in sorted(tags):
        tag_buffer += _uvarint(tag) + _uvarint(len(tags[tag])) + tags[tag]
    return head + body + tail + tag_buffer


# --------------------------------------------------------------------------
# __consumer_offsets (transactional offset commits of consume-transform-produce apps)
# --------------------------------------------------------------------------


def encode_offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    """OffsetCommitKey (GroupMetadataManager): ``version:int16 group topic partition:int32``."""
    return struct.pack(">h", version) + _int16_string(group) + _int16_string(topic) + struct.pack(">i", partition)


def encode_offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    """OffsetCommitValue v3: ``offset:int64 leaderEpoch:int32 metadata:string commitTimestamp:int64``."""
    return struct.pack(">hqi", 3, offset, leader_epoch) + _int16_string(metadata) + struct.pack(">q", commit_timestamp)


# --------------------------------------------------------------------------
# Producer snapshots, .txnindex, .index, .timeindex (docs/formats.md §5, §8)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One 46-byte producer entry of a ``.snapshot`` file (ProducerSnapshot.json v1)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = wire.NO_SEQUENCE
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
assert _SNAPSHOT_ENTRY.size == wire.PRODUCER_SNAPSHOT_ENTRY_SIZE


def encode_producer_snapshot(entries: Sequence[ProducerSnapshotEntry]) -> bytes:
    """``version:int16(1) crc:uint32 count:int32 entries``; CRC-32C over [6, end)."""
    body = struct.pack(">i", len(entries)) + b"".join(
        _SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    )
    return struct.pack(">hI", wire.PRODUCER_SNAPSHOT_VERSION, google_crc32c.value(body)) + body


def encode_aborted_txn(
    *,
    producer_id: int,
    first_offset: int,
    last_offset: int,
    last_stable_offset: int,
    version: int = wire.ABORTED_TXN_VERSION,
) -> bytes:
    """One 34-byte ``.txnindex`` entry: ``version:int16 producerId firstOffset lastOffset lastStableOffset``."""
    return struct.pack(">hqqqq", version, producer_id, first_offset, last_offset, last_stable_offset)


def encode_offset_index_entry(relative_offset: int, position: int) -> bytes:
    """One 8-byte ``.index`` entry: ``relativeOffset:int32 position:int32``."""
    return struct.pack(">ii", relative_offset, position)


def encode_time_index_entry(timestamp: int, relative_offset: int) -> bytes:
    """One 12-byte ``.timeindex`` entry: ``timestamp:int64 relativeOffset:int32``."""
    return struct.pack(">qi", timestamp, relative_offset)


# --------------------------------------------------------------------------
# Legacy message sets, magic 0 and 1 (LegacyRecord, docs/formats.md §4)
# --------------------------------------------------------------------------


def encode_legacy_message(
    *,
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int | None = None,
    compression: Compression | int = Compression.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
) -> bytes:
    """One legacy log entry: ``offset:int64 size:int32`` + Message (plain CRC-32 over magic..end).

    ``compression`` only sets the attribute bits: for a compressed wrapper use
    :func:`encode_legacy_wrapper`.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic is 0 or 1, not {magic}")
    attributes = int(compression) & wire.COMPRESSION_CODEC_MASK
    if magic == 1 and int(timestamp_type) == TimestampType.LOG_APPEND_TIME:
        attributes |= wire.TIMESTAMP_TYPE_MASK
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", -1 if timestamp is None else timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def encode_legacy_wrapper(
    *,
    last_offset: int,
    magic: int,
    messages: Sequence[tuple[bytes | None, bytes | None, int | None]],
    compression: Compression | int = Compression.GZIP,
) -> bytes:
    """A compressed legacy wrapper holding ``messages`` as (key, value, timestamp).

    The wrapper's offset is the *last* inner offset. Inner offsets are
    absolute for magic 0 and relative (0..n-1, KIP-31) for magic 1. LZ4 is not
    offered: magic 0 used a broken frame checksum (KAFKA-3160).
    """
    codec = Compression(compression)
    if codec not in (Compression.GZIP, Compression.SNAPPY):
        raise ValueError("legacy wrappers here use gzip or snappy")
    n = len(messages)
    inner = b"".join(
        encode_legacy_message(
            offset=(last_offset - n + 1 + i) if magic == 0 else i, magic=magic, key=k, value=v, timestamp=ts
        )
        for i, (k, v, ts) in enumerate(messages)
    )
    max_ts = max((ts for _, _, ts in messages if ts is not None), default=None)
    return encode_legacy_message(
        offset=last_offset,
        magic=magic,
        key=None,
        value=compress(codec, inner),
        timestamp=max_ts,
        compression=codec,
    )
