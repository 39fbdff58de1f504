#!/usr/bin/env python
"""kafka-dump-log.sh input: the fixed cost of each dump file, in the driver placement's read.

Two inputs, written once under ``--data-dir`` and reused:

* ``scenario``: every file of a writer scenario (``--scenario``, default ``messy_incident``: 3 brokers, 50
  ``__consumer_offsets`` and 50 ``__transaction_state`` partitions each, most segments empty) dumped as an operator
  dumps them (``txnlog.kafka.dump_log_render.render_dump``, 3.x form: data segments and snapshots with
  ``--deep-iteration``, ``__transaction_state`` with ``--transaction-log-decoder``; what Kafka's own tool prints,
  tests/oracle/test_dump_log.py), one ``.txt`` per file, one directory per broker;
* ``tiny``: ``--tiny`` dump files of one empty segment each (the header lines only), the shape of the many
  quiet partitions of a real cluster.

Each run is a fresh Python process timing ``read_dump_logs_here`` (wall and process CPU) on ``--threads`` threads;
the checkouts (this one and each ``--code DIR``) interleaved in every repeat, so their ratio holds on a loaded
machine. Every checkout must give the same rows (checked).

    python benchmarks/dump_files.py --repeat 3 --code /tmp/before
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, median, run_python  # noqa: E402

DEFAULT_DATA = ROOT / "benchmarks" / "data"


def build_scenario(data_dir: Path, scenario: str) -> Path:
    """The scenario's log files and their dumps (reused once written)."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    root = data_dir.resolve() / f"dump-files-{scenario}"
    out = root / "dumps"
    if (root / "done").exists():
        return out
    write_scenario(scenario, root / "logs", seed=0, overwrite=True)
    inv = discover([str(root / "logs")])
    txn = set(inv.txn_state_segments)
    for f in [*inv.segments, *inv.snapshots, *inv.txn_state_segments]:
        rel = Path(f.path).relative_to(root / "logs")
        dest = out / rel.parts[0] / ("-".join(rel.parts[1:]) + ".txt")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shown = "/var/lib/kafka/data/" + "/".join(rel.parts[1:])
        dest.write_text(
            render_dump(
                f.path, "3.x", deep_iteration=f not in txn, transaction_log_decoder=f in txn, dumping_path=shown
            )
        )
    (root / "done").write_text("")
    return out


def build_tiny(data_dir: Path, n: int) -> Path:
    """``n`` dumps of an empty segment (what kafka-dump-log.sh prints for one: its two header lines)."""
    out = data_dir.resolve() / f"dump-files-tiny-{n}" / "dumps"
    if out.exists() and sum(1 for _ in out.rglob("*.txt")) == n:
        return out
    for i in range(n):
        broker, partition = f"broker-{i % 3 + 1}", i // 3
        dest = out / broker / f"quiet-{partition}-00000000000000000000.log.txt"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(
            f"Dumping /var/lib/kafka/data/quiet-{partition}/00000000000000000000.log\nLog starting offset: 0\n"
        )
    return out


def child(dumps: str, threads: int) -> dict[str, Any]:
    """One timed read (what ``--child`` prints as JSON)."""
    from txnlog.engine.spark.dump_log import read_dump_logs_here
    from txnlog.sources.dump_log.lines import list_dump_inputs

    wall, cpu = time.perf_counter(), time.process_time()
    summary, records = read_dump_logs_here(list_dump_inputs([dumps]), threads)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = sorted(map(repr, summary.to_pylist())) + sorted(map(repr, records.to_pylist()))
    import hashlib

    digest = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    return {"seconds": wall, "cpu": cpu, "rows": [summary.num_rows, records.num_rows], "digest": digest}


def _child_run(code: Path, dumps: Path, threads: int) -> dict[str, Any]:
    args = [str(Path(__file__).resolve()), "--child", str(dumps), "--threads", str(threads)]
    return run_python(args, env={"PYTHONPATH": str(code)}, cwd=code)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="messy_incident")
    p.add_argument("--tiny", type=int, default=2000, help="empty-segment dump files of the tiny input (0: none)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--code", type=Path, action="append", default=[], help="another checkout to measure as well")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.threads)))
        return
    inputs = {"scenario": build_scenario(args.data_dir, args.scenario)}
    if args.tiny:
        inputs["tiny"] = build_tiny(args.data_dir, args.tiny)
    codes = [ROOT, *[c.resolve() for c in args.code]]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.repeat):
        for name, dumps in inputs.items():
            for code in codes:
                out = _child_run(code, dumps, args.threads)
                runs.setdefault((name, str(code)), []).append(out)
                print(
                    f"repeat {r + 1} {name} {code}: {out['seconds']:.2f} s wall, {out['cpu']:.2f} s CPU, {out['rows']}"
                )
    for name, dumps in inputs.items():
        files = sum(1 for _ in dumps.rglob("*.txt"))
        digests = {o["digest"] for c in codes for o in runs[(name, str(c))]}
        print(f"{name}: {files} files, same rows in every run: {len(digests) == 1}")
        for code in codes:
            rs = runs[(name, str(code))]
            w, c = median([o["seconds"] for o in rs]), median([o["cpu"] for o in rs])
            print(
                f"  {code}: median {w:.2f} s wall ({w / files * 1e3:.2f} ms/file), {c:.2f} s CPU, CPU/wall {c / w:.2f}"
            )


if __name__ == "__main__":
    main()
