"""The bulk ``__transaction_state`` scan: every record of a segment walked in compiled code into numpy
columns (:class:`TxnLogScan`), what cannot be read quarantined.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.binary import be_i16, is_valid_utf8
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, budget_detail, decompress
from txnlog.kafka.errors import DecodeError, QuarantineEntry
from txnlog.kafka.jit import jit
from txnlog.kafka.record_batch import Buffer, SegmentScan, as_uint8, mapped_file, scan_segment
from txnlog.kafka.records import RECORD_BROKEN_AT_OFFSET, RECORD_OK, read_record
from txnlog.kafka.txn_state_value import (
    _D_FRAMING,
    _D_ID_LENGTH,
    _D_ID_UTF8,
    _D_KEY_NULL,
    _D_KEY_SHORT,
    _D_KEY_TRAILING,
    _D_KEY_VERSION,
    _D_SHORT_BATCH,
    _D_TRAILING,
    _NPART,
    _NQUAR,
    _NREC,
    _NTAG,
    _NTOPIC,
    _Q_BAD_KEY,
    _Q_BAD_RECORD,
    _R_ID_LEN,
    _R_ID_SRC,
    _R_ID_START,
    _R_KEY_VERSION,
    _R_OFFSET,
    _R_POSITION,
    _R_TIMESTAMP,
    _R_TOMBSTONE,
    _R_UNKNOWN_TAGS,
    _R_VALUE_VERSION,
    _RC,
    TXN_RECORD_COLUMNS,
    _add_q,
    _decode_value,
    _detail_text,
)
from txnlog.kafka.wire import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TXN_LOG_KEY_VERSION,
    Compression,
    TimestampType,
)


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


def _side_buffer(
    arr: np.ndarray,
    codecs: np.ndarray,
    positions: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    counts: np.ndarray,
    src: np.ndarray,
    file: str,
    max_decompressed_bytes: int,
    quarantine: list[QuarantineEntry],
) -> tuple[np.ndarray, int]:
    """The compressed batches' records decompressed into one side buffer, and its size. Points ``starts``/``ends``
    of those batches into it (``src`` 1); a batch that does not decompress is quarantined and left empty."""
    # The coordinator never compresses (TransactionLog.EnforcedCompression), but a copied topic may be: decompress those
    # batches (a Python loop over compressed batches only) into one side buffer.
    pieces: list[bytes] = []
    extra_size = 0
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
    return extra, extra_size


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
    extra, extra_size = _side_buffer(
        arr, b["compression"][data_idx], positions, starts, ends, counts, src, file, max_decompressed_bytes, quarantine
    )
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
