"""Transaction-dense benchmark input: Kafka Streams exactly-once traffic across hundreds of partitions.

A Kafka Streams application with ``processing.guarantee=exactly_once_v2`` commits every
``commit.interval.ms`` (100 ms by default under EOS): each stream thread's producer ends one
transaction per interval, covering every partition it wrote since the last commit. With hundreds
of partitions (output, repartition and changelog topics) that is hundreds of thousands of small
transactions per GiB, each partition holding a data batch and a COMMIT marker per commit -- the
workload where a per-transaction cost shows, which :func:`txnlog.brokerlog.scenarios.bulk` (a few
large transactions) does not exercise.

:func:`dense` writes such a cluster: ``producers`` transactional producers (TV2: the epoch is
bumped at every transaction end, KIP-890) in lock step, one round per 100 ms. In a round each
producer adds its partitions (an ``Ongoing`` record in ``__transaction_state``), writes one data
batch to each, ends the transaction (``PrepareCommit``), the markers are appended, and the
coordinator completes it (``CompleteCommit``). Output topics have several writers per partition
(their transactions overlap in the log: every writer's data batch, then every writer's marker);
changelog topics one. A few transactions abort (~0.2 %), as a rebalance makes them. Everything is
committed or aborted by the end: no open transaction, no finding.

Speed: the ``__transaction_state`` records go through the coordinator (one Python call per
record, ~3 per producer and round); the partitions' bytes are built with numpy, a whole partition
at a time, from pre-encoded payloads (:func:`~txnlog.brokerlog.encode.encode_data_batches`, also for
the markers). Each partition's log is written in units of one round (the writers' data batches and
their markers): a segment rolls between units, so a segment can end up to one unit short of
``segment.bytes``; the offset index points at the first batch of a unit with the unit's last offset
(a sparse but valid index).

A hot partition (``hot_fraction``): one more topic, ``dense-hot``, of one partition written by every
producer in every round (a small data batch each, so it is as transaction-dense as the rest), in
``hot_segment_bytes`` segments with their offset indexes; the other topics then take part in every
k-th round only, k chosen so that the hot partition holds about ``hot_fraction`` of the data bytes
(whole rounds: a little more or less at a small size). Every producer ends a transaction every round,
so its epoch (bumped at every end, TV2) grows by one per round: more ``producers`` make the hot
partition's rounds bigger and keep it below Kafka's limit of 32,767 (an error says so otherwise).

The shape of a real cluster's copy (many quiet partitions of small segments beside a few hot ones) is
:mod:`txnlog.brokerlog.small_segments`, the same traffic laid out otherwise.

The ground truth (:class:`DenseResult`) is compact: counts per partition and one row per
transaction in numpy arrays (``transactions.npz``), not a JSON object per transaction.

>>> import tempfile
>>> r = dense(tempfile.mkdtemp(), total_bytes=4 << 20)
>>> r.transactions > 1000, r.findings, r.open_transactions
(True, [], 0)
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import Cluster
from txnlog.brokerlog.dense_rounds import Rounds, append_rounds, encode_rounds, marker_payload
from txnlog.brokerlog.encode import EncodedRecords, RecordSpec
from txnlog.brokerlog.partition import PartitionLog
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, ControlType

__all__ = [
    "DEFAULT_TOPICS",
    "HOT_TOPIC",
    "DenseResult",
    "DenseTopic",
    "dense",
]

KiB = 1024
MiB = 1024 * KiB

COMMIT_INTERVAL_MS = 100  # Kafka Streams' commit.interval.ms default under exactly-once
#: Offsets of a producer's steps inside its round (ms after the round starts; producer j adds j).
_ONGOING_MS, _DATA_MS, _PREPARE_MS, _MARKER_MS, _COMPLETE_MS = 4, 5, 79, 80, 96


@dataclass(frozen=True)
class DenseTopic:
    """One topic of the mix."""

    name: str
    partitions: int
    segment_bytes: int
    batch_bytes: int  # a data batch, header included (compressed size for compressed topics)
    compression: Compression
    writers: int  # producers writing each partition (output/repartition topics: several; changelogs: one)
    period: int  # a partition takes part in every ``period``-th commit of its writers


#: 685 partitions, segment.bytes from 256 KiB to 256 MiB; ~2.8 KB per transaction and partition
#: (≈ 385,000 transactions per GiB).
DEFAULT_TOPICS: tuple[DenseTopic, ...] = (
    DenseTopic("dense-orders", 12, 256 * MiB, 16 * KiB, Compression.LZ4, 4, 1),
    DenseTopic("dense-payments", 48, 64 * MiB, 2 * KiB, Compression.ZSTD, 2, 1),
    DenseTopic("dense-store-changelog", 125, 16 * MiB, 1 * KiB, Compression.NONE, 1, 1),
    DenseTopic("dense-agg-changelog", 250, 1 * MiB, 512, Compression.NONE, 1, 2),
    DenseTopic("dense-repartition", 250, 256 * KiB, 256, Compression.NONE, 1, 4),
)

#: the topic of the hot partition (``dense(hot_fraction=...)``)
HOT_TOPIC = "dense-hot"


@dataclass
class DenseResult:
    """Ground truth of a :func:`dense` cluster (what the job's tables must hold)."""

    name: str
    root: Path
    as_of_ms: int
    transactions: int
    outcomes: dict[str, int]
    #: ``"topic-partition"`` -> {"COMMIT": n, "ABORT": n, "log_end_offset": n, "writers": n}
    partitions: dict[str, dict[str, int]]
    #: one entry per transaction and partition: topic index (into ``topics``), partition, producer id,
    #: first offset, last offset, marker offset, outcome (1 COMMIT, 0 ABORT)
    arrays: dict[str, np.ndarray]
    topics: list[str]
    rounds: int
    producers: int
    coordinator_records: int
    bytes_written: int
    files_written: int
    elapsed_s: float
    notes: dict[str, object] = field(default_factory=dict)
    findings: list[object] = field(default_factory=list)
    quarantine: list[object] = field(default_factory=list)
    open_transactions: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "root": str(self.root),
            "as_of_ms": self.as_of_ms,
            "transactions_count": self.transactions,
            "outcomes": self.outcomes,
            "partitions": self.partitions,
            "topics": self.topics,
            "rounds": self.rounds,
            "producers": self.producers,
            "coordinator_records": self.coordinator_records,
            "findings": [],
            "quarantine": [],
            "open_transactions": [],
            "bytes_written": self.bytes_written,
            "files_written": self.files_written,
            "elapsed_s": self.elapsed_s,
            "notes": self.notes,
            "transactions_npz": "transactions.npz",
        }

    def write_json(self, path: str | Path) -> Path:
        """The counts as JSON at ``path``, every transaction in ``transactions.npz`` next to it."""
        path = Path(path)
        np.savez(path.with_name("transactions.npz"), allow_pickle=True, **self.arrays)  # numpy's default
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    def summary(self) -> str:
        return (
            f"{self.name}: {self.transactions:,} transactions ({self.outcomes}) on {len(self.partitions)} partitions, "
            f"{self.rounds} rounds of {self.producers} producers, {self.bytes_written / 1e6:.0f} MB in "
            f"{self.files_written} files, {self.elapsed_s:.1f} s"
        )


