#!/usr/bin/env python
"""What ``__consumer_offsets`` costs the job: a benchmark mix of benchmarks/end_to_end.py run with and without a
``__consumer_offsets`` of many groups beside it, interleaved in one run; and where that time goes (decode, replay,
the blocked rule) measured on its own.

The offsets partitions are written once by txnlog.brokerlog.consumer_offsets.OffsetsPartitionWriter (as the group
coordinator writes them): ``--groups`` groups spread over ``--coordinator-partitions`` partitions, each committing
``--partitions`` of the mix's data partitions per batch, ``--rounds`` times (later rounds replace the earlier
offsets, as a consumer's periodic commits do). "with" is a copy of the mix's log dir made of symbolic links to its
partitions plus the offsets partitions; "without" is the mix itself. Each measurement runs the whole job in this
process (``txnlog.pipeline.run.run``, the placement the input chooses); the order rotates per repeat and every
input is read once before the first measurement (page cache warm). The machine may be shared: the answer is
ratios within the run, and the job's CPU seconds beside its wall seconds.

    python benchmarks/consumer_offsets_cost.py                        # bulk and dense at 0.25 GiB, 10k x 100
    python benchmarks/consumer_offsets_cost.py --mix dense --size 0.0625 --groups 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.end_to_end import warm_page_cache  # noqa: E402
from benchmarks.integrity_cost import mix_dataset  # noqa: E402
from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter  # noqa: E402
from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value  # noqa: E402
from txnlog.model.config import load_config  # noqa: E402
from txnlog.pipeline import build  # noqa: E402
from txnlog.pipeline.run import run  # noqa: E402


def data_partitions(root: Path) -> list[tuple[str, int]]:
    """The mix's data partitions (topic, partition), internal topics left out."""
    out = []
    for d in sorted(p for p in root.glob("*/*") if p.is_dir() and not p.name.startswith("__")):
        topic, _, partition = d.name.rpartition("-")
        if partition.isdigit():
            out.append((topic, int(partition)))
    return sorted(set(out))


def write_offsets(
    dest: Path, tps: list[tuple[str, int]], *, groups: int, partitions: int, rounds: int, coordinators: int
) -> int:
    """``__consumer_offsets-<n>`` directories under ``dest/broker-1``, written once per parameters: every group
    commits ``partitions`` of ``tps`` in one batch per round. Returns the records written."""
    params = {"groups": groups, "partitions": partitions, "rounds": rounds, "coordinators": coordinators, "tps": tps}
    stamp = dest / "offsets-params.json"
    if stamp.exists() and json.loads(stamp.read_text()) == json.loads(json.dumps(params)):
        return groups * partitions * rounds
    if dest.exists():
        shutil.rmtree(dest)
    t = time.perf_counter()
    writers = [OffsetsPartitionWriter(dest / "broker-1", n) for n in range(coordinators)]
    for r in range(rounds):
        for g in range(groups):
            w = writers[g % coordinators]
            chosen = [tps[(g + i) % len(tps)] for i in range(partitions)]
            w.append(
                [
                    (offset_commit_key(f"group-{g}", topic, p), offset_commit_value(1000 * r + g % 97, commit_timestamp=w.now))
                    for topic, p in chosen
                ]
            )  # fmt: skip
    for w in writers:
        w.close()
    stamp.write_text(json.dumps(params))
    print(f"wrote {groups * partitions * rounds:,} offset commits in {time.perf_counter() - t:.1f} s", flush=True)
    return groups * partitions * rounds


