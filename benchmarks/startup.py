#!/usr/bin/env python
"""Startup benchmark: the fixed cost of a run, as ratios measured in one run.

Five measurements, interleaved in every repeat (floor, floor_archive, tiny, sample, warm, floor, ...):

* ``floor``: the least any Spark job that writes Delta pays. The venv's ``spark-submit`` with the
  ``--conf`` flags ``./spark-submit.sh`` passes (``--master local[*]``, UTC, TIMESTAMP_MICROS,
  ``spark.pyspark.python``, the driver's log4j2 file and JIT/GC options) runs this script's
  ``--child-floor``: ``txnlog.engine.spark.session.get_session()``, then one small Delta table (3 rows of
  ``txnlog.model.contract.RUNS``) written with txnlog's own ``txnlog.output.delta.write_tables``, then
  ``spark.stop()``. No ``bootstrap.sh``, no input check.
* ``floor_archive``: the floor with its driver JVM mapping txnlog's class-data-sharing archive of Spark's
  classes, as ``./spark-submit.sh`` starts its JVM (txnlog/engine/spark/jvm_archive.py): the tiny and sample
  ratios against it say how much of their gain is the JVM's start alone. The issue's target is against ``floor``.
* ``tiny``: ``./spark-submit.sh --dump-log FILE --output FRESH`` on one 8-line kafka-dump-log.sh
  output: the ``Dumping`` and ``Starting offset`` lines and the 6 batch lines of the real Kafka dump
  ``../shared/realdata/dump-log/klog-testWithDeepIterationWithControlRecords.txt`` (its record
  lines dropped, as kafka-dump-log.sh prints without ``--deep-iteration``): 4 transactional data
  batches and 2 transaction markers of one producer. Written to a temporary file at run time; when
  the real dump is absent the tiny run is skipped (say so), or give your own with ``--dump``.
* ``sample``: ``./spark-submit.sh --output FRESH``: the embedded sample cluster.
* ``dense_1gib``, ``hot_1gib`` (only with ``--only``): ``./spark-submit.sh --logs DIR --output FRESH`` on
  end_to_end.py's 1 GiB transaction-dense mix and its hot-partition mix (one partition holding 55 % of the bytes
  in indexed 256 MiB segments), with the default placement (``driver_max_bytes: auto``), page cache warm.
* ``warm``: one Python process (the venv's python, ``PYSPARK_PYTHON`` set as scripts/bootstrap.sh
  does) builds a session with ``get_session()`` and calls ``txnlog.pipeline.run(load_config(None,
  {"output": FRESH}), spark=spark)`` on the sample twice, as a notebook does: the first call, and the
  second in the warm session (the JVM, its JIT, the Python workers and numba already loaded).

Every run is a separate process tree watched as ``end_to_end.py`` watches the job: wall time, CPU
seconds, peak RSS polled every 50 ms, the share of the CPUs other processes used meanwhile (the
noise), and the phases from the job's ``[txnlog]`` progress lines. Before each run it waits (up to
``--quiet-wait`` s) for other processes to use < 1/4 core. Reported: median, min-max and the
spread ((max - min) / median) of each, the ratios tiny/floor (target <= 1.5) and sample/floor
(target <= 2) from the medians and per repeat, and warm second / first.

Then (unless ``--no-event-log``) the tiny dump runs once more with Spark's event log on
(``--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://...``): how many Spark jobs,
stages and tasks an 8-line input costs, per job description, and a timeline of where its wall time
goes (before the JVM, JVM + Python driver start, session start, decode, the table-building Spark
jobs, the Delta writes, the driver's time between Spark jobs, stop and exit), largest first.

    python benchmarks/startup.py --snapshot               # 5 repeats, HEAD copied to /tmp (the report run)
    python benchmarks/startup.py --snapshot --repeat 1 --no-event-log   # a smoke check (~4 min)
    python benchmarks/startup.py --code /tmp/txnlog-bench-<sha>         # another checkout

What is measured: by default the working tree itself; ``--snapshot`` a copy of HEAD (git archive to
/tmp, sharing .venv: edits made meanwhile cannot change what is measured); ``--code DIR`` any
checkout. The report names which. Results JSON: benchmarks/data/results/startup-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    DEFAULT_DATA,
    ROOT,
    code_version,
    machine_info,
    maybe_reexec_in_snapshot,
    median,
    write_json,
)

HERE = Path(__file__).resolve()
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
SPARK_SUBMIT = ROOT / ".venv" / "bin" / "spark-submit"
REAL_DUMP = ROOT.parent / "shared" / "realdata" / "dump-log" / "klog-testWithDeepIterationWithControlRecords.txt"
KINDS = ("floor", "floor_archive", "tiny", "sample", "warm", "dense_1gib", "hot_1gib")
DEFAULT_KINDS = KINDS[:5]
#: wall time over the floor's
TARGETS = {"tiny": 1.5, "sample": 2.0, "dense_1gib": 2.0, "hot_1gib": 2.0}
#: the 1 GiB inputs: end_to_end.py's data sets (written once under --data-dir), run as a user runs them
GIB_INPUTS = {"dense_1gib": "dense", "hot_1gib": "hot"}


# --- children ----------------------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[txnlog] {message}", file=sys.stderr, flush=True)


def child_floor(out: str) -> int:
    """Under spark-submit: a session, one 3-row Delta table written by txnlog's writer, stop."""
    from datetime import UTC, datetime

    import pyarrow as pa

    from txnlog.engine.spark.session import get_session
    from txnlog.model import contract as tables
    from txnlog.output import delta

    progress(f"floor: imported (txnlog from {os.path.dirname(os.path.dirname(delta.__file__))})")
    spark = get_session("txnlog-floor")
    progress("floor: session started")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(3):
        row: dict[str, Any] = {}
        for field in tables.RUNS:
            if field.name in ("cluster", "as_of"):
                continue
            t = field.type
            if pa.types.is_timestamp(t):
                row[field.name] = now
            elif pa.types.is_integer(t):
                row[field.name] = i
            elif pa.types.is_list(t):
                row[field.name] = [f"input-{i}"]
            else:
                row[field.name] = f"{field.name}-{i}"
        rows.append(row)
    names = [f for f in tables.RUNS if f.name not in ("cluster", "as_of")]
    table = pa.Table.from_pylist(rows, schema=pa.schema(names))
    counts = delta.write_tables(spark, out, {"runs": table}, cluster="floor", as_of=now)
    progress(f"floor: wrote {counts}")
    spark.stop()
    return 0


