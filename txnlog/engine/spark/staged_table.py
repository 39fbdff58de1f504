"""An output table as staged files (txnlog.engine.staging) and what finishes them, in Spark's tasks.

The tasks that rebuilt the rows staged them as Arrow files; :class:`StagedTable` holds the session that
turns them into the table's files, in parallel Python tasks (or in this process for a small input), and
the Delta writer commits them as they are. Rows never pass through the JVM: it schedules tasks and moves
file names.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.engine.staging import finish_files, staged_files
from txnlog.rules.finish import Finisher
from txnlog.sources import storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the staged files a task finishes, and what it hands back
PATHS_SCHEMA = pa.schema([("path", pa.string())])
FINISHED_SCHEMA = pa.schema([("rows", pa.int64())])


@dataclass(frozen=True)
class StagedTable:
    """An output table as staged files plus what finishes them (txnlog.engine.staging): ``transactions``
    (``txnlog.rules.finish.Finish``) or ``coordinator_history`` (``FinishHistory``).

    ``txnlog.output.delta`` writes it with :meth:`write_parquet` into the table's own staging directory (the
    deltalake writer commits those files), or reads it with :meth:`dataframe` (delta-spark, notebooks).
    """

    spark: SparkSession | None  # None: a run without Spark (``driver``)
    stage: str
    how: Finisher
    table: str = "transactions"
    driver: bool = False  # finish in this process (a small input: txnlog.engine.spark.placement), not in tasks
    threads: int = 1  # in this process, finished by so many threads (the placement's)

    def raw_files(self) -> list[str]:
        return staged_files(self.stage)

    def write_parquet(self, target: str, cluster: str, as_of: datetime) -> int:
        """Write the table's files for the run (cluster, as_of) into ``target`` (a directory path or
        URI), in parallel tasks; returns the rows written."""

        files = self.raw_files()
        if not files:
            return 0
        if self.driver:  # by the placement's threads: Parquet's encoder and Arrow's kernels release the GIL
            finish = partial(_finished, how=self.how, target=target, cluster=cluster, as_of=as_of)
            with ThreadPoolExecutor(max(1, min(self.threads, len(files))), thread_name_prefix="txnlog-finish") as pool:
                return sum(pool.map(finish, [[path] for path in files]))
        spark = self._session()
        # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
        from txnlog.engine.spark.file_tasks import dealt, each_group

        groups = dealt(files, spark.sparkContext.defaultParallelism * 2)
        work = partial(
            _finish_in_task, storage.settings_option(), how=self.how, target=target, cluster=cluster, as_of=as_of
        )
        # one job of one stage, a task per group of files; each hands back one row, its files' rows summed
        return sum(row.rows for row in each_group(spark, groups, work, FINISHED_SCHEMA).collect())

    def dataframe(self, cluster: str, as_of: datetime) -> DataFrame:
        """The table as a Spark DataFrame (finished into a directory next to the staged rows)."""
        from txnlog.engine.spark.schemas import spark_schema

        spark = self._session()
        target = posixpath.join(self.stage, f"_finished-{uuid.uuid4().hex[:8]}")
        if not self.write_parquet(target, cluster, as_of):
            return spark.createDataFrame([], spark_schema(self.table))
        return spark.read.schema(spark_schema(self.table)).parquet(target)

    def _session(self) -> SparkSession:
        if self.spark is None:
            raise ValueError(f"{self.table}: staged by a run without Spark; finish it with write_parquet")
        return self.spark


def _finish_in_task(
    settings: str, files: list[str], how: Finisher, target: str, cluster: str, as_of: datetime
) -> Iterator[pa.RecordBatch]:
    """txnlog.engine.staging.finish_files of a group of staged ``files`` in a Spark task, with the driver's storage
    settings: one row, the rows written."""
    storage.configure_from_options({"storage": settings})
    yield pa.RecordBatch.from_pydict({"rows": [_finished(files, how, target, cluster, as_of)]}, FINISHED_SCHEMA)


def _finished(files: list[str], how: Finisher, target: str, cluster: str, as_of: datetime) -> int:
    """txnlog.engine.staging.finish_files of the staged ``files``: the rows written."""
    batches = iter([pa.RecordBatch.from_pydict({"path": files}, schema=PATHS_SCHEMA)])
    return sum(pc.sum(b.column("rows")).as_py() or 0 for b in finish_files(batches, how, target, cluster, as_of))
