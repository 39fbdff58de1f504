"""The ``deltalake`` writer: Spark (or pyarrow, for a small table) writes plain Parquet into a fresh
``stage-<uuid>/`` directory inside the table; the driver reads only the footers and commits, with delta-rs,
Remove actions for the files holding the run's old rows and Add actions for the new ones, in one transaction.
A file whose statistics say it holds only this run is removed whole, one they rule out is kept, any other is
rewritten without the run's rows in the same commit.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from txnlog import __version__
from txnlog.model import contract
from txnlog.model.errors import UsageError
from txnlog.output.delta_base import (
    ONE_MS,
    STAGE_PREFIX,
    STRING_STATS_MAX_CHARS,
    DataFile,
    Location,
    ParquetTable,
    Supersede,
    conform_arrow,
    conform_dataframe,
    delete_dir,
    from_us,
    iso_ms,
    join_uri,
)
from txnlog.output.spark_base import temporary_conf

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession


def write_with_deltalake(
    spark: SparkSession | None,
    table: Location,
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
            _stage_arrow(conform_arrow(data, schema, name, cluster, as_of), table, stage)
        elif isinstance(data, ParquetTable):
            data.write_parquet(join_uri(table.uri, stage), cluster, as_of)
        else:
            assert spark is not None
            _stage_dataframe(spark, conform_dataframe(data, schema, name, cluster, as_of), table, stage)
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
                "txnlog.broker.as_of": iso_ms(as_of),
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
            delete_dir(table.fs, stage_fs_path)
        raise
    if not new_files:
        delete_dir(table.fs, stage_fs_path)
    return rows


log = logging.getLogger(__name__)


def _stage_is_live(location: Location, stage: str) -> bool:
    try:
        paths = pa.table(location.table().get_add_actions()).column("path").to_pylist()
    except Exception:  # no table, unreadable log: assume the worst, keep the files
        return True
    return any(p.startswith(stage + "/") for p in paths)


def _stage_dataframe(spark: SparkSession, df: DataFrame, table: Location, stage: str) -> None:
    # Whatever session we were given (spark-submit builds its own), Parquet
    # timestamps must be INT64 micros: INT96 would not match the Delta schema.
    with temporary_conf(spark, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        df.write.mode("errorifexists").parquet(posixpath.join(table.spark_path, stage))


def _stage_arrow(data: pa.Table, table: Location, stage: str) -> None:
    if data.num_rows == 0:
        return
    path = posixpath.join(table.fs_path, stage, f"part-00000-{uuid.uuid4()}-c000.snappy.parquet")
    table.fs.create_dir(posixpath.dirname(path), recursive=True)
    pq.write_table(data, path, filesystem=table.fs, **contract.parquet_options(data.schema))


def _collect_staged(table: Location, stage: str, schema: pa.Schema) -> list[DataFile]:
    """Footers → files to add. Drops Spark's leftovers (_SUCCESS, .crc) and empty files."""
    stage_fs_path = posixpath.join(table.fs_path, stage)
    infos = table.fs.get_file_info(pafs.FileSelector(stage_fs_path, allow_not_found=True, recursive=False))
    files: list[DataFile] = []
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
        files.append(DataFile(f"{stage}/{base}", info.size, metadata.num_rows, _stats_json(metadata)))
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
                low_at, high_at = from_us(low_us - low_us % 1000), from_us(high_us + (-high_us) % 1000)
            except OverflowError:
                continue  # outside years 1-9999 (a client clock in µs): no bounds, which readers take as "unknown"
            mins[field.name], maxs[field.name] = iso_ms(low_at), iso_ms(high_at)
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
    location: Location,
    stage: str,
    cluster: str,
    as_of: datetime,
    supersede: Supersede | None = None,
) -> tuple[list[tuple[str, int]], list[DataFile]]:
    """Files of the live snapshot that hold the run's rows (or rows it supersedes): (to remove, rewritten
    remainders to add)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)

    def column(key: str) -> list[Any]:
        return actions.column(key).to_pylist() if key in names else [None] * actions.num_rows

    paths, sizes = column("path"), column("size_bytes")
    cmin, cmax, tmin, tmax = column("min.cluster"), column("max.cluster"), column("min.as_of"), column("max.as_of")
    remove: list[tuple[str, int]] = []
    rewritten: list[DataFile] = []
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
    return not (cluster < c_lo or cluster > c_hi or as_of < t_lo or as_of > t_hi + ONE_MS)


def _rewrite_without_run(
    location: Location, path: str, stage: str, cluster: str, as_of: datetime, supersede: Supersede | None = None
) -> DataFile | None:
    """Copy a mixed file without the run's rows (and the rows it supersedes). None: the file has none of
    them (keep it)."""

    def is_run(batch: pa.RecordBatch) -> pa.Array:
        mask = pc.and_(
            pc.equal(batch.column("cluster"), pa.scalar(cluster, batch.schema.field("cluster").type)),
            pc.equal(batch.column("as_of"), pa.scalar(as_of).cast(batch.schema.field("as_of").type)),
        ).fill_null(False)
        return mask if supersede is None else pc.or_(mask, supersede.matches(batch, cluster))

    outcome = rewrite_without(location, path, stage, is_run)
    return None if outcome is None else outcome.file


@dataclass(frozen=True)
class _Rewritten:
    file: DataFile  # the remainder (0 rows: nothing to add)
    dropped: int


def rewrite_without(
    location: Location, path: str, stage: str, drop: Callable[[pa.RecordBatch], pa.Array]
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
        return _Rewritten(DataFile(target, 0, 0, ""), dropped)
    info = location.fs.get_file_info(target_fs_path)
    stats = _stats_json(pq.read_metadata(target_fs_path, filesystem=location.fs))
    return _Rewritten(DataFile(target, info.size, kept, stats), dropped)


def _data_file_path(location: Location, path: str) -> str:
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
