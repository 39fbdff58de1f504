#!/usr/bin/env python
"""Live fetch benchmark: the Kafka source's read of whole partitions vs. Python consumers on the same range.

A noida-db server on 127.0.0.1 (``tests/live/noida.py``) is filled once per run with two topics of
``--partitions`` (default 8) partitions each, written by real confluent-kafka transactional producers:

* ``dense`` (Kafka Streams exactly-once traffic): ``--dense-producers`` (default 4) producers, one thread
  each, commit many small transactions of ``--txn-records`` (default 10) records of 80-400 bytes
  (JSON-like text, 8-16-byte keys) spread over 1-3 partitions; 1 in 100 is aborted; no compression
  (``--dense-codec``; Streams' default), ``linger.ms`` 100. ``--dense-size`` (default 64 MiB, ~76 MiB of log) of record
  payload (keys + values).
* ``bulk`` (a batch loader): ``--bulk-producers`` (default 2) producers commit few large transactions of
  ``--bulk-txn-records`` (default 4000) records of ~1 KiB over all partitions, gzip (``--bulk-codec``; the
  only codec kafka-python can decompress in this venv: no lz4, zstandard or python-snappy package),
  ``linger.ms`` 20, librdkafka's ``batch.size`` (1,000,000 bytes): fewer, larger batches.
  ``--bulk-size`` (default 160 MiB) of payload (~33 MiB of log with gzip).

Each topic's data set is then described once by an independent header walk (struct, in Python) of the
bytes a raw Fetch returns: log bytes, batches (data and marker batches), records, markers (one per
transaction per partition, the rows txnlog's ``transactions`` table has).

Measured, every repeat, each in a fresh Python process (imports and numba's cache load untimed), in a
rotating order, on every partition's whole range ``[log start, high watermark)``:

* ``txnlog``: the Kafka source's work without Spark: ``capture_cut(..., mode="all")`` (the driver's
  ListOffsets round), then ``read_ranges`` over every range in one process, as one task reads its ranges:
  Fetch of raw batches (``FetchClient``), the compiled segment walk with CRC checks, the summary rows
  as Arrow record batches.
* ``fetch``: ``capture_cut``, then ``FetchClient.read_range`` for every range: the Fetch part alone.
* ``kafka_python``: a ``kafka.KafkaConsumer`` (no group, ``assign``, ``read_uncommitted``, defaults
  otherwise: ``check_crcs`` on, 1 MiB per partition, 50 MiB per fetch) from the beginning to the end
  offsets it lists, record by record (``poll()``; every record's key and value touched), stopping when every
  partition's position reaches its end offset; ``--consumer-timeout`` s without a record is an error.
* ``confluent``: a ``confluent_kafka.Consumer`` doing the same (``enable.partition.eof`` marks a
  partition done; librdkafka's defaults otherwise: ``check.crcs`` off).

Reported per mix: wall time (setup + read: client, offsets and the read; medians with min-max), MiB/s
(log bytes), records/s, batches/s, transactions/s (markers), the client's and the server's CPU
seconds, the share of the CPUs other processes used meanwhile (machine busy time minus the client and
the server), peak RSS of the client, and the ratio of txnlog's throughput to each baseline's (from the
medians, and per repeat). Every mode's counts are checked against the data set (records, end offsets).
A consumer's read ends with its last record (not when it learns that nothing more is coming).

Two things of the setting: noida-db ignores Fetch's size limits (every Fetch is answered with everything up
to the high watermark), and txnlog's ``FetchClient`` keeps kafka-python's 1,000,000-byte frame guard, so any
larger response fails; this script lifts the guard in txnlog's processes from outside (``raise_frame_limit``;
``--no-frame-fix`` shows the failure) and in both consumers' settings.

    python benchmarks/live_fetch.py --snapshot           # both mixes, 5 repeats (~7 min on 2 busy cores)
    python benchmarks/live_fetch.py --quick              # 8 MiB per mix, 1 repeat (~1 min)
    python benchmarks/live_fetch.py --dense-size 256MiB --bulk-size 512MiB --repeat 3   # more data

What is measured: by default the working tree; ``--snapshot`` a copy of HEAD (git archive to /tmp,
sharing .venv); ``--code DIR`` any checkout. Results JSON: benchmarks/data/results/live_fetch-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (
    DEFAULT_DATA,
    ROOT,
    MiB,
    code_version,
    fmt_size,
    machine_info,
    maybe_reexec_in_snapshot,
    median,
    parse_size,
    peak_rss_mib,
    require_fast_kafka_python_crc,
    write_json,
)

HERE = Path(__file__).resolve()
MODES = ("txnlog", "fetch", "kafka_python", "confluent")
BASELINES = ("kafka_python", "confluent")
MIXES = ("dense", "bulk")
LABEL = {
    "txnlog": "txnlog source: capture_cut + read_ranges (fetch + walk + summary rows)",
    "fetch": "txnlog fetch alone: capture_cut + FetchClient.read_range",
    "kafka_python": "kafka-python KafkaConsumer, record by record",
    "confluent": "confluent-kafka Consumer, record by record",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- CPU accounting (in the measuring child) ---------------------------------------------------------------


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent busy (as end_to_end.busy_cpu_seconds)."""
    import psutil

    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0) + getattr(t, "steal", 0)


