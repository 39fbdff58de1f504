"""A ``__consumer_offsets`` segment as Arrow tables: its records (key and value bytes, with their batch's
producer) and its transaction markers, what cannot be read quarantined.

The group coordinator may compress its batches (``offsets.topic.compression.codec``), so unlike the data
partitions' payloads these batches are decompressed (:func:`txnlog.kafka.txn_state_scan._side_buffer`, under
the same per-file budget). The walk of the records checks each OffsetCommit record where it lies
(:func:`txnlog.kafka.consumer_offsets_commits.read_commit`) and keeps of it only its topic-partition hash, so the
job's read (:func:`walk_commits`, then :func:`txnlog.kafka.consumer_offsets.decode_walked`) writes little per
record, reads again and builds the columns of the records asked for only, and copies the bytes of the records
that are not well-formed OffsetCommits only; :func:`scan_consumer_offsets` returns every
record's key and value bytes, for :func:`txnlog.kafka.consumer_offsets.decode_records`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from txnlog.kafka import errors
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from txnlog.kafka.consumer_offsets_commits import (
    WIDTH,
    commit_columns,
    commit_key,
    read_commit,
    reread_commits,
    tp_hash,
)
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.errors import QuarantineEntry
from txnlog.kafka.jit import jit
from txnlog.kafka.record_batch import Buffer, as_uint8, mapped_file, scan_segment
from txnlog.kafka.records import RECORD_BROKEN_AT_OFFSET, RECORD_OK, read_record
from txnlog.kafka.txn_state_scan import _gather_strings, _side_buffer
from txnlog.kafka.wire import LOG_OVERHEAD, NO_PRODUCER_ID, RECORD_BATCH_OVERHEAD, TimestampType

#: One row per data record, in log order (``key``/``value`` null where the record's is: a null value is a
#: tombstone).
RECORDS_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),  # byte position of the record's batch in the segment
        ("batch_length", pa.int64()),  # the batch's bytes (12 + batchLength)
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("is_transactional", pa.bool_()),
        ("key", pa.large_binary()),
        ("value", pa.large_binary()),
    ]
)
#: One row per COMMIT/ABORT marker (``control_type``: wire.ControlType).
MARKERS_SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("control_type", pa.int16()),
    ]
)

_BROKEN, _SHORT, _TRAILING = 1, 2, 3
_DETAILS = {
    _BROKEN: "record framing is broken",
    _SHORT: "the batch ends after {0} of its {1} records",
    _TRAILING: "{0} bytes left after the last record",
}


@jit()
def _walk(buf, extra, src, starts, ends, counts, base_offset, base_ts, max_ts, log_append_time):
    """The frame of every record of every batch: (batch, offset, timestamp, key src/start/len, value
    start/len) per record as rows of an int64 matrix; per record, whether it is a well-formed OffsetCommit
    (:func:`~txnlog.kafka.consumer_offsets_commits.read_commit`) and then the hash of its topic and partition
    (:func:`~txnlog.kafka.consumer_offsets_commits.tp_hash`; 0 where not): only what deciding to keep a record
    needs, its columns read again for the records kept; and (batch, offset, code, arg1, arg2) per broken batch."""
    total = 0
    for b in range(starts.size):
        total += max(counts[b], 0)
    recs = np.empty((total, 7), np.int64)
    ok = np.zeros(total, np.bool_)
    hashes = np.zeros(total, np.uint64)
    row = np.zeros((1, WIDTH), np.int64)  # read_commit's row of the record at hand
    nr = 0
    quar = np.empty((starts.size, 5), np.int64)
    nq = 0
    for b in range(starts.size):
        data = buf if src[b] == 0 else extra
        p = starts[b]
        end = ends[b]
        done = 0
        broken = False
        while done < counts[b]:
            if p >= end:
                quar[nq] = (b, -1, _SHORT, done, counts[b])
                nq += 1
                broken = True
                break
            frame, rec_end, ts_delta, offset_delta, key_start, key_len, value_start, value_len, _h, _hc = read_record(
                data, p, end
            )
            if frame != RECORD_OK:
                quar[nq] = (b, base_offset[b] + offset_delta if frame == RECORD_BROKEN_AT_OFFSET else -1, _BROKEN, 0, 0)
                nq += 1
                broken = True
                break
            recs[nr] = (
                b,
                base_offset[b] + offset_delta,
                max_ts[b] if log_append_time[b] else base_ts[b] + ts_delta,
                key_start,
                key_len,
                value_start,
                value_len,
            )
            value_end = value_start + max(value_len, 0)
            if key_len >= 0 and read_commit(
                data, key_start, key_start + key_len, data, value_start, value_end, value_len >= 0, row, 0
            ):
                ok[nr] = True
                topic_start, topic_len, partition = commit_key(row, 0)
                hashes[nr] = tp_hash(data, topic_start, topic_len, partition)
            nr += 1
            done += 1
            p = rec_end
        if not broken and p != end:
            quar[nq] = (b, -1, _TRAILING, end - p, 0)
            nq += 1
    return recs[:nr], ok[:nr], hashes[:nr], quar[:nq]


def _binary(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> pa.Array:
    n = valid.size
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if not valid.all() else None
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def _markers(batches: dict[str, np.ndarray]) -> pa.Table:
    idx = np.flatnonzero(batches["is_control"] & (batches["control_status"] == ControlStatus.END_TXN_MARKER))
    return pa.table(
        {
            "offset": batches["base_offset"][idx],
            "timestamp": batches["marker_timestamp"][idx],
            "producer_id": batches["producer_id"][idx],
            "producer_epoch": batches["producer_epoch"][idx],
            "control_type": batches["control_type"][idx],
        },
        schema=MARKERS_SCHEMA,
    )


def scan_consumer_offsets(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[pa.Table, pa.Table, list[QuarantineEntry]]:
    """(records, markers, quarantine) of one ``__consumer_offsets`` segment (:data:`RECORDS_SCHEMA`,
    :data:`MARKERS_SCHEMA`), every record's key and value bytes. Never raises on bad input: the segment's damage,
    batches that do not decompress and batches whose record framing is broken are quarantine entries; the records
    before a broken one are kept."""
    records, markers, quarantine, _, _ = scan_commits(
        buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes, every_key=True
    )
    return records, markers, quarantine


def scan_commits(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    every_key: bool = False,
) -> tuple[pa.Table, pa.Table, list[QuarantineEntry], np.ndarray, dict[str, pa.Array]]:
    """:func:`scan_consumer_offsets` with the well-formed OffsetCommit records already read: (records, markers,
    quarantine, the mask of those records, their columns by
    :data:`~txnlog.kafka.consumer_offsets.DECODED_SCHEMA` name). The records' ``key`` and ``value`` are null
    for the masked ones, unless ``every_key``."""
    walked = walk_commits(buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes)
    records, ok, columns = walked.records(None, every_key=every_key)
    return records, walked.markers, walked.quarantine, ok, columns


@dataclass(frozen=True)
class Walked:
    """One segment walked (:func:`walk_commits`): every record framed and checked, and per well-formed OffsetCommit
    only the hash of its topic and partition kept; no column built yet (:meth:`records` reads the kept commits
    again and builds theirs). It points into the segment's bytes: use it while they are mapped."""

    arr: np.ndarray  # the segment
    extra: np.ndarray  # its decompressed batches
    recs: np.ndarray  # per record: batch, offset, timestamp, key start/len, value start/len (``_walk``)
    ok: np.ndarray  # per record: read here as a well-formed OffsetCommit
    hashes: np.ndarray  # per record: its OffsetCommit key's topic-partition hash, 0 where not ok
    batches: dict[str, np.ndarray]  # per batch: src (0 its bytes in arr, 1 in extra), position, batch_length and
    # producer columns; a record's batch is its ``recs`` column 0, these gathered for the records built only
    markers: pa.Table
    quarantine: list[QuarantineEntry]

    def of_producers(self) -> np.ndarray:
        """Per record: its batch has a producer id (a producer's batch: transactional offsets, say)."""
        return (self.batches["producer_id"] != NO_PRODUCER_ID)[self.recs[:, 0]]

    def key_hashes(self) -> np.ndarray:
        """Per record, the hash of its OffsetCommit key's topic and partition (0: not a well-formed commit;
        :func:`~txnlog.kafka.consumer_offsets_commits.topic_partition_hashes`)."""
        return self.hashes

    def records(
        self, keep: np.ndarray | None, *, every_key: bool = False
    ) -> tuple[pa.Table, np.ndarray, dict[str, pa.Array]]:
        """(records, mask of those read as OffsetCommits, their columns) as :func:`scan_commits` gives them, of
        the records ``keep`` marks (None: all) and every record that is not a well-formed OffsetCommit (its
        bytes copied for the general reader, which decodes or quarantines it)."""
        ok = self.ok
        recs = self.recs
        if keep is not None and not (keep | ~ok).all():
            rows = np.flatnonzero(keep | ~ok)
            recs, ok = recs[rows], ok[rows]
        batch = {name: column[recs[:, 0]] for name, column in self.batches.items()}
        src = batch["src"]
        arr, extra = self.arr, self.extra
        commits = reread_commits(arr, extra, src, recs, np.flatnonzero(ok))
        columns = commit_columns(commits, arr, extra, src[ok], src[ok])
        raw = np.ones(len(recs), bool) if every_key else ~ok  # the records whose bytes are copied
        key_valid = (recs[:, 4] >= 0) & raw
        value_valid = (recs[:, 6] >= 0) & raw
        if raw.any():
            key_data, key_offsets = _gather_strings(
                arr, extra, src, recs[:, 3].copy(), np.where(key_valid, recs[:, 4], 0)
            )  # fmt: skip
            value_data, value_offsets = _gather_strings(
                arr, extra, src, recs[:, 5].copy(), np.where(value_valid, recs[:, 6], 0)
            )  # fmt: skip
        else:  # every record read as an OffsetCommit: no bytes copied
            key_data = value_data = np.zeros(0, np.uint8)
            key_offsets = value_offsets = np.zeros(len(recs) + 1, np.int64)
        records = pa.table(
            {
                "position": batch["position"],
                "batch_length": batch["batch_length"],
                "offset": recs[:, 1],
                "timestamp": recs[:, 2],
                "producer_id": batch["producer_id"],
                "producer_epoch": batch["producer_epoch"],
                "is_transactional": batch["is_transactional"],
                "key": _binary(key_data, key_offsets, key_valid),
                "value": _binary(value_data, value_offsets, value_valid),
            },
            schema=RECORDS_SCHEMA,
        )
        return records, ok, columns


