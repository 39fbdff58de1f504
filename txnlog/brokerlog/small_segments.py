"""A cluster shaped like a real one's copy: many quiet partitions whose segments are small (a segment rolls by
time as well as by size, ``segment.ms``), 1 to a few per partition with their ``.index``/``.timeindex`` files and
producer snapshots, beside a few hot partitions in large segments. The per-file cost of a reader shows there,
which :func:`txnlog.brokerlog.dense.dense`'s mixes (few, large segments) hide. The traffic is ``dense``'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from txnlog.brokerlog.dense import HOT_TOPIC, DenseResult, DenseTopic, KiB, MiB, dense
from txnlog.brokerlog.dense_rounds import marker_payload
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, ControlType

__all__ = ["small_batch_bytes", "small_partitions_for", "small_segments", "small_segments_topics"]


#: a data batch of the small partitions at least this big (and below twice it): ~2 KB a transaction and
#: partition, as transaction-dense as :data:`DEFAULT_TOPICS`
_SMALL_MIN_BATCH = 1 * KiB


def _small_classes(segments: tuple[int, int], segment_bytes: tuple[int, int], sizes: int) -> list[tuple[int, int]]:
    """The small partitions' classes: (segments, segment size), every count in ``segments`` times ``sizes`` sizes
    spread geometrically over ``segment_bytes``."""
    seg_sizes = sorted({int(round(x)) for x in np.geomspace(segment_bytes[0], segment_bytes[1], max(1, sizes))})
    return [(n, size) for n in range(segments[0], segments[1] + 1) for size in seg_sizes]


def small_partitions_for(
    small_bytes: float, segments: tuple[int, int], segment_bytes: tuple[int, int], sizes: int = 4
) -> int:
    """How many small partitions of :func:`small_segments` hold about ``small_bytes`` (each class's partition
    holds about (n - 1/2) segments of its size)."""
    per = float(np.mean([(n - 0.5) * size for n, size in _small_classes(segments, segment_bytes, sizes)]))
    return max(1, int(round(small_bytes / per)))


def small_batch_bytes(topics: tuple[DenseTopic, ...]) -> int:
    """The small partitions' data batch size per transaction: their bytes over their transactions, less a commit
    marker (each transaction of a partition is one data batch and its marker); what the hot partitions' batches are
    to hold the same transactions per byte."""
    marker = wire.RECORD_BATCH_OVERHEAD + len(marker_payload(ControlType.COMMIT, 0).data)
    small = [t for t in topics if t.name != HOT_TOPIC]
    transactions = sum(t.partitions * t.writers / t.period for t in small)
    size = sum(t.partitions * t.writers * (t.batch_bytes + marker) / t.period for t in small)
    return int(round(size / transactions)) - marker


def small_segments_topics(
    *,
    partitions: int,
    segments: tuple[int, int],
    segment_bytes: tuple[int, int],
    hot_partitions: int,
    hot_bytes: int,
    hot_segment_bytes: int,
    hot_batch_bytes: int | None,
    producers: int,
    sizes: int = 4,
) -> tuple[tuple[DenseTopic, ...], int]:
    """The topics of :func:`small_segments` and the rounds to write: (topics, rounds).

    The hot partitions are one topic (:data:`HOT_TOPIC`) written by every producer every round in
    ``hot_batch_bytes`` batches, so the rounds are what brings each to ``hot_bytes``. The small partitions are
    split evenly over classes, one topic each: every count of segments in ``segments`` (inclusive) times
    ``sizes`` segment sizes spread geometrically over ``segment_bytes``. A class of ``n`` segments of ``S``
    bytes takes part in every ``period``-th round (a power of two, so the layout's cycle stays the largest
    period) with one writer and batches sized so that a partition ends with about (n - 1/2) × S bytes: n
    segments, the last half full.

    ``hot_batch_bytes=None`` gives the hot partitions the small ones' batch size (:func:`small_batch_bytes`), so
    both hold the same transactions per byte: the layout is settled again with it until the size stays put."""
    if hot_batch_bytes is None:
        batch = 2 * KiB
        for _ in range(8):
            laid, rounds = small_segments_topics(
                partitions=partitions, segments=segments, segment_bytes=segment_bytes, hot_partitions=hot_partitions,
                hot_bytes=hot_bytes, hot_segment_bytes=hot_segment_bytes, hot_batch_bytes=batch,
                producers=producers, sizes=sizes,
            )  # fmt: skip
            if not partitions or abs(small_batch_bytes(laid) - batch) <= 1:
                break
            batch = small_batch_bytes(laid)
        return laid, rounds
    if partitions < 0 or hot_partitions < 0 or partitions + hot_partitions == 0:
        raise ValueError("no partitions to write")
    lo_n, hi_n = segments
    lo_s, hi_s = segment_bytes
    if not 1 <= lo_n <= hi_n or not 0 < lo_s <= hi_s:
        raise ValueError(f"segments {segments} and segment_bytes {segment_bytes} must be ascending and positive")
    marker = wire.RECORD_BATCH_OVERHEAD + len(marker_payload(ControlType.COMMIT, 0).data)
    hot_unit = producers * (hot_batch_bytes + marker)
    rounds = max(1, int(np.ceil(hot_bytes / hot_unit))) if hot_partitions else 0
    classes = _small_classes(segments, segment_bytes, sizes)
    if not rounds:  # no hot partition: enough rounds for the largest class at the smallest batch
        rounds = int(np.ceil((hi_n - 0.5) * hi_s / (_SMALL_MIN_BATCH + marker)))
    topics: list[DenseTopic] = []
    for i, (n, size) in enumerate(classes):
        count = partitions // len(classes) + (1 if i < partitions % len(classes) else 0)
        if count == 0:
            continue
        target = (n - 0.5) * size
        period = 1 << max(0, int(np.floor(np.log2(max(1.0, rounds * (_SMALL_MIN_BATCH + marker) / target)))))
        period = min(period, 1 << int(np.floor(np.log2(rounds))))
        batch = max(_SMALL_MIN_BATCH, int(target * period / rounds) - marker)
        topics.append(DenseTopic(f"small-{n}x{size // KiB}k", count, size, batch, Compression.NONE, 1, period))
    if hot_partitions:
        topics.append(
            DenseTopic(HOT_TOPIC, hot_partitions, hot_segment_bytes, hot_batch_bytes, Compression.NONE, producers, 1)
        )
    return tuple(topics), rounds


def small_segments(
    out: str | Path,
    seed: int = 0,
    *,
    partitions: int = 684,
    segments: tuple[int, int] = (1, 4),
    segment_bytes: tuple[int, int] = (16 * KiB, 1 * MiB),
    hot_partitions: int = 1,
    hot_bytes: int = 512 * MiB,
    hot_segment_bytes: int = 256 * MiB,
    hot_batch_bytes: int | None = 2 * KiB,
    producers: int | None = None,
    abort_rate: float = 0.002,
    overwrite: bool = False,
) -> DenseResult:
    """A cluster shaped like a real one's copy: ``partitions`` quiet partitions of ``segments`` (a range) small
    segments of ``segment_bytes`` (a range) each, and ``hot_partitions`` partitions of about ``hot_bytes`` each
    in ``hot_segment_bytes`` segments of ``hot_batch_bytes`` batches (``None``: the small partitions' size, so
    both hold the same transactions per byte); every segment with its offset and time index, as a broker writes them
    (the topics: :func:`small_segments_topics`). The traffic is :func:`dense`'s (exactly-once producers
    committing every 100 ms, every transaction closed); ``producers`` by default enough to keep their epochs
    (one per round) below Kafka's limit. Returns the ground truth.

    >>> import tempfile
    >>> r = small_segments(tempfile.mkdtemp(), partitions=24, hot_bytes=2 << 20)
    >>> len(r.partitions), sum(1 for p in r.partitions if p.startswith("small-4x")), r.open_transactions
    (25, 4, 0)
    """
    if producers is None:  # at most ~30,000 rounds: each bumps every producer's epoch once (TV2)
        per_round = (hot_batch_bytes or _SMALL_MIN_BATCH) + wire.RECORD_BATCH_OVERHEAD + 16
        producers = 16 * max(1, int(np.ceil(hot_bytes / (30_000 * 16 * per_round))))
    topics, rounds = small_segments_topics(
        partitions=partitions,
        segments=segments,
        segment_bytes=segment_bytes,
        hot_partitions=hot_partitions,
        hot_bytes=hot_bytes,
        hot_segment_bytes=hot_segment_bytes,
        hot_batch_bytes=hot_batch_bytes,
        producers=producers,
    )
    marker = wire.RECORD_BATCH_OVERHEAD + len(marker_payload(ControlType.COMMIT, 0).data)
    round_bytes = sum(t.partitions * t.writers * (t.batch_bytes + marker) / t.period for t in topics)
    result = dense(
        out,
        seed,
        total_bytes=int(rounds * round_bytes) - 1,  # dense's rounds: ceil(total / round bytes) = rounds
        producers=producers,
        topics=topics,
        abort_rate=abort_rate,
        overwrite=overwrite,
    )
    result.name = "small_segments"
    return result
