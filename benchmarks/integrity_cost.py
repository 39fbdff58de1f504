#!/usr/bin/env python
"""What the integrity audit costs: the job with the audit on and off, interleaved in one run, on both mixes of
benchmarks/end_to_end.py (bulk and dense) at two sizes; the audit's share of the job's marginal cost.

Each measurement runs the whole job in this process (``txnlog.pipeline.run.run``, the placement the input
chooses); "off" replaces the audit step (``txnlog.pipeline.audit.with_integrity``) by one that adds an empty
``integrity`` table. The order rotates per repeat (on/off, off/on), the inputs are read once before the first
measurement (page cache warm), and the audit step's own time is recorded in every "on" run. The machine may be
shared: the answer is ratios within the run.

    python benchmarks/integrity_cost.py                      # bulk and dense, 0.0625 and 0.25 GiB, 3 repeats
    python benchmarks/integrity_cost.py --sizes 0.125 0.5 --repeat 5
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import GiB, MiB, dataset  # noqa: E402
from benchmarks.end_to_end import warm_page_cache  # noqa: E402
from txnlog.model import contract  # noqa: E402
from txnlog.model.config import load_config  # noqa: E402
from txnlog.pipeline import audit as audit_step  # noqa: E402

run_module = importlib.import_module("txnlog.pipeline.run")  # the module (the package exports its function)


def mix_dataset(mix: str, size: float, data_dir: Path) -> Any:
    if mix == "dense":
        return dataset(f"e2e-dense-{size:g}GiB", data_dir, mix="dense", total_bytes=int(size * GiB))
    return dataset(f"e2e-{size:g}GiB-p64", data_dir, mix="bulk", total_bytes=int(size * GiB), batch_bytes=1024,
                   partitions=64, segment_bytes=256 * MiB, small_batch_bytes=150, small_fraction=0.2)  # fmt: skip


def once(root: Path, out: Path, audit: bool, timed: dict[str, float]) -> float:
    real = audit_step.with_integrity

    def on(tables, *a):  # type: ignore[no-untyped-def]
        t, cpu = time.perf_counter(), time.process_time()
        try:
            return real(tables, *a)
        finally:
            timed["audit"] = time.perf_counter() - t
            timed["audit_cpu"] = time.process_time() - cpu

    def off(tables, *a):  # type: ignore[no-untyped-def]
        return {**tables, "integrity": contract.INTEGRITY.empty_table().drop_columns(["cluster", "as_of"])}

    run_module.with_integrity = on if audit else off
    try:
        config = load_config(None, {"logs": [str(root)], "output": str(out), "cluster": "bench", "progress": False})
        t, cpu = time.perf_counter(), time.process_time()
        run_module.run(config, progress=lambda _m: None)
        timed["job_cpu"] = time.process_time() - cpu
        return time.perf_counter() - t
    finally:
        run_module.with_integrity = real


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mix", nargs="+", default=["bulk", "dense"])
    p.add_argument("--sizes", nargs=2, type=float, default=[0.0625, 0.25])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "txnlog-integrity-bench")
    args = p.parse_args(argv)
    for mix in args.mix:
        sets = {s: mix_dataset(mix, s, args.data_dir) for s in args.sizes}
        for ds in sets.values():
            warm_page_cache(ds.root)
        times: dict[tuple[float, bool], list[float]] = {(s, a): [] for s in args.sizes for a in (True, False)}
        audit: dict[float, list[float]] = {s: [] for s in args.sizes}
        cpu: dict[tuple[float, str], list[float]] = {(s, k): [] for s in args.sizes for k in ("job", "audit")}
        with tempfile.TemporaryDirectory() as tmp:
            once(sets[args.sizes[0]].root, Path(tmp) / "warm", True, {})  # imports, numba, first-run costs
            for r in range(args.repeat):
                for s in args.sizes:
                    for a in (True, False) if r % 2 == 0 else (False, True):
                        timed: dict[str, float] = {}
                        t = once(sets[s].root, Path(tmp) / f"o-{r}-{s}-{a}", a, timed)
                        times[(s, a)].append(t)
                        if a:
                            audit[s].append(timed["audit"])
                            cpu[(s, "audit")].append(timed["audit_cpu"])
                        else:
                            cpu[(s, "job")].append(timed["job_cpu"])
                        print(f"{mix} {s:g} GiB audit={'on' if a else 'off'}: {t:.2f} s"
                              + (f" (audit step {timed['audit']:.2f} s)" if a else ""), flush=True)  # fmt: skip
        small, big = args.sizes
        med = {k: statistics.median(v) for k, v in times.items()}
        span = big - small
        on, off = (med[(big, True)] - med[(small, True)]) / span, (med[(big, False)] - med[(small, False)]) / span
        step = (statistics.median(audit[big]) - statistics.median(audit[small])) / span
        print(f"{mix}: marginal s/GiB on {on:.2f}, off {off:.2f}: (on - off) / off = {(on - off) / off:+.1%}; "
              f"the audit step's own marginal {step:.2f} s/GiB = {step / off:.1%} of the job's (off)")  # fmt: skip
        c = {k: statistics.median(v) for k, v in cpu.items()}
        job_cpu = (c[(big, "job")] - c[(small, "job")]) / span
        audit_cpu = (c[(big, "audit")] - c[(small, "audit")]) / span
        print(f"{mix}: CPU seconds (this process's threads): the job's marginal (off) {job_cpu:.2f} s/GiB, the "
              f"audit step's {audit_cpu:.2f} s/GiB = {audit_cpu / job_cpu:.1%}")  # fmt: skip
        for s in args.sizes:
            print(f"  {s:g} GiB: job CPU (off) {c[(s, 'job')]:.2f} s, audit step CPU {c[(s, 'audit')]:.3f} s")
        for s in args.sizes:
            print(f"  {s:g} GiB: job on {med[(s, True)]:.2f} s, off {med[(s, False)]:.2f} s, "
                  f"audit step {statistics.median(audit[s]):.3f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
