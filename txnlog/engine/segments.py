"""Decoding one Kafka log file in this process: a segment (or a piece of one) into its summary rows and
fragments, a producer snapshot into its entries, unreadable bytes into quarantine rows.

These are the kernels the segments Data Source's readers call in Spark's tasks (txnlog.engine.spark.sources), and the
driver placement calls through the same readers (txnlog.engine.spark.placement). Only summaries leave: one ``segment``
row per segment (txnlog.model.rows), per producer run and marker a fragment (txnlog.broker.reconstruct) — merged into
the partition's transactions right here when the task holds the whole partition (txnlog.rules.transactions), else
yielded, or staged as files for a split partition's merge; of a partition of one replica, a big segment (or
piece) finishes the transactions between its producers' markers itself and only its edges go on so
(:class:`Edges`) — and the snapshot entries. Batch headers never
leave the process that read them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import pyarrow as pa

from txnlog.broker.fragments import SUMMARY_FRAGMENT_COLUMNS, segment_fragments
from txnlog.broker.reconstruct import col
from txnlog.engine.plan import Piece
from txnlog.engine.segment_rows import SegmentRows
from txnlog.engine.staging import finished_file_name, stage_name, staged_transactions, write_raw
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.producer_snapshot import decode_producer_snapshot
from txnlog.kafka.record_batch import (
    empty_batches,
    mapped_file,
    mapped_pages,
    scan_segment,
    scan_segment_piece,
)
from txnlog.model.rows import (
    KIND_QUARANTINE,
    SEGMENT_SUMMARY_SCHEMA,
    batch_of,
    fragment_kinds,
)
from txnlog.rules.damage import region_offsets
from txnlog.rules.transactions import Checkpoints, PartitionTransactions, piece_edges
from txnlog.sources import splits as S
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile


def read_file_bytes(path: str) -> np.ndarray:
    """The whole file as a uint8 array (local: one read; s3a://, hdfs://, ... through txnlog.sources.storage)."""

    if storage.is_remote(path):
        return np.frombuffer(storage.read_bytes(path), dtype=np.uint8)
    return np.fromfile(storage.local_path(path), dtype=np.uint8)


class Limit(TypedDict, total=False):
    """A scan's decompression limit as keyword arguments (none: the scan's default)."""

    max_decompressed_bytes: int


def limit_kwargs(max_decompressed_bytes: int | None) -> Limit:
    """``max_decompressed_bytes=`` for a scan, or nothing (the scan's default)."""
    return {} if max_decompressed_bytes is None else {"max_decompressed_bytes": max_decompressed_bytes}


def scan_log_file(path: str, check_crc: bool, max_decompressed_bytes: int | None = None) -> Any:
    """``scan_segment`` of a ``.log`` file (a ``txnlog.kafka.record_batch.SegmentScan``), its bytes as
    :func:`log_bytes` gives them; a local file's mapped pages given back a window at a time as the walk
    passes them."""

    with log_bytes(path) as (buf, release):
        return scan_segment(
            buf, file=path, check_crc=check_crc, release=release, **limit_kwargs(max_decompressed_bytes)
        )


@contextmanager
def log_bytes(path: str) -> Iterator[tuple[np.ndarray, Callable[[int], None] | None]]:
    """A ``.log`` file's bytes, for a scan, and for a local file what gives back the mapped pages before a
    position (``txnlog.kafka.record_batch.mapped_pages``; None for a remote one).

    Local files are memory-mapped, as ``scan_segment_file`` does: the walk reads the page cache
    directly instead of copying every segment into a fresh buffer first (up to 2.9 s/GiB the first
    time a worker touches that memory; RESULTS.md E2). The scans copy what they return, so nothing
    keeps the mapping. Remote URIs are read whole through pyarrow.fs (read_file_bytes). A file that
    another process truncates *while* it is mapped makes this process fault (SIGBUS) instead of
    reading fewer bytes: point txnlog at copies of a live broker's log dirs, as the README does.
    """

    if storage.is_remote(path):
        yield read_file_bytes(path), None
        return
    with mapped_pages(storage.local_path(path)) as (buf, release):
        yield buf, release


def quarantine_batch(
    schema: pa.Schema,
    file: LogFile,
    entries: list[Any],
    piece: int | None = None,
    batches: dict[str, np.ndarray] | None = None,
) -> pa.RecordBatch:
    """Rows of kind ``quarantine`` from decoder QuarantineEntry values (``piece``: of that piece of the file).
    With the file's valid ``batches``, ``first_offset``/``last_offset`` say which offsets each region may
    hold (txnlog.rules.damage.region_offsets)."""
    n = len(entries)
    bounds: dict[str, Any] = {}
    if batches is not None:
        first, last = region_offsets(
            batches["position"],
            batches["base_offset"],
            batches["last_offset"],
            np.array([e.position for e in entries], np.int64),
            np.array([e.length for e in entries], np.int64),
        )
        bounds = {"first_offset": first, "last_offset": last}
    return batch_of(
        schema,
        n,
        {
            "kind": KIND_QUARANTINE,
            "broker": file.broker,
            "topic": file.topic,
            "partition": np.full(n, file.partition, np.int32),
            "file": pa.array([e.file or file.path for e in entries], pa.string()),
            "file_offset": np.full(n, file.base_offset, np.int64),
            "position": pa.array([e.position for e in entries], pa.int64()),
            "length": pa.array([e.length for e in entries], pa.int64()),
            "reason": pa.array([e.reason for e in entries], pa.string()),
            "detail": pa.array([getattr(e, "detail", "") for e in entries], pa.string()),
            "piece": None if piece is None else pa.array([piece] * n, pa.int32()),
            **bounds,
        },
    )


@dataclass(frozen=True, slots=True)
class Edges:
    """A file of a partition of one replica that finishes its own inner transactions and hands on only its edges
    (txnlog.rules.transactions.piece_edges) to the partition's merge: a segment (or piece) of a partition read in
    several tasks (txnlog.sources.splits), whose edges leave the task, or a big segment of a partition read whole in one
    task (txnlog.engine.settings.EDGE_SEGMENT_BYTES), whose edges go to the task's merge
    (txnlog.rules.transactions.PartitionTransactions): a segment boundary is just another cut, and the merge holds
    a few fragments per producer and segment instead of the whole segment's. Only for a partition of one replica:
    a transaction's row merges every replica's view of it (txnlog.broker.reconstruct.merge_replicas).

    ``snapshot_starts``: (producer ids, ``currentTxnFirstOffset``) of every open transaction in the replica's
    producer snapshots (:func:`snapshot_starts`; None: unknown, every fragment stays at the edge);
    ``checkpoints``: the partition's log-dir checkpoints (which finished transactions the verdicts need);
    ``stage``: where the ``transactions`` table's rows are staged (None: every finished transaction is yielded).
    """

    snapshot_starts: tuple[np.ndarray, np.ndarray] | None
    checkpoints: Checkpoints
    stage: str | None


def snapshot_starts(paths: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(producer ids, first offsets) of the open transactions of every producer snapshot in ``paths``; those
    of a file that does not decode are none (its entries are ignored downstream too: quarantined); None when
    a file cannot be read at all."""

    pids, firsts = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for path in paths:
        try:
            buf = read_file_bytes(path)
        except OSError:
            return None
        try:
            entries = decode_producer_snapshot(buf, file=path).entries
        except DecodeError:
            continue
        first = np.asarray(entries["current_txn_first_offset"], np.int64)
        opened = first >= 0
        pids.append(np.asarray(entries["producer_id"], np.int64)[opened])
        firsts.append(first[opened])
    return np.concatenate(pids), np.concatenate(firsts)


def summarize_segment(
    file: LogFile,
    check_crc: bool,
    segments: SegmentRows,
    merge: PartitionTransactions | None = None,
    scan: Any = None,
    max_decompressed_bytes: int | None = None,
    *,
    piece: int | None = None,
    next_piece: int | None = None,
    next_batch: tuple[int, int] | None = None,
    fragments_to: str | None = None,
    edges: Edges | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode one segment in this process: its ``segment`` row goes to ``segments``, its fragments to
    ``merge`` when given (which then yields the partition's transactions), else to a staged file in the
    directory ``fragments_to`` when given (read back by the partition's merge, txnlog.engine.spark.collect: rows
    that never pass through the JVM), else they are yielded as rows; its quarantine rows are yielded.
    With ``edges`` (a file of a partition of one replica), only the fragments at its edges go on so, to
    ``merge`` too: the transactions between them are finished here (:func:`finished_transactions`). The
    ``segment`` bounds ``merge`` gets are the whole file's either way (its replica's log start and end).
    ``scan``: the segment already walked (a live range's bytes,
    txnlog.engine.spark.live_batches; a piece of it, :func:`summarize_piece`: every row then says ``piece``),
    else ``file.path`` is read."""

    if scan is None:
        scan = scan_log_file(file.path, check_crc, max_decompressed_bytes)
    b = scan.batches
    frags = segment_fragments(b)
    if edges is not None:
        at_edge, inner = piece_edges(frags, edges.snapshot_starts)
        if inner.any():
            yield from finished_transactions(file, {k: v[inner] for k, v in frags.items()}, edges, piece)
            frags = {k: v[at_edge] for k, v in frags.items()}
    n = len(frags["kind"])
    if merge is not None:
        merge.add_fragments(file.broker, file.topic, file.partition, {k: col(v) for k, v in frags.items()})
        merge.add_segment(
            file.broker,
            file.topic,
            file.partition,
            file.base_offset,
            int(b["last_offset"].max()) if len(b["base_offset"]) else None,
        )
    elif n:
        batch = batch_of(
            SEGMENT_SUMMARY_SCHEMA,
            n,
            {
                "kind": fragment_kinds(frags["kind"]),
                "broker": file.broker,
                "topic": file.topic,
                "partition": file.partition,
                "file": file.path,
                "file_offset": file.base_offset,
                **{k: frags[k] for k in SUMMARY_FRAGMENT_COLUMNS},
                "control_type": pa.array(frags["control_type"].astype(np.int32)).cast(pa.int32()),
                "piece": None if piece is None else np.full(n, piece, np.int32),
            },
        )
        if fragments_to is None:
            yield batch
        else:
            name = stage_name([file.broker, file.path, str(piece)])
            write_raw(pa.Table.from_batches([batch]), fragments_to, name, columns=None)
    segments.add(file, b, scan.legacy_entries, piece=piece, next_piece=next_piece)
    if scan.quarantine:
        bounds = b
        if next_batch is not None:  # a piece's walk stopped at a valid batch of the next piece: a bound too
            position, base = next_batch
            bounds = {
                "position": np.append(b["position"], position),
                "base_offset": np.append(b["base_offset"], base),
                "last_offset": np.append(b["last_offset"], base),
            }
        yield quarantine_batch(SEGMENT_SUMMARY_SCHEMA, file, list(scan.quarantine), piece, bounds)


def finished_transactions(
    file: LogFile, frags: dict[str, np.ndarray], edges: Edges, piece: int | None
) -> Iterator[pa.RecordBatch]:
    """The transactions of a file (or piece) of a partition of one replica between its producers' first and last
    markers (``frags``: those fragments, txnlog.rules.transactions.piece_edges), merged by the rule every read uses
    (txnlog.rules.transactions.PartitionTransactions): staged under ``edges.stage`` and those the verdicts need
    yielded (else all yielded), as ``transaction`` rows that say which file and piece finished them (the
    stitch drops a dead piece's, txnlog.engine.spark.stitch)."""

    acc = PartitionTransactions()
    acc.add_fragments(file.broker, file.topic, file.partition, {k: col(v) for k, v in frags.items()})
    acc.add_segment(file.broker, file.topic, file.partition, file.base_offset, int(frags["last_offset"].max()))
    name = finished_file_name(file.broker, file.path, piece)
    for batch in staged_transactions(
        acc, edges.checkpoints, SEGMENT_SUMMARY_SCHEMA, stage=edges.stage, stage_file=name
    ):
        n = batch.num_rows
        for column, values in (
            ("broker", pa.array([file.broker] * n, pa.string())),
            ("file", pa.array([file.path] * n, pa.string())),
            ("piece", pa.array([piece] * n, pa.int32())),
        ):
            i = SEGMENT_SUMMARY_SCHEMA.get_field_index(column)
            batch = batch.set_column(i, SEGMENT_SUMMARY_SCHEMA.field(i), values)
        yield batch


def summarize_piece(
    file: LogFile,
    piece: Piece,
    check_crc: bool,
    segments: SegmentRows,
    max_decompressed_bytes: int | None = None,
    fragments_to: str | None = None,
    edges: Edges | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`summarize_segment` of one piece of a split segment (txnlog.sources.splits): the file is mapped whole,
    every split point checked, and the piece walked from its start to the first valid split point its
    chain reaches. A piece whose split point fails the checks reads nothing: its ``piece`` row says so
    (``next_piece`` null) and the piece before it walks on through its bytes."""

    # only this piece's own split point and those after it matter here (where it starts, where it may stop)
    first = max(piece.index - 1, 0)
    tail = slice(first, None)
    points = S.SplitPoints(piece.positions[tail], piece.offsets[tail], piece.previous[tail])
    with mapped_file(storage.local_path(file.path)) as buf:
        ok = S.valid_points(buf, points, check_crc)
        if piece.index > 0 and not ok[0]:
            segments.add(file, empty_batches(), 0, piece=piece.index, next_piece=None)
            return
        start = 0 if piece.index == 0 else int(piece.positions[piece.index - 1])
        stops = points.positions[ok]
        scan = scan_segment_piece(
            buf,
            start,
            stops[stops > start],
            file=file.path,
            check_crc=check_crc,
            **limit_kwargs(max_decompressed_bytes),
        )
        # where the walk stopped is a valid batch (a checked split point): its base offset bounds a damaged
        # region just before it, as the whole read's next batch does
        stopped = int(scan.stopped_at)
        next_batch = None
        if 0 <= stopped and stopped + 8 <= len(buf) and stopped in set(stops.tolist()):
            next_batch = (stopped, int.from_bytes(bytes(buf[stopped : stopped + 8]), "big", signed=True))
    yield from summarize_segment(
        file,
        check_crc,
        segments,
        None,
        scan,
        piece=piece.index,
        next_piece=S.piece_of_stop(piece.positions, scan.stopped_at),
        next_batch=next_batch,
        fragments_to=fragments_to,
        edges=edges,
    )
