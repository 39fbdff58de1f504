"""Spark Python Data Sources over Kafka log files (Spark 4 Data Source API): planning and reading.

The driver only lists files (``txnlog.sources.logdirs``) and hands the list to a
source as an option; the files are dealt into a few balanced input partitions
(``pack_files``), and the bytes are read and decoded inside the executor by txnlog.engine.segments (the vectorized
walk of ``txnlog.kafka``). What leaves the executor is small:

* ``txnlog_segments`` — per data segment: transaction *fragments* (see
  ``txnlog.broker.reconstruct``), one ``segment`` summary row, ``quarantine`` rows;
  per producer snapshot: its entries. Batch headers never leave the executor.

(``txnlog_txn_state``, every ``__transaction_state`` record decoded, is txnlog.engine.spark.txn_state_source.)

Options: ``manifest`` (an Arrow file listing the files, :func:`write_manifest`) or, for a few files,
``files`` (JSON list of ``txnlog.sources.logdirs.LogFile`` dicts); ``check_crc`` ("true"/"false"),
``max_decompressed_bytes`` (what compressed control and ``__transaction_state`` batches of one file may
expand to, ``txnlog.kafka.compression``), ``min_partitions`` and ``max_partition_bytes`` (see
``pack_files``); ``storage`` (the shared-storage settings, ``txnlog.sources.storage``); ``split_segment_bytes``
(``txnlog_segments``: local ``.log`` files above it are read in pieces cut at their offset index,
``txnlog.sources.splits``; 0 or absent: never — the summary then holds ``piece`` rows and fragments that
``txnlog.engine.spark.stitch.stitch_pieces`` and the fragment merge finish); ``edge_segment_bytes`` (with
``transactions``: a segment of at least this size, of a partition of one replica read whole in a task, finishes
its inner transactions and hands the task's merge only its edges, txnlog.engine.segments.Edges; default
:data:`EDGE_SEGMENT_BYTES`, 0: every segment).

What a task receives is proportional to its own files: the file list is read once while planning (in
the driver's planning worker) and dealt into the input partitions; the reader that Spark pickles into
every task keeps no list of all files (a JSON option of 300,000 files is ~59 MB, and Spark ships the
reader, its options and the data source's with each task).
"""

from __future__ import annotations

import heapq
import json
import posixpath
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow import ipc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from txnlog.engine.segment_group import SegmentGroup, summarize_snapshot
from txnlog.engine.segments import (
    Edges,
    Piece,
    SegmentRows,
    fragments_dir,
    quarantine_batch,
    snapshot_starts,
    summarize_piece,
    summarize_segment,
)
from txnlog.engine.staging import RawWriter, stage_name, staged_transactions
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.record_batch import empty_batches
from txnlog.model.rows import (
    SEGMENT_SUMMARY_SCHEMA,
)
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources import splits as S
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile
from txnlog.sources.splits import UNREADABLE, worth_splitting

SEGMENTS_SOURCE = "txnlog_segments"


def arrow_to_spark_schema(schema: pa.Schema) -> StructType:

    return from_arrow_schema(schema)


def files_option(files: list[LogFile] | tuple[LogFile, ...]) -> str:
    """The ``files`` option for a few files (tests, notebooks); a run passes a manifest (write_manifest)."""
    return json.dumps([asdict(f) for f in files])


#: the manifest's columns: LogFile's fields
_MANIFEST_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("size", pa.int64()),
        ("kind", pa.string()),
    ]
)
_CHECKPOINT_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_start_offset", pa.int64()),
        ("clean_shutdown", pa.bool_()),
        ("high_watermark", pa.int64()),
    ]
)


def write_manifest(
    directory: str, name: str, files: list[LogFile] | tuple[LogFile, ...], checkpoints: Any = ()
) -> dict[str, str]:
    """Options that hand ``files`` (and the log-dir ``checkpoints``, ``txnlog.model.rows.Checkpoint``) to a
    source as one Arrow IPC file under ``directory`` (the run's scratch dir: local or shared storage),
    read once by the planning worker: the options stay a few bytes whatever the number of files."""

    table = files_table(files)
    cps = list(checkpoints)
    cp_table = pa.Table.from_arrays(
        [
            pa.array([c.broker for c in cps], pa.string()),
            pa.array([c.topic for c in cps], pa.string()),
            pa.array([c.partition for c in cps], pa.int32()),
            pa.array([c.log_start_offset for c in cps], pa.int64()),
            pa.array([c.clean_shutdown for c in cps], pa.bool_()),
            pa.array([c.high_watermark for c in cps], pa.int64()),
        ],
        schema=_CHECKPOINT_SCHEMA,
    )
    filesystem, path = storage.filesystem(directory)
    filesystem.create_dir(path, recursive=True)
    out: dict[str, str] = {}
    for option, data in (("manifest", table), ("checkpoints_manifest", cp_table)):
        target = posixpath.join(path, f"{name}-{option}.arrow")
        with filesystem.open_output_stream(target) as sink, ipc.new_file(sink, data.schema) as writer:
            writer.write_table(data)
        out[option] = posixpath.join(directory, f"{name}-{option}.arrow")
    return out


