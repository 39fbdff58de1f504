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
(``txnlog.pipeline.runs_without_spark``): ``./spark-submit.sh`` without Spark options runs it in its Python
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
    """What a run takes in each placement, as lines in the input's size, in seconds (measured on this project's
    2-core machine, benchmarks/placement.py on the hot-partition mix, the costlier of the two measured mixes per
    byte; benchmarks/RESULTS.md, "Where the placements cross"):

    * in the driver, per GiB, ``driver_serial_s_per_gib`` that more cores do not shorten (the build of the tables,
      the reading threads' share of the GIL) and ``driver_parallel_s_per_gib`` that its reading threads, one per
      core, share (txnlog.engine.tasks.run_here);
    * in Spark, ``spark_fixed_s`` more whatever the input (a JVM, a session, planning, tasks' Python workers,
      the exit), and ``task_s_per_gib`` per GiB and core: the tasks share the cores Spark has.

    With Spark on ``cores`` cores and the driver reading with ``threads`` the two lines cross at
    ``spark_fixed_s / (serial + parallel / threads − task_s_per_gib / cores)`` GiB; where that is not positive they
    never do. On one machine (``local[*]``, threads = cores) that needs more than 4 cores: the driver's threads
    cost less than half what Spark's tasks cost per byte, and only the part they do not share grows relatively
    with the cores. Measured on 2 cores only: how the threads scale beyond 2 is this model's guess.

    Files add a term to each line: ``driver_s_per_file`` serial in the driver, ``task_s_per_file`` per file and
    core in Spark; an input of F files per GiB adds F × each to the per-GiB terms, so a log dir of many small
    segments (thousands per GiB) crosses over to Spark where one of few large segments never does. Unlike the
    per-GiB terms, the per-file values are not fitted to the placements' lines: the driver's lies within the job's
    CPU per file on the small-segments mix, Spark's is an estimate (benchmarks/RESULTS.md §2, "Many small
    segments: the job's CPU per file")."""

    spark_fixed_s: float = 10.9
    driver_serial_s_per_gib: float = 0.35
    driver_parallel_s_per_gib: float = 1.56
    task_s_per_gib: float = 3.52
    #: Per file read (a segment or a producer snapshot), besides its bytes: in the driver, the Python work of a
    #: file holds the GIL, so its threads do it one at a time; Spark's tasks are processes and share it out over
    #: the cores (the small-segments mix, benchmarks/RESULTS.md "Many small segments").
    driver_s_per_file: float = 0.0004
    task_s_per_file: float = 0.00012

    def driver_s_per_gib(self, threads: int) -> float:
        """The driver's seconds per GiB with ``threads`` reading threads (one per core)."""
        return self.driver_serial_s_per_gib + self.driver_parallel_s_per_gib / max(threads, 1)

    def crossover(self, cores: int, threads: int | None = None, files_per_gib: float = 0.0) -> int | None:
        """Bytes at which Spark on ``cores`` cores takes what the driver with ``threads`` reading threads (by
        default as many as ``cores``: a local session) takes, for an input of ``files_per_gib`` files per GiB (a
        log dir keeps its shape as it grows: the per-file terms weigh as much per byte at every size); None:
        never, the driver is faster at every size."""
        driver = self.driver_s_per_gib(threads or cores) + files_per_gib * self.driver_s_per_file
        per_gib = driver - (self.task_s_per_gib + files_per_gib * self.task_s_per_file) / max(cores, 1)
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
        cls, input_bytes: int, max_bytes: int | str, *, live: bool = False, cores: int | None = None, files: int = 0
    ) -> Placement:
        """The driver when the input is known and at most ``max_bytes`` (0: never; ``"auto"``: where the
        placements cross, :meth:`Costs.crossover`, for ``cores``, by default :func:`local_cores`, and the input's
        ``files``); a live read is not bounded by a size known in advance, so it stays in tasks. In the driver,
        one thread per core of this machine reads the files (at most ``cores``)."""
        if live or max_bytes == 0:
            return cls(driver=False)
        # the driver reads with this machine's cores, or fewer when a local master says so
        threads = min(cores or local_cores(), local_cores())
        per_gib = files / max(input_bytes / 2**30, 2**-30)
        limit = COSTS.crossover(cores or local_cores(), threads, per_gib) if max_bytes == "auto" else int(max_bytes)
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
