"""The integrity audit (txnlog.rules.integrity) in Spark's tasks: the staged transactions read where they were
staged, grouped per (topic, partition) as the fragments' merge is (txnlog.engine.spark.collect), and each
partition's rows checked in its task against the ``.txnindex`` entries, the segments and the coordinator's
decisions (small: they travel with the function). Only the audit's anomaly rows reach the driver."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.engine.integrity import STAGED_SCHEMA, staged_columns
from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.rules.integrity import MS_SCHEMA, Decisions, partition_integrity
from txnlog.sources import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["integrity_in_tasks"]


def integrity_in_tasks(
    spark: SparkSession, files: list[str], index: pa.Table, segments: pa.Table, decided: Decisions
) -> pa.Table:
    """:func:`txnlog.rules.integrity.partition_integrity` per partition of the staged transaction ``files``, in
    tasks; the rows (:data:`txnlog.rules.integrity.MS_SCHEMA`) collected."""
    if not files:
        return MS_SCHEMA.empty_table()
    settings = storage.settings_option()
    tasks = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    paths = spark.createDataFrame([(f,) for f in files], "path string").repartition(tasks)
    txns = paths.mapInArrow(partial(_read_in_task, settings), arrow_to_spark_schema(STAGED_SCHEMA))

    def check(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        return partition_integrity(table, index, segments, decided)

    rows = txns.groupBy("topic", "partition").applyInArrow(check, arrow_to_spark_schema(MS_SCHEMA))
    return rows.toArrow().cast(MS_SCHEMA)


def _read_in_task(settings: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    storage.configure_from_options({"storage": settings})
    for batch in batches:
        for path in batch.column("path").to_pylist():
            yield from staged_columns(path).to_batches()
