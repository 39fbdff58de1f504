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
Spark path's overhead in one run, whatever the machine's load.

    python benchmarks/dump_read.py --mib 48 --repeat 3 --code /tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
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
    if mode == "spark":
        from txnlog.engine.spark.dump_log import read_dump_logs
        from txnlog.engine.spark.session import get_session
        from txnlog.sources.dump_log.lines import list_dump_inputs

        spark = get_session()
        t, cpu = time.perf_counter(), _tree_cpu()
        frames = read_dump_logs(spark, list_dump_inputs([dumps]))
        summary, records = frames.summary.toArrow(), frames.records.toArrow()
        seconds = time.perf_counter() - t
        cpu = _tree_cpu() - cpu  # this process, the JVM and Spark's Python workers
        spark.stop()
    else:
        from txnlog.engine.spark.dump_log import read_dump_logs_here
        from txnlog.engine.spark.placement import local_cores
        from txnlog.sources.dump_log.lines import list_dump_inputs

        t, cpu = time.perf_counter(), time.process_time()
        summary, records = read_dump_logs_here(list_dump_inputs([dumps]), 1 if mode == "here1" else local_cores())
        seconds = time.perf_counter() - t
        cpu = time.process_time() - cpu
    kinds = summary.column("kind").value_counts().to_pylist()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "summary_rows": summary.num_rows,
        "records_rows": records.num_rows,
        "kinds": sorted((k["values"], k["counts"]) for k in kinds),
    }


def _tree_cpu() -> float:
    """CPU seconds (user + system) of this process and its live descendants (a process that ended between two
    calls is missed: Spark's Python workers are reused, so they live until the session stops)."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _child_run(code: Path, mode: str, dumps: Path) -> dict[str, Any]:
    """:func:`child` in a fresh process importing ``code``'s txnlog: PYTHONPATH for the driver, the working
    directory for Spark's Python workers (their ``sys.path`` starts with it)."""
    args = [str(Path(__file__).resolve()), "--child", mode, "--dumps", str(dumps)]
    return run_python(args, env={"PYTHONPATH": str(code), "PYSPARK_PYTHON": sys.executable}, cwd=code)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=48, help="MiB of segments to render as dumps (default 48)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--code", type=Path, action="append", default=[], help="another checkout to measure as well")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--threads-too", action="store_true", help="also the driver's read on one thread (here1)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--dumps", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.dumps)))
        return

    dumps = build(args.data_dir, args.mib)
    size = warm(dumps)
    print(f"dumps: {dumps} ({size / 1e6:.0f} MB of text, {sum(1 for _ in dumps.rglob('*.txt'))} files)")
    codes = [ROOT, *[c.resolve() for c in args.code]]
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.repeat):
        for code in codes:
            for mode in ("spark", "here", "here1") if args.threads_too else ("spark", "here"):
                warm(dumps)
                out = _child_run(code, mode, dumps)
                key = f"{code.name or 'HEAD'}:{mode}"
                runs.setdefault(key, []).append(out)
                cpu = "" if out.get("cpu_seconds") is None else f", CPU {out['cpu_seconds']:.1f} s"
                print(
                    f"repeat {r + 1} {key}: {out['seconds']:.1f} s{cpu}, "
                    f"{out['summary_rows']} + {out['records_rows']} rows"
                )
    answers = {json.dumps([o["summary_rows"], o["records_rows"], o["kinds"]]) for rs in runs.values() for o in rs}
    print(f"same rows in every run: {len(answers) == 1}")
    for code in codes:
        name = code.name or "HEAD"
        s = [o["seconds"] for o in runs[f"{name}:spark"]]
        h = [o["seconds"] for o in runs[f"{name}:here"]]
        print(
            f"{name}: spark median {median(s):.1f} s ({min(s):.1f}-{max(s):.1f}), here {median(h):.1f} s "
            f"({min(h):.1f}-{max(h):.1f}); spark / here {median(s) / median(h):.2f} "
            f"(per repeat {', '.join(f'{a / b:.2f}' for a, b in zip(s, h, strict=True))})"
        )
        if args.threads_too and f"{name}:here1" in runs:
            h1 = [o["seconds"] for o in runs[f"{name}:here1"]]
            print(
                f"{name}: here on one thread median {median(h1):.1f} s; one thread / {os.cpu_count()} threads "
                f"{median(h1) / median(h):.2f}"
            )
    if args.json:
        write_json(args.json, {"machine": machine_info(), "mib": args.mib, "text_bytes": size, "runs": runs})


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
