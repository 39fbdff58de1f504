"""txnlog.engine.spark.schemas: Spark schemas derived from the Arrow contract."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from txnlog.engine.spark.schemas import spark_schema
from txnlog.model import contract as tables


@pytest.mark.parametrize("name", list(tables.TABLES))
def test_every_table_keeps_names_order_and_nullability(name):
    schema = spark_schema(name)
    arrow = tables.TABLES[name]
    assert schema.fieldNames() == arrow.names
    assert [f.nullable for f in schema.fields] == [f.nullable for f in arrow]
    assert schema.fieldNames()[:2] == ["cluster", "as_of"]


def test_types():
    schema = spark_schema("coordinator_state")
    assert schema["cluster"] == T.StructField("cluster", T.StringType(), False)
    assert schema["as_of"] == T.StructField("as_of", T.TimestampType(), False)
    assert schema["producer_id"].dataType == T.LongType()
    assert schema["producer_epoch"].dataType == T.IntegerType()
    assert schema["partitions"].dataType == T.ArrayType(T.StringType(), containsNull=True)
    assert schema["txn_start_timestamp"].dataType == T.TimestampType()
    assert schema["is_tombstoned"].dataType == T.BooleanType()


def test_arrow_schema_argument_and_errors():
    custom = pa.schema([pa.field("t", pa.timestamp("us")), pa.field("xs", pa.list_(pa.field("x", pa.int64(), False)))])
    schema = spark_schema(custom)
    assert schema["t"].dataType == T.TimestampNTZType()
    assert schema["xs"].dataType == T.ArrayType(T.LongType(), containsNull=False)
    with pytest.raises(KeyError, match="no output table 'nope'"):
        spark_schema("nope")
    with pytest.raises(TypeError, match="no Spark type"):
        spark_schema(pa.schema([pa.field("d", pa.decimal128(10, 2))]))