def with_offsets(mix_root: Path, offsets: Path, dest: Path) -> Path:
    """A log dir holding the mix's partitions (symbolic links) and the offsets partitions."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "broker-1").mkdir(parents=True)
    for entry in (mix_root / "broker-1").iterdir():
        (dest / "broker-1" / entry.name).symlink_to(entry.resolve())
    for entry in (offsets / "broker-1").iterdir():
        (dest / "broker-1" / entry.name).symlink_to(entry.resolve())
    return dest


def once(root: Path, out: Path, timed: dict[str, float]) -> tuple[float, float]:
    """(wall, CPU) seconds of one job; the blocked step's own seconds in ``timed`` (with the read of the
    ``__consumer_offsets`` partitions, which the step asks for: txnlog.engine.decoded)."""
    real = build.with_blocked

    def step(tables, offsets):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return real(tables, offsets)
        finally:
            timed["blocked"] = time.perf_counter() - t

    build.with_blocked = step
    try:
        config = load_config(None, {"logs": [str(root)], "output": str(out), "cluster": "bench", "progress": False})
        t, cpu = time.perf_counter(), time.process_time()
        run(config, progress=lambda _m: None)
        return time.perf_counter() - t, time.process_time() - cpu
    finally:
        build.with_blocked = real


def steps(offsets: Path) -> dict[str, float]:
    """Seconds of the read (each segment's records decoded in one pass, as the job's source does) and the replay
    of the offsets partitions, in this process."""
    from txnlog.engine.segments import log_bytes
    from txnlog.kafka.consumer_offsets import decode_segment
    from txnlog.rules.consumer_offsets import replay_offsets

    took = {"read": 0.0, "replay": 0.0}
    for part in sorted((offsets / "broker-1").glob("__consumer_offsets-*")):
        for seg in sorted(part.glob("*.log")):
            t = time.perf_counter()
            with log_bytes(str(seg)) as (buf, _):
                decoded, markers, _bad = decode_segment(buf, file=str(seg))
            took["read"] += time.perf_counter() - t
            t = time.perf_counter()
            replay_offsets(decoded, markers)
            took["replay"] += time.perf_counter() - t
    return took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mix", nargs="+", default=["bulk", "dense"])
    p.add_argument("--size", type=float, default=0.25, help="GiB of the mix")
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=100, help="partitions each group commits")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--coordinator-partitions", type=int, default=50, help="offsets.topic.num.partitions")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "txnlog-integrity-bench")
    p.add_argument("--offsets-dir", type=Path, default=Path(tempfile.gettempdir()) / "txnlog-offsets-bench")
    args = p.parse_args(argv)
    for mix in args.mix:
        ds = mix_dataset(mix, args.size, args.data_dir)
        offsets = args.offsets_dir / f"{mix}-{args.size:g}GiB"
        n = write_offsets(offsets, data_partitions(ds.root), groups=args.groups, partitions=args.partitions,
                          rounds=args.rounds, coordinators=args.coordinator_partitions)  # fmt: skip
        size = sum(f.stat().st_size for f in offsets.rglob("*.log"))
        print(f"{mix} {args.size:g} GiB + __consumer_offsets: {n:,} commits, {size / 2**20:.0f} MiB", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            both = with_offsets(ds.root, offsets, Path(tmp) / "with")
            roots = {False: ds.root, True: both}
            for root in roots.values():
                warm_page_cache(root)
            once(both, Path(tmp) / "warm", {})  # imports, numba, first-run costs
            wall: dict[bool, list[float]] = {False: [], True: []}
            cpu: dict[bool, list[float]] = {False: [], True: []}
            ratios: list[float] = []
            cpu_ratios: list[float] = []
            blocked: list[float] = []
            for r in range(args.repeat):
                pair: dict[bool, float] = {}
                cpair: dict[bool, float] = {}
                for a in (True, False) if r % 2 == 0 else (False, True):
                    timed: dict[str, float] = {}
                    w, c = once(roots[a], Path(tmp) / f"o-{r}-{a}", timed)
                    if a:
                        blocked.append(timed["blocked"])
                    wall[a].append(w)
                    cpu[a].append(c)
                    pair[a] = w
                    cpair[a] = c
                    print(f"{mix} {args.size:g} GiB offsets={'with' if a else 'without'}: {w:.2f} s, CPU {c:.2f} s",
                          flush=True)  # fmt: skip
                ratios.append(pair[True] / pair[False])
                cpu_ratios.append(cpair[True] / cpair[False])
        parts = steps(offsets)
        med = {k: statistics.median(v) for k, v in wall.items()}
        cmed = {k: statistics.median(v) for k, v in cpu.items()}
        print(f"{mix}: wall median with {med[True]:.2f} s, without {med[False]:.2f} s "
              f"({med[True] / med[False] - 1:+.1%}); paired ratios "
              f"{', '.join(f'{x:.3f}' for x in ratios)} (median {statistics.median(ratios) - 1:+.1%}); "
              f"CPU with {cmed[True]:.2f} s, without {cmed[False]:.2f} s ({cmed[True] / cmed[False] - 1:+.1%}); "
              f"paired CPU ratios {', '.join(f'{x:.3f}' for x in cpu_ratios)} "
              f"(median {statistics.median(cpu_ratios) - 1:+.1%})")  # fmt: skip
        print(f"{mix}: the offsets alone, one thread: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
              + f"; the blocked step in the job (median) {statistics.median(blocked):.2f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
