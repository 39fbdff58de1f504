"""``__transaction_state`` records: TransactionLogKey and TransactionLogValue v0/v1.

Wire grammar (TransactionLogKey.json, TransactionLogValue.json,
MessageDataGenerator for the flexible rules)::

    TransactionLogKey   => version:int16(=0) transactionalId:string(int16 length + UTF-8)

    TransactionLogValue v0 (not flexible)
      => version:int16(=0) producerId:int64 producerEpoch:int16
         transactionTimeoutMs:int32 transactionStatus:int8
         transactionPartitions: int32 count (-1 = null)
             [topic:string(int16 length) partitionIds: int32 count, int32 * count]
         transactionLastUpdateTimestampMs:int64 transactionStartTimestampMs:int64

    TransactionLogValue v1 (flexible)
      => version:int16(=1) producerId:int64 producerEpoch:int16
         transactionTimeoutMs:int32 transactionStatus:int8
         transactionPartitions: uvarint count+1 (0 = null)
             [topic: uvarint length+1, UTF-8; partitionIds: uvarint count+1, int32 * count;
              taggedFields: uvarint n, n * (uvarint tag, uvarint size, bytes)]
         transactionLastUpdateTimestampMs:int64 transactionStartTimestampMs:int64
         taggedFields: uvarint n, n * (uvarint tag, uvarint size, bytes)
           tag 0 PreviousProducerId int64 (default -1)     tag 1 NextProducerId int64 (-1)
           tag 2 ClientTransactionVersion int16 (0)       tag 3 NextProducerEpoch int16 (-1)

    A null value is a tombstone: the transactional.id was expired and removed.

Rules (Kafka's readers unless said otherwise):

* key version must be 0; a key with another version, or with bytes after the
  transactional id, is not a TransactionLogKey (``__consumer_offsets`` keys have
  versions 0-2 and carry more fields) and is rejected — our rule, to catch a
  scan pointed at the wrong topic;
* value versions other than 0 and 1 are rejected (3.x throws; trunk returns
  UnknownValueVersion; KIP-915 promises new fields only as tags of v1);
* unknown tags are skipped by their size; a known tag with the wrong size is an error;
* an unknown state id is an error (TransactionState.fromId throws);
* strings must be valid UTF-8 (Java always writes valid UTF-8; Arrow needs it);
* bytes after the value are ignored, as Kafka's readers do;
* partitions are decoded as stored. Kafka ignores them when the state is Empty
  (the writer stores null there); see :attr:`TransactionLogValue.effective_partitions`.

Two APIs: the strict :func:`decode_transaction_log_key` /
:func:`decode_transaction_log_value` (raise :class:`DecodeError`), and the bulk
:func:`scan_transaction_log` which walks every record of a segment in compiled
code and returns numpy columns, quarantining what it cannot read. Both decode
values with the same compiled :func:`_decode_value`, so they cannot disagree on
one; keys are read by each (the tests hold the two key readers to the same rules).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.binary import be_i16, be_i32, be_i64, is_valid_utf8, read_uvarint
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, budget_detail, decompress
from txnlog.kafka.errors import DecodeError, QuarantineEntry
from txnlog.kafka.jit import jit
from txnlog.kafka.record_batch import Buffer, SegmentScan, as_uint8, mapped_file, scan_segment
from txnlog.kafka.records import RECORD_BROKEN_AT_OFFSET, RECORD_OK, read_record
from txnlog.kafka.wire import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TAG_CLIENT_TRANSACTION_VERSION,
    TAG_NEXT_PRODUCER_EPOCH,
    TAG_NEXT_PRODUCER_ID,
    TAG_PREVIOUS_PRODUCER_ID,
    TXN_LOG_KEY_VERSION,
    TXN_LOG_VALUE_V0,
    TXN_LOG_VALUE_V1,
    Compression,
    TimestampType,
    TransactionState,
)

__all__ = [
    "TXN_PARTITION_COLUMNS",
    "TXN_RECORD_COLUMNS",
    "TransactionLogValue",
    "TxnLogScan",
    "decode_transaction_log_key",
    "decode_transaction_log_value",
    "scan_transaction_log",
    "scan_transaction_log_windows",
    "scan_transaction_log_file",
]

_NUM_STATES = len(TransactionState)
_INT64_SIZE = 8
_INT16_SIZE = 2

# =====================================================================================
# Strict pure-Python decoders
# =====================================================================================


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    #: ((topic, (partition, ...)), ...) as stored, or None when the array is null.
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0
    #: Top-level tagged fields this decoder does not know: ((tag, payload), ...).
    unknown_tags: tuple[tuple[int, bytes], ...] = ()
    version: int = TXN_LOG_VALUE_V0

    @property
    def effective_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """The partitions Kafka's coordinator loads: none for Empty (TransactionLog.readTxnRecordValue)."""
        if self.state == TransactionState.EMPTY or self.partitions is None:
            return ()
        return self.partitions

    def topic_partitions(self) -> list[str]:
        """``topic-partition`` strings (TopicPartition.toString), in stored order."""
        return [f"{topic}-{p}" for topic, parts in self.effective_partitions for p in parts]


