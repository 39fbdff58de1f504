"""``txnlog_consumer_offsets``: the consumer groups' offsets of every ``__consumer_offsets`` partition, replayed in
the executor by the task function the local placement calls too (txnlog.engine.tasks.consumer_offsets_task;
txnlog.engine.consumer_offsets says how). Each task holds whole partitions (the ``reduce`` option)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA, TOPIC_PARTITIONS
from txnlog.engine.settings import Decode
from txnlog.engine.spark.sources import FilesReader, arrow_to_spark_schema
from txnlog.engine.tasks import consumer_offsets_task

__all__ = ["SOURCE_SCHEMA", "ConsumerOffsetsSource"]


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
