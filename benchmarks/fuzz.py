#!/usr/bin/env python
"""Fuzz the decoders with >= 100,000 mutated writer-made inputs: the full run.

The corpus, mutators and invariants are those of ``tests/kafka/test_fuzz.py`` (``tests.kafka.fuzzing``):
data segments, ``__transaction_state`` segments and producer snapshots written by
``txnlog.brokerlog`` (plus re-framed compressed copies), mutated by bit flips, truncations, spliced
batches, length and record-count lies, decompression bombs, zero-length and non-Kafka files; each
decoded with tracemalloc on and checked: no exception but DecodeError, memory bounded by the input
and the decompression limit, damage quarantined, intact batches decoded as in the clean decode, a
sample cross-checked with kafka-python.

Seeded: input ``i`` of kind ``k`` is reproduced alone from ``(seed, k, i)``
(``tests.kafka.fuzzing.mutants``). Prints counts per mutation kind, quarantine counts per reason,
exceptions (must be 0), violations (must be 0) and the time; writes them as JSON to
``benchmarks/data/results/fuzz-<seed>.json``. Exit code 1 on any exception or violation.

    python benchmarks/fuzz.py                         # 34,000 segments + 34,000 __transaction_state + 34,000 snapshots
    python benchmarks/fuzz.py --per-kind 2000         # a smoke check (~1 min)
    python benchmarks/fuzz.py --seed 7 --per-kind 100000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import DEFAULT_DATA, code_version, machine_info, write_json  # noqa: E402

from tests.kafka import fuzzing as F  # noqa: E402

KINDS = ("segment", "txn_state", "snapshot")
PROGRESS_EVERY = 2000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-kind", type=int, default=34_000, help="inputs per input kind (3 kinds)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--crosscheck-every", type=int, default=25, help="kafka-python cross-check every Nth input")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="txnlog-fuzz-") as work:
        seeds = F.corpus(Path(work), seed=args.seed)
        oracle = F.Oracle(seeds, crosscheck_every=args.crosscheck_every)
        prepared = time.monotonic() - t0
        print(
            f"corpus: {len(seeds)} seeds "
            + ", ".join(f"{k} {sum(1 for s in seeds if s.kind == k)}" for k in KINDS)
            + f"; written, decoded clean and compiled in {prepared:.1f} s",
            flush=True,
        )
        seconds: dict[str, float] = {}
        for kind in KINDS:
            t = time.monotonic()
            for start in range(0, args.per_kind, PROGRESS_EVERY):
                F.run(seeds, {kind: min(PROGRESS_EVERY, args.per_kind - start)}, args.seed, oracle, first=start)
                done = min(start + PROGRESS_EVERY, args.per_kind)
                print(
                    f"{kind}: {done} inputs, {time.monotonic() - t:.0f} s, "
                    f"{len(oracle.tally.exceptions)} exceptions, {len(oracle.tally.violations)} violations",
                    flush=True,
                )
            seconds[kind] = time.monotonic() - t
    tally = oracle.tally
    total = time.monotonic() - t0
    report = {
        "seed": args.seed,
        "per_kind": args.per_kind,
        "inputs": sum(tally.inputs.values()),
        "seconds": {
            "total": round(total, 1),
            "prepare": round(prepared, 1),
            **{k: round(v, 1) for k, v in seconds.items()},
        },
        "by_kind": {
            kind: {
                m: {"inputs": tally.inputs[(kind, m)], "quarantined": tally.quarantined[(kind, m)]}
                for m in (F.SNAPSHOT_KINDS if kind == "snapshot" else F.SEGMENT_KINDS)
            }
            for kind in KINDS
        },
        "quarantine_entries": dict(tally.entries.most_common()),
        "snapshot_decode_errors": dict(tally.decode_errors.most_common()),
        "exceptions": tally.exceptions,
        "violations": tally.violations,
        "max_memory_ratio": round(tally.max_memory_ratio, 3),
        "crosschecked": tally.crosschecked,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "limit_bytes": F.LIMIT,
        "code": code_version(ROOT),
        "machine": machine_info(),
    }
    print_report(report)
    write_json(args.data / "results" / f"fuzz-{args.seed}.json", report)
    return 1 if tally.exceptions or tally.violations else 0


def print_report(r: dict) -> None:  # type: ignore[type-arg]
    print()
    print(f"{r['inputs']:,} inputs, seed {r['seed']}, {r['seconds']['total']} s ({r['seconds']})")
    for kind, rows in r["by_kind"].items():
        print(f"\n{kind}: mutation kind, inputs, inputs with quarantine rows (or a DecodeError)")
        for m, row in rows.items():
            print(f"  {m:22s} {row['inputs']:7,d} {row['quarantined']:7,d}")
    print("\nquarantine entries by reason:", json.dumps(r["quarantine_entries"]))
    print("snapshot DecodeErrors by reason:", json.dumps(r["snapshot_decode_errors"]))
    print(f"exceptions: {len(r['exceptions'])}, violations: {len(r['violations'])}")
    for v in (r["exceptions"] + r["violations"])[:20]:
        print("  ", v)
    print(
        f"max tracemalloc peak / bound: {r['max_memory_ratio']}; kafka-python cross-checks: {r['crosschecked']}; "
        f"peak RSS {r['peak_rss_mib']} MiB"
    )
    print("tallies:", dict(Counter({k: sum(v["inputs"] for v in rows.values()) for k, rows in r["by_kind"].items()})))


if __name__ == "__main__":
    sys.exit(main())
