"""``txnlog_dump_rows``: the Spark Data Source over ``kafka-dump-log.sh`` files (txnlog.engine.spark.dump_log says
how a run reads them). Spark plans it in processes of its own, which import this module: it imports no reader, and
its reader imports the task function in its task (txnlog.engine.spark.sources says why)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.dump_log.names import Names
from txnlog.engine.dump_log.outputs import BOTH, BOTH_SCHEMA, RECORDS, SUMMARY
from txnlog.engine.plan import pack_sizes
from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA
from txnlog.sources import storage
from txnlog.sources.dump_log.lines import DEFAULT_CHUNK_BYTES, DumpInput

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DUMP_ROWS_SOURCE = "txnlog_dump_rows"
_SCHEMAS = {SUMMARY: SEGMENT_SUMMARY_SCHEMA, RECORDS: TXN_STATE_SCHEMA, BOTH: BOTH_SCHEMA}


class _DumpFilePartition(InputPartition):
    """Some dump files read by one task (small files packed together; a file is never split)."""

    def __init__(self, paths: list[str]):
        super().__init__(paths)


class _DumpRowsReader(DataSourceReader):
    """The options' files packed into tasks (:func:`dump_groups`), each read by
    txnlog.engine.tasks.dump_rows_task, the function the local placement calls too."""

    def __init__(self, options: dict[str, str]):
        self.paths = json.loads(options.get("paths", "[]"))
        self.locations = json.loads(options.get("locations", "{}"))  # file → [loc, named]
        self.chunk_bytes = int(options.get("chunk_bytes", DEFAULT_CHUNK_BYTES))
        self.output = options.get("output", SUMMARY)
        self.names: Names = {(f, b): n for f, b, n in json.loads(options.get("names", "[]"))}
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [_DumpFilePartition(g) for g in dump_groups(self.paths, int(self.options.get("cores", 1)))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage.configure_from_options(self.options)
        files = located(partition.value, self.locations)
        from txnlog.engine.tasks import dump_rows_task  # in the task only: see the module doc

        yield from dump_rows_task(files, self.names, self.output, self.chunk_bytes)


def dump_groups(paths: list[str], cores: int) -> list[list[str]]:
    """``paths`` dealt into tasks of equal bytes for ``cores`` cores (threads in the driver, Spark's cores), as
    the log-dir files are (txnlog.engine.plan.pack_sizes: largest first to the lightest task): :data:`TASKS_PER_CORE`
    per core where the input allows (a task holds :data:`MIN_PARTITION_BYTES` at least), more where a task would
    exceed :data:`MAX_PARTITION_BYTES`; each task's files in their listing order, a file never split."""
    sizes = [max(_file_bytes(p, MAX_PARTITION_BYTES), 1) for p in paths]
    tasks = max(1, min(max(cores, 1) * TASKS_PER_CORE, sum(sizes) // MIN_PARTITION_BYTES))
    return [[paths[i] for i in members] for members in pack_sizes(sizes, MAX_PARTITION_BYTES, tasks)]


def located(paths: list[str], locations: dict[str, Any]) -> list[tuple[str, str | None, bool]]:
    """Each of ``paths`` with its location and whether it was named (``NAME=PATH``)."""
    out = []
    for path in paths:
        loc, named = locations.get(path, (None, False))
        out.append((path, loc, bool(named)))
    return out


class DumpRowsSource(DataSource):
    """``spark.read.format("txnlog_dump_rows").options(paths=..., output=..., names=...).load()``: the dump
    files' rows, ``output`` ``summary`` (SEGMENT_SUMMARY_SCHEMA), ``records`` (TXN_STATE_SCHEMA) or ``both``
    (the two and the "Dumping" lines in one pass, the brokers as printed: BOTH_SCHEMA)."""

    @classmethod
    def name(cls) -> str:
        return DUMP_ROWS_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(_SCHEMAS[self.options.get("output", SUMMARY)])

    def reader(self, schema: StructType) -> DataSourceReader:
        return _DumpRowsReader(dict(self.options))


def register_dump_log_source(spark: SparkSession) -> None:
    spark.dataSource.register(DumpRowsSource)


#: the most dump text one reading task takes (a file is never split: a larger one is a task of its own)
MAX_PARTITION_BYTES = 64 * 2**20
#: reading tasks per core, where the input is large enough: a few per core even out files of unequal cost
TASKS_PER_CORE = 4
#: the least dump text worth a task of its own
MIN_PARTITION_BYTES = 2**20


def options_of(inputs: Sequence[DumpInput], cores: int = 1) -> dict[str, str]:
    """The reader's options for the listed dump files ``inputs`` (txnlog.sources.dump_log.lines.list_dump_inputs),
    its files dealt into tasks for ``cores`` cores (:func:`dump_groups`)."""
    return {
        "paths": json.dumps([f for f, _, _ in inputs]),
        "storage": storage.settings_option(),
        "locations": json.dumps({f: [loc, named] for f, loc, named in inputs}),
        "cores": str(max(cores, 1)),
    }


def _file_bytes(path: str, remote: int) -> int:
    """A dump file's size for packing files into tasks: ``remote`` for one in object storage (not asked for), 0
    for one that cannot be read (its reader says so)."""
    if "://" in path:
        return remote
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