def own_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process (librdkafka's included)
    return r.ru_utime + r.ru_stime


def server_cpu_seconds(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return float("nan")


class Clock:
    """Wall, own CPU, server CPU and machine busy time of one timed section: start, setup done, end.

    A consumer's read ends when its last record was handed over (``last_record()``, a clock read per
    record): how it then learns that nothing more is coming (librdkafka's partition EOF comes with the
    next Fetch, which the server may hold for ``fetch.wait.max.ms``) is not part of the read. CPU seconds
    and the others' share cover the whole section (the wait after the last record costs no CPU).
    """

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.marks: list[tuple[float, float, float, float]] = []
        self.last_wall: float | None = None

    def mark(self) -> None:
        self.marks.append(
            (time.perf_counter(), own_cpu_seconds(), server_cpu_seconds(self.server_pid), busy_cpu_seconds())
        )

    def last_record(self) -> None:
        self.last_wall = time.perf_counter()

    def result(self) -> dict[str, float]:
        (w0, c0, s0, b0), (w1, _c1, _s1, _b1), (w3, c3, s3, b3) = self.marks[0], self.marks[1], self.marks[-1]
        w2 = self.last_wall if self.last_wall is not None else w3
        return {
            "setup_s": w1 - w0,
            "read_s": w2 - w1,
            "wall_s": w2 - w0,
            "until_done_s": w3 - w0,  # to the end detected (consumers: position / EOF)
            "cpu_s": c3 - c0,
            "server_cpu_s": s3 - s0,
            "others_cpu_share": max(0.0, (b3 - b0) - (c3 - c0) - (s3 - s0)) / ((w3 - w0) * (os.cpu_count() or 1)),
        }


# --- the measuring children ------------------------------------------------------------------------------

#: the largest frame a client accepts here: int32's limit (noida-db answers a Fetch with everything up to the
#: high watermark, whatever the size limits say; see raise_frame_limit)
FRAME_LIMIT = 2**31 - 1


def raise_frame_limit() -> None:
    """Lift kafka-python's frame-size guard (``receive_message_max_bytes``, default 1,000,000) for txnlog's client.

    ``txnlog.live.fetch.FetchClient`` builds its ``KafkaNetClient`` with the default, so a Fetch response
    larger than 1,000,000 bytes fails with ``InvalidReceiveError: Invalid frame length``; a broker returns
    up to ``partition_max_bytes`` (1 MiB) of records plus the response's header, and noida-db returns
    the whole rest of the partition. ``KafkaConsumer`` raises the guard to fetch_max_bytes +
    max_partition_fetch_bytes for itself; this does the same for txnlog's client, from outside
    (``--no-frame-fix``: leave it, and see the failure).
    """
    import kafka.net.connection
    import kafka.net.manager

    for cls in (kafka.net.manager.KafkaConnectionManager, kafka.net.connection.KafkaConnection):
        cls.DEFAULT_CONFIG["receive_message_max_bytes"] = FRAME_LIMIT


class _Tally(list):
    """What each ``RangeRead`` cost, without its bytes (a task drops them once walked): the peak RSS is the reader's."""

    def append(self, read: Any) -> None:
        super().append((int(read.data.size), int(read.bytes_fetched), int(read.requests)))


def child_txnlog(bootstrap: str, topic: str, server_pid: int, fetch_only: bool, frame_fix: bool) -> dict[str, Any]:
    from dataclasses import replace

    from txnlog.engine.spark.live_batches import RANGE_ALL, capture_cut, read_ranges
    from txnlog.live.fetch import FetchClient

    if frame_fix:
        raise_frame_limit()
    # untimed warm-up: numba's cache loaded, every code path of a range (data batches and markers) run once
    t = time.perf_counter()
    warm = capture_cut(bootstrap, None, [topic], mode=RANGE_ALL)
    first = replace(warm.ranges[0], end=min(warm.ranges[0].end, warm.ranges[0].start + 200))
    for _ in read_ranges(bootstrap, None, [first]):
        pass
    warm_s = time.perf_counter() - t

    clock = Clock(server_pid)
    clock.mark()
    cut = capture_cut(bootstrap, None, [topic], mode=RANGE_ALL)
    clock.mark()
    reads = _Tally()
    batches: list[Any] = []  # the summary rows (Spark would take them batch by batch)
    if fetch_only:
        with FetchClient(bootstrap, None) as client:
            for r in cut.ranges:
                reads.append(client.read_range(r))
    else:
        for b in read_ranges(bootstrap, None, cut.ranges, reads=reads):
            batches.append(b)
    clock.mark()
    out: dict[str, Any] = {**clock.result(), "warmup_s": warm_s}
    out["ends"] = {str(r.partition): r.end for r in cut.ranges}
    out["starts"] = {str(r.partition): r.start for r in cut.ranges}
    out["log_bytes"] = sum(x[0] for x in reads)
    out["bytes_fetched"] = sum(x[1] for x in reads)
    out["requests"] = sum(x[2] for x in reads)
    if not fetch_only:
        import pyarrow as pa

        rows = pa.Table.from_batches(batches).to_pylist() if batches else []
        out["summary_rows"] = len(rows)
        runs = [r for r in rows if r["kind"] == "run"]
        out["records"] = int(sum(r["record_count"] or 0 for r in runs))
        out["data_batches"] = int(sum(r["batch_count"] or 0 for r in runs))
        out["markers"] = sum(1 for r in rows if r["kind"] == "marker")
        out["quarantine_rows"] = sum(1 for r in rows if r["kind"] == "quarantine")
    return out


def child_kafka_python(bootstrap: str, topic: str, server_pid: int, timeout_s: float) -> dict[str, Any]:
    import kafka

    clock = Clock(server_pid)
    clock.mark()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_uncommitted",
        auto_offset_reset="earliest",
        client_id="txnlog-bench-kafka-python",
        # noida-db answers with whole partitions: more than fetch_max_bytes + max_partition_fetch_bytes
        # (the guard KafkaConsumer sets itself) once a topic holds more than ~50 MiB
        receive_message_max_bytes=FRAME_LIMIT,
    )
    tps = [kafka.TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    starts = consumer.beginning_offsets(tps)
    consumer.seek_to_beginning(*tps)
    clock.mark()
    remaining = {tp for tp in tps if ends[tp] > starts[tp]}
    records = value_bytes = 0
    last = time.monotonic()
    while remaining:
        got = consumer.poll(timeout_ms=1000)
        if got:
            last = time.monotonic()
        elif time.monotonic() - last > timeout_s:
            raise RuntimeError(f"kafka-python: no record for {timeout_s} s; {len(remaining)} partitions not at the end")
        for msgs in got.values():
            for m in msgs:
                records += 1
                value_bytes += len(m.value or b"") + len(m.key or b"")
        if got:
            clock.last_record()
        for tp in list(remaining):
            if consumer.position(tp) >= ends[tp]:
                remaining.discard(tp)
                consumer.pause(tp)
    clock.mark()
    consumer.close()
    return {
        **clock.result(),
        "records": records,
        "payload_bytes": value_bytes,
        "ends": {str(tp.partition): ends[tp] for tp in tps},
        "starts": {str(tp.partition): starts[tp] for tp in tps},
    }


def child_confluent(bootstrap: str, topic: str, server_pid: int, timeout_s: float) -> dict[str, Any]:
    import confluent_kafka as ck

    clock = Clock(server_pid)
    clock.mark()
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txnlog-bench-{uuid.uuid4().hex[:8]}",  # required; never joined (assign, no commits)
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "client.id": "txnlog-bench-confluent",
            "receive.message.max.bytes": FRAME_LIMIT,  # as for kafka-python (librdkafka's default: 100 MB)
            "log_level": 3,
        }
    )
    meta = consumer.list_topics(topic, timeout=30)
    parts = sorted(meta.topics[topic].partitions)
    marks = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30) for p in parts}
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
    clock.mark()
    remaining = {p for p in parts if marks[p][1] > marks[p][0]}
    records = value_bytes = 0
    last = time.monotonic()
    while remaining:
        m = consumer.poll(1.0)  # one message at a time, as confluent-kafka's examples read
        if m is None:
            if time.monotonic() - last > timeout_s:
                raise RuntimeError(
                    f"confluent: no record for {timeout_s} s; {len(remaining)} partitions not at the end"
                )
            continue
        last = time.monotonic()
        err = m.error()
        if err is not None:
            if err.code() == ck.KafkaError._PARTITION_EOF:
                if m.offset() >= marks[m.partition()][1]:
                    remaining.discard(m.partition())
                continue
            raise RuntimeError(f"confluent: {err}")
        records += 1
        value_bytes += len(m.value() or b"") + len(m.key() or b"")
        clock.last_record()
    clock.mark()
    consumer.close()
    return {
        **clock.result(),
        "records": records,
        "payload_bytes": value_bytes,
        "ends": {str(p): marks[p][1] for p in parts},
        "starts": {str(p): marks[p][0] for p in parts},
    }


