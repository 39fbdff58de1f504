"""The compiled TransactionLogValue decoder, with the column layout and quarantine details it fills.

Shared by the strict decoders (:mod:`txnlog.kafka.txn_state`) and the bulk scan
(:mod:`txnlog.kafka.txn_state_scan`); grammar and rules in docs/formats.md §7.
"""

from __future__ import annotations

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.binary import be_i16, be_i32, be_i64, is_valid_utf8, read_length, read_uvarint, skip_tagged_fields
from txnlog.kafka.jit import jit
from txnlog.kafka.wire import (
    TAG_CLIENT_TRANSACTION_VERSION,
    TAG_NEXT_PRODUCER_EPOCH,
    TAG_NEXT_PRODUCER_ID,
    TAG_PREVIOUS_PRODUCER_ID,
    TXN_LOG_KEY_VERSION,
    TXN_LOG_VALUE_V0,
    TXN_LOG_VALUE_V1,
    TransactionState,
)

_NUM_STATES = len(TransactionState)
_INT64_SIZE = 8
_INT16_SIZE = 2


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
    count, p = read_length(data, p, end, flexible, 4)
    if p < 0:
        return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITIONS, 0, topics, nt, parts, npart
    if count < -1:
        return _Q_BAD_VALUE, _D_NULL, _F_PARTITIONS, 0, topics, nt, parts, npart
    total = 0
    for _ in range(max(count, 0)):
        tlen, p = read_length(data, p, end, flexible, 2)
        if p < 0:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC, 0, topics, nt, parts, npart
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
        k, p = read_length(data, p, end, flexible, 4)
        if p < 0:
            return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_PARTITION_IDS, 0, topics, nt, parts, npart
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
            p = skip_tagged_fields(data, p, end)
            if p < 0:
                return _Q_BAD_VALUE, _D_VALUE_SHORT, _F_TOPIC_TAGS, 0, topics, nt, parts, npart
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
