"""The few pieces of Spark that code below the Spark adapters (txnlog.output.delta) needs, with no txnlog module above
the contract: runtime SQL settings for a block, the labels of the Spark jobs a block starts, whether the Delta Lake
jars are on the driver's classpath, and the Spark type of each Arrow type of the contract (txnlog.model.contract).
pyspark is imported only when ``spark_type`` runs (the CLI reads the tables through txnlog.output.delta without it);
the others take the session they are given."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"


def delta_spark_available(spark: SparkSession) -> bool:
    """True when the Delta Lake Spark classes are on the driver's classpath.

    Loads ``io.delta.tables.DeltaTable`` through the JVM's context class loader
    without initialising it (a class lookup, cheap). Nothing is
    downloaded. A Spark Connect session has no driver JVM to ask: False.

    >>> delta_spark_available(get_session())  # doctest: +SKIP
    False
    """
    known = getattr(spark, "_txnlog_delta_jars", None)  # asked once per session: ~20 py4j calls each time
    if known is not None:
        return bool(known)
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_TABLE_CLASS, False, loader)
        found = True
    except Exception:  # py4j wraps ClassNotFoundException in Py4JJavaError
        found = False
    spark._txnlog_delta_jars = found  # type: ignore[attr-defined]  # a memo on the session object itself
    return found


@contextmanager
def temporary_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set runtime SQL settings for the block; the session's own values (or their absence) come back afterwards."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@contextmanager
def job_phases(spark: SparkSession | None) -> Iterator[Callable[[str], None]]:
    """Label the Spark jobs started inside the block (Spark UI, event log) phase by phase: the function yielded
    names the phase the jobs that follow belong to; the session's own label comes back at the block's end."""
    sc = getattr(spark, "sparkContext", None)
    if sc is None:  # no Spark, or Spark Connect: no SparkContext to label
        yield lambda _text: None
        return
    previous = sc.getLocalProperty("spark.job.description")
    try:
        yield sc.setJobDescription
    finally:
        sc.setLocalProperty("spark.job.description", previous)


@contextmanager
def job_description(spark: SparkSession | None, text: str) -> Iterator[None]:
    """Label the Spark jobs started inside the block (Spark UI, event log) with ``text``."""
    with job_phases(spark) as phase:
        phase(text)
        yield


def spark_type(arrow_type: pa.DataType) -> T.DataType:
    """The Spark type for one Arrow type of the contract (raises TypeError for others)."""
    # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
    from pyspark.sql import types as T

    if pa.types.is_timestamp(arrow_type):
        # A zone-less Arrow timestamp is a wall-clock value: TimestampNTZType.
        return T.TimestampType() if arrow_type.tz is not None else T.TimestampNTZType()
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = arrow_type.value_field
        return T.ArrayType(spark_type(element.type), containsNull=element.nullable)
    if pa.types.is_struct(arrow_type):
        return spark_struct(arrow_type.field(i) for i in range(arrow_type.num_fields))
    for predicate, name in _SIMPLE:
        if predicate(arrow_type):
            return getattr(T, name)()
    raise TypeError(f"no Spark type for Arrow type {arrow_type}")


_SIMPLE = (
    (pa.types.is_string, "StringType"),
    (pa.types.is_large_string, "StringType"),
    (pa.types.is_int64, "LongType"),
    (pa.types.is_int32, "IntegerType"),
    (pa.types.is_int16, "ShortType"),
    (pa.types.is_int8, "ByteType"),
    (pa.types.is_boolean, "BooleanType"),
    (pa.types.is_float64, "DoubleType"),
    (pa.types.is_float32, "FloatType"),
    (pa.types.is_binary, "BinaryType"),
    (pa.types.is_date32, "DateType"),
)


def spark_struct(fields: Iterable[pa.Field]) -> T.StructType:
    """The Spark ``StructType`` of Arrow fields (a schema, or a struct type's fields): names, types and
    nullability kept."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, spark_type(f.type), nullable=f.nullable) for f in fields])
