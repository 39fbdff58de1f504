"""What both Delta writers share: a table's location and filesystem, the run key (cluster, ``as_of`` at
millisecond precision), an input conformed to the contract's columns, and :class:`Supersede`."""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from txnlog.model.rows import repeated
from txnlog.output.spark_base import spark_type
from txnlog.sources import storage

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame

RUN_KEY = ("cluster", "as_of")

log = logging.getLogger(__name__)


STAGE_PREFIX = "stage-"


# Delta convention (delta-spark truncates string statistics to 32 characters):
# longer values get no min/max, which every reader reads as "unknown".
STRING_STATS_MAX_CHARS = 32


ONE_MS = timedelta(milliseconds=1)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
        topics = ", ".join(sql_string(t) for t in self.topics) or "NULL"
        return (
            f"(cluster = {sql_string(cluster)} AND as_of = TIMESTAMP '{iso_ms(self.as_of)}' AND "
            f"outcome = {sql_string(self.outcome)} AND source = {sql_string(self.source)} AND topic IN ({topics}))"
        )


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@runtime_checkable
class ParquetTable(Protocol):
    """A table whose rows never become Spark rows: it writes its own Parquet files for a run
    (``txnlog.engine.spark.staged_table.StagedTable``), or hands them over as a DataFrame."""

    def write_parquet(self, target: str, cluster: str, as_of: datetime) -> int: ...

    def dataframe(self, cluster: str, as_of: datetime) -> DataFrame: ...


@dataclass(frozen=True)
class Location:
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
    def of(path: str) -> Location:
        parsed = urlparse(str(path))
        if len(parsed.scheme) <= 1 or parsed.scheme == "file":  # "C:" is a drive, not a scheme
            local = Path(unquote(parsed.path) if parsed.scheme == "file" else str(path)).expanduser().resolve()
            return Location(str(local), local.as_uri(), pafs.LocalFileSystem(), str(local))
        # the filesystem and settings the inputs use (s3a:// is s3:// to pyarrow and delta-rs)
        fs, fs_path = storage.filesystem(str(path))
        uri = str(path).rstrip("/")
        uri = "s3://" + uri[len("s3a://") :] if parsed.scheme == "s3a" else uri
        return Location(uri, str(path).rstrip("/"), fs, fs_path.rstrip("/"), storage.delta_options(uri))

    def child(self, name: str) -> Location:
        return Location(
            join_uri(self.uri, name),
            posixpath.join(self.spark_path, name),
            self.fs,
            posixpath.join(self.fs_path, name),
            self.options,
        )

    def subtree_fs(self) -> pafs.FileSystem:
        return pafs.SubTreeFileSystem(self.fs_path, self.fs)


@dataclass(frozen=True)
class DataFile:
    """A Parquet file of one run, ready to be added."""

    path: str  # relative to the table root
    size: int
    rows: int
    stats: str


def conform_dataframe(df: DataFrame, schema: pa.Schema, name: str, cluster: str, as_of: datetime) -> DataFrame:
    # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
    from pyspark.sql import functions as F

    _require_columns(name, schema, df.columns)
    columns = [
        F.lit(cluster).alias("cluster"),
        F.timestamp_micros(F.lit(_epoch_us(as_of))).alias("as_of"),
        *(F.col(f"`{f.name}`").cast(spark_type(f.type)).alias(f.name) for f in schema if f.name not in RUN_KEY),
    ]
    return df.select(*columns)


def conform_arrow(data: pa.Table, schema: pa.Schema, name: str, cluster: str, as_of: datetime) -> pa.Table:
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


def join_uri(uri: str, name: str) -> str:
    return posixpath.join(uri, name) if "://" in uri else str(Path(uri) / name)


def key_as_of(as_of: datetime) -> datetime:
    if not isinstance(as_of, datetime):
        raise TypeError(f"as_of must be a datetime, got {type(as_of).__name__}")
    if as_of.tzinfo is None:
        raise ValueError(f"as_of must be time-zone aware (UTC), got naive {as_of.isoformat()}")
    utc = as_of.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def _epoch_us(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def delete_dir(fs: pafs.FileSystem, path: str) -> None:
    try:
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            fs.delete_dir(path)
    except OSError as e:  # best effort: an orphan directory is harmless (vacuum lists it)
        log.warning("could not remove %s: %s", path, e)
