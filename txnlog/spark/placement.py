"""Where a run's Python work runs: in Spark's Python tasks, or in the driver process (issue 12).

Every Python step of the job (the Data Sources' readers, the Arrow functions of ``applyInArrow`` and
``mapInArrow``) is a plain function over Arrow tables. On a large input Spark runs them in Python
tasks, in parallel, near the data. On a small one, starting those processes costs far more than the
work: a Python Data Source is planned in a Python process of its own, every Python stage starts or
wakes Python workers that import pyarrow, numpy and the compiled decoders, and a cold JVM plans each
of them. An 8-line kafka-dump-log.sh file took ~40 s that way, of which well under a second was
decoding (benchmarks/RESULTS.md, "Startup").

:class:`Placement` runs the *same functions* either way. With ``driver`` set (the input is at most
``driver_max_bytes``, so what the driver holds is bounded by it), a reader is called in this process
and its batches become a DataFrame (``createDataFrame`` of an Arrow table: no Python worker), and a
grouped or mapped Arrow step collects its small input once (``toArrow``), runs the function here and
hands the result back the same way. Spark still plans and runs every join and aggregate, so both
placements give the same tables (tests/e2e/test_placement.py); only who calls the Python changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import DataSource
    from pyspark.sql.types import StructType

#: Arrow tables up to this size become a LocalRelation; larger ones are parked as Parquet in the run's
#: scratch dir and scanned. Spark evaluates projections over a LocalRelation while optimizing
#: (ConvertToLocalRelation), copying its rows in the driver's heap for every query, and prints them in
#: plan strings: instant for a few thousand rows, a full 1 GiB heap for the ~100k lines of a 19 MB dump.
LOCAL_RELATION_BYTES = 2**20


@dataclass(frozen=True)
class Placement:
    """Run Python steps in Spark tasks (``driver`` false) or in this driver process (``driver`` true)."""

    driver: bool = False
    scratch: str | None = None  # where the driver parks tables larger than LOCAL_RELATION_BYTES

    @classmethod
    def for_input(cls, input_bytes: int, max_bytes: int, *, live: bool = False) -> Placement:
        """The driver when the input is known and at most ``max_bytes`` (0: never); a live read is
        not bounded by a size known in advance, so it stays in tasks."""
        return cls(driver=not live and max_bytes > 0 and input_bytes <= max_bytes)

    def read(self, spark: SparkSession, source: type[DataSource], options: dict[str, str]) -> DataFrame:
        """``spark.read.format(source).options(**options).load()``, or the same reader called here."""
        if not self.driver:
            spark.dataSource.register(source)
            return spark.read.format(source.name()).options(**options).load()
        instance = source(options)
        schema = instance.schema()
        if isinstance(schema, str):  # a DDL string: Spark's parser reads it
            schema = spark.createDataFrame([], schema).schema
        reader = instance.reader(schema)
        batches = [batch for part in reader.partitions() for batch in reader.read(part)]
        return frame(spark, batches, schema, self.scratch)

    def localize(self, df: DataFrame) -> DataFrame:
        """In the driver placement, ``df`` computed now and held as Arrow (its plan starts afresh: later
        queries neither recompute nor re-plan it); else ``df`` unchanged."""
        if not self.driver:
            return df
        return frame(df.sparkSession, [df.toArrow()], df.schema, self.scratch)

    def apply_in_arrow(
        self,
        df: DataFrame,
        keys: Sequence[str],
        function: Callable[[pa.Table], pa.Table],
        schema: StructType,
    ) -> DataFrame:
        """``df.groupBy(*keys).applyInArrow(function, schema)``, or every group's call made here."""
        if not self.driver:
            return df.groupBy(*keys).applyInArrow(function, schema)
        return frame(df.sparkSession, [function(group) for group in groups(df.toArrow(), keys)], schema, self.scratch)

    def map_in_arrow(
        self,
        df: DataFrame,
        function: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
        schema: StructType,
    ) -> DataFrame:
        """``df.mapInArrow(function, schema)``, or the function called here over all the rows at once."""
        if not self.driver:
            return df.mapInArrow(function, schema)
        return frame(df.sparkSession, list(function(iter(df.toArrow().to_batches()))), schema, self.scratch)


def read_here(source: type[DataSource], options: dict[str, str], schema: pa.Schema) -> pa.Table:
    """Every batch a Data Source's reader yields for ``options``, read in this process, as one Arrow table of
    ``schema`` (the source's own, in Arrow): the driver placement's read without a DataFrame."""
    reader = source(options).reader(None)  # type: ignore[arg-type]  # txnlog's readers take their schema as known
    tables = [pa.Table.from_batches([b]) for part in reader.partitions() for b in reader.read(part)]
    tables = [_conform(t, schema) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def groups(table: pa.Table, keys: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of ``table`` per distinct value of ``keys`` (nulls form their own group), as Spark's
    ``groupBy(...).applyInArrow`` hands them to its function: one table per group."""
    if table.num_rows == 0:
        return
    order = table.sort_by([(k, "ascending") for k in keys]).combine_chunks()
    bounds = [*group_starts(order, keys).tolist(), order.num_rows]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        yield order.slice(begin, end - begin)


def group_starts(order: pa.Table, keys: Sequence[str]) -> Any:
    """The row numbers where a new group of ``keys`` starts in ``order`` (sorted by ``keys``; null == null
    here): a numpy int64 array, empty for an empty table."""
    import numpy as np

    starts = np.zeros(order.num_rows, dtype=bool)
    if order.num_rows == 0:
        return np.flatnonzero(starts)
    starts[0] = True
    for key in keys:
        column = order.column(key)
        values = column.to_numpy(zero_copy_only=False)
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)
        starts[1:] |= valid[1:] != valid[:-1]
        both = valid[1:] & valid[:-1]
        starts[1:] |= both & (values[1:] != values[:-1])
    return np.flatnonzero(starts)


def frame(
    spark: SparkSession,
    batches: Sequence[pa.RecordBatch | pa.Table],
    schema: StructType,
    scratch: str | None = None,
) -> DataFrame:
    """A DataFrame of ``schema`` holding ``batches``, without a Python worker: a LocalRelation (sent to the
    JVM as Arrow) when small or no ``scratch`` is given, else a Parquet file under ``scratch`` Spark scans."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema, timezone="UTC")
    tables = [b if isinstance(b, pa.Table) else pa.Table.from_batches([b]) for b in batches]
    tables = [_conform(t, target) for t in tables if t.num_rows]
    if not tables:
        return spark.createDataFrame([], schema)
    # without empty record batches: PySpark's createDataFrame drops every row after one (a step's
    # output may hold an empty chunk, e.g. a segment with no decoded record in assemble_txn_state)
    table = pa.Table.from_batches([b for t in tables for b in t.to_batches() if b.num_rows], target)
    if scratch is None or table.nbytes <= LOCAL_RELATION_BYTES:
        return spark.createDataFrame(table, schema=schema)
    import posixpath
    import uuid

    import pyarrow.parquet as pq

    from txnlog.spark.staged import filesystem_of

    directory = posixpath.join(scratch, "frames", uuid.uuid4().hex)
    filesystem, path = filesystem_of(directory)
    filesystem.create_dir(path, recursive=True)
    pq.write_table(table, posixpath.join(path, "part-0.parquet"), filesystem=filesystem)
    return spark.read.schema(schema).parquet(directory)


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table``'s columns in ``target``'s order and types (a step may yield them in its own order)."""
    columns: list[Any] = [table.column(f.name).cast(f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)