class _Reader:
    """Cursor over one key; every read names the field it is for, errors carry it."""

    __slots__ = ("data", "pos", "end", "file", "position", "reason", "what")

    def __init__(self, data: bytes, file: str, position: int, reason: str, what: str) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)
        self.file = file
        self.position = position
        self.reason = reason
        self.what = what

    def fail(self, field_name: str, detail: str, reason: str | None = None) -> DecodeError:
        return DecodeError(self.file, self.position, f"{self.what}.{field_name}", reason or self.reason, detail)

    def fixed(self, fmt: struct.Struct, field_name: str) -> int:
        if self.pos + fmt.size > self.end:
            raise self.fail(field_name, f"truncated at byte {self.pos}")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def raw(self, n: int, field_name: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(field_name, f"{n} bytes at byte {self.pos} overrun the {self.end}-byte buffer")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def utf8(self, n: int, field_name: str) -> str:
        raw = self.raw(n, field_name)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(field_name, f"not valid UTF-8 ({e.reason})") from e


_I16 = struct.Struct(">h")


def decode_transaction_log_key(
    data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0
) -> str:
    """The transactional.id of a ``__transaction_state`` record key.

    >>> decode_transaction_log_key(b"\\x00\\x00\\x00\\x05txn-1")
    'txn-1'
    """
    if data is None:
        raise DecodeError(file, position, "TransactionLogKey", errors.BAD_TXN_LOG_KEY, "null key")
    r = _Reader(bytes(data), file, position, errors.BAD_TXN_LOG_KEY, "TransactionLogKey")
    version = r.fixed(_I16, "version")
    if version != TXN_LOG_KEY_VERSION:
        raise r.fail("version", _key_version_detail(version))
    length = r.fixed(_I16, "TransactionalId")
    if length < 0:
        raise r.fail("TransactionalId", "null string")
    transactional_id = r.utf8(length, "TransactionalId")
    if r.pos != r.end:
        raise r.fail("TransactionalId", _key_trailing_detail(r.end - r.pos))
    return transactional_id


def _key_version_detail(version: int) -> str:
    return (
        f"key version {version} is not a TransactionLogKey (version {TXN_LOG_KEY_VERSION}); "
        "is this __consumer_offsets or another topic?"
    )


def _key_trailing_detail(extra: int) -> str:
    return (
        f"{extra} bytes after the transactional id: not a TransactionLogKey "
        "(a __consumer_offsets OffsetCommitKey v0 looks like this)"
    )


def decode_transaction_log_value(
    data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0
) -> TransactionLogValue | None:
    """Decode a TransactionLogValue (v0 or v1); None for a tombstone.

    The bulk scan's compiled decoder (:func:`_decode_value`) does the work; a value it
    rejects raises DecodeError with the reason and detail its quarantine row would carry.

    >>> decode_transaction_log_value(None) is None  # tombstone
    True
    """
    if data is None:
        return None
    raw = bytes(data)
    rows = np.full((_NREC, 1), -1, np.int64)  # the walk's layout: a row per column
    # Every tag takes two bytes at least: room for all the unknown ones.
    tags = np.empty((len(raw) // 2 + 1, _NTAG), np.int64)
    reason, detail, a1, a2, topics, nt, parts, npart = _decode_value(
        as_uint8(raw),
        0,
        len(raw),
        0,
        rows,
        0,
        np.empty((16, _NTOPIC), np.int64),
        0,
        np.empty((16, _NPART), np.int64),
        0,
        tags,
    )
    if reason != 0:
        raise DecodeError(
            file,
            position,
            f"TransactionLogValue.{_detail_field(int(detail), int(a1))}",
            errors.REASONS[int(reason)],
            _detail_text(int(detail), int(a1), int(a2)),
        )
    row = rows[:, 0]
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    if row[_R_PCOUNT] >= 0:
        ids: list[list[int]] = [[] for _ in range(int(nt))]
        for _record, topic, partition in parts[:npart].tolist():
            ids[topic].append(partition)
        partitions = tuple(
            (raw[start : start + length].decode("utf-8"), tuple(ids[i]))
            for i, (_record, _src, start, length) in enumerate(topics[:nt].tolist())
        )
    return TransactionLogValue(
        producer_id=int(row[_R_PID]),
        producer_epoch=int(row[_R_EPOCH]),
        transaction_timeout_ms=int(row[_R_TIMEOUT]),
        state=TransactionState(int(row[_R_STATE])),
        partitions=partitions,
        last_update_timestamp_ms=int(row[_R_LAST_UPDATE]),
        start_timestamp_ms=int(row[_R_START]),
        previous_producer_id=int(row[_R_PREV_PID]),
        next_producer_id=int(row[_R_NEXT_PID]),
        next_producer_epoch=int(row[_R_NEXT_EPOCH]),
        client_transaction_version=int(row[_R_CTV]),
        unknown_tags=tuple(
            (tag, raw[start : start + size]) for tag, start, size in tags[: row[_R_UNKNOWN_TAGS]].tolist()
        ),
        version=int(row[_R_VALUE_VERSION]),
    )


# =====================================================================================
# Bulk, compiled scan
# =====================================================================================

#: Per-record columns of :attr:`TxnLogScan.records`. Tombstones have -1 in every value column.
TXN_RECORD_COLUMNS: dict[str, np.dtype] = {
    "position": np.dtype(np.int64),  # byte position of the record's batch
    "offset": np.dtype(np.int64),
    "timestamp": np.dtype(np.int64),
    "key_version": np.dtype(np.int16),
    "is_tombstone": np.dtype(np.bool_),
    "value_version": np.dtype(np.int16),
    "producer_id": np.dtype(np.int64),
    "producer_epoch": np.dtype(np.int16),
    "transaction_timeout_ms": np.dtype(np.int32),
    "state": np.dtype(np.int8),  # wire.TransactionState
    "partition_count": np.dtype(np.int32),  # partitions over all topics; -1 when the array is null
    "last_update_timestamp_ms": np.dtype(np.int64),
    "start_timestamp_ms": np.dtype(np.int64),
    "previous_producer_id": np.dtype(np.int64),
    "next_producer_id": np.dtype(np.int64),
    "next_producer_epoch": np.dtype(np.int16),
    "client_transaction_version": np.dtype(np.int16),
    "unknown_tag_count": np.dtype(np.int32),
}
#: One row per (record, topic, partition), grouped by record in record order.
TXN_PARTITION_COLUMNS: dict[str, np.dtype] = {
    "record_index": np.dtype(np.int64),  # row of TxnLogScan.records
    "topic_index": np.dtype(np.int64),  # entry of TxnLogScan.topic_offsets
    "partition": np.dtype(np.int32),
}

# Column numbers of the int64 working matrices filled by the compiled walk.
_REC_NAMES = tuple(TXN_RECORD_COLUMNS) + ("id_src", "id_start", "id_len")
_RC = {name: i for i, name in enumerate(_REC_NAMES)}
_R_POSITION, _R_OFFSET, _R_TIMESTAMP, _R_KEY_VERSION, _R_TOMBSTONE = (
    _RC["position"],
    _RC["offset"],
    _RC["timestamp"],
    _RC["key_version"],
    _RC["is_tombstone"],
)
_R_VALUE_VERSION, _R_PID, _R_EPOCH, _R_TIMEOUT, _R_STATE, _R_PCOUNT = (
    _RC["value_version"],
    _RC["producer_id"],
    _RC["producer_epoch"],
    _RC["transaction_timeout_ms"],
    _RC["state"],
    _RC["partition_count"],
)
_R_LAST_UPDATE, _R_START, _R_PREV_PID, _R_NEXT_PID, _R_NEXT_EPOCH, _R_CTV, _R_UNKNOWN_TAGS = (
    _RC["last_update_timestamp_ms"],
    _RC["start_timestamp_ms"],
    _RC["previous_producer_id"],
    _RC["next_producer_id"],
    _RC["next_producer_epoch"],
    _RC["client_transaction_version"],
    _RC["unknown_tag_count"],
)
_R_ID_SRC, _R_ID_START, _R_ID_LEN = _RC["id_src"], _RC["id_start"], _RC["id_len"]
_NREC = len(_REC_NAMES)
# topics matrix: record, src, start, len; partitions matrix: record, topic, partition;
# unknown tags matrix: tag, start, size (decode_transaction_log_value only);
# quarantine matrix: batch, offset, reason, detail, arg1, arg2.
_NTOPIC, _NPART, _NTAG, _NQUAR = 4, 3, 3, 6

_Q_BAD_RECORD = errors.REASON_CODES[errors.BAD_RECORD]
_Q_BAD_KEY = errors.REASON_CODES[errors.BAD_TXN_LOG_KEY]
_Q_BAD_VALUE = errors.REASON_CODES[errors.BAD_TXN_LOG_VALUE]
_Q_UNKNOWN_VERSION = errors.REASON_CODES[errors.UNKNOWN_VALUE_VERSION]

# Quarantine details (index = code); "{0}"/"{1}" are arg1/arg2.
_DETAILS = (
    "",
    "record framing is broken",
    "the batch ends after {0} of its {1} records",
    "{0} bytes left after the last record",
    "key is null",
    "key is shorter than 4 bytes",
    _key_version_detail(-999).replace("-999", "{0}"),
    "transactional id length {0} is negative or overruns the key",
    _key_trailing_detail(-999).replace("-999", "{0}"),
    "transactional id is not valid UTF-8",
    "unknown value version {0}",
    "value ends early or a length overruns it (in {field})",
    "unknown transaction state id {0}",
    "null or negative-length {field}",
    "topic name is not valid UTF-8",
    "tag {0} has size {1}, expected {2}",
)
(
    _D_FRAMING,
    _D_SHORT_BATCH,
    _D_TRAILING,
    _D_KEY_NULL,
    _D_KEY_SHORT,
    _D_KEY_VERSION,
    _D_ID_LENGTH,
    _D_KEY_TRAILING,
    _D_ID_UTF8,
    _D_VALUE_VERSION,
    _D_VALUE_SHORT,
    _D_STATE,
    _D_NULL,
    _D_TOPIC_UTF8,
    _D_TAG_SIZE,
) = range(1, len(_DETAILS))
# Which field a "value ends early" / "null" detail is about (arg1).
_FIELDS = (
    "ProducerId..TransactionStatus",
    "TransactionPartitions",
    "TransactionPartitions.Topic",
    "TransactionPartitions.PartitionIds",
    "TransactionPartitions._tagged_fields",
    "TransactionLastUpdateTimestampMs..TransactionStartTimestampMs",
    "_tagged_fields",
)
_F_FIXED, _F_PARTITIONS, _F_TOPIC, _F_PARTITION_IDS, _F_TOPIC_TAGS, _F_TIMESTAMPS, _F_TAGS = range(len(_FIELDS))
_TAG_FIELDS = {
    TAG_PREVIOUS_PRODUCER_ID: "PreviousProducerId",
    TAG_NEXT_PRODUCER_ID: "NextProducerId",
    TAG_CLIENT_TRANSACTION_VERSION: "ClientTransactionVersion",
    TAG_NEXT_PRODUCER_EPOCH: "NextProducerEpoch",
}


@jit(inline=True)
def _grow(mat: np.ndarray, used: int, need: int) -> np.ndarray:
    if used + need <= mat.shape[0]:
        return mat
    rows = max(2 * mat.shape[0], used + need, 16)
    out = np.empty((rows, mat.shape[1]), mat.dtype)
    out[:used] = mat[:used]
    return out


@jit(inline=True)
def _decode_value(
    data: np.ndarray,
    p: int,
    end: int,
    src: int,
    recs: np.ndarray,
    record: int,
    topics: np.ndarray,
    nt: int,
    parts: np.ndarray,
    npart: int,
    tags: np.ndarray,
):
    """Decode a TransactionLogValue at data[p:end] into column ``record`` of ``recs`` (a row per column of
    :data:`TXN_RECORD_COLUMNS`; it sets every value column): the one decoder of these values.

    Appends the value's topics to ``topics`` and its partition ids to ``parts``. The unknown
    top-level tags are counted in ``recs``; the first ``tags.shape[0]`` of them are also written
    to ``tags`` as (tag, start, size) (the scan passes no room: it keeps only the count).
    Returns (reason, detail, arg1, arg2, topics, nt, parts, npart); reason 0 = ok.
    On error the caller drops the rows appended to ``topics``/``parts``.
    """
    if end - p < 2:
        return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_FIXED, 0, topics, nt, parts, npart
    version = be_i16(data, p)
    p += 2
    if version != TXN_LOG_VALUE_V0 and version != TXN_LOG_VALUE_V1:
        return _Q_UNKNOWN_VERSION, _D_VALUE_VERSION, version, 0, topics, nt, parts, npart
    flexible = version == TXN_LOG_VALUE_V1
    recs[_R_VALUE_VERSION, record] = version
    if end - p < 15:
        return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_FIXED, 0, topics, nt, parts, npart
    recs[_R_PID, record] = be_i64(data, p)
    recs[_R_EPOCH, record] = be_i16(data, p + 8)
    recs[_R_TIMEOUT, record] = be_i32(data, p + 10)
    state = np.int64(np.int8(data[p + 14]))
    p += 15
    if state < 0 or state >= _NUM_STATES:
        return _Q_BAD_VALUE, _D_STATE, state, 0, topics, nt, parts, npart
    recs[_R_STATE, record] = state
    # TransactionPartitions
    if flexible:
        count, p = read_uvarint(data, p, end)
        if p < 0:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITIONS, 0, topics, nt, parts, npart
        count -= 1
    else:
        if end - p < 4:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITIONS, 0, topics, nt, parts, npart
        count = be_i32(data, p)
        p += 4
    if count < -1:
        return _Q_BAD_VALUE, _D_NULL, _F_PARTITIONS, 0, topics, nt, parts, npart
    total = 0
    for _ in range(max(count, 0)):
        if flexible:
            tlen, p = read_uvarint(data, p, end)
            if p < 0:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC, 0, topics, nt, parts, npart
            tlen -= 1
        else:
            if end - p < 2:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC, 0, topics, nt, parts, npart
            tlen = be_i16(data, p)
            p += 2
        if tlen < 0:
            return _Q_BAD_VALUE, _D_NULL, _F_TOPIC, 0, topics, nt, parts, npart
        if tlen > end - p:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC, 0, topics, nt, parts, npart
        if not is_valid_utf8(data, p, p + tlen):
            return _Q_BAD_VALUE, _D_TOPIC_UTF8, 0, 0, topics, nt, parts, npart
        topics = _grow(topics, nt, 1)
        topics[nt, 0] = record
        topics[nt, 1] = src
        topics[nt, 2] = p
        topics[nt, 3] = tlen
        topic_index = nt
        nt += 1
        p += tlen
        if flexible:
            k, p = read_uvarint(data, p, end)
            if p < 0:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITION_IDS, 0, topics, nt, parts, npart
            k -= 1
        else:
            if end - p < 4:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITION_IDS, 0, topics, nt, parts, npart
            k = be_i32(data, p)
            p += 4
        if k < 0:
            return _Q_BAD_VALUE, _D_NULL, _F_PARTITION_IDS, 0, topics, nt, parts, npart
        if k > (end - p) // 4:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITION_IDS, 0, topics, nt, parts, npart
        parts = _grow(parts, npart, k)
        for _ in range(k):
            parts[npart, 0] = record
            parts[npart, 1] = topic_index
            parts[npart, 2] = be_i32(data, p)
            npart += 1
            p += 4
        total += k
        if flexible:
            ntags, p = read_uvarint(data, p, end)
            if p < 0:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC_TAGS, 0, topics, nt, parts, npart
            for _t in range(ntags):
                _tag, p = read_uvarint(data, p, end)
                if p < 0:
                    return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC_TAGS, 0, topics, nt, parts, npart
                size, p = read_uvarint(data, p, end)
                if p < 0 or size > end - p:
                    return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC_TAGS, 0, topics, nt, parts, npart
                p += size
    recs[_R_PCOUNT, record] = -1 if count == -1 else total
    if end - p < 16:
        return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TIMESTAMPS, 0, topics, nt, parts, npart
    recs[_R_LAST_UPDATE, record] = be_i64(data, p)
    recs[_R_START, record] = be_i64(data, p + 8)
    p += 16
    recs[_R_PREV_PID, record] = -1
    recs[_R_NEXT_PID, record] = -1
    recs[_R_NEXT_EPOCH, record] = -1
    recs[_R_CTV, record] = 0
    recs[_R_UNKNOWN_TAGS, record] = 0
    if flexible:
        ntags, p = read_uvarint(data, p, end)
        if p < 0:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TAGS, 0, topics, nt, parts, npart
        for _t in range(ntags):
            tag, p = read_uvarint(data, p, end)
            if p < 0:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TAGS, 0, topics, nt, parts, npart
            size, p = read_uvarint(data, p, end)
            if p < 0 or size > end - p:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TAGS, 0, topics, nt, parts, npart
            if tag == TAG_PREVIOUS_PRODUCER_ID or tag == TAG_NEXT_PRODUCER_ID:
                if size != _INT64_SIZE:
                    return _Q_BAD_VALUE, _D_TAG_SIZE, tag, size, topics, nt, parts, npart
                recs[_R_PREV_PID if tag == TAG_PREVIOUS_PRODUCER_ID else _R_NEXT_PID, record] = be_i64(data, p)
            elif tag == TAG_CLIENT_TRANSACTION_VERSION or tag == TAG_NEXT_PRODUCER_EPOCH:
                if size != _INT16_SIZE:
                    return _Q_BAD_VALUE, _D_TAG_SIZE, tag, size, topics, nt, parts, npart
                recs[_R_CTV if tag == TAG_CLIENT_TRANSACTION_VERSION else _R_NEXT_EPOCH, record] = be_i16(data, p)
            else:
                ntag = recs[_R_UNKNOWN_TAGS, record]
                if ntag < tags.shape[0]:
                    tags[ntag, 0] = tag
                    tags[ntag, 1] = p
                    tags[ntag, 2] = size
                recs[_R_UNKNOWN_TAGS, record] = ntag + 1
            p += size
    return 0, 0, 0, 0, topics, nt, parts, npart


@jit(inline=True)
def _add_q(quar: np.ndarray, nq: int, batch: int, offset: int, reason: int, detail: int, a1: int, a2: int):
    quar = _grow(quar, nq, 1)
    quar[nq, 0] = batch
    quar[nq, 1] = offset
    quar[nq, 2] = reason
    quar[nq, 3] = detail
    quar[nq, 4] = a1
    quar[nq, 5] = a2
    return quar, nq + 1


@jit()
def _walk_records(
    buf: np.ndarray,
    extra: np.ndarray,
    src: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    counts: np.ndarray,
    base_offset: np.ndarray,
    base_ts: np.ndarray,
    max_ts: np.ndarray,
    log_append_time: np.ndarray,
    position: np.ndarray,
):
    """Every record of every batch: framing (DefaultRecord), then key and value."""
    nbatch = starts.size
    recs = np.empty((_NREC, max(16, nbatch)), np.int64)  # a row per column: each column comes out contiguous
    nr = 0
    topics = np.empty((16, _NTOPIC), np.int64)
    nt = 0
    parts = np.empty((16, _NPART), np.int64)
    npart = 0
    no_tags = np.empty((0, _NTAG), np.int64)  # the scan keeps only the count of unknown tags
    quar = np.empty((16, _NQUAR), np.int64)
    nq = 0
    for b in range(nbatch):
        data = buf if src[b] == 0 else extra
        p = starts[b]
        end = ends[b]
        count = counts[b]
        broken = False
        done = 0
        while done < count:
            if p >= end:
                quar, nq = _add_q(quar, nq, b, -1, _Q_BAD_RECORD, _D_SHORT_BATCH, done, count)
                broken = True
                break
            (
                frame,
                rec_end,
                ts_delta,
                offset_delta,
                key_start,
                key_len,
                value_start,
                value_len,
                _headers_start,
                _header_count,
            ) = read_record(data, p, end)
            if frame != RECORD_OK:
                offset = base_offset[b] + offset_delta if frame == RECORD_BROKEN_AT_OFFSET else -1
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_RECORD, _D_FRAMING, 0, 0)
                broken = True
                break
            offset = base_offset[b] + offset_delta
            p = rec_end
            done += 1
            # --- key
            if key_len < 0:
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_KEY_NULL, 0, 0)
                continue
            if key_len < 4:
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_KEY_SHORT, 0, 0)
                continue
            key_version = be_i16(data, key_start)
            if key_version != TXN_LOG_KEY_VERSION:
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_KEY_VERSION, key_version, 0)
                continue
            id_len = be_i16(data, key_start + 2)
            if id_len < 0 or id_len > key_len - 4:
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_ID_LENGTH, id_len, 0)
                continue
            if id_len != key_len - 4:
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_KEY_TRAILING, key_len - 4 - id_len, 0)
                continue
            if not is_valid_utf8(data, key_start + 4, key_start + 4 + id_len):
                quar, nq = _add_q(quar, nq, b, offset, _Q_BAD_KEY, _D_ID_UTF8, 0, 0)
                continue
            # --- row
            if nr >= recs.shape[1]:
                wider = np.empty((_NREC, 2 * recs.shape[1]), np.int64)
                wider[:, :nr] = recs[:, :nr]
                recs = wider
            recs[_R_POSITION, nr] = position[b]
            recs[_R_OFFSET, nr] = offset
            recs[_R_TIMESTAMP, nr] = max_ts[b] if log_append_time[b] else base_ts[b] + ts_delta
            recs[_R_KEY_VERSION, nr] = key_version
            recs[_R_ID_SRC, nr] = src[b]
            recs[_R_ID_START, nr] = key_start + 4
            recs[_R_ID_LEN, nr] = id_len
            if value_len < 0:
                recs[_R_TOMBSTONE, nr] = 1
                recs[_R_VALUE_VERSION : _R_UNKNOWN_TAGS + 1, nr] = -1  # every value column; a value sets them all
                nr += 1
                continue
            recs[_R_TOMBSTONE, nr] = 0
            saved_nt = nt
            saved_np = npart
            reason, detail, a1, a2, topics, nt, parts, npart = _decode_value(
                data, value_start, value_start + value_len, src[b], recs, nr, topics, nt, parts, npart, no_tags
            )
            if reason != 0:
                nt = saved_nt
                npart = saved_np
                quar, nq = _add_q(quar, nq, b, offset, reason, detail, a1, a2)
                continue
            nr += 1
        if not broken and p != end:
            quar, nq = _add_q(quar, nq, b, -1, _Q_BAD_RECORD, _D_TRAILING, end - p, 0)
    return recs[:, :nr], topics[:nt], parts[:npart], quar[:nq]


