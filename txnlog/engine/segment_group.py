"""A task's small files decoded together: its whole segments into its merge (below :data:`SMALL_SEGMENT_BYTES`)
and its producer snapshots into the merge wait in a :class:`SegmentGroup` and are read into one buffer, walked by
one compiled call (txnlog.kafka.segment_files, txnlog.kafka.producer_snapshot.decode_producer_snapshots) and
summarised as one, so that what a file costs in Python is its read, not a walk's worth of calls
(benchmarks/RESULTS.md §2, "Many small segments decoded together"). The rows are those of
txnlog.engine.segments.summarize_segment and :func:`summarize_snapshot` of each file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from txnlog.broker.fragments import files_fragments
from txnlog.broker.reconstruct import col
from txnlog.engine.segment_rows import SegmentRows, file_columns
from txnlog.engine.segments import limit_kwargs, quarantine_batch, read_file_bytes
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.producer_snapshot import decode_producer_snapshots
from txnlog.kafka.segment_files import scan_segments
from txnlog.model.rows import KIND_PRODUCER, KIND_SNAPSHOT, SEGMENT_SUMMARY_SCHEMA, batch_of
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile

#: A whole segment below this size that goes to its task's merge waits for others to be decoded with them
#: (:func:`summarize_segments`): decoded alone, a file's Python costs about what a few hundred KiB of walking does
#: (benchmarks/RESULTS.md §2, "Many small segments: the cost per file"); a larger one is mapped and walked a
#: window at a time instead of read whole into the group's buffer.
SMALL_SEGMENT_BYTES = 4 << 20
#: The most bytes of small segments that wait (:data:`SMALL_SEGMENT_BYTES`).
SMALL_BATCH_BYTES = 32 << 20


def read_logs(files: list[LogFile]) -> tuple[np.ndarray, np.ndarray, list[LogFile], list[tuple[LogFile, OSError]]]:
    """The bytes of ``files`` one after another in one buffer: (buffer, bounds, the files read, those that could
    not be read with why). File k of those read is ``buffer[bounds[k]:bounds[k + 1]]``, as it is when read (its
    size then, not the listing's)."""
    buf = np.empty(sum(f.size for f in files), np.uint8)
    bounds, read, failed, end = [0], [], [], 0
    for file in files:
        try:
            if storage.is_remote(file.path):
                data = read_file_bytes(file.path)
                buf = _room(buf, end, data.size)
                buf[end : end + data.size] = data
                end += data.size
            else:  # descriptors, not file objects: a file's Python is a few calls (each releases the GIL)
                fd = os.open(storage.local_path(file.path), os.O_RDONLY)
                try:
                    size = os.fstat(fd).st_size
                    buf = _room(buf, end, size)
                    view, got = buf.data[end : end + size], 0
                    while got < size:  # a file that shrinks meanwhile ends where its bytes do
                        n = os.readv(fd, [view[got:]])
                        if not n:
                            break
                        got += n
                    end += got
                finally:
                    os.close(fd)
        except OSError as e:  # vanished/unreadable file: a quarantine row, never a crash
            failed.append((file, e))
            continue
        read.append(file)
        bounds.append(end)
    return buf, np.array(bounds, np.int64), read, failed


def _room(buf: np.ndarray, end: int, more: int) -> np.ndarray:
    """``buf``, or a larger copy of its first ``end`` bytes, with room for ``more`` bytes after ``end``."""
    if end + more <= buf.size:
        return buf
    grown = np.empty(max(2 * buf.size, end + more), np.uint8)
    grown[:end] = buf[:end]
    return grown


def summarize_segments(
    files: list[LogFile],
    check_crc: bool,
    segments: SegmentRows,
    merge: PartitionTransactions,
    max_decompressed_bytes: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`summarize_segment` of whole segments into ``merge``, decoded as one: their bytes read into one
    buffer and walked by one compiled call into one set of batch columns (txnlog.kafka.segment_files), collapsed
    into fragments and producer rows by one call each (txnlog.broker.reconstruct.files_fragments,
    txnlog.broker.producer_state.files_producers), their ``segment`` rows reduced by file: what costs Python per
    file is its read. The same rows; quarantine rows (a file that cannot be read: ``unreadable_file``; a file's
    damage, its own) are yielded."""

    buf, bounds, read, failed = read_logs(files)
    for file, e in failed:
        entry = QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e))
        yield quarantine_batch(SEGMENT_SUMMARY_SCHEMA, file, [entry])
    if not read:
        return
    scan = scan_segments(
        buf, bounds, [f.path for f in read], check_crc=check_crc, **limit_kwargs(max_decompressed_bytes)
    )
    del buf
    b, counts = scan.batches, scan.counts
    frags, of = files_fragments(b, np.repeat(np.arange(len(read)), counts))
    starts = np.cumsum(counts) - counts
    lasts = np.zeros(len(read), np.int64)
    has = counts > 0
    if has.any():
        lasts[has] = np.maximum.reduceat(b["last_offset"], starts[has])
    # the whole group into the merge in one call of each kind, each row naming its file's replica
    replica = merge.replicas((f.broker, f.topic, int(f.partition)) for f in read)
    merge.add_fragment_rows(replica[of], {k: col(v) for k, v in frags.items()})
    merge.add_segments(replica, np.array([f.base_offset for f in read], np.int64), lasts, has)
    segments.add_files(read, b, counts, scan.legacy_entries.tolist())
    for k, file in enumerate(read):
        if scan.quarantine[k]:
            rows = slice(int(starts[k]), int(starts[k] + counts[k]))
            own = {name: b[name][rows] for name in ("position", "base_offset", "last_offset")}
            yield quarantine_batch(SEGMENT_SUMMARY_SCHEMA, file, scan.quarantine[k], None, own)


@dataclass
class DecodedSnapshots:
    """Producer snapshot files decoded as one: the entries of those whose CRC holds, ``of`` the index in ``read``
    of each entry's file, ``offsets`` its file's base offset; ``quarantine`` the rows of the files left out."""

    read: list[LogFile]
    of: np.ndarray
    entries: dict[str, np.ndarray]
    offsets: np.ndarray
    quarantine: list[pa.RecordBatch]


def decode_snapshots(files: list[LogFile]) -> DecodedSnapshots:
    """``files``, producer snapshots, read and decoded in one call
    (txnlog.kafka.producer_snapshot.decode_producer_snapshots); an unreadable or undecodable file, or one whose
    CRC does not hold, is a quarantine row and none of its entries."""

    buf, bounds, read, failed = read_logs(files)
    quarantine = [
        quarantine_batch(SEGMENT_SUMMARY_SCHEMA, f, [QuarantineEntry(f.path, 0, f.size, UNREADABLE_FILE, str(e))])
        for f, e in failed
    ]
    if not read:
        empty = np.zeros(0, np.int64)
        return DecodedSnapshots(read, empty, {}, empty, quarantine)
    snaps = decode_producer_snapshots(buf, bounds, [f.path for f in read])
    sizes = np.diff(bounds)
    for k, (file, error) in enumerate(zip(read, snaps.errors, strict=True)):
        if error is not None:
            why = QuarantineEntry(
                file.path, int(error.position or 0), int(sizes[k]), error.reason or "bad_snapshot", str(error)
            )
        elif not snaps.crc_valid[k]:
            why = QuarantineEntry(file.path, 0, int(sizes[k]), "snapshot_crc_mismatch", "entries ignored")
        else:
            continue
        quarantine.append(quarantine_batch(SEGMENT_SUMMARY_SCHEMA, file, [why]))
    owner = np.repeat(np.arange(len(read)), snaps.counts)
    keep = snaps.crc_valid[owner]
    of = owner[keep]
    entries = {name: values[keep] for name, values in snaps.entries.items()}
    offsets = np.array([f.base_offset for f in read], np.int64)[of]
    return DecodedSnapshots(read, of, entries, offsets, quarantine)


def _snapshot_rows(snaps: DecodedSnapshots, kind: str) -> pa.RecordBatch:
    """The entries as rows of ``kind``: ``snapshot`` rows carry their last offset, ``producer`` rows (for the
    producer_state table) the snapshot they came from."""
    e = snaps.entries
    by_kind = {"last_offset": e["last_offset"]} if kind == KIND_SNAPSHOT else {"snapshot_offset": snaps.offsets}
    return batch_of(
        SEGMENT_SUMMARY_SCHEMA,
        int(snaps.of.size),
        {
            "kind": kind,
            **file_columns(snaps.read, snaps.of),
            **by_kind,
            "producer_id": e["producer_id"],
            "producer_epoch": e["producer_epoch"].astype(np.int32),
            "first_offset": e["current_txn_first_offset"],
            "last_sequence": e["last_sequence"],
            "last_timestamp": e["timestamp"],
            "coordinator_epoch": e["coordinator_epoch"],
        },
    )


def _merge_snapshots(snaps: DecodedSnapshots, merge: PartitionTransactions) -> None:
    """The entries into ``merge``, in one call."""
    e = snaps.entries
    columns = {
        "file_offset": snaps.offsets,
        "producer_id": e["producer_id"],
        "producer_epoch": e["producer_epoch"].astype(np.int32),
        "first_offset": e["current_txn_first_offset"],
        "last_offset": e["last_offset"],
        "last_timestamp": e["timestamp"],
        "coordinator_epoch": e["coordinator_epoch"],
    }
    # one call for the group; a file with no entries names no replica, as add_snapshot of none does
    read = snaps.read
    holding = np.unique(snaps.of)
    replica = np.zeros(len(read), np.int32)
    replica[holding] = merge.replicas((read[k].broker, read[k].topic, int(read[k].partition)) for k in holding)
    merge.add_snapshot_rows(replica[snaps.of], {k: col(v) for k, v in columns.items()})


def summarize_snapshots(
    files: list[LogFile], segments: SegmentRows, merge: PartitionTransactions
) -> Iterator[pa.RecordBatch]:
    """Producer snapshots into ``merge`` with their ``producer`` rows to ``segments``, decoded as one
    (:func:`decode_snapshots`): one call into the merge, one batch of producer rows; quarantine rows
    (unreadable, undecodable, a bad CRC) are yielded."""

    snaps = decode_snapshots(files)
    yield from snaps.quarantine
    if not snaps.of.size:
        return
    _merge_snapshots(snaps, merge)
    # the entries leave as producer rows (snapshot_offset set) for the producer_state table, not as snapshot
    # rows: the merge took those, and a fragments merge downstream would take them again
    segments.built.append(_snapshot_rows(snaps, KIND_PRODUCER))


def summarize_snapshot(
    file: LogFile, merge: PartitionTransactions | None = None, rows: SegmentRows | None = None
) -> Iterator[pa.RecordBatch]:
    """A producer snapshot's entries as rows of kind ``snapshot``, or into ``merge`` (:func:`summarize_snapshots`
    of the one file; bad files → quarantine); with ``merge``, their ``producer`` rows go to ``rows`` when given,
    else are yielded."""

    if merge is None:
        snaps = decode_snapshots([file])
        yield from snaps.quarantine
        if snaps.of.size:
            yield _snapshot_rows(snaps, KIND_SNAPSHOT)
        return
    sink = SegmentRows() if rows is None else rows
    yield from summarize_snapshots([file], sink, merge)
    if rows is None:
        yield from sink.batches()


class SegmentGroup:
    """A task's whole segments into its merge, waiting to be decoded together (:func:`summarize_segments`): until
    :data:`SMALL_BATCH_BYTES` of them, a segment of :data:`SMALL_SEGMENT_BYTES` or more (decoded on its own), or
    the merge's end. Its producer snapshots into the merge wait with them (:func:`summarize_snapshots`)."""

    def __init__(self, check_crc: bool, max_decompressed_bytes: int | None) -> None:
        self.check_crc = check_crc
        self.max_decompressed_bytes = max_decompressed_bytes
        self.files: list[LogFile] = []
        self.snapshots: list[LogFile] = []
        self.bytes = 0

    def add(self, file: LogFile, segments: SegmentRows, merge: PartitionTransactions) -> Iterator[pa.RecordBatch]:
        """Adds ``file``, a segment or a producer snapshot; decodes what is due (the rows as :meth:`decode` yields
        them)."""
        if file.kind == "snapshot":
            self.snapshots.append(file)
            self.bytes += file.size
            if self.bytes >= SMALL_BATCH_BYTES:
                yield from self.decode(segments, merge)
            return
        if file.size >= SMALL_SEGMENT_BYTES:
            yield from self.decode(segments, merge)
        self.files.append(file)
        self.bytes += file.size
        if file.size >= SMALL_SEGMENT_BYTES or self.bytes >= SMALL_BATCH_BYTES:
            yield from self.decode(segments, merge)

    def decode(self, segments: SegmentRows, merge: PartitionTransactions | None) -> Iterator[pa.RecordBatch]:
        """Decodes the waiting files into ``merge``: their quarantine rows, each after the ``segment`` rows
        ``segments`` holds (rows keep file order)."""
        files, snapshots, self.files, self.snapshots, self.bytes = self.files, self.snapshots, [], [], 0
        if merge is None:
            return
        if files:
            for batch in summarize_segments(files, self.check_crc, segments, merge, self.max_decompressed_bytes):
                yield from segments.batches()
                yield batch
        if snapshots:
            for batch in summarize_snapshots(snapshots, segments, merge):
                yield from segments.batches()
                yield batch
