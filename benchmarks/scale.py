#!/usr/bin/env python
"""Scale benchmark, planning part: driver discovery and planning of 10k-100k partitions.

For each size N (``--partitions``, default 10000,30000,100000) one broker log dir of N partition
directories (topics of 100 partitions) is written to local disk once, and reused: every partition holds
two tiny segments and a producer snapshot (3 files: 300,000 at N=100k), all hard links to one tiny valid
segment and one valid snapshot of the embedded sample cluster (``txnlog.brokerlog``), plus the log dir's
``replication-offset-checkpoint`` and ``log-start-offset-checkpoint`` naming every partition.

Each size is then measured in a fresh Python process (so its peak RSS is its own), which starts a Spark
session (``local[2]``, ``spark.driver.memory`` = ``--driver-memory``; not timed) and times what a run
does before the first task reads a byte:

* ``discover``: ``txnlog.sources.offline.check_inputs([log dir])`` (locate + ``txnlog.sources.logdirs.discover``);
* ``manifest + load``: ``txnlog.engine.spark.log_dir_options.log_dir_sources`` (the file manifests written to the scratch dir,
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

Cluster part (``--cluster``; ``--parts compare,sizes,hot``), the job as users run it (``./spark-submit.sh --logs DIR
--output OUT``, end_to_end.run_job: a separate process tree, bounded by ``--timeout``, RSS and CPU per kind of process):

* ``compare``: the same ``--compare-size`` GiB data set (``--mix``) on ``local[2]`` and on a standalone cluster this
  script starts from the installed pyspark (tests/cluster/standalone.py: ``spark-class`` master + 2 workers x 1 core
  on 127.0.0.1, stopped by the pids it started on every way out; SIGTERM unwinds too), interleaved; after each pair
  every Delta table of the two outputs is compared as a row multiset (duckdb ``EXCEPT ALL`` both ways; ``runs``
  without RUN_SPECIFIC columns and the output path). The executors' processes are sampled under the worker daemons.
* ``sizes``: ``local[2]`` at ``--sizes`` GiB (rotating order, ``--repeat``), the least-squares fit of wall time and of
  the job's CPU seconds (end_to_end.fit_line) and each run's residual.
* ``hot``: one topic-partition of ``--hot-size`` GiB in ``--hot-segment`` segments with their ``.index`` files
  (``scenarios.bulk(large_partitions=1, partitions=0)``), per ``--splits`` mode (SPLIT_KEY), interleaved with the bulk
  mix of the same size spread over 68 partitions.

Every run's tables are checked against the writer's ground truth; load averages before/after go in the JSON
(``<data-dir>/results/scale-cluster-<time>.json``) and the report.

    PYTHONPATH=. timeout 5400 python benchmarks/scale.py --cluster --data-dir benchmarks/data
    python benchmarks/scale.py --cluster --data-dir /tmp/s --compare-size 0.5 --compare-repeat 1 --sizes 0.25,0.5 \
        --repeat 1 --hot-size 0.25 --hot-segment 64MiB --hot-repeat 1                  # a smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import signal
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
MiB = 1 << 20


def _templates(work: Path) -> tuple[Path, Path]:
    """The smallest non-empty data segment and producer snapshot of the sample cluster."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.sources.logdirs import discover
    from txnlog.sources.sample import SAMPLE_SEED

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

    from txnlog.engine.manifest import files_option
    from txnlog.engine.settings import Decode
    from txnlog.engine.spark.log_dir_options import log_dir_sources
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.pipeline.inputs import describe
    from txnlog.sources.offline import check_inputs

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
    note = describe(inv, 0, None, (50, ""))
    t1, c1 = time.perf_counter(), time.process_time()
    summary, records, _ = log_dir_sources(spark, inv, Decode(True), scratch, False, False)
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
        from txnlog.engine.manifest import write_manifest
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


# --- the cluster part: the job at 1-8 GiB, on local[2] and on a standalone cluster ------------------

