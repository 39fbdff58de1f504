"""The integrity audit (txnlog.rules.integrity) in Spark's tasks, over the staged transactions where they were
staged: each task reads a group of staged files and checks their partitions at once against the ``.txnindex``
entries, the segments and the coordinator's decisions (they travel with the function). A task stages the whole of
its partitions (txnlog.engine.plan), so the files are dealt into groups as they are (txnlog.engine.integrity.
audit_groups, after a pass that reads only each file's partitions): no row is shuffled. Only the audit's anomaly
rows reach the driver."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from txnlog.engine.integrity import HELD_SCHEMA, audit_groups, held_partitions, staged_columns
from txnlog.engine.spark.file_tasks import dealt, each_group
from txnlog.rules.integrity import MS_SCHEMA, Decisions, partition_integrity
from txnlog.sources import storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["integrity_in_tasks"]

#: groups of files checked per core: a few, so that unequal groups even out over the cores
GROUPS_PER_CORE = 2


def integrity_in_tasks(
    spark: SparkSession, files: list[str], index: pa.Table, segments: pa.Table, decided: Decisions
) -> pa.Table:
    """:func:`txnlog.rules.integrity.partition_integrity` of the staged transaction ``files``, in tasks, a group
    of files holding whole partitions at a time; the rows (:data:`txnlog.rules.integrity.MS_SCHEMA`) collected."""
    if not files:
        return MS_SCHEMA.empty_table()
    settings = storage.settings_option()
    slots = max(1, spark.sparkContext.defaultParallelism * GROUPS_PER_CORE)
    chunks = dealt(files, slots)
    groups = audit_groups(_held_here(each_group(spark, chunks, partial(_held, settings), HELD_SCHEMA)), slots)
    if not groups:
        return MS_SCHEMA.empty_table()
    check = partial(_checked, settings, index, segments, decided)
    return each_group(spark, groups, check, MS_SCHEMA).toArrow().cast(MS_SCHEMA)


def _held_here(held: DataFrame) -> pa.Table:
    """What :func:`txnlog.engine.integrity.audit_groups` needs of the files' partitions ``held``, brought to the
    driver: a row per file (its rows; topic and partition null) and the rows of the partitions that more than one
    file holds (none where the plan staged whole partitions): the files' count, not the partitions', reaches it."""
    held = held.cache()
    try:
        keys = ["topic", "partition"]
        shared = held.groupBy(*keys).count().where(F.col("count") > 1).select(*keys)
        files = held.groupBy("path").agg(F.max("rows").alias("rows"))
        files = files.select("path", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int"), "rows")
        both = held.join(F.broadcast(shared), keys, "left_semi").select(*HELD_SCHEMA.names).unionAll(files)
        return both.toArrow().cast(HELD_SCHEMA)
    finally:
        held.unpersist()


def _held(settings: str, files: list[str]) -> Iterator[pa.RecordBatch]:
    storage.configure_from_options({"storage": settings})
    for path in files:
        yield from held_partitions(path).to_batches()


def _checked(
    settings: str, index: pa.Table, segments: pa.Table, decided: Decisions, files: list[str]
) -> Iterator[pa.RecordBatch]:
    storage.configure_from_options({"storage": settings})
    parts = [t for t in (staged_columns(path) for path in files) if t.num_rows]
    if parts:
        yield from partition_integrity(pa.concat_tables(parts), index, segments, decided).to_batches()