def _payload(c: Cluster, batch_bytes: int, compression: Compression, key_prefix: str) -> EncodedRecords:
    """Records whose encoded payload makes a batch of about ``batch_bytes`` (exact for NONE)."""
    target = max(8, batch_bytes - wire.RECORD_BATCH_OVERHEAD)

    def build(n: int, value_bytes: int) -> EncodedRecords:
        records = [
            RecordSpec(
                i,
                min(i, 3),
                f"{key_prefix}-{c.rng.randrange(100000):05d}".encode(),
                c.records.value(value_bytes, c.now + i),
            )
            for i in range(n)
        ]
        return encode.encode_records_payload(records, compression)

    if compression is Compression.NONE:
        value_bytes = max(24, target - 20)
        payload = build(1, value_bytes)
        for _ in range(8):  # the record framing is a few varints: converge on the exact size
            if len(payload.data) == target:
                break
            value_bytes = max(24, value_bytes + target - len(payload.data))
            payload = build(1, value_bytes)
        return payload
    n = 1
    while True:
        payload = build(n, 200)
        if len(payload.data) >= target or n >= 4096:
            return payload
        n += max(1, min(n, int(n * (target / max(1, len(payload.data)) - 1))))


@dataclass
class _Layout:
    """Who writes where: partitions, their writers and the rounds they take part in."""

    tps: list[tuple[DenseTopic, int]]
    writers: list[np.ndarray]  # per partition: producer indexes, ascending
    phase: list[int]
    by_producer: list[list[list[tuple[str, int]]]]  # [producer][round % cycle] -> partitions
    cycle: int


