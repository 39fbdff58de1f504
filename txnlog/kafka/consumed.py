"""Records read by a Kafka consumer, laid out again as a v2 segment (for the vectorized decoders).

A consumer hands out records one by one (offset, timestamp, key, value), not the batches
the broker stored. To decode them with the same compiled scan the offline path uses
(:func:`txnlog.kafka.txn_state.scan_transaction_log`), :func:`segment_from_records`
writes them back as a run of magic-2 batches, one record per batch, so that every record
keeps its own offset and timestamp exactly:

* batch header: base_offset = the record's offset, base/max timestamp = its timestamp,
  partition_leader_epoch = its leader epoch (-1 if unknown), no producer (-1/-1/-1),
  attributes 0 (uncompressed, CreateTime, not transactional), CRC 0;
* record: attributes 0, timestamp delta 0, offset delta 0, the key and value as consumed
  (a null key or value has length -1), no headers.

The CRC is not computed (it would describe bytes we made, not bytes the broker kept), so
scan the result with ``check_crc=False``. Everything is numpy over whole columns: no Python
work per record here (the consumer loop that collected the records is the only one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from txnlog.kafka import wire

__all__ = ["segment_from_records"]

#: The 61-byte v2 batch header as a packed big-endian numpy record (DefaultRecordBatch).
BATCH_HEADER_DTYPE = np.dtype(
    [
        ("base_offset", ">i8"),
        ("batch_length", ">i4"),
        ("partition_leader_epoch", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("last_offset_delta", ">i4"),
        ("base_timestamp", ">i8"),
        ("max_timestamp", ">i8"),
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("base_sequence", ">i4"),
        ("records_count", ">i4"),
    ]
)
assert BATCH_HEADER_DTYPE.itemsize == wire.RECORD_BATCH_OVERHEAD == 61

_MAX_VARINT = 5  # int32 zig-zag varints take at most 5 bytes


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints of int32 values: (bytes (n, 5) uint8, used length (n,))."""
    v = values.astype(np.int64)
    z = ((v << 1) ^ (v >> 63)).astype(np.uint64)
    n = np.ones(v.size, np.int64)
    for k in range(1, _MAX_VARINT):
        n += z >= np.uint64(1 << (7 * k))
    out = np.zeros((v.size, _MAX_VARINT), np.uint8)
    for j in range(_MAX_VARINT):
        byte = (z >> np.uint64(7 * j)) & np.uint64(0x7F)
        out[:, j] = (byte | np.where(j < n - 1, np.uint64(0x80), np.uint64(0))).astype(np.uint8)
    return out, n


def _scatter_varints(buf: np.ndarray, at: np.ndarray, data: np.ndarray, used: np.ndarray) -> None:
    for j in range(_MAX_VARINT):
        m = j < used
        buf[at[m] + j] = data[m, j]


def _scatter_bytes(buf: np.ndarray, at: np.ndarray, blob: np.ndarray, lengths: np.ndarray) -> None:
    """Copy consecutive pieces of ``blob`` (``lengths`` each, back to back) to ``buf[at[i]:]``."""
    total = int(lengths.sum())
    if total == 0:
        return
    src_start = np.zeros(lengths.size, np.int64)
    np.cumsum(lengths[:-1], out=src_start[1:])
    shift = np.repeat(at - src_start, lengths)
    buf[shift + np.arange(total, dtype=np.int64)] = blob[:total]


def segment_from_records(
    offsets: Sequence[int] | np.ndarray,
    timestamps: Sequence[int] | np.ndarray,
    key_lengths: Sequence[int] | np.ndarray,
    keys: bytes,
    value_lengths: Sequence[int] | np.ndarray,
    values: bytes,
    leader_epochs: Sequence[int] | np.ndarray | None = None,
) -> np.ndarray:
    """A segment (uint8 array) holding one batch per record, in the given order.

    ``keys``/``values`` are the non-null keys/values back to back; ``key_lengths`` /
    ``value_lengths`` give each record's length, -1 for null (a tombstone's value).

    >>> from txnlog.kafka.record_batch import scan_segment
    >>> seg = segment_from_records([5, 9], [100, 200], [1, 2], b"abc", [-1, 3], b"xyz")
    >>> scan_segment(seg, check_crc=False).batches["base_offset"].tolist()
    [5, 9]
    """
    off = np.asarray(offsets, np.int64)
    n = off.size
    klen = np.asarray(key_lengths, np.int64)
    vlen = np.asarray(value_lengths, np.int64)
    kdata, kn = _varints(klen)
    vdata, vn = _varints(vlen)
    kbytes = np.maximum(klen, 0)
    vbytes = np.maximum(vlen, 0)
    # attributes, timestamp delta, offset delta (3 zero bytes) ... headers count (1 zero byte)
    body = 3 + kn + kbytes + vn + vbytes + 1
    ldata, ln = _varints(body)
    total = wire.RECORD_BATCH_OVERHEAD + ln + body
    pos = np.zeros(n, np.int64)
    if n:
        np.cumsum(total[:-1], out=pos[1:])
    buf = np.zeros(int(total.sum()), np.uint8)
    if n == 0:
        return buf

    ts = np.asarray(timestamps, np.int64)
    head = np.zeros(n, BATCH_HEADER_DTYPE)
    head["base_offset"] = off
    head["batch_length"] = total - wire.LOG_OVERHEAD
    head["partition_leader_epoch"] = -1 if leader_epochs is None else np.asarray(leader_epochs, np.int64)
    head["magic"] = wire.CURRENT_MAGIC
    head["base_timestamp"] = ts
    head["max_timestamp"] = ts
    head["producer_id"] = wire.NO_PRODUCER_ID
    head["producer_epoch"] = wire.NO_PRODUCER_EPOCH
    head["base_sequence"] = wire.NO_SEQUENCE
    head["records_count"] = 1
    raw = head.view(np.uint8).reshape(n, wire.RECORD_BATCH_OVERHEAD)
    buf[pos[:, None] + np.arange(wire.RECORD_BATCH_OVERHEAD, dtype=np.int64)] = raw

    at = pos + wire.RECORD_BATCH_OVERHEAD
    _scatter_varints(buf, at, ldata, ln)
    at = at + ln + 3
    _scatter_varints(buf, at, kdata, kn)
    at = at + kn
    _scatter_bytes(buf, at, np.frombuffer(keys, np.uint8), kbytes)
    at = at + kbytes
    _scatter_varints(buf, at, vdata, vn)
    at = at + vn
    _scatter_bytes(buf, at, np.frombuffer(values, np.uint8), vbytes)
    return buf
