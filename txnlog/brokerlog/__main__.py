"""``python -m txnlog.brokerlog``: write a simulated cluster's broker log dirs.

Examples::

    python -m txnlog.brokerlog --out /tmp/sample --scenario sample
    python -m txnlog.brokerlog --out /tmp/bench --scenario bulk --size 1GiB --batch-bytes 1024
    python -m txnlog.brokerlog --list
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from txnlog.brokerlog.scenarios import SCENARIOS, write_scenario

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``1GiB``, ``512MiB``, ``100MB``, ``64k``, ``1048576`` → bytes (K/M/G/T alone are binary)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1GiB, 500MB, 64KiB)")
    number, unit, suffix = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
    power = "kmgt".index(unit) + 1 if unit else 0
    base = 1000 if suffix == "b" and unit else 1024
    return int(number * base**power)


def _parser() -> argparse.ArgumentParser:
    def first_paragraph(doc: str | None) -> str:
        text = " ".join((doc or "").strip().split("\n\n")[0].split()).replace("``", "")
        return text if len(text) <= 110 else text[:107] + "..."

    described = "\n".join(f"  {name:30} {first_paragraph(fn.__doc__)}" for name, fn in SCENARIOS.items())
    p = argparse.ArgumentParser(
        prog="python -m txnlog.brokerlog",
        description=(
            "Write realistic Kafka broker log dirs (segments, indexes, producer snapshots, "
            "__transaction_state) from a deterministic simulated cluster, plus the ground truth "
            "(ground-truth.json): which transactions are open, late or hanging and why."
        ),
        epilog=(
            "Output layout: <out>/broker-<id>/<topic>-<partition>/... (pass <out> to the job's --logs).\n"
            "as_of: the job's default 'now' is the newest broker-written timestamp in the input (markers,\n"
            "__transaction_state, LogAppendTime); the ground truth uses\n"
            "the same value, printed below.\n\nscenarios:\n" + described
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="output directory (must be empty unless --force)")
    p.add_argument("--scenario", default="sample", help="scenario name (default: sample); see --list")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed → identical bytes (default 0)")
    p.add_argument("--size", type=parse_size, default=parse_size("1GiB"), help="bulk: total bytes (default 1GiB)")
    p.add_argument(
        "--batch-bytes", type=parse_size, default=1024, help="bulk: size of the big partitions' batches (default 1024)"
    )
    p.add_argument(
        "--partitions", type=int, default=64, help="bulk: number of small partitions (~150-byte batches; default 64)"
    )
    p.add_argument(
        "--segment-bytes",
        type=parse_size,
        default=parse_size("256MiB"),
        help="bulk: segment size of the big partitions (default 256MiB)",
    )
    p.add_argument("--force", action="store_true", help="delete --out first if it is not empty")
    p.add_argument(
        "--ground-truth", metavar="FILE", help="where to write the ground truth JSON (default <out>/ground-truth.json)"
    )
    p.add_argument("--no-ground-truth", action="store_true", help="do not write the ground truth JSON")
    p.add_argument("--json", action="store_true", help="print the ground truth JSON instead of the summary")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for name in SCENARIOS:
            print(name)
        return 0
    if not args.out:
        print("error: --out DIR is required (where to write the broker log dirs)", file=sys.stderr)
        return 2
    if args.scenario not in SCENARIOS:
        print(f"error: unknown --scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    kwargs: dict[str, Any] = {"overwrite": args.force}
    if args.scenario == "bulk":
        kwargs.update(
            total_bytes=args.size,
            batch_bytes=args.batch_bytes,
            partitions=args.partitions,
            segment_bytes=args.segment_bytes,
        )
    try:
        result = write_scenario(args.scenario, args.out, args.seed, **kwargs)
    except FileExistsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.no_ground_truth:
        result.write_json(args.ground_truth or f"{args.out}/ground-truth.json")
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, default=str))
    else:
        print(result.summary())
        if args.scenario == "bulk" and result.elapsed_s > 0:
            print(f"  write speed: {result.bytes_written / result.elapsed_s / 1e6:.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
