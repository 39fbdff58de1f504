"""The run's intermediate files: staged rows of the ``transactions`` and ``coordinator_history`` tables.

Every transaction of the input goes to ``transactions``, but only the few the verdicts read travel on
(txnlog.rules.finish.verdict_relevant). So the task that merges a partition's transactions
(txnlog.rules.transactions) or reduces a coordinator partition's records (txnlog.rules.coordinator) stages all
of them here as Arrow IPC files under the run's scratch directory, and hands on only what the tables need. Once
the run's ``as_of`` and owners are known, :func:`finish_files` turns the staged files into the tables' Parquet
files (txnlog.engine.spark.staged_table), which the Delta writer commits as they are.

The rules decide; this module only writes and reads. Every path goes through txnlog.sources.storage.filesystem,
so a scratch directory on object storage takes the configured storage settings.
"""

from __future__ import annotations

import hashlib
import posixpath
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from txnlog.model import contract
from txnlog.model.arrow import distinct
from txnlog.model.errors import UsageError
from txnlog.model.rows import KIND_MARKER, KIND_PIECE, KIND_RUN, SEGMENT_SUMMARY_SCHEMA, Checkpoint
from txnlog.rules.coordinator import distinct_records, reduce_records
from txnlog.rules.finish import HISTORY_COLUMNS, RAW_COLUMNS, Finisher
from txnlog.rules.transactions import (
    Checkpoints,
    PartitionTransactions,
    accumulated,
    checkpoints_of,
)
from txnlog.sources import storage

#: suffix of a staged file: the Arrow IPC file format (``pyarrow.ipc``)
STAGED_SUFFIX = ".arrow"

#: rows per record batch of a staged file, and about the rows finished and written at a time
#: (:func:`finish_files`): a file may hold every transaction of the partitions a task read, so it is finished a
#: chunk at a time (benchmarks/RESULTS.md §2)
STAGED_BATCH_ROWS = 1 << 16

#: the tables whose rows are staged as files under the scratch directory's ``<name>``: the rules give what
#: finishes them (txnlog.rules.finish), txnlog.engine.spark.staged_table the files
STAGED = ("transactions", "coordinator_history")


def stage_name(keys: Iterable[str]) -> str:
    """A file name that depends only on what a task read, so a retried task overwrites its attempt."""
    digest = hashlib.sha1("\n".join(sorted(keys)).encode()).hexdigest()[:20]
    return f"part-{digest}{STAGED_SUFFIX}"


def finished_file_name(broker: str, path: str, piece: int | None) -> str:
    """The staged file of the transactions a file (or piece) finished itself (txnlog.engine.segments.Edges): named
    by what the task read, so a retried task overwrites it and the merge can drop a dead piece's
    (:func:`merge_partition`)."""

    return stage_name(["finished", broker, path, str(piece)])


def fragments_dir(stage: str, topic: str, partition: int) -> str:
    """Where a split partition's fragments are staged (``fragments_stage`` option): one directory per partition."""

    return f"{stage.rstrip('/')}/{topic}-{partition}"


@dataclass(frozen=True)
class StageDir:
    """A staging directory resolved once (txnlog.sources.storage.filesystem): the ``uri`` as given, its
    ``filesystem`` and its ``root`` inside it. A task that writes, lists, reads and deletes staged files under one
    directory resolves it once, not at every file."""

    uri: str
    filesystem: Any
    root: str

    @classmethod
    def of(cls, uri: str | StageDir) -> StageDir:
        if isinstance(uri, StageDir):
            return uri
        filesystem, root = storage.filesystem(uri)
        return cls(uri, filesystem, root)

    def files(self) -> list[str]:
        """The staged files directly under this directory (paths inside :attr:`filesystem`), sorted; none if
        it is absent."""
        infos = self.filesystem.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(STAGED_SUFFIX))

    def uri_of(self, path: str) -> str:
        """``path`` (one of :meth:`files`) as a URI of the same form as :attr:`uri`."""
        prefix = self.uri[: len(self.uri) - len(self.root)] if self.uri.endswith(self.root) else ""
        return prefix + path

    def read(self, path: str, columns: Sequence[str] | None = None) -> pa.Table:
        """The staged file ``path`` (inside :attr:`filesystem`), as :func:`read_raw`."""
        return _read_ipc(self.filesystem, path, columns)

    def delete(self, names: Iterable[str]) -> None:
        """Remove the staged files ``names`` under this directory (those that exist)."""
        for name in names:
            target = f"{self.root}/{name}"
            if self.filesystem.get_file_info(target).is_file:
                self.filesystem.delete_file(target)