def _layout(topics: tuple[DenseTopic, ...], producers: int) -> _Layout:
    cycle = int(np.lcm.reduce([t.period for t in topics]))
    tps: list[tuple[DenseTopic, int]] = []
    writers: list[np.ndarray] = []
    phase: list[int] = []
    by_producer: list[list[list[tuple[str, int]]]] = [[[] for _ in range(cycle)] for _ in range(producers)]
    g = 0
    for t in topics:
        if t.writers > producers:
            raise ValueError(f"{t.name}: {t.writers} writers per partition but {producers} producers")
        stride = producers // t.writers
        for p in range(t.partitions):
            ws = np.array(
                sorted({(g + k * stride) % producers for k in range(t.writers)}),
                dtype=np.int64,
            )
            ph = (g // producers) % t.period
            tps.append((t, p))
            writers.append(ws)
            phase.append(ph)
            for j in ws.tolist():
                for r in range(ph, cycle, t.period):
                    by_producer[j][r].append((t.name, p))
            g += 1
    return _Layout(tps, writers, phase, by_producer, cycle)


def _round_bytes(t: DenseTopic, payload: EncodedRecords, marker_size: int) -> float:
    """A partition's bytes per round on average: each writer's data batch and marker, every ``period``-th round."""
    return t.writers * (wire.RECORD_BATCH_OVERHEAD + len(payload.data) + marker_size) / t.period


def _cooled(
    topics: tuple[DenseTopic, ...], payloads: dict[str, EncodedRecords], marker_size: int, fraction: float
) -> tuple[DenseTopic, ...]:
    """``topics`` with every topic but the hot one taking part in every k-th round only (its period times k),
    the least k that leaves the hot partition at least ``fraction`` of the bytes."""
    hot = sum(_round_bytes(t, payloads[t.name], marker_size) for t in topics if t.name == HOT_TOPIC)
    rest = sum(t.partitions * _round_bytes(t, payloads[t.name], marker_size) for t in topics if t.name != HOT_TOPIC)
    k = max(1, int(np.ceil(rest * fraction / (hot * (1.0 - fraction)))))
    return tuple(t if t.name == HOT_TOPIC else replace(t, period=t.period * k) for t in topics)


def _aborted(producers: int, rounds: int, seed: int, rate: float) -> np.ndarray:
    """[producer, round]: True for the transactions that abort (a rebalance, a task migration)."""
    rng = np.random.default_rng(seed)
    out = rng.random((producers, rounds)) < rate
    out[:, -1] = False  # the last round commits
    return out


def dense(
    out: str | Path,
    seed: int = 0,
    *,
    total_bytes: int = 1 << 30,
    producers: int = 16,
    topics: tuple[DenseTopic, ...] = DEFAULT_TOPICS,
    abort_rate: float = 0.002,
    overwrite: bool = False,
    hot_fraction: float = 0.0,
    hot_segment_bytes: int = 256 * MiB,
    hot_batch_bytes: int = 2 * KiB,
) -> DenseResult:
    """Write a transaction-dense cluster of about ``total_bytes`` of data segments under ``out``.

    ``producers`` EOS producers (stream threads) commit every 100 ms in lock step over ``topics``
    (default: :data:`DEFAULT_TOPICS`, 685 partitions); ``abort_rate`` of their transactions abort.
    ``hot_fraction`` > 0 adds the hot partition (:data:`HOT_TOPIC` partition 0, written by every producer
    every round in ``hot_batch_bytes`` batches and ``hot_segment_bytes`` segments) holding about that
    share of the data bytes (module doc). Returns the ground truth.
    """
    if not 0.0 <= hot_fraction < 1.0:
        raise ValueError(f"hot_fraction must be in [0, 1): {hot_fraction}")
    if hot_fraction > 0:
        if any(t.name == HOT_TOPIC for t in topics):
            raise ValueError(f"topic {HOT_TOPIC} is the hot partition's: rename it")
        hot = DenseTopic(HOT_TOPIC, 1, hot_segment_bytes, hot_batch_bytes, Compression.NONE, producers, 1)
        topics = (*topics, hot)
    started = time.perf_counter()
    out = _empty_dir(out, overwrite)
    c = Cluster(out, seed=seed, name="dense", broker_ids=(1,))
    for t in topics:
        c.create_topic(t.name, t.partitions, segment_bytes=t.segment_bytes)
    payloads = {t.name: _payload(c, t.batch_bytes, t.compression, t.name) for t in topics}
    marker_size = wire.RECORD_BATCH_OVERHEAD + len(marker_payload(ControlType.COMMIT, 0).data)
    if hot_fraction > 0:
        topics = _cooled(topics, payloads, marker_size, hot_fraction)
    layout = _layout(topics, producers)
    round_bytes = 0.0
    for (t, _p), ws in zip(layout.tps, layout.writers):
        round_bytes += ws.size * (wire.RECORD_BATCH_OVERHEAD + len(payloads[t.name].data) + marker_size) / t.period
    rounds = max(layout.cycle, int(np.ceil(total_bytes / round_bytes)))
    aborted = _aborted(producers, rounds, seed, abort_rate)
    txns = _coordinate(c, layout, producers, rounds, aborted)
    arrays, partitions = _write_partitions(c, topics, layout, payloads, txns, rounds, aborted)
    as_of = max(int(txns.round_start[-1]) + _COMPLETE_MS + (producers - 1) // 4, c.max_timestamp())
    c.close()
    files = [f for f in out.rglob("*") if f.is_file()]
    commits = int(arrays["outcome"].sum())
    total = int(arrays["outcome"].size)
    return DenseResult(
        name="dense",
        root=out,
        as_of_ms=as_of,
        transactions=total,
        outcomes={"COMMIT": commits, "ABORT": total - commits},
        partitions=partitions,
        arrays=arrays,
        topics=[t.name for t in topics],
        rounds=rounds,
        producers=producers,
        coordinator_records=txns.coordinator_records,
        bytes_written=sum(f.stat().st_size for f in files),
        files_written=len(files),
        elapsed_s=time.perf_counter() - started,
        notes={
            "topics": [t.__dict__ | {"compression": t.compression.name} for t in topics],
            "batch_bytes": {n: wire.RECORD_BATCH_OVERHEAD + len(pl.data) for n, pl in payloads.items()},
            "records_per_batch": {n: pl.record_count for n, pl in payloads.items()},
            "marker_bytes": marker_size,
            "commit_interval_ms": COMMIT_INTERVAL_MS,
        },
    )


def _empty_dir(out: str | Path, overwrite: bool) -> Path:
    """``out``, created, empty (emptied only with ``overwrite``)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} is not empty (use overwrite=True)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


@dataclass
class _Transactions:
    """The coordinator's side of every producer's rounds: producer ids, coordinator epochs, the producer epoch
    of each [producer, round]'s data and of its marker, each round's start time."""

    pids: np.ndarray
    coordinator_epochs: np.ndarray
    data_epoch: np.ndarray
    marker_epoch: np.ndarray
    round_start: np.ndarray
    coordinator_records: int


def _coordinate(c: Cluster, layout: _Layout, producers: int, rounds: int, aborted: np.ndarray) -> _Transactions:
    """The coordinator: three __transaction_state records per producer and round, in time order."""
    app = f"dense-app-{c.rng.getrandbits(64):016x}"
    txn_ids = [f"{app}-StreamThread-{j + 1}-producer" for j in range(producers)]
    clients = [c.transactional_producer(tid, transaction_version=2).init_transactions() for tid in txn_ids]
    coordinator = c.coordinator
    pids = np.array([p.producer_id for p in clients], dtype=np.int64)
    coordinator_epochs = np.array([coordinator.coordinator_epoch(tid) for tid in txn_ids], dtype=np.int64)
    data_epoch = np.empty((producers, rounds), dtype=np.int64)
    marker_epoch = np.empty((producers, rounds), dtype=np.int64)
    start = c.now + 1000
    round_start = start + COMMIT_INTERVAL_MS * np.arange(rounds, dtype=np.int64)
    records_before = len(coordinator.records)
    for r in range(rounds):
        base = int(round_start[r])
        for j, tid in enumerate(txn_ids):
            c.clock.now_ms = base + _ONGOING_MS + j
            coordinator.add_partitions(tid, layout.by_producer[j][r % layout.cycle], 2)
            meta = coordinator.metadata[tid]
            data_epoch[j, r] = meta.producer_epoch
        for j, tid in enumerate(txn_ids):
            c.clock.now_ms = base + _PREPARE_MS + j
            # Prepare* now; the markers are appended below, a partition at a time (numpy)
            coordinator.end_transaction(tid, commit=not aborted[j, r], deliver_markers_to=())
            meta = coordinator.metadata[tid]
            if meta.producer_id != pids[j]:
                raise AssertionError(f"{tid}: producer id rolled over (epoch exhausted): fewer rounds, more producers")
            marker_epoch[j, r] = meta.producer_epoch
        for j, tid in enumerate(txn_ids):
            c.clock.now_ms = base + _COMPLETE_MS + j // 4
            coordinator.metadata[tid].pending_markers = set()  # written by _write_partition
            coordinator.deliver_pending_markers(tid)  # Complete*
    coordinator_records = len(coordinator.records) - records_before
    c.clock.now_ms = int(round_start[-1]) + COMMIT_INTERVAL_MS
    return _Transactions(pids, coordinator_epochs, data_epoch, marker_epoch, round_start, coordinator_records)


def _write_partitions(
    c: Cluster,
    topics: tuple[DenseTopic, ...],
    layout: _Layout,
    payloads: dict[str, EncodedRecords],
    txns: _Transactions,
    rounds: int,
    aborted: np.ndarray,
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """Every partition's rounds (:func:`_write_partition`); returns the transactions' columns and each
    partition's counts."""
    topic_index = {t.name: i for i, t in enumerate(topics)}
    names = ("topic", "partition", "producer_id", "first_offset", "last_offset", "marker_offset", "outcome")
    columns: dict[str, list[np.ndarray]] = {k: [] for k in names}
    partitions: dict[str, dict[str, int]] = {}
    marker_payloads: dict[tuple[int, int], EncodedRecords] = {}
    for (t, p), ws, ph in zip(layout.tps, layout.writers, layout.phase):
        ts_rounds = np.arange(ph, rounds, t.period, dtype=np.int64)
        log = c.partition(t.name, p).leader_log
        if ts_rounds.size == 0:
            partitions[f"{t.name}-{p}"] = {"COMMIT": 0, "ABORT": 0, "log_end_offset": 0, "writers": int(ws.size)}
            continue
        first, marker, outcome = _write_partition(log, payloads[t.name], ws, ts_rounds, txns, aborted, marker_payloads)
        n = first.size
        per = payloads[t.name].last_offset_delta + 1
        columns["topic"].append(np.full(n, topic_index[t.name], dtype=np.int64))
        columns["partition"].append(np.full(n, p, dtype=np.int64))
        columns["producer_id"].append(np.broadcast_to(txns.pids[ws], (ts_rounds.size, ws.size)).ravel())
        columns["first_offset"].append(first)
        columns["last_offset"].append(first + per - 1)
        columns["marker_offset"].append(marker)
        columns["outcome"].append(outcome.astype(np.int8))
        commits = int(outcome.sum())
        partitions[f"{t.name}-{p}"] = {
            "COMMIT": commits,
            "ABORT": n - commits,
            "log_end_offset": log.log_end_offset,
            "writers": int(ws.size),
        }
    arrays = {k: np.concatenate(v) if v else np.empty(0, np.int64) for k, v in columns.items()}
    return arrays, partitions


def _write_partition(
    log: PartitionLog,
    payload: EncodedRecords,
    ws: np.ndarray,
    rounds: np.ndarray,
    txns: _Transactions,
    aborted: np.ndarray,
    marker_payloads: dict[tuple[int, int], EncodedRecords],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Append every round of one partition: per round, each writer's data batch, then each writer's marker.

    Returns, per transaction (round-major, writers in order): first offset, marker offset, committed.
    """
    k, m = rounds.size, ws.size
    per = payload.last_offset_delta + 1
    unit_offsets = m * per + m
    base = log.log_end_offset + unit_offsets * np.arange(k, dtype=np.int64)
    first = base[:, None] + per * np.arange(m, dtype=np.int64)[None, :]  # (k, m)
    marker = base[:, None] + m * per + np.arange(m, dtype=np.int64)[None, :]
    rounds_of = Rounds(
        ws=ws,
        per=per,
        base=base,
        first=first,
        marker=marker,
        data_ts=txns.round_start[rounds][:, None] + _DATA_MS + ws[None, :],
        marker_ts=txns.round_start[rounds][:, None] + _MARKER_MS + ws[None, :],
        epochs=txns.data_epoch[ws][:, rounds].T,
        m_epochs=txns.marker_epoch[ws][:, rounds].T,
        committed=~aborted[ws][:, rounds].T,
        producer=np.broadcast_to(txns.pids[ws], (k, m)),
        coordinator_epochs=txns.coordinator_epochs,
    )
    units = encode_rounds(log, payload, rounds_of, marker_payloads)
    append_rounds(log, units, rounds_of, base + unit_offsets - 1)
    return first.ravel(), marker.ravel(), rounds_of.committed.ravel()
