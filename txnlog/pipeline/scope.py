"""What one run holds for its duration: its scratch directory and cached DataFrames (released on every exit),
its Spark settings, and the progress lines it prints (its Spark jobs' labels: txnlog.engine.spark.session)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from txnlog.output import output_dir
from txnlog.output.spark_base import temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(f"[txnlog] {message}", file=sys.stderr, flush=True)


# Spark caches a DataFrame's plan with adaptive execution switched off unless this is true, so every
# shuffle inside the cached intermediates of build_tables would run spark.sql.shuffle.partitions
# tasks and plan its joins without statistics (sort-merge joins) for small tables. With it,
# adaptive execution coalesces those shuffles and broadcasts the small sides (benchmarks/RESULTS.md E1).
# spark.sql.maxPlanStringLength: adaptive execution renders every re-planned query as a string (for the
# UI/event log); the table queries read several cached intermediates, whose plans are rendered inside
# theirs, and the unbounded string filled the driver's heap on kafka-dump-log.sh input; the bound keeps
# the event log useful.
RUN_CONF: dict[str, str] = {
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    "spark.sql.maxPlanStringLength": "1000000",
}


class Cache:
    """The DataFrames a run persisted; :func:`run_scope` unpersists them on every exit path."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def __call__(self, df: DataFrame) -> DataFrame:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(df)
        return df

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()
        self.frames.clear()


@contextmanager
def run_scope(spark: SparkSession | None, output: str, run_id: str) -> Iterator[tuple[str, Cache]]:
    """A run's scratch directory under the output (txnlog.engine.staging) and its cache, both released on
    every exit; the run's Spark settings (RUN_CONF; one the user set explicitly wins) for its duration
    (``spark`` None: a small input's run, which starts no Spark)."""

    cache = Cache()
    settings: AbstractContextManager[None] = nullcontext()
    if spark is not None:
        run_conf = {k: v for k, v in RUN_CONF.items() if spark.conf.get(k, None) is None}
        settings = temporary_conf(spark, run_conf)
    with output_dir.scratch(output, run_id) as scratch, settings:
        try:
            yield scratch, cache
        finally:
            cache.release()


#: new objects between two of the collector's young passes during a run (Python's default: 700)
YOUNG_OBJECTS = 10_000


@contextmanager
def collected_young() -> Iterator[Callable[[], None]]:
    """A run's scope for Python's cyclic collector. A run makes a Python object per input file (the inventory, the
    tasks' files) and per row it writes out in Python (the findings' evidence), most of them alive to its end; at
    the default threshold each young pass moved them up and the older generations' passes walked them again, under
    the GIL, pausing the reading threads: a quarter or more of the driver's run on a copy of many tiny partitions
    (benchmarks/RESULTS.md §2). Here a young pass comes every :data:`YOUNG_OBJECTS` new objects, and ``keep``
    (yielded) leaves every object alive at its call out of later passes (``gc.freeze``); both undone when the scope
    ends (``gc.unfreeze`` unless something had frozen objects before)."""
    frozen_before, thresholds = gc.get_freeze_count(), gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, *thresholds[1:])
    try:
        yield gc.freeze
    finally:
        gc.set_threshold(*thresholds)
        if not frozen_before:
            gc.unfreeze()