#: the job config key of index splits (another branch; the name may change): 0 switches them off
SPLIT_KEY = "split_segment_bytes"
#: columns of the ``runs`` table that differ between two runs of the same input by design
RUN_SPECIFIC = ("run_id", "started_at", "finished_at")
#: keys of ``runs.config`` (the effective configuration, JSON) that name where a run wrote, not what it found
CONFIG_RUN_SPECIFIC = ("output",)


class ClusterSampler(threading.Thread):
    """Peak RSS per role of a standalone cluster's processes, polled under the daemon JVMs this script started:
    the master and worker JVMs themselves, the executor JVMs the workers launch (``CoarseGrainedExecutorBackend``
    below a worker), and the executors' PySpark Python workers (their PSS: forked from one daemon, they share pages)."""

    def __init__(self, roots: dict[str, int], interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.roots = roots  # name -> pid ("master", "worker1", ...)
        self.interval = interval
        self.stop = threading.Event()
        self.peak: dict[str, float] = {}  # role -> MiB, the sum over that role's processes
        self.peak_single: dict[str, float] = {}
        self.cpu: dict[int, tuple[str, float]] = {}
        self.cpu_at_start: dict[int, float] = {}  # processes already there at the first sample: their CPU then
        self.samples = 0
        self.executors: set[int] = set()
        self.python_paths: set[str] = set()

    def run(self) -> None:
        import psutil
        from end_to_end import classify

        while not self.stop.is_set():
            sums: dict[str, float] = {}
            for name, pid in self.roots.items():
                try:
                    root = psutil.Process(pid)
                    procs = [(root, "master_jvm" if name == "master" else "worker_jvm")]
                    for p in root.children(recursive=True):
                        kind = classify(p)
                        if kind == "jvm":  # an executor, or a JVM that forked a Python daemon (until it execs)
                            executor = "CoarseGrainedExecutorBackend" in " ".join(p.cmdline())
                            procs.append((p, "executor_jvm" if executor else "jvm_fork"))
                        elif kind == "gone":  # exited (a zombie until reaped): its CPU still counts, as what it was
                            if p.pid in self.cpu:
                                procs.append((p, "gone"))
                        else:
                            procs.append((p, f"executor_{kind}"))
                except psutil.Error:
                    continue
                for p, role in procs:
                    if role == "gone":
                        try:
                            ct = p.cpu_times()
                            self.cpu[p.pid] = (self.cpu[p.pid][0], ct.user + ct.system)
                        except psutil.Error:
                            pass
                        continue
                    try:
                        if role == "executor_workers":
                            rss = p.memory_full_info().pss / MiB
                            if len(self.python_paths) < 4:
                                self.python_paths.add(p.environ().get("PYTHONPATH", ""))
                        else:
                            rss = p.memory_info().rss / MiB
                        ct = p.cpu_times()
                    except psutil.Error:
                        continue
                    if role == "jvm_fork":  # its RSS is the parent's pages, counted there
                        continue
                    if role == "executor_jvm":
                        self.executors.add(p.pid)
                    self.cpu[p.pid] = (role, ct.user + ct.system)
                    if self.samples == 0:
                        self.cpu_at_start[p.pid] = ct.user + ct.system
                    sums[role] = sums.get(role, 0.0) + rss
                    self.peak_single[role] = max(self.peak_single.get(role, 0.0), rss)
            for k, v in sums.items():
                self.peak[k] = max(self.peak.get(k, 0.0), v)
            self.samples += 1
            self.stop.wait(self.interval)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds per role while sampled (the daemons' CPU before the first sample not counted)."""
        out: dict[str, float] = {}
        for pid, (role, seconds) in self.cpu.items():
            out[role] = out.get(role, 0.0) + seconds - self.cpu_at_start.get(pid, 0.0)
        return out


def compare_outputs(a: Path, b: Path) -> dict[str, Any]:
    """Every table of two outputs as row multisets (duckdb ``EXCEPT ALL`` both ways; nested columns included):
    rows only in ``a``, only in ``b``. ``runs`` without its run-specific columns, its ``config`` JSON without
    the output path."""
    import duckdb
    import pyarrow as pa

    from txnlog.model.contract import TABLES
    from txnlog.output.delta import read_table

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    result: dict[str, Any] = {}
    for name in TABLES:
        tabs = []
        for out in (a, b):
            t = read_table(str(out), name)
            if name == "runs":
                t = t.drop_columns([c for c in RUN_SPECIFIC if c in t.column_names])
                if "config" in t.column_names:
                    configs = []
                    for text in t["config"].to_pylist():
                        cfg = json.loads(text) if text else {}
                        for key in CONFIG_RUN_SPECIFIC:
                            cfg.pop(key, None)
                        configs.append(json.dumps(cfg, sort_keys=True))
                    t = t.set_column(t.column_names.index("config"), "config", pa.array(configs, pa.string()))
            tabs.append(t)
        con.register("ta", tabs[0])
        con.register("tb", tabs[1])
        only_a = con.execute("SELECT count(*) FROM (SELECT * FROM ta EXCEPT ALL SELECT * FROM tb)").fetchone()
        only_b = con.execute("SELECT count(*) FROM (SELECT * FROM tb EXCEPT ALL SELECT * FROM ta)").fetchone()
        con.unregister("ta")
        con.unregister("tb")
        na, nb = tabs[0].num_rows, tabs[1].num_rows
        oa, ob = int(only_a[0]) if only_a else -1, int(only_b[0]) if only_b else -1
        result[name] = {"rows": [na, nb], "only_first": oa, "only_second": ob, "equal": na == nb and oa == ob == 0}
    result["all_equal"] = all(v["equal"] for v in result.values() if isinstance(v, dict))
    result["rows_compared"] = sum(v["rows"][0] for v in result.values() if isinstance(v, dict))
    return result


def split_config(code: Path, mode: str, scratch: Path) -> tuple[list[str], str]:
    """The job arguments for index splits ``on`` / ``off`` (a config file setting SPLIT_KEY), and a note.

    ``off`` on code without the key: nothing to pass (it has no splits: off is all it does). ``on`` there: None."""
    known = any(line.startswith(f"{SPLIT_KEY}:") for line in (code / "conf" / "default.yaml").read_text().splitlines())
    if mode == "off":
        if not known:
            return [], f"no '{SPLIT_KEY}' in this code (no index splits): the job as it is"
        cfg = scratch / "splits-off.yaml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f"{SPLIT_KEY}: 0\n")
        return ["--config", str(cfg)], f"--config with {SPLIT_KEY}: 0"
    if mode == "on":
        if not known:
            raise SystemExit(f"--splits on: this code has no '{SPLIT_KEY}' key (index splits are on another branch)")
        return [], f"{SPLIT_KEY} at its default"
    raise SystemExit(f"--splits: on or off, not {mode!r}")


def cluster_part(args: argparse.Namespace) -> int:  # noqa: C901 - one measurement plan, top to bottom
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT))
    from _common import GiB, code_version, dataset, fmt_size, machine_info, parse_size, write_json
    from end_to_end import (
        check_output,
        fit_line,
        mix_dataset,
        run_job,
        truth_transactions,
        wait_for_quiet,
        warm_page_cache,
    )

    from tests.cluster.standalone import StandaloneCluster

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # a SIGTERM (timeout, kill) unwinds like Ctrl-C: the cluster's `with` stops exactly what it started
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))

    code = Path(args.code).resolve() if args.code else ROOT
    data_dir = Path(args.data_dir)
    scratch = data_dir / "scale-out"
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    for p in parts:
        if p not in ("compare", "sizes", "hot"):
            raise SystemExit(f"--parts: compare, sizes, hot; not {p!r}")
    # the job, its Python workers and (below) the cluster's daemons and executors import this checkout's txnlog
    os.environ["PYTHONPATH"] = str(code) + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""
    )
    os.environ["PYSPARK_PYTHON"] = str(code / ".venv" / "bin" / "python")
    env_extra = {"PYTHONPATH": str(code)}
    info = machine_info()
    info["code"] = code_version(code)
    ns = argparse.Namespace(data_dir=data_dir, partitions=64)
    results: dict[str, Any] = {"machine": info, "args": {k: str(v) for k, v in vars(args).items()}}
    lines = [
        f"# scale benchmark, cluster part, {info['date']}",
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB; load at start {info['load_avg_at_start']}",
        f"code: {info['code']}",
        "",
    ]
    ok = True
    json_path = (
        Path(args.json) if args.json else data_dir / "results" / f"scale-cluster-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )

    def save() -> None:
        results["report"] = "\n".join(lines)
        write_json(json_path, results)

    def job(root: Path, out: Path, spark_args: list[str], job_args: list[str] | None = None) -> dict[str, Any]:
        warm_page_cache(root)
        if args.quiet_wait > 0:
            wait_for_quiet(log, max_wait=args.quiet_wait)
        res = run_job(
            root, out, code=code, spark_args=spark_args, log=log, env_extra=env_extra, job_args=job_args,
            timeout_s=args.timeout,
        )  # fmt: skip
        res.pop("stdout", None)
        res.pop("cmdlines", None)
        return res

    def brief(res: dict[str, Any]) -> str:
        la = res["load_1min_before_after"]
        pk = res["peak_rss_mib"]
        return (
            f"{res['wall_s']:.1f} s (decode {res['phases_s'].get('decode (Spark job over all segments)') or 0:.1f} s); "
            f"load {la[0]:.2f} -> {la[1]:.2f}, others {100 * res['others_cpu_share']:.0f}% of the CPUs; peak RSS driver "
            f"{pk.get('driver', 0):.0f} MiB, driver JVM {pk.get('jvm', 0):.0f} MiB, local workers {pk.get('workers', 0):.0f} MiB"
        )

    def segment_gib(root: Path) -> float:
        return sum(f.stat().st_size for f in root.glob("*/*/*.log")) / GiB

    # 1. the same input on local[2] and on a standalone cluster (2 workers x 1 core), interleaved -------------
    if "compare" in parts:
        ds = mix_dataset(args.mix, args.compare_size, ns, log)
        size = segment_gib(ds.root)
        log(f"compare: {ds.name} ({size:.2f} GiB of segments), {args.compare_repeat} repeats, local[2] vs standalone")
        runs: dict[str, list[dict[str, Any]]] = {"local": [], "standalone": []}
        equal: list[dict[str, Any]] = []
        t = time.perf_counter()
        with StandaloneCluster(
            scratch / "cluster", workers=2, cores=1, memory=args.worker_memory
        ) as cluster:  # stopped by the pids it started, on every way out of this block
            cluster_start = time.perf_counter() - t
            pids = {name: p.pid for name, p in cluster.procs.items()}
            log(f"  standalone cluster {cluster.master_url} up in {cluster_start:.1f} s (pids {pids})")
            remote_args = [
                "--master", cluster.master_url, "--conf", f"spark.executor.memory={args.executor_memory}",
                "--conf", "spark.cores.max=2", "--conf", f"spark.executorEnv.PYTHONPATH={code}",
            ]  # fmt: skip
            for r in range(args.compare_repeat):
                order = ["local", "standalone"] if r % 2 == 0 else ["standalone", "local"]
                outs = {}
                for mode in order:
                    out = scratch / f"compare-{mode}"
                    sampler = None
                    if mode == "standalone":
                        sampler = ClusterSampler(pids)
                        sampler.start()
                    try:
                        res = job(ds.root, out, ["--master", "local[2]"] if mode == "local" else remote_args)
                    finally:
                        if sampler is not None:
                            sampler.stop.set()
                            sampler.join(5)
                    if sampler is not None:
                        res["cluster_peak_rss_mib"] = dict(sampler.peak)
                        res["cluster_peak_rss_single_mib"] = dict(sampler.peak_single)
                        res["cluster_cpu_s"] = sampler.cpu_seconds()
                        # watch() counts every CPU second outside the job's process tree as "others": not the executors'
                        capacity = res["wall_s"] * (os.cpu_count() or 1)
                        others = res["others_cpu_share"] * capacity - sum(res["cluster_cpu_s"].values())
                        res["others_cpu_share"] = max(0.0, others) / capacity
                        res["executor_jvms"] = len(sampler.executors)
                        res["executor_python_pythonpath"] = sorted(sampler.python_paths)
                    res["truth"] = check_output(out, ds.truth(), ds.root)
                    ok = ok and res["truth"]["ok"]
                    runs[mode].append(res)
                    outs[mode] = out
                    extra = ""
                    if sampler is not None:
                        cp = res["cluster_peak_rss_mib"]
                        extra = (
                            f"; executor JVMs ({res['executor_jvms']}) {cp.get('executor_jvm', 0):.0f} MiB, executor Python "
                            f"workers {cp.get('executor_workers', 0):.0f} MiB, worker daemons {cp.get('worker_jvm', 0):.0f} MiB"
                        )
                    log(
                        f"  repeat {r + 1} {mode}: {brief(res)}{extra}; truth {'OK' if res['truth']['ok'] else 'MISMATCH'}"
                    )
                    save_partial = {"compare": {"runs": runs, "equal": equal}}
                    results.update(save_partial)
                    save()
                cmp = compare_outputs(outs["local"], outs["standalone"])
                equal.append(cmp)
                ok = ok and cmp["all_equal"]
                log(
                    f"  repeat {r + 1}: tables {'EQUAL' if cmp['all_equal'] else 'DIFFERENT'} "
                    f"({cmp['rows_compared']:,} rows; "
                    + ", ".join(f"{k} {v['rows'][0]:,}" for k, v in cmp.items() if isinstance(v, dict))
                    + ")"
                )
                for out in outs.values():
                    shutil.rmtree(out, ignore_errors=True)
            try:
                state = cluster.state()
                apps = state.get("completedapps", []) + state.get("activeapps", [])
            except (OSError, ValueError):
                apps = []
        shutil.rmtree(scratch / "cluster", ignore_errors=True)  # the daemons' and executors' logs (kept on a failure)
        stopped = []
        for name, pid in pids.items():
            try:
                os.kill(pid, 0)
                stopped.append(f"{name} {pid} STILL RUNNING")
            except ProcessLookupError:
                stopped.append(f"{name} {pid} stopped")
        lw = [x["wall_s"] for x in runs["local"]]
        sw = [x["wall_s"] for x in runs["standalone"]]
        ratios = [s / loc for s, loc in zip(sw, lw)]
        results["compare"] = {
            "data_set": ds.name, "segment_gib": size, "cluster_start_s": cluster_start, "apps_on_master": len(apps),
            "pids": pids, "after_stop": stopped, "runs": runs, "equal": equal,
            "ratio_standalone_over_local": ratios,
        }  # fmt: skip
        lines += [
            f"## {ds.name} ({size:.2f} GiB of segments, {truth_transactions(ds):,} transactions): local[2] vs standalone (2 workers x 1 core)",
            f"cluster start {cluster_start:.1f} s (not in the job times); {len(apps)} apps on the master; {', '.join(stopped)}",
        ]
        for r in range(len(equal)):
            lines.append(
                f"repeat {r + 1}: local {lw[r]:.1f} s, standalone {sw[r]:.1f} s, ratio {ratios[r]:.2f}; tables "
                f"{'equal' if equal[r]['all_equal'] else 'DIFFERENT'} ({equal[r]['rows_compared']:,} rows); load "
                f"{runs['local'][r]['load_1min_before_after']} / {runs['standalone'][r]['load_1min_before_after']}"
            )
        loc_pk = {k: max(x["peak_rss_mib"].get(k, 0.0) for x in runs["local"]) for k in ("driver", "jvm", "workers")}
        rem_pk = {
            k: max(x["peak_rss_mib"].get(k, 0.0) for x in runs["standalone"]) for k in ("driver", "jvm", "workers")
        }
        cl_pk = {
            k: max(x["cluster_peak_rss_mib"].get(k, 0.0) for x in runs["standalone"])
            for k in ("executor_jvm", "executor_workers", "worker_jvm", "master_jvm")
        }
        ex_single = max(x["cluster_peak_rss_single_mib"].get("executor_jvm", 0.0) for x in runs["standalone"])
        lines += [
            f"peak RSS, MiB (max over the repeats): local[2]: Python driver {loc_pk['driver']:.0f}, driver JVM "
            f"{loc_pk['jvm']:.0f}, Python workers (PSS) {loc_pk['workers']:.0f}",
            f"standalone: Python driver {rem_pk['driver']:.0f}, driver JVM {rem_pk['jvm']:.0f}, the driver's Python "
            f"workers {rem_pk['workers']:.0f}; executor JVMs {cl_pk['executor_jvm']:.0f} (largest {ex_single:.0f}), "
            f"executor Python workers (PSS) {cl_pk['executor_workers']:.0f}, worker daemons {cl_pk['worker_jvm']:.0f}, "
            f"master {cl_pk['master_jvm']:.0f}",
        ]
        lines.append("")
        save()

    # 2. time at 1/2/4/8 GiB on local[2], rotating order; least-squares fit and residuals --------------------
    if "sizes" in parts:
        sizes = [float(s) for s in args.sizes.split(",")]
        sets = {s: mix_dataset(args.mix, s, ns, log) for s in sizes}
        gib = {s: segment_gib(sets[s].root) for s in sizes}
        size_runs: dict[float, list[dict[str, Any]]] = {s: [] for s in sizes}
        for r in range(args.repeat):
            order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
            for s in order:
                out = scratch / f"size-{s:g}"
                res = job(sets[s].root, out, ["--master", "local[2]"])
                res["truth"] = check_output(out, sets[s].truth(), sets[s].root)
                ok = ok and res["truth"]["ok"]
                shutil.rmtree(out, ignore_errors=True)
                size_runs[s].append(res)
                log(
                    f"  sizes repeat {r + 1}, {s:g} GiB: {brief(res)}; truth {'OK' if res['truth']['ok'] else 'MISMATCH'}"
                )
                results["sizes"] = {"runs": {str(k): v for k, v in size_runs.items()}}
                save()
        xs = [gib[s] for s in sizes for _ in size_runs[s]]
        ys = [x["wall_s"] for s in sizes for x in size_runs[s]]
        fit = fit_line(xs, ys)
        resid = {s: [x["wall_s"] - (fit["slope"] * gib[s] + fit["intercept"]) for x in size_runs[s]] for s in sizes}
        # the CPU seconds of the job's process tree: what contention from other processes changes least
        cpu_fit = fit_line(xs, [x["cpu_s"].get("tree", 0.0) for s in sizes for x in size_runs[s]])
        results["sizes"] = {
            "mix": args.mix, "gib": {str(s): gib[s] for s in sizes}, "fit": fit, "cpu_fit": cpu_fit,
            "residuals_s": {str(s): v for s, v in resid.items()}, "runs": {str(k): v for k, v in size_runs.items()},
        }  # fmt: skip
        lines += [
            f"## {args.mix} mix on local[2] at {', '.join(f'{s:g}' for s in sizes)} GiB ({args.repeat} repeats, rotating order)",
            f"fit over {fit['n']} runs: {fit['slope']:.2f} ± {fit['slope_se']:.2f} s/GiB (95 % {fit['lo95']:.2f}–{fit['hi95']:.2f}), "
            f"intercept {fit['intercept']:.1f} s, residual sd {fit['residual_sd']:.2f} s",
            f"the job's CPU seconds (process tree): {cpu_fit['slope']:.2f} ± {cpu_fit['slope_se']:.2f} CPU-s/GiB, "
            f"intercept {cpu_fit['intercept']:.1f} CPU-s, residual sd {cpu_fit['residual_sd']:.2f}",
            "| input | runs s | residuals s | peak RSS MiB: driver / driver JVM / Python workers | load before → after |",
            "|---|---|---|---|---|",
        ]
        for s in sizes:
            rs = size_runs[s]
            walls = [x["wall_s"] for x in rs]
            lines.append(
                f"| {gib[s]:.2f} GiB | {', '.join(f'{w:.1f}' for w in walls)} | {', '.join(f'{v:+.1f}' for v in resid[s])} | "
                f"{max(x['peak_rss_mib'].get('driver', 0) for x in rs):.0f} / {max(x['peak_rss_mib'].get('jvm', 0) for x in rs):.0f} / "
                f"{max(x['peak_rss_mib'].get('workers', 0) for x in rs):.0f} | "
                + ", ".join(f"{x['load_1min_before_after'][0]:.1f} → {x['load_1min_before_after'][1]:.1f}" for x in rs)
                + " |"
            )
        lines.append("")
        save()

    # 4. one hot partition: segments of --hot-segment, the job with index splits on/off ---------------------
    if "hot" in parts:
        hot_bytes = int(args.hot_size * GiB)
        seg = parse_size(args.hot_segment)
        hot = dataset(
            f"scale-hot-{args.hot_size:g}GiB-seg{fmt_size(seg).replace(' ', '')}", data_dir, log=log, mix="bulk",
            total_bytes=hot_bytes, batch_bytes=1024, partitions=0, segment_bytes=seg, large_partitions=1,
        )  # fmt: skip
        hot_dir = next(hot.root.glob("*/bulk-large-0"))
        hot_files = {
            f.name: f.stat().st_size for f in sorted(hot_dir.iterdir()) if f.suffix in (".log", ".index")
        }  # the segments and their offset indexes, as Kafka writes them
        modes = [m.strip() for m in args.splits.split(",") if m.strip()]
        configs: dict[str, tuple[list[str], str]] = {m: split_config(code, m, scratch) for m in modes}
        reference = mix_dataset("bulk", args.hot_size, ns, log) if args.hot_reference else None
        hot_runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        ref_runs: list[dict[str, Any]] = []
        for r in range(args.hot_repeat):
            plan: list[tuple[str, Any]] = [("hot", m) for m in modes] + ([("reference", None)] if reference else [])
            if r % 2:
                plan.reverse()
            for what, m in plan:
                out = scratch / f"hot-{what}"
                if what == "hot":
                    res = job(hot.root, out, ["--master", "local[2]"], configs[m][0])
                    res["truth"] = check_output(out, hot.truth(), hot.root)
                    hot_runs[m].append(res)
                    label = f"hot partition, splits {m}"
                else:
                    assert reference is not None
                    res = job(reference.root, out, ["--master", "local[2]"])
                    res["truth"] = check_output(out, reference.truth(), reference.root)
                    ref_runs.append(res)
                    label = f"reference {reference.name}"
                ok = ok and res["truth"]["ok"]
                shutil.rmtree(out, ignore_errors=True)
                log(
                    f"  hot repeat {r + 1}, {label}: {brief(res)}; Python workers at once {res['max_concurrent_python_workers']}, "
                    f"worker CPU {res['cpu_s'].get('workers', 0):.1f} s; truth {'OK' if res['truth']['ok'] else 'MISMATCH'}"
                )
                results["hot"] = {"runs": hot_runs, "reference_runs": ref_runs}
                save()
        results["hot"] = {
            "data_set": hot.name, "segment_gib": segment_gib(hot.root), "partition_files": hot_files,
            "splits": {m: configs[m][1] for m in modes}, "runs": hot_runs,
            "reference": reference.name if reference else None, "reference_gib": segment_gib(reference.root) if reference else None,
            "reference_runs": ref_runs,
        }  # fmt: skip
        n_index = sum(1 for k in hot_files if k.endswith(".index"))
        lines += [
            f"## one hot partition: {hot.name} ({segment_gib(hot.root):.2f} GiB of segments; bulk-large-0: "
            f"{sum(1 for k in hot_files if k.endswith('.log'))} segments, {n_index} .index files)",
        ]
        for m in modes:
            lines.append(
                f"splits {m} ({configs[m][1]}): "
                + "; ".join(
                    f"{x['wall_s']:.1f} s (decode {x['phases_s'].get('decode (Spark job over all segments)') or 0:.1f} s, load {x['load_1min_before_after'][0]:.1f} → {x['load_1min_before_after'][1]:.1f})"
                    for x in hot_runs[m]
                )
            )
        if reference:
            lines.append(
                f"reference {reference.name} ({segment_gib(reference.root):.2f} GiB over 68 partitions): "
                + "; ".join(
                    f"{x['wall_s']:.1f} s (decode {x['phases_s'].get('decode (Spark job over all segments)') or 0:.1f} s)"
                    for x in ref_runs
                )
            )
        lines.append("")
        save()

    results["all_ok"] = ok
    save()
    print("\n".join(lines))
    log(f"results: {json_path}")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="10000,30000,100000")
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "data" / "scale"))
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--code", help="measure this checkout of txnlog (e.g. a git archive of an older commit)")
    ap.add_argument("--child", nargs=2, metavar=("LOG_DIR", "DRIVER_MEMORY"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the results here too")
    c = ap.add_argument_group("cluster part (--cluster)")
    c.add_argument("--cluster", action="store_true", help="run the cluster part instead of the planning part")
    c.add_argument("--parts", default="compare,sizes,hot", help="of the cluster part (default compare,sizes,hot)")
    c.add_argument(
        "--data-dir", default=str(ROOT / "benchmarks" / "data"), help="where the data sets are (and are written)"
    )
    c.add_argument(
        "--mix", choices=("dense", "bulk"), default="dense", help="input mix of compare and sizes (default dense)"
    )
    c.add_argument("--compare-size", type=float, default=4, help="GiB, local[2] vs standalone (default 4)")
    c.add_argument("--compare-repeat", type=int, default=2, help="repeats of each, interleaved (default 2)")
    c.add_argument("--sizes", default="1,2,4,8", help="GiB on local[2] (default 1,2,4,8)")
    c.add_argument("--repeat", type=int, default=2, help="repeats of every size, rotating order (default 2)")
    c.add_argument("--hot-size", type=float, default=4, help="GiB in the one hot partition (default 4)")
    c.add_argument("--hot-segment", default="1GiB", help="its segment size (default 1GiB)")
    c.add_argument("--hot-repeat", type=int, default=2)
    c.add_argument("--hot-reference", action=argparse.BooleanOptionalAction, default=True,
                   help="interleave the bulk mix of the same size over 68 partitions (default on)")  # fmt: skip
    c.add_argument(
        "--splits",
        default="on,off",
        help=f"index splits of the hot part: on,off (off passes {SPLIT_KEY}: 0; default both)",
    )
    c.add_argument("--executor-memory", default="1g")
    c.add_argument("--worker-memory", default="2g")
    c.add_argument("--timeout", type=float, default=1800, help="seconds per job run (default 1800)")
    c.add_argument(
        "--quiet-wait", type=float, default=60, help="wait up to this long for a quieter machine (default 60)"
    )
    args = ap.parse_args()
    if args.cluster:
        return cluster_part(args)
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
