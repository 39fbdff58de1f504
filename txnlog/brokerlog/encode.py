"""Wire encoders for everything a Kafka broker writes into a log dir (byte layouts: docs/formats.md).

Writer side only, written without looking at our own decoders (``txnlog.kafka``): tests check these bytes
with kafka-python's independent decoder. Record and batch encoders live in
:mod:`txnlog.brokerlog.encode_batches` and are re-exported here; this module adds control records,
``__transaction_state`` and ``__consumer_offsets`` records, producer snapshots, index entries and legacy
message sets. Pure: stdlib + numpy + google_crc32c + cramjam.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import google_crc32c

from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value
from txnlog.brokerlog.encode_batches import (
    BATCH_HEADER,
    EncodedRecords,
    RecordSpec,
    _compact_string,
    _int16_string,
    _uvarint,
    compress,
    encode_data_batch,
    encode_data_batches,
    encode_record_batch,
    encode_records,
    encode_records_payload,
)
from txnlog.kafka import wire
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
    """OffsetCommitKey (:func:`txnlog.brokerlog.consumer_offsets_encode.offset_commit_key`)."""
    return offset_commit_key(group, topic, partition, record_type=version)


def encode_offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    """OffsetCommitValue v3 (:func:`txnlog.brokerlog.consumer_offsets_encode.offset_commit_value`)."""
    return offset_commit_value(
        offset, version=3, leader_epoch=leader_epoch, metadata=metadata, commit_timestamp=commit_timestamp
    )


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
