"""How a run's log-dir files are dealt into tasks: balanced groups of files (whole partitions where a task
merges or reduces them), the hot segments read in pieces; each task a :class:`FilesTask`. The same plan serves
both placements: Spark's Data Sources make an input partition of each task (txnlog.engine.spark.sources), the
local placement runs each on a thread (txnlog.engine.tasks)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.engine.manifest import files_table, table_files
from txnlog.model.arrow import python_values
from txnlog.sources import splits as S
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile
from txnlog.sources.splits import worth_splitting


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of a split segment (txnlog.sources.splits): piece ``index`` starts at byte 0 (index 0) or at
    split point ``index - 1``; every piece of the file carries all its split points."""

    index: int
    positions: np.ndarray
    offsets: np.ndarray
    previous: np.ndarray


class FilesTask:
    """The files one task reads (see pack_files), and the log-dir checkpoints of their partitions.

    Held as the task's rows of the manifest (an Arrow table: pickled as Arrow IPC buffers, with this
    task only) and its checkpoint rows."""

    def __init__(self, files: list[LogFile] | pa.Table, checkpoints: list[list[Any]] | None = None):
        self.table = files if isinstance(files, pa.Table) else files_table(files)
        self.checkpoint_rows = checkpoints or []

    def files(self) -> list[LogFile]:
        return table_files(self.table)

    def pieces(self) -> list[Piece | None]:
        """Per file: the piece of a split segment it stands for (None: the whole file)."""
        return _table_pieces(self.table)

    def fragments(self) -> list[bool]:
        """Per file: whether its partition is split, so its transactions are merged downstream (its
        fragments leave the task) instead of in this task."""
        table = self.table
        if _FRAGMENTS not in table.column_names:
            return [False] * table.num_rows
        return [bool(v) for v in table.column(_FRAGMENTS).to_pylist()]

    def edge_snapshots(self) -> list[list[str] | None]:
        """Per file: the producer snapshots of its replica when it is a file of a split partition of one
        replica, which finishes its inner transactions and hands on only its edges (txnlog.engine.segments.Edges);
        None: it does not."""
        table = self.table
        if _EDGE_SNAPSHOTS not in table.column_names:
            return [None] * table.num_rows
        return table.column(_EDGE_SNAPSHOTS).to_pylist()

    def checkpoints(self) -> dict[tuple[str, str, int], tuple[int | None, bool, int | None]]:
        return {(b, t, int(p)): (ls, bool(clean), hw) for b, t, p, ls, clean, hw in self.checkpoint_rows}


#: columns a split adds to a task's manifest rows
_PIECE = "piece"
_SPLIT_POSITIONS = "split_positions"
_SPLIT_OFFSETS = "split_offsets"
_SPLIT_PREVIOUS = "split_previous"
_FRAGMENTS = "emit_fragments"
_EDGE_SNAPSHOTS = "edge_snapshots"


def _table_pieces(table: pa.Table) -> list[Piece | None]:
    if _PIECE not in table.column_names:
        return [None] * table.num_rows
    out: list[Piece | None] = []
    columns = [table.column(n).to_pylist() for n in (_PIECE, _SPLIT_POSITIONS, _SPLIT_OFFSETS, _SPLIT_PREVIOUS)]
    for index, positions, offsets, previous in zip(*columns, strict=True):
        out.append(
            None
            if index is None
            else Piece(
                int(index),
                np.asarray(positions, np.int64),
                np.asarray(offsets, np.int64),
                np.asarray(previous, np.int64),
            )
        )
    return out


#: Upper bound of one input partition's bytes. Each Spark task of a Python data source has a cost besides its
#: work (task set-up in the JVM and the Python worker, the Arrow hand-over), so fewer, larger tasks decode
#: faster (benchmarks/RESULTS.md §2, "Driver JVM and balanced decode tasks"); a bound still keeps a retried task
#: cheap.
DEFAULT_MAX_PARTITION_BYTES = 1 << 30


def pack_files(files: list[LogFile], *, max_bytes: int, min_partitions: int) -> list[list[LogFile]]:
    """Group files into as few, equally sized input partitions as keep every core busy.

    The number of groups is the larger of ``min_partitions`` (twice the cores, so a slow
    task can be evened out) and what keeps each group under ``max_bytes``, rounded up to a multiple
    of ``min_partitions``, and never more than the files. Files are never split. They are dealt largest
    first to the lightest group (longest-processing-time first), so groups differ by at most one
    file; inside a group they keep the listing's (broker, topic, partition, offset) order.

    >>> from txnlog.sources.logdirs import LogFile
    >>> fs = [LogFile(f"/l/t-0/{i:020d}.log", "b", "t", 0, i, size, "log") for i, size in enumerate([8, 1, 1, 6, 2])]
    >>> [[f.size for f in g] for g in pack_files(fs, max_bytes=100, min_partitions=2)]
    [[8, 1], [1, 6, 2]]
    """
    return [
        [f for unit in group for f in unit] for group in pack_units([[f] for f in files], max_bytes, min_partitions)
    ]