def _read_arrow(uri: str) -> pa.Table:

    filesystem, path = storage.filesystem(uri)
    with filesystem.open_input_file(path) as f:
        return ipc.open_file(f).read_all()


def files_table(files: list[LogFile] | tuple[LogFile, ...]) -> pa.Table:
    """``files`` as a table of ``_MANIFEST_SCHEMA`` (repeated strings dictionary-encoded)."""
    return pa.Table.from_arrays(
        [
            pa.array([f.path for f in files], pa.string()),
            pa.array([f.broker for f in files], pa.string()).dictionary_encode(),
            pa.array([f.topic for f in files], pa.string()).dictionary_encode(),
            pa.array([f.partition for f in files], pa.int32()),
            pa.array([f.base_offset for f in files], pa.int64()),
            pa.array([f.size for f in files], pa.int64()),
            pa.array([f.kind for f in files], pa.string()).dictionary_encode(),
        ],
        names=_MANIFEST_SCHEMA.names,
    )


def table_files(table: pa.Table) -> list[LogFile]:
    """The LogFiles of a ``files_table``."""
    cols = [table.column(name).to_pylist() for name in _MANIFEST_SCHEMA.names]
    return [LogFile(*row) for row in zip(*cols, strict=True)]


def _manifest_table(options: dict[str, str]) -> pa.Table:
    """The files of the ``manifest`` option, else of the ``files`` option, as a ``files_table``."""
    uri = options.get("manifest")
    if not uri:
        return files_table([LogFile(**d) for d in json.loads(options.get("files", "[]"))])
    return _read_arrow(uri)


def _manifest_checkpoints(options: dict[str, str]) -> list[list[Any]]:
    """Rows of ``checkpoints_option`` from the ``checkpoints_manifest`` option, else the ``checkpoints`` one."""
    uri = options.get("checkpoints_manifest")
    if not uri:
        rows: list[list[Any]] = json.loads(options.get("checkpoints", "[]"))
        return rows
    t = _read_arrow(uri)
    return [list(r) for r in zip(*(t.column(n).to_pylist() for n in _CHECKPOINT_SCHEMA.names), strict=True)]


#: options that only planning reads: a reader drops them once its partitions are made
_PLANNING_OPTIONS = ("files", "checkpoints", "manifest", "checkpoints_manifest")


def option_flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes")


def option_limit(options: dict[str, str]) -> int | None:
    """The ``max_decompressed_bytes`` option (None: the decoders' default)."""
    value = options.get("max_decompressed_bytes")
    return None if value is None else int(value)


class _FilesPartition(InputPartition):
    """The files one task reads (see pack_files), and the log-dir checkpoints of their partitions.

    Held as the task's rows of the manifest (an Arrow table: pickled as Arrow IPC buffers, with this
    task only) and its checkpoint rows."""

    def __init__(self, files: list[LogFile] | pa.Table, checkpoints: list[list[Any]] | None = None):
        table = files if isinstance(files, pa.Table) else files_table(files)
        super().__init__({"table": table, "checkpoints": checkpoints or []})

    def files(self) -> list[LogFile]:
        return table_files(self.value["table"])

    def pieces(self) -> list[Piece | None]:
        """Per file: the piece of a split segment it stands for (None: the whole file)."""
        return _table_pieces(self.value["table"])

    def fragments(self) -> list[bool]:
        """Per file: whether its partition is split, so its transactions are merged downstream (its
        fragments leave the task) instead of in this task."""
        table = self.value["table"]
        if _FRAGMENTS not in table.column_names:
            return [False] * table.num_rows
        return [bool(v) for v in table.column(_FRAGMENTS).to_pylist()]

    def edge_snapshots(self) -> list[list[str] | None]:
        """Per file: the producer snapshots of its replica when it is a file of a split partition of one
        replica, which finishes its inner transactions and hands on only its edges (txnlog.engine.segments.Edges);
        None: it does not."""
        table = self.value["table"]
        if _EDGE_SNAPSHOTS not in table.column_names:
            return [None] * table.num_rows
        return table.column(_EDGE_SNAPSHOTS).to_pylist()

    def checkpoints(self) -> dict[tuple[str, str, int], tuple[int | None, bool, int | None]]:
        return {(b, t, int(p)): (ls, bool(clean), hw) for b, t, p, ls, clean, hw in self.value["checkpoints"]}


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