@jit()
def _gather_strings(buf: np.ndarray, extra: np.ndarray, src: np.ndarray, start: np.ndarray, length: np.ndarray):
    """Concatenate byte ranges into (data, int64 offsets): the layout of an Arrow (large_)string array."""
    n = start.size
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + length[i]
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        o, s, k = offsets[i], start[i], length[i]
        if src[i] == 0:  # slices: each a memcpy
            out[o : o + k] = buf[s : s + k]
        else:
            out[o : o + k] = extra[s : s + k]
    return out, offsets


@jit()
def _topic_partitions(topic_data: np.ndarray, bounds: np.ndarray, topic_index: np.ndarray, partition: np.ndarray):
    """``"<topic>-<partition>"`` (``TopicPartition.toString``) per partition row, as (UTF-8 data, int64
    offsets): the topic's bytes, a dash, the id in decimal."""
    n = topic_index.size
    digits = np.empty(n, np.int64)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        v = abs(np.int64(partition[i]))  # int64: the int32 minimum's absolute value fits
        d = 1
        while v >= 10:
            v //= 10
            d += 1
        digits[i] = d
        t = topic_index[i]
        sign = 1 if partition[i] < 0 else 0
        offsets[i + 1] = offsets[i] + (bounds[t + 1] - bounds[t]) + 1 + sign + d
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        t = topic_index[i]
        o, s, k = offsets[i], bounds[t], bounds[t + 1] - bounds[t]
        out[o : o + k] = topic_data[s : s + k]
        out[o + k] = 45  # "-"
        if partition[i] < 0:
            out[o + k + 1] = 45
        v = abs(np.int64(partition[i]))
        for j in range(offsets[i + 1] - 1, offsets[i + 1] - 1 - digits[i], -1):
            out[j] = 48 + v % 10
            v //= 10
    return out, offsets


