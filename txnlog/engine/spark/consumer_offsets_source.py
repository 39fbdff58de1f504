"""``txnlog_consumer_offsets``: the consumer groups' offsets of every ``__consumer_offsets`` partition, replayed in
the executor by the task function the local placement calls too (txnlog.engine.tasks.consumer_offsets_task;
txnlog.engine.consumer_offsets says how). Each task holds whole partitions (the ``reduce`` option)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA, TOPIC_PARTITIONS
from txnlog.engine.settings import Decode
from txnlog.engine.spark.log_dir_options import offsets_options
from txnlog.engine.spark.sources import FilesReader, arrow_to_spark_schema
from txnlog.engine.tasks import consumer_offsets_task
from txnlog.sources.logdirs import Inventory

__all__ = ["SOURCE_SCHEMA", "ConsumerOffsetsSource", "read_consumer_offsets"]


class _ConsumerOffsetsReader(FilesReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        wanted = self.options.get(TOPIC_PARTITIONS)  # absent: every topic partition's offsets
        pairs = None if wanted is None else [(t, int(p)) for t, p in json.loads(wanted)]
        yield from consumer_offsets_task(self.task_files(partition), Decode.from_options(self.options), pairs)


class ConsumerOffsetsSource(DataSource):
    """``spark.read.format("txnlog_consumer_offsets").options(**manifest).load()``"""

    @classmethod
    def name(cls) -> str:
        return "txnlog_consumer_offsets"

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SOURCE_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ConsumerOffsetsReader(dict(self.options))


def read_consumer_offsets(
    spark: SparkSession, inv: Inventory, decode: Decode, scratch: str, wanted: list[tuple[str, int]] | None = None
) -> pa.Table:
    """The ``__consumer_offsets`` partitions' rows that ``inv`` lists, read in Spark tasks and collected as Arrow, the
    groups' offsets of the ``wanted`` topic partitions only (None: all; txnlog.engine.decoded.GroupOffsets)."""
    spark.dataSource.register(ConsumerOffsetsSource)
    options = offsets_options(
        inv, check_crc=decode.check_crc, scratch=scratch, cores=spark.sparkContext.defaultParallelism,
        max_decompressed_bytes=decode.max_decompressed_bytes, wanted=wanted,
    )  # fmt: skip
    table = spark.read.format(ConsumerOffsetsSource.name()).options(**options).load().toArrow()
    return table.cast(SOURCE_SCHEMA)
