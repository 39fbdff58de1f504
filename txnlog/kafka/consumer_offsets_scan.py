"""A ``__consumer_offsets`` segment as Arrow tables: its records (key and value bytes, with their batch's
producer) and its transaction markers, what cannot be read quarantined.

The group coordinator may compress its batches (``offsets.topic.compression.codec``), so unlike the data
partitions' payloads these batches are decompressed (:func:`txnlog.kafka.txn_state_scan._side_buffer`, under
the same per-file budget). The job's read is three steps per segment: :func:`scan_batches` checks the batches and
decompresses them; :func:`index_scanned` walks every record once, checking each (as an OffsetCommit,
:func:`txnlog.kafka.consumer_offsets_commits.check_commit`) and noting its position and topic-partition hash,
nothing else; :func:`pick` then keeps, from those notes alone, every record that is not a well-formed OffsetCommit
(the general reader decodes or quarantines it) and the commits of the topic partitions asked for (by hash; the
caller adds those a producer's batch commits to, :meth:`Indexed.producer_hashes`), and reads only those again. The
walk does not depend on what is asked, so it can run before anyone asks (txnlog.engine.tasks: while the data
partitions are decoded). :func:`scan_consumer_offsets` returns every record's key and
value bytes, for :func:`txnlog.kafka.consumer_offsets.decode_records`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from txnlog.kafka import errors
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from txnlog.kafka.consumer_offsets_commits import (
    OK,
    WIDTH,
    check_commit,
    commit_columns,
    keep_commit,
    read_commit,
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


#: The bits of a hash that index :func:`pick`'s table of the hashes kept.
_TABLE_BITS = 16


@jit(inline=True)
def _has(keys, table, h):
    """Whether the sorted ``keys`` hold ``h``; ``table`` marks their low bits, so most hashes not kept are told by
    one load."""
    if not table[h & np.uint64((1 << _TABLE_BITS) - 1)]:
        return False
    i = np.searchsorted(keys, h)
    return i < keys.size and keys[i] == h


@jit()
def _index(buf, extra, src, starts, ends, counts, base_offset):
    """Every record of every batch framed and checked (as an OffsetCommit by
    :func:`~txnlog.kafka.consumer_offsets_commits.check_commit`), nothing kept: per record walked its position, its
    topic-partition hash (:func:`~txnlog.kafka.consumer_offsets_commits.tp_hash`; 0 where not a well-formed
    OffsetCommit) and whether it is one; per batch the records walked; and (batch, offset, code, arg1, arg2) per
    broken batch. What to keep is decided afterwards, from these alone (:func:`_pick`)."""
    total = 0
    for b in range(starts.size):
        total += max(counts[b], 0)
    pos = np.empty(total, np.int64)
    hashes = np.empty(total, np.uint64)
    good = np.empty(total, np.bool_)
    walked = np.zeros(starts.size, np.int64)
    scratch = np.zeros((1, WIDTH), np.int64)  # check_commit writes nothing
    quar = np.empty((starts.size, 5), np.int64)
    n = 0
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
            frame, rec_end, _ts, offset_delta, key_start, key_len, value_start, value_len, _h, _hc = read_record(
                data, p, end
            )
            if frame != RECORD_OK:
                quar[nq] = (b, base_offset[b] + offset_delta if frame == RECORD_BROKEN_AT_OFFSET else -1, _BROKEN, 0, 0)
                nq += 1
                broken = True
                break
            pos[n] = p
            ok, h = False, np.uint64(0)
            if key_len >= 0:
                value_end = value_start + max(value_len, 0)
                ok, topic_start, topic_len, partition = check_commit(
                    data, key_start, key_start + key_len, data, value_start, value_end, value_len >= 0, scratch
                )
                if ok:
                    h = tp_hash(data, topic_start, topic_len, partition)
            good[n] = ok
            hashes[n] = h
            n += 1
            done += 1
            p = rec_end
        walked[b] = done
        if not broken and p != end:
            quar[nq] = (b, -1, _TRAILING, end - p, 0)
            nq += 1
    return pos[:n], hashes[:n], good[:n], walked, quar[:nq]


@jit()
def _pick(buf, extra, src, ends, base_offset, base_ts, max_ts, log_append_time, pos, hashes, good, walked, keys,
          table, keep_all):  # fmt: skip
    """A row for each record :func:`_index` walked that is kept: every record that is not a well-formed
    OffsetCommit, and each one that is whose hash the sorted ``keys`` hold (``table``: :func:`_has`; every one
    where ``keep_all``), read again at its position. Per row its frame (batch, offset, timestamp, key start/len,
    value start/len) and its commit's row (``OK`` 1 where read;
    :func:`~txnlog.kafka.consumer_offsets_commits.read_commit`, then
    :func:`~txnlog.kafka.consumer_offsets_commits.keep_commit`), the strings copied to one buffer."""
    # room for every record, the strings of every record: only the pages of the rows kept are ever written
    recs = np.empty((pos.size, 7), np.int64)
    commits = np.empty((pos.size, WIDTH), np.int64)
    strings = np.empty(buf.size + extra.size, np.uint8)
    used = 0
    row = np.zeros((1, WIDTH), np.int64)  # read_commit's row of the record at hand
    nr = 0
    j = 0
    for b in range(walked.size):
        data = buf if src[b] == 0 else extra
        for _ in range(walked[b]):
            if keep_all or not good[j] or _has(keys, table, hashes[j]):
                _f, _e, ts_delta, offset_delta, key_start, key_len, value_start, value_len, _h, _hc = read_record(
                    data, pos[j], ends[b]
                )
                recs[nr] = (
                    b,
                    base_offset[b] + offset_delta,
                    max_ts[b] if log_append_time[b] else base_ts[b] + ts_delta,
                    key_start,
                    key_len,
                    value_start,
                    value_len,
                )
                if good[j]:
                    value_end = value_start + max(value_len, 0)
                    read_commit(
                        data, key_start, key_start + key_len, data, value_start, value_end, value_len >= 0, row, 0
                    )
                    used = keep_commit(data, row, commits, nr, strings, used)
                else:
                    commits[nr, OK] = 0
                nr += 1
            j += 1
    if nr < pos.size:  # the rows kept only, not the room for every record
        recs, commits = recs[:nr].copy(), commits[:nr].copy()
    return recs, commits, strings[:used].copy()


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
        buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
    )
    return records, markers, quarantine


def scan_commits(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[pa.Table, pa.Table, list[QuarantineEntry], np.ndarray, dict[str, pa.Array]]:
    """:func:`scan_consumer_offsets` with the well-formed OffsetCommit records already read: (records, markers,
    quarantine, the mask of those records, their columns by
    :data:`~txnlog.kafka.consumer_offsets.DECODED_SCHEMA` name)."""
    walked = walk_commits(buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes)
    records, ok, columns = walked.records()
    return records, walked.markers, walked.quarantine, ok, columns


@dataclass(frozen=True)
class Scanned:
    """One segment's batches checked and decompressed (:func:`scan_batches`), its records not walked yet. It points
    into the segment's bytes: use it while they are mapped."""

    arr: np.ndarray  # the segment
    extra: np.ndarray  # its decompressed batches
    walk: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    # per data batch: src, starts, ends, counts, base offset/timestamp, max timestamp, log append time (:func:`_index`'s
    # and :func:`_pick`'s arguments after the two buffers)
    batches: dict[str, np.ndarray]  # per data batch: src (0 its bytes in arr, 1 in extra), position, batch_length
    # and producer columns
    markers: pa.Table
    quarantine: list[QuarantineEntry]
    file: str