def strings_to_objects(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A numpy object array of ``str`` from (UTF-8 data, offsets) — for notebooks and small outputs.

    The Spark layer should not need this: ``pyarrow.LargeStringArray.from_buffers(n, offsets, data)``
    builds the column without a Python loop.
    """
    raw = data.tobytes()
    out = np.empty(offsets.size - 1, dtype=object)
    bounds = offsets.tolist()
    for i in range(out.size):
        out[i] = raw[bounds[i] : bounds[i + 1]].decode("utf-8")
    return out


@dataclass(frozen=True, slots=True)
class TxnLogScan:
    """All records of one ``__transaction_state`` segment, as columns.

    * ``records``: :data:`TXN_RECORD_COLUMNS`, one row per decoded record, in log order;
    * ``transactional_id_data`` / ``transactional_id_offsets``: the records'
      transactional ids as UTF-8 bytes back to back and int64 offsets (n + 1):
      the buffers of an Arrow ``large_string`` array;
    * ``topic_data`` / ``topic_offsets``: every topic entry of every value, likewise;
    * ``partitions``: :data:`TXN_PARTITION_COLUMNS`, one row per partition id;
    * ``quarantine``: the segment's damage plus every record that did not decode;
    * ``segment``: the underlying :class:`SegmentScan` (batch headers).
    """

    file: str
    segment: SegmentScan
    records: dict[str, np.ndarray]
    transactional_id_data: np.ndarray
    transactional_id_offsets: np.ndarray
    topic_data: np.ndarray
    topic_offsets: np.ndarray
    partitions: dict[str, np.ndarray]
    quarantine: list[QuarantineEntry] = field(default_factory=list)

    @property
    def record_count(self) -> int:
        return int(self.records["offset"].size)

    @property
    def transactional_id_start(self) -> np.ndarray:
        return self.transactional_id_offsets[:-1]

    @property
    def transactional_id_length(self) -> np.ndarray:
        return np.diff(self.transactional_id_offsets)

    def transactional_ids(self) -> np.ndarray:
        """Object array of ``str``, one per record."""
        return strings_to_objects(self.transactional_id_data, self.transactional_id_offsets)

    def partition_list_offsets(self) -> np.ndarray:
        """int64 offsets (records + 1) into the partition rows: the offsets of an Arrow list column."""
        counts = np.bincount(self.partitions["record_index"], minlength=self.record_count)
        offsets = np.zeros(self.record_count + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        return offsets

    def topic_partitions(self) -> tuple[np.ndarray, np.ndarray]:
        """(data, offsets) of each partition row's ``"topic-partition"`` (TopicPartition.toString; Arrow
        large_string buffers)."""
        return _topic_partitions(
            as_uint8(self.topic_data), self.topic_offsets, self.partitions["topic_index"], self.partitions["partition"]
        )

    def topic_partition_strings(self) -> np.ndarray:
        """Object array of ``"topic-partition"``, one per partition row."""
        return strings_to_objects(*self.topic_partitions())


def _detail_text(detail: int, a1: int, a2: int) -> str:
    """The words of a quarantine detail code and its two arguments."""
    template = _DETAILS[detail]
    if "{field}" in template:
        return template.replace("{field}", _FIELDS[a1])
    if detail == _D_TAG_SIZE:
        return template.format(
            a1, a2, _INT64_SIZE if a1 in (TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID) else _INT16_SIZE
        )
    return template.format(a1, a2)


def _detail_field(detail: int, a1: int) -> str:
    """The TransactionLogValue field a value's detail code is about (TransactionLogValue.json names)."""
    if detail in (_D_VALUE_SHORT, _D_NULL):
        return _FIELDS[a1]
    if detail == _D_TAG_SIZE:
        return _TAG_FIELDS.get(a1, "_tagged_fields")
    return {_D_VALUE_VERSION: "version", _D_STATE: "TransactionStatus", _D_TOPIC_UTF8: "TransactionPartitions.Topic"}[
        detail
    ]


