"""Spark schemas of the output tables, derived from the Arrow contract in txnlog.model.contract.

txnlog.model.contract is the one home of column names and types; this module only
translates. ``spark_schema("findings")`` is what a reader of the table (notebooks, delta-spark) reads it
with.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from txnlog.model import contract as tables
from txnlog.output.spark_base import spark_struct


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