def pack_partitions(files: list[LogFile], *, max_bytes: int, min_partitions: int) -> list[list[LogFile]]:
    """:func:`pack_files`, but every file of a topic-partition (all replicas) lands in the same group,
    so one task sees whole partitions and can finish their transactions (txnlog.rules.transactions)."""
    units: dict[tuple[str, int], list[LogFile]] = {}
    for f in files:
        units.setdefault((f.topic, f.partition), []).append(f)
    return [
        [f for unit in group for f in unit] for group in pack_units(list(units.values()), max_bytes, min_partitions)
    ]


def pack_units(units: list[list[LogFile]], max_bytes: int, min_partitions: int) -> list[list[list[LogFile]]]:
    """Deal units (lists of files that stay together) into balanced groups (see pack_files)."""
    sizes = [max(sum(f.size for f in u), 1) for u in units]
    return [[units[i] for i in m] for m in pack_sizes(sizes, max_bytes, min_partitions)]


def pack_sizes(sizes: list[int], max_bytes: int, min_partitions: int) -> list[list[int]]:
    """The balanced groups of :func:`pack_units` as unit indexes (ascending in each group), heaviest group first;
    ``sizes``: each unit's bytes (at least 1)."""
    if not sizes:
        return []
    slots = max(min_partitions, 1)
    needed = -(-sum(sizes) // max(max_bytes, 1))
    groups_n = min(len(sizes), max(slots, -(-needed // slots) * slots))
    lightest = [(0, g) for g in range(groups_n)]  # a heap of (bytes so far, group)
    members: list[list[int]] = [[] for _ in range(groups_n)]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        load, g = heapq.heappop(lightest)
        members[g].append(i)
        heapq.heappush(lightest, (load + sizes[i], g))
    return sorted((sorted(m) for m in members if m), key=lambda m: -sum(sizes[i] for i in m))


@dataclass(frozen=True)
class Plan:
    """How files are dealt into tasks: groups of at most ``max_partition_bytes`` (the files are not split), at
    least ``min_partitions`` of them where there are files enough; ``whole``: every file of a (topic, partition),
    every replica, in one task (to finish its transactions or reduce its records there); local ``.log`` files
    above ``split_segment_bytes`` (0: never) of a straggler read in pieces, for ``cores`` cores (0: half of
    ``min_partitions``, at least 2)."""

    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = 4
    whole: bool = False
    split_segment_bytes: int = 0
    cores: int = 0


def plan_tasks(plan: Plan, table: pa.Table, checkpoints: Sequence[list[Any]] = ()) -> list[FilesTask]:
    """The tasks of the manifest ``table`` (txnlog.engine.manifest.files_table): :func:`pack_files` (or, ``whole``,
    :func:`pack_partitions`), computed on its columns with numpy — no Python object per file: 300,000 files are
    planned in about a second — each task holding its rows only, and (``whole``) the rows of ``checkpoints``
    (txnlog.engine.manifest.checkpoints_option's) of its partitions."""
    limit, minimum, whole = plan.max_partition_bytes, plan.min_partitions, plan.whole
    split_bytes = plan.split_segment_bytes
    n = table.num_rows
    if n == 0:
        return []
    split = False
    if split_bytes > 0:
        units = _partition_keys(table) if whole else np.arange(n, dtype=np.int64)
        table = split_segments(table, split_bytes, units, plan.cores or max(2, minimum // 2))
        n = table.num_rows
        split = _PIECE in table.column_names
    size = np.asarray(table.column("size").to_numpy(), np.int64)
    if split:  # a piece weighs its own bytes
        size = np.asarray(table.column("piece_bytes").to_numpy(zero_copy_only=False), np.int64)
    if whole:
        key = _partition_keys(table)
        if split:  # every file (and piece) of a split partition is its own unit: merged downstream
            alone = np.asarray(table.column(_FRAGMENTS).to_numpy(zero_copy_only=False), bool)
            key = np.where(alone, -1 - np.arange(n, dtype=np.int64), key)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        # units numbered in order of their first file (the listing's order), as pack_partitions does
        rank = np.empty(len(first), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        unit = rank[inverse.reshape(-1)]
        unit_bytes = np.maximum(np.bincount(unit, weights=size, minlength=len(first)).astype(np.int64), 1)
    else:
        unit = np.arange(n, dtype=np.int64)
        unit_bytes = np.maximum(size, 1)
    groups = pack_sizes(unit_bytes.tolist(), limit, minimum)
    group_of = np.empty(len(unit_bytes), np.int64)
    for g, members in enumerate(groups):
        group_of[members] = g
    order = np.argsort(unit, kind="stable")  # rows by unit, the listing's order inside a unit
    row_group = group_of[unit[order]]
    by_partition: dict[tuple[str, int], list[list[Any]]] = {}
    if whole:
        for row in checkpoints:
            by_partition.setdefault((row[1], int(row[2])), []).append(row)
    out: list[FilesTask] = []
    for g in range(len(groups)):
        part = table.take(pa.array(order[row_group == g]))
        held: list[list[Any]] = []
        if by_partition:
            pairs = zip(python_values(part.column("topic")), part.column("partition").to_pylist(), strict=True)
            held = [row for tp in sorted(set(pairs)) for row in by_partition.get(tp, [])]
        out.append(FilesTask(part.combine_chunks(), held))
    return out


def _partition_keys(table: pa.Table) -> np.ndarray:
    """One int64 per manifest row, equal for the files of one (topic, partition), every replica."""
    topic = table.column("topic").combine_chunks()
    topic_codes = (topic.dictionary_encode() if not pa.types.is_dictionary(topic.type) else topic).indices
    key = np.asarray(topic_codes.to_numpy(zero_copy_only=False), np.int64) << 32
    key |= np.asarray(table.column("partition").to_numpy(), np.int64) & 0xFFFFFFFF
    return key


def _read_index(path: str) -> bytes | None:
    """The ``.index`` next to a local ``.log`` file, None when there is none (or it cannot be read)."""

    try:
        with open(storage.local_path(path[: -len(".log")] + ".index"), "rb") as f:
            return f.read()
    except OSError:
        return None


def split_segments(table: pa.Table, split_bytes: int, units: np.ndarray, cores: int) -> pa.Table:
    """The manifest ``table`` with each local ``.log`` file worth splitting (txnlog.sources.splits.worth_splitting:
    above ``split_bytes``, of a straggler among the ``units`` for ``cores`` cores) whose offset index passes the
    checks (txnlog.sources.splits) replaced by one row per piece of about ``split_bytes``, plus the columns saying
    so: ``piece`` and the file's split points (null for whole files), ``piece_bytes`` (what a row weighs when
    packed), ``emit_fragments`` (every row of a partition that has a split file: it is merged downstream), and
    ``edge_snapshots`` (the ``.log`` rows of a split partition that only one replica holds: the paths of that
    replica's producer snapshots; such a file finishes its inner transactions and hands on its edges,
    txnlog.engine.segments.Edges). ``table`` as it is where no file is split."""

    hot = worth_splitting(np.asarray(table.column("size").to_numpy(), np.int64), units, split_bytes, cores)
    if not hot.any():
        return table
    kinds, topics, brokers = (python_values(table.column(name)) for name in ("kind", "topic", "broker"))
    paths = table.column("path").to_pylist()
    sizes = table.column("size").to_pylist()
    bases = table.column("base_offset").to_pylist()
    rows: list[int] = []
    piece: list[int | None] = []
    weight: list[int] = []
    split_lists: list[list[list[int]] | None] = []
    split_partitions: set[tuple[str, int]] = set()
    partitions = table.column("partition").to_pylist()
    for i, (path, size, kind, base) in enumerate(zip(paths, sizes, kinds, bases, strict=True)):
        plan = None
        # Remote objects are read whole: every piece would fetch the whole object (txnlog.sources.splits)
        if hot[i] and kind == "log" and not storage.is_remote(path) and path.endswith(".log"):
            points = S.index_split_points(_read_index(path), int(base), int(size))
            if isinstance(points, S.SplitPoints):
                plan = S.plan_pieces(points, int(size), split_bytes)
        if plan is None or plan.positions.size == 0:
            rows.append(i)
            piece.append(None)
            weight.append(int(size))
            split_lists.append(None)
            continue
        split_partitions.add((topics[i], int(partitions[i])))
        bounds = [0, *plan.positions.tolist(), int(size)]
        lists = [plan.positions.tolist(), plan.offsets.tolist(), plan.previous.tolist()]
        for k in range(len(bounds) - 1):
            rows.append(i)
            piece.append(k)
            weight.append(bounds[k + 1] - bounds[k])
            split_lists.append(lists)
    if not split_partitions:
        return table
    out = table.take(pa.array(rows, pa.int64()))
    fragments = [(topics[i], int(partitions[i])) in split_partitions for i in rows]
    replicas: dict[tuple[str, int], set[str]] = {}
    snapshots: dict[tuple[str, int], list[str]] = {}
    for i, kind in enumerate(kinds):
        tp = (topics[i], int(partitions[i]))
        if tp in split_partitions:
            replicas.setdefault(tp, set()).add(brokers[i])
            if kind == "snapshot":
                snapshots.setdefault(tp, []).append(paths[i])
    edge_snapshots = [
        snapshots.get(tp, []) if kinds[i] == "log" and len(replicas.get(tp, ())) == 1 else None
        for i in rows
        for tp in [(topics[i], int(partitions[i]))]
    ]
    longs = pa.list_(pa.int64())
    return (
        out.append_column(_PIECE, pa.array(piece, pa.int32()))
        .append_column(_SPLIT_POSITIONS, pa.array([v[0] if v else None for v in split_lists], longs))
        .append_column(_SPLIT_OFFSETS, pa.array([v[1] if v else None for v in split_lists], longs))
        .append_column(_SPLIT_PREVIOUS, pa.array([v[2] if v else None for v in split_lists], longs))
        .append_column("piece_bytes", pa.array(weight, pa.int64()))
        .append_column(_FRAGMENTS, pa.array(fragments, pa.bool_()))
        .append_column(_EDGE_SNAPSHOTS, pa.array(edge_snapshots, pa.list_(pa.string())))
    )