def _record_quarantine(file: str, quar: np.ndarray, positions: np.ndarray, ends: np.ndarray) -> list[QuarantineEntry]:
    out = []
    for batch, offset, reason, detail, a1, a2 in quar.tolist():
        text = _detail_text(detail, a1, a2)
        if offset >= 0:
            text = f"offset {offset}: {text}"
        position = int(positions[batch])
        out.append(QuarantineEntry(file, position, int(ends[batch]) - position, errors.REASONS[reason], text))
    return out


def scan_transaction_log(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> TxnLogScan:
    """Decode every record of a ``__transaction_state`` segment into columns.

    Never raises on bad input; see :class:`TxnLogScan`. ``max_decompressed_bytes`` bounds the
    decompressed bytes of the segment's compressed batches *together*: they are all held until
    their records are decoded in one pass, and the records decoded from them are output, so a
    budget per file is what keeps memory bounded by the input plus the limit. A batch that would
    pass it is quarantined (``decompressed_too_large``) and the rest of the segment still decodes.

    >>> scan = scan_transaction_log(open("00000000000000000000.log", "rb").read())  # doctest: +SKIP
    >>> scan.transactional_ids()[:2], scan.records["state"][:2]  # doctest: +SKIP
    """
    arr = as_uint8(buf)
    (scan,) = scan_transaction_log_windows(
        arr, arr.size + 1, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
    )  # one window: the whole segment
    return scan


def scan_transaction_log_windows(
    buf: Buffer,
    window_bytes: int,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[TxnLogScan]:
    """:func:`scan_transaction_log` a window of about ``window_bytes`` of the segment at a time: the batch
    headers are walked once, then the records of the batches starting in each window are decoded and
    yielded, so what a caller holds at once is one window's records, not the segment's.

    Together the windows hold exactly the records (in log order), partitions and quarantine entries the
    whole scan gives: the segment's own damage comes with the first window, and the decompression budget
    is the segment's, spent in log order as the whole scan spends it. Each window's ``segment`` is the
    whole segment's headers."""
    arr = as_uint8(buf)
    # no reused output block: decoding the records costs far more than the header columns' page faults, and a
    # block sized for a 100 MiB segment would stay with the process
    segment = scan_segment(
        arr, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes, blocks=False
    )
    data_idx = np.flatnonzero(~segment.batches["is_control"])
    window = segment.batches["position"][data_idx] // max(int(window_bytes), 1)
    cuts = np.flatnonzero(window[1:] != window[:-1]) + 1
    budget = max_decompressed_bytes
    for k, idx in enumerate(np.split(data_idx, cuts)):
        scan, used = _records_of(arr, segment, idx, file, budget, list(segment.quarantine) if k == 0 else [])
        budget -= used
        yield scan


def _records_of(
    arr: np.ndarray,
    segment: SegmentScan,
    data_idx: np.ndarray,
    file: str,
    max_decompressed_bytes: int,
    quarantine: list[QuarantineEntry],
) -> tuple[TxnLogScan, int]:
    """The records of the batches ``data_idx`` of ``segment`` (data batches, in log order), with
    ``quarantine`` and theirs; and the bytes their compressed batches decompressed to."""
    b = segment.batches
    positions = b["position"][data_idx]
    starts = positions + RECORD_BATCH_OVERHEAD
    ends = positions + LOG_OVERHEAD + b["batch_length"][data_idx].astype(np.int64)
    counts = b["record_count"][data_idx].astype(np.int64)
    src = np.zeros(data_idx.size, np.int64)
    # The coordinator never compresses (TransactionLog.EnforcedCompression), but a copied topic may be: decompress those
    # batches (a Python loop over compressed batches only) into one side buffer.
    pieces: list[bytes] = []
    extra_size = 0
    codecs = b["compression"][data_idx]
    for k in np.flatnonzero(codecs != Compression.NONE):
        position = int(positions[k])
        try:
            plain = decompress(
                int(codecs[k]),
                arr[int(starts[k]) : int(ends[k])],
                file=file,
                position=position,
                limit=max_decompressed_bytes - extra_size,
            )
        except DecodeError as e:
            quarantine.append(
                QuarantineEntry(
                    file, position, int(ends[k]) - position, e.reason, budget_detail(e, max_decompressed_bytes)
                )
            )
            counts[k] = 0
            starts[k] = ends[k] = 0
            continue
        src[k] = 1
        starts[k] = extra_size
        ends[k] = extra_size + len(plain)
        pieces.append(plain)
        extra_size += len(plain)
    extra = as_uint8(b"".join(pieces))
    recs, topics, parts, quar = _walk_records(
        arr,
        extra,
        src,
        starts,
        ends,
        counts,
        b["base_offset"][data_idx],
        b["base_timestamp"][data_idx],
        b["max_timestamp"][data_idx],
        b["timestamp_type"][data_idx] == TimestampType.LOG_APPEND_TIME,
        positions,
    )
    records = {name: recs[_RC[name]].astype(dtype) for name, dtype in TXN_RECORD_COLUMNS.items()}
    col = np.ascontiguousarray
    id_data, id_offsets = _gather_strings(arr, extra, recs[_R_ID_SRC], recs[_R_ID_START], recs[_R_ID_LEN])
    topic_data, topic_offsets = _gather_strings(arr, extra, col(topics[:, 1]), col(topics[:, 2]), col(topics[:, 3]))
    partitions = {
        "record_index": parts[:, 0].copy(),
        "topic_index": parts[:, 1].copy(),
        "partition": parts[:, 2].astype(np.int32),
    }
    if quar.shape[0]:
        quarantine.extend(
            _record_quarantine(file, quar, positions, positions + LOG_OVERHEAD + b["batch_length"][data_idx])
        )
        quarantine.sort(key=lambda e: e.position)
    scan = TxnLogScan(
        file=file,
        segment=segment,
        records=records,
        transactional_id_data=id_data,
        transactional_id_offsets=id_offsets,
        topic_data=topic_data,
        topic_offsets=topic_offsets,
        partitions=partitions,
        quarantine=quarantine,
    )
    return scan, extra_size


def scan_transaction_log_file(
    path: str | os.PathLike[str],
    check_crc: bool = True,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> TxnLogScan:
    """:func:`scan_transaction_log` over a file, memory-mapped."""
    with mapped_file(path) as arr:
        return scan_transaction_log(
            arr, file=os.fspath(path), check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
        )
