"""Python work over groups of files, one Spark task per group: one job of one stage, no shuffle.

A step that works on files the run already wrote (the staged tables' finish, the integrity audit's checks)
needs no rows from Spark, only a task per group of file names. ``spark.range`` deals one id to each of as many
partitions, and each task looks its group up by that id in the function it was sent: no DataFrame of the names
is built in the driver (``createDataFrame`` of a Python list runs a stage of its own in Python workers) and none
is shuffled to spread the names over the tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.engine.spark.sources import arrow_to_spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["dealt", "each_group"]


def dealt(files: list[str], groups: int) -> list[list[str]]:
    """``files`` dealt into at most ``groups`` groups, in turn (none empty)."""
    n = max(1, min(groups, len(files)))
    return [files[i::n] for i in range(n)] if files else []


def each_group(
    spark: SparkSession,
    groups: list[list[str]],
    task: Callable[[list[str]], Iterator[pa.RecordBatch]],
    schema: pa.Schema,
) -> DataFrame:
    """A DataFrame of ``task(group)``'s batches (of ``schema``), one Spark task per group of files."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for g in batch.column("id").to_pylist():
                yield from task(groups[g])

    return spark.range(len(groups), numPartitions=max(1, len(groups))).mapInArrow(run, arrow_to_spark_schema(schema))
