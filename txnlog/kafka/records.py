"""The record frame inside a v2 batch, read in one place: DefaultRecord's framing.

Wire grammar (DefaultRecord.readFrom / DefaultRecord.writeTo)::

    Record => length:varint attributes:int8 timestampDelta:varlong offsetDelta:varint
              keyLength:varint key valueLength:varint value
              headersCount:varint [headerKeyLength:varint headerKey headerValueLength:varint headerValue]

How a frame is judged (DefaultRecord.readFrom):

* a negative key, value or header-value length is null (Kafka writes -1);
* a negative headers count or header-key length, a length that runs past the end of
  the record, or fields that do not use exactly ``length`` bytes break the frame
  (DefaultRecord.readFrom checks the count and the total size).

Every per-record loop calls :func:`read_record`: the control-record parse of a
segment scan (:mod:`txnlog.kafka.record_batch`), the ``__transaction_state``
walk (:mod:`txnlog.kafka.txn_state`) and the ``kafka-dump-log.sh`` renderer
(:mod:`txnlog.kafka.dump_log_text`, from Python). It is inlined into its
compiled callers, so sharing it costs them nothing.
"""

from __future__ import annotations

import numpy as np

from txnlog.kafka.binary import read_varint, read_varlong
from txnlog.kafka.jit import jit

__all__ = ["RECORD_BROKEN", "RECORD_BROKEN_AT_OFFSET", "RECORD_OK", "read_header", "read_record"]

#: The frame is whole.
RECORD_OK = 0
#: The frame is broken before its offsetDelta could be read: the record's offset is unknown.
RECORD_BROKEN = 1
#: The frame is broken after its offsetDelta was read: the broken record's offset is known.
RECORD_BROKEN_AT_OFFSET = 2


@jit(inline=True)
def read_header(buf: np.ndarray, p: int, end: int) -> tuple[int, int, int, int, int]:
    """The record header at ``buf[p:end]``.

    Returns (next position, key start, key length, value start, value length); the next
    position is -1 when the header is broken. A negative value length is a null value.
    """
    key_len, q = read_varint(buf, p, end)
    if q < 0 or key_len < 0 or key_len > end - q:
        return -1, 0, 0, 0, 0
    key_start = q
    q += key_len
    value_len, q = read_varint(buf, q, end)
    if q < 0 or value_len > end - q:
        return -1, 0, 0, 0, 0
    value_start = q
    if value_len > 0:
        q += value_len
    return q, key_start, key_len, value_start, value_len


@jit(inline=True)
def read_record(buf: np.ndarray, p: int, end: int) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """The record frame at ``buf[p:end]`` (``end``: the end of the batch's records).

    Returns (status, next position, timestampDelta, offsetDelta, key start, key length,
    value start, value length, headers start, headers count). ``status`` is RECORD_OK,
    or RECORD_BROKEN / RECORD_BROKEN_AT_OFFSET (then only offsetDelta may be used, and
    only with RECORD_BROKEN_AT_OFFSET). A negative key or value length is null.
    """
    length, q = read_varint(buf, p, end)
    if q < 0 or length < 1 or length > end - q:
        return RECORD_BROKEN, -1, 0, 0, 0, 0, 0, 0, 0, 0
    rec_end = q + length
    q += 1  # attributes: unused
    timestamp_delta, q = read_varlong(buf, q, rec_end)
    if q < 0:
        return RECORD_BROKEN, -1, 0, 0, 0, 0, 0, 0, 0, 0
    offset_delta, q = read_varint(buf, q, rec_end)
    if q < 0:
        return RECORD_BROKEN, -1, 0, 0, 0, 0, 0, 0, 0, 0
    key_len, q = read_varint(buf, q, rec_end)
    if q < 0 or key_len > rec_end - q:
        return RECORD_BROKEN_AT_OFFSET, -1, 0, offset_delta, 0, 0, 0, 0, 0, 0
    key_start = q
    if key_len > 0:
        q += key_len
    value_len, q = read_varint(buf, q, rec_end)
    if q < 0 or value_len > rec_end - q:
        return RECORD_BROKEN_AT_OFFSET, -1, 0, offset_delta, 0, 0, 0, 0, 0, 0
    value_start = q
    if value_len > 0:
        q += value_len
    header_count, q = read_varint(buf, q, rec_end)
    if q < 0 or header_count < 0:
        return RECORD_BROKEN_AT_OFFSET, -1, 0, offset_delta, 0, 0, 0, 0, 0, 0
    headers_start = q
    for _ in range(header_count):
        q, _k, _kl, _v, _vl = read_header(buf, q, rec_end)
        if q < 0:
            return RECORD_BROKEN_AT_OFFSET, -1, 0, offset_delta, 0, 0, 0, 0, 0, 0
    if q != rec_end:
        return RECORD_BROKEN_AT_OFFSET, -1, 0, offset_delta, 0, 0, 0, 0, 0, 0
    return (
        RECORD_OK,
        rec_end,
        timestamp_delta,
        offset_delta,
        key_start,
        key_len,
        value_start,
        value_len,
        headers_start,
        header_count,
    )
