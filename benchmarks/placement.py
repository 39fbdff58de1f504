#!/usr/bin/env python
"""Where the two placements cross: the same input run in this process (no JVM) and with Spark, at several sizes.

A small input (``driver_max_bytes``) is read, built and written by ``./spark-submit.sh``'s Python process with no
JVM (txnlog.engine.spark.placement); a larger one goes to spark-submit. The threshold belongs where the two take the same
time, so that an input just above it takes about what one just below it takes (no cliff). This script measures
both placements at ``--sizes`` MiB on ``--mix``: ``dense``, the transaction-dense mix (``txnlog.brokerlog.dense``),
or ``hot``, the same with one partition holding 55 % of the bytes in indexed 256 MiB segments
(``end_to_end.hot_dataset``, as ``hot_partition.py`` reads it), the job's costliest inputs per byte, or ``small``,
a real cluster's shape: half the bytes in many quiet partitions of 1-4 small segments each, half in hot ones
(``end_to_end.small_dataset``, ``txnlog.brokerlog.small_segments.small_segments``), the costliest per file:

* ``driver``: ``./spark-submit.sh --logs DIR --output FRESH --driver-max-bytes 2**40`` (every size in the driver);
* ``driver1``: the driver run again on one core (``taskset -c 0``: one reading thread), so the driver's per-byte
  cost splits into what more cores share (its threads) and what they do not (:class:`txnlog.engine.spark.placement.Costs`);
* ``spark``: the same with ``--driver-max-bytes 0`` (always Spark, ``local[*]``).

Each run is a process tree watched by ``end_to_end.watch`` (wall time, CPU, peak RSS of the driver process), the
page cache warmed before it, the two placements interleaved in every repeat. Reported per size: medians, the
ratio spark / driver, and the crossover of the two least-squares lines t = a + b × size. The input's files per GiB
(its ``.log`` segments and producer snapshots, what the job counts) give, against the per-GiB terms of ``Costs``,
the per-file terms the lines imply (:func:`per_file_terms`).

    python benchmarks/placement.py --sizes 16,64,256,512 --repeat 2 --snapshot
    python benchmarks/placement.py --mix hot --sizes 1024,2048,4096 --repeat 1 --snapshot
    python benchmarks/placement.py --mix small --sizes 256,1024 --repeat 2 --snapshot
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, dataset, machine_info, maybe_reexec_in_snapshot, median, write_json  # noqa: E402

DEFAULT_DATA = ROOT / "benchmarks" / "data"
AS_OF = "2026-11-26T00:00:00Z"
#: mode: (--driver-max-bytes, what the command runs under)
MODES: dict[str, tuple[str, list[str]]] = {
    "driver": (str(2**40), []),
    "driver1": (str(2**40), ["taskset", "-c", "0"]),
    "spark": ("0", []),
}


def warm(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of t = a + b × x by least squares."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def input_set(mix: str, mib: int, data_dir: Path) -> Any:
    """The data set of ``mix`` at ``mib`` MiB (written once, then reused)."""
    if mix == "dense":
        return dataset(f"placement-dense-{mib}MiB", data_dir, mix="dense", total_bytes=mib << 20)
    from end_to_end import hot_dataset, mix_dataset, small_dataset

    if mix == "bulk":  # end_to_end.py's bulk mix with its default 64 small partitions
        return mix_dataset("bulk", mib / 1024, argparse.Namespace(data_dir=data_dir, partitions=64), print)

    if mix == "small":
        return small_dataset(mib / 1024, data_dir, print)
    return hot_dataset(mib / 1024, data_dir, print)


def _input_files(root: Path) -> list[Path]:
    """The files the job counts as its input: ``.log`` segments and producer snapshots."""
    return [p for p in root.rglob("*") if p.suffix in (".log", ".snapshot")]


def input_gib(root: Path) -> float:
    """The input's size as the job counts it (its ``.log`` segments and producer snapshots), in GiB: the hot mix of
    "1024 MiB" is 1.15 GiB, and the cost lines are per GiB of input."""
    return sum(p.stat().st_size for p in _input_files(root)) / 2**30


def input_files_per_gib(root: Path) -> float:
    """The input's files per GiB, as ``Placement.for_input`` weighs them."""
    return len(_input_files(root)) / max(input_gib(root), 2**-30)


def input_partitions_per_gib(root: Path) -> float:
    """The input's data partitions (their directories holding a segment, a replica counted once, not
    ``__transaction_state``'s) per GiB, as ``Placement.for_input`` weighs them."""
    names = {p.parent.name for p in root.rglob("*.log")}
    return len({n for n in names if not n.startswith("__transaction_state-")}) / max(input_gib(root), 2**-30)


