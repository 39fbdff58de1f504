"""Spark schemas of the output tables, derived from the Arrow contract in txnlog.tables.

txnlog.tables is the one home of column names and types; this module only
translates. ``spark_schema("findings")`` is what a transform selects and casts
to before txnlog.delta writes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import types as T

from txnlog import tables
from txnlog.spark_base import spark_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def spark_schema(table: str | pa.Schema) -> T.StructType:
    """The Spark ``StructType`` of an output table (by name) or of an Arrow schema.

    Timestamps with a time zone become ``TimestampType`` (instants; txnlog's are
    UTC), ``list<string>`` becomes ``ArrayType(StringType())``; nullability is
    kept, for fields and for list elements.

    >>> spark_schema("runs")["as_of"]
    StructField('as_of', TimestampType(), False)
    """
    if isinstance(table, str):
        try:
            schema = tables.TABLES[table]
        except KeyError:
            raise KeyError(f"no output table {table!r}; tables are: {', '.join(tables.TABLES)}") from None
    else:
        schema = table
    return spark_struct(schema)


def quoted(name: str) -> str:
    """``name`` as a SQL identifier (backticks, so dots and keywords are safe)."""
    return "`" + name.replace("`", "``") + "`"


def shaped(df: DataFrame, schema: T.StructType, *extra: str) -> DataFrame:
    """``df`` with exactly ``schema``'s columns, in its order and types (null where ``df`` has no such
    column), then the ``extra`` columns as they are.

    One select written as SQL text is one call into the JVM, where building it from ``Column`` objects
    costs several per column: on a small input those calls are a large part of the driver's time
    (benchmarks/RESULTS.md, "Startup")."""
    have = set(df.columns)
    exprs = [
        f"CAST({quoted(f.name) if f.name in have else 'NULL'} AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
        for f in schema.fields
    ]
    return df.selectExpr(*exprs, *[quoted(c) for c in extra])
