#!/usr/bin/env python
"""Scale benchmark, planning part (issue 14): driver discovery and planning of 10k-100k partitions.

For each size N (``--partitions``, default 10000,30000,100000) one broker log dir of N partition
directories (topics of 100 partitions) is written to local disk once, and reused: every partition holds
two tiny segments and a producer snapshot (3 files: 300,000 at N=100k), all hard links to one tiny valid
segment and one valid snapshot of the embedded sample cluster (``txnlog.brokerlog``), plus the log dir's
``replication-offset-checkpoint`` and ``log-start-offset-checkpoint`` naming every partition.

Each size is then measured in a fresh Python process (so its peak RSS is its own), which starts a Spark
session (``local[2]``, ``spark.driver.memory`` = ``--driver-memory``; not timed) and times what a run
does before the first task reads a byte:

* ``discover``: ``txnlog.pipeline.check_inputs([log dir])`` (locate + ``txnlog.logdirs.discover``);
* ``manifest + load``: ``txnlog.pipeline._log_dir_sources`` (the file manifests written to the scratch dir,
  ``spark.read.format(...).load()`` of both sources: schema only);
* ``plan``: ``summary.rdd.getNumPartitions()`` and the same for the ``__transaction_state`` records: Spark's
  planning Python worker reads the manifest, packs the files into input partitions and pickles them.

Then, untimed, the same reader is planned in this process to weigh what each task receives: the pickled
reader (Spark pickles it into every task's read function) and each input partition, next to what the
``files`` JSON option alone weighed before the manifest (it was in the data source's options, the reader's
options and the reader's file list: three copies per task). Peak RSS: the Python driver
(``ru_maxrss``) and the driver JVM with its planning Python workers (psutil, sampled every 200 ms).

    nice timeout 3600 python benchmarks/scale.py                       # 10k, 30k, 100k partitions
    python benchmarks/scale.py --partitions 1000 --data /tmp/scale     # a smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILES_PER_PARTITION = 3  # two segments and a producer snapshot
TOPIC_PARTITIONS = 100


def _templates(work: Path) -> tuple[Path, Path]:
    """The smallest non-empty data segment and producer snapshot of the sample cluster."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.logdirs import discover
    from txnlog.sample import SAMPLE_SEED

    write_scenario("sample", work / "sample", seed=SAMPLE_SEED)
    inv = discover([str(work / "sample")])
    seg = min((f for f in inv.segments if f.size > 0), key=lambda f: f.size)
    snap = min((f for f in inv.snapshots if f.size > 0), key=lambda f: f.size)
    return Path(seg.path), Path(snap.path)


def write_log_dir(root: Path, partitions: int) -> float:
    """The N-partition log dir (module doc) under ``root``; seconds taken (0 when it was there)."""
    done = root / ".complete"
    if done.exists():
        return 0.0
    if root.exists():
        shutil.rmtree(root)
    start = time.perf_counter()
    log_dir = root / "broker-1"
    log_dir.mkdir(parents=True)
    seg0, snap0 = _templates(root / "_template")
    topics = -(-partitions // TOPIC_PARTITIONS)
    lines = []
    n = 0
    for t in range(topics):
        for p in range(min(TOPIC_PARTITIONS, partitions - n)):
            if n % 20000 == 0:  # a fresh copy to link to: ext4 allows 65,000 links per inode
                seg, snap = root / "_template" / f"seg-{n}", root / "_template" / f"snap-{n}"
                shutil.copyfile(seg0, seg)
                shutil.copyfile(snap0, snap)
            d = log_dir / f"topic-{t:05d}-{p}"
            d.mkdir()
            os.link(seg, d / "00000000000000000000.log")
            os.link(seg, d / "00000000000000001000.log")
            os.link(snap, d / "00000000000000001000.snapshot")
            lines.append(f"topic-{t:05d} {p} 1000")
            n += 1
    for name in ("replication-offset-checkpoint", "log-start-offset-checkpoint"):
        (log_dir / name).write_text("0\n" + f"{len(lines)}\n" + "\n".join(lines) + "\n")
    shutil.rmtree(root / "_template")
    done.write_text(str(partitions))
    return time.perf_counter() - start


class _Peak:
    """Peak RSS of the processes below this one (the driver JVM and its Python workers), sampled."""

    def __init__(self) -> None:
        import psutil

        self.me = psutil.Process()
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self.stop.is_set():
            total = 0
            for child in self.me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.2)  # walking /proc costs the driver CPU (and the GIL) that discovery needs