def run_once(
    code: Path, root: Path, max_bytes: str, quiet_wait: float, under: list[str] | None = None
) -> dict[str, Any]:
    """One job on the data set at ``root`` with ``--driver-max-bytes max_bytes`` (run under ``under``, e.g.
    taskset), the page cache warmed first."""
    from end_to_end import wait_for_quiet, watch
    from startup import job_env

    warm(root)
    wait_for_quiet(print, max_wait=quiet_wait)
    out = Path(tempfile.mkdtemp(prefix="txnlog-placement-"))
    cmd = [*(under or []), str(code / "spark-submit.sh"), "--logs", str(root), "--output", str(out / "out")]
    cmd += ["--as-of", AS_OF, "--driver-max-bytes", max_bytes]
    try:
        res = watch(cmd, cwd=code, env=job_env(code), log=print)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        time.sleep(1)
    placed = [line for _, line in res.get("progress", []) if "decoding" in line]
    res = {k: res[k] for k in ("wall_s", "cpu_s", "others_cpu_share", "peak_rss_mib") if k in res}
    res["placed"] = placed
    return res


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="16,64,256,512", help="input sizes in MiB (default 16,64,256,512)")
    p.add_argument(
        "--mix", choices=["dense", "hot", "small", "bulk"], default="dense", help="the input mix (default dense)"
    )
    p.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)} (default all)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--quiet-wait", type=float, default=30, help="wait up to this long for a quiet machine per run")
    p.add_argument("--snapshot", action="store_true", help="measure a snapshot of HEAD (git archive to /tmp)")
    p.add_argument("--no-warmup", action="store_true", help="no untimed first run (it fills numba's cache)")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    code = maybe_reexec_in_snapshot(args.snapshot)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    modes = {m: MODES[m] for m in args.modes.split(",")}
    sets = {mib: input_set(args.mix, mib, args.data_dir) for mib in sizes}
    runs: dict[str, list[dict[str, Any]]] = {}
    if not args.no_warmup:  # numba's cache of a fresh snapshot is filled by its first run: not a measurement
        print("warm-up run (untimed)")
        run_once(code, sets[sizes[0]].root, MODES["driver"][0], args.quiet_wait)
    for r in range(args.repeat):
        for mib in sizes:
            for mode, (max_bytes, under) in modes.items():
                res = run_once(code, sets[mib].root, max_bytes, args.quiet_wait, under)
                runs.setdefault(f"{mib}:{mode}", []).append(res)
                placed = res["placed"]
                print(
                    f"repeat {r + 1} {mib:5d} MiB {mode:6s}: {res['wall_s']:6.1f} s, "
                    f"{res['cpu_s'].get('tree', 0):6.1f} CPU-s {res['cpu_s']}, driver peak "
                    f"{res['peak_rss_mib'].get('driver', 0):.0f} MiB, others {res['others_cpu_share']:.0%} "
                    f"({placed[0] if placed else '?'})"
                )
    gib = {mib: input_gib(sets[mib].root) for mib in sizes}
    files_per_gib = float(median([input_files_per_gib(sets[mib].root) for mib in sizes]))
    shape = {mib: (input_files_per_gib(sets[mib].root), input_partitions_per_gib(sets[mib].root)) for mib in sizes}
    if set(modes) != set(MODES) or len(sizes) < 2:  # no lines to fit: the runs as they are
        for key, rs in runs.items():
            cpu = [round(x["cpu_s"].get("tree", 0), 1) for x in rs]
            print(f"{key}: wall {[round(x['wall_s'], 1) for x in rs]} s, CPU {cpu} s")
        for mib, (f, n) in shape.items():
            print(f"{mib} MiB: {gib[mib]:.3f} GiB, {f:.0f} files and {n:.0f} partitions per GiB")
        if args.json:
            write_json(args.json, {"machine": machine_info(), "code": str(code), "mix": args.mix, "runs": runs,
                                   "input_gib": gib, "shape_per_gib": shape})  # fmt: skip
        return
    print(
        f"\n{'MiB':>6} {'GiB':>6} {'driver s':>9} {'1 core s':>9} {'spark s':>9} {'spark/driver':>13} {'driver peak MiB':>16}"
    )
    lines: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for mib in sizes:
        walls = {m: [x["wall_s"] for x in runs[f"{mib}:{m}"]] for m in MODES}
        d, d1, s = median(walls["driver"]), median(walls["driver1"]), median(walls["spark"])
        peak = max(x["peak_rss_mib"].get("driver", 0) for x in runs[f"{mib}:driver"])
        print(f"{mib:6d} {gib[mib]:6.2f} {d:9.1f} {d1:9.1f} {s:9.1f} {s / d:13.2f} {peak:16.0f}")
        for m in MODES:
            lines[m] += [(gib[mib], t) for t in walls[m]]
    (ad, bd), (a1, b1), (as_, bs) = fit(lines["driver"]), fit(lines["driver1"]), fit(lines["spark"])
    print(
        f"driver: {ad:.1f} s + {bd:.2f} s/GiB; on one core {a1:.1f} s + {b1:.2f} s/GiB; "
        f"spark: {as_:.1f} s + {bs:.2f} s/GiB"
    )
    print(driver_parts(b1, bd)["text"])
    files = per_file_terms(files_per_gib, bd, b1, bs)
    print(files["text"])
    if bd > bs:
        print(f"crossover: {(as_ - ad) / (bd - bs):.1f} GiB")
    else:
        print("no crossover: the driver is cheaper per byte as well")
    partitions_per_gib = float(median([n for _f, n in shape.values()]))
    cliff = threshold_cliff((ad, bd), (as_, bs), files_per_gib, partitions_per_gib)
    print(cliff["text"])
    if args.json:
        write_json(
            args.json,
            {
                "machine": machine_info(),
                "code": str(code),
                "mix": args.mix,
                "sizes": sizes,
                "runs": runs,
                "input_gib": gib,
                **driver_parts(b1, bd),
                **files,
                **cliff,
            },  # fmt: skip
        )


