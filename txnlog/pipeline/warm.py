"""The install-time warm-up: every decoder kernel the readers call, compiled once into numba's cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING

import numpy as np

from txnlog.kafka import jit
from txnlog.kafka.crc import crc32c
from txnlog.kafka.framing import whole_entries
from txnlog.kafka.producer_snapshot import decode_producer_snapshots
from txnlog.kafka.segment_files import scan_segments
from txnlog.sources.logdirs import discover

if TYPE_CHECKING:
    from txnlog.pipeline.scope import Progress


def warm_decoders(progress: Progress | None = None) -> None:
    """Compile every decoder kernel the Spark readers call, once, into numba's on-disk cache.

    Runs the readers themselves (no Spark) over a small generated cluster (markers,
    ``__transaction_state``, producer snapshots), so exactly the functions and argument types the
    executors use get compiled; afterwards no Spark worker compiles (benchmarks/RESULTS.md E3).
    Idempotent: with a warm cache it only loads it. ``scripts/bootstrap.sh`` calls it when
    ``python txnlog/kafka/jit.py --is-warm`` says the cache does not match the sources.
    """

    # Lazy: the broker-log writer serves only this install-time warm-up.
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import TxnStateSource

    fingerprint = jit.sources_fingerprint()
    work = tempfile.mkdtemp(prefix="txnlog-warm-")
    try:
        write_scenario("coordinator_completed", os.path.join(work, "logs"), seed=1)
        inventory = discover([os.path.join(work, "logs")])
        for source, files in (
            (SegmentsSource, list(inventory.segments) + list(inventory.snapshots)),
            (TxnStateSource, list(inventory.txn_state_segments)),
        ):
            reader = source({"files": files_option(files), "check_crc": "true"}).reader(None)  # type: ignore[arg-type]  # these sources have a fixed schema; reader() ignores it
            for part in reader.partitions():
                for _ in reader.read(part):
                    pass
        crc32c(bytearray(b"txnlog"))  # the kafka-dump-log.sh reader's CRC on buffers that are not bytes
        whole_entries(np.zeros(12, np.uint8))  # the Kafka source's framing of Fetch responses (txnlog.live.fetch)
        # a task's small segments and snapshots into its merge, decoded as one (txnlog.engine.segment_group)
        scan_segments(np.zeros(0, np.uint8), np.zeros(1, np.int64), [])
        decode_producer_snapshots(np.zeros(0, np.uint8), np.zeros(1, np.int64), [])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    jit.mark_warm(fingerprint)
    if progress:
        progress(f"decoders compiled and cached in {jit.cache_dir()}")
