"""Spark Python Data Sources over Kafka log files (Spark 4 Data Source API): planning and reading.

The driver only lists files (``txnlog.sources.logdirs``) and hands the list to a
source as an option; the files are dealt into a few balanced input partitions
(txnlog.engine.plan), and each is read in its task by the task function the local placement calls too
(txnlog.engine.tasks.log_dir_task): this module only turns the options into its typed settings
(txnlog.engine.settings). What leaves the executor is small:

* ``txnlog_segments`` — per data segment: transaction *fragments* (see
  ``txnlog.broker.reconstruct``), one ``segment`` summary row, ``quarantine`` rows;
  per producer snapshot: its entries. Batch headers never leave the executor.

(``txnlog_txn_state``, every ``__transaction_state`` record decoded, is txnlog.engine.spark.txn_state_source.)

Options: ``manifest`` (an Arrow file listing the files, txnlog.engine.manifest.write_manifest) or, for a few files,
``files`` (JSON list of ``txnlog.sources.logdirs.LogFile`` dicts); ``check_crc`` ("true"/"false"),
``max_decompressed_bytes`` (what compressed control and ``__transaction_state`` batches of one file may
expand to, ``txnlog.kafka.compression``), ``min_partitions`` and ``max_partition_bytes`` (see
txnlog.engine.plan.pack_files); ``storage`` (the shared-storage settings, ``txnlog.sources.storage``);
``split_segment_bytes`` (``txnlog_segments``: local ``.log`` files above it are read in pieces cut at their
offset index, ``txnlog.sources.splits``; 0 or absent: never — the summary then holds ``piece`` rows and fragments that
``txnlog.engine.spark.stitch.stitch_pieces`` and the fragment merge finish); ``edge_segment_bytes`` (with
``transactions``: a segment of at least this size, of a partition of one replica read whole in a task, finishes
its inner transactions and hands the task's merge only its edges, txnlog.engine.segments.Edges; default
txnlog.engine.settings.EDGE_SEGMENT_BYTES, 0: every segment).

What a task receives is proportional to its own files: the file list is read once while planning (in
the driver's planning worker) and dealt into the input partitions; the reader that Spark pickles into
every task keeps no list of all files (a JSON option of 300,000 files is ~59 MB, and Spark ships the
reader, its options and the data source's with each task).

Spark plans a Python Data Source in processes of its own, two a source (its schema, then its tasks), each of which
imports the source's module afresh: the sources' modules import the plan and the schemas only, and a reader
imports the task function it runs (txnlog.engine.tasks, which loads the decoders and numba) in its task, where
txnlog's Spark daemon has imported it already (txnlog.engine.spark.worker_daemon).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from txnlog.engine.manifest import PLANNING_OPTIONS, manifest_checkpoints, manifest_table, table_files
from txnlog.engine.plan import DEFAULT_MAX_PARTITION_BYTES, FilesTask, Plan, plan_tasks
from txnlog.engine.settings import LogDirSettings, option_flag
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile

SEGMENTS_SOURCE = "txnlog_segments"


def arrow_to_spark_schema(schema: pa.Schema) -> StructType:
    return from_arrow_schema(schema)


def plan_of(options: dict[str, str]) -> Plan:
    """The :class:`txnlog.engine.plan.Plan` of a source's options (``transactions`` or ``reduce``: whole
    partitions per task)."""
    minimum = int(options.get("min_partitions", 4))
    return Plan(
        max_partition_bytes=int(options.get("max_partition_bytes", DEFAULT_MAX_PARTITION_BYTES)),
        min_partitions=minimum,
        whole=option_flag(options, "transactions", False) or option_flag(options, "reduce", False),
        split_segment_bytes=int(options.get("split_segment_bytes") or 0),
        cores=int(options.get("cores") or 0),
    )


def plan_partitions(options: dict[str, str]) -> list[FilesTask]:
    """The tasks of a source's options: its manifest (or ``files``) planned (txnlog.engine.plan.plan_tasks)."""
    plan = plan_of(options)
    checkpoints = manifest_checkpoints(options) if plan.whole else []
    return plan_tasks(plan, manifest_table(options), checkpoints)


class _FilesPartition(InputPartition):
    """One task of the plan (txnlog.engine.plan.FilesTask: its rows of the manifest, pickled as Arrow IPC buffers
    with this task only, and its checkpoint rows)."""

    def __init__(self, task: FilesTask):
        super().__init__(task)


def partition_task(partition: InputPartition) -> FilesTask | None:
    """The task of an input partition; None for the placeholder Spark reads when there are no files."""
    return partition.value if isinstance(partition, _FilesPartition) else None


class FilesReader(DataSourceReader):
    """A reader over the ``manifest`` (or ``files``) option, packed into input partitions (txnlog.engine.plan).

    Spark pickles the reader into every task: after :meth:`partitions` it keeps only the small options,
    each partition carries its own files."""

    def __init__(self, options: dict[str, str]):
        self.options = {k: v for k, v in options.items() if k not in PLANNING_OPTIONS}
        self._planning: dict[str, str] | None = {k: options[k] for k in PLANNING_OPTIONS if k in options}
        storage.configure_from_options(options)

    @property
    def files(self) -> list[LogFile]:
        """Every file of the source (planning only)."""
        return table_files(manifest_table(self._planning or {}))

    def partitions(self) -> list[InputPartition]:
        planning, self._planning = self._planning or {}, None  # not pickled into the tasks
        return [_FilesPartition(task) for task in plan_partitions({**self.options, **planning})]

    def start_task(self) -> None:
        """In a task, before reading: the driver's shared-storage settings (txnlog.sources.storage)."""
        storage.configure_from_options(self.options)

    def task_files(self, partition: InputPartition) -> list[LogFile]:
        """The files of ``partition``'s task (none for a placeholder), once the task is set up."""
        self.start_task()
        task = partition_task(partition)
        return [] if task is None else task.files()


class _SegmentsReader(FilesReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        self.start_task()
        task = partition_task(partition)
        if task is not None:
            from txnlog.engine.tasks import log_dir_task  # imported in the task only (the module doc says why)

            yield from log_dir_task(task, LogDirSettings.from_options(self.options))


class SegmentsSource(DataSource):
    """``spark.read.format("txnlog_segments").option("files", files_option(...)).load()``"""

    @classmethod
    def name(cls) -> str:
        return SEGMENTS_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _SegmentsReader(dict(self.options))