@dataclass(frozen=True)
class Indexed:
    """One segment's records walked and checked (:func:`index_scanned`), none kept yet: per record its position,
    its topic-partition hash and whether it is a well-formed OffsetCommit. It holds no reference to the segment's
    bytes (:func:`pick` is given them again), so what to keep can be decided long after the walk."""

    size: int  # the segment's bytes
    extra: np.ndarray  # its decompressed batches
    walk: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    batches: dict[str, np.ndarray]  # as Scanned's
    markers: pa.Table
    quarantine: list[QuarantineEntry]  # the scan's and the walk's, by position
    pos: np.ndarray  # per record walked: its position (in the segment, or in ``extra`` by its batch's src)
    hashes: np.ndarray  # its topic-partition hash (uint64; 0 where not a well-formed OffsetCommit)
    good: np.ndarray  # a well-formed OffsetCommit
    walked: np.ndarray  # per data batch: its records walked (all of them but where the batch is broken)

    def producer_hashes(self) -> np.ndarray:
        """The topic-partition hashes of the OffsetCommit records in a producer's batches (transactional offset
        commits): the keys whose every record a replay needs."""
        of_producer = np.repeat(self.batches["producer_id"] != NO_PRODUCER_ID, self.walked)
        return self.hashes[self.good & of_producer]


