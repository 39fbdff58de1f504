"""The ``transactions`` table without the JVM: written by the tasks that rebuilt it, in Arrow.

Every transaction of the input goes to ``transactions`` (hundreds of thousands per GiB of an
exactly-once workload), but only a few of them matter for the verdicts: those open on some
replica, and completed ones whose marker is not yet below the high watermark (they still hold the
LSO: ``UnifiedLog.lastStableOffset``). So the tasks that finish a partition's transactions
(``txnlog.rules.transactions``) write *all* of them to a staging directory (Arrow IPC files, see
:func:`write_raw`), with pyarrow, and hand Spark only the few that matter (:func:`verdict_relevant`).
Once the run's ``as_of`` and the coordinator's owners are known, ``txnlog.engine.spark.staged_table.StagedTable``
turns the staged files into the table's files, again in Python tasks (:func:`finish_files`, :func:`finish`),
and the Delta writer commits them as they are. Rows never pass through the JVM: it schedules tasks and
moves file names.
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from txnlog.broker.as_of import MAX_MS
from txnlog.kafka.wire import ControlType, TransactionState
from txnlog.model import contract
from txnlog.model.contract import Outcome
from txnlog.model.errors import UsageError
from txnlog.model.rows import repeated

#: columns of a staged transaction (names of the segments source's schema; the job reads the same ones)
RAW_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "first_offset",
    "replicas",
    "open_replicas",
    "behind_replicas",
    "open_on_lead",
    "diverged",
    "last_offset",
    "producer_epoch",
    "min_epoch",
    "first_timestamp",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "marker_offset",
    "control_type",
    "marker_epoch",
    "coordinator_epoch",
    "marker_timestamp",
    "prev_marker_offset",
    "prev_marker_type",
    "prev_marker_epoch",
    "prev_coordinator_epoch",
    "snapshot_coordinator_epoch",
    "snapshot_offset",
    "started_before_log_start",
)

#: columns of a staged ``__transaction_state`` record: what a ``coordinator_history`` row takes from it (the
#: record's file, broker and quarantine columns stay behind: the file path alone weighed a third of a row)
HISTORY_COLUMNS = tuple(f.name for f in contract.COORDINATOR_HISTORY if f.name not in ("cluster", "as_of"))


def filesystem_of(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem for ``uri`` (a path, ``file://``, or a URI Spark users write) and the path in it."""
    if uri.startswith("s3a://"):  # Hadoop's s3a:// is s3:// to pyarrow
        uri = "s3://" + uri[len("s3a://") :]
    if "://" in uri and not uri.startswith("file://"):
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), uri[len("file://") :] if uri.startswith("file://") else uri


#: suffix of a staged file: the Arrow IPC file format (``pyarrow.ipc``)
STAGED_SUFFIX = ".arrow"


def stage_name(keys: Iterable[str]) -> str:
    """A file name that depends only on what a task read, so a retried task overwrites its attempt."""
    digest = hashlib.sha1("\n".join(sorted(keys)).encode()).hexdigest()[:20]
    return f"part-{digest}{STAGED_SUFFIX}"


#: rows per record batch of a staged file, and about the rows finished and written at a time
#: (:func:`finish_files`): a file may hold every transaction of the partitions a task read, and finishing it
#: whole held ~0.5 GB per file of 400,000 transactions while two threads finished one each
STAGED_BATCH_ROWS = 1 << 16


def write_raw(table: pa.Table, stage: str, name: str, columns: tuple[str, ...] | None = RAW_COLUMNS) -> None:
    """Stage ``table`` (the transaction rows of some partitions, by default) as ``stage``/``name``.

    Staged files live only for the run and are read back whole by :func:`read_raw`, so they are Arrow
    IPC files with LZ4 frames, not Parquet: the ~400,000 transactions of a GiB of the dense mix took
    0.03 CPU-s to write and 0.02 to read this way, 0.14 and 0.27 as Parquet (10 MB instead of 6)."""
    with RawWriter(stage, name, columns) as writer:
        writer.write(table)


