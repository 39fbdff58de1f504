"""Spark's Python daemon for txnlog's tasks: the readers' imports and compiled kernels loaded once per executor.

Spark starts one Python daemon per executor (``spark.python.daemon.module``, by default ``pyspark.daemon``) and
forks every Python worker of that executor from it. A fresh worker imports pandas, pyarrow and txnlog's readers,
and its first call of each compiled kernel (``txnlog.kafka.jit``) loads it from numba's on-disk cache and builds
numba's typing and target registries: on a small input that is most of a reading task's CPU, paid again by every
worker (benchmarks/RESULTS.md §2, "Many small segments: what a Spark task pays per file"). This module does that
work once, in the daemon, and then runs Spark's own daemon loop: each worker forked from it starts with the
modules imported and the kernels loaded (copy-on-write pages of the daemon).

The session names this module in ``spark.python.daemon.module`` (txnlog.engine.spark.session). It loads the
kernels from the cache only, the signatures the install-time warm-up (txnlog.pipeline.warm_decoders) compiled:
it never compiles. Should anything of the warm-up fail (a numba whose cache differs, a missing module), the daemon
goes on without it, and each worker loads what it needs as before.

Forking after these imports is safe where Spark's daemon otherwise avoids it: numpy's BLAS and Arrow's jemalloc
start a thread each when imported, and both hand a child process a consistent state (their ``pthread_atfork``
handlers); in the child jemalloc's background purging thread is off, so a worker returns freed pages to the
system when it next allocates rather than on a timer.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import zipimport
from typing import Any

#: The modules a txnlog task's worker imports: the readers Spark unpickles, the Arrow functions of the stitch and
#: the merges, pandas (pyarrow's first conversion to an array imports it) and Spark's own worker loop.
MODULES = (
    "pandas",
    "pyspark.worker",
    "txnlog.engine.tasks",
    "txnlog.engine.spark.sources",
    "txnlog.engine.spark.txn_state_source",
    "txnlog.engine.spark.collect",
    "txnlog.engine.spark.stitch",
    "txnlog.engine.spark.dump_log",
    "txnlog.engine.spark.dump_log_source",
)


def warm() -> int:
    """Import :data:`MODULES` and load every compiled kernel of txnlog that numba's cache holds for the current
    sources; the number of kernels' signatures loaded (0 when the warm-up could not run)."""
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  # a warm-up only: a worker imports what it needs itself
            continue
    try:
        return _load_cached_kernels()
    except Exception:  # noqa: BLE001  # numba's cache not as expected: each worker loads what it needs itself
        return 0


def _load_cached_kernels() -> int:
    """Every signature numba's on-disk cache index holds for a compiled function of an imported txnlog module,
    loaded (never compiled: a signature whose index entry does not match the function's current code is skipped)."""
    # Optional heavy import: numba only where its kernels are warmed.
    from numba.core.registry import CPUDispatcher

    loaded = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("txnlog.") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher):
                loaded += _load_dispatcher(value)
    return loaded


def _load_dispatcher(dispatcher: Any) -> int:
    cache = dispatcher._cache  # numba's FunctionCache (cache=True), or a NullCache
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None:
        return 0
    codegen = dispatcher.targetctx.codegen()
    loaded = 0
    for key in cache_file._load_index():  # (signature, codegen's magic tuple, hashes of the function's code)
        if key == cache._index_key(key[0], codegen) and key[0] not in dispatcher.overloads:
            dispatcher.compile(key[0])  # found in the cache: loaded, not compiled
            loaded += 1
    return loaded


def zip_directories_read_once() -> None:
    """``importlib.invalidate_caches()`` re-reads a zip's directory only where the zip file changed since it was read.

    Spark's worker calls ``importlib.invalidate_caches()`` at the start of every task (``setup_spark_files``, for the
    files the task may add to the path). Python's ``zipimporter.invalidate_caches`` re-reads the whole directory of
    its archive, in Python, and there is one importer per package imported from a zip: pyspark's modules come from
    ``pyspark.zip`` (2,575 entries with its bytecode, txnlog.engine.spark.zip_bytecode), a dozen or more importers of
    it, ~0.2 CPU-s a task. Here an importer re-reads its archive when the file's identity, size or modification time
    differ from when it last read it, as the new contents of a file Spark fetched again would; the directories are
    read once in the daemon, before it forks the workers."""
    reread = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        try:
            st = os.stat(self.archive)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        if stamp is None or getattr(self, "_txnlog_read_at", None) != stamp:
            reread(self)
            self._txnlog_read_at = stamp  # type: ignore[attr-defined]

    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    importlib.invalidate_caches()


#: The worker module of the daemon that runs tasks; Spark starts a daemon of its own (with this module too) for each
#: kind of planning worker of a Python Data Source, which decodes nothing and is not warmed.
TASK_WORKER = "pyspark.worker"

if __name__ == "__main__":
    if sys.argv[1:2] in ([], [TASK_WORKER]):
        warm()
    zip_directories_read_once()
    # Spark's daemon loop, which forks this process for every worker; it reads its worker module from sys.argv.
    from pyspark.daemon import manager

    # The imports' objects left out of every later collection (what gc.freeze is for: a server that forks): a
    # reused worker runs gc.collect() after each task (Spark's daemon loop), which otherwise walks them all again
    # and touches their pages, copied then from the daemon's.
    gc.freeze()
    manager()
