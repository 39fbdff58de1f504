#!/usr/bin/env python
"""Experiment behind a fix proposed in RESULTS.md: coalesce the decoded summary before building the tables.

The segments source yields one Spark partition per input partition (a 256 MiB segment alone, small
files packed to 64 MiB), and ``pipeline.run`` persists that DataFrame and hands it to
``build_tables`` as it is. Every later stage that scans it (about a dozen: replica stats, fragments,
snapshots, quarantine, ...) therefore runs one task per *input* partition -- 8 at 1 GiB, 30 at
4 GiB -- for a few thousand rows. This script measures the job as it is against the same job with
two lines added after the decode (``summary``/``records`` ``.coalesce(max(2, defaultParallelism))``),
interleaved, through ``spark-submit.sh``, and checks both against the ground truth.

Since issue 3 ``pipeline.run`` coalesces (this experiment is what justified it); the script measures
checkouts from before that, e.g. ``git archive af9fd39``. The product code is not changed: the variant is a copy of the measured checkout under /tmp
(``<code>-coalesce``) with the patch applied there, sharing its numba cache (copied with mtimes).

    python benchmarks/experiment_coalesce.py --code /tmp/txnlog-bench-<sha> --sizes 1,4 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import DEFAULT_DATA, GiB, MiB, ROOT, dataset, machine_info, median  # noqa: E402
from end_to_end import check_output, run_job, wait_for_quiet, warm_page_cache  # noqa: E402

ANCHOR = '    seen_coord = records.agg(F.max("record_timestamp").alias("m")).first()["m"]\n'
PATCH = (
    "    # benchmark experiment: the decoded summary is tiny; do not keep one Spark partition per input partition\n"
    "    _k = max(2, spark.sparkContext.defaultParallelism)\n"
    "    summary, records = summary.coalesce(_k), records.coalesce(_k)\n"
)


def patched_copy(code: Path) -> Path:
    dest = code.with_name(code.name + "-coalesce")
    if dest.exists():
        shutil.rmtree(dest)
    # -a keeps mtimes, so numba's cache (and txnlog.kafka.jit's fingerprint) stay valid in the copy
    subprocess.run(["cp", "-a", str(code), str(dest)], check=True)
    pipeline = dest / "txnlog" / "pipeline.py"
    text = pipeline.read_text()
    if ANCHOR not in text and "summary.coalesce(" in text:
        raise SystemExit(f"{pipeline}: this version already coalesces the decoded summary (the fix measured here, "
                         "in pipeline.run since issue 3); give --code a checkout from before it, e.g. commit af9fd39")
    if ANCHOR not in text:
        raise SystemExit(f"{pipeline}: anchor line not found; adapt ANCHOR to this version of pipeline.py")
    stat = pipeline.stat()
    pipeline.write_text(text.replace(ANCHOR, ANCHOR + PATCH))
    os.utime(pipeline, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # pipeline.py has no jitted code; keep the stamp anyway
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--code", type=Path, default=ROOT, help="checkout to measure (default: this repo)")
    p.add_argument("--sizes", default="1,4")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--quiet-wait", type=float, default=120)
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    args = p.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    code = args.code.resolve()
    if not (code / ".venv").exists():
        (code / ".venv").symlink_to(ROOT / ".venv")
    variant = patched_copy(code)
    env = {} if code == ROOT else {"PYTHONPATH": str(code)}
    env_variant = {"PYTHONPATH": str(variant)}
    info = machine_info()
    sizes = [float(s) for s in args.sizes.split(",")]
    sets = {s: dataset(f"e2e-{s:g}GiB-p{args.partitions}", args.data_dir, log=log, total_bytes=int(s * GiB), batch_bytes=1024,
                       partitions=args.partitions, segment_bytes=256 * MiB, small_batch_bytes=150, small_fraction=0.2)
            for s in sizes}
    out = args.data_dir / "e2e-out" / "experiment"
    times: dict[tuple[str, float], list[float]] = {}
    for label, c, e in (("as is", code, env), ("coalesced", variant, env_variant)):
        res = run_job(sets[sizes[0]].root, out, code=c, spark_args=[], log=log, env_extra=e)  # untimed: caches, JIT
        log(f"  warm-up, {label}: {res['wall_s']:.1f} s")
    for r in range(args.repeat):
        for s in sizes:
            order = [("as is", code, env), ("coalesced", variant, env_variant)]
            if r % 2:
                order.reverse()
            for label, c, e in order:
                warm_page_cache(sets[s].root)
                if args.quiet_wait > 0:
                    wait_for_quiet(log, max_wait=args.quiet_wait)
                res = run_job(sets[s].root, out, code=c, spark_args=[], log=log, env_extra=e)
                ok = check_output(out, sets[s].truth())["ok"]
                times.setdefault((label, s), []).append(res["wall_s"])
                log(f"  repeat {r + 1}, {s:g} GiB, {label}: {res['wall_s']:.1f} s (decode "
                    f"{res['phases_s']['decode (Spark job over all segments)'] or 0:.1f}, tables "
                    f"{res['phases_s']['tables, shuffles, Delta writes, exit'] or 0:.1f}); others "
                    f"{100 * res['others_cpu_share']:.0f}%; truth {'OK' if ok else 'MISMATCH'}")
                if not ok:
                    return 1
    shutil.rmtree(out, ignore_errors=True)
    lo, hi = sizes[0], sizes[-1]
    print(f"# coalesce experiment, {info['date']}; code {code}")
    print("| variant | " + " | ".join(f"{s:g} GiB median s" for s in sizes) + " | marginal s/GiB |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for label in ("as is", "coalesced"):
        m = {s: median(times[(label, s)]) for s in sizes}
        print(f"| {label} | " + " | ".join(f"{m[s]:.1f}" for s in sizes) + f" | {(m[hi] - m[lo]) / (hi - lo):.2f} |")
    print("all runs: " + "; ".join(f"{k[0]} {k[1]:g} GiB: " + ", ".join(f"{x:.1f}" for x in v) for k, v in times.items()))
    shutil.rmtree(variant, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