class RawWriter:
    """:func:`write_raw` a table at a time into one staged file: ``with RawWriter(stage, name) as w: w.write(t)``.
    The file is created by the first table with rows (none, no file); every table must have the first's schema."""

    def __init__(self, stage: str, name: str, columns: tuple[str, ...] | None = RAW_COLUMNS) -> None:
        self._stage, self._name, self._columns = stage, name, columns
        self._sink: Any = None
        self._writer: Any = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        data = table.select(list(self._columns)) if self._columns is not None else table
        try:
            if self._writer is None:
                filesystem, path = filesystem_of(self._stage)
                filesystem.create_dir(path, recursive=True)
                self._sink = filesystem.open_output_stream(posixpath.join(path, self._name), compression=None)
                options = ipc.IpcWriteOptions(compression="lz4")
                self._writer = ipc.new_file(self._sink, data.schema, options=options)
            self._writer.write_table(data, max_chunksize=STAGED_BATCH_ROWS)
        except OSError as e:
            raise StagingError(self._stage, e) from e

    def __enter__(self) -> RawWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            except OSError as e:
                raise StagingError(self._stage, e) from e


class StagingError(UsageError):
    """A staged file could not be written (a full disk, no permission). Not an ``OSError``: a reader that
    quarantines a file it cannot read must not take the scratch directory's failure for the input's."""

    def __init__(self, stage: str, error: OSError) -> None:
        super().__init__(
            f"cannot write the run's intermediate files under {stage}: {error}; free space there or give an "
            "--output on a filesystem with room (the scratch directory is the output's _txnlog_scratch)"
        )


def records_writer(stage: str | None, key: str) -> AbstractContextManager[RawWriter | None]:
    """Where a task stages every ``__transaction_state`` record it read of what ``key`` names (the columns of
    ``coordinator_history``, :data:`HISTORY_COLUMNS`): a :class:`RawWriter`, or None without a ``stage``."""
    return nullcontext() if stage is None else RawWriter(stage, stage_name([key]), columns=HISTORY_COLUMNS)


def read_raw(uri: str) -> pa.Table:
    """A file :func:`write_raw` staged (a path or URI)."""
    filesystem, path = filesystem_of(uri)
    with filesystem.open_input_file(path) as source:
        return ipc.open_file(source).read_all()


def raw_chunks(uri: str, rows: int | None = None) -> Iterator[pa.Table]:
    """A file :func:`write_raw` staged, as tables of its record batches of about ``rows`` rows each (by default
    two batches' worth; at least one table, maybe empty), read one after another."""
    rows = rows or 2 * STAGED_BATCH_ROWS
    filesystem, path = filesystem_of(uri)
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


def verdict_relevant(table: pa.Table, bound: np.ndarray) -> np.ndarray:
    """The rows the verdicts and the LSO need: open on some replica or on the lead, or closed by a marker
    at or above ``bound`` (per row: a lower bound of the partition's high watermark, so every completed
    transaction the LSO may still count as unstable is kept; the Spark side applies the exact rule)."""
    open_somewhere = pc.greater(pc.list_value_length(table.column("open_replicas")), 0)
    open_lead = pc.fill_null(table.column("open_on_lead"), False)
    marker = table.column("marker_offset")
    late_marker = pc.fill_null(pc.greater_equal(marker, pa.array(bound)), False)
    keep = pc.or_(pc.or_(pc.fill_null(open_somewhere, False), open_lead), late_marker)
    return np.asarray(keep.to_numpy(zero_copy_only=False), bool)


# ---------------------------------------------------------------------------
# staged rows → the table's rows
# ---------------------------------------------------------------------------


OWNERS_SCHEMA = pa.schema([("producer_id", pa.int64()), ("transactional_id", pa.string())])
SOURCES_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("source", pa.string())])


