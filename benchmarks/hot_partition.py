#!/usr/bin/env python
"""A hot partition read in pieces at its offset index, or whole: the same bytes, side by side.

The input is ``end_to_end.py --mix hot``'s data set (``txnlog.brokerlog.dense.dense(hot_fraction=0.55)``):
the dense mix plus one partition holding ~55 % of the data bytes in 256 MiB segments with their ``.index``
files, as transaction-dense as the rest. The job (``./spark-submit.sh --logs DIR --output OUT``) runs on
it in these variants, interleaved in every repeat (A B A B ...), page cache warmed before each run:

* ``indexed``: the data set as written. Where the hot partition is worth splitting
  (txnlog.sources.splits.worth_splitting: not on 2 cores at 55 %, which the split's cost outweighs), its segments above
  ``split_segment_bytes`` are cut at index positions and read by several tasks, and its transactions are
  merged from the pieces' staged fragments.
* ``empty_index``: the same ``.log`` files (hard links: the same inodes, the same page cache) with every
  ``.index`` file empty, as a copy that lost its indexes: every file is read whole.
* ``split_off``: the data set as written, with the job config ``split_segment_bytes: 0`` (``--config``).
* ``floor``: ``benchmarks/startup.py``'s floor (a bare SparkSession plus a 3-row Delta write).

``--plan-cores N`` runs every job variant with ``spark.default.parallelism=N``: the job weighs splits (and sizes
its decode tasks) as for N cores, so the split can be seen at work on a smaller machine, against the same
bytes read whole under the same setting.

Every run's tables are checked against the writer's ground truth (every transaction; exit code 1 on a
mismatch). ``--event-log`` adds one run per job variant with Spark's event log: per job description and per
stage the wall time, tasks, the longest task, rows and shuffle records.

    python benchmarks/hot_partition.py                         # 1 GiB, indexed vs empty_index, 2 repeats
    python benchmarks/hot_partition.py --variants indexed,empty_index,split_off,floor --event-log
    python benchmarks/hot_partition.py --variants indexed,empty_index --plan-cores 8   # the split at work on 2 cores
    python benchmarks/hot_partition.py --pieces-cpu --repeat 3   # the split's own CPU, one process, no Spark
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import DEFAULT_DATA, GiB, code_version, machine_info, maybe_reexec_in_snapshot, median, write_json
from end_to_end import (
    CODE_NOTE,
    check_output,
    hot_dataset,
    run_job,
    summarize_event_log,
    wait_for_quiet,
    warm_page_cache,
    watch,
    worktree_copy,
)

JOB_VARIANTS = ("indexed", "empty_index", "split_off")
VARIANTS = (*JOB_VARIANTS, "floor")


def empty_index_copy(root: Path) -> Path:
    """``root`` mirrored next to it with every file hard-linked except the ``.index`` files, which are empty."""
    dest = root.with_name(root.name + "-empty-index")
    stamp = dest / ".made-from"
    made = f"{root} {(root / 'bench-params.json').stat().st_mtime_ns}"
    if stamp.exists() and stamp.read_text() == made:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    for f in sorted(root.rglob("*")):
        target = dest / f.relative_to(root)
        if f.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == ".index":
            target.write_bytes(b"")
        else:
            os.link(f, target)
    stamp.write_text(made)
    return dest


def warm_decoders(code: Path, log) -> None:
    """Compile the decoders into ``code``'s numba cache now if it is cold (as scripts/bootstrap.sh would in the
    first timed run: ~30 s)."""
    import subprocess

    py = sys.executable
    if subprocess.run([py, str(code / "txnlog/kafka/jit.py"), "--is-warm"], cwd=code).returncode == 0:
        return
    log("compiling the decoders into numba's cache first (untimed)")
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run(
        [py, "-c", "from txnlog.pipeline import warm_decoders; warm_decoders()"], cwd=code, env=env, check=True
    )


def stage_profile(path: Path) -> list[dict[str, Any]]:
    """Per stage of an event log: its job description, name, tasks, wall time, the longest task, the sum of
    task run times, shuffle records written and read, and the SQL row counts of the stage's operators."""
    files = sorted(path.glob("events_*")) if path.is_dir() else [path]
    description: dict[int, str] = {}
    stages: dict[int, dict[str, Any]] = {}
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".zstd":
            import cramjam

            data = bytes(cramjam.zstd.decompress(data))
        for line in data.decode().splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            ev = e.get("Event")
            if ev == "SparkListenerJobStart":
                d = (e.get("Properties") or {}).get("spark.job.description") or "(no description)"
                for sid in e.get("Stage IDs", []):
                    description.setdefault(sid, d)
            elif ev == "SparkListenerTaskEnd":
                m = e.get("Task Metrics") or {}
                s = stages.setdefault(e["Stage ID"], _stage())
                run = m.get("Executor Run Time", 0)
                s["tasks"] += 1
                s["task_run_ms"] += run
                s["max_task_ms"] = max(s["max_task_ms"], run)
                s["shuffle_records_written"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Records Written", 0)
                s["shuffle_records_read"] += (m.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0)
                s["input_records"] += (m.get("Input Metrics") or {}).get("Records Read", 0)
            elif ev == "SparkListenerStageCompleted":
                info = e["Stage Info"]
                s = stages.setdefault(info["Stage ID"], _stage())
                s["name"] = info["Stage Name"]
                s["wall_ms"] = (info.get("Completion Time") or 0) - (info.get("Submission Time") or 0)
                s["submitted"] = info.get("Submission Time")
                rows: dict[str, int] = {}
                for acc in info.get("Accumulables") or []:
                    name = str(acc.get("Name", ""))
                    if name.startswith("number of output rows") or name == "number of input batches":
                        try:
                            rows[name] = rows.get(name, 0) + int(acc.get("Value", 0))
                        except (TypeError, ValueError):
                            pass
                s["sql_rows"] = rows
    out = []
    for sid, s in sorted(stages.items()):
        if not s["tasks"]:
            continue
        out.append({"stage_id": sid, "description": description.get(sid, "?"), **s})
    return out


def _stage() -> dict[str, Any]:
    return {
        "name": "?",
        "tasks": 0,
        "task_run_ms": 0,
        "max_task_ms": 0,
        "wall_ms": 0,
        "shuffle_records_written": 0,
        "shuffle_records_read": 0,
        "input_records": 0,
        "sql_rows": {},
    }


def pieces_cpu(root: Path, split_bytes: int, repeat: int, log) -> list[dict[str, Any]]:
    """CPU seconds, in this process, of the hot partition read whole (its segments and snapshots into one
    PartitionTransactions, as a whole-partition task does) and read in pieces of ``split_bytes`` as the split
    tasks do (every piece with its edges, txnlog.engine.segments.Edges; the partition's merge of the staged edges with
    the segment and snapshot rows, transactions_of_summary), and the pieces handing on every fragment instead
    (``edges`` off: the merge before pieces finished their transactions). No Spark: the split's own cost."""
    import tempfile

    import pyarrow as pa
    import pyarrow.compute as pc

    from txnlog.engine import segments as SG
    from txnlog.engine.plan import _read_index
    from txnlog.engine.segment_group import summarize_snapshot
    from txnlog.engine.staging import read_raw, staged_transactions, staged_transactions_of_summary
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
    from txnlog.rules.transactions import PartitionTransactions, checkpoints_of
    from txnlog.sources import splits as S
    from txnlog.sources.logdirs import discover

    inv = discover([str(root)])
    segs = [f for f in inv.segments if f.topic == "dense-hot"]
    snaps = [f for f in inv.snapshots if f.topic == "dense-hot"]
    ck = checkpoints_of(inv.checkpoints)
    for f in segs:  # the decoders compiled, the page cache warm
        SG.scan_log_file(f.path, True)

    def whole() -> float:
        t = time.process_time()
        with tempfile.TemporaryDirectory() as stage:
            merge, rows = PartitionTransactions(), SG.SegmentRows()
            for f in segs:
                for _ in SG.summarize_segment(f, True, rows, merge):
                    pass
            for f in snaps:
                for _ in summarize_snapshot(f, merge):
                    pass
            for _ in staged_transactions(merge, ck, SEGMENT_SUMMARY_SCHEMA, stage=stage):
                pass
            return time.process_time() - t

    def split(with_edges: bool) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as stage, tempfile.TemporaryDirectory() as staged:
            out: list[pa.RecordBatch] = []
            cpu: list[float] = []
            for f in segs:
                points = S.index_split_points(_read_index(f.path), f.base_offset, f.size)
                plan = S.plan_pieces(points, f.size, split_bytes) if isinstance(points, S.SplitPoints) else None
                n = 0 if plan is None else plan.positions.size
                for k in range(n + 1):
                    t = time.process_time()
                    rows = SG.SegmentRows()
                    starts = SG.snapshot_starts([s.path for s in snaps])
                    edges = SG.Edges(starts, ck, stage) if with_edges else None
                    if plan is not None and n:
                        piece = SG.Piece(k, plan.positions, plan.offsets, plan.previous)
                        it = SG.summarize_piece(f, piece, True, rows, None, staged, edges)
                    else:
                        it = SG.summarize_segment(f, True, rows, None, fragments_to=staged, edges=edges)
                    out += [*it, *rows.batches()]
                    cpu.append(time.process_time() - t)
            for f in snaps:
                out += list(summarize_snapshot(f, None))
            t = time.process_time()
            table = pa.Table.from_batches(out, SEGMENT_SUMMARY_SCHEMA)
            keep = table.filter(pc.is_in(table.column("kind"), pa.array(["snapshot", "piece", "segment"])))
            kinds = pc.if_else(pc.equal(keep.column("kind"), "piece"), "segment", keep.column("kind"))
            keep = keep.set_column(0, "kind", kinds)  # the stitch's segment rows (the pieces' bounds are enough here)
            parts = [read_raw(str(p)) for p in Path(staged).glob("*.arrow")]
            frags = [p.select(keep.column_names).cast(keep.schema) for p in parts]
            staged_transactions_of_summary(pa.concat_tables([keep, *frags]), ck, stage, SEGMENT_SUMMARY_SCHEMA)
            return {"pieces_cpu_s": cpu, "merge_cpu_s": time.process_time() - t,
                    "merged_fragments": sum(p.num_rows for p in parts)}  # fmt: skip

    results = []
    for r in range(repeat):
        res = {"whole_cpu_s": whole(), "edges": split(True), "every_fragment": split(False)}
        w = res["whole_cpu_s"]
        for name in ("edges", "every_fragment"):
            x = res[name]
            x["overhead"] = (sum(x["pieces_cpu_s"]) + x["merge_cpu_s"] - w) / w
            log(
                f"  repeat {r + 1} {name}: whole {w:.2f} CPU-s; pieces {sum(x['pieces_cpu_s']):.2f} "
                f"({len(x['pieces_cpu_s'])}); merge {x['merge_cpu_s']:.2f} of {x['merged_fragments']:,} fragments; "
                f"overhead {x['overhead']:.2f}"
            )
        results.append(res)
    return results


def run_variant(
    variant: str, ds: Any, copy: Path, code: Path, out: Path, args: argparse.Namespace, log, spark_args: list[str]
) -> dict[str, Any]:
    """One timed run of ``variant`` (page cache warmed first), its truth check included."""
    warm_page_cache(ds.root)  # the copy's .log files are the same inodes
    if args.quiet_wait > 0:
        wait_for_quiet(log, max_wait=args.quiet_wait)
    if variant == "floor":
        from startup import child_env, floor_cmd

        shutil.rmtree(out, ignore_errors=True)
        res = watch(floor_cmd(code, out), cwd=code, env=child_env(), log=log, timeout_s=args.timeout)
        shutil.rmtree(out, ignore_errors=True)
        res["check"] = {"ok": True}
        return res
    logs = copy if variant == "empty_index" else ds.root
    job_args: list[str] = []
    if variant == "split_off":
        cfg = out.parent / "split-off.yaml"
        cfg.write_text("split_segment_bytes: 0\n")
        job_args = ["--config", str(cfg)]
    res = run_job(logs, out, code=code, spark_args=spark_args, log=log, job_args=job_args, timeout_s=args.timeout)
    res["split_lines"] = [line for _, line in res["progress"] if "split" in line or "piece" in line]
    res["check"] = check_output(out, ds.truth(), ds.root)
    shutil.rmtree(out, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=float, default=1.0, help="data bytes in GiB (default 1)")
    p.add_argument("--repeat", type=int, default=2, help="repeats, every variant once per repeat (default 2)")
    p.add_argument(
        "--variants",
        default="indexed,empty_index",
        help=f"comma-separated, run in this order in every repeat, of {', '.join(VARIANTS)} "
        "(default indexed,empty_index)",
    )
    p.add_argument("--event-log", action="store_true", help="after the timed runs, one run per job variant with "
                   "Spark's event log: per job description and per stage times, tasks, rows")  # fmt: skip
    p.add_argument("--timeout", type=float, default=900, help="seconds per run before it is killed (default 900)")
    p.add_argument("--quiet-wait", type=float, default=60, help="wait up to this long for a quieter machine (60)")
    p.add_argument("--spark-arg", action="append", default=[], help="extra spark-submit option, repeatable")
    p.add_argument(
        "--pieces-cpu",
        action="store_true",
        help="only the split's own CPU, in this process, no Spark: the hot partition read whole vs in pieces "
        "(with edges, and handing on every fragment), --repeat times",
    )
    p.add_argument(
        "--plan-cores",
        type=int,
        default=None,
        help="every job variant runs with spark.default.parallelism=N: the job plans its splits (and its decode "
        "tasks) as for N cores, e.g. 8 to see the hot partition read in pieces on 2 cores",
    )
    p.add_argument("--code", type=Path, default=None, help="measure this checkout of txnlog instead")
    p.add_argument("--worktree-copy", action="store_true", help="measure a copy of the working tree (end_to_end)")
    p.add_argument("--snapshot", action="store_true", help="measure a snapshot of HEAD (end_to_end)")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help=f"data sets (default {DEFAULT_DATA})")
    p.add_argument("--json", type=Path, default=None, help="results JSON (default <data-dir>/results/hot-<time>.json)")
    args = p.parse_args(argv)
    if args.plan_cores:
        args.spark_arg = [*args.spark_arg, "--conf", f"spark.default.parallelism={args.plan_cores}"]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or any(v not in VARIANTS for v in variants):
        raise SystemExit(f"--variants: some of {', '.join(VARIANTS)}")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.worktree_copy and not os.environ.get("TXNLOG_BENCH_CODE"):
        args.code = worktree_copy(log=log)
    code = maybe_reexec_in_snapshot(args.snapshot, log=log, code=args.code)
    info = machine_info()
    described = code / CODE_NOTE
    info["code"] = described.read_text().strip() if described.exists() else code_version(code)
    warm_decoders(code, log)
    ds = hot_dataset(args.size, args.data_dir, log)
    if args.pieces_cpu:
        cpu = pieces_cpu(ds.root, 128 << 20, args.repeat, log)
        path = args.json or args.data_dir / "results" / f"hot-pieces-cpu-{time.strftime('%Y%m%d-%H%M%S')}.json"
        write_json(path, {"machine": info, "args": {k: str(x) for k, x in vars(args).items()}, "runs": cpu})
        log(f"results: {path}")
        return 0
    copy = empty_index_copy(ds.root)
    out_root = args.data_dir / "hot-out"
    out_root.mkdir(parents=True, exist_ok=True)
    segs = ds.all_segments()
    hot_segs = [f for f in segs if f.parent.name == "dense-hot-0"]
    truth = ds.truth()
    inp = {
        "segments": len(segs),
        "segment_bytes": sum(f.stat().st_size for f in segs),
        "hot_segments": [f.stat().st_size for f in hot_segs],
        "hot_index_bytes": [f.with_suffix(".index").stat().st_size for f in hot_segs],
        "transactions": int(truth["transactions_count"]),
        "hot_transactions": sum(v for k, v in truth["partitions"]["dense-hot-0"].items() if k in ("COMMIT", "ABORT")),
    }
    data_bytes = sum(f.stat().st_size for f in segs if not f.parent.name.startswith("__"))
    inp["hot_share_of_data_bytes"] = sum(inp["hot_segments"]) / data_bytes
    log(
        f"hot mix {args.size:g} GiB: {inp['segments']} segments, {inp['segment_bytes'] / GiB:.2f} GiB, "
        f"{inp['transactions']:,} transactions; hot partition: segments {inp['hot_segments']}, "
        f"{inp['hot_share_of_data_bytes']:.1%} of the data bytes, {inp['hot_transactions']:,} transactions"
    )
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(args.repeat):
        for v in variants:
            res = run_variant(v, ds, copy, code, out_root / v, args, log, args.spark_arg)
            res["repeat"] = r
            runs[v].append(res)
            load = res["load_1min_before_after"]
            log(
                f"  repeat {r + 1} {v}: {res['wall_s']:.1f} s; load {load[0]:.2f} -> {load[1]:.2f}; others "
                f"{100 * res['others_cpu_share']:.0f}% CPU; phases "
                + ", ".join(f"{k.split(' (')[0]} {x:.1f}" for k, x in (res.get("phases_s") or {}).items() if x)
                + f"; truth {'OK' if res['check']['ok'] else 'MISMATCH'}"
            )
    event_logs: dict[str, Any] = {}
    if args.event_log:
        ev_root = args.data_dir / "hot-spark-events"
        shutil.rmtree(ev_root, ignore_errors=True)
        for v in [v for v in variants if v in JOB_VARIANTS]:
            ev_dir = ev_root / v
            ev_dir.mkdir(parents=True)
            spark_args = [*args.spark_arg, "--conf", "spark.eventLog.enabled=true", "--conf",
                          f"spark.eventLog.dir=file://{ev_dir}"]  # fmt: skip
            res = run_variant(v, ds, copy, code, out_root / v, args, log, spark_args)
            new = [f for f in ev_dir.iterdir() if not f.name.startswith(".")]
            if not new:
                continue
            summary = summarize_event_log(new[0])
            summary.pop("stage_list", None)
            event_logs[v] = {
                "wall_s": res["wall_s"],
                "load_1min_before_after": res["load_1min_before_after"],
                "truth_ok": res["check"]["ok"],
                "by_description": summary["by_description"],
                "jobs": summary["jobs"],
                "stages": stage_profile(new[0]),
            }
            log(f"  event log {v}: {res['wall_s']:.1f} s, {summary['jobs']} jobs")
    lines = report(runs, event_logs, inp, info, args, variants)
    text = "\n".join(lines)
    print(text)
    path = args.json or args.data_dir / "results" / f"hot-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for rs in runs.values():
        for res in rs:
            res.pop("stdout", None)
    write_json(path, {"machine": info, "args": {k: str(x) for k, x in vars(args).items()}, "input": inp,
                      "runs": runs, "event_logs": event_logs, "report": text})  # fmt: skip
    log(f"results: {path}")
    ok = all(res["check"]["ok"] for rs in runs.values() for res in rs)
    return 0 if ok else 1