def child_warm(out_root: str) -> int:
    """One process, one session, ``pipeline.run`` on the sample twice; the timings as JSON on stdout."""
    t0 = time.perf_counter()
    from txnlog.engine.spark.session import get_session
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    t_import = time.perf_counter()
    spark = get_session("txnlog-warm")
    t_session = time.perf_counter()
    calls = []
    for i in (1, 2):
        out = os.path.join(out_root, f"call{i}")
        t = time.perf_counter()
        result = run(load_config(None, {"output": out}), spark=spark)
        calls.append({"wall_s": time.perf_counter() - t, "counts": dict(result.counts)})
        progress(f"warm: call {i} took {calls[-1]['wall_s']:.1f} s")
    spark.stop()
    print(
        json.dumps(
            {
                "import_s": t_import - t0,
                "session_s": t_session - t_import,
                "first_s": calls[0]["wall_s"],
                "second_s": calls[1]["wall_s"],
                "counts": calls[1]["counts"],
                "same_counts": calls[0]["counts"] == calls[1]["counts"],
            }
        ),
        flush=True,
    )
    return 0


# --- the parent --------------------------------------------------------------------------------------


def tiny_dump(dest: Path, given: Path | None) -> tuple[Path | None, str]:
    """The 8-line dump (or ``given``); (None, why) when the real dump is not there."""
    if given is not None:
        return given, f"{given} (given with --dump)"
    if not REAL_DUMP.is_file():
        return None, f"skipped: {REAL_DUMP} is absent (the tiny run needs it, or --dump FILE)"
    lines = [line for line in REAL_DUMP.read_text().splitlines(keepends=True) if not line.startswith("|")]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(lines))
    return dest, (
        f"{len(lines)} lines: header + batch lines of ../shared/realdata/dump-log/{REAL_DUMP.name} "
        f"(record lines dropped), {sum(1 for x in lines if 'isControl: true' in x)} of them markers"
    )