def child(log_dir: str, driver_memory: str) -> dict[str, Any]:
    """One size's measurement, in this (fresh) process."""
    from pyspark.sql import SparkSession

    from txnlog.pipeline import _describe, _log_dir_sources, check_inputs
    from txnlog.spark.placement import Placement
    from txnlog.spark.sources import SegmentsSource, files_option

    peak = _Peak()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.range(1).count()  # the JVM and a Python-free job: not timed
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    scratch = tempfile.mkdtemp(prefix="txnlog-scale-")
    load_before = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    inv = check_inputs([log_dir])
    note = _describe(inv, 0, None, 50)
    t1, c1 = time.perf_counter(), time.process_time()
    summary, records = _log_dir_sources(spark, inv, True, scratch, False, False, Placement())
    t2, c2 = time.perf_counter(), time.process_time()
    tasks = summary.rdd.getNumPartitions()
    txn_tasks = records.rdd.getNumPartitions()
    t3 = time.perf_counter()
    peak.stop.set()
    peak.thread.join()
    py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times = {
        "discover_cpu_s": c1 - c0, "manifest_load_cpu_s": c2 - c1, "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }  # fmt: skip

    # what each task receives (untimed): the same reader planned here
    from pyspark import cloudpickle

    files = [*inv.segments, *inv.snapshots]
    old_json = len(files_option(files))
    try:
        from txnlog.spark.sources import write_manifest
    except ImportError:  # code before the manifest (--code): the files went in the options
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        return {
            "partitions": len(inv.data_partitions), "files": len(files), "note": note, "discover_s": t1 - t0,
            "manifest_load_s": t2 - t1, "plan_s": t3 - t2, "total_s": t3 - t0, "tasks": tasks,
            "txn_state_tasks": txn_tasks, "py_rss_before": rss_before, "py_rss_peak": py_peak,
            "jvm_rss_peak": peak.peak, "old_files_option_bytes": old_json, **times,
        }  # fmt: skip
    options = {
        "check_crc": "true",
        "min_partitions": "4",
        "transactions": "true",
        "stage": f"{scratch}/transactions",
    }
    options.update(write_manifest(f"{scratch}/weigh", "segments", [*inv.segments, *inv.snapshots], inv.checkpoints))
    reader = SegmentsSource(options).reader(None)  # type: ignore[arg-type]
    parts = reader.partitions()
    part_bytes = [len(pickle.dumps(p)) for p in parts]
    spark.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "partitions": len(inv.data_partitions),
        "files": len(files),
        "note": note,
        "discover_s": t1 - t0,
        "manifest_load_s": t2 - t1,
        "plan_s": t3 - t2,
        "total_s": t3 - t0,
        "tasks": tasks,
        "txn_state_tasks": txn_tasks,
        "py_rss_before": rss_before,
        "py_rss_peak": py_peak,
        "jvm_rss_peak": peak.peak,
        "reader_pickle_bytes": len(cloudpickle.dumps(reader)),
        "options_bytes": sum(len(k) + len(v) for k, v in options.items()),
        "partition_pickle_bytes_max": max(part_bytes),
        "partition_pickle_bytes_total": sum(part_bytes),
        "old_files_option_bytes": old_json,
        **times,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="10000,30000,100000")
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "data" / "scale"))
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--code", help="measure this checkout of txnlog (e.g. a git archive of an older commit)")
    ap.add_argument("--child", nargs=2, metavar=("LOG_DIR", "DRIVER_MEMORY"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)))
        return 0
    results = []
    for n in (int(x) for x in args.partitions.split(",")):
        root = Path(args.data) / f"p{n}"
        written = write_log_dir(root, n)
        env = {**os.environ, "PYTHONPATH": args.code or str(ROOT)}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(root / "broker-1"), args.driver_memory],
            capture_output=True, text=True, env=env, timeout=1800,
        )  # fmt: skip
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
            return 1
        r = json.loads(line[len("RESULT ") :])
        r["write_s"] = written
        results.append(r)
        mib = 2**20
        weighed = (
            f"reader pickle {r['reader_pickle_bytes']} B, options {r['options_bytes']} B, largest partition "
            f"{r['partition_pickle_bytes_max'] / mib:.2f} MiB (all {r['partition_pickle_bytes_total'] / mib:.2f}); "
            if "reader_pickle_bytes" in r
            else ""
        )
        print(
            f"{r['partitions']:>7} partitions, {r['files']:>7} files: discover {r['discover_s']:.2f} s "
            f"(CPU {r['discover_cpu_s']:.2f}), manifest+load {r['manifest_load_s']:.2f} s "
            f"(driver CPU {r['manifest_load_cpu_s']:.2f}), plan {r['plan_s']:.2f} s, total {r['total_s']:.2f} s; "
            f"load average {r['load_before']:.1f} -> {r['load_after']:.1f}; "
            f"{r['tasks']} tasks; python driver peak {r['py_rss_peak'] / mib:.0f} MiB "
            f"(before {r['py_rss_before'] / mib:.0f}), JVM+workers peak {r['jvm_rss_peak'] / mib:.0f} MiB; "
            f"{weighed}the files option {r['old_files_option_bytes'] / mib:.1f} MiB"
            + (f"; data written in {written:.0f} s" if written else ""),
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