def driver_parts(one_core: float, cores_s: float) -> dict[str, Any]:
    """The driver's s/GiB on one core and on this machine's cores, split into the part its threads share and the
    part they do not (Costs.driver_parallel_s_per_gib, Costs.driver_serial_s_per_gib): one + p (1/c − 1) = cores_s."""
    from txnlog.engine.spark.placement import COSTS, local_cores

    c = local_cores()
    parallel = (one_core - cores_s) / (1 - 1 / c) if c > 1 else 0.0
    serial = one_core - parallel
    return {
        "driver_serial_s_per_gib": serial,
        "driver_parallel_s_per_gib": parallel,
        "text": f"the driver's s/GiB: {serial:.2f} not shared + {parallel:.2f} shared by its {c} threads (Costs says "
        f"{COSTS.driver_serial_s_per_gib} + {COSTS.driver_parallel_s_per_gib})",
    }


def per_file_terms(files_per_gib: float, driver: float, driver1: float, spark: float) -> dict[str, Any]:
    """What the per-GiB slopes of a mix of ``files_per_gib`` files per GiB (the driver on this machine's cores, on
    one core, Spark) imply per file, less what ``Costs``' per-GiB terms (fitted on the hot mix, few files) give: the
    driver's excess per file with its threads and on one core (equal: the per-file work is serial; half on two
    cores: its threads share it), and Spark's per file and core (Costs.driver_s_per_file, Costs.task_s_per_file).
    The per-GiB terms differ between mixes by their bytes as well, so a small excess is within that error."""
    from txnlog.engine.spark.placement import COSTS, local_cores

    c = local_cores()
    per = max(files_per_gib, 1e-9)
    d = (driver - COSTS.driver_s_per_gib(c)) / per
    d1 = (driver1 - COSTS.driver_s_per_gib(1)) / per
    t = (spark * c - COSTS.task_s_per_gib) / per
    return {
        "files_per_gib": files_per_gib,
        "driver_s_per_file_fit": d,
        "driver1_s_per_file_fit": d1,
        "task_s_per_file_fit": t,
        "text": f"{files_per_gib:.0f} files per GiB: per file beyond Costs' per-GiB terms, the driver {d * 1e3:.3f} ms "
        f"({c} threads), {d1 * 1e3:.3f} ms (one core), Spark's tasks {t * 1e3:.3f} ms per file and core (Costs "
        f"says {COSTS.driver_s_per_file * 1e3:.3f} and {COSTS.task_s_per_file * 1e3:.3f})",
    }


def threshold_cliff(
    driver: tuple[float, float], spark: tuple[float, float], files_per_gib: float = 0.0, partitions_per_gib: float = 0.0
) -> dict[str, Any]:
    """Where ``driver_max_bytes: auto`` puts the threshold on this machine (txnlog.engine.spark.placement.Costs), and
    what the two fitted lines (a, b per GiB) say an input there takes in each placement: their ratio is the
    cliff an input just above the threshold meets."""
    from txnlog.engine.spark.placement import COSTS, local_cores

    cores = local_cores()
    shape = {"files_per_gib": files_per_gib, "partitions_per_gib": partitions_per_gib}
    limit = COSTS.crossover(cores, **shape)
    out: dict[str, Any] = {
        "cores": cores,
        "auto_threshold_by_cores": {n: COSTS.crossover(n, **shape) for n in (2, 8, 32)},
        "auto_threshold_bytes": limit,
        "task_s_per_gib_core": spark[1] * cores,
    }
    by_cores = "; the model's threshold on " + ", ".join(
        f"{n} cores {'none' if v is None else f'{v / 2**30:.1f} GiB'}"
        for n, v in out["auto_threshold_by_cores"].items()
    )
    if limit is None:
        out["text"] = f"auto threshold on {cores} cores: none (the driver at every size){by_cores}"
        return out
    gib = limit / 2**30
    t_driver, t_spark = driver[0] + driver[1] * gib, spark[0] + spark[1] * gib
    out.update(driver_s_at_threshold=t_driver, spark_s_at_threshold=t_spark, cliff=t_spark / t_driver)
    out["text"] = (
        f"auto threshold on {cores} cores: {gib:.1f} GiB; there the fitted lines give driver {t_driver:.1f} s, "
        f"spark {t_spark:.1f} s: just above it an input takes {t_spark / t_driver:.2f}x (Spark's tasks: "
        f"{out['task_s_per_gib_core']:.1f} s per GiB and core; Costs says {COSTS.task_s_per_gib})"
    )
    out["text"] += by_cores
    return out


if __name__ == "__main__":
    main()
