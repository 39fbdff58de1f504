"""A Spark Python worker's first and second task, forked from a daemon as Spark forks them, cold and warm.

Plans the segments source (``txnlog.engine.spark.sources.SegmentsSource``) over the files of ``DIR`` below
``--max-bytes`` (the small partitions of the small-segments mix) into ``--tasks`` input partitions and pickles the
reader and its partitions, as Spark ships them to a task. Then, per repeat and mode, a fresh Python process that
has imported ``pyspark.daemon`` (what Spark's daemon holds before it forks) forks a child that unpickles them and
reads the first two partitions, each batch made an Arrow table as a worker hands it on:

* ``cold``: the parent as Spark's own daemon is (``pyspark.daemon``);
* ``warm``: the parent ran ``txnlog.engine.spark.worker_daemon.warm()`` first, as txnlog's daemon does.

Prints the child's CPU seconds (``getrusage``: the child's own) for each task; with ``--profile`` also the first
task's imports and numba first dispatches under ``cProfile`` (which inflates Python-heavy code).

    python benchmarks/worker_start.py DIR [--repeats 3] [--profile]      # benchmarks/RESULTS.md §2
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile

CHILD = r"""
import os, pickle, pstats, resource, sys, time
mode, plan, profile = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
import pyspark.daemon  # what Spark's daemon has imported before it forks
if mode == "warm":
    from txnlog.engine.spark.worker_daemon import warm
    warm()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
r, w = os.pipe()
if os.fork() == 0:
    c0 = cpu()
    if profile:
        import cProfile
        prof = cProfile.Profile(time.thread_time)
        prof.enable()
    with open(plan, "rb") as f:
        reader, parts = pickle.load(f)
    import pyarrow as pa
    spent = []
    for part in parts[:2]:
        for b in reader.read(part):
            pa.Table.from_batches([b])
        spent.append(cpu() - c0 - sum(spent))
        if profile and len(spent) == 1:
            prof.disable()
    note = ""
    if profile:
        s = pstats.Stats(prof)
        def cum(name):
            return max((v[3] for k, v in s.stats.items() if k[2] == name), default=0.0)
        note = (f"; profiled first task {s.total_tt:.2f}: imports {cum('_find_and_load'):.2f}, "
                f"numba first dispatches {cum('_compile_for_args'):.2f}")
    os.write(w, f"{mode}: task 1 {spent[0]:.2f} CPU-s, task 2 {spent[1]:.2f} CPU-s{note}".encode())
    os._exit(0)
os.close(w)
os.wait()
print(os.read(r, 4096).decode())
"""


def plan(root: str, max_bytes: int, tasks: int, out: str) -> int:
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.sources.logdirs import discover

    inventory = discover([root])
    files = [f for f in list(inventory.segments) + list(inventory.snapshots) if f.size < max_bytes]
    options = {"files": files_option(files), "check_crc": "true", "min_partitions": str(tasks)}
    reader = SegmentsSource(options).reader(None)  # type: ignore[arg-type]  # the source's schema is fixed
    with open(out, "wb") as f:
        pickle.dump((reader, list(reader.partitions())), f)
    return len(files)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="a log dir (e.g. DATA/e2e-small-0.25GiB/broker-1)")
    p.add_argument("--max-bytes", type=int, default=2 << 20, help="files below this size (default 2 MiB)")
    p.add_argument("--tasks", type=int, default=4, help="input partitions (default 4)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-start-") as work:
        plan_file = os.path.join(work, "plan.pkl")
        print(f"{plan(args.dir, args.max_bytes, args.tasks, plan_file)} files in {args.tasks} tasks")
        for _ in range(args.repeats):
            for mode in ("cold", "warm"):
                flag = "1" if args.profile else "0"
                subprocess.run([sys.executable, "-c", CHILD, mode, plan_file, flag], check=True)


if __name__ == "__main__":
    main()