@dataclass(frozen=True)
class Finish:
    """What turns a staged transaction into a ``transactions`` row besides the run key: ``as_of`` for
    open transactions' durations, producer id → transactional.id, (topic, partition) → input label."""

    as_of_ms: int
    owners: pa.Table  # producer_id int64 (unique), transactional_id string
    sources: pa.Table  # topic string, partition int32, source string
    #: a live run's bounds (txnlog.engine.spark.live_batches.LiveCut.history_bounds): topic, partition, marker_from,
    #: first_from; a transaction is written only when its marker is at or after marker_from (or it has
    #: none) and its first offset at or after first_from
    bounds: pa.Table | None = None

    def __call__(self, raw: pa.Table, cluster: str, as_of: datetime) -> pa.Table:
        return finish(raw, self, cluster, as_of)


@dataclass(frozen=True)
class FinishHistory:
    """Staged ``__transaction_state`` records (``TXN_STATE_SCHEMA``) → ``coordinator_history`` rows."""

    def __call__(self, raw: pa.Table, cluster: str, as_of: datetime) -> pa.Table:

        n = raw.num_rows
        names = {int(s): s.kafka_name for s in TransactionState}
        codes = pc.fill_null(raw.column("state"), -1).to_numpy(zero_copy_only=False)
        state = pa.array([names.get(int(c)) for c in np.unique(codes)], pa.string())
        lookup = pa.array(np.searchsorted(np.unique(codes), codes))
        columns = {
            **_run_key(cluster, as_of, n),
            "record_timestamp": timestamps(raw.column("record_timestamp")),
            "state": state.take(lookup) if n else pa.array([], pa.string()),
            "txn_start_timestamp": timestamps(raw.column("txn_start_timestamp")),
            "last_update_timestamp": timestamps(raw.column("last_update_timestamp")),
        }
        arrays = []
        for field in contract.COORDINATOR_HISTORY:
            value = columns[field.name] if field.name in columns else raw.column(field.name)
            arrays.append(value.cast(field.type))
        return pa.Table.from_arrays(arrays, schema=contract.COORDINATOR_HISTORY)


def _run_key(cluster: str, as_of: datetime, n: int) -> dict[str, pa.Array]:
    """The run key columns of ``n`` rows (one value repeated, not a Python list of ``n`` objects)."""
    return {"cluster": repeated(cluster, pa.string(), n), "as_of": repeated(as_of, pa.timestamp("us", tz="UTC"), n)}