def write_raw(table: pa.Table, stage: str | StageDir, name: str, columns: tuple[str, ...] | None = RAW_COLUMNS) -> None:
    """Stage ``table`` (the transaction rows of some partitions, by default) as ``stage``/``name``.

    Staged files live only for the run and are read back whole by :func:`read_raw`, so they are Arrow IPC files
    with LZ4 frames, not Parquet: cheaper to write and read, and smaller (benchmarks/RESULTS.md §2)."""
    with RawWriter(stage, name, columns) as writer:
        writer.write(table)


class _Kept:
    """The columns of the staged files that this process keeps in memory as it writes them (:func:`kept_in_memory`):
    per stage directory the columns kept, per staged file the tables written into it, their bytes in all and the
    most they may take (0: no limit), and the files no longer kept (read again: they did not fit)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.columns: dict[str, list[str]] = {}
        self.tables: dict[str, list[pa.Table]] = {}
        self.held = 0
        self.budget = 0
        self.dropped: set[str] = set()

    def release(self, path: str) -> None:
        """Keep nothing more of the file ``path`` (under the lock)."""
        self.held -= sum(t.nbytes for t in self.tables.pop(path, []))


_KEPT = _Kept()


@contextmanager
def kept_in_memory(stages: Mapping[str, Sequence[str]], budget: int = 0) -> Iterator[None]:
    """While inside, every file this process stages under one of ``stages``' directories (directory -> columns)
    also keeps those of its columns it has, as written (the same buffers, no copy), for :func:`kept_tables`: a
    reader in this process then needs no second read of the file. Only where the files are written in this
    process (the driver placement); dropped on exit. With a ``budget`` (bytes), a file whose columns would take the
    kept ones past it is not kept (a reader reads it): the memory kept does not grow with the input."""
    keys = {_local(stage): list(columns) for stage, columns in stages.items()}
    with _KEPT.lock:
        _KEPT.columns.update(keys)
        _KEPT.budget = budget
    try:
        yield
    finally:
        with _KEPT.lock:
            for stage in keys:
                _KEPT.columns.pop(stage, None)
                for path in [p for p in _KEPT.tables if posixpath.dirname(p) == stage]:
                    _KEPT.release(path)
                _KEPT.dropped -= {p for p in _KEPT.dropped if posixpath.dirname(p) == stage}
            _KEPT.budget = 0


def kept_tables(uri: str) -> list[pa.Table] | None:
    """What :func:`kept_in_memory` kept of the staged file ``uri`` (its tables in the order written), or None
    where nothing was kept (the file is to be read)."""
    with _KEPT.lock:
        return _KEPT.tables.get(_local(uri))


def forget_kept(uri: str) -> None:
    """Free what :func:`kept_in_memory` kept of the staged file ``uri`` (a reader that is done with it): the file
    is read if asked for again."""
    with _KEPT.lock:
        path = _local(uri)
        _KEPT.release(path)
        if posixpath.dirname(path) in _KEPT.columns:  # while its stage keeps: not kept again
            _KEPT.dropped.add(path)


def _local(uri: str) -> str:
    return posixpath.normpath(storage.filesystem(uri)[1])


class RawWriter:
    """:func:`write_raw` a table at a time into one staged file: ``with RawWriter(stage, name) as w: w.write(t)``.
    The file is created by the first table with rows (none, no file); every table must have the first's schema."""

    def __init__(self, stage: str | StageDir, name: str, columns: tuple[str, ...] | None = RAW_COLUMNS) -> None:
        self._stage, self._name, self._columns = stage, name, columns
        self._dir: StageDir | None = None
        self._sink: Any = None
        self._writer: Any = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        data = table.select(list(self._columns)) if self._columns is not None else table
        self._keep(data)
        try:
            if self._writer is None:
                where = self._directory()
                where.filesystem.create_dir(where.root, recursive=True)
                target = posixpath.join(where.root, self._name)
                self._sink = where.filesystem.open_output_stream(target, compression=None)
                options = ipc.IpcWriteOptions(compression="lz4")
                self._writer = ipc.new_file(self._sink, data.schema, options=options)
            self._writer.write_table(data, max_chunksize=STAGED_BATCH_ROWS)
        except OSError as e:
            raise StagingError(self._uri, e) from e

    @property
    def _uri(self) -> str:
        return self._stage.uri if isinstance(self._stage, StageDir) else self._stage

    def _directory(self) -> StageDir:
        """The stage directory, resolved at the first need and kept for the writer's life."""
        if self._dir is None:
            self._dir = StageDir.of(self._stage)
        return self._dir

    def _keep(self, data: pa.Table) -> None:
        """:func:`kept_in_memory`'s copy of ``data`` (its buffers), if its stage keeps one; a file's first table
        starts its list anew (a retried write overwrites the file)."""
        if not _KEPT.columns:
            return
        stage = posixpath.normpath(self._directory().root)
        with _KEPT.lock:
            columns = _KEPT.columns.get(stage)
            if columns is None:
                return
            path = posixpath.join(stage, self._name)
            if self._writer is None:  # a file's first table: anew (a retried write overwrites the file)
                _KEPT.release(path)
                _KEPT.dropped.discard(path)
            part = data.select([c for c in columns if c in data.column_names])
            if path in _KEPT.dropped or (_KEPT.budget and _KEPT.held + part.nbytes > _KEPT.budget):
                _KEPT.release(path)  # kept whole or not at all
                _KEPT.dropped.add(path)
                return
            _KEPT.tables.setdefault(path, []).append(part)
            _KEPT.held += part.nbytes

    def __enter__(self) -> RawWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            except OSError as e:
                raise StagingError(self._uri, e) from e


