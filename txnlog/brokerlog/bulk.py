"""Bulk data for the benchmarks: a cluster of a given size, mostly large batches of committed transactions."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import (
    Cluster,
    IdempotentProducer,
    TopicPartition,
    TransactionalProducer,
)
from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.brokerlog.situations import situation_no_transactional_id
from txnlog.brokerlog.truth import assemble
from txnlog.brokerlog.workload import HOUR, MAX_TIMEOUT, prepare_out
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression

# ---------------------------------------------------------------------------
# Bulk data for benchmarks
# ---------------------------------------------------------------------------


def _payload_of_size(c: Cluster, target: int, compression: Compression, key_prefix: str) -> encode.EncodedRecords:
    """Records whose encoded (compressed) payload is close to ``target`` bytes (exact for NONE)."""
    rng = c.rng

    def build(n: int, value_bytes: int) -> encode.EncodedRecords:
        records = [
            encode.RecordSpec(
                i,
                min(i, 3),
                f"{key_prefix}-{rng.randrange(100000):05d}".encode(),
                c.records.value(value_bytes, c.now + i),
            )
            for i in range(n)
        ]
        return encode.encode_records_payload(records, compression)

    if compression is Compression.NONE:
        value_bytes = max(24, target - 20)
        for _ in range(8):  # the record framing is a few varints: converge on the exact size
            payload = build(1, value_bytes)
            if len(payload.data) == target:
                break
            value_bytes = max(24, value_bytes + target - len(payload.data))
        return payload
    n = 1
    while True:
        payload = build(n, 240)
        if len(payload.data) >= target or n >= 4096:
            return payload
        n += max(1, min(n, int(n * (target / max(1, len(payload.data)) - 1))))


def bulk(
    out: str | Path,
    seed: int = 0,
    *,
    total_bytes: int = 1 << 30,
    batch_bytes: int = 1024,
    partitions: int = 64,
    segment_bytes: int = 256 * 1024 * 1024,
    small_batch_bytes: int = 150,
    small_fraction: float = 0.2,
    large_partitions: int = 4,
    overwrite: bool = False,
) -> ScenarioResult:
    """Benchmark input of about ``total_bytes``: ``large_partitions`` big partitions (``segment_bytes``
    segments, ``batch_bytes`` batches) and ``partitions`` small ones (~150-byte batches).
    ``large_partitions=1, partitions=0``: one hot partition holding (nearly) every byte.

    Transactional (TV2) runs with COMMIT/ABORT markers and ``__transaction_state``
    records, idempotent runs in between, and two hanging transactions
    (NO_TRANSACTIONAL_ID) to find. Uses the pre-encoded payload fast path.
    """
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c = Cluster(out, seed=seed, name="bulk", broker_ids=(1,))
    large_parts = large_partitions
    c.create_topic("bulk-large", large_parts, segment_bytes=segment_bytes)
    c.create_topic("bulk-small", partitions, segment_bytes=min(segment_bytes, 64 * 1024 * 1024))
    codecs = (Compression.LZ4, Compression.ZSTD, Compression.NONE, Compression.SNAPPY)
    large_payloads = [
        _payload_of_size(c, batch_bytes - wire.RECORD_BATCH_OVERHEAD, codecs[i % len(codecs)], "bulk-large")
        for i in range(large_parts)
    ]
    small_payload = _payload_of_size(
        c, max(8, small_batch_bytes - wire.RECORD_BATCH_OVERHEAD), Compression.NONE, "bulk-small"
    )
    large_sizes = [wire.RECORD_BATCH_OVERHEAD + len(p.data) for p in large_payloads]
    small_size = wire.RECORD_BATCH_OVERHEAD + len(small_payload.data)
    small_total = int(total_bytes * small_fraction) if partitions else 0
    large_counts = [max(1, (total_bytes - small_total) // large_parts // size) for size in large_sizes]
    small_batches = small_total // small_size // partitions if partitions else 0

    # Two hanging transactions early on.
    intents = situation_no_transactional_id(c, ("bulk-large", 0), txn_id="bulk-loader-1")
    if partitions:
        intents += situation_no_transactional_id(c, ("bulk-small", 0), txn_id="bulk-loader-2")

    _bulk_rounds(c, codecs, large_payloads, large_counts, small_payload, small_batches, partitions)
    c.advance(MAX_TIMEOUT // 10)
    plain = c.plain_producer()
    records, _ = c.records.batch(end_ts=c.now, n_records=1, value_bytes=100, key_prefix="bulk-large", linger_ms=0)
    plain.send("bulk-large", 1 % large_parts, records=records)
    c.close()
    result = assemble(
        c,
        name="bulk",
        description=f"benchmark data, ~{total_bytes / 2**20:.0f} MiB",
        intents=intents,
        elapsed_s=time.perf_counter() - started,
        notes={
            "large_batch_bytes": large_sizes,
            "small_batch_bytes": small_size,
            "large_batches_per_partition": large_counts,
            "small_batches_per_partition": small_batches,
        },
    )
    return result


def _bulk_rounds(
    c: Cluster,
    codecs: tuple[Compression, ...],
    large_payloads: list[encode.EncodedRecords],
    large_counts: list[int],
    small_payload: encode.EncodedRecords,
    small_batches: int,
    partitions: int,
) -> None:
    """Two hours of :func:`bulk`'s traffic in rounds: each big partition's batches alternate between a
    transaction (every fifth aborted) and an idempotent run; the small partitions get idempotent runs."""
    large_parts = len(large_payloads)
    unit_large = 512
    unit_small = 512
    rounds = max(1, -(-max(large_counts) // unit_large), -(-small_batches // unit_small) if partitions else 1)
    duration = 2 * HOUR
    round_ms = max(1, duration // rounds)
    txn_producers = [
        c.transactional_producer(
            f"bulk-writer-{i}", transaction_version=2, compression=codecs[i % len(codecs)]
        ).init_transactions()
        for i in range(large_parts)
    ]
    idem_large = [c.idempotent_producer() for _ in range(large_parts)]
    idem_small = [c.idempotent_producer() for _ in range(min(partitions, 16))]
    remaining_large = list(large_counts)
    remaining_small = [small_batches] * partitions
    for r in range(rounds):
        round_start = c.now
        for i in range(large_parts):
            n = min(unit_large, remaining_large[i])
            if n <= 0:
                continue
            remaining_large[i] -= n
            ts = c.now + (np.arange(n, dtype=np.int64) * round_ms) // max(n, 1)
            if r % 2 == 0:
                p = txn_producers[i]
                p.begin_transaction()
                _bulk_send(c, p, ("bulk-large", i), large_payloads[i], n, ts, transactional=True)
                c.clock.now_ms = int(ts[-1]) + 1
                p.abort_transaction() if r % 10 == 4 else p.commit_transaction()
            else:
                _bulk_send(c, idem_large[i], ("bulk-large", i), large_payloads[i], n, ts, transactional=False)
        for j in range(partitions):
            n = min(unit_small, remaining_small[j])
            if n <= 0:
                continue
            remaining_small[j] -= n
            ts = round_start + (np.arange(n, dtype=np.int64) * round_ms) // max(n, 1)
            _bulk_send(c, idem_small[j % len(idem_small)], ("bulk-small", j), small_payload, n, ts, transactional=False)
        c.advance_to(round_start + round_ms)


def _bulk_send(
    c: Cluster,
    producer: IdempotentProducer | TransactionalProducer,
    tp: TopicPartition,
    payload: encode.EncodedRecords,
    n: int,
    base_timestamps: np.ndarray,
    *,
    transactional: bool,
) -> None:
    if transactional:
        assert isinstance(producer, TransactionalProducer)
        producer._ensure_partition(tp)
    per = payload.last_offset_delta + 1
    seq = producer._sequences.get(tp, 0)
    producer._sequences[tp] = (seq + n * per) % (1 << 31)
    for log in c.partition(*tp).logs.values():
        log.append_data_batches(
            payload,
            count=n,
            base_timestamps=base_timestamps,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            first_sequence=seq,
            is_transactional=transactional,
        )