def timestamps(ms: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Epoch ms → timestamp (UTC); unknown (negative) and past-year-9999 values become null (a client clock
    in µs or ns: no reader's datetime holds it; txnlog.broker.as_of reports such segments as
    ``timestamp_in_future``)."""

    values = pc.fill_null(ms, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    ok = (values >= 0) & (values <= MAX_MS)
    return pa.array(np.where(ok, values, 0) * 1000, pa.timestamp("us", tz="UTC"), mask=~ok)


def lookup(keys: pa.Table, on: list[str], table: pa.Table, value: str) -> pa.ChunkedArray:
    """``table[value]`` for each row of ``keys``: a left join on ``on`` (unique in ``table``), order kept;
    null where a key is null or not in ``table``. Hash lookups of each row's key codes, not a join."""
    found = pa.chunked_array(
        [pc.index_in(key_codes(keys, on, table), value_set=key_codes(table, on, table), skip_nulls=True)]
    )
    return table.column(value).take(found)


def key_codes(rows: pa.Table, on: list[str], table: pa.Table) -> pa.Array:
    """One int64 per row of ``rows`` naming its ``on`` values among ``table``'s (null: a value ``table``
    lacks, or a null)."""
    codes = np.zeros(rows.num_rows, np.int64)
    valid = np.ones(rows.num_rows, bool)
    for name in on:
        values = pc.unique(table.column(name))
        code = pc.index_in(rows.column(name), value_set=values, skip_nulls=True)
        valid &= np.asarray(pc.is_valid(code).to_numpy(zero_copy_only=False), bool)
        codes = codes * max(len(values), 1) + pc.fill_null(code, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return pa.array(codes, mask=~valid)


def _duration(end: pa.ChunkedArray | pa.Array, start: pa.ChunkedArray | pa.Array) -> pa.Array:
    """end - start, null where either is unknown or the difference does not fit a long (extreme clocks)."""
    ok = np.asarray(pc.and_(pc.is_valid(end), pc.is_valid(start)).to_numpy(zero_copy_only=False), bool)
    e = pc.fill_null(end, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    s = pc.fill_null(start, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    with np.errstate(over="ignore"):
        d = e - s
    ok &= ((e ^ s) & (e ^ d)) >= 0  # no signed overflow
    return pa.array(np.where(ok, d, 0), pa.int64(), mask=~ok)


def finish(raw: pa.Table, how: Finish, cluster: str, as_of: datetime) -> pa.Table:
    """Staged transaction rows → rows of ``txnlog.model.contract.TRANSACTIONS`` for the run (cluster, as_of)."""
    if how.bounds is not None and how.bounds.num_rows and raw.num_rows:
        raw = raw.filter(_within_bounds(raw, how.bounds))
    n = raw.num_rows
    marker = raw.column("marker_offset")
    control = raw.column("control_type")

    outcome = pc.if_else(
        pc.is_null(marker),
        Outcome.OPEN.value,
        pc.if_else(
            pc.equal(control, int(ControlType.ABORT)),
            Outcome.ABORT.value,
            # a marker whose type the input does not show (kafka-dump-log.sh without --deep-iteration)
            pc.if_else(pc.equal(control, int(ControlType.COMMIT)), Outcome.COMMIT.value, Outcome.UNKNOWN.value),
        ),
    )
    outcome = pc.fill_null(outcome, Outcome.UNKNOWN.value)
    first_ms = pc.coalesce(raw.column("first_timestamp"), raw.column("last_timestamp"))
    end_ms = pc.coalesce(raw.column("marker_timestamp"), pa.scalar(how.as_of_ms, pa.int64()))
    columns = {
        **_run_key(cluster, as_of, n),
        "outcome": outcome,
        "first_timestamp": timestamps(raw.column("first_timestamp")),
        "last_timestamp": timestamps(raw.column("last_timestamp")),
        "marker_timestamp": timestamps(raw.column("marker_timestamp")),
        "duration_ms": _duration(end_ms, first_ms),
        "transactional_id": lookup(raw, ["producer_id"], how.owners, "transactional_id"),
        "source": lookup(raw, ["topic", "partition"], how.sources, "source"),
    }
    arrays = []
    for field in contract.TRANSACTIONS:
        value = columns[field.name] if field.name in columns else raw.column(field.name)
        arrays.append(value.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=contract.TRANSACTIONS)


def _within_bounds(raw: pa.Table, bounds: pa.Table) -> pa.ChunkedArray:
    """Rows of ``raw`` the run writes (see :attr:`Finish.bounds`); partitions without bounds: all."""
    on = ["topic", "partition"]
    marker_from = pc.fill_null(lookup(raw, on, bounds, "marker_from"), -1)
    first_from = pc.fill_null(lookup(raw, on, bounds, "first_from"), -1)
    marker = raw.column("marker_offset")
    new_end = pc.or_(pc.is_null(marker), pc.greater_equal(pc.fill_null(marker, 0), marker_from))
    return pc.and_(new_end, pc.greater_equal(raw.column("first_offset"), first_from))


def finish_files(
    batches: Iterator[pa.RecordBatch], how: Finisher, target: str, cluster: str, as_of: datetime
) -> Iterator[pa.RecordBatch]:
    filesystem, directory = filesystem_of(target)
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


Finisher = Callable[[pa.Table, str, datetime], pa.Table]
