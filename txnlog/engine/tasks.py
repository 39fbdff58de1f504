"""The per-partition tasks: each one plain function from its files and typed settings (txnlog.engine.settings) to
Arrow record batches, and the only code that does a task's work. Both placements call them: the local placement
runs each task on a thread of this process (:func:`run_here`), Spark runs each as a Data Source's input partition
(txnlog.engine.spark.sources, txn_state_source, consumer_offsets_source, dump_log: adapters that turn their string
options into these settings). tests/engine/test_engine_suite.py runs each through both and compares the rows.

* :func:`log_dir_task`: data partitions' segments and producer snapshots → summary rows (segments, quarantine,
  producers, snapshots; fragments, or with ``transactions`` the finished transactions, staged);
* :func:`txn_state_task`: ``__transaction_state`` segments → coordinator records (reduced with ``reduce``);
* :func:`consumer_offsets_task`: ``__consumer_offsets`` segments → the groups' offsets and members;
* :func:`dump_rows_task`: kafka-dump-log.sh files → the same rows as the first two (txnlog.engine.dump_log).

The local placement's decode is one call, :func:`decode_here`: every task run by :func:`run_here` on threads of this
process, the rows handed on as one :class:`~txnlog.engine.decoded.Decoded` (Spark's: txnlog.engine.spark.decode).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import as_of as as_of_rule
from txnlog.engine.consumer_offsets import SOURCE_SCHEMA as OFFSETS_ROWS
from txnlog.engine.consumer_offsets import IndexedPartition, index_partitions, read_indexed, read_partitions
from txnlog.engine.decoded import Decoded, GroupOffsets
from txnlog.engine.dump_log.names import Names
from txnlog.engine.dump_log.rows import files_rows
from txnlog.engine.manifest import checkpoint_rows, files_table
from txnlog.engine.plan import FilesTask, Plan, plan_tasks
from txnlog.engine.segment_group import SegmentGroup, summarize_snapshot
from txnlog.engine.segments import (
    Edges,
    SegmentRows,
    quarantine_batch,
    snapshot_starts,
    summarize_piece,
    summarize_segment,
)
from txnlog.engine.settings import Decode, LogDirSettings, TxnStateSettings, log_dir_settings
from txnlog.engine.staging import RawWriter, fragments_dir, merged_here, stage_name, staged_transactions
from txnlog.engine.txn_state import SOURCE_SCHEMA as TXN_STATE_SOURCE_SCHEMA
from txnlog.engine.txn_state import decoded_records, reduced_records, with_transitions
from txnlog.kafka.consumer_offsets_commits import hashes_of
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.record_batch import empty_batches, release_output_blocks
from txnlog.model.arrow import distinct
from txnlog.model.contract import InputSource
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources.logdirs import Inventory, LogFile
from txnlog.sources.offline import Offline
from txnlog.sources.splits import UNREADABLE

#: a task's call: no argument, its rows
Task = Callable[[], Iterable[pa.RecordBatch]]

#: The most bytes of whole partitions in a task of the local placement (Spark's tasks: txnlog.engine.plan's
#: ``DEFAULT_MAX_PARTITION_BYTES``, which their fixed cost makes large). A task stages its transactions into one
#: file, and a file is the smallest unit of the driver's audit (txnlog.engine.integrity.audit_groups): tasks of a
#: bounded size keep the audit's groups, and its memory, from growing with the input; a thread of this process
#: pays next to nothing per task (benchmarks/RESULTS.md §2, "mem11").
LOCAL_TASK_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class BigTask:
    """A task that summarises a segment of ``edge_segment_bytes`` or more whole (txnlog.engine.segments): what one
    such segment holds while it is summarised is the most a task holds, so :func:`run_here` runs no two at once
    while other tasks are left to run beside one."""

    call: Task

    def __call__(self) -> Iterable[pa.RecordBatch]:
        return self.call()


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


def log_dir_task(task: FilesTask, settings: LogDirSettings) -> Iterator[pa.RecordBatch]:
    """One task's data files (txnlog.engine.plan) → rows of SEGMENT_SUMMARY_SCHEMA.

    With ``transactions`` the task holds whole partitions (txnlog.engine.plan.pack_partitions), so it finishes
    their transactions itself (txnlog.rules.transactions) instead of yielding fragments. Of a partition of one
    replica, each big segment finishes the transactions between its producers' markers and hands the merge only
    its edges (segments.Edges), so the merge's memory does not grow with the partition (``edge_segment_bytes``);
    nor with the task's partitions: a merge past ``merge_bytes`` finishes at the end of its partition and a new
    one begins."""
    files, stage = task.files(), settings.stage
    name = stage_name({f"{f.broker}/{f.topic}-{f.partition}" for f in files})
    with RawWriter(stage, name) if settings.transactions and stage else nullcontext() as writer:
        yield from _log_dir_rows(task, files, settings, writer)


def _log_dir_rows(  # noqa: C901
    task: FilesTask, files: list[LogFile], settings: LogDirSettings, writer: RawWriter | None
) -> Iterator[pa.RecordBatch]:
    """:func:`log_dir_task`'s rows of ``files`` (the task's, built once), ``writer`` the task's staged file (with
    ``transactions``)."""
    stage, decode = settings.stage, settings.decode
    merge = PartitionTransactions() if settings.transactions else None
    # segment rows wait in `segments` and leave as one batch before any other row: rows keep file order
    segments = SegmentRows()
    pieces, downstream = task.pieces(), task.fragments()
    edge_snapshots, checkpoints = task.edge_snapshots(), task.checkpoints()
    edge_bytes, merge_bytes, merged = settings.edge_segment_bytes, settings.merge_bytes, 0
    alone_whole = one_replica_snapshots(files, downstream) if merge is not None else {}
    whole_edges: dict[tuple[str, int], Edges] = {}
    group = SegmentGroup(decode.check_crc, decode.max_decompressed_bytes)  # whole segments into the merge
    rows_of = zip(files, pieces, downstream, edge_snapshots, strict=True)
    for i, (file, piece, alone, snapshots) in enumerate(rows_of):
        # a split partition's files leave as fragments: its pieces are in other tasks; with the option
        # "fragments_stage" as staged files, one directory per partition, for its merge to read. Of one
        # replica, a file finishes its inner transactions here and only its edges leave (segments.Edges)
        file_merge = None if alone else merge
        staged = settings.fragments_stage if alone else None
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
                    file, piece, decode.check_crc, segments, decode.max_decompressed_bytes, to, edges
                )
            else:
                rows = summarize_segment(
                    file, decode.check_crc, segments, file_merge, max_decompressed_bytes=decode.max_decompressed_bytes,
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
        if merge is not None and merged >= merge_bytes and more:
            # the merge's partitions are whole (a partition's files are next to each other): final rows
            yield from group.decode(segments, merge)
            yield from segments.batches()
            yield from staged_transactions(merge, checkpoints, SEGMENT_SUMMARY_SCHEMA, stage=stage, writer=writer)
            merge, merged = PartitionTransactions(), 0
    yield from group.decode(segments, merge)
    yield from segments.batches()
    if merge is not None:
        yield from staged_transactions(merge, checkpoints, SEGMENT_SUMMARY_SCHEMA, stage=stage, writer=writer)


def txn_state_task(files: list[LogFile], settings: TxnStateSettings) -> Iterator[pa.RecordBatch]:
    """One task's ``__transaction_state`` files → rows of txnlog.engine.txn_state.SOURCE_SCHEMA: per coordinator
    partition, every replica's records reduced (``reduce``: the task holds whole partitions), else every record.
    Each segment is decoded a window at a time and each window reduced as it comes (a reducer: the reduction of
    the union of disjoint windows' reductions is the reduction of them all), so a task holds one window's records
    and its partitions' reductions, not a partition's records."""
    # the free output blocks the data segments' scans left in this process are sized for them: a big segment's
    # are far more than the coordinator partitions' scans need
    release_output_blocks()
    by_partition: dict[tuple[str, int], list[LogFile]] = {}
    for f in files:
        by_partition.setdefault((f.topic, f.partition), []).append(f)
    for held in by_partition.values():
        if settings.reduce:
            yield from reduced_records(held, settings.decode, settings.stage)
        else:
            for file in held:
                yield from (with_transitions(b) for b in decoded_records(file, settings.decode))


def consumer_offsets_task(
    files: list[LogFile], decode: Decode, wanted: list[tuple[str, int]] | None = None
) -> Iterator[pa.RecordBatch]:
    """One task's ``__consumer_offsets`` files (whole partitions) → rows of
    txnlog.engine.consumer_offsets.SOURCE_SCHEMA, its partitions replayed together; the groups' offsets of the
    ``wanted`` topic partitions only (None: all; txnlog.engine.consumer_offsets.read_partitions)."""
    hashes = None if wanted is None else hashes_of(wanted)
    yield from read_partitions(_partitions(files), decode.check_crc, decode.max_decompressed_bytes, hashes)


def _partitions(files: list[LogFile]) -> list[list[LogFile]]:
    """``files`` by ``__consumer_offsets`` partition, in the order they first appear."""
    by_partition: dict[int, list[LogFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    return list(by_partition.values())


class _Walk:
    """One ``__consumer_offsets`` partition's walk (txnlog.engine.consumer_offsets.index_partitions), submitted to
    the background thread: :meth:`indexed` takes it back and does it on the calling thread if that thread has not
    begun it, or waits for it; the result is kept for a later request."""

    def __init__(self, pool: ThreadPoolExecutor, files: list[LogFile], decode: Decode) -> None:
        self._files, self._decode = files, decode
        self._future = pool.submit(self._walk)
        self._lock = threading.Lock()
        self._indexed: list[IndexedPartition] | None = None

    def _walk(self) -> list[IndexedPartition]:
        return index_partitions([self._files], self._decode.check_crc, self._decode.max_decompressed_bytes)

    def indexed(self) -> list[IndexedPartition]:
        with self._lock:
            if self._indexed is None:
                self._indexed = self._walk() if self._future.cancel() else self._future.result()
            return self._indexed


def _indexed_task(walks: list[_Walk], decode: Decode, wanted: list[tuple[str, int]] | None) -> Iterator[pa.RecordBatch]:
    """:func:`consumer_offsets_task`'s rows of a task whose partitions' walks were started in the background
    (``walks``, :class:`_Walk`)."""
    hashes = None if wanted is None else hashes_of(wanted)
    indexed = [ix for walk in walks for ix in walk.indexed()]
    yield from read_indexed(indexed, decode.check_crc, decode.max_decompressed_bytes, hashes)


class OffsetsJobs:
    """The local placement's ``__consumer_offsets`` tasks (whole partitions, planned once): called with the topic
    partitions whose groups' offsets are wanted (None: all), one job of :func:`consumer_offsets_task` per task.

    :meth:`indexed_now` splits each task in two: the walk over every record, which does not depend on what is
    wanted (txnlog.engine.consumer_offsets.index_partitions), starts at once on a thread of its own, beside the
    other inputs' decode and the tables' build; the jobs asked for later only pick the records wanted from it
    (txnlog.engine.consumer_offsets.read_indexed). The rows are the same either way."""

    def __init__(self, tasks: list[list[LogFile]], decode: Decode) -> None:
        self._tasks, self._decode = tasks, decode

    def __call__(self, wanted: list[tuple[str, int]] | None) -> list[Job]:
        return [([partial(consumer_offsets_task, files, self._decode, wanted) for files in self._tasks], OFFSETS_ROWS)]

    def indexed_now(self) -> Callable[[list[tuple[str, int]] | None], list[Job]]:
        """The tasks' walks started now, a partition at a time, on a thread of their own; the jobs for the topic
        partitions wanted, which take back the walks that thread has not begun and wait for the others
        (:class:`_Walk`)."""
        pool = ThreadPoolExecutor(1, thread_name_prefix="txnlog-offsets")
        walks = [[_Walk(pool, part, self._decode) for part in _partitions(files)] for files in self._tasks]
        pool.shutdown(wait=False)  # the thread ends once the walks are done or taken back

        def jobs(wanted: list[tuple[str, int]] | None) -> list[Job]:
            return [([partial(_indexed_task, task, self._decode, wanted) for task in walks], OFFSETS_ROWS)]

        return jobs


def dump_rows_task(
    files: list[tuple[str, str | None, bool]], names: Names, output: str, chunk_bytes: int
) -> Iterator[pa.RecordBatch]:
    """One task's kafka-dump-log.sh ``files`` (path, location, whether named) → ``output``'s rows
    (txnlog.engine.dump_log.rows: ``summary`` or ``records``, the replicas named by ``names``; ``both``, the two
    and the "Dumping" lines in one pass, the rows' brokers as printed)."""
    for table in files_rows(files, names, output, chunk_bytes):
        yield from table.to_batches()


#: a job of the local placement: its tasks and the schema of their rows (:func:`run_here`)
Job = tuple[list[Task], pa.Schema]


def log_dir_jobs(
    inv: Inventory, decode: Decode, scratch: str, *, shared: bool, dumps: bool, threads: int
) -> tuple[list[Job], OffsetsJobs]:
    """The local placement's tasks over the log dirs ``inv`` lists, for :func:`run_here`, listed and planned once
    as Spark's sources plan them for ``threads`` cores (txnlog.engine.plan), every segment read whole: the data
    partitions' and the ``__transaction_state`` partitions' jobs, and the ``__consumer_offsets`` partitions' (whole
    partitions) as a function of the topic partitions whose groups' offsets are wanted (None: all;
    :class:`OffsetsJobs`). ``shared`` and ``dumps`` as txnlog.engine.settings.log_dir_settings takes them."""
    segments, txn_state = log_dir_settings(decode, scratch, shared=shared, dumps=dumps)
    data_files, coordinator_files = files_table([*inv.segments, *inv.snapshots]), files_table(inv.txn_state_segments)
    offsets_files = files_table(inv.consumer_offsets_segments)
    checkpoints = checkpoint_rows(inv.checkpoints) if segments.transactions else []
    minimum = max(2, threads * 2)
    local = Plan(LOCAL_TASK_BYTES, min_partitions=minimum, whole=segments.transactions, cores=threads)
    data = plan_tasks(local, data_files, checkpoints)
    coordinators = plan_tasks(Plan(min_partitions=minimum, whole=txn_state.reduce, cores=threads), coordinator_files)
    groups = [task.files() for task in plan_tasks(Plan(min_partitions=minimum, whole=True), offsets_files)]

    jobs: list[Job] = [
        (
            [_sized(partial(log_dir_task, task, segments), task, segments.edge_segment_bytes) for task in data],
            SEGMENT_SUMMARY_SCHEMA,
        ),  # fmt: skip
        ([partial(txn_state_task, task.files(), txn_state) for task in coordinators], TXN_STATE_SOURCE_SCHEMA),
    ]
    return jobs, OffsetsJobs(groups, decode)


def _sized(call: Task, task: FilesTask, big_bytes: int) -> Task:
    """``call`` as a :class:`BigTask` where ``task`` holds a ``.log`` file of ``big_bytes`` or more."""
    table = task.table
    logs = pc.equal(table.column("kind").cast(pa.string()), "log")
    sizes = np.asarray(pc.fill_null(pc.if_else(logs, table.column("size"), 0), 0).to_numpy(), np.int64)
    return BigTask(call) if sizes.size and int(sizes.max()) >= big_bytes else call


def run_here(jobs: list[Job], threads: int = 1) -> list[pa.Table]:
    """The local placement: every task of each (tasks, schema) of ``jobs`` run by ``threads`` threads of this
    process (the first job's tasks first), one Arrow table of ``schema`` per job, its tasks' rows in their order,
    so the rows are those one thread gives.

    Threads, not processes: the decoders' loops are compiled without the GIL (txnlog.kafka.jit) and Arrow's
    kernels release it, so two threads decode at once with no fork, no second copy of the compiled decoders and
    nothing pickled between them (benchmarks/RESULTS.md §2, "One thread per core in the driver")."""
    calls = [(i, task) for i, (tasks, _) in enumerate(jobs) for task in tasks]

    def run(call: tuple[int, Task]) -> pa.Table:
        return task_table(call[1](), jobs[call[0]][1])

    if threads > 1 and len(calls) > 1:
        read = _apart(calls, run, min(threads, len(calls)))
    else:
        read = [run(call) for call in calls]
    tables: dict[int, list[pa.Table]] = {}
    for (i, _), table in zip(calls, read, strict=True):
        if table.num_rows:
            tables.setdefault(i, []).append(table)
    return [pa.concat_tables(tables[i]) if i in tables else schema.empty_table() for i, (_, schema) in enumerate(jobs)]


def _apart(calls: list[tuple[int, Task]], run: Callable[[tuple[int, Task]], pa.Table], threads: int) -> list[pa.Table]:
    """``run`` of each of ``calls`` on ``threads`` threads, each thread taking the first call left that is not a
    :class:`BigTask` while another runs (where only those are left, it waits): the tables in the calls' order."""
    big = [isinstance(task, BigTask) for _, task in calls]
    left, out = list(range(len(calls))), [pa.table({})] * len(calls)
    state, changed = {"big": 0, "failed": False}, threading.Condition()

    def next_call() -> int | None:
        with changed:
            while left and not state["failed"]:
                i = next((i for i in left if not (big[i] and state["big"])), None)
                if i is not None:
                    left.remove(i)
                    state["big"] += big[i]
                    return i
                changed.wait()
            return None

    def work() -> None:
        while (i := next_call()) is not None:
            try:
                out[i] = run(calls[i])
            except BaseException:
                state["failed"] = True
                raise
            finally:
                with changed:
                    state["big"] -= big[i]
                    changed.notify_all()

    with ThreadPoolExecutor(threads, thread_name_prefix="txnlog-read") as pool:
        for done in [pool.submit(work) for _ in range(threads)]:
            done.result()
    return out


def task_table(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """A task's batches as one table of ``schema`` (a task may yield its columns in its own order)."""
    tables = [_conform(pa.Table.from_batches([b]), schema) for b in batches]
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table``'s columns in ``target``'s order and types."""
    if table.schema.equals(target, check_metadata=False):
        return table
    columns: list[Any] = [table.column(f.name).cast(f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)


def decode_here(offline: Offline, decode: Decode, scratch: str, threads: int = 1) -> Decoded:
    """The local placement's decode of a small input, no Spark query: the tasks the Data Sources run
    (:func:`log_dir_jobs`) run here by ``threads`` threads (:func:`run_here`), the kafka-dump-log.sh files read by
    txnlog.engine.spark.dump_log.read_dump_logs_here on as many and merged and reduced with the log dirs' rows
    (txnlog.engine.staging.merged_here, as Spark's tasks do per partition), Arrow tables handed on. Every segment is
    read whole (split segments are for Spark's tasks); the ``__consumer_offsets`` partitions when a step asks."""

    inv, shared = offline.inventory, bool(offline.dump_files)  # a live input is never read here (Placement)
    jobs, offsets_jobs = log_dir_jobs(inv, decode, scratch, shared=shared, dumps=shared, threads=threads)
    # the walk over every __consumer_offsets record starts now, beside the decode: it does not depend on what the
    # blocked step will ask for, which is known only once the tables are built
    picked = offsets_jobs.indexed_now() if inv.consumer_offsets_segments else offsets_jobs

    def offsets(wanted: list[tuple[str, int]]) -> pa.Table:  # read when a step asks (GroupOffsets)
        return run_here(picked(wanted), threads)[0]

    summary, records = (_labelled(t, InputSource.SEGMENTS) for t in run_here(jobs, threads))
    release_output_blocks(trim=True)  # the tables' build and writes come next in this process
    read = set(inv.txn_state_partitions)
    if shared:
        # Lazy: the dump reader's module defines Spark's Data Source too (pyspark), and loads only for dumps.
        from txnlog.engine.spark.dump_log import read_dump_logs_here

        dumped, dumped_records = (
            _labelled(t, InputSource.DUMP_LOG) for t in read_dump_logs_here(offline.dump_inputs, threads)
        )
        summary = pa.concat_tables([summary, dumped], promote_options="default")
        records = pa.concat_tables([records, dumped_records], promote_options="default")
        read |= distinct(records.column("coordinator_partition"))
    times = as_of_rule.broker_times_of(summary, records)
    if shared:  # the dumps' and the log dirs' rows of a partition merged, and the coordinator's reduced, together
        summary, records = merged_here(summary, records, inv.checkpoints, scratch)
    return Decoded(
        summary, records, times, txn_state_read=frozenset(read), checkpoints=tuple(inv.checkpoints),
        offsets=GroupOffsets(offsets) if inv.consumer_offsets_segments else None,
    )  # fmt: skip


def _labelled(table: pa.Table, source: InputSource) -> pa.Table:
    """``table`` with its ``input`` column: which input its rows came from."""
    return table.append_column("input", pa.repeat(pa.scalar(source.value, pa.string()), table.num_rows))
