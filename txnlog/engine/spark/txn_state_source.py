"""``txnlog_txn_state``: every ``__transaction_state`` record, decoded in the executor by the task function the
local placement calls too (txnlog.engine.tasks.txn_state_task); this module only turns the options into its
typed settings (txnlog.engine.settings.TxnStateSettings). Option ``reduce``: each task holds every replica of its
coordinator partitions and yields only the records the verdicts need, staging all of them under ``stage``."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.settings import TxnStateSettings
from txnlog.engine.source_schemas import TXN_STATE_SOURCE_SCHEMA as SOURCE_SCHEMA
from txnlog.engine.spark.sources import FilesReader, arrow_to_spark_schema

__all__ = ["SOURCE_SCHEMA", "TxnStateSource"]


class _TxnStateReader(FilesReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from txnlog.engine.tasks import txn_state_task  # in the task only: see txnlog.engine.spark.sources

        yield from txn_state_task(self.task_files(partition), TxnStateSettings.from_options(self.options))


class TxnStateSource(DataSource):
    """``spark.read.format("txnlog_txn_state").option("files", files_option(...)).load()``"""

    @classmethod
    def name(cls) -> str:
        return "txnlog_txn_state"

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SOURCE_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _TxnStateReader(dict(self.options))
