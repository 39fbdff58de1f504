#!/usr/bin/env python
"""A year of nightly runs: what the history costs to keep and to
read, and what retention gives back.

1. The embedded sample is run once (``./spark-submit.sh``, unless ``--base`` names an output that holds a
   run): its tables are one night.
2. That night is written again as ``--nights`` runs (default 365), one per day back from the sample's
   as_of, with txnlog's own writer (``txnlog.output.delta.write_tables``, deltalake: one commit per table per
   night, as the job commits): the Delta logs, the files and their statistics are those a year of
   nightly jobs leaves.
3. Measured on the one-night output and on the year, each ``--repeat`` times, interleaved (one, year,
   one, year, ...), in fresh processes: ``txnlog find-hanging`` and ``txnlog list`` (the newest complete
   run), ``txnlog find-hanging --as-of`` a run half a year back, the dashboard query
   ``dashboards/current_findings.sql`` and ``lso_lag_by_partition.sql`` with duckdb's delta extension,
   and ``current_findings`` with polars. Reported: median wall time per query, the year/one ratio, the
   tables' sizes (files, bytes, Delta log entries and checkpoints).
4. ``txnlog retain --keep-runs 90 --vacuum-hours 0 --execute`` on a copy of the year; its time, and
   the same queries and sizes after it.

    python benchmarks/history.py                    # 365 nights, 5 repeats
    python benchmarks/history.py --nights 30 --repeat 1    # a smoke check

Results JSON: benchmarks/data/results/history-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import DEFAULT_DATA, ROOT, median  # noqa: E402

PY = str(ROOT / ".venv" / "bin" / "python")
TXNLOG = str(ROOT / ".venv" / "bin" / "txnlog")

DUCKDB = """
import sys, duckdb, duckdb_extension_delta
from pathlib import Path
out, query = sys.argv[1], sys.argv[2]
ext = Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}" / "delta.duckdb_extension"
con = duckdb.connect()
con.execute(f"LOAD '{ext}'")
con.execute(Path(sys.argv[3]).read_text().replace("'./out/", f"'{out}/"))
print(len(con.sql(Path(query).read_text()).fetchall()))
"""

POLARS = """
import sys, polars as pl
from pathlib import Path
out, query = sys.argv[1], sys.argv[2]
tables = ["runs", "findings", "partition_health"]
ctx = pl.SQLContext({t: pl.scan_delta(f"{out}/{t}") for t in tables})
print(len(ctx.execute(Path(query).read_text()).collect()))
"""


def build_year(base: Path, year: Path, nights: int) -> float:
    """Write ``nights`` copies of the base run, one per day ending at its as_of; seconds taken."""
    from txnlog.model.contract import TABLES
    from txnlog.output.delta import read_table, write_tables

    runs = read_table(str(base), "runs").to_pylist()
    [newest] = [r for r in runs if r["as_of"] == max(x["as_of"] for x in runs)]
    cluster, as_of = newest["cluster"], newest["as_of"]
    night = {name: read_table(str(base), name, cluster=cluster, as_of=as_of) for name in TABLES}
    started = time.monotonic()
    for n in range(nights - 1, -1, -1):
        moment = as_of - timedelta(days=n)
        data = {}
        for name, table in night.items():
            i = table.schema.get_field_index("as_of")
            data[name] = table.set_column(i, "as_of", [[moment] * table.num_rows]).cast(table.schema)
        runs_row = data.pop("runs")
        write_tables(None, str(year), data, cluster=cluster, as_of=moment)
        write_tables(None, str(year), {"runs": runs_row}, cluster=cluster, as_of=moment)  # last, as the job does
        if n % 50 == 0:
            print(f"  night {nights - n}/{nights} written ({time.monotonic() - started:.0f} s)", flush=True)
    return time.monotonic() - started


def sizes(out: Path) -> dict[str, dict[str, int]]:
    result = {}
    for table in sorted(p for p in out.iterdir() if (p / "_delta_log").is_dir()):
        data = [p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts]
        log = list((table / "_delta_log").iterdir())
        result[table.name] = {
            "files": len(data),
            "bytes": sum(p.stat().st_size for p in data),
            "log_json": sum(1 for p in log if p.suffix == ".json"),
            "checkpoints": sum(1 for p in log if ".checkpoint" in p.name),
        }
    return result


def queries(out: Path, half_year_as_of: str | None) -> dict[str, list[str]]:
    dash = ROOT / "dashboards"
    q = {
        "txnlog find-hanging": [TXNLOG, "find-hanging", "--output", str(out)],
        "txnlog list": [TXNLOG, "list", "--output", str(out)],
        "duckdb current_findings": [PY, "-c", DUCKDB, str(out), str(dash / "current_findings.sql"),
                                    str(dash / "duckdb_views.sql")],
        "duckdb lso_lag_by_partition": [PY, "-c", DUCKDB, str(out), str(dash / "lso_lag_by_partition.sql"),
                                        str(dash / "duckdb_views.sql")],
        "polars current_findings": [PY, "-c", POLARS, str(out), str(dash / "current_findings.sql")],
    }  # fmt: skip
    if half_year_as_of:
        q["txnlog find-hanging --as-of (older run)"] = [*q["txnlog find-hanging"], "--as-of", half_year_as_of]
    return q


def timed(cmd: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds, proc.stdout


def measure(outputs: dict[str, Path], repeat: int, as_ofs: dict[str, str | None]) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {k: {} for k in outputs}
    printed: dict[tuple[str, str], str] = {}
    for _ in range(repeat):
        for label, out in outputs.items():
            for name, cmd in queries(out, as_ofs[label]).items():
                seconds, stdout = timed(cmd)
                times[label].setdefault(name, []).append(seconds)
                printed[(label, name)] = stdout
    # the same answer from every history for the newest run's queries
    for name in ("txnlog find-hanging", "txnlog list", "duckdb current_findings", "polars current_findings"):
        answers = {printed[(label, name)] for label in outputs}
        assert len(answers) == 1, f"{name}: the histories disagree"
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep-runs", type=int, default=90)
    ap.add_argument("--base", type=Path, help="an output holding one run (default: run the embedded sample)")
    ap.add_argument("--work", type=Path, default=DEFAULT_DATA / "history")
    args = ap.parse_args()

    from txnlog.output.delta import read_table

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    base = args.base
    if base is None:
        base = args.work / "one"
        print("running the embedded sample once ...", flush=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        subprocess.run([str(ROOT / "spark-submit.sh"), "--output", str(base)], check=True, env=env,
                       capture_output=True, cwd=args.work)  # fmt: skip
    year = args.work / "year"
    print(f"writing {args.nights} nights ...", flush=True)
    build_s = build_year(base, year, args.nights)
    retained = args.work / "retained"
    shutil.copytree(year, retained)
    started = time.monotonic()
    subprocess.run([TXNLOG, "retain", "--output", str(retained), "--keep-runs", str(args.keep_runs),
                    "--vacuum-hours", "0", "--execute"], check=True, capture_output=True)  # fmt: skip
    retain_s = time.monotonic() - started

    as_ofs = sorted(r["as_of"] for r in read_table(str(year), "runs").to_pylist())
    half = as_ofs[len(as_ofs) // 2].isoformat()
    kept = sorted(r["as_of"] for r in read_table(str(retained), "runs").to_pylist())
    outputs = {"one night": base, f"{args.nights} nights": year, f"after retain --keep-runs {args.keep_runs}": retained}
    times = measure(
        outputs,
        args.repeat,
        {
            "one night": None,
            f"{args.nights} nights": half,
            f"after retain --keep-runs {args.keep_runs}": kept[0].isoformat(),
        },
    )
    report: dict[str, Any] = {
        "nights": args.nights,
        "repeat": args.repeat,
        "write_seconds_per_night": build_s / args.nights,
        "retain_seconds": retain_s,
        "sizes": {label: sizes(out) for label, out in outputs.items()},
        "median_seconds": {label: {q: median(ts) for q, ts in t.items()} for label, t in times.items()},
        "all_seconds": times,
    }
    print(f"\nwrote {args.nights} nights in {build_s:.0f} s ({build_s / args.nights:.2f} s per night, 8 commits)")
    print(f"txnlog retain --keep-runs {args.keep_runs} --vacuum-hours 0: {retain_s:.1f} s")
    labels = list(outputs)
    print("\nmedian seconds (" + f"{args.repeat} repeats, fresh processes)")
    print(f"{'query':42s}" + "".join(f"{lb:>26s}" for lb in labels) + f"{'year/one':>10s}")
    for q in times[labels[0]]:
        row = [median(times[lb][q]) for lb in labels]
        print(f"{q:42s}" + "".join(f"{v:26.2f}" for v in row) + f"{row[1] / row[0]:10.2f}")
    for q in times[labels[1]]:
        if q not in times[labels[0]]:
            print(f"{q:42s}{'-':>26s}" + "".join(f"{median(times[lb][q]):26.2f}" for lb in labels[1:]))
    print("\nsizes: data files / bytes / Delta log json / checkpoints")
    for label in labels:
        total = report["sizes"][label]
        print(f"  {label}: " + ", ".join(
            f"{t} {s['files']}/{s['bytes'] / 1024:.0f} KiB/{s['log_json']}/{s['checkpoints']}" for t, s in total.items()))  # fmt: skip
    results = DEFAULT_DATA / "results"
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"history-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
