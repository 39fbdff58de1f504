#!/usr/bin/env python
"""A measured sketch of the fix proposed in RESULTS.md: walk and read the headers in ONE compiled pass.

Historical: ``scan_segment`` now does this itself (``record_batch._walk`` with its tight loop, and
reused output blocks), so this script compares that against the sketch it came from. The text below
describes ``scan_segment`` as it was at commit 4517b8f.

``scan_segment`` walked the chain of batches once (``_walk``: positions only), then read every header
field in a second pass (``_extract_headers``), then derived 10 more columns with numpy passes
(``_header_columns``). On 1 KiB batches the second pass misses the cache again for every header; on
150-byte batches the ~15 column passes and the extra array traffic cost as much as the walk itself.

``fused_scan`` below reads every field while the header is in cache, derives the flags in the same
loop, and falls back to ``scan_segment`` (the complete, damage-tolerant walk) as soon as anything is
not a clean run of v2 batches -- so its output is identical (checked here, column by column). It is
a benchmark-only prototype: not product code, and not used by txnlog.

    python benchmarks/prototype_fused_walk.py                  # on the decode data sets (1 GiB)
    python benchmarks/prototype_fused_walk.py --size 64MiB
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from _common import DEFAULT_DATA, fmt_size, median, parse_size  # noqa: E402
from txnlog.kafka.binary import be_i16, be_i32, be_i64, be_u32  # noqa: E402
from txnlog.kafka.crc import crc32c_update  # noqa: E402
from txnlog.kafka.record_batch import (  # noqa: E402
    BATCH_COLUMNS,
    SegmentScan,
    _fill_control_columns,
    as_uint8,
    scan_segment,
)


@numba.njit(nogil=True, cache=False)
def _fused(buf, check_crc):  # type: ignore[no-untyped-def]
    n = buf.size
    cap = n // 61 + 1  # address space only: np.empty does not touch it
    position = np.empty(cap, np.int64)
    base_offset = np.empty(cap, np.int64)
    last_offset = np.empty(cap, np.int64)
    batch_length = np.empty(cap, np.int32)
    leader_epoch = np.empty(cap, np.int32)
    magic_col = np.empty(cap, np.int8)
    crc = np.empty(cap, np.uint32)
    compression = np.empty(cap, np.int8)
    timestamp_type = np.empty(cap, np.int8)
    is_transactional = np.empty(cap, np.bool_)
    is_control = np.empty(cap, np.bool_)
    has_delete_horizon = np.empty(cap, np.bool_)
    last_offset_delta = np.empty(cap, np.int32)
    base_timestamp = np.empty(cap, np.int64)
    max_timestamp = np.empty(cap, np.int64)
    producer_id = np.empty(cap, np.int64)
    producer_epoch = np.empty(cap, np.int16)
    base_sequence = np.empty(cap, np.int32)
    record_count = np.empty(cap, np.int32)
    nb = 0
    pos = 0
    while pos + 61 <= n:
        size = be_i32(buf, pos + 8)
        if buf[pos + 16] != 2 or size < 49 or size > n - pos - 12:
            break  # not a clean v2 batch: the caller falls back to the complete walk
        attributes = be_i16(buf, pos + 21)
        if attributes & 0xFF80 or (attributes & 7) > 4:
            break
        stored = be_u32(buf, pos + 17)
        if check_crc and crc32c_update(0, buf, pos + 21, pos + 12 + size) != stored:
            break
        b = be_i64(buf, pos)
        lod = be_i32(buf, pos + 23)
        position[nb] = pos
        base_offset[nb] = b
        last_offset[nb] = b + lod
        batch_length[nb] = size
        leader_epoch[nb] = be_i32(buf, pos + 12)
        magic_col[nb] = 2
        crc[nb] = stored
        compression[nb] = attributes & 7
        timestamp_type[nb] = 1 if attributes & 8 else 0
        is_transactional[nb] = (attributes & 16) != 0
        is_control[nb] = (attributes & 32) != 0
        has_delete_horizon[nb] = (attributes & 64) != 0
        last_offset_delta[nb] = lod
        base_timestamp[nb] = be_i64(buf, pos + 27)
        max_timestamp[nb] = be_i64(buf, pos + 35)
        producer_id[nb] = be_i64(buf, pos + 43)
        producer_epoch[nb] = be_i16(buf, pos + 51)
        base_sequence[nb] = be_i32(buf, pos + 53)
        record_count[nb] = be_i32(buf, pos + 57)
        nb += 1
        pos += 12 + size
    return (pos, nb, position, base_offset, last_offset, batch_length, leader_epoch, magic_col, crc, compression,
            timestamp_type, is_transactional, is_control, has_delete_horizon, last_offset_delta, base_timestamp, max_timestamp,
            producer_id, producer_epoch, base_sequence, record_count)


_FUSED_NAMES = ("position", "base_offset", "last_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                "compression", "timestamp_type", "is_transactional", "is_control", "has_delete_horizon", "last_offset_delta",
                "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")


def fused_scan(buf, *, file: str = "", check_crc: bool = True) -> SegmentScan:
    arr = as_uint8(buf)
    out = _fused(arr, bool(check_crc))
    pos, nb = int(out[0]), int(out[1])
    if pos != arr.size:
        return scan_segment(buf, file=file, check_crc=check_crc)  # damage, legacy entries, padding, a cut tail
    cols = {name: col[:nb] for name, col in zip(_FUSED_NAMES, out[2:])}
    cols["crc_valid"] = np.ones(nb, np.bool_)
    # control columns: -1 / 0 everywhere, then parsed for the (few) control batches
    for name in ("control_key_version", "control_type", "control_value_version", "coordinator_epoch", "marker_timestamp"):
        cols[name] = np.full(nb, -1, BATCH_COLUMNS[name])
    cols["control_status"] = np.zeros(nb, np.int8)
    cols = {name: cols[name] for name in BATCH_COLUMNS}  # (has_delete_horizon: only in txnlog versions that have it)
    quarantine = _fill_control_columns(arr, cols, file)
    return SegmentScan(file=file, size=int(arr.size), batches=cols, quarantine=quarantine, crc_checked=bool(check_crc))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=parse_size("1GiB"))
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    for name in ("1k", "150b"):
        root = DEFAULT_DATA / f"decode-{name}-{fmt_size(args.size).replace(' ', '')}"
        if not root.exists():
            print(f"{root}: missing; run benchmarks/decode.py --size {fmt_size(args.size)} first", file=sys.stderr)
            return 2
        files = sorted(f for f in root.glob("*/*/*.log") if not f.parent.name.startswith("__"))
        bufs = [np.fromfile(f, dtype=np.uint8) for f in files]
        total = sum(b.size for b in bufs)
        # same output, column by column
        for b in bufs:
            a, f = scan_segment(b, check_crc=True), fused_scan(b, check_crc=True)
            assert a.quarantine == f.quarantine
            for col in BATCH_COLUMNS:
                assert np.array_equal(a.batches[col], f.batches[col]), col
        times: dict[str, list[float]] = {k: [] for k in ("scan_segment no CRC", "fused no CRC", "scan_segment CRC", "fused CRC", "raw read")}
        for _ in range(args.repeat):
            for label, fn, crc in (("scan_segment no CRC", scan_segment, False), ("fused no CRC", fused_scan, False),
                                   ("scan_segment CRC", scan_segment, True), ("fused CRC", fused_scan, True)):
                t = time.perf_counter()
                for b in bufs:
                    fn(b, check_crc=crc)
                times[label].append(time.perf_counter() - t)
            t = time.perf_counter()
            for f in files:
                a = np.fromfile(f, dtype=np.uint8)
                del a
            times["raw read"].append(time.perf_counter() - t)
        n = sum(scan_segment(b, check_crc=False).batch_count for b in bufs)
        print(f"{name}: {fmt_size(total)}, {n:,} batches (identical output checked)")
        for k, v in times.items():
            m = median(v)
            print(f"  {k:22s} {m:6.3f} s  {n / m / 1e6:6.2f} M headers/s  {total / m / 1e6:6.0f} MB/s  "
                  f"raw read / this {median(times['raw read']) / m:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