def report(
    runs: dict[str, list[dict[str, Any]]],
    event_logs: dict[str, Any],
    inp: dict[str, Any],
    info: dict[str, Any],
    args: argparse.Namespace,
    variants: list[str],
) -> list[str]:
    lines = [
        f"# hot partition, {info['date']}",
        f"machine: {info['cpu']}, {info['cores']} cores; load at start {info['load_avg_at_start']}; code: {info['code']}",
        f"input: {args.size:g} GiB hot mix, {inp['segment_bytes'] / GiB:.2f} GiB of .log, {inp['transactions']:,} "
        f"transactions; hot partition {inp['hot_share_of_data_bytes']:.1%} of the data bytes in segments "
        f"{[round(b / 2**20) for b in inp['hot_segments']]} MiB, {inp['hot_transactions']:,} transactions",
        "",
        "| variant | repeat | wall s | decode s | after decode s | load 1 min before → after | others' CPU | truth |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in range(args.repeat):
        for v in variants:
            res = runs[v][r]
            ph = res.get("phases_s") or {}
            dec = ph.get("decode (Spark job over all segments)")
            rest = ph.get("tables, shuffles, Delta writes, exit")
            load = res["load_1min_before_after"]
            lines.append(
                f"| {v} | {r + 1} | {res['wall_s']:.1f} | {dec if dec is None else f'{dec:.1f}'} | "
                f"{rest if rest is None else f'{rest:.1f}'} | {load[0]:.2f} → {load[1]:.2f} | "
                f"{100 * res['others_cpu_share']:.0f}% | {'OK' if res['check']['ok'] else 'MISMATCH'} |"
            )
    base = "empty_index" if "empty_index" in variants else ("split_off" if "split_off" in variants else None)
    lines.append("")
    for v in variants:
        walls = [x["wall_s"] for x in runs[v]]
        per = ""
        if base and v != base:
            ratios = [a["wall_s"] / b["wall_s"] for a, b in zip(runs[v], runs[base], strict=True)]
            per = f"; / {base} per repeat: {', '.join(f'{x:.2f}' for x in ratios)} (median {median(ratios):.2f})"
        if "floor" in variants and v != "floor":
            fl = [a["wall_s"] / b["wall_s"] for a, b in zip(runs[v], runs["floor"], strict=True)]
            per += f"; / floor per repeat: {', '.join(f'{x:.2f}' for x in fl)}"
        lines.append(f"- {v}: median {median(walls):.1f} s{per}")
    for v, ev in event_logs.items():
        lines += [
            "",
            f"Event log, {v} ({ev['wall_s']:.1f} s, load {ev['load_1min_before_after'][0]:.2f} → "
            f"{ev['load_1min_before_after'][1]:.2f}, {ev['jobs']} jobs): per job description",
            "",
            "| job description | jobs | job wall s | tasks | task s | 1-task stages | their task s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for d, x in ev["by_description"].items():
            lines.append(
                f"| {d} | {x['jobs']} | {x['wall_ms'] / 1e3:.1f} | {x['tasks']} | {x['task_run_ms'] / 1e3:.1f} | "
                f"{x['single_task_stages']} | {x['single_task_run_ms'] / 1e3:.1f} |"
            )
        top = sorted(ev["stages"], key=lambda s: -s["wall_ms"])[:10]
        lines += [
            "",
            "| stage | job description | name | wall s | tasks | longest task s | shuffle records w / r | output rows |",
            "|---:|---|---|---:|---:|---:|---|---|",
        ]
        for s in top:
            rows = ", ".join(f"{k.replace('number of output rows', 'rows')} {n:,}" for k, n in s["sql_rows"].items())
            lines.append(
                f"| {s['stage_id']} | {s['description']} | {s['name'][:40]} | {s['wall_ms'] / 1e3:.1f} | "
                f"{s['tasks']} | {s['max_task_ms'] / 1e3:.1f} | {s['shuffle_records_written']:,} / "
                f"{s['shuffle_records_read']:,} | {rows} |"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
