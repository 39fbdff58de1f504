"""Where a run's Python work runs: in Spark's tasks, or in the driver process without Spark.

Every Python step of the job (the Data Sources' readers, the Arrow functions of ``applyInArrow`` and
``mapInArrow``) is a plain function over Arrow tables. On a large input Spark runs them in Python
tasks, in parallel, near the data, and plans the joins and aggregates between them. On a small one,
Spark's part costs far more than the work: a Python Data Source is planned in a Python process of its
own, every Python stage starts or wakes Python workers, and a cold JVM plans and compiles each of
its queries: on a tiny input that is nearly all of the run's time (benchmarks/RESULTS.md, "Startup").

Spark pays back its fixed cost only by spreading the per-byte work over more cores than one process has, so
the threshold, ``driver_max_bytes``, is by default (``auto``) where the two placements take the same time for the
cores Spark would have (:class:`Costs`): an input just above it takes about what one just below it takes.

So with :attr:`Placement.driver` (the input is at most the threshold) the run calls the per-partition task
functions the sources call in Spark here, on threads (txnlog.engine.tasks.run_here, and for the dumps
txnlog.engine.spark.dump_log.read_dump_logs_here), no Spark query; the Delta
writer takes the Arrow tables. Such a run needs no Spark session at all
(``txnlog.pipeline.inputs.Inputs.without_spark``): ``./spark-submit.sh`` without Spark options runs it in its Python
process, and no JVM starts. Either way the tables are built by txnlog.rules.tables in this process; in Spark,
the tasks hand it only the rows left once every partition is merged and reduced where it was decoded
(txnlog.engine.spark.collect). Both placements give the same tables (tests/e2e/test_placement.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.engine.tasks import Task, run_here

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource


@dataclass(frozen=True)
class Costs:
    """What a run takes in each placement, as lines in the input's bytes, files and partitions, in seconds (fitted
    to runs on this project's 2-core machine; benchmarks/RESULTS.md, "Startup", "Where the placements cross: per
    file and per partition"):

    * in the driver, per GiB, ``driver_serial_s_per_gib`` that more cores do not shorten (the build of the tables,
      the reading threads' share of the GIL) and ``driver_parallel_s_per_gib`` that its reading threads, one per
      core, share (txnlog.engine.tasks.run_here);
    * in Spark, ``spark_fixed_s`` more whatever the input (a JVM, a session, planning, tasks' Python workers,
      the exit), and ``task_s_per_gib`` per GiB and core: the tasks share the cores Spark has.

    Files and partitions add their terms. A file (a segment or a producer snapshot: its open, read and group in
    the walk) costs ``driver_s_per_file`` in the driver, where its Python work holds the GIL so the threads do it
    one at a time, and ``task_s_per_file`` per core in Spark, whose tasks are processes (a task pays per file what
    a reading thread pays). A partition (its merge and rows, the audit's checks, its rows of the tables) costs
    ``driver_s_per_partition`` in the driver, and in Spark ``task_s_per_partition`` per core in the tasks and
    ``spark_s_per_partition`` that more cores do not shorten: its rows through the JVM and the driver, and the
    tables' build there. That last term is as large as the driver placement's whole cost per partition, so an
    input of many small partitions stays in the driver however many cores Spark has.

    The per-GiB terms are the hot mix's lines (the costlier mix per byte), ``spark_fixed_s`` a quiet machine's; the
    per-partition terms are the slopes of the copy of many tiny partitions (benchmarks/many_partitions.py, three
    files each) in CPU-seconds per process, the driver's and JVM's counted as Spark's serial part; the per-file
    terms the small-segments mix's cost per file beyond its bytes at equal transactions per byte.

    An input of F files and P partitions per GiB keeps that shape as it grows, so each term weighs per byte at
    every size, and with Spark on ``cores`` cores and the driver reading with ``threads`` the lines cross at
    ``spark_fixed_s / (driver − spark)`` GiB, ``driver`` and ``spark`` the placements' seconds per GiB of that
    shape; where that is not positive they never do: the driver is faster at every size. Only 2 cores were
    measured: how the tasks' terms fall with more cores is this model's guess."""

    spark_fixed_s: float = 10.9
    driver_serial_s_per_gib: float = 0.35
    driver_parallel_s_per_gib: float = 1.56
    task_s_per_gib: float = 3.52
    driver_s_per_file: float = 0.00002
    task_s_per_file: float = 0.00002
    driver_s_per_partition: float = 0.00037
    task_s_per_partition: float = 0.00001
    spark_s_per_partition: float = 0.00069

    def driver_s_per_gib(self, threads: int, files_per_gib: float = 0.0, partitions_per_gib: float = 0.0) -> float:
        """The driver's seconds per GiB with ``threads`` reading threads (one per core), for an input of
        ``files_per_gib`` files and ``partitions_per_gib`` partitions per GiB."""
        serial = self.driver_serial_s_per_gib + files_per_gib * self.driver_s_per_file
        return (
            serial + partitions_per_gib * self.driver_s_per_partition + self.driver_parallel_s_per_gib / max(threads, 1)
        )

    def spark_s_per_gib(self, cores: int, files_per_gib: float = 0.0, partitions_per_gib: float = 0.0) -> float:
        """Spark's seconds per GiB on ``cores`` cores beyond its fixed cost, for an input of that shape."""
        tasks = (
            self.task_s_per_gib + files_per_gib * self.task_s_per_file + partitions_per_gib * self.task_s_per_partition
        )
        return tasks / max(cores, 1) + partitions_per_gib * self.spark_s_per_partition

    def crossover(
        self, cores: int, threads: int | None = None, files_per_gib: float = 0.0, partitions_per_gib: float = 0.0
    ) -> int | None:
        """Bytes at which Spark on ``cores`` cores takes what the driver with ``threads`` reading threads (by
        default as many as ``cores``: a local session) takes, for an input of ``files_per_gib`` files and
        ``partitions_per_gib`` partitions per GiB; None: never, the driver is faster at every size."""
        driver = self.driver_s_per_gib(threads or cores, files_per_gib, partitions_per_gib)
        per_gib = driver - self.spark_s_per_gib(cores, files_per_gib, partitions_per_gib)
        return None if per_gib <= 0 else int(self.spark_fixed_s / per_gib * 2**30)


COSTS = Costs()


def local_cores() -> int:
    """The cores this process may run on: what ``local[*]`` gives Spark here."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def master_cores(master: str | None) -> int | None:
    """The cores a ``local`` master gives Spark (``local``: 1, ``local[N]``/``local[N,F]``: N, ``local[*]``:
    :func:`local_cores`); None for another master (a cluster's cores are known once its session is)."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", (master or "local[*]").strip())
    if found is None:
        return None
    n = found.group(1)
    return 1 if n is None else local_cores() if n == "*" else max(int(n), 1)


def session_cores(master: str | None, spark: SparkSession | None) -> int | None:
    """The cores a run weighs: those of ``spark``'s session (its default parallelism: a cluster's executors'
    cores), or without one those of the session the run would start (:func:`master_cores` of ``master``)."""
    if spark is not None:
        try:
            return int(spark.sparkContext.defaultParallelism)
        except Exception:  # a session without a SparkContext here (Spark Connect): the config's master
            pass
    return master_cores(master)


@dataclass(frozen=True)
class Placement:
    """Run the job in Spark (``driver`` false) or, for a small input, in this driver process (``driver`` true),
    its files read by ``threads`` threads (txnlog.engine.tasks.run_here)."""

    driver: bool = False
    threads: int = 1

    @classmethod
    def for_input(
        cls,
        input_bytes: int,
        max_bytes: int | str,
        *,
        live: bool = False,
        cores: int | None = None,
        files: int = 0,
        partitions: int = 0,
    ) -> Placement:
        """The driver when the input is known and at most ``max_bytes`` (0: never; ``"auto"``: where the
        placements cross, :meth:`Costs.crossover`, for ``cores``, by default :func:`local_cores`, and the input's
        ``files`` and ``partitions``); a live read is not bounded by a size known in advance, so it stays in tasks.
        In the driver, one thread per core of this machine reads the files (at most ``cores``)."""
        if live or max_bytes == 0:
            return cls(driver=False)
        # the driver reads with this machine's cores, or fewer when a local master says so
        threads = min(cores or local_cores(), local_cores())
        if max_bytes == "auto":
            gib = max(input_bytes / 2**30, 2**-30)
            limit = COSTS.crossover(cores or local_cores(), threads, files / gib, partitions / gib)
        else:
            limit = int(max_bytes)
        if limit is not None and input_bytes > limit:
            return cls(driver=False)
        return cls(driver=True, threads=threads)


def read_here(source: type[DataSource], options: dict[str, str], schema: pa.Schema) -> pa.Table:
    """Every batch a Data Source's reader yields for ``options``, read in this process, as one Arrow table of
    ``schema`` (the source's own, in Arrow): a Data Source read without a DataFrame (a run's driver placement
    calls the task functions themselves, txnlog.engine.tasks)."""
    return read_all_here([(source, options, schema)])[0]


Read = tuple[type["DataSource"], dict[str, str], pa.Schema]  # a source, its options, its schema in Arrow


def read_all_here(reads: list[Read], threads: int = 1) -> list[pa.Table]:
    """:func:`read_here` of each (source, options, schema) of ``reads``, their input partitions read by ``threads``
    threads of this process as txnlog.engine.tasks.run_here runs tasks (the first read's partitions first, each
    reader's heaviest first, as it plans them; each table in its reader's partition order)."""
    readers = [source(options).reader(None) for source, options, _ in reads]  # type: ignore[arg-type]  # schema known
    jobs: list[tuple[list[Task], pa.Schema]] = [
        ([partial(reader.read, part) for part in reader.partitions()], schema)
        for reader, (_, _, schema) in zip(readers, reads, strict=True)
    ]
    return run_here(jobs, threads)