def walk_commits(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Walked:
    """The walk of :func:`scan_commits` (batches checked and decompressed, records framed, OffsetCommits read),
    its columns left to :meth:`Walked.records`: a caller that needs only some records builds only theirs.
    Never raises on bad input, as :func:`scan_consumer_offsets`."""
    arr = as_uint8(buf)
    segment = scan_segment(arr, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes)
    quarantine = list(segment.quarantine)
    b = segment.batches
    idx = np.flatnonzero(~b["is_control"])
    positions = b["position"][idx]
    lengths = LOG_OVERHEAD + b["batch_length"][idx].astype(np.int64)
    starts = positions + RECORD_BATCH_OVERHEAD
    ends = positions + lengths
    counts = b["record_count"][idx].astype(np.int64)
    src = np.zeros(idx.size, np.int64)
    extra, _ = _side_buffer(
        arr, b["compression"][idx], positions, starts, ends, counts, src, file, max_decompressed_bytes, quarantine
    )
    recs, ok, hashes, quar = _walk(
        arr,
        extra,
        src,
        starts,
        ends,
        counts,
        b["base_offset"][idx],
        b["base_timestamp"][idx],
        b["max_timestamp"][idx],
        b["timestamp_type"][idx] == TimestampType.LOG_APPEND_TIME,
    )
    for batch, offset, code, a1, a2 in quar.tolist():
        text = _DETAILS[code].format(a1, a2)
        quarantine.append(
            QuarantineEntry(
                file,
                int(positions[batch]),
                int(lengths[batch]),
                errors.BAD_RECORD,
                f"offset {offset}: {text}" if offset >= 0 else text,
            )
        )
    quarantine.sort(key=lambda e: e.position)
    batches = {
        "src": src,
        "position": positions,
        "batch_length": lengths,
        "producer_id": b["producer_id"][idx],
        "producer_epoch": b["producer_epoch"][idx],
        "is_transactional": b["is_transactional"][idx],
    }
    return Walked(arr, extra, recs, ok, hashes, batches, _markers(b), quarantine)


def scan_consumer_offsets_file(
    path: str | os.PathLike[str],
    *,
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[pa.Table, pa.Table, list[QuarantineEntry]]:
    """:func:`scan_consumer_offsets` over a file, memory-mapped."""
    with mapped_file(path) as arr:
        return scan_consumer_offsets(
            arr,
            file=os.fspath(path),
            check_crc=check_crc,
            max_decompressed_bytes=max_decompressed_bytes,
        )
