"""The integrity audit (txnlog.rules.integrity) in Spark's tasks: the staged transactions read where they were
staged, shuffled so that each partition's rows meet in one group, and each group's partitions checked at once
against the ``.txnindex`` entries, the segments and the coordinator's decisions (small: they travel with the
function). A group is a bucket of partitions (a hash of topic and partition), not one partition: the checks are
Arrow functions over any number of partitions, and a call per partition would pay their fixed cost once for each
of a copy's many thousands of quiet partitions. Only the audit's anomaly rows reach the driver."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from txnlog.engine.integrity import STAGED_SCHEMA, staged_columns
from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.rules.integrity import MS_SCHEMA, Decisions, partition_integrity
from txnlog.sources import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["integrity_in_tasks"]

#: groups of partitions checked per reading task: a few, so that unequal partitions even out over the cores
BUCKETS_PER_TASK = 4
_BUCKET = "_txnlog_bucket"


def integrity_in_tasks(
    spark: SparkSession, files: list[str], index: pa.Table, segments: pa.Table, decided: Decisions
) -> pa.Table:
    """:func:`txnlog.rules.integrity.partition_integrity` of the staged transaction ``files``, in tasks, a bucket
    of whole partitions at a time; the rows (:data:`txnlog.rules.integrity.MS_SCHEMA`) collected."""
    if not files:
        return MS_SCHEMA.empty_table()
    settings = storage.settings_option()
    tasks = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    paths = spark.createDataFrame([(f,) for f in files], "path string").repartition(tasks)
    txns = paths.mapInArrow(partial(_read_in_task, settings), arrow_to_spark_schema(STAGED_SCHEMA))

    def check(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        return partition_integrity(table.drop_columns([_BUCKET]), index, segments, decided)

    # every row of a partition in the same bucket: a bucket holds whole partitions
    bucket = F.pmod(F.hash("topic", "partition"), F.lit(tasks * BUCKETS_PER_TASK))
    rows = txns.withColumn(_BUCKET, bucket).groupBy(_BUCKET).applyInArrow(check, arrow_to_spark_schema(MS_SCHEMA))
    return rows.toArrow().cast(MS_SCHEMA)


def _read_in_task(settings: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    storage.configure_from_options({"storage": settings})
    for batch in batches:
        for path in batch.column("path").to_pylist():
            yield from staged_columns(path).to_batches()