class StagingError(UsageError):
    """A staged file could not be written (a full disk, no permission). Not an ``OSError``: a reader that
    quarantines a file it cannot read must not take the scratch directory's failure for the input's."""

    def __init__(self, stage: str, error: OSError) -> None:
        super().__init__(
            f"cannot write the run's intermediate files under {stage}: {error}; free space there or give an "
            "--output on a filesystem with room (the scratch directory is the output's _txnlog_scratch)"
        )


def records_writer(stage: str | StageDir | None, key: str) -> AbstractContextManager[RawWriter | None]:
    """Where a task stages every ``__transaction_state`` record it read of what ``key`` names (the columns of
    ``coordinator_history``, ``HISTORY_COLUMNS``): a :class:`RawWriter`, or None without a ``stage``."""
    return nullcontext() if stage is None else RawWriter(stage, stage_name([key]), columns=HISTORY_COLUMNS)


def read_raw(uri: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A file :func:`write_raw` staged (a path or URI); with ``columns``, those of them the file has, in that
    order, and only their buffers read."""
    return _read_ipc(*storage.filesystem(uri), columns)


def _read_ipc(filesystem: Any, path: str, columns: Sequence[str] | None) -> pa.Table:
    with filesystem.open_input_file(path) as source:
        if columns is None:
            return ipc.open_file(source).read_all()
        names = ipc.open_file(source).schema.names
        present = [c for c in columns if c in names]
        options = ipc.IpcReadOptions(included_fields=sorted(names.index(c) for c in present))
        return ipc.open_file(source, options=options).read_all().select(present)


def raw_chunks(uri: str, rows: int | None = None) -> Iterator[pa.Table]:
    """A file :func:`write_raw` staged, as tables of its record batches of about ``rows`` rows each (by default
    two batches' worth; at least one table, maybe empty), read one after another."""
    rows = rows or 2 * STAGED_BATCH_ROWS
    filesystem, path = storage.filesystem(uri)
    with filesystem.open_input_file(path) as source:
        reader = ipc.open_file(source)
        held: list[pa.RecordBatch] = []
        count = 0
        for i in range(reader.num_record_batches):
            held.append(reader.get_batch(i))
            count += held[-1].num_rows
            if count >= rows:
                yield pa.Table.from_batches(held, reader.schema)
                held, count = [], 0
        if held or reader.num_record_batches == 0:
            yield pa.Table.from_batches(held, reader.schema)


def staged_files(directory: str) -> list[str]:
    """The staged files directly under ``directory`` (a path or URI, as given), sorted; none if it is absent."""
    where = StageDir.of(directory)
    return [where.uri_of(path) for path in where.files()]


def finish_files(
    batches: Iterator[pa.RecordBatch], how: Finisher, target: str, cluster: str, as_of: datetime
) -> Iterator[pa.RecordBatch]:
    """Each staged file named in ``batches``' ``path`` column finished by ``how`` into one Parquet file under
    ``target``; one row (the file's name, its rows) per file."""
    filesystem, directory = storage.filesystem(target)
    filesystem.create_dir(directory, recursive=True)
    for batch in batches:
        for path in batch.column("path").to_pylist():
            name = f"part-{uuid.uuid4().hex}-c000.snappy.parquet"
            written = 0
            writer: pq.ParquetWriter | None = None
            try:  # a chunk at a time (``how`` is row by row): the memory of a chunk, not of the file
                for chunk in raw_chunks(path):
                    rows = how(chunk, cluster, as_of)
                    if writer is None:
                        out = posixpath.join(directory, name)
                        options = contract.parquet_options(rows.schema)
                        writer = pq.ParquetWriter(out, rows.schema, filesystem=filesystem, **options)
                    writer.write_table(rows)
                    written += rows.num_rows
            finally:
                if writer is not None:
                    writer.close()
            yield pa.RecordBatch.from_pydict({"path": [name], "rows": [written]})


# ---------------------------------------------------------------------------
# the rules' results, staged
# ---------------------------------------------------------------------------


def staged_transactions(
    acc: PartitionTransactions,
    checkpoints: Checkpoints,
    schema: pa.Schema,
    *,
    stage: str | StageDir | None,
    stage_file: str | None = None,
    writer: RawWriter | None = None,
    max_rows: int = 1 << 16,
) -> Iterator[pa.RecordBatch]:
    """The transactions of the partitions ``acc`` holds (txnlog.rules.transactions), ``max_rows`` rows per
    batch. With a ``stage`` (a directory) or a ``writer`` (a staged file already open, which several merges
    write), every one is staged (as ``stage_file``, default: a name of the replicas) and only those the verdicts
    need are yielded; else every one is yielded."""
    merged = acc.merged(checkpoints, schema)
    if merged is None:
        return
    table = merged.table
    if writer is not None:
        writer.write(table)
    elif stage is not None:
        write_raw(table, stage, stage_file or stage_name(f"{b}/{t}-{p}" for b, t, p in merged.replicas))
    if stage is not None or writer is not None:
        table = merged.verdict_relevant()
    yield from table.to_batches(max_chunksize=max_rows)


def staged_transactions_of_summary(
    table: pa.Table, checkpoints: Checkpoints, stage: str | StageDir | None, schema: pa.Schema | None = None
) -> pa.Table:
    """txnlog.rules.transactions.transactions_of_summary, every transaction staged under ``stage`` and only those
    the verdicts need returned (``stage`` None: every one returned)."""
    schema = schema or table.schema
    batches = staged_transactions(accumulated(table), checkpoints, schema, stage=stage)
    return pa.Table.from_batches(list(batches), schema=schema)


def reduced_staged(records: pa.Table, sink: RawWriter | None) -> pa.Table:
    """txnlog.rules.coordinator.reduce_records of ``records``, every distinct record staged into ``sink``."""
    records = distinct_records(records)
    if sink is not None:
        sink.write(records)
    return reduce_records(records)


def merge_partition(
    table: pa.Table, checkpoints: Checkpoints, stage: str | None, fragments_stage: str | None = None
) -> pa.Table:
    """One partition's rows (of SEGMENT_SUMMARY_SCHEMA) merged into its transactions where the partition is held
    whole (txnlog.rules.transactions), every one staged under ``stage`` and those the verdicts need returned (``stage``
    None: every one returned). Its dead pieces' ``piece`` rows (txnlog.engine.spark.stitch) drop what those pieces
    finished themselves from ``stage``; ``fragments_stage``: where its reading tasks staged its fragments
    (:func:`fragments_dir`), read here but the dead pieces'. Each directory is resolved once (:class:`StageDir`)."""
    topic, partition = table.column("topic")[0].as_py(), int(table.column("partition")[0].as_py())
    table, dead = _without_dead(table)
    into = None if stage is None else StageDir.of(stage)
    if into is not None and dead:
        # the whole walk passes over a dead piece's starts, so what it finished is another live piece's
        into.delete(finished_file_name(broker, file, piece) for broker, file, piece in dead)
    if fragments_stage is not None:
        table = _with_staged(table, StageDir.of(fragments_dir(fragments_stage, topic, partition)), dead)
    return staged_transactions_of_summary(table, checkpoints, into, SEGMENT_SUMMARY_SCHEMA)


def _without_dead(table: pa.Table) -> tuple[pa.Table, frozenset[tuple[str, str, int]]]:
    """One partition's rows less its dead pieces' ``piece`` rows, and those pieces' (broker, file, piece)."""
    is_dead = pc.fill_null(pc.equal(table.column("kind"), KIND_PIECE), False)
    if not pc.any(is_dead).as_py():
        return table, frozenset()
    rows = table.filter(is_dead).select(["broker", "file", "piece"]).to_pylist()
    return table.filter(pc.invert(is_dead)), frozenset((r["broker"], r["file"], int(r["piece"])) for r in rows)


def _with_staged(table: pa.Table, where: StageDir, dead: frozenset[tuple[str, str, int]]) -> pa.Table:
    """``table`` (one partition's rows) plus the fragments its reading tasks staged in ``where``, but the
    ``dead`` pieces'."""

    parts = [where.read(path) for path in where.files()]
    if not parts:
        return table
    frags = pa.concat_tables(parts)
    if dead:
        keys = zip(*(frags.column(c).to_pylist() for c in ("broker", "file", "piece")), strict=True)
        frags = frags.filter(pa.array(np.array([k not in dead for k in keys], bool)))
    frags = frags.select(table.column_names).cast(table.schema)
    return pa.concat_tables([table, frags])


def reduce_partition(records: pa.Table, stage: str | StageDir | None) -> pa.Table:
    """One coordinator partition's ``record`` rows reduced where the partition is held whole
    (txnlog.rules.coordinator.reduce_records), every distinct record staged under ``stage`` (None: none)."""
    with records_writer(stage, f"{records.column('coordinator_partition')[0]}") as sink:
        return reduced_staged(records, sink)


def merged_here(
    summary: pa.Table, records: pa.Table, checkpoints: Sequence[Checkpoint], scratch: str
) -> tuple[pa.Table, pa.Table]:
    """``summary`` and ``records`` decoded in several tasks (kafka-dump-log.sh files beside the log dirs) as the rules
    take them, in this process: the fragments merged into ``transaction`` rows in place of the fragments (every
    transaction staged under ``scratch``/transactions), the coordinator's records reduced per partition (every record
    staged under ``scratch``/coordinator_history). In Spark, the same happens per partition in tasks
    (txnlog.engine.spark.collect.decoded_rows)."""
    merged = _merged_fragments(summary, checkpoints, f"{scratch}/transactions")
    rest = summary.filter(pc.invert(pc.is_in(summary.column("kind"), pa.array([KIND_RUN, KIND_MARKER]))))
    summary = pa.concat_tables([rest, merged], promote_options="default")
    return summary, _reduced_records(records, f"{scratch}/coordinator_history")


def _merged_fragments(summary: pa.Table, checkpoints: Sequence[Checkpoint], stage: str) -> pa.Table:
    """The transaction rows merged from ``summary``'s fragments (in the summary source's columns)."""
    names = SEGMENT_SUMMARY_SCHEMA.names
    kinds = pa.array(["run", "marker", "segment", "snapshot"])
    pieces = summary.filter(pc.is_in(summary.column("kind"), kinds)).select(names)
    pieces = pieces.filter(pc.and_(pc.is_valid(pieces.column("topic")), pc.is_valid(pieces.column("partition"))))
    if not pieces.num_rows:
        return SEGMENT_SUMMARY_SCHEMA.empty_table()
    return staged_transactions_of_summary(pieces, checkpoints_of(checkpoints), stage, SEGMENT_SUMMARY_SCHEMA)


def _reduced_records(records: pa.Table, stage: str) -> pa.Table:
    """``records`` whose ``record`` rows were not reduced where decoded, reduced per coordinator partition,
    every record staged under ``stage``; other rows as they are."""
    columns = [c for c in records.column_names if c != "transitions"]
    recs = records.filter(pc.equal(records.column("kind"), "record")).select(columns)
    parts = sorted(distinct(recs.column("coordinator_partition")))
    into = StageDir.of(stage)
    reduced = []
    for p in parts:
        reduced.append(reduce_partition(recs.filter(pc.equal(recs.column("coordinator_partition"), p)), into))
    others = records.filter(pc.not_equal(records.column("kind"), "record")).select(columns)
    others = others.append_column("transitions", pa.nulls(others.num_rows, pa.int64()))
    return pa.concat_tables([*[r.select(others.column_names).cast(others.schema) for r in reduced], others])
