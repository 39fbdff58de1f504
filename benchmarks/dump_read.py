#!/usr/bin/env python
"""kafka-dump-log.sh input: Spark's read of the dumps against the same read in one process.

The data: the transaction-dense mix (``txnlog.brokerlog.dense``, ``--mib`` MiB of segments), every segment rendered
as ``kafka-dump-log.sh --deep-iteration`` prints it (``--transaction-log-decoder`` for ``__transaction_state``;
``txnlog.kafka.dump_log_render.render_dump``, Kafka 3.x form), one dump file per segment under
``dumps/<broker>/``, as an operator collects them. Written once under ``--data-dir`` and reused.

Two modes, each a fresh Python process per run, interleaved in every repeat, page cache warmed before each:

* ``spark``: ``txnlog.engine.spark.dump_log.read_dump_logs`` in a local Spark session (``local[*]``), both of its
  outputs collected as Arrow (the session's start is not timed; CPU: the process tree's, JVM and workers);
* ``here``: ``read_dump_logs_here``, the driver placement's read of the same files, in this process, on one
  thread per core as the driver placement reads them (CPU: the process's, every thread);
* ``here1``: the same on one thread (``--threads-too``: what the threads gain).

Both must give the same rows (checked). ``--code DIR`` (repeatable) measures other checkouts too (e.g. a
``git worktree`` of an older commit), each against its own ``here`` run: the ratio spark / here is the
Spark path's overhead in one run, whatever the machine's load. The checkouts' order turns round every repeat
(A B, B A, ...), so two repeats are an interleaved before/after/after/before.

``--mib`` takes several sizes (``16,64``): each run is timed at each, and the marginal cost per GiB of segments
(the larger size's time less the smaller's, over their difference) is printed beside the whole, so a fixed cost of
a Spark run that no per-byte work hides at a small input is told apart from the per-byte work. A Spark run also
reports the session's start (the JVM, not in the read's time) and, from Spark's event log, the read's jobs (their
wall time from submission to end, and the summed run time of their tasks): the read phase alone, without the
driver's planning of each pass.

    python benchmarks/dump_read.py --mib 16,64 --repeat 2 --code /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, machine_info, median, run_python, write_json  # noqa: E402

DEFAULT_DATA = ROOT / "benchmarks" / "data"


def build(data_dir: Path, mib: int) -> Path:
    """The dense mix's segments and their dumps (reused while ``mib`` matches)."""
    from txnlog.brokerlog.dense import dense
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    root = data_dir.resolve() / f"dump-read-{mib}MiB"
    done = root / "done.json"
    if done.exists() and json.loads(done.read_text()).get("mib") == mib:
        return root / "dumps"
    segments = root / "segments"
    dense(segments, total_bytes=mib << 20, overwrite=True)
    inv = discover([str(segments)])
    txn = set(inv.txn_state_segments)
    out = root / "dumps"
    for f in [*inv.segments, *inv.txn_state_segments]:
        rel = Path(f.path).relative_to(segments)
        dest = out / rel.parts[0] / ("-".join(rel.parts[1:]) + ".txt")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(render_dump(f.path, "3.x", deep_iteration=f not in txn, transaction_log_decoder=f in txn))
    done.write_text(json.dumps({"mib": mib}))
    return out


def warm(dumps: Path) -> int:
    n = 0
    for p in dumps.rglob("*.txt"):
        n += len(p.read_bytes())
    return n


def child(mode: str, dumps: str) -> dict[str, Any]:
    """One timed read (what ``--child`` prints as JSON)."""
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    if mode == "spark":
        import tempfile

        from txnlog.engine.spark.dump_log import read_dump_logs
        from txnlog.engine.spark.session import get_session
        from txnlog.sources.dump_log.lines import list_dump_inputs

        events = tempfile.mkdtemp(prefix="dump-read-events-")
        t, cpu = time.perf_counter(), _tree_cpu()
        spark = get_session(
            conf={
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": events,
                "spark.eventLog.compress": "false",
                "spark.eventLog.rolling.enabled": "false",
            }
        )
        out["session_seconds"], out["session_cpu_seconds"] = time.perf_counter() - t, _tree_cpu() - cpu
        t, cpu = time.perf_counter(), _tree_cpu()
        frames = read_dump_logs(spark, list_dump_inputs([dumps]))
        summary, records = frames.summary.toArrow(), frames.records.toArrow()
        seconds = time.perf_counter() - t
        cpu = _tree_cpu() - cpu  # this process, the JVM and Spark's Python workers (and those that ended)
        spark.stop()
        out.update(_event_log(Path(events)))
        shutil.rmtree(events, ignore_errors=True)
    else:
        from txnlog.engine.spark.dump_log import read_dump_logs_here
        from txnlog.engine.spark.placement import local_cores
        from txnlog.sources.dump_log.lines import list_dump_inputs

        t, cpu = time.perf_counter(), time.process_time()
        summary, records = read_dump_logs_here(list_dump_inputs([dumps]), 1 if mode == "here1" else local_cores())
        seconds = time.perf_counter() - t
        cpu = time.process_time() - cpu
    kinds = summary.column("kind").value_counts().to_pylist()
    out.update(
        seconds=seconds,
        cpu_seconds=cpu,
        summary_rows=summary.num_rows,
        records_rows=records.num_rows,
        kinds=sorted((k["values"], k["counts"]) for k in kinds),
        load_after=os.getloadavg()[0],
    )
    return out


