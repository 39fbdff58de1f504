"""Whole partitions' transactions as Arrow rows, where the bytes were decoded.

A partition's transactions need every fragment of every replica of it (``txnlog.broker.reconstruct``). When
one Spark task holds all of a partition's files (``txnlog_segments`` with ``transactions`` = true
groups them so), the task merges them itself with :class:`PartitionTransactions` and only finished
transaction rows leave it: no shuffle and no per-row JVM work over fragments. Inputs whose fragments
arrive spread over tasks (kafka-dump-log.sh output) are grouped by partition in Spark and merged by
:func:`transactions_of_summary`, the same code.

Rows have the segments source's schema (``SEGMENT_SUMMARY_SCHEMA``) with ``kind`` = ``transaction``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import reconstruct as R
from txnlog.model.rows import Checkpoint, batch_of
from txnlog.rules.finish import verdict_relevant

KIND_TRANSACTION = "transaction"

#: (broker, topic, partition) → (checkpointed log start, clean shutdown, checkpointed high watermark;
#: None where unknown): the log-dir checkpoints the merge needs (``txnlog.model.rows.Checkpoint``)
Checkpoints = Mapping[tuple[str, str, int], tuple[int | None, bool, int | None]]


def checkpoints_of(
    checkpoints: Iterable[Checkpoint],
) -> dict[tuple[str, str, int], tuple[int | None, bool, int | None]]:
    """The merge's view of the log dirs' checkpoints."""
    return {
        (c.broker, c.topic, int(c.partition)): (c.log_start_offset, bool(c.clean_shutdown), c.high_watermark)
        for c in checkpoints
    }


@dataclass
class _Parts:
    """Column pieces (values, validity) collected per file, concatenated once at the end."""

    values: dict[str, list[np.ndarray]]
    valid: dict[str, list[np.ndarray]]

    @classmethod
    def of(cls, names: tuple[str, ...]) -> _Parts:
        return cls({n: [] for n in names}, {n: [] for n in names})

    def add(self, columns: Mapping[str, R.Col]) -> None:
        for name, (values, valid) in columns.items():
            self.values[name].append(values)
            self.valid[name].append(valid)

    def cols(self, dtypes: Mapping[str, np.dtype]) -> dict[str, R.Col]:
        out = {}
        for name, dtype in dtypes.items():
            values, valid = self.values[name], self.valid[name]
            out[name] = (
                np.concatenate(values).astype(dtype, copy=False) if values else np.empty(0, dtype),
                np.concatenate(valid) if valid else np.empty(0, bool),
            )
        return out


_FRAGMENT_DTYPES: dict[str, np.dtype] = {"replica": np.dtype(np.int32), **R.FRAGMENT_COLUMNS}
_SNAPSHOT_DTYPES: dict[str, np.dtype] = {
    "replica": np.dtype(np.int32),
    "file_offset": np.dtype(np.int64),
    "producer_id": np.dtype(np.int64),
    "producer_epoch": np.dtype(np.int32),
    "first_offset": np.dtype(np.int64),
    "last_offset": np.dtype(np.int64),
    "last_timestamp": np.dtype(np.int64),
    "coordinator_epoch": np.dtype(np.int32),
}
_SEGMENT_DTYPES: dict[str, np.dtype] = {
    "replica": np.dtype(np.int32),
    "base": np.dtype(np.int64),
    "last": np.dtype(np.int64),
}


class PartitionTransactions:
    """Collects the fragments, snapshot entries and segment bounds of whole partitions, then emits
    their transactions (:meth:`batches`). Replicas are named by ``(broker, topic, partition)``."""

    def __init__(self) -> None:
        self.replica_ids: dict[tuple[str, str, int], int] = {}
        self.frags = _Parts.of(tuple(_FRAGMENT_DTYPES))
        self.snaps = _Parts.of(tuple(_SNAPSHOT_DTYPES))
        self.segments = _Parts.of(tuple(_SEGMENT_DTYPES))

    def _replica(self, broker: str, topic: str, partition: int) -> int:
        return self.replica_ids.setdefault((broker, topic, int(partition)), len(self.replica_ids))

    def replicas(self, keys: Iterable[tuple[str, str, int]]) -> np.ndarray:
        """The replica index of each (broker, topic, partition) of ``keys``, in order (each new one named)."""
        return np.array([self._replica(*key) for key in keys], np.int32)

    def add_fragments(self, broker: str, topic: str, partition: int, frags: Mapping[str, R.Col]) -> None:
        n = frags["kind"][0].size
        if n:
            self.add_fragment_rows(np.full(n, self._replica(broker, topic, partition), np.int32), frags)

    def add_fragment_rows(self, replica: np.ndarray, frags: Mapping[str, R.Col]) -> None:
        """Fragments of any replicas, ``replica`` (:meth:`replicas`) the replica of each: a group of files' in one
        call."""
        if replica.size:
            self.frags.add({"replica": R.col(replica), **frags})

    def add_segment(self, broker: str, topic: str, partition: int, base: int, last: int | None) -> None:
        self.add_segments(
            np.array([self._replica(broker, topic, partition)], np.int32),
            np.array([base], np.int64),
            np.array([last if last is not None else 0], np.int64),
            np.array([last is not None]),
        )

    def add_segments(
        self, replica: np.ndarray, base: np.ndarray, last: np.ndarray, has_last: np.ndarray | None = None
    ) -> None:
        """Segments of any replicas: ``replica`` (:meth:`replicas`), base offset and last offset of each (the last
        offset null where ``has_last`` is false: a segment with no batch)."""
        if replica.size:
            self.segments.add({"replica": R.col(replica), "base": R.col(base), "last": R.col(last, has_last)})

    def add_snapshot(self, broker: str, topic: str, partition: int, entries: Mapping[str, R.Col]) -> None:
        n = entries["producer_id"][0].size
        if n:
            self.add_snapshot_rows(np.full(n, self._replica(broker, topic, partition), np.int32), entries)

    def add_snapshot_rows(self, replica: np.ndarray, entries: Mapping[str, R.Col]) -> None:
        """Snapshot entries of any replicas, ``replica`` (:meth:`replicas`) the replica of each."""
        if replica.size:
            self.snaps.add({"replica": R.col(replica), **entries})

    def merged(self, checkpoints: Checkpoints, schema: pa.Schema) -> Merged | None:
        """The transactions of every partition added, as rows of ``schema`` (the segments source's), with the
        bound :meth:`Merged.verdict_relevant` applies; None when nothing was added."""
        if not self.replica_ids:
            return None
        # replicas ordered by (topic, partition, broker): index order is broker order within a partition
        names = sorted(self.replica_ids, key=lambda k: (k[1], k[2], k[0]))
        remap = np.empty(len(names), np.int32)
        for new, key in enumerate(names):
            remap[self.replica_ids[key]] = new
        partitions = sorted({(t, p) for _, t, p in names})
        tp_index = {tp: i for i, tp in enumerate(partitions)}
        tp = np.array([tp_index[(t, p)] for _, t, p in names], np.int32)
        ck = [checkpoints.get(k, (None, False, None)) for k in names]
        seg = self.segments.cols(_SEGMENT_DTYPES)
        replicas = R.replica_logs(
            tp,
            remap[seg["replica"][0]],
            seg["base"][0],
            seg["last"],
            R.col(np.array([c[0] or 0 for c in ck], np.int64), np.array([c[0] is not None for c in ck], bool)),
            np.array([c[1] for c in ck], bool),
        )
        frags = self.frags.cols(_FRAGMENT_DTYPES)
        frags["replica"] = (remap[frags["replica"][0]], frags["replica"][1])
        snaps = self.snaps.cols(_SNAPSHOT_DTYPES)
        snaps["replica"] = (remap[snaps["replica"][0]], snaps["replica"][1])
        merged, lists = R.merge_replicas(R.replica_transactions(frags, snaps, replicas), replicas)
        merged["snapshot_coordinator_epoch"] = snapshot_epoch_where_no_marker(
            merged["snapshot_coordinator_epoch"], merged["prev_coordinator_epoch"]
        )
        table = _arrow(merged, lists, partitions, [b for b, _, _ in names], schema)
        # a lower bound of each partition's high watermark: the smallest checkpointed one, else the log end
        hw = [c[2] if len(c) > 2 and c[2] is not None else R.I64_MAX for c in ck]
        bound = np.minimum(np.where(replicas.is_lead, replicas.log_end, R.I64_MAX), np.array(hw, np.int64))
        return Merged(table, _per_row_minimum(bound, tp, len(partitions), merged["tp"][0]), tuple(names))

    def batches(self, checkpoints: Checkpoints, schema: pa.Schema, max_rows: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """Every transaction of the partitions added (:meth:`merged`), ``max_rows`` rows per batch."""
        merged = self.merged(checkpoints, schema)
        if merged is not None:
            yield from merged.table.to_batches(max_chunksize=max_rows)


def _per_row_minimum(bound: np.ndarray, tp: np.ndarray, partitions: int, row_tp: np.ndarray) -> np.ndarray:
    """Each row's partition's smallest ``bound`` over its replicas (``tp``: each replica's partition)."""
    per_tp = np.full(partitions, R.I64_MAX, np.int64)
    np.minimum.at(per_tp, tp, bound)
    return per_tp[row_tp]


@dataclass(frozen=True)
class Merged:
    """The transactions :meth:`PartitionTransactions.merged` gives: ``table``, each row's lower bound of its
    partition's high watermark (``hw_bound``), the replicas merged (broker, topic, partition)."""

    table: pa.Table
    hw_bound: np.ndarray
    replicas: tuple[tuple[str, str, int], ...]

    def verdict_relevant(self) -> pa.Table:
        """The rows the verdicts and the LSO read (txnlog.rules.finish.verdict_relevant)."""
        return self.table.filter(verdict_relevant(self.table, self.hw_bound))


def snapshot_epoch_where_no_marker(snapshot_epoch: R.Col, prev_epoch: R.Col) -> R.Col:
    """A transaction's ``snapshot_coordinator_epoch``: its producer's entry in the chosen producer snapshot, only
    where no earlier marker of the producer gives a coordinator epoch (``prev_coordinator_epoch`` null). That is
    the only place it is read (the last coordinator epoch a ``WriteTxnMarkers`` is fenced with,
    ``ProducerAppendInfo.appendEndTxnMarker``: the previous marker's, else the snapshot's), and so it is a fact
    of the producer's first transaction on the partition only: a piece of a split segment finishes the
    transactions between its markers without knowing the snapshot (:func:`piece_edges`)."""
    values, valid = snapshot_epoch
    return values, valid & ~prev_epoch[1]


def piece_edges(
    frags: Mapping[str, np.ndarray], snapshot_starts: tuple[np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Which fragments of one file of a partition of one replica (a piece of a split segment, a whole segment of
    such a partition, or a big segment of a partition read whole in one task: ``txnlog.engine.segments.Edges``;
    ``txnlog.broker.reconstruct.segment_fragments``) its own task finishes into transactions, and which are its *edges*,
    merged with the other files' edges (or whole fragments) of the partition.

    Per producer, a transaction is a run of its fragments up to and including its next marker
    (``ProducerAppendInfo``), and what a transaction row says besides its own fragments is the marker before
    it (``prev_marker_*``). So the transactions whose first fragment follows the producer's first marker in
    the file and whose marker is its last marker there or before it need nothing from outside the file: they
    are the same rows a whole read gives. What the file cannot finish is its producer's *edges*: the fragments
    up to its first marker (they may continue a transaction that began before the file) and after its last
    marker (they may go on after it), plus that last marker (the previous marker of what follows). A producer
    snapshot's open transaction joins the transaction that holds its ``currentTxnFirstOffset``
    (``txnlog.broker.reconstruct.replica_transactions``): a producer with such a start (in any snapshot of the
    replica: ``snapshot_starts``, (producer ids, first offsets)) between its first and last marker in the file
    keeps every fragment at the edge; with ``snapshot_starts`` None (unknown) every producer does.

    Returns ``(edge, inner)``, masks over the rows: ``inner`` the rows from each finishing producer's first
    marker to its last (both included: the first is the previous marker of the first transaction finished
    here, and closes nothing there), ``edge`` every row outside them plus those two markers."""
    n = frags["kind"].size
    edge, inner = np.ones(n, bool), np.zeros(n, bool)
    if n == 0 or snapshot_starts is None:
        return edge, inner
    pid, offset = frags["producer_id"], frags["first_offset"]
    order = np.lexsort((offset, pid))
    sorted_pid = pid[order]
    marker = frags["kind"][order] == R.MARKER
    starts = R.group_starts(sorted_pid)
    positions = np.arange(n)
    first_marker = np.minimum.reduceat(np.where(marker, positions, n), starts)
    last_marker = np.maximum.reduceat(np.where(marker, positions, -1), starts)
    finishes = first_marker < last_marker  # two markers at least: something between them
    s_pid, s_first = (np.asarray(a, np.int64) for a in snapshot_starts)
    if s_pid.size and finishes.any():
        low = offset[order][np.minimum(first_marker, n - 1)]
        high = offset[order][np.maximum(last_marker, 0)]
        group_pid = sorted_pid[starts]
        s_order = np.lexsort((s_first, s_pid))
        s_pid, s_first = s_pid[s_order], s_first[s_order]
        for g in np.flatnonzero(finishes & np.isin(group_pid, s_pid)):
            lo, hi = np.searchsorted(s_pid, group_pid[g], "left"), np.searchsorted(s_pid, group_pid[g], "right")
            firsts = s_first[lo:hi]
            # a snapshot's start sorts before a marker at its offset (txnlog.broker.reconstruct: data first)
            if ((firsts > low[g]) & (firsts <= high[g])).any():
                finishes[g] = False
    group = np.cumsum(np.isin(positions, starts)) - 1
    inside = finishes[group] & (positions >= first_marker[group]) & (positions <= last_marker[group])
    at_edge = ~inside | (positions == first_marker[group]) | (positions == last_marker[group])
    inner[order] = inside
    edge[order] = at_edge
    return edge, inner


def _arrow(
    merged: Mapping[str, R.Col],
    lists: Mapping[str, tuple[np.ndarray, np.ndarray]],
    partitions: list[tuple[str, int]],
    brokers: list[str],
    schema: pa.Schema,
) -> pa.Table:
    n = merged["tp"][0].size
    tp = merged["tp"][0]
    topics = pa.array([t for t, _ in partitions], pa.string())
    broker_names = pa.array(brokers, pa.string())
    columns: dict[str, pa.Array] = {
        "kind": pa.repeat(pa.scalar(KIND_TRANSACTION, pa.string()), n),
        "topic": topics.take(pa.array(tp)) if n else pa.array([], pa.string()),
        "partition": pa.array(np.array([p for _, p in partitions], np.int32)[tp] if n else np.empty(0, np.int32)),
    }
    for name, (offsets, members) in lists.items():
        bounds = np.append(offsets, members.size).astype(np.int32)
        columns[name] = pa.ListArray.from_arrays(pa.array(bounds), broker_names.take(pa.array(members)))
    for name, (values, valid) in merged.items():
        if name != "tp":
            columns[name] = pa.array(values, mask=~valid)
    return pa.Table.from_batches([batch_of(schema, n, columns)], schema)


def transactions_of_summary(table: pa.Table, checkpoints: Checkpoints, schema: pa.Schema | None = None) -> pa.Table:
    """The transactions of every partition in ``table`` (summary rows: run, marker, segment,
    snapshot; other kinds are ignored), as rows of kind ``transaction`` in ``schema`` (default ``table``'s:
    the merge reads none of the transaction rows' own columns, so ``table`` may lack them)."""
    schema = schema or table.schema
    return pa.Table.from_batches(list(accumulated(table).batches(checkpoints, schema)), schema=schema)


def _fragments_of_rows(rows: pa.Table) -> dict[str, R.Col]:
    """One replica's ``run`` and ``marker`` summary rows as fragments, the ``sequence_gap`` of runs that a split
    segment's pieces cut checked at the cuts (txnlog.broker.reconstruct.cut_sequence_gaps: each piece hands on
    its runs' sequences at their ends)."""
    frags = {n: R.arrow_col(rows, n, d) for n, d in R.FRAGMENT_COLUMNS.items() if n != "kind"}
    is_marker = pc.equal(rows.column("kind"), "marker").to_numpy(zero_copy_only=False)
    frags["kind"] = R.col(np.where(is_marker, R.MARKER, R.RUN).astype(np.int8))
    piece = pc.is_valid(rows.column("piece")).to_numpy(zero_copy_only=False)
    if piece.any():
        # null (none): -1
        values = {n: np.where(ok, v, -1).astype(v.dtype, copy=False) for n, (v, ok) in frags.items()}
        codes = pc.fill_null(rows.column("file").combine_chunks().dictionary_encode().indices, -1)
        file = np.where(piece, np.asarray(codes.to_numpy(zero_copy_only=False), np.int64), -1)
        gap = R.cut_sequence_gaps(values, file)
        frags["sequence_gap"] = R.col(gap, frags["sequence_gap"][1] | (gap >= 0))
    return frags


def accumulated(table: pa.Table) -> PartitionTransactions:
    """A :class:`PartitionTransactions` holding every partition's fragments, segments and snapshot entries of
    ``table`` (summary rows: run, marker, segment, snapshot; other kinds are ignored)."""
    table = table.filter(
        pc.and_(
            pc.is_in(table.column("kind"), pa.array(["run", "marker", "segment", "snapshot"])),
            pc.and_(pc.is_valid(table.column("topic")), pc.is_valid(table.column("partition"))),
        )
    ).sort_by([("broker", "ascending"), ("topic", "ascending"), ("partition", "ascending")])
    acc = PartitionTransactions()
    broker = table.column("broker").to_numpy(zero_copy_only=False)
    topic = table.column("topic").to_numpy(zero_copy_only=False)
    partition = table.column("partition").to_numpy(zero_copy_only=False)
    starts = R.group_starts(broker, topic, partition) if len(table) else np.zeros(0, np.int64)
    ends = np.append(starts[1:], len(table)) if starts.size else starts
    for start, end in zip(starts, ends, strict=True):
        b, t, p = broker[start], topic[start], int(partition[start])
        rows = table.slice(start, end - start)
        kind = rows.column("kind")
        frag_rows = rows.filter(pc.is_in(kind, pa.array(["run", "marker"])))
        acc.add_fragments(b, t, p, _fragments_of_rows(frag_rows))
        segs = rows.filter(pc.equal(kind, "segment"))
        for base, last in zip(
            segs.column("file_offset").to_pylist(), segs.column("last_offset").to_pylist(), strict=True
        ):
            acc.add_segment(b, t, p, int(base), last)
        snap_rows = rows.filter(pc.equal(kind, "snapshot"))
        acc.add_snapshot(
            b, t, p, {n: R.arrow_col(snap_rows, n, d) for n, d in _SNAPSHOT_DTYPES.items() if n != "replica"}
        )
    return acc
