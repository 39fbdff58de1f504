#!/usr/bin/env python
"""Decode benchmark: txnlog's compiled batch-header walk vs a raw read vs kafka-python, on the same bytes.

Two data sets written by ``txnlog.brokerlog.scenarios.bulk`` (reused between runs, under
benchmarks/data/ by default):

* ``1k``   -- ~1 KiB batches (4 partitions, 256 MiB segments; LZ4/ZSTD/NONE/SNAPPY payloads);
* ``150b`` -- ~150-byte batches (4 partitions, 64 MiB segments, uncompressed).

Per data set, in the same process and interleaved (every repeat runs every mode, in a rotating order):

=================  =========================================================================
raw read           ``numpy.fromfile`` of each segment, one at a time (page cache: warm)
walk (no CRC)      ``scan_segment(buf, check_crc=False)`` over segments already in memory
walk (CRC)         the same with CRC-32C checked
walk, fresh mem    walk (no CRC) with the reusable output blocks dropped before each segment
                   (every scan faults in fresh, kernel-zeroed memory for its columns)
walk file (CRC)    ``scan_segment_file(path)``: mmap + walk, as a user of the library calls it
walk file, 2 thr   the same over 2 threads, one segment per thread at a time (the walk releases
                   the GIL; the box has 2 cores)
executor path      what a Spark task does per segment: ``scan_log_file`` (mmap + ``scan_segment``,
                   CRC) + ``segment_fragments`` (txnlog.engine.segments.summarize_segment minus Arrow)
kafka-python       ``MemoryRecords`` -> ``DefaultRecordBatch`` over the same in-memory segments,
                   reading every header field (and ``validate_crc()`` in the CRC variant)
=================  =========================================================================

Numba JIT is measured apart: a child process with an empty ``NUMBA_CACHE_DIR`` (compile from
scratch), a second child reusing that cache (what a Spark Python worker pays), and the first call
in this process (txnlog's own on-disk cache). Steady state is the median over ``--repeat`` passes.
Peak RSS comes from one child process per mode that streams the files once (ru_maxrss).

    python benchmarks/decode.py                 # 1 GiB per data set
    python benchmarks/decode.py --quick         # 64 MiB per data set, a smoke check
    python benchmarks/decode.py --size 2GiB --repeat 7
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    DEFAULT_DATA,
    MiB,
    code_version,
    dataset,
    fmt_size,
    machine_info,
    maybe_reexec_in_snapshot,
    median,
    parse_size,
    peak_rss_mib,
    require_fast_kafka_python_crc,
    rss_mib,
    run_python,
    write_json,
)

HERE = Path(__file__).resolve()

DATASETS = {
    # name: bulk() parameters besides total_bytes
    "1k": {"batch_bytes": 1024, "partitions": 0, "segment_bytes": 256 * MiB},
    # small_fraction ~1: (almost) every byte in the uncompressed 150-byte batches of the 4 "small" partitions
    "150b": {
        "batch_bytes": 1024,
        "partitions": 4,
        "small_batch_bytes": 150,
        "small_fraction": 0.999,
        "segment_bytes": 256 * MiB,
    },
}


# --- the walkers ------------------------------------------------------------------------------


def raw_read(files: list[Path]) -> int:
    """numpy.fromfile of each file, one at a time (each array dropped before the next read)."""
    total = 0
    for f in files:
        a = np.fromfile(f, dtype=np.uint8)
        total += a.size
        del a
    return total


def txnlog_walk(buffers: list[np.ndarray], check_crc: bool) -> int:
    from txnlog.kafka.record_batch import scan_segment

    n = 0
    for b in buffers:
        n += scan_segment(b, check_crc=check_crc).batch_count
    return n


def txnlog_walk_files(files: list[Path], check_crc: bool = True, threads: int = 1) -> int:
    from txnlog.kafka.record_batch import scan_segment_file

    def one(f: Path) -> int:
        return scan_segment_file(f, check_crc=check_crc).batch_count

    if threads == 1:
        return sum(one(f) for f in files)
    # largest first, so that the two threads finish together
    order = sorted(files, key=lambda f: -f.stat().st_size)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, order))


def txnlog_walk_fresh_memory(buffers: list[np.ndarray], check_crc: bool) -> int:
    """``txnlog_walk`` with the reusable output blocks dropped before every segment.

    Every scan then writes its columns into memory the kernel has just handed out (and zeroed), as
    the first scan in a process does; the other modes reuse the blocks of earlier scans.
    """
    from txnlog.kafka import record_batch

    n = 0
    for b in buffers:
        record_batch._OUTPUT_BLOCKS.clear()
        n += record_batch.scan_segment(b, check_crc=check_crc).batch_count
    return n


def executor_path(files: list[Path], check_crc: bool = True) -> int:
    """Per segment, what summarize_segment does before building Arrow rows."""
    from txnlog.broker.reconstruct import segment_fragments
    from txnlog.engine.segments import scan_log_file

    n = 0
    for f in files:
        scan = scan_log_file(str(f), check_crc)
        segment_fragments(scan.batches)
        n += scan.batch_count
    return n


def kafka_python_walk(buffers: list[Any], check_crc: bool, limit_bytes: int | None = None) -> tuple[int, int, int]:
    """kafka-python's own iteration over v2 batches, reading every header field.

    Returns (batches, bytes walked, sum of base offsets mod 2**64 -- to check both walkers agree).
    Stops after ``limit_bytes`` (whole segments) when given.
    """
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords

    n = 0
    walked = 0
    checksum = 0
    for b in buffers:
        if limit_bytes is not None and walked >= limit_bytes:
            break
        cols: list[tuple] = []
        append = cols.append
        for batch in MemoryRecords(memoryview(b)):
            if not isinstance(batch, DefaultRecordBatch):
                continue
            if check_crc and not batch.validate_crc():
                raise RuntimeError("kafka-python: CRC mismatch")
            append(
                (
                    batch.base_offset,
                    batch.size_in_bytes,
                    batch.leader_epoch,
                    batch.magic,
                    batch.crc,
                    batch.attributes,
                    batch.last_offset_delta,
                    batch.first_timestamp,
                    batch.max_timestamp,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.records_count,
                    batch.is_transactional,
                    batch.is_control_batch,
                )
            )
        n += len(cols)
        checksum = (checksum + sum(c[0] for c in cols)) % (1 << 64)
        walked += len(b)
    return n, walked, checksum


def txnlog_checksum(buffers: list[np.ndarray]) -> tuple[int, int]:
    from txnlog.kafka.record_batch import scan_segment

    n = 0
    s = 0
    for b in buffers:
        scan = scan_segment(b, check_crc=True)
        assert not scan.quarantine, scan.quarantine[:3]
        n += scan.batch_count
        s = (s + int(scan.batches["base_offset"].astype(np.uint64).sum(dtype=np.uint64))) % (1 << 64)
    return n, s


# --- child processes: JIT warm-up and peak RSS -------------------------------------------------


def child_jit(file: str) -> dict[str, Any]:
    """First calls in a fresh process (NUMBA_CACHE_DIR decides whether the cache is cold)."""
    t0 = time.perf_counter()
    from txnlog.kafka.record_batch import scan_segment

    t_import = time.perf_counter() - t0
    buf = np.fromfile(file, dtype=np.uint8)
    out = {"import_s": t_import, "file_bytes": int(buf.size)}
    for label, crc in (("first_call_crc_s", True), ("first_call_nocrc_s", False), ("second_call_crc_s", True)):
        t = time.perf_counter()
        scan_segment(buf, check_crc=crc)
        out[label] = time.perf_counter() - t
    return out


def child_rss(mode: str, files: list[str], kp_limit: int | None) -> dict[str, Any]:
    """One streaming pass of ``mode`` over ``files``; peak RSS of this process."""
    paths = [Path(f) for f in files]
    if mode in ("walk_file", "executor"):
        import txnlog.broker.reconstruct  # noqa: F401
        import txnlog.engine.spark.sources  # noqa: F401
        import txnlog.kafka.record_batch  # noqa: F401
    if mode == "kafka_python":
        import kafka.record.memory_records  # noqa: F401
    base = rss_mib()
    t = time.perf_counter()
    if mode == "raw":
        raw_read(paths)
    elif mode == "walk_file":
        txnlog_walk_files(paths, check_crc=True)
    elif mode == "executor":
        executor_path(paths)
    elif mode == "kafka_python":
        walked = 0
        for p in paths:
            if kp_limit is not None and walked >= kp_limit:
                break
            data = p.read_bytes()
            kafka_python_walk([data], check_crc=True)
            walked += len(data)
            del data
    else:
        raise ValueError(mode)
    return {
        "mode": mode,
        "seconds": time.perf_counter() - t,
        "rss_after_imports_mib": base,
        "peak_rss_mib": peak_rss_mib(),
    }


# --- the benchmark -------------------------------------------------------------------------------


def measure(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def bench_dataset(name: str, ds, args, log) -> dict[str, Any]:
    files = ds.data_segments()
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    log(f"\n== data set {name}: {fmt_size(total)} in {len(files)} data segments ({ds.root})")

    # JIT: compile from scratch, then from that cache, in fresh processes
    smallest = min((f for f, s in zip(files, sizes) if s > 0), key=lambda f: f.stat().st_size)
    cache = tempfile.mkdtemp(prefix="txnlog-bench-numba-")
    try:
        cold = run_python([str(HERE), "--child-jit", str(smallest)], env={"NUMBA_CACHE_DIR": cache})
        warm = run_python([str(HERE), "--child-jit", str(smallest)], env={"NUMBA_CACHE_DIR": cache})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    log(
        f"   JIT, fresh process: compile {cold['first_call_crc_s'] + cold['first_call_nocrc_s']:.2f} s "
        f"(import {cold['import_s']:.2f} s); from on-disk cache {warm['first_call_crc_s']:.3f} s "
        f"(import {warm['import_s']:.2f} s); second call on {fmt_size(cold['file_bytes'])}: {warm['second_call_crc_s'] * 1e3:.1f} ms"
    )

    # in-process first call (txnlog's own cache under txnlog/kafka/__pycache__)
    t = time.perf_counter()
    from txnlog.kafka.record_batch import scan_segment

    import_s = time.perf_counter() - t
    small = np.fromfile(smallest, dtype=np.uint8)
    t = time.perf_counter()
    scan_segment(small, check_crc=True)
    scan_segment(small, check_crc=False)
    first_here = time.perf_counter() - t
    # every code path used below, once, before timing
    from txnlog.broker.reconstruct import segment_fragments

    segment_fragments(scan_segment(small).batches)
    del small

    buffers = [np.fromfile(f, dtype=np.uint8) for f in files]
    n_batches, checksum = txnlog_checksum(buffers)
    log(f"   {n_batches:,} batches, mean {total / n_batches:.0f} B per batch")

    kp_limit = None
    kp_bytes = total
    if args.kp_bytes is not None and args.kp_bytes < total:
        # whole segments up to the limit
        acc = 0
        for s in sizes:
            if acc >= args.kp_bytes:
                break
            acc += s
        kp_limit, kp_bytes = args.kp_bytes, acc
    kp_buffers = [memoryview(b) for b in buffers]
    # correctness: kafka-python sees the same batches
    kp_n, kp_walked, kp_sum = kafka_python_walk(kp_buffers, check_crc=False, limit_bytes=kp_limit)
    if kp_limit is None:
        assert kp_n == n_batches and kp_sum == checksum, (kp_n, n_batches, kp_sum, checksum)
        log("   kafka-python and txnlog agree on every batch (count and sum of base offsets)")
    kp_batches = kp_n

    modes: dict[str, Callable[[], Any]] = {
        "raw read (numpy.fromfile)": lambda: raw_read(files),
        "txnlog walk, no CRC (in memory)": lambda: txnlog_walk(buffers, False),
        "txnlog walk, CRC (in memory)": lambda: txnlog_walk(buffers, True),
        "txnlog walk, no CRC, fresh output memory": lambda: txnlog_walk_fresh_memory(buffers, False),
        "txnlog walk file, CRC (mmap)": lambda: txnlog_walk_files(files, True),
        "txnlog walk file, CRC, 2 threads": lambda: txnlog_walk_files(files, True, threads=2),
        "executor path (read + walk CRC + fragments)": lambda: executor_path(files),
    }
    kp_modes: dict[str, Callable[[], Any]] = {
        "kafka-python walk, no CRC (in memory)": lambda: kafka_python_walk(kp_buffers, False, kp_limit),
        "kafka-python walk, CRC (in memory)": lambda: kafka_python_walk(kp_buffers, True, kp_limit),
    }
    times: dict[str, list[float]] = {k: [] for k in [*modes, *kp_modes]}
    names = list(modes)
    for r in range(args.repeat):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            dt, _ = measure(modes[k])
            times[k].append(dt)
        if r < args.kp_repeat:
            for k, fn in kp_modes.items():
                dt, _ = measure(fn)
                times[k].append(dt * (total / kp_bytes))  # extrapolated to the whole data set when a subset
        log(
            f"   repeat {r + 1}/{args.repeat}: "
            + ", ".join(f"{k.split(' (')[0]} {v[-1]:.2f}s" for k, v in times.items() if len(v) > r)
        )

    raw = times["raw read (numpy.fromfile)"]
    rows = []
    for k, ts in times.items():
        t_med = median(ts)
        n_per = n_batches
        row = {
            "mode": k,
            "seconds_median": t_med,
            "seconds_all": ts,
            "headers_per_s": n_per / t_med,
            "mb_per_s": total / t_med / 1e6,
            # ratio to the raw read of the same repeat, then the median
            "vs_raw_read": median([t / raw[i] for i, t in enumerate(ts)]),
        }
        if k.startswith("kafka-python") and kp_limit is not None:
            row["note"] = f"walked {fmt_size(kp_bytes)} of {fmt_size(total)}, extrapolated"
        rows.append(row)
    by = {r["mode"]: r for r in rows}
    nocrc = times["txnlog walk, no CRC (in memory)"]
    crc = times["txnlog walk, CRC (in memory)"]
    kp_nocrc = times["kafka-python walk, no CRC (in memory)"]
    kp_crc = times["kafka-python walk, CRC (in memory)"]
    k = min(len(kp_nocrc), len(nocrc))
    ratios = {
        "walk_nocrc_vs_raw_read": median([raw[i] / nocrc[i] for i in range(len(raw))]),
        "walk_crc_vs_raw_read": median([raw[i] / crc[i] for i in range(len(raw))]),
        "walk_nocrc_vs_kafka_python_nocrc": median([kp_nocrc[i] / nocrc[i] for i in range(k)]),
        "walk_crc_vs_kafka_python_crc": median([kp_crc[i] / crc[i] for i in range(k)]),
    }
    targets = {
        "walk (no CRC) faster than the raw read": ratios["walk_nocrc_vs_raw_read"] > 1.0,
        "walk >= 20x kafka-python (no CRC vs no CRC)": ratios["walk_nocrc_vs_kafka_python_nocrc"] >= 20,
        "walk >= 20x kafka-python (CRC vs CRC)": ratios["walk_crc_vs_kafka_python_crc"] >= 20,
    }
    buffers.clear()  # free the segments' bytes before the next size
    kp_buffers.clear()
    gc.collect()

    # peak RSS: one child per mode, streaming the files once
    rss = {}
    for mode in ("raw", "walk_file", "executor", "kafka_python"):
        rss[mode] = run_python([str(HERE), "--child-rss", mode, "--kp-bytes", str(kp_limit or 0), *map(str, files)])
    jit = {
        "fresh_process_compile_s": cold["first_call_crc_s"] + cold["first_call_nocrc_s"],
        "fresh_process_import_s": cold["import_s"],
        "fresh_process_from_cache_s": warm["first_call_crc_s"] + warm["first_call_nocrc_s"],
        "from_cache_import_s": warm["import_s"],
        "this_process_first_calls_s": first_here,
        "this_process_import_s": import_s,
        "second_call_small_file_ms": warm["second_call_crc_s"] * 1e3,
        "small_file_bytes": cold["file_bytes"],
    }
    return {
        "dataset": name,
        "root": str(ds.root),
        "bytes": total,
        "segments": len(files),
        "largest_segment_bytes": max(sizes),
        "batches": n_batches,
        "mean_batch_bytes": total / n_batches,
        "kafka_python_batches_walked": kp_batches,
        "kafka_python_bytes_walked": kp_bytes,
        "written_in_s": ds.write_seconds,
        "jit": jit,
        "modes": rows,
        "ratios": ratios,
        "targets": targets,
        "peak_rss": rss,
        "by_mode": {k: {kk: vv for kk, vv in v.items() if kk != "seconds_all"} for k, v in by.items()},
    }


def report(results: list[dict[str, Any]], info: dict[str, Any], args) -> str:
    out = [
        f"# decode benchmark, {info['date']}",
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB; load at start {info['load_avg_at_start']}",
        f"code: {info['code']}",
        f"repeats: {args.repeat} (kafka-python {args.kp_repeat}); medians; page cache warm",
        "",
    ]
    for r in results:
        out.append(
            f"## {r['dataset']}: {fmt_size(r['bytes'])}, {r['segments']} segments, {r['batches']:,} batches "
            f"(mean {r['mean_batch_bytes']:.0f} B)"
        )
        out.append("")
        out.append("| mode | median s | headers/s | MB/s | time / raw read |")
        out.append("|---|---:|---:|---:|---:|")
        for m in r["modes"]:
            note = f" ({m['note']})" if m.get("note") else ""
            out.append(
                f"| {m['mode']}{note} | {m['seconds_median']:.3f} | {m['headers_per_s'] / 1e6:.2f} M | "
                f"{m['mb_per_s']:.0f} | {m['vs_raw_read']:.2f} |"
            )
        out.append("")
        ra = r["ratios"]
        out.append(
            f"walk no CRC vs raw read: {ra['walk_nocrc_vs_raw_read']:.2f}x faster; CRC: {ra['walk_crc_vs_raw_read']:.2f}x"
        )
        out.append(
            f"walk vs kafka-python: {ra['walk_nocrc_vs_kafka_python_nocrc']:.0f}x (no CRC), "
            f"{ra['walk_crc_vs_kafka_python_crc']:.0f}x (CRC)"
        )
        for t, ok in r["targets"].items():
            out.append(f"  target {t}: {'MET' if ok else 'MISSED'}")
        j = r["jit"]
        out.append(
            f"JIT: compile in a fresh process {j['fresh_process_compile_s']:.2f} s (+ import {j['fresh_process_import_s']:.2f} s); "
            f"load from numba's on-disk cache {j['fresh_process_from_cache_s']:.3f} s (+ import {j['from_cache_import_s']:.2f} s); "
            f"first calls in this process {j['this_process_first_calls_s']:.3f} s"
        )
        out.append(
            "peak RSS (one streaming pass, fresh process): "
            + ", ".join(
                f"{k} {v['peak_rss_mib']:.0f} MiB (after imports {v['rss_after_imports_mib']:.0f})"
                for k, v in r["peak_rss"].items()
            )
        )
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=parse_size, default=parse_size("1GiB"), help="bytes per data set (default 1GiB)")
    p.add_argument("--quick", action="store_true", help="64 MiB per data set, 3 repeats: a smoke check")
    p.add_argument("--repeat", type=int, default=5, help="timed passes per mode (default 5)")
    p.add_argument("--kp-repeat", type=int, default=3, help="timed passes of the kafka-python walks (default 3)")
    p.add_argument(
        "--kp-bytes",
        type=parse_size,
        default=None,
        help="walk only about this much with kafka-python and extrapolate (default: everything)",
    )
    p.add_argument("--datasets", default="1k,150b", help="which data sets (default 1k,150b)")
    p.add_argument(
        "--code",
        type=Path,
        default=None,
        help="measure this checkout of txnlog instead (e.g. a snapshot made by an earlier --snapshot run)",
    )
    p.add_argument(
        "--snapshot",
        action="store_true",
        help="measure a snapshot of HEAD (git archive to /tmp) instead of the working tree",
    )
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help=f"where data sets live (default {DEFAULT_DATA})")
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        help="write the results as JSON here (default <data-dir>/results/decode-<time>.json)",
    )
    p.add_argument("--child-jit", help=argparse.SUPPRESS)
    p.add_argument("--child-rss", help=argparse.SUPPRESS)
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child_jit:
        print(json.dumps(child_jit(args.child_jit)))
        return 0
    if args.child_rss:
        print(json.dumps(child_rss(args.child_rss, args.files, args.kp_bytes or None)))
        return 0
    if args.quick:
        args.size = 64 * MiB
        args.repeat = min(args.repeat, 3)
        args.kp_repeat = min(args.kp_repeat, 1)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    code = maybe_reexec_in_snapshot(args.snapshot, log=log, code=args.code)
    require_fast_kafka_python_crc()
    info = machine_info()
    info["code"] = code_version(code)
    log(
        f"decode benchmark: {fmt_size(args.size)} per data set; {info['cpu']}, {info['cores']} cores; load {info['load_avg_at_start']}"
    )
    results = []
    for name in args.datasets.split(","):
        ds = dataset(
            f"decode-{name}-{fmt_size(args.size).replace(' ', '')}",
            args.data_dir,
            log=log,
            total_bytes=args.size,
            **DATASETS[name],
        )
        results.append(bench_dataset(name, ds, args, log))
    text = report(results, info, args)
    print(text)
    path = args.json or args.data_dir / "results" / f"decode-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(
        path,
        {
            "machine": info,
            "args": {k: str(v) for k, v in vars(args).items()},
            "results": results,
            "main_process_peak_rss_mib": peak_rss_mib(),
        },
    )
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