def partition_files(partition: InputPartition) -> list[LogFile]:
    """The files of an input partition; none for the placeholder Spark reads when there are no files."""
    return partition.files() if isinstance(partition, _FilesPartition) else []


#: Upper bound of one input partition's bytes. Each Spark task of a Python data source costs tens of
#: milliseconds besides its work (task set-up in the JVM and the Python worker, the Arrow hand-over):
#: the decode of 4 GiB of segments took 2.0–2.8 s in 30 tasks and 1.2 s in 5 (benchmarks/RESULTS.md §2,
#: "Driver JVM and balanced decode tasks"). A bound still keeps a retried task cheap.
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


def _partitions(options: dict[str, str], table: pa.Table) -> list[InputPartition]:
    """The input partitions of the manifest ``table``: :func:`pack_files` (or, with the ``transactions`` /
    ``reduce`` options, :func:`pack_partitions`), computed on its columns with numpy — no Python object
    per file: 300,000 files are planned in about a second — each partition holding its rows only."""
    limit = int(options.get("max_partition_bytes", DEFAULT_MAX_PARTITION_BYTES))
    minimum = int(options.get("min_partitions", 4))
    n = table.num_rows
    if n == 0:
        return []
    # whole partitions per task (every replica): to finish their transactions, or reduce their records
    whole = option_flag(options, "transactions", False) or option_flag(options, "reduce", False)
    split_bytes = int(options.get("split_segment_bytes") or 0)
    split = False
    if split_bytes > 0:
        cores = int(options.get("cores") or max(2, minimum // 2))
        units = _partition_keys(table) if whole else np.arange(n, dtype=np.int64)
        hot = worth_splitting(np.asarray(table.column("size").to_numpy(), np.int64), units, split_bytes, cores)
        if hot.any():
            table = split_segments(table, split_bytes, hot)
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
    checkpoints: dict[tuple[str, int], list[list[Any]]] = {}
    if whole:
        for row in _manifest_checkpoints(options):
            checkpoints.setdefault((row[1], int(row[2])), []).append(row)
    out: list[InputPartition] = []
    for g in range(len(groups)):
        part = table.take(pa.array(order[row_group == g]))
        held: list[list[Any]] = []
        if checkpoints:
            pairs = zip(part.column("topic").to_pylist(), part.column("partition").to_pylist(), strict=True)
            held = [row for tp in sorted(set(pairs)) for row in checkpoints.get(tp, [])]
        out.append(_FilesPartition(part.combine_chunks(), held))
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


def split_segments(table: pa.Table, split_bytes: int, hot: np.ndarray) -> pa.Table:
    """The manifest ``table`` with each local ``.log`` file marked ``hot`` (txnlog.sources.splits.worth_splitting:
    above ``split_bytes``, of a straggler) whose offset index passes the checks (txnlog.sources.splits) replaced by
    one row per piece of about ``split_bytes``, plus the columns saying so: ``piece`` and the file's split
    points (null for whole files), ``piece_bytes`` (what a row weighs when packed), ``emit_fragments``
    (every row of a partition that has a split file: it is merged downstream), and ``edge_snapshots`` (the
    ``.log`` rows of a split partition that only one replica holds: the paths of that replica's producer
    snapshots; such a file finishes its inner transactions and hands on its edges, txnlog.engine.segments.Edges)."""

    paths = table.column("path").to_pylist()
    sizes = table.column("size").to_pylist()
    kinds = table.column("kind").to_pylist()
    bases = table.column("base_offset").to_pylist()
    rows: list[int] = []
    piece: list[int | None] = []
    weight: list[int] = []
    split_lists: list[list[list[int]] | None] = []
    split_partitions: set[tuple[str, int]] = set()
    topics = table.column("topic").to_pylist()
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
    brokers = table.column("broker").to_pylist()
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


def checkpoints_option(checkpoints: Any) -> str:
    """The ``checkpoints`` option: the log-dir checkpoints (``txnlog.model.rows.Checkpoint``) the
    transaction merge needs — (broker, topic, partition, checkpointed log start, clean shutdown, high watermark)."""
    return json.dumps(
        [[c.broker, c.topic, c.partition, c.log_start_offset, c.clean_shutdown, c.high_watermark] for c in checkpoints]
    )


class FilesReader(DataSourceReader):
    """A reader over the ``manifest`` (or ``files``) option, packed into input partitions (see pack_files).

    Spark pickles the reader into every task: after :meth:`partitions` it keeps only the small options,
    each partition carries its own files."""

    def __init__(self, options: dict[str, str]):

        self.check_crc = option_flag(options, "check_crc", True)
        self.max_decompressed_bytes = option_limit(options)
        self.options = {k: v for k, v in options.items() if k not in _PLANNING_OPTIONS}
        self._planning: dict[str, str] | None = {k: options[k] for k in _PLANNING_OPTIONS if k in options}
        storage.configure_from_options(options)

    @property
    def files(self) -> list[LogFile]:
        """Every file of the source (planning only)."""
        return table_files(_manifest_table(self._planning or {}))

    def partitions(self) -> list[InputPartition]:
        planning, self._planning = self._planning or {}, None  # not pickled into the tasks
        return _partitions({**self.options, **planning}, _manifest_table(planning))

    def start_task(self) -> None:
        """In a task, before reading: the driver's shared-storage settings (txnlog.sources.storage)."""

        storage.configure_from_options(self.options)


#: The smallest segment of a partition read whole that finishes its own inner transactions (the
#: ``edge_segment_bytes`` option). Its fragments otherwise stay in the task's merge until the task ends, and a
#: hot partition's big segments then hold the reading process's peak memory up; a segment that finishes its own
#: costs a merge and a staged file, which small segments (whose fragments weigh little) are not worth
#: (benchmarks/RESULTS.md §2, "As a user runs it").
EDGE_SEGMENT_BYTES = 64 << 20


def one_replica_snapshots(files: list[LogFile], downstream: list[bool]) -> dict[tuple[str, int], list[str]]:
    """Per (topic, partition) of ``files`` read whole here (``downstream`` false) that one broker's files hold:
    the paths of its producer snapshots (for txnlog.engine.segments.snapshot_starts)."""
    brokers: dict[tuple[str, int], set[str]] = {}
    snapshots: dict[tuple[str, int], list[str]] = {}
    for file, elsewhere in zip(files, downstream, strict=True):
        if not elsewhere:
            tp = (file.topic, int(file.partition))
            brokers.setdefault(tp, set()).add(file.broker)
            paths = snapshots.setdefault(tp, [])
            if file.kind == "snapshot":
                paths.append(file.path)
    return {tp: snapshots[tp] for tp, held in brokers.items() if len(held) == 1}


#: The bytes of whole partitions a task merges before it finishes their transactions and starts a new merge
#: (at a partition's end; the ``merge_bytes`` option). A task's group of small partitions grows with the input
#: (its share of the bytes); merged all at once it holds memory in proportion, in merges of this size it holds
#: little, at no cost in time (benchmarks/RESULTS.md §2, "Flat memory with threads: merges of 16 MiB"). Every
#: merge of a task stages into the task's one file.
MERGE_BYTES = 16 << 20


class _SegmentsReader(FilesReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # option "transactions": the input partitions hold whole partitions (pack_partitions), so this
        # task finishes their transactions itself (txnlog.rules.transactions) instead of yielding fragments.
        # Of a partition of one replica, each big segment finishes the transactions between its producers' markers
        # and hands the merge only its edges (segments.Edges), so the merge's memory does not grow with the
        # partition (option "edge_segment_bytes", EDGE_SEGMENT_BYTES); nor with the task's partitions: a merge
        # past MERGE_BYTES finishes at the end of its partition and a new one begins
        self.start_task()
        files = partition_files(partition)
        transactions = option_flag(self.options, "transactions", False)
        stage = self.options.get("stage")
        name = stage_name({f"{f.broker}/{f.topic}-{f.partition}" for f in files})
        with RawWriter(stage, name) if transactions and stage else nullcontext() as writer:
            yield from self._read(partition, files, transactions, stage, writer)

    def _read(
        self,
        partition: InputPartition,
        files: list[LogFile],
        transactions: bool,
        stage: str | None,
        writer: RawWriter | None,
    ) -> Iterator[pa.RecordBatch]:
        merge = PartitionTransactions() if transactions else None
        # segment rows wait in `segments` and leave as one batch before any other row: rows keep file order
        segments = SegmentRows()
        pieces: list[Piece | None] = [None] * len(files)
        downstream = [False] * len(files)
        edge_snapshots: list[list[str] | None] = [None] * len(files)
        checkpoints: dict[tuple[str, str, int], tuple[int | None, bool, int | None]] = {}
        if isinstance(partition, _FilesPartition):
            pieces, downstream = partition.pieces(), partition.fragments()
            edge_snapshots, checkpoints = partition.edge_snapshots(), partition.checkpoints()
        edge_bytes = int(self.options.get("edge_segment_bytes") or EDGE_SEGMENT_BYTES)
        merge_bytes, merged = int(self.options.get("merge_bytes") or MERGE_BYTES), 0
        alone_whole = one_replica_snapshots(files, downstream) if merge is not None else {}
        whole_edges: dict[tuple[str, int], Edges] = {}
        group = SegmentGroup(self.check_crc, self.max_decompressed_bytes)  # whole segments into the merge
        rows_of = zip(files, pieces, downstream, edge_snapshots, strict=True)
        for i, (file, piece, alone, snapshots) in enumerate(rows_of):
            # a split partition's files leave as fragments: its pieces are in other tasks; with the option
            # "fragments_stage" as staged files, one directory per partition, for its merge to read. Of one
            # replica, a file finishes its inner transactions here and only its edges leave (segments.Edges)
            file_merge = None if alone else merge
            staged = self.options.get("fragments_stage") if alone else None
            to = fragments_dir(staged, file.topic, file.partition) if staged else None
            edges = None
            tp = (file.topic, int(file.partition))
            if alone and merge is not None and snapshots is not None and file.kind == "log":
                edges = Edges(snapshot_starts(snapshots), checkpoints, stage)
            elif not alone and tp in alone_whole and file.kind == "log" and file.size >= edge_bytes:
                if tp not in whole_edges:  # a partition's files are read one after another: once per partition
                    whole_edges[tp] = Edges(snapshot_starts(alone_whole[tp]), checkpoints, stage)
                edges = whole_edges[tp]
            try:
                if file_merge is not None and edges is None and piece is None and file.kind in ("log", "snapshot"):
                    rows = group.add(file, segments, file_merge)  # decoded with the task's next ones
                elif file.kind == "snapshot":
                    rows = summarize_snapshot(file, file_merge, segments)
                elif piece is not None:
                    rows = summarize_piece(
                        file, piece, self.check_crc, segments, self.max_decompressed_bytes, to, edges
                    )
                else:
                    rows = summarize_segment(
                        file, self.check_crc, segments, file_merge, max_decompressed_bytes=self.max_decompressed_bytes,
                        fragments_to=to, edges=edges,
                    )  # fmt: skip
                for batch in rows:
                    yield from segments.batches()
                    yield batch
            except OSError as e:  # vanished/unreadable file: a quarantine row, never a crash
                if piece is not None:  # every piece of the file says so; the stitch keeps one (engine.spark.stitch)
                    segments.add(file, empty_batches(), 0, piece=piece.index, next_piece=UNREADABLE)
                yield from segments.batches()
                yield quarantine_batch(
                    SEGMENT_SUMMARY_SCHEMA,
                    file,
                    [QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e))],
                    None if piece is None else piece.index,
                )
            if file_merge is not None and edges is None:
                merged += file.size
            more = i + 1 < len(files) and (files[i + 1].topic, int(files[i + 1].partition)) != tp
            if merge is not None and merged >= merge_bytes and more and isinstance(partition, _FilesPartition):
                # the merge's partitions are whole (a partition's files are next to each other): final rows
                yield from group.decode(segments, merge)
                yield from segments.batches()
                yield from staged_transactions(merge, checkpoints, SEGMENT_SUMMARY_SCHEMA, stage=stage, writer=writer)
                merge, merged = PartitionTransactions(), 0
        yield from group.decode(segments, merge)
        yield from segments.batches()
        if merge is not None and isinstance(partition, _FilesPartition):
            yield from staged_transactions(merge, checkpoints, SEGMENT_SUMMARY_SCHEMA, stage=stage, writer=writer)


class SegmentsSource(DataSource):
    """``spark.read.format("txnlog_segments").option("files", files_option(...)).load()``"""

    @classmethod
    def name(cls) -> str:
        return SEGMENTS_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _SegmentsReader(dict(self.options))