def run_child(args: argparse.Namespace) -> int:
    mode = args.child
    if mode in ("txnlog", "fetch"):
        out = child_txnlog(args.bootstrap, args.topic, args.server_pid, mode == "fetch", not args.no_frame_fix)
    elif mode == "kafka_python":
        out = child_kafka_python(args.bootstrap, args.topic, args.server_pid, args.consumer_timeout)
    elif mode == "confluent":
        out = child_confluent(args.bootstrap, args.topic, args.server_pid, args.consumer_timeout)
    else:
        raise SystemExit(f"unknown mode {mode}")
    out["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(out), flush=True)
    return 0


# --- filling the server ---------------------------------------------------------------------------------------


def _value(rng: random.Random, size: int) -> bytes:
    """JSON-like text of about ``size`` bytes (compresses like real events, a few times)."""
    head = (
        f'{{"id":{rng.getrandbits(40)},"ts":{1764000000000 + rng.getrandbits(24)},'
        f'"user":"u{rng.getrandbits(20):06x}","type":"{rng.choice(("view", "click", "order", "refund"))}",'
        f'"amount":{rng.random() * 1000:.2f},"items":['
    )
    parts = [head]
    n = len(head)
    while n < size - 2:
        item = f'{{"sku":"s{rng.getrandbits(16):04x}","qty":{rng.randint(1, 9)}}},'
        parts.append(item)
        n += len(item)
    return ("".join(parts).rstrip(",") + "]}").encode()


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(60)


def fill(bootstrap: str, topic: str, mix: str, args: argparse.Namespace) -> dict[str, Any]:
    """Write ``mix`` to ``topic`` with transactional confluent-kafka producers (one thread each)."""
    import confluent_kafka as ck

    _create_topic(bootstrap, topic, args.partitions)
    dense = mix == "dense"
    budget = args.dense_size if dense else args.bulk_size
    producers = args.dense_producers if dense else args.bulk_producers
    lock = threading.Lock()
    state = {"payload": 0, "records": 0, "commits": 0, "aborts": 0}
    errors: list[str] = []

    def take(n: int) -> bool:
        with lock:
            if state["payload"] >= budget:
                return False
            state["payload"] += n
            return True

    def producer(i: int) -> None:
        rng = random.Random(f"{mix}-{i}")
        conf = {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{topic}-{i}",
            "compression.type": args.dense_codec if dense else args.bulk_codec,
            "linger.ms": 100 if dense else 20,
            "acks": "all",
            "log_level": 3,
        }
        p = ck.Producer(conf)

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        p.init_transactions(60)
        txn = 0
        while not errors:
            if dense:
                parts = rng.sample(range(args.partitions), rng.randint(1, min(3, args.partitions)))
                n = args.txn_records
                sizes = [rng.randint(80, 400) for _ in range(n)]
            else:
                parts = list(range(args.partitions))
                n = args.bulk_txn_records
                sizes = [rng.randint(768, 1280) for _ in range(n)]
            keys = [f"key-{rng.getrandbits(48):012x}".encode()[: rng.randint(8, 16)] for _ in range(n)]
            if not take(sum(sizes) + sum(len(k) for k in keys)):
                break
            p.begin_transaction()
            for j in range(n):
                while True:
                    try:
                        p.produce(
                            topic,
                            key=keys[j],
                            value=_value(rng, sizes[j]),
                            partition=parts[j % len(parts)],
                            on_delivery=delivered,
                        )
                        break
                    except BufferError:  # the local queue is full: let librdkafka send
                        p.poll(0.05)
            abort = dense and rng.random() < args.abort_share
            if abort:
                p.flush(60)  # the records are in the log; then the abort marker
                p.abort_transaction(60)
            else:
                p.commit_transaction(60)
            txn += 1
            with lock:
                state["records"] += n
                state["aborts" if abort else "commits"] += 1
        p.flush(60)

    t = time.perf_counter()
    threads = [threading.Thread(target=producer, args=(i,)) for i in range(producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise RuntimeError(f"fill {topic}: delivery failed: {errors[:5]}")
    return {**state, "producers": producers, "seconds": time.perf_counter() - t}


def describe(bootstrap: str, topic: str) -> dict[str, Any]:
    """The topic's data set, by a header walk in Python (struct) over the bytes of a raw Fetch of every partition."""
    from txnlog.engine.spark.live_batches import RANGE_ALL, capture_cut
    from txnlog.live.fetch import FetchClient

    cut = capture_cut(bootstrap, None, [topic], mode=RANGE_ALL)
    facts = {"log_bytes": 0, "data_batches": 0, "markers": 0, "records": 0, "compressed_batches": 0}
    per_partition = {}
    with FetchClient(bootstrap, None) as client:
        for r in cut.ranges:
            data = client.read_range(r).data.tobytes()
            pos = 0
            part = {"log_bytes": len(data), "data_batches": 0, "markers": 0, "records": 0, "end": r.end}
            while pos + 61 <= len(data):
                (length,) = struct.unpack_from(">i", data, pos + 8)
                (attributes,) = struct.unpack_from(">h", data, pos + 21)
                (count,) = struct.unpack_from(">i", data, pos + 57)
                if attributes & 0x20:  # control batch: a transaction marker
                    part["markers"] += 1
                else:
                    part["data_batches"] += 1
                    part["records"] += count
                    facts["compressed_batches"] += 1 if attributes & 0x07 else 0
                pos += 12 + length
            if pos != len(data):
                raise RuntimeError(f"{topic}-{r.partition}: {len(data) - pos} bytes after the last whole batch")
            per_partition[str(r.partition)] = part
            for k in ("log_bytes", "data_batches", "markers", "records"):
                facts[k] += part[k]
    facts["batches"] = facts["data_batches"] + facts["markers"]
    facts["partitions"] = per_partition
    return facts


# --- the parent ---------------------------------------------------------------------------------------------------


def measure(mode: str, bootstrap: str, topic: str, server_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(HERE),
        "--child",
        mode,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--server-pid",
        str(server_pid),
        "--consumer-timeout",
        str(args.consumer_timeout),
        *(["--no-frame-fix"] if args.no_frame_fix else []),
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{mode} on {topic} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t
    return res


def check(mode: str, res: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """What a mode read that differs from the data set (empty: the same range, the same records)."""
    bad = []
    ends = {p: v["end"] for p, v in facts["partitions"].items()}
    if {p: int(v) for p, v in res["ends"].items()} != ends:
        bad.append(f"end offsets {res['ends']} != {ends}")
    if "records" in res and res["records"] != facts["records"]:
        bad.append(f"records {res['records']} != {facts['records']}")
    if "log_bytes" in res and res["log_bytes"] != facts["log_bytes"]:
        bad.append(f"log bytes {res['log_bytes']} != {facts['log_bytes']}")
    if mode == "txnlog":
        if res["markers"] != facts["markers"] or res["data_batches"] != facts["data_batches"]:
            bad.append(
                f"markers/batches {res['markers']}/{res['data_batches']} != {facts['markers']}/{facts['data_batches']}"
            )
        if res["quarantine_rows"]:
            bad.append(f"{res['quarantine_rows']} quarantine rows")
    return [f"{mode}: {b}" for b in bad]


def stats(xs: list[float]) -> dict[str, float]:
    return {
        "median": median(xs),
        "min": min(xs) if xs else float("nan"),
        "max": max(xs) if xs else float("nan"),
        "n": len(xs),
    }


def rng_text(s: dict[str, float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def report(
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    facts: dict[str, dict[str, Any]],
    fills: dict[str, dict[str, Any]],
    modes: list[str],
    info: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[list[str], dict[str, Any]]:
    lines = [
        f"# live fetch benchmark, {info['date']}",
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB; load at start {info['load_avg_at_start']}",
        f"code: {info['code']}; server: noida-db {info.get('noida_version', '?')} on 127.0.0.1; "
        f"confluent-kafka {info.get('confluent_kafka', '?')}, kafka-python {info['versions'].get('kafka', '?')}",
        f"repeats: {args.repeat}, modes in a rotating order, each in a fresh process; times are setup + read "
        "(client, offsets, every record or range); throughput over the data set's quantities",
        "",
    ]
    summary: dict[str, Any] = {}
    for mix in runs:
        f, fl = facts[mix], fills[mix]
        lines += [
            f"## {mix}: {f['log_bytes'] / MiB:.1f} MiB of log ({f['log_bytes']:,} bytes) in {args.partitions} partitions; "
            f"{f['records']:,} records, {f['data_batches']:,} data batches ({f['compressed_batches']:,} compressed), "
            f"{f['markers']:,} markers (transactions per partition) from {fl['commits']:,} committed and "
            f"{fl['aborts']:,} aborted producer transactions of {fl['producers']} producers "
            f"(written in {fl['seconds']:.0f} s)",
            "",
            "| mode | wall s, median (min–max) | MiB/s | records/s | batches/s | transactions/s | client CPU s | "
            "server CPU s | others' CPU share | peak RSS MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        mix_sum: dict[str, Any] = {"modes": {}, "ratios": {}}
        mb = f["log_bytes"] / MiB
        for mode in modes:
            rs = runs[mix][mode]
            if not rs:
                continue
            wall = stats([x["wall_s"] for x in rs])
            m = wall["median"]
            mix_sum["modes"][mode] = {
                "wall_s": wall,
                "setup_s": stats([x["setup_s"] for x in rs]),
                "read_s": stats([x["read_s"] for x in rs]),
                "mib_per_s": mb / m,
                "records_per_s": f["records"] / m,
                "batches_per_s": f["batches"] / m,
                "transactions_per_s": f["markers"] / m,
                "cpu_s": median([x["cpu_s"] for x in rs]),
                "server_cpu_s": median([x["server_cpu_s"] for x in rs]),
                "others_cpu_share": stats([x["others_cpu_share"] for x in rs]),
                "peak_rss_mib": median([x["peak_rss_mib"] for x in rs]),
            }
            s = mix_sum["modes"][mode]
            lines.append(
                f"| {LABEL[mode]} | {rng_text(wall)} | {s['mib_per_s']:.1f} | {s['records_per_s']:,.0f} | "
                f"{s['batches_per_s']:,.0f} | {s['transactions_per_s']:,.0f} | {s['cpu_s']:.2f} | "
                f"{s['server_cpu_s']:.2f} | {100 * s['others_cpu_share']['median']:.0f} % "
                f"({100 * s['others_cpu_share']['max']:.0f} %) | {s['peak_rss_mib']:.0f} |"
            )
        lines += [
            "",
            "| throughput ratio (baseline time / txnlog time) | from the medians | per repeat: median (min–max) |",
            "|---|---:|---:|",
        ]
        for mine in ("txnlog", "fetch"):
            for base in BASELINES:
                a, b = runs[mix].get(mine), runs[mix].get(base)
                if not a or not b:
                    continue
                per = [y["wall_s"] / x["wall_s"] for x, y in zip(a, b)]
                r_med = median([y["wall_s"] for y in b]) / median([x["wall_s"] for x in a])
                mix_sum["ratios"][f"{mine}/{base}"] = {"median_ratio": r_med, "per_repeat": per, **stats(per)}
                lines.append(f"| {mine} / {base} | {r_med:.2f}× | {rng_text(stats(per))}× |")
        if runs[mix].get("txnlog") and runs[mix].get("fetch"):
            share = median([x["wall_s"] for x in runs[mix]["fetch"]]) / median(
                [x["wall_s"] for x in runs[mix]["txnlog"]]
            )
            mix_sum["fetch_share_of_txnlog"] = share
            lines.append(f"| fetch alone / txnlog source (the fetch's share of the source's time) | {share:.2f} | |")
        for mode in modes:
            if mode in mix_sum["modes"]:
                mix_sum["modes"][mode]["until_done_s"] = stats([x["until_done_s"] for x in runs[mix][mode]])
        lines += ["", "setup (client, offsets) / read / until the end was detected, median s: "]
        lines[-1] += "; ".join(
            f"{mode} {mix_sum['modes'][mode]['setup_s']['median']:.3f} / {mix_sum['modes'][mode]['read_s']['median']:.2f}"
            f" / {mix_sum['modes'][mode]['until_done_s']['median']:.2f}"
            for mode in modes
            if mode in mix_sum["modes"]
        )
        tl = runs[mix].get("txnlog") or runs[mix].get("fetch")
        if tl:
            req, parts = tl[0]["requests"], len(f["partitions"])
            lines.append(
                f"txnlog's requests per read: {req} (Metadata and Fetch) for {parts} partitions; bytes fetched "
                f"{tl[0]['bytes_fetched']:,} = {tl[0]['bytes_fetched'] / max(1, f['log_bytes']):.3f}× the log bytes"
                + (
                    " (one Fetch answered each whole partition: noida-db ignores the Fetch size limits)"
                    if req <= parts + 1
                    else ""
                )
            )
        lines.append(
            "wall per run, in order (others' CPU share): "
            + "; ".join(
                f"{mode} "
                + ", ".join(f"{x['wall_s']:.2f} ({100 * x['others_cpu_share']:.0f}%)" for x in runs[mix][mode])
                for mode in modes
                if runs[mix].get(mode)
            )
        )
        lines.append("")
        summary[mix] = mix_sum
    return lines, summary


def noida_version() -> str:
    try:
        from importlib.metadata import version

        return version("noida-db")
    except Exception:  # noqa: BLE001
        return "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mix", choices=(*MIXES, "both"), default="both", help="which topic(s) to fill and read")
    p.add_argument("--dense-size", type=parse_size, default=parse_size("64MiB"), help="dense payload (default 64MiB)")
    p.add_argument("--bulk-size", type=parse_size, default=parse_size("160MiB"), help="bulk payload (default 160MiB)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--dense-producers", type=int, default=4)
    p.add_argument("--bulk-producers", type=int, default=2)
    p.add_argument("--txn-records", type=int, default=10, help="records per dense transaction (default 10)")
    p.add_argument("--bulk-txn-records", type=int, default=4000, help="records per bulk transaction (default 4000)")
    p.add_argument("--abort-share", type=float, default=0.01, help="share of dense transactions aborted")
    p.add_argument("--dense-codec", default="none", help="dense producers' compression.type (default none)")
    p.add_argument(
        "--bulk-codec",
        default="gzip",
        help="bulk producers' compression.type (default gzip: the one codec kafka-python can decompress in this venv, "
        "which has no lz4/zstandard/python-snappy)",
    )
    p.add_argument("--repeat", type=int, default=5, help="repeats, interleaved (default 5)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--quick", action="store_true", help="8 MiB per mix, 1 repeat (a smoke check)")
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=5,
        help="before each measurement, wait up to this many seconds until other processes use < 1/4 core (0: never)",
    )
    p.add_argument("--consumer-timeout", type=float, default=20, help="s without a record before a consumer fails")
    p.add_argument(
        "--no-frame-fix",
        action="store_true",
        help="leave kafka-python's 1,000,000-byte frame guard in txnlog's client (Fetch responses above it fail)",
    )
    p.add_argument("--child-timeout", type=float, default=900, help="s before a measurement is killed")
    p.add_argument("--snapshot", action="store_true", help="measure a snapshot of HEAD (git archive to /tmp)")
    p.add_argument("--code", type=Path, default=None, help="measure this checkout of txnlog instead")
    p.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA, help=f"results under <data-dir>/results ({DEFAULT_DATA})"
    )
    p.add_argument(
        "--json", type=Path, default=None, help="results JSON (default <data-dir>/results/live_fetch-<time>.json)"
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", help=argparse.SUPPRESS)
    p.add_argument("--topic", help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return run_child(args)
    if args.quick:
        args.dense_size = args.bulk_size = parse_size("8MiB")
        args.repeat = 1

    code = maybe_reexec_in_snapshot(args.snapshot, log=log, code=args.code)
    sys.path.insert(1, str(code))  # tests.live.noida (the snapshot's, or this tree's)
    from end_to_end import CODE_NOTE, wait_for_quiet

    from tests.live.noida import NoidaServer

    require_fast_kafka_python_crc()
    raise_frame_limit()  # for describe(); the children decide for themselves (--no-frame-fix)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: unknown mode {m!r} (known: {', '.join(MODES)})")
    mixes = list(MIXES) if args.mix == "both" else [args.mix]
    if "kafka_python" in modes:
        import kafka.codec

        for codec in {args.dense_codec if "dense" in mixes else "none", args.bulk_codec if "bulk" in mixes else "none"}:
            if codec != "none" and not getattr(kafka.codec, f"has_{codec}", lambda: False)():
                raise SystemExit(f"kafka-python cannot decompress {codec} here (its library is not installed)")
    import confluent_kafka

    info = machine_info()
    described = code / CODE_NOTE
    info["code"] = described.read_text().strip() if described.exists() else code_version(code)
    info["noida_version"] = noida_version()
    info["confluent_kafka"] = f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
    log(
        f"live fetch benchmark: {mixes}, {modes}, {args.repeat} repeats; code {info['code']}; load {info['load_avg_at_start']}"
    )
    t_start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="txnlog-live-fetch-"))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {mix: {m: [] for m in modes} for mix in mixes}
    facts: dict[str, dict[str, Any]] = {}
    fills: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    try:
        with NoidaServer(work / "noida") as server:
            pid = server.pid
            assert pid is not None
            log(f"noida-db at {server.bootstrap} (pid {pid})")
            topics = {mix: f"bench-{mix}-{uuid.uuid4().hex[:6]}" for mix in mixes}
            for mix in mixes:
                size = args.dense_size if mix == "dense" else args.bulk_size
                log(f"filling {topics[mix]} ({mix}, {fmt_size(size)} of payload) ...")
                fills[mix] = fill(server.bootstrap, topics[mix], mix, args)
                facts[mix] = describe(server.bootstrap, topics[mix])
                f = facts[mix]
                log(
                    f"  {fills[mix]['seconds']:.1f} s: {fills[mix]['commits']} commits, {fills[mix]['aborts']} aborts; "
                    f"{f['log_bytes'] / MiB:.1f} MiB of log, {f['records']:,} records, {f['data_batches']:,} data "
                    f"batches, {f['markers']:,} markers"
                )
            log("warm-up: every mode once per mix, untimed ...")
            for mix in mixes:
                for m in modes:
                    res = measure(m, server.bootstrap, topics[mix], pid, args)
                    problems += [f"{mix} warm-up {x}" for x in check(m, res, facts[mix])]
                    log(f"  {mix} {m}: {res['wall_s']:.2f} s (process {res['process_s']:.1f} s)")
            for r in range(args.repeat):
                for mix in mixes:
                    k = (r + mixes.index(mix)) % len(modes)
                    for m in modes[k:] + modes[:k]:
                        if args.quiet_wait > 0:
                            wait_for_quiet(log, max_wait=args.quiet_wait)
                        res = measure(m, server.bootstrap, topics[mix], pid, args)
                        res["repeat"] = r
                        runs[mix][m].append(res)
                        problems += [f"{mix} repeat {r + 1} {x}" for x in check(m, res, facts[mix])]
                        log(
                            f"  repeat {r + 1} {mix} {m}: {res['wall_s']:.2f} s "
                            f"({facts[mix]['log_bytes'] / MiB / res['wall_s']:.1f} MiB/s), CPU {res['cpu_s']:.2f} s, "
                            f"server {res['server_cpu_s']:.2f} s, others {100 * res['others_cpu_share']:.0f}%"
                        )
            info["server_log_tail"] = server.log_text(2000)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines, summary = report(runs, facts, fills, modes, info, args)
    if problems:
        lines += ["MISMATCHES (a mode did not read the data set):", *[f"* {x}" for x in problems], ""]
    lines.append(f"benchmark wall time: {(time.perf_counter() - t_start) / 60:.1f} min")
    text = "\n".join(lines)
    print(text)
    path = args.json or args.data_dir / "results" / f"live_fetch-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json(
        path,
        {
            "machine": info,
            "args": {k: str(v) for k, v in vars(args).items()},
            "code_root": str(code),
            "root": str(ROOT),
            "fills": fills,
            "data_sets": facts,
            "runs": runs,
            **summary,
            "problems": problems,
            "report": text,
        },
    )
    log(f"results: {path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