@dataclass(frozen=True)
class Walked:
    """One segment walked (:func:`walk_commits`): every record framed and checked, a row per record kept (every
    one that is not a well-formed OffsetCommit, and the commits asked for) with its commit read and its strings
    copied (:func:`_pick`). :meth:`records` reads the bytes of the records that are not commits from the segment:
    call it while they are mapped; the rest no longer points into them."""

    arr: np.ndarray  # the segment
    extra: np.ndarray  # its decompressed batches
    recs: np.ndarray  # per row: batch, offset, timestamp, key start/len, value start/len (``_pick``)
    commits: np.ndarray  # per row: read_commit's row, OK 1 where a well-formed OffsetCommit, strings in ``strings``
    strings: np.ndarray  # the kept commits' group, topic and metadata bytes
    batches: dict[str, np.ndarray]  # as Scanned's; a row's batch is its ``recs`` column 0
    markers: pa.Table
    quarantine: list[QuarantineEntry]

    @property
    def ok(self) -> np.ndarray:
        """Per row: a well-formed OffsetCommit (its columns in ``commits``)."""
        return self.commits[:, OK] == 1

    def raw_records(self, rows: np.ndarray | None = None) -> pa.Table:
        """The records of ``rows`` (None: every row) with their key and value bytes (:data:`RECORDS_SCHEMA`),
        copied from the segment: for the general reader."""
        recs = self.recs if rows is None else self.recs[rows]
        batch = {name: column[recs[:, 0]] for name, column in self.batches.items()}
        src = batch["src"]
        key_valid, value_valid = recs[:, 4] >= 0, recs[:, 6] >= 0
        key_data, key_offsets = _gather_strings(
            self.arr, self.extra, src, recs[:, 3].copy(), np.where(key_valid, recs[:, 4], 0)
        )  # fmt: skip
        value_data, value_offsets = _gather_strings(
            self.arr, self.extra, src, recs[:, 5].copy(), np.where(value_valid, recs[:, 6], 0)
        )  # fmt: skip
        return pa.table(
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

    def records(self) -> tuple[pa.Table, np.ndarray, dict[str, pa.Array]]:
        """(records, mask of those read as OffsetCommits, their columns) as :func:`scan_commits` gives them: every
        row's key and value bytes (:meth:`raw_records`), the commits' columns built from the walk's rows."""
        ok = self.ok
        commits = self.commits if ok.all() else self.commits[ok]
        none = np.zeros(len(commits), np.int64)
        return self.raw_records(), ok, commit_columns(commits, self.strings, self.strings, none, none)


def scan_batches(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Scanned:
    """A segment's batches checked (CRC), its compressed ones decompressed, its markers read; its records left to
    :func:`walk_scanned`. Never raises on bad input, as :func:`scan_consumer_offsets`."""
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
    log_append = b["timestamp_type"][idx] == TimestampType.LOG_APPEND_TIME
    times = b["base_timestamp"][idx], b["max_timestamp"][idx]
    batches = {
        "src": src,
        "position": positions,
        "batch_length": lengths,
        "producer_id": b["producer_id"][idx],
        "producer_epoch": b["producer_epoch"][idx],
        "is_transactional": b["is_transactional"][idx],
    }
    walk = (src, starts, ends, counts, b["base_offset"][idx], *times, log_append)
    return Scanned(arr, extra, walk, batches, _markers(b), quarantine, file)


def index_scanned(scanned: Scanned) -> Indexed:
    """The records of a scanned segment walked and checked (:func:`_index`), none kept yet."""
    src, starts, ends, counts, base_offset = scanned.walk[:5]
    pos, hashes, good, walked, quar = _index(scanned.arr, scanned.extra, src, starts, ends, counts, base_offset)
    quarantine = list(scanned.quarantine)
    positions, lengths = scanned.batches["position"], scanned.batches["batch_length"]
    for batch, offset, code, a1, a2 in quar.tolist():
        text = _DETAILS[code].format(a1, a2)
        quarantine.append(
            QuarantineEntry(
                scanned.file,
                int(positions[batch]),
                int(lengths[batch]),
                errors.BAD_RECORD,
                f"offset {offset}: {text}" if offset >= 0 else text,
            )
        )
    quarantine.sort(key=lambda e: e.position)
    return Indexed(
        scanned.arr.size, scanned.extra, scanned.walk, scanned.batches, scanned.markers, quarantine, pos, hashes,
        good, walked,
    )  # fmt: skip


def pick(indexed: Indexed, arr: np.ndarray, keys: np.ndarray | None = None) -> Walked:
    """The rows kept of an indexed segment whose bytes are ``arr`` (:func:`_pick`): the records that are not
    well-formed OffsetCommits and the commits whose topic-partition hash the sorted uint64 ``keys`` hold (None:
    every commit)."""
    if arr.size != indexed.size:
        raise ValueError(f"the segment's bytes changed since it was indexed: {arr.size} bytes, {indexed.size} then")
    keys_ = np.zeros(0, np.uint64) if keys is None else np.ascontiguousarray(keys, np.uint64)
    table = np.zeros(1 << _TABLE_BITS, np.bool_)
    table[keys_ & np.uint64((1 << _TABLE_BITS) - 1)] = True
    src, _starts, ends, _counts, base_offset, base_ts, max_ts, log_append = indexed.walk
    recs, commits, strings = _pick(
        arr, indexed.extra, src, ends, base_offset, base_ts, max_ts, log_append, indexed.pos, indexed.hashes,
        indexed.good, indexed.walked, keys_, table, keys is None,
    )  # fmt: skip
    return Walked(arr, indexed.extra, recs, commits, strings, indexed.batches, indexed.markers, indexed.quarantine)


def walk_scanned(scanned: Scanned, keys: np.ndarray | None = None) -> Walked:
    """The records of a scanned segment walked (:func:`index_scanned`) and the rows kept (:func:`pick`): every
    record checked, and kept the ones that are not well-formed OffsetCommits and the commits whose topic-partition
    hash the sorted uint64 ``keys`` hold (None: every commit)."""
    return pick(index_scanned(scanned), scanned.arr, keys)


def walk_commits(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Walked:
    """A segment scanned and walked (:func:`scan_batches`, :func:`walk_scanned`), every record kept. Never raises
    on bad input, as :func:`scan_consumer_offsets`."""
    scanned = scan_batches(buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes)
    return walk_scanned(scanned)


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