def job_env(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    # spark-submit.sh finds its own venv, as a user's shell would
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return env


def child_env() -> dict[str, str]:
    """What scripts/bootstrap.sh exports."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = str(VENV_PYTHON)
    env["PYSPARK_DRIVER_PYTHON"] = str(VENV_PYTHON)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def floor_cmd(code: Path, out: Path, *, archive: bool = False) -> list[str]:
    """The venv's spark-submit with the --conf flags ./spark-submit.sh passes (read from it); ``archive``: the
    driver JVM also maps txnlog's class archive, as ./spark-submit.sh's does (txnlog/engine/spark/jvm_archive.py)."""
    driver_java_options = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    if archive:
        from txnlog.engine.spark.jvm_archive import java_options

        driver_java_options += " " + java_options()
    return [
        str(SPARK_SUBMIT),
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        "--conf",
        "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS",
        "--conf",
        f"spark.pyspark.python={VENV_PYTHON}",
        "--conf",
        f"spark.pyspark.driver.python={VENV_PYTHON}",
        "--conf",
        f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{code}/conf/log4j2.properties "
        f"{driver_java_options}",
        "--master",
        "local[*]",
        str(HERE),
        "--child-floor",
        str(out),
    ]


def phases(res: dict[str, Any]) -> dict[str, float | None]:
    """The job's phases from its progress lines (as end_to_end.run_job names them)."""

    def at(prefix: str) -> float | None:
        return next((t for t, line in res["progress"] if line.startswith(f"[txnlog] {prefix}")), None)

    jvm, found, decoding, decoded = res["jvm_seen_s"], at("found"), at("decoding"), at("decoded in")
    floor_session, floor_wrote = at("floor: session started"), at("floor: wrote")
    if floor_session is not None:
        imported = at("floor: imported")
        return {
            "launch (before the JVM)": jvm,
            "JVM + Python driver start, imports": (imported - jvm) if imported and jvm else None,
            "SparkSession start": (floor_session - imported) if floor_session and imported else None,
            "Delta write (3 rows)": (floor_wrote - floor_session) if floor_wrote and floor_session else None,
            "stop, exit": (res["wall_s"] - floor_wrote) if floor_wrote else None,
        }
    return {
        "launch + input check (before the JVM)": jvm,
        "JVM + Python driver start, input listing": (found - jvm) if found and jvm else None,
        "SparkSession start, sources planned": (decoding - found) if decoding and found else None,
        "decode (Spark tasks, or the driver for a small input)": (decoded - decoding) if decoded and decoding else None,
        "tables, Delta writes, exit": (res["wall_s"] - decoded) if decoded else None,
    }


def gib_input(kind: str, data_dir: Path, log) -> Path:
    """The 1 GiB data set of ``kind`` (end_to_end.py's, written once)."""
    import argparse as ap

    from end_to_end import mix_dataset

    return Path(mix_dataset(GIB_INPUTS[kind], 1, ap.Namespace(data_dir=data_dir, partitions=64), log).root)


def measure(kind: str, r: int, *, code: Path, dump: Path | None, out_root: Path, args, log) -> dict[str, Any]:
    from end_to_end import wait_for_quiet, watch

    out = out_root / f"{kind}-{r}"
    shutil.rmtree(out, ignore_errors=True)
    if args.quiet_wait > 0:
        wait_for_quiet(log, max_wait=args.quiet_wait)
    if kind in ("floor", "floor_archive"):
        res = watch(floor_cmd(code, out, archive=kind == "floor_archive"), cwd=code, env=child_env(), log=log)
    elif kind == "tiny":
        cmd = [str(code / "spark-submit.sh"), "--dump-log", str(dump), "--output", str(out)]
        res = watch(cmd, cwd=code, env=job_env(code), log=log)
    elif kind in GIB_INPUTS:
        from end_to_end import warm_page_cache

        root = gib_input(kind, args.data_dir, log)
        warm_page_cache(root)
        if args.quiet_wait > 0:
            wait_for_quiet(log, max_wait=args.quiet_wait)
        cmd = [str(code / "spark-submit.sh"), "--logs", str(root), "--output", str(out)]
        res = watch([*cmd, "--as-of", "2026-11-26T00:00:00Z"], cwd=code, env=job_env(code), log=log)
    elif kind == "sample":
        res = watch([str(code / "spark-submit.sh"), "--output", str(out)], cwd=code, env=job_env(code), log=log)
    else:
        out.mkdir(parents=True)
        cmd = [str(VENV_PYTHON), str(HERE), "--child-warm", str(out)]
        res = watch(cmd, cwd=code, env=child_env(), log=log)
        res["warm"] = json.loads(res["stdout"].strip().splitlines()[-1])
    shutil.rmtree(out, ignore_errors=True)
    res["phases_s"] = phases(res) if kind != "warm" else {}
    res["repeat"] = r
    return res


# --- the event log of one tiny run -------------------------------------------------------------------


def read_events(path: Path) -> list[dict[str, Any]]:
    files = sorted(path.glob("events_*")) if path.is_dir() else [path]
    out = []
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".zstd":
            import cramjam

            data = bytes(cramjam.zstd.decompress(data))
        out += [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    return out


def event_log_run(code: Path, dump: Path, out_root: Path, args, log) -> dict[str, Any]:
    """The tiny dump once more with Spark's event log: counts per job description and a wall-time timeline."""
    from end_to_end import summarize_event_log, wait_for_quiet, watch

    ev_dir = Path(tempfile.mkdtemp(prefix="txnlog-startup-events-"))
    out = out_root / "tiny-eventlog"
    shutil.rmtree(out, ignore_errors=True)
    try:
        if args.quiet_wait > 0:
            wait_for_quiet(log, max_wait=args.quiet_wait)
        cmd = [
            str(code / "spark-submit.sh"),
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            f"spark.eventLog.dir=file://{ev_dir}",
            "--dump-log",
            str(dump),
            "--output",
            str(out),
        ]
        res = watch(cmd, cwd=code, env=job_env(code), log=log)
        apps = [p for p in ev_dir.iterdir() if not p.name.endswith(".inprogress")]
        if len(apps) != 1:
            raise RuntimeError(f"expected one event log in {ev_dir}, found {[p.name for p in apps]}")
        summary = summarize_event_log(apps[0])
        events = read_events(apps[0])
    finally:
        shutil.rmtree(ev_dir, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    res["phases_s"] = phases(res)

    # one clock: the process start (t0_epoch) and Spark's event times (epoch ms), in seconds from the start
    def rel(ms: float | None) -> float | None:
        return None if ms is None else ms / 1e3 - res["t0_epoch"]

    app_start = rel(next((e["Timestamp"] for e in events if e.get("Event") == "SparkListenerApplicationStart"), None))
    app_end = rel(next((e["Timestamp"] for e in events if e.get("Event") == "SparkListenerApplicationEnd"), None))
    jobs: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("Event") == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            jobs[e["Job ID"]] = {
                "description": props.get("spark.job.description") or "(no description)",
                "start": rel(e.get("Submission Time")),
            }
        elif e.get("Event") == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            jobs[e["Job ID"]]["end"] = rel(e.get("Completion Time"))

    def at(prefix: str) -> float | None:
        return next((t for t, line in res["progress"] if line.startswith(f"[txnlog] {prefix}")), None)

    jvm, found, decoding, decoded = res["jvm_seen_s"], at("found"), at("decoding"), at("decoded in")
    wall = res["wall_s"]
    timeline: dict[str, float] = {}
    if None not in (jvm, found, decoding, decoded, app_start, app_end):
        timeline["launch + input check (bootstrap.sh, --validate-only; before the JVM)"] = jvm
        timeline["JVM start, Python driver start and imports, input listing"] = found - jvm
        timeline["from the input listing to the application start event (stamped as SparkContext starts)"] = max(
            0.0, app_start - found
        )
        timeline["from the application start to the decode (session set-up, sources, dump-log plans)"] = (
            decoding - app_start
        )
        timeline["decode (the 'txnlog: decode' Spark job and its planning)"] = decoded - decoding
        after = sorted(
            (
                j
                for j in jobs.values()
                if j.get("start") is not None and j.get("end") is not None and j["end"] > decoded
            ),
            key=lambda j: j["start"],
        )
        groups: dict[str, float] = {}
        covered = 0.0
        cursor = decoded
        for j in after:
            s, e = max(j["start"], cursor), j["end"]
            if e <= s:
                continue
            d = j["description"]
            group = (
                "Delta writes: Spark jobs (txnlog: write <table>)"
                if d.startswith("txnlog: write")
                else "table-building / summary Spark jobs (other descriptions)"
            )
            groups[group] = groups.get(group, 0.0) + (e - s)
            covered += e - s
            cursor = e
        timeline.update(groups)
        timeline["driver between Spark jobs after the decode (planning, delta-rs commits, Python)"] = max(
            0.0, (app_end - decoded) - covered
        )
        timeline["after the application end: JVM shutdown, exit"] = max(0.0, wall - app_end)
    res["event_log"] = {k: v for k, v in summary.items() if k != "stage_list"}
    res["event_log"]["stage_count_by_tasks"] = {
        "1 task": sum(1 for s in summary["stage_list"] if s["tasks"] == 1),
        "more": sum(1 for s in summary["stage_list"] if s["tasks"] > 1),
    }
    res["event_log"]["task_run_s"] = sum(s["run_ms"] for s in summary["stage_list"]) / 1e3
    res["event_log"]["task_deser_s"] = sum(s["deser_ms"] for s in summary["stage_list"]) / 1e3
    res["event_log"]["app_start_s"], res["event_log"]["app_end_s"] = app_start, app_end
    res["timeline_s"] = dict(sorted(timeline.items(), key=lambda kv: -kv[1]))
    res["jobs_timeline"] = sorted(jobs.values(), key=lambda j: j.get("start") or 0)
    return res


# --- report ---------------------------------------------------------------------------------------------


def stats(xs: list[float]) -> dict[str, float]:
    m = median(xs)
    return {
        "median": m,
        "min": min(xs) if xs else float("nan"),
        "max": max(xs) if xs else float("nan"),
        "spread": (max(xs) - min(xs)) / m if xs and m else float("nan"),
        "n": len(xs),
    }


def report(runs: dict[str, list[dict[str, Any]]], ev: dict[str, Any] | None, info: dict[str, Any], args, dump_note):
    wall = {k: [x["wall_s"] for x in v] for k, v in runs.items() if v}
    st = {k: stats(v) for k, v in wall.items()}
    warm_first = [x["warm"]["first_s"] for x in runs.get("warm", [])]
    warm_second = [x["warm"]["second_s"] for x in runs.get("warm", [])]
    lines = [
        f"# startup benchmark, {info['date']}",
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB; load at start "
        f"{info['load_avg_at_start']}",
        f"code: {info['code']}",
        f"repeats: {args.repeat}, interleaved ({', '.join(k for k in KINDS if k in runs)}); tiny dump: {dump_note}",
        "",
        "| run | median s | min s | max s | spread (max-min)/median | others' CPU share, median (max) | "
        "CPU s of the tree (median) | peak RSS of the tree MiB (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    label = {
        "floor": "floor: bare spark-submit, session + 3-row Delta table",
        "floor_archive": "floor with txnlog's JVM class archive (the same JVM start as ./spark-submit.sh's)",
        "tiny": "tiny: ./spark-submit.sh --dump-log (8 lines)",
        "sample": "sample: ./spark-submit.sh (embedded sample)",
        "warm": "warm process: session + 2 pipeline.run calls",
        "dense_1gib": "./spark-submit.sh --logs: 1 GiB transaction-dense mix",
        "hot_1gib": "./spark-submit.sh --logs: 1 GiB hot-partition mix",
    }
    for k in KINDS:
        if k not in st:
            continue
        s = st[k]
        others = [x["others_cpu_share"] for x in runs[k]]
        lines.append(
            f"| {label[k]} | {s['median']:.1f} | {s['min']:.1f} | {s['max']:.1f} | {100 * s['spread']:.0f} % | "
            f"{100 * median(others):.0f} % ({100 * max(others):.0f} %) | "
            f"{median([x['cpu_s'].get('tree', 0.0) for x in runs[k]]):.1f} | "
            f"{median([x['peak_rss_mib'].get('tree', 0.0) for x in runs[k]]):.0f} |"
        )
    if warm_first:
        for name, xs in (
            ("warm session: first pipeline.run", warm_first),
            ("warm session: second pipeline.run", warm_second),
        ):
            s = stats(xs)
            lines.append(
                f"| {name} (in-process) | {s['median']:.1f} | {s['min']:.1f} | {s['max']:.1f} | "
                f"{100 * s['spread']:.0f} % | | | |"
            )
    ratios: dict[str, Any] = {}
    lines += [
        "",
        "| ratio | from the medians | per repeat (same repeat's floor) | target | verdict |",
        "|---|---:|---|---:|---|",
    ]
    for k, target in TARGETS.items():
        if k not in st or "floor" not in st:
            continue
        r_med = st[k]["median"] / st["floor"]["median"]
        per = [a / b for a, b in zip(wall[k], wall["floor"])]
        ratios[f"{k}/floor"] = {"median_ratio": r_med, "per_repeat": per, "target": target, "met": r_med <= target}
        lines.append(
            f"| {k} / floor | {r_med:.2f} | {', '.join(f'{x:.2f}' for x in per)} (median {median(per):.2f}) | "
            f"<= {target:g} | {'MET' if r_med <= target else 'MISSED'} |"
        )
    for k in TARGETS:  # the same targets against a floor whose JVM also maps the class archive
        if k not in st or "floor_archive" not in st:
            continue
        r_med = st[k]["median"] / st["floor_archive"]["median"]
        per = [a / b for a, b in zip(wall[k], wall["floor_archive"])]
        ratios[f"{k}/floor_archive"] = {"median_ratio": r_med, "per_repeat": per}
        lines.append(f"| {k} / floor with the archive | {r_med:.2f} | {', '.join(f'{x:.2f}' for x in per)} | | |")
    if warm_first:
        per = [b / a for a, b in zip(warm_first, warm_second)]
        r_med = median(warm_second) / median(warm_first)
        ratios["warm second/first"] = {"median_ratio": r_med, "per_repeat": per}
        lines.append(
            f"| warm session: second / first pipeline.run | {r_med:.2f} | {', '.join(f'{x:.2f}' for x in per)} | | |"
        )
        if "sample" in st:
            r = median(warm_second) / st["sample"]["median"]
            ratios["warm second/sample"] = {"median_ratio": r}
            lines.append(f"| warm second pipeline.run / sample via ./spark-submit.sh | {r:.2f} | | | |")
        if "floor" in st:
            r = median(warm_second) / st["floor"]["median"]
            ratios["warm second/floor"] = {"median_ratio": r}
            lines.append(f"| warm second pipeline.run / floor | {r:.2f} | | | |")
    lines += ["", "phases (median s):", "", "| run | phase | median s |", "|---|---|---:|"]
    for k in ("floor", "floor_archive", "tiny", "sample"):
        for ph in (runs.get(k) or [{}])[0].get("phases_s", {}):
            vals = [x["phases_s"][ph] for x in runs[k] if x["phases_s"].get(ph) is not None]
            if vals:
                lines.append(f"| {k} | {ph} | {median(vals):.1f} |")
    if warm_first:
        lines.append(
            f"| warm | imports / get_session | {median([x['warm']['import_s'] for x in runs['warm']]):.1f} / "
            f"{median([x['warm']['session_s'] for x in runs['warm']]):.1f} |"
        )
    lines += [
        "",
        "wall per run, in order (others' CPU share): "
        + "; ".join(
            f"{k} " + ", ".join(f"{x['wall_s']:.1f} ({100 * x['others_cpu_share']:.0f}%)" for x in runs[k])
            for k in KINDS
            if runs.get(k)
        ),
    ]
    if ev is not None:
        e = ev["event_log"]
        lines += [
            "",
            f"tiny dump with Spark's event log: wall {ev['wall_s']:.1f} s (others used "
            f"{100 * ev['others_cpu_share']:.0f}% of the CPUs); {e['jobs']} Spark jobs, {e['stages']} stages run "
            f"({e['stage_count_by_tasks']['1 task']} with 1 task), {e['tasks']} tasks "
            f"(task run time {e['task_run_s']:.1f} s, deserialization {e['task_deser_s']:.1f} s); "
            f"{ev['plan_truncated_warnings']} 'Truncated the string representation of a plan' warnings",
            "",
            "where its wall time goes (largest first):",
            "",
            "| part | s | share |",
            "|---|---:|---:|",
        ]
        for part, sec in ev["timeline_s"].items():
            lines.append(f"| {part} | {sec:.1f} | {100 * sec / ev['wall_s']:.0f} % |")
        lines += [
            "",
            "| job description | jobs | job wall s | stages run | tasks | 1-task stages | task s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for d, v in e["by_description"].items():
            lines.append(
                f"| {d} | {v['jobs']} | {v['wall_ms'] / 1e3:.1f} | {v['stages']} | {v['tasks']} | "
                f"{v['single_task_stages']} | {v['task_run_ms'] / 1e3:.1f} |"
            )
    return lines, {"stats": st, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="repeats of each measurement, interleaved (default 5)")
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_KINDS),
        help=f"which measurements, comma-separated, of {', '.join(KINDS)} (default {', '.join(DEFAULT_KINDS)})",
    )
    p.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="the tiny run's kafka-dump-log.sh output (default: 8 lines "
        "of ../shared/realdata/dump-log/klog-testWithDeepIterationWithControlRecords.txt)",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=30,
        help="before each run, wait up to this many seconds until other processes use < 1/4 core "
        "(default 30; 0: never)",
    )
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="no untimed ./spark-submit.sh run on the sample first (it writes the sample, fills numba's cache)",
    )
    p.add_argument("--no-event-log", action="store_true", help="skip the tiny run with Spark's event log")
    p.add_argument(
        "--snapshot",
        action="store_true",
        help="measure a snapshot of HEAD (git archive to /tmp, sharing .venv) instead of the working tree, "
        "so that edits made while the benchmark runs cannot change or break what is measured",
    )
    p.add_argument("--code", type=Path, default=None, help="measure this checkout of txnlog instead")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help=f"scratch and results (default {DEFAULT_DATA})")
    p.add_argument(
        "--json", type=Path, default=None, help="results JSON (default <data-dir>/results/startup-<time>.json)"
    )
    p.add_argument("--child-floor", help=argparse.SUPPRESS)
    p.add_argument("--child-warm", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_floor:
        return child_floor(args.child_floor)
    if args.child_warm:
        return child_warm(args.child_warm)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    code = maybe_reexec_in_snapshot(args.snapshot, log=log, code=args.code)
    from end_to_end import CODE_NOTE

    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    for k in kinds:
        if k not in KINDS:
            raise SystemExit(f"--only: unknown measurement {k!r} (known: {', '.join(KINDS)})")
    info = machine_info()
    described = code / CODE_NOTE
    info["code"] = described.read_text().strip() if described.exists() else code_version(code)
    if code != ROOT:
        sha = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        info["head_when_run"] = sha
    scratch = Path(tempfile.mkdtemp(prefix="txnlog-startup-"))
    out_root = args.data_dir / "startup-out"
    dump, dump_note = tiny_dump(scratch / "tiny-dump.txt", args.dump)
    if dump is None and "tiny" in kinds:
        log(f"tiny dump: {dump_note}")
        kinds.remove("tiny")
    log(f"startup benchmark: {kinds}, {args.repeat} repeats; code {info['code']}; load {info['load_avg_at_start']}")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    ev = None
    t_start = time.perf_counter()
    try:
        # one untimed sample run: writes the embedded sample and checks numba's cache (bootstrap.sh warms it)
        if not args.no_warmup:
            log("warm-up: one untimed ./spark-submit.sh on the sample ...")
            warm_up = measure("sample", -1, code=code, dump=dump, out_root=out_root, args=args, log=log)
            log(f"  {warm_up['wall_s']:.1f} s")
        for r in range(args.repeat):
            for k in kinds:
                res = measure(k, r, code=code, dump=dump, out_root=out_root, args=args, log=log)
                runs[k].append(res)
                extra = (
                    f" (first call {res['warm']['first_s']:.1f} s, second {res['warm']['second_s']:.1f} s)"
                    if k == "warm"
                    else " [" + ", ".join(f"{n.split(' (')[0]} {v:.1f}" for n, v in res["phases_s"].items() if v) + "]"
                )
                log(
                    f"  repeat {r + 1} {k}: {res['wall_s']:.1f} s{extra}; CPU {res['cpu_s'].get('tree', 0):.1f} s; "
                    f"others {100 * res['others_cpu_share']:.0f}% of the CPUs"
                )
        if not args.no_event_log and dump is not None:
            log("tiny dump with Spark's event log ...")
            try:
                ev = event_log_run(code, dump, out_root, args, log)
                log(f"  {ev['wall_s']:.1f} s, {ev['event_log']['jobs']} jobs, {ev['event_log']['tasks']} tasks")
            except Exception as e:  # noqa: BLE001 - a diagnostic: the timed runs are reported anyway
                log(f"  the event-log run failed: {e!r}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines, summary = report(runs, ev, info, args, dump_note)
    lines.append(f"benchmark wall time: {(time.perf_counter() - t_start) / 60:.1f} min")
    text = "\n".join(lines)
    print(text)
    path = args.json or args.data_dir / "results" / f"startup-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(
        path,
        {
            "machine": info,
            "args": {k: str(v) for k, v in vars(args).items()},
            "tiny_dump": dump_note,
            "runs": {
                k: [
                    {kk: vv for kk, vv in x.items() if kk != "stdout"} | {"stdout_tail": x["stdout"][-1500:]} for x in v
                ]
                for k, v in runs.items()
            },
            "event_log_run": None if ev is None else {k: v for k, v in ev.items() if k != "stdout"},
            **summary,
            "report": text,
        },
    )
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
