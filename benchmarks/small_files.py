"""The decode's cost per file on a log dir of many small segments, in one thread, without the rest of the job:
every ``.log`` of the small partitions (``txnlog.brokerlog.dense.small_segments``) below a size, decoded into a
task's merge one file at a time (``summarize_segment``, as a task did before) and together
(``SegmentGroup``: ``summarize_segments`` of up to ``SMALL_BATCH_BYTES``), alternately, each repeat timed in the thread's CPU
seconds (``time.thread_time``: on a loaded machine the wall time says little). Also the raw read of the same files.

    python benchmarks/small_files.py DIR [--repeats 5] [--max-bytes 4194304]

Prints per repeat the CPU seconds of each way and per file; the rows of both ways are compared once (equal
``segment`` rows, producer rows and transactions)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

from txnlog.engine.segments import SegmentGroup, SegmentRows, summarize_segment
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources.logdirs import LogFile, discover


def small_logs(root: str, max_bytes: int) -> list[LogFile]:
    """The data segments below ``max_bytes`` of the log dirs under ``root``, in a task's order."""
    inventory = discover([root])
    files = [f for f in inventory.segments if f.size < max_bytes and not f.topic.startswith("__")]
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
    args = parser.parse_args()
    files = small_logs(args.root, args.max_bytes)
    gib = sum(f.size for f in files) / (1 << 30)
    print(f"{len(files)} files, {gib:.3f} GiB")
    _, a = timed(one_by_one, files[:50])  # warm: numba's cache, imports
    _, b = timed(together, files[:50])
    _, a = timed(one_by_one, files)
    _, b = timed(together, files)
    assert canonical(a).equals(canonical(b)), "the two ways' rows differ"
    print("rows equal:", a.num_rows)
    for r in range(args.repeats):
        for name, way in (("one_by_one", one_by_one), ("together", together), ("raw", raw)):
            spent, _ = timed(way, files)
            print(f"{r} {name:10s} cpu {spent:6.2f} s  {1000 * spent / len(files):6.3f} ms/file", flush=True)


if __name__ == "__main__":
    main()
