#!/usr/bin/env python
"""The job end to end on a copy of many tiny partitions: 100,000 partitions of two tiny segments each.

The copy is the planning benchmark's (benchmarks/scale.py, ``write_log_dir``): one broker log dir of N partition
directories, each holding two tiny segments and a producer snapshot (hard links to the smallest non-empty segment
and snapshot of the embedded sample cluster), and the log dir's two offset checkpoint files naming every partition.
Where the planning benchmark stops before the first byte is read, this one runs the job as a user does
(``./spark-submit.sh --logs DIR --output OUT``, benchmarks/end_to_end.run_job: wall time, CPU seconds and peak RSS
of each kind of process), in each placement asked for:

* ``auto``: what a user's run does (``--driver-max-bytes auto``: the placement model, with its per-file term);
* ``spark``: ``--driver-max-bytes 0``, every read in Spark's tasks (``local[*]``);
* ``driver``: a threshold above the input, every read in the driver's threads.

Each run's output is checked: its ``partition_health`` table holds one row per partition of the copy (every
partition read); its quarantine rows are counted. The page cache is warmed before each run (the files are read once).

    python benchmarks/many_partitions.py                                   # 100,000 partitions, auto and spark
    python benchmarks/many_partitions.py --partitions 2000 --placements auto,spark,driver --data /tmp/mp  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from end_to_end import run_job  # noqa: E402
from scale import write_log_dir  # noqa: E402

#: the copy's segments are the sample's client-timestamped data (June 2024), so the job is given the as-of
AS_OF = "2024-07-01T00:00:00Z"
PLACEMENTS = {"auto": "auto", "spark": "0", "driver": str(1 << 50)}


def warm(root: Path) -> int:
    """Read every file under ``root`` once (the page cache); the bytes read."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                total += len(f.read())
    return total


def check(out: Path, partitions: int) -> dict[str, Any]:
    """The output's partition rows and quarantine rows (its Delta tables, read with deltalake)."""
    rows = DeltaTable(str(out / "partition_health")).to_pyarrow_table().num_rows
    quarantine = DeltaTable(str(out / "quarantine")).to_pyarrow_table().num_rows
    return {"partition_rows": rows, "quarantine_rows": quarantine, "every_partition": rows >= partitions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "data" / "many-partitions"))
    ap.add_argument("--placements", default="auto,spark", help="of auto, spark, driver (default auto,spark)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per job run")
    ap.add_argument("--code", default=str(ROOT), help="the txnlog checkout to run (default this one)")
    args = ap.parse_args()

    data = Path(args.data)
    copy = data / f"copy-{args.partitions}"
    made = write_log_dir(copy, args.partitions)
    files = sum(len(f) for _d, _s, f in os.walk(copy))
    how = f"written in {made:.0f} s" if made else "reused"
    print(f"copy: {args.partitions} partitions, {files} files ({how})")
    results: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for name in args.placements.split(","):
            size = warm(copy)
            out = data / f"out-{name}"
            started = time.strftime("%H:%M:%S", time.gmtime())
            res = run_job(
                copy,
                out,
                code=Path(args.code),
                spark_args=[],
                log=lambda line: None,
                driver_max_bytes=PLACEMENTS[name],
                job_args=["--as-of", AS_OF],  # the copy holds no broker-written time (no markers)
                timeout_s=args.timeout,
            )
            got = check(out, args.partitions)
            placed = next((line for _t, line in res["progress"] if "decoding" in line), "")
            row = {
                "placement": name,
                "repeat": rep,
                "started_utc": started,
                "bytes": size,
                "wall_s": round(res["wall_s"], 2),
                "cpu_s": {k: round(v, 2) for k, v in res["cpu_s"].items()},
                "peak_rss_mib": res["peak_rss_mib"],
                "load_1min_before_after": res["load_1min_before_after"],
                "placed": placed,
                **got,
            }
            results.append(row)
            print(json.dumps(row))
    (data / "results").mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime())
    (data / "results" / f"many-partitions-{args.partitions}-{stamp}.json").write_text(json.dumps(results, indent=1))
    return 0 if all(r["every_partition"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
