"""The decode's cost per file on a log dir of many small segments, in one thread, without the rest of the job:
every ``.log`` of the small partitions (``txnlog.brokerlog.small_segments.small_segments``) below a size, decoded into a
task's merge one file at a time (``summarize_segment``, as a task did before) and together
(``SegmentGroup``: ``summarize_segments`` of up to ``SMALL_BATCH_BYTES``), alternately, each repeat timed in the
thread's CPU seconds (``time.thread_time``: on a loaded machine the wall time says little). Also the raw read of
the same files, the producer snapshots of the same partitions into a merge as a task reads them
(``summarize_snapshot``), and, for the cost per byte, the segments of the same size or more (the hot partition's)
decoded one at a time into a merge.

    python benchmarks/small_files.py DIR [--repeats 5] [--max-bytes 4194304] [--ways together,hot]

Prints per repeat the CPU seconds of each way and per file, and the cost per file of ``together`` beyond the
per-byte cost of ``hot`` (both in the same repeat); the rows of ``one_by_one`` and ``together`` are compared once
when both run (equal ``segment`` rows, producer rows and transactions). Run it with ``PYTHONPATH`` set to another
checkout to time that checkout's code the same way (an A/B in turns, benchmarks/RESULTS.md §2)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

from txnlog.engine.segment_group import summarize_snapshot
from txnlog.engine.segments import SegmentRows, summarize_segment

try:
    from txnlog.engine.segment_group import SegmentGroup
except ImportError:  # a checkout from before the group had its own module (the A/B against it)
    from txnlog.engine.segments import SegmentGroup  # type: ignore[attr-defined,no-redef]
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources.logdirs import LogFile, discover


def small_logs(root: str, max_bytes: int, large: bool = False) -> list[LogFile]:
    """The data segments below ``max_bytes`` (``large``: of ``max_bytes`` or more) of the log dirs under ``root``,
    in a task's order."""
    inventory = discover([root])
    files = [f for f in inventory.segments if (f.size >= max_bytes) == large and not f.topic.startswith("__")]
    return sorted(files, key=lambda f: (f.broker, f.topic, f.partition, f.base_offset))


def small_snapshots(root: str, logs: list[LogFile]) -> list[LogFile]:
    """The producer snapshots of the partitions of ``logs``, in a task's order."""
    partitions = {(f.broker, f.topic, f.partition) for f in logs}
    files = [f for f in discover([root]).snapshots if (f.broker, f.topic, f.partition) in partitions]
    return sorted(files, key=lambda f: (f.broker, f.topic, f.partition, f.base_offset))


def one_by_one(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    for f in files:
        yield from summarize_segment(f, True, rows, merge)
    yield from rows.batches()
    yield from merge.batches({}, SEGMENT_SUMMARY_SCHEMA)


def together(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    group = SegmentGroup(True, None)
    for f in files:
        yield from group.add(f, rows, merge)
    yield from group.decode(rows, merge)
    yield from rows.batches()
    yield from merge.batches({}, SEGMENT_SUMMARY_SCHEMA)


def decode(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    """``together`` less the merge's transactions at the end (per transaction, not per file: the same work for
    any layout of the same batches into files)."""
    merge, rows = PartitionTransactions(), SegmentRows()
    group = SegmentGroup(True, None)
    for f in files:
        yield from group.add(f, rows, merge)
    yield from group.decode(rows, merge)
    yield from rows.batches()


def snapshots(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    for f in files:
        yield from summarize_snapshot(f, merge, rows)
    yield from rows.batches()


def snapshots_together(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    group = SegmentGroup(True, None)
    for f in files:
        yield from group.add(f, rows, merge)
    yield from group.decode(rows, merge)
    yield from rows.batches()


def coalesce(root: str, out: str, max_bytes: int) -> None:
    """A copy of ``root``'s small segments with each partition's in one file: the same bytes, batches and
    transactions in fewer files (the cost per file is the difference over the difference in files)."""
    files = small_logs(root, max_bytes)
    by_partition: dict[str, list[LogFile]] = {}
    for f in files:
        by_partition.setdefault(str(Path(f.path).parent), []).append(f)
    for directory, logs in by_partition.items():
        target = Path(out) / Path(directory).relative_to(root)
        target.mkdir(parents=True, exist_ok=True)
        with open(target / Path(logs[0].path).name, "wb") as w:
            for f in logs:
                w.write(Path(f.path).read_bytes())
    print(f"{len(files)} files -> {len(by_partition)} in {out}")


def raw(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    for f in files:
        Path(f.path).read_bytes()
    return iter(())


def timed(way: Callable[[list[LogFile]], Iterator[pa.RecordBatch]], files: list[LogFile]) -> tuple[float, pa.Table]:
    start = time.thread_time()
    batches = list(way(files))
    spent = time.thread_time() - start
    return spent, pa.Table.from_batches(batches, SEGMENT_SUMMARY_SCHEMA)


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in ("kind", "file", "producer_id", "first_offset")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-bytes", type=int, default=4 << 20)
    parser.add_argument("--ways", default="one_by_one,together,raw,snapshots,snapshots_together,hot")
    parser.add_argument("--coalesce", metavar="OUT", help="write the copy of coalesce() to OUT and stop")
    args = parser.parse_args()
    if args.coalesce:
        coalesce(args.root, args.coalesce, args.max_bytes)
        return
    files = small_logs(args.root, args.max_bytes)
    large = small_logs(args.root, args.max_bytes, large=True)
    snaps = small_snapshots(args.root, files)
    gib = sum(f.size for f in files) / (1 << 30)
    large_gib = sum(f.size for f in large) / (1 << 30)
    print(f"{len(files)} files, {gib:.3f} GiB; {len(snaps)} snapshots; {len(large)} large files, {large_gib:.3f} GiB")
    ways = {
        "one_by_one": one_by_one,
        "together": together,
        "decode": decode,
        "raw": raw,
        "snapshots": snapshots,
        "snapshots_together": snapshots_together,
        "hot": one_by_one,
    }
    inputs = {"snapshots": snaps, "snapshots_together": snaps, "hot": large}
    chosen = args.ways.split(",")
    for name in chosen:  # warm: numba's cache, imports
        timed(ways[name], inputs.get(name, files)[:50])
    if "one_by_one" in chosen and "together" in chosen:
        _, a = timed(one_by_one, files)
        _, b = timed(together, files)
        assert canonical(a).equals(canonical(b)), "the two ways' rows differ"
        print("rows equal:", a.num_rows)
    if "snapshots" in chosen and "snapshots_together" in chosen:
        _, a = timed(snapshots, snaps)
        _, b = timed(snapshots_together, snaps)
        assert canonical(a).equals(canonical(b)), "the two ways' snapshot rows differ"
        print("snapshot rows equal:", a.num_rows)
    for r in range(args.repeats):
        spent = {}
        for name in chosen:
            given = inputs.get(name, files)
            spent[name], _ = timed(ways[name], given)
            per = (
                f"{spent[name] / large_gib:6.2f} s/GiB"
                if name == "hot"
                else f"{1000 * spent[name] / len(given):6.3f} ms/file"
            )
            print(f"{r} {name:18s} cpu {spent[name]:6.2f} s  {per}", flush=True)
        if "hot" in spent and "together" in spent:
            excess = spent["together"] - spent["hot"] / large_gib * gib
            print(f"{r} together beyond hot's per-byte cost: {1000 * excess / len(files):6.3f} ms/file", flush=True)


if __name__ == "__main__":
    main()