def _event_log(events: Path) -> dict[str, Any]:
    """The jobs of a Spark run from its event log: how many, their summed wall time (submission to end) and their
    tasks' summed run time (each task's executor run time: the reading tasks, in the read's case)."""
    jobs: dict[int, list[int]] = {}
    tasks, task_ms = 0, 0
    for log in (p for p in events.rglob("*") if p.is_file()):  # a directory of rolled files in Spark 4
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # not an event (a status file)
                continue
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                jobs[event["Job ID"]] = [event["Submission Time"], event["Submission Time"]]
            elif kind == "SparkListenerJobEnd":
                jobs[event["Job ID"]][1] = event["Completion Time"]
            elif kind == "SparkListenerTaskEnd":
                tasks += 1
                task_ms += (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
    return {
        "jobs": len(jobs),
        "jobs_seconds": sum(end - start for start, end in jobs.values()) / 1000,
        "tasks": tasks,
        "tasks_seconds": task_ms / 1000,
    }


def _tree_cpu() -> float:
    """CPU seconds (user + system) of this process and its live descendants, with the descendants each of them
    waited for (a Python worker that ended and was reaped by Spark's daemon counts in the daemon's)."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def _child_run(code: Path, mode: str, dumps: Path) -> dict[str, Any]:
    """:func:`child` in a fresh process importing ``code``'s txnlog: PYTHONPATH for the driver, the working
    directory for Spark's Python workers (their ``sys.path`` starts with it)."""
    args = [str(Path(__file__).resolve()), "--child", mode, "--dumps", str(dumps)]
    return run_python(args, env={"PYTHONPATH": str(code), "PYSPARK_PYTHON": sys.executable}, cwd=code)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", default="48", help="MiB of segments to render as dumps, one size or several (16,64)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--code", type=Path, action="append", default=[], help="another checkout to measure as well")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--threads-too", action="store_true", help="also the driver's read on one thread (here1)")
    p.add_argument("--modes", default=None, help="the modes to run, e.g. spark,here (default: all)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--dumps", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.dumps)))
        return

    sizes = [int(m) for m in str(args.mib).split(",")]
    inputs = {mib: build(args.data_dir, mib) for mib in sizes}
    text = {mib: warm(dumps) for mib, dumps in inputs.items()}
    for mib, dumps in inputs.items():
        print(f"{mib} MiB: {dumps} ({text[mib] / 1e6:.0f} MB of text, {sum(1 for _ in dumps.rglob('*.txt'))} files)")
    codes = [ROOT, *[c.resolve() for c in args.code]]
    modes = args.modes.split(",") if args.modes else ["spark", "here", *(["here1"] if args.threads_too else [])]
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.repeat):
        for code in codes if r % 2 == 0 else codes[::-1]:  # A B, B A, ...
            for mib, dumps in inputs.items():
                for mode in modes:
                    warm(dumps)
                    out = _child_run(code, mode, dumps)
                    out["utc"] = time.strftime("%H:%M:%S", time.gmtime())
                    key = f"{code.name or 'HEAD'}:{mode}:{mib}"
                    runs.setdefault(key, []).append(out)
                    print(f"repeat {r + 1} {key}: {_said(out)}", flush=True)
    answers: dict[int, set[str]] = {}
    for key, rs in runs.items():
        for o in rs:
            answers.setdefault(int(key.rsplit(":", 1)[1]), set()).add(
                json.dumps([o["summary_rows"], o["records_rows"], o["kinds"]])
            )
    print(f"same rows in every run of a size: {all(len(a) == 1 for a in answers.values())}")
    for code in codes:
        for mode in modes:
            _report(runs, f"{code.name or 'HEAD'}:{mode}", sizes)
    if args.json:
        write_json(args.json, {"machine": machine_info(), "mib": sizes, "text_bytes": text, "runs": runs})


def _said(out: dict[str, Any]) -> str:
    """One run's figures, as printed."""
    said = (
        f"{out['seconds']:.1f} s, CPU {out['cpu_seconds']:.1f} s (CPU/wall {out['cpu_seconds'] / out['seconds']:.2f})"
    )
    if "session_seconds" in out:
        said += f"; session {out['session_seconds']:.1f} s, CPU {out['session_cpu_seconds']:.1f} s"
        said += f"; {out['jobs']} jobs {out['jobs_seconds']:.1f} s, {out['tasks']} tasks {out['tasks_seconds']:.1f} s"
    load = f"load {out['load_before']:.1f} -> {out['load_after']:.1f}"
    return f"{said}; {out['summary_rows']} + {out['records_rows']} rows; {load}"


def _report(runs: dict[str, list[dict[str, Any]]], key: str, sizes: list[int]) -> None:
    """Medians per size of ``key``'s runs, and between the smallest and largest size the marginal per GiB."""
    medians: dict[int, tuple[float, float]] = {}
    for mib in sizes:
        rs = runs.get(f"{key}:{mib}", [])
        if rs:
            medians[mib] = (median([o["seconds"] for o in rs]), median([o["cpu_seconds"] for o in rs]))
            print(f"{key} {mib} MiB: median {medians[mib][0]:.1f} s, CPU {medians[mib][1]:.1f} s ({len(rs)} runs)")
    if len(medians) > 1:
        small, large = min(medians), max(medians)
        gib = (large - small) / 1024
        wall, cpu = ((medians[large][i] - medians[small][i]) / gib for i in (0, 1))
        print(f"{key}: marginal {wall:.1f} s/GiB of segments, {cpu:.1f} CPU-s/GiB ({small} -> {large} MiB)")


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
