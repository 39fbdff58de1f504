"""Writing and reading txnlog's Delta tables (docs/design.md §3).

Each output table lives at ``<output>/<table_name>``. A run is keyed by
(cluster, as_of): writing a run replaces that run's rows in one atomic commit
per table, and leaves every other run's rows alone (the history dashboards
read).

Two writers, same tables (protocol 1/2, unpartitioned, schema from
txnlog.model.contract):

``spark``
    delta-spark: ``df.write.format("delta").mode("overwrite")`` with
    ``replaceWhere`` on the run key. Only when the Delta jars are already on
    the classpath (``--jars``, a cluster image); txnlog never downloads them.
``deltalake``
    Spark writes plain Parquet (TIMESTAMP_MICROS) into a
    fresh ``stage-<uuid>/`` directory inside the table; the driver reads only
    the Parquet footers (size, rows, min/max/null counts) and commits, with
    delta-rs, RemoveActions for the files holding the run's old rows plus
    AddActions for the new files, in one transaction. The data never passes
    through the driver. The staged files are the table's data files: nothing
    is moved after the commit.

Finding a run's old files: a file whose statistics say it holds only this
(cluster, as_of) is removed whole; one whose statistics rule the run out is
kept; any other file (no statistics, or rows of several runs after someone
compacted the table) is rewritten without the run's rows, streamed batch by
batch, in the same commit.

The run key is stored at millisecond precision (Kafka's timestamp
resolution): ``as_of`` is truncated to the millisecond before use.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from txnlog import __version__
from txnlog.model import contract
from txnlog.model.config import parse_as_of
from txnlog.model.errors import UsageError
from txnlog.model.rows import repeated
from txnlog.output.spark_base import delta_spark_available, spark_struct, spark_type, temporary_conf
from txnlog.sources import storage

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Writer", "read_table", "resolve_writer", "table_uris", "write_tables"]

log = logging.getLogger(__name__)

Writer = Literal["auto", "deltalake", "spark"]

RUN_KEY = ("cluster", "as_of")
STAGE_PREFIX = "stage-"
# Delta convention (delta-spark truncates string statistics to 32 characters):
# longer values get no min/max, which every reader reads as "unknown".
STRING_STATS_MAX_CHARS = 32
_MS = timedelta(milliseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- public API --------------------------------------------------------------------------------


def table_uris(output: str) -> dict[str, str]:
    """Where each output table lives: ``{table_name: uri}`` (local paths made absolute).

    >>> table_uris("./out")["findings"]  # doctest: +SKIP
    '/home/me/out/findings'
    """
    base = _Location.of(output)
    return {name: base.child(name).uri for name in contract.TABLES}


def resolve_writer(spark: SparkSession | None, writer: Writer = "auto") -> Literal["deltalake", "spark"]:
    """The writer ``write_tables`` will use: ``auto`` is ``spark`` only when the Delta jars are present.

    Raises UsageError when ``spark`` is asked for and the jars are not on the classpath.
    """
    if writer not in ("auto", "deltalake", "spark"):
        raise UsageError(f"delta_writer: expected auto, deltalake or spark, got {writer!r}")
    if writer == "deltalake":
        return "deltalake"
    available = spark is not None and delta_spark_available(spark)
    if writer == "spark" and not available:
        raise UsageError(
            "delta_writer: spark needs the Delta Lake Spark jars on the classpath "
            "(io.delta.tables.DeltaTable not found); "
            "add them with spark-submit --jars delta-spark_2.13-<v>.jar,delta-storage-<v>.jar, "
            "or set delta_writer to auto or deltalake"
        )
    return "spark" if available else "deltalake"


@dataclass(frozen=True)
class Supersede:
    """Rows of an earlier run that the rows being written replace, dropped in the same commit.

    A live ``since-last-run`` run re-reads every transaction its previous run saw open and writes it
    again with what became of it, so the previous run's ``OPEN`` rows of the topics it read are
    superseded: ``transactions`` keeps every transaction once (txnlog.engine.spark.live_batches).
    """

    as_of: datetime  # the earlier run (same cluster)
    topics: tuple[str, ...]  # its rows of these topics ...
    outcome: str = "OPEN"  # ... with this outcome ...
    source: str = "live_log"  # ... read from this input

    def matches(self, batch: pa.RecordBatch, cluster: str) -> pa.Array:
        """Which rows of ``batch`` (a table's Parquet rows) are superseded."""
        names = batch.schema.names
        if not {"outcome", "source", "topic"} <= set(names):
            return pa.repeat(pa.scalar(False), batch.num_rows)
        return pc.and_(
            pc.and_(
                pc.equal(batch.column("cluster"), pa.scalar(cluster, batch.schema.field("cluster").type)),
                pc.equal(batch.column("as_of"), pa.scalar(self.as_of).cast(batch.schema.field("as_of").type)),
            ),
            pc.and_(
                pc.and_(pc.equal(batch.column("outcome"), self.outcome), pc.equal(batch.column("source"), self.source)),
                pc.is_in(batch.column("topic"), value_set=pa.array(list(self.topics), pa.string())),
            ),
        ).fill_null(False)

    def sql(self, cluster: str) -> str:
        """The same rows as a Delta SQL predicate (delta-spark's replaceWhere)."""
        topics = ", ".join(_sql_string(t) for t in self.topics) or "NULL"
        return (
            f"(cluster = {_sql_string(cluster)} AND as_of = TIMESTAMP '{_iso_ms(self.as_of)}' AND "
            f"outcome = {_sql_string(self.outcome)} AND source = {_sql_string(self.source)} AND topic IN ({topics}))"
        )


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@runtime_checkable
class ParquetTable(Protocol):
    """A table whose rows never become Spark rows: it writes its own Parquet files for a run
    (``txnlog.engine.spark.staged_table.StagedTable``), or hands them over as a DataFrame."""

    def write_parquet(self, target: str, cluster: str, as_of: datetime) -> int: ...

    def dataframe(self, cluster: str, as_of: datetime) -> DataFrame: ...


def write_tables(
    spark: SparkSession | None,
    output: str,
    tables: Mapping[str, DataFrame | pa.Table | ParquetTable],
    *,
    cluster: str,
    as_of: datetime,
    writer: Writer = "auto",
    supersede: Mapping[str, Supersede] | None = None,
) -> dict[str, int]:
    """Write one run's output tables; return the rows written per table.

    Each input (a Spark DataFrame, a small ``pyarrow.Table`` such as the
    one-row ``runs``, or a :class:`ParquetTable` that writes the contract's
    files itself) is conformed to the contract in txnlog.model.contract: the
    contract columns are selected in order and cast; other columns are
    dropped; a missing contract column raises ValueError. ``cluster`` and
    ``as_of`` columns are set from the arguments (they are the run key).
    The run's previous rows in each table are replaced in one commit per
    table; an empty input leaves the run with no rows (and creates the table,
    with its schema, if it did not exist). ``supersede``: per table, rows of an
    earlier run that the same commit drops (:class:`Supersede`). ``spark`` may be None when every
    input is a pyarrow.Table and ``writer`` is not ``spark``.

    >>> write_tables(spark, "./out", {"findings": findings_df, "runs": runs_table},
    ...              cluster="prod-eu-1", as_of=parse_as_of("2026-11-02T00:00:00Z"))  # doctest: +SKIP
    {'findings': 3, 'runs': 1}
    """
    if not isinstance(cluster, str) or not cluster:
        raise ValueError(f"cluster must be a non-empty string, got {cluster!r}")
    run_as_of = _run_as_of(as_of)
    unknown = [name for name in tables if name not in contract.TABLES]
    if unknown:
        raise ValueError(f"not output tables: {unknown}; tables are: {list(contract.TABLES)}")
    chosen = resolve_writer(spark, writer)
    if spark is None and any(not isinstance(data, (pa.Table, ParquetTable)) for data in tables.values()):
        raise ValueError("write_tables needs a SparkSession to write Spark DataFrames")

    base = _Location.of(output)
    written: dict[str, int] = {}
    for name, data in tables.items():
        location = base.child(name)
        started = time.monotonic()
        also = (supersede or {}).get(name)
        if also is not None:
            also = dataclasses.replace(also, as_of=_run_as_of(also.as_of))
        if chosen == "spark":
            assert spark is not None
            written[name] = _write_with_delta_spark(spark, location, name, data, cluster, run_as_of, also)
        else:
            written[name] = _write_with_deltalake(spark, location, name, data, cluster, run_as_of, also)
        log.info(
            "%s: %d rows for (%s, %s) in %.2fs via %s",
            location.uri,
            written[name],
            cluster,
            _iso_ms(run_as_of),
            time.monotonic() - started,
            chosen,
        )
    return written


def read_table(
    output: str,
    name: str,
    *,
    cluster: str | None = None,
    as_of: datetime | str | int | None = None,
    where: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read one output table (optionally one cluster and/or one run, and rows whose columns equal ``where``'s
    values; only ``columns`` when given) as a pyarrow.Table. The conditions are pushed into the scan (file
    statistics skip files), so a reader never loads a whole history to keep a few rows.

    >>> read_table("./out", "findings", cluster="prod-eu-1", as_of="2026-11-02T00:00:00Z")  # doctest: +SKIP
    pyarrow.Table
    cluster: string not null
    ...
    """

    location = _Location.of(output).child(name)
    if not location.is_table():
        raise UsageError(f"{location.uri}: no Delta table there; check the output path, or run txnlog to write it")
    table = location.table()
    condition = None
    if cluster is not None:
        condition = pc.field("cluster") == pa.scalar(cluster, pa.string())
    if as_of is not None:
        instant = pa.scalar(_run_as_of(parse_as_of(as_of)), pa.timestamp("us", tz="UTC"))
        term = pc.field("as_of") == instant
        condition = term if condition is None else condition & term
    for column, value in (where or {}).items():
        term = pc.field(column) == value
        condition = term if condition is None else condition & term
    protocol = table.protocol()
    if protocol.min_reader_version > 1 or protocol.reader_features:  # not written by txnlog: let delta-rs read it
        # Read through a pyarrow filesystem rather than deltalake's default Python
        # filesystem handler: with the latter the interpreter aborts at exit now and
        # then ("terminate called without an active exception", delta-rs #2184).
        return table.to_pyarrow_table(
            filesystem=location.subtree_fs(), filters=condition, columns=list(columns) if columns else None
        )
    # A year of nightly runs is 365 files per table: deltalake's dataset turns every file's statistics into
    # an expression first (~1 s per table read, benchmarks/RESULTS.md "History"). Skip the files whose
    # statistics rule out the run asked for, then scan the rest with pyarrow.
    # Lazy in this module: pyarrow.dataset imports pandas (a second or more), which only a history read needs.
    import pyarrow.dataset as pads

    files = _files_that_may_hold(table, cluster, None if as_of is None else _run_as_of(parse_as_of(as_of)))
    dataset = pads.dataset(files, schema=pa.schema(table.schema().to_arrow()), format="parquet",
                           filesystem=location.subtree_fs())  # fmt: skip
    return dataset.to_table(filter=condition, columns=list(columns) if columns else None)


def _files_that_may_hold(table: DeltaTable, cluster: str | None, as_of: datetime | None) -> list[str]:
    """The live data files of ``table`` whose min/max statistics do not rule out ``cluster``/``as_of``
    (None: any); a file without statistics may hold anything."""
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)
    keep = pa.repeat(pa.scalar(True), actions.num_rows)

    def within(low: str, high: str, value: Any, slack: Any = None) -> pa.Array:
        if low not in names or high not in names:
            return pa.repeat(pa.scalar(True), actions.num_rows)
        lo, hi = actions.column(low), actions.column(high)
        top = hi if slack is None else pc.add(hi, slack)
        inside = pc.and_(pc.less_equal(lo, value), pc.greater_equal(top, value))
        return pc.or_kleene(inside, pc.or_(pc.is_null(lo), pc.is_null(hi)))

    if cluster is not None:
        keep = pc.and_(keep, within("min.cluster", "max.cluster", pa.scalar(cluster, pa.string())))
    if as_of is not None and "min.as_of" in names:
        moment = pa.scalar(as_of).cast(actions.schema.field("min.as_of").type)
        # max statistics may be truncated to the millisecond (delta-spark): a millisecond of slack
        keep = pc.and_(keep, within("min.as_of", "max.as_of", moment, pa.scalar(_MS, pa.duration("us"))))
    return [unquote(p) for p in actions.column("path").filter(keep.fill_null(True)).to_pylist()]


# --- where tables live ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Location:
    """One path, as each library wants it."""

    uri: str  # for deltalake: an absolute local path or a URI
    spark_path: str  # for Spark: file:///... for local paths, else the URI
    fs: pafs.FileSystem
    fs_path: str  # the path inside ``fs``
    options: dict[str, str] = dataclass_field(default_factory=dict)  # delta-rs storage_options (txnlog.sources.storage)

    def table(self) -> DeltaTable:
        # Lazy in this module: deltalake loads only on the path that writes or reads with delta-rs.
        from deltalake import DeltaTable

        return DeltaTable(self.uri, storage_options=self.options or None)

    def is_table(self) -> bool:
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(self.uri, self.options or None))

    @staticmethod
    def of(path: str) -> _Location:
        parsed = urlparse(str(path))
        if len(parsed.scheme) <= 1 or parsed.scheme == "file":  # "C:" is a drive, not a scheme
            local = Path(unquote(parsed.path) if parsed.scheme == "file" else str(path)).expanduser().resolve()
            return _Location(str(local), local.as_uri(), pafs.LocalFileSystem(), str(local))
        # the filesystem and settings the inputs use (s3a:// is s3:// to pyarrow and delta-rs)
        fs, fs_path = storage.filesystem(str(path))
        uri = str(path).rstrip("/")
        uri = "s3://" + uri[len("s3a://") :] if parsed.scheme == "s3a" else uri
        return _Location(uri, str(path).rstrip("/"), fs, fs_path.rstrip("/"), storage.delta_options(uri))

    def child(self, name: str) -> _Location:
        return _Location(
            _join(self.uri, name),
            posixpath.join(self.spark_path, name),
            self.fs,
            posixpath.join(self.fs_path, name),
            self.options,
        )

    def subtree_fs(self) -> pafs.FileSystem:
        return pafs.SubTreeFileSystem(self.fs_path, self.fs)


# --- the deltalake writer ---------------------------------------------------------------------


@dataclass(frozen=True)
class _File:
    """A Parquet file of one run, ready to be added."""

    path: str  # relative to the table root
    size: int
    rows: int
    stats: str


def _write_with_deltalake(
    spark: SparkSession | None,
    table: _Location,
    name: str,
    data: DataFrame | pa.Table | ParquetTable,
    cluster: str,
    as_of: datetime,
    supersede: Supersede | None = None,
) -> int:
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions

    schema = contract.TABLES[name]
    stage = f"{STAGE_PREFIX}{uuid.uuid4().hex}"
    stage_fs_path = posixpath.join(table.fs_path, stage)
    existing = table.table() if table.is_table() else None
    if existing is not None:
        _evolve_schema(existing, schema, table.uri)
    committing = False
    try:
        if isinstance(data, pa.Table):
            _stage_arrow(_conform_arrow(data, schema, name, cluster, as_of), table, stage)
        elif isinstance(data, ParquetTable):
            data.write_parquet(_join(table.uri, stage), cluster, as_of)
        else:
            assert spark is not None
            _stage_dataframe(spark, _conform_dataframe(data, schema, name, cluster, as_of), table, stage)
        new_files = _collect_staged(table, stage, schema)
        rows = sum(f.rows for f in new_files)

        removes: list[Any] = []
        now_ms = int(time.time() * 1000)
        if existing is not None:
            gone, rewritten = _replace_run_files(existing, table, stage, cluster, as_of, supersede)
            removes = [RemoveAction(path, True, now_ms, size=size, partition_values={}) for path, size in gone]
            new_files += rewritten
        adds = [AddAction(f.path, f.size, {}, now_ms, True, f.stats) for f in new_files]

        commit = CommitProperties(
            custom_metadata={
                "txnlog.cluster": cluster,
                "txnlog.broker.as_of": _iso_ms(as_of),
                "txnlog.writer": "deltalake",
                "txnlog.version": __version__,
                "txnlog.model.rows": rows,
            }
        )
        committing = True
        if existing is None:
            create_table_with_add_actions(
                table.uri,
                DeltaSchema.from_arrow(schema),
                adds,
                mode="error",
                name=name,
                commit_properties=commit,
                storage_options=table.options or None,
            )
        elif adds or removes:
            existing.create_write_transaction([*removes, *adds], "append", schema, commit_properties=commit)
    except BaseException:
        # Unless the commit made them live (a commit call can fail after the
        # log entry is written, e.g. a timeout on object storage), the staged
        # files are orphans: remove them.
        if not (committing and _stage_is_live(table, stage)):
            _delete_dir(table.fs, stage_fs_path)
        raise
    if not new_files:
        _delete_dir(table.fs, stage_fs_path)
    return rows


def _stage_is_live(location: _Location, stage: str) -> bool:
    try:
        paths = pa.table(location.table().get_add_actions()).column("path").to_pylist()
    except Exception:  # no table, unreadable log: assume the worst, keep the files
        return True
    return any(p.startswith(stage + "/") for p in paths)


def _conform_dataframe(df: DataFrame, schema: pa.Schema, name: str, cluster: str, as_of: datetime) -> DataFrame:
    # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
    from pyspark.sql import functions as F

    _require_columns(name, schema, df.columns)
    columns = [
        F.lit(cluster).alias("cluster"),
        F.timestamp_micros(F.lit(_epoch_us(as_of))).alias("as_of"),
        *(F.col(f"`{f.name}`").cast(spark_type(f.type)).alias(f.name) for f in schema if f.name not in RUN_KEY),
    ]
    return df.select(*columns)


def _conform_arrow(data: pa.Table, schema: pa.Schema, name: str, cluster: str, as_of: datetime) -> pa.Table:
    _require_columns(name, schema, data.column_names)
    n = data.num_rows
    columns: list[pa.Array | pa.ChunkedArray] = [
        repeated(cluster, pa.string(), n),
        repeated(as_of, pa.timestamp("us", tz="UTC"), n),
    ]
    for field in schema:
        if field.name not in RUN_KEY:
            try:
                columns.append(data.column(field.name).cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ValueError(
                    f"{name}.{field.name}: cannot cast {data.schema.field(field.name).type} to {field.type}: {e}"
                ) from e
    return pa.Table.from_arrays(columns, schema=schema)


def _require_columns(name: str, schema: pa.Schema, present: list[str]) -> None:
    missing = [f.name for f in schema if f.name not in RUN_KEY and f.name not in present]
    if missing:
        raise ValueError(
            f"{name}: missing contract columns {missing} (txnlog.model.contract.{name.upper()}); input has {present}"
        )


def _stage_dataframe(spark: SparkSession, df: DataFrame, table: _Location, stage: str) -> None:
    # Whatever session we were given (spark-submit builds its own), Parquet
    # timestamps must be INT64 micros: INT96 would not match the Delta schema.
    with temporary_conf(spark, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        df.write.mode("errorifexists").parquet(posixpath.join(table.spark_path, stage))


def _stage_arrow(data: pa.Table, table: _Location, stage: str) -> None:
    if data.num_rows == 0:
        return
    path = posixpath.join(table.fs_path, stage, f"part-00000-{uuid.uuid4()}-c000.snappy.parquet")
    table.fs.create_dir(posixpath.dirname(path), recursive=True)
    pq.write_table(data, path, filesystem=table.fs, **contract.parquet_options(data.schema))


def _collect_staged(table: _Location, stage: str, schema: pa.Schema) -> list[_File]:
    """Footers → files to add. Drops Spark's leftovers (_SUCCESS, .crc) and empty files."""
    stage_fs_path = posixpath.join(table.fs_path, stage)
    infos = table.fs.get_file_info(pafs.FileSelector(stage_fs_path, allow_not_found=True, recursive=False))
    files: list[_File] = []
    for info in sorted(infos, key=lambda i: i.path):
        base = posixpath.basename(info.path)
        if info.type == pafs.FileType.Directory:
            table.fs.delete_dir(info.path)
            continue
        if base.startswith(("_", ".")) or not base.endswith(".parquet"):
            table.fs.delete_file(info.path)
            continue
        metadata = pq.read_metadata(info.path, filesystem=table.fs)
        if metadata.num_rows == 0:
            # Spark writes a schema-only file for an empty result; the table's
            # metadata already carries the schema.
            table.fs.delete_file(info.path)
            continue
        _check_file_schema(metadata, schema, info.path)
        files.append(_File(f"{stage}/{base}", info.size, metadata.num_rows, _stats_json(metadata)))
    return files


def _check_file_schema(metadata: pq.FileMetaData, schema: pa.Schema, path: str) -> None:
    found = metadata.schema.to_arrow_schema()
    for field in schema:
        index = found.get_field_index(field.name)
        if index < 0 or not _same_type(found.field(index).type, field.type):
            got = found.field(index).type if index >= 0 else "missing"
            raise RuntimeError(
                f"{path}: column {field.name} is {got}, expected {field.type} (was TIMESTAMP_MICROS set?)"
            )


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_list(a) and pa.types.is_list(b):  # element field names differ by writer
        return _same_type(a.value_type, b.value_type)
    return a == b


def _stats_json(metadata: pq.FileMetaData) -> str:
    """Delta per-file statistics from a Parquet footer (top-level scalar columns only)."""
    arrow_schema = metadata.schema.to_arrow_schema()
    index_of = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in arrow_schema:
        kind = _stats_kind(field.type)
        if kind is None or field.name not in index_of:
            continue  # lists, structs: no statistics (as delta-spark)
        i = index_of[field.name]
        low: Any = None
        high: Any = None
        null_count: int | None = 0
        bounded = True
        for rg in range(metadata.num_row_groups):
            group = metadata.row_group(rg)
            if group.num_rows == 0:
                continue
            st = group.column(i).statistics
            if st is None:
                bounded, null_count = False, None
                break
            null_count = null_count + st.null_count if null_count is not None and st.has_null_count else None
            if st.has_min_max:
                lo, hi = (
                    _stat_value(st.min_raw if kind == "timestamp" else st.min),
                    _stat_value(st.max_raw if kind == "timestamp" else st.max),
                )
                low = lo if low is None else min(low, lo)
                high = hi if high is None else max(high, hi)
            elif st.has_null_count and st.null_count == group.num_rows:
                continue  # all null: no bounds needed from this group
            else:
                bounded = False
        if null_count is not None:
            nulls[field.name] = null_count
        if not bounded or low is None or high is None:
            continue
        if kind == "timestamp":
            # Delta writes timestamp statistics at millisecond precision; round
            # outwards so the bounds still hold for every reader.
            per_unit = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0.001}[field.type.unit]
            low_us, high_us = int(low * per_unit), int(high * per_unit)
            try:
                low_at, high_at = _from_us(low_us - low_us % 1000), _from_us(high_us + (-high_us) % 1000)
            except OverflowError:
                continue  # outside years 1-9999 (a client clock in µs): no bounds, which readers take as "unknown"
            mins[field.name], maxs[field.name] = _iso_ms(low_at), _iso_ms(high_at)
        elif kind == "string":
            if not isinstance(low, str) or not isinstance(high, str):
                continue
            if len(low) > STRING_STATS_MAX_CHARS or len(high) > STRING_STATS_MAX_CHARS:
                continue
            mins[field.name], maxs[field.name] = low, high
        elif kind == "integer":
            mins[field.name], maxs[field.name] = low, high
    return json.dumps(
        {"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


def _stats_kind(t: pa.DataType) -> str | None:
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_boolean(t):
        return "boolean"  # null counts only: min/max of booleans help no query
    return None


def _stat_value(value: Any) -> Any:
    return value.decode("utf-8", errors="strict") if isinstance(value, bytes) else value


_REWRITE_SUFFIX = ".rewrite.parquet"


def _replace_run_files(
    table: DeltaTable,
    location: _Location,
    stage: str,
    cluster: str,
    as_of: datetime,
    supersede: Supersede | None = None,
) -> tuple[list[tuple[str, int]], list[_File]]:
    """Files of the live snapshot that hold the run's rows (or rows it supersedes): (to remove, rewritten
    remainders to add)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)

    def column(key: str) -> list[Any]:
        return actions.column(key).to_pylist() if key in names else [None] * actions.num_rows

    paths, sizes = column("path"), column("size_bytes")
    cmin, cmax, tmin, tmax = column("min.cluster"), column("max.cluster"), column("min.as_of"), column("max.as_of")
    remove: list[tuple[str, int]] = []
    rewritten: list[_File] = []
    for path, size, c_lo, c_hi, t_lo, t_hi in zip(paths, sizes, cmin, cmax, tmin, tmax, strict=True):
        known = None not in (c_lo, c_hi, t_lo, t_hi)
        bounds = (c_lo, c_hi, t_lo, t_hi) if known else None
        old = supersede is not None and _may_hold(bounds, cluster, supersede.as_of)
        if known and c_lo == c_hi == cluster and t_lo == t_hi == as_of and not old:
            remove.append((path, size))  # holds this run only
        elif not _may_hold(bounds, cluster, as_of) and not old:
            continue  # cannot hold this run's rows or the ones it supersedes
        else:
            outcome = _rewrite_without_run(location, path, stage, cluster, as_of, supersede)
            if outcome is not None:
                remove.append((path, size))
                if outcome.rows:
                    rewritten.append(outcome)
    return remove, rewritten


def _may_hold(bounds: tuple[Any, Any, Any, Any] | None, cluster: str, as_of: datetime) -> bool:
    """A file whose statistics are ``bounds`` (cluster and as_of min/max; None: unknown) may hold rows of
    the run (cluster, as_of). Max as_of may be truncated to the millisecond."""
    if bounds is None:
        return True
    c_lo, c_hi, t_lo, t_hi = bounds
    return not (cluster < c_lo or cluster > c_hi or as_of < t_lo or as_of > t_hi + _MS)


def _rewrite_without_run(
    location: _Location, path: str, stage: str, cluster: str, as_of: datetime, supersede: Supersede | None = None
) -> _File | None:
    """Copy a mixed file without the run's rows (and the rows it supersedes). None: the file has none of
    them (keep it)."""

    def is_run(batch: pa.RecordBatch) -> pa.Array:
        mask = pc.and_(
            pc.equal(batch.column("cluster"), pa.scalar(cluster, batch.schema.field("cluster").type)),
            pc.equal(batch.column("as_of"), pa.scalar(as_of).cast(batch.schema.field("as_of").type)),
        ).fill_null(False)
        return mask if supersede is None else pc.or_(mask, supersede.matches(batch, cluster))

    outcome = _rewrite_without(location, path, stage, is_run)
    return None if outcome is None else outcome.file


@dataclass(frozen=True)
class _Rewritten:
    file: _File  # the remainder (0 rows: nothing to add)
    dropped: int


def _rewrite_without(
    location: _Location, path: str, stage: str, drop: Callable[[pa.RecordBatch], pa.Array]
) -> _Rewritten | None:
    """Copy the data file ``path`` without the rows ``drop`` marks, streamed batch by batch, into ``stage``.
    None: ``drop`` marks none of its rows (keep the file)."""
    source = _data_file_path(location, path)
    reader = pq.ParquetFile(source, filesystem=location.fs)
    arrow_schema = reader.schema_arrow
    target = f"{stage}/part-{uuid.uuid4().hex}{_REWRITE_SUFFIX}"
    target_fs_path = posixpath.join(location.fs_path, target)
    dropped = kept = 0
    writer: pq.ParquetWriter | None = None
    try:
        for batch in reader.iter_batches():
            remainder = batch.filter(pc.invert(drop(batch)))
            dropped += batch.num_rows - remainder.num_rows
            if remainder.num_rows:
                if writer is None:
                    location.fs.create_dir(posixpath.dirname(target_fs_path), recursive=True)
                    options = contract.parquet_options(arrow_schema)
                    writer = pq.ParquetWriter(target_fs_path, arrow_schema, filesystem=location.fs, **options)
                writer.write_batch(remainder)
                kept += remainder.num_rows
    finally:
        if writer is not None:
            writer.close()
    if dropped == 0:
        if writer is not None:
            location.fs.delete_file(target_fs_path)
        return None
    if kept == 0:
        return _Rewritten(_File(target, 0, 0, ""), dropped)
    info = location.fs.get_file_info(target_fs_path)
    stats = _stats_json(pq.read_metadata(target_fs_path, filesystem=location.fs))
    return _Rewritten(_File(target, info.size, kept, stats), dropped)


def _data_file_path(location: _Location, path: str) -> str:
    if "://" in path:  # an absolute URI in the log (shallow clones, some writers)
        fs, fs_path = pafs.FileSystem.from_uri(path)
        if type(fs) is not type(location.fs):
            raise RuntimeError(f"{location.uri}: data file {path} is on another filesystem")
        return fs_path
    return posixpath.join(location.fs_path, unquote(path))


def _evolve_schema(table: DeltaTable, schema: pa.Schema, uri: str) -> None:
    """Add contract columns the table lacks; refuse a table whose columns contradict the contract."""
    from deltalake import Field as DeltaField
    from deltalake import Schema as DeltaSchema

    if table.metadata().partition_columns:
        raise UsageError(
            f"{uri}: table is partitioned by {table.metadata().partition_columns}; "
            "txnlog writes unpartitioned tables, use another --output"
        )
    current = {f.name: f for f in table.schema().fields}
    wanted = DeltaSchema.from_arrow(schema).fields
    missing: list[Any] = []
    for field in wanted:
        have = current.pop(field.name, None)
        if have is None:
            missing.append(DeltaField(field.name, field.type, nullable=True))
        elif json.loads(have.to_json())["type"] != json.loads(field.to_json())["type"]:
            raise UsageError(
                f"{uri}: column {field.name} is {json.loads(have.to_json())['type']} in the table but "
                f"{json.loads(field.to_json())['type']} in txnlog's contract; "
                "write to another --output or migrate the table"
            )
    required_extra = [name for name, f in current.items() if not f.nullable]
    if required_extra:
        raise UsageError(
            f"{uri}: table has non-nullable columns txnlog does not write: {required_extra}; use another --output"
        )
    if missing:
        log.warning("%s: adding columns %s", uri, [f.name for f in missing])
        table.alter.add_columns(missing)


# --- the delta-spark writer ------------------------------------------------------------------


def _write_with_delta_spark(
    spark: SparkSession,
    table: _Location,
    name: str,
    data: DataFrame | pa.Table | ParquetTable,
    cluster: str,
    as_of: datetime,
    supersede: Supersede | None = None,
) -> int:

    schema = contract.TABLES[name]
    if isinstance(data, pa.Table):
        df = spark.createDataFrame(_conform_arrow(data, schema, name, cluster, as_of), schema=spark_struct(schema))
    elif isinstance(data, ParquetTable):
        df = data.dataframe(cluster, as_of)
    else:
        df = data
    conformed = _conform_dataframe(df, schema, name, cluster, as_of)
    predicate = f"cluster = {_sql_string(cluster)} AND as_of = TIMESTAMP '{_iso_ms(as_of)}'"
    if supersede is not None:
        predicate = f"({predicate}) OR {supersede.sql(cluster)}"
    metadata = json.dumps({"txnlog.cluster": cluster, "txnlog.broker.as_of": _iso_ms(as_of), "txnlog.writer": "spark"})
    with temporary_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        (
            conformed.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", predicate)
            .option("userMetadata", metadata)
            .save(table.spark_path)
        )
    last = table.table().history(1)[0]
    return int(last.get("operationMetrics", {}).get("numOutputRows", 0))


# --- small helpers ---------------------------------------------------------------------------


def _join(uri: str, name: str) -> str:
    return posixpath.join(uri, name) if "://" in uri else str(Path(uri) / name)


def _run_as_of(as_of: datetime) -> datetime:
    if not isinstance(as_of, datetime):
        raise TypeError(f"as_of must be a datetime, got {type(as_of).__name__}")
    if as_of.tzinfo is None:
        raise ValueError(f"as_of must be time-zone aware (UTC), got naive {as_of.isoformat()}")
    utc = as_of.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def _epoch_us(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _delete_dir(fs: pafs.FileSystem, path: str) -> None:
    try:
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            fs.delete_dir(path)
    except OSError as e:  # best effort: an orphan directory is harmless (vacuum lists it)
        log.warning("could not remove %s: %s", path, e)
