"""Writing and reading txnlog's Delta tables (docs/design.md §3).

Each output table lives at ``<output>/<table_name>``, unpartitioned, with the schema of txnlog.model.contract.
A run is keyed by (cluster, as_of): writing a run replaces that run's rows in one commit per table and leaves
every other run's rows alone. Two writers, the same tables: ``deltalake`` (txnlog.output.delta_rs) and
``spark`` (txnlog.output.delta_spark).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model import contract
from txnlog.model.config import parse_as_of
from txnlog.model.errors import UsageError
from txnlog.output.delta_base import (
    ONE_MS,
    Location,
    ParquetTable,
    Supersede,
    iso_ms,
    key_as_of,
)
from txnlog.output.delta_rs import write_with_deltalake
from txnlog.output.delta_spark import write_with_delta_spark
from txnlog.output.spark_base import delta_spark_available

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ParquetTable", "Supersede", "Writer", "read_table", "resolve_writer", "table_uris", "write_tables"]


log = logging.getLogger(__name__)


Writer = Literal["auto", "deltalake", "spark"]


def table_uris(output: str) -> dict[str, str]:
    """Where each output table lives: ``{table_name: uri}`` (local paths made absolute).

    >>> table_uris("./out")["findings"]  # doctest: +SKIP
    '/home/me/out/findings'
    """
    base = Location.of(output)
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
    run_as_of = key_as_of(as_of)
    unknown = [name for name in tables if name not in contract.TABLES]
    if unknown:
        raise ValueError(f"not output tables: {unknown}; tables are: {list(contract.TABLES)}")
    chosen = resolve_writer(spark, writer)
    if spark is None and any(not isinstance(data, (pa.Table, ParquetTable)) for data in tables.values()):
        raise ValueError("write_tables needs a SparkSession to write Spark DataFrames")

    base = Location.of(output)
    written: dict[str, int] = {}
    for name, data in tables.items():
        location = base.child(name)
        started = time.monotonic()
        also = (supersede or {}).get(name)
        if also is not None:
            also = dataclasses.replace(also, as_of=key_as_of(also.as_of))
        if chosen == "spark":
            assert spark is not None
            written[name] = write_with_delta_spark(spark, location, name, data, cluster, run_as_of, also)
        else:
            written[name] = write_with_deltalake(spark, location, name, data, cluster, run_as_of, also)
        log.info(
            "%s: %d rows for (%s, %s) in %.2fs via %s",
            location.uri,
            written[name],
            cluster,
            iso_ms(run_as_of),
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

    location = Location.of(output).child(name)
    if not location.is_table():
        raise UsageError(f"{location.uri}: no Delta table there; check the output path, or run txnlog to write it")
    table = location.table()
    condition = None
    if cluster is not None:
        condition = pc.field("cluster") == pa.scalar(cluster, pa.string())
    if as_of is not None:
        instant = pa.scalar(key_as_of(parse_as_of(as_of)), pa.timestamp("us", tz="UTC"))
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
    # an expression first (the cost is in benchmarks/RESULTS.md, "History"). Skip the files whose
    # statistics rule out the run asked for, then scan the rest with pyarrow.
    # Lazy in this module: pyarrow.dataset imports pandas, which only a history read needs.
    import pyarrow.dataset as pads

    files = _files_that_may_hold(table, cluster, None if as_of is None else key_as_of(parse_as_of(as_of)))
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
        keep = pc.and_(keep, within("min.as_of", "max.as_of", moment, pa.scalar(ONE_MS, pa.duration("us"))))
    return [unquote(p) for p in actions.column("path").filter(keep.fill_null(True)).to_pylist()]
