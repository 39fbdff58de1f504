"""Named scenarios: broker log-dir trees with known answers.

Each scenario writes ``<out>/broker-<id>/...`` (one Kafka log dir per broker)
and returns a :class:`~txnlog.brokerlog.ground_truth.ScenarioResult` with the
ground truth: open transactions, expected findings (verdict, reason, safety per
docs/design.md §4), COMMIT/ABORT counts per partition, coordinator state, expected
quarantine rows, and ``as_of_ms`` — the newest broker-written timestamp in the
written input (markers, ``__transaction_state``, LogAppendTime; the last batch goes to a
LogAppendTime topic), which is what the job uses when ``--as-of`` is not given. Healthy
traffic keeps running on other partitions up to ``as_of`` so that the
hanging transactions are old by the input's own clock.

>>> import tempfile
>>> r = write_scenario("coordinator_completed", tempfile.mkdtemp())
>>> [(f.verdict, f.reason) for f in r.findings]
[('HANGING', 'COORDINATOR_COMPLETED')]

Scenario names: see :data:`SCENARIOS`; ``bulk`` takes size parameters.
"""

from __future__ import annotations

import copy
import functools
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from txnlog.brokerlog import encode
from txnlog.brokerlog.blocked_groups import BLOCKED_SCENARIOS
from txnlog.brokerlog.cluster import (
    Cluster,
    IdempotentProducer,
    PlainProducer,
    ProducerFencedError,
    TopicPartition,
    TransactionalProducer,
)
from txnlog.brokerlog.cluster import internal_partitions as cluster_internal_partitions
from txnlog.brokerlog.extreme import DESCRIPTION as EXTREME_VALUES
from txnlog.brokerlog.extreme import PARTITIONS as EXTREME_PARTITIONS
from txnlog.brokerlog.extreme import write_extreme_values  # values at the limits of their types
from txnlog.brokerlog.ground_truth import HANGING, LATE, Intent, ScenarioResult, assemble
from txnlog.brokerlog.integrity_faults import INTEGRITY_SCENARIOS
from txnlog.brokerlog.partition import PartitionLog
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, TimestampType

__all__ = ["SCENARIOS", "Workload", "bulk", "scenario_names", "write_scenario"]

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
MAX_TIMEOUT = wire.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS


# ---------------------------------------------------------------------------
# Healthy traffic
# ---------------------------------------------------------------------------


@dataclass
class _TxnApp:
    transactional_id: str
    transaction_version: int
    compression: Compression
    partitions: list[TopicPartition]
    abort_rate: float = 0.1
    crash_rate: float = 0.0
    group_id: str | None = None
    timeout_ms: int = 60_000
    value_bytes: int = 300
    producer: TransactionalProducer | None = None
    down_until: int = -1


def _send_to_one_of(rng: random.Random, producer: PlainProducer, tps: list[TopicPartition]) -> None:
    producer.send(*rng.choice(tps))


@dataclass
class Workload:
    """Background traffic: plain, idempotent and transactional producers on their own partitions.

    Every transaction it starts it also ends (or crashes, and the coordinator
    aborts it on timeout), so it never leaves a finding behind.
    """

    cluster: Cluster
    plain: list[tuple[PlainProducer, list[TopicPartition]]] = field(default_factory=list)
    idempotent: list[tuple[IdempotentProducer, list[TopicPartition]]] = field(default_factory=list)
    apps: list[_TxnApp] = field(default_factory=list)
    mean_gap_ms: int = 1500

    def add_plain(
        self, partitions: list[TopicPartition], compression: Compression = Compression.NONE, **kw: Any
    ) -> None:
        self.plain.append((self.cluster.plain_producer(compression=compression, **kw), partitions))

    def add_idempotent(
        self, partitions: list[TopicPartition], compression: Compression = Compression.NONE, **kw: Any
    ) -> None:
        self.idempotent.append((self.cluster.idempotent_producer(compression=compression, **kw), partitions))

    def add_app(self, app: _TxnApp) -> None:
        self.apps.append(app)

    def _producer(self, app: _TxnApp) -> TransactionalProducer | None:
        c = self.cluster
        if app.down_until > c.now:
            return None
        if app.producer is None or app.producer.crashed:
            app.producer = c.transactional_producer(
                app.transactional_id,
                transaction_version=app.transaction_version,
                transaction_timeout_ms=app.timeout_ms,
                compression=app.compression,
                value_bytes=app.value_bytes,
            ).init_transactions()
        return app.producer

    def _run_app(self, app: _TxnApp) -> None:
        c = self.cluster
        rng = c.rng
        p = self._producer(app)
        if p is None:
            return
        try:
            p.begin_transaction()
            targets = rng.sample(app.partitions, k=rng.randint(1, min(3, len(app.partitions))))
            for tp in targets:
                for _ in range(rng.randint(1, 2)):
                    p.send(*tp)
            if app.group_id is not None:
                p.send_offsets_to_transaction(
                    app.group_id, {("upstream-" + tp[0], tp[1]): rng.randrange(1 << 20) for tp in targets}
                )
            if rng.random() < app.crash_rate:
                p.crash()
                app.down_until = c.now + rng.choice((20_000, 90_000, 240_000))
                return
            if rng.random() < app.abort_rate:
                p.abort_transaction()
            else:
                p.commit_transaction()
        except ProducerFencedError:
            app.producer = None

    def step(self) -> None:
        c = self.cluster
        rng = c.rng
        choices: list[Callable[[], None]] = []
        for producer, tps in [*self.plain, *self.idempotent]:
            choices.append(functools.partial(_send_to_one_of, rng, producer, tps))
        for app in self.apps:
            choices.append(functools.partial(self._run_app, app))
        if choices:
            rng.choice(choices)()

    def run_until(self, end_ms: int) -> None:
        c = self.cluster
        while True:
            gap = int(c.rng.expovariate(1.0 / self.mean_gap_ms)) + 1
            if c.now + gap >= end_ms:
                break
            c.advance(gap)
            self.step()
        c.advance_to(end_ms)

    def finish(self) -> None:
        """Restart crashed apps so nothing is left for the coordinator to time out silently."""
        for app in self.apps:
            app.down_until = -1
            if app.producer is not None and app.producer.crashed:
                app.producer = None

    def final_batch(self, tp: TopicPartition | None = None) -> None:
        """One last plain batch at exactly the current time: it defines ``as_of``. It goes to a
        LogAppendTime topic when there is one, so that the broker's clock writes it (the job's rule)."""
        lat = [
            (p, t)
            for p, t in self.plain
            if self.cluster.partition(*t[0]).leader_log.timestamp_type == TimestampType.LOG_APPEND_TIME
        ]
        producer, tps = (lat or self.plain)[0]
        target = tp or tps[0]
        c = self.cluster
        records, _ = c.records.batch(end_ts=c.now, n_records=1, value_bytes=120, key_prefix=target[0], linger_ms=0)
        producer.send(*target, records=records)


def _standard_workload(
    c: Cluster, *, prefix: str = "", rf: int = 1, with_legacy: bool = True, tv_apps: tuple[int, ...] = (0, 1, 2, 2)
) -> Workload:
    """Topics and producers of an ordinary busy cluster (no faults)."""
    brokers = len(c.brokers)
    rf = min(rf, brokers)
    c.create_topic(f"{prefix}orders", 6, replication_factor=rf)
    c.create_topic(f"{prefix}payments", 3, replication_factor=rf)
    c.create_topic(f"{prefix}clicks", 4, replication_factor=1, segment_bytes=512 * 1024)
    c.create_topic(f"{prefix}inventory", 2, replication_factor=rf)
    c.create_topic(f"{prefix}audit", 1, replication_factor=rf, timestamp_type=TimestampType.LOG_APPEND_TIME)
    c.create_topic(f"{prefix}customers", 1, replication_factor=rf, compacted=True)
    w = Workload(c)
    w.add_plain(
        [(f"{prefix}clicks", p) for p in range(4)], Compression.SNAPPY, value_bytes=160, records_per_batch=(5, 40)
    )
    w.add_plain([(f"{prefix}audit", 0)], Compression.NONE, value_bytes=90)
    w.add_idempotent([(f"{prefix}inventory", p) for p in range(2)], Compression.GZIP, value_bytes=220)
    w.add_idempotent([(f"{prefix}customers", 0)], Compression.NONE, value_bytes=300, records_per_batch=(1, 3))
    codecs = (Compression.LZ4, Compression.ZSTD, Compression.NONE, Compression.GZIP, Compression.SNAPPY)
    for i, tv in enumerate(tv_apps):
        w.add_app(
            _TxnApp(
                f"{prefix}order-service-{i}",
                tv,
                codecs[i % len(codecs)],
                [(f"{prefix}orders", p) for p in range(6)] + [(f"{prefix}payments", i % 3)],
                abort_rate=0.12,
                crash_rate=0.01 if i == 1 else 0.0,
                group_id=f"{prefix}order-enricher" if i % 2 == 0 else None,
            )
        )
    if with_legacy:
        c.create_topic(f"{prefix}legacy-events", 1, replication_factor=1)
        _write_legacy_prefix(c, (f"{prefix}legacy-events", 0))
        w.add_plain([(f"{prefix}legacy-events", 0)], Compression.GZIP, value_bytes=120)
    return w


def _write_legacy_prefix(c: Cluster, tp: TopicPartition) -> None:
    """Messages from pre-0.11 producers at the start of the log (magic 0, magic 1, a gzip wrapper)."""
    log = c.partition(*tp).leader_log
    t = c.now - 30 * DAY
    log.append_legacy(magic=0, messages=[(b"k%d" % i, b"legacy-v0-%d" % i, None) for i in range(3)])
    log.append_legacy(magic=1, messages=[(b"k%d" % i, b"legacy-v1-%d" % i, t + i) for i in range(3)])
    log.append_legacy(
        magic=1, messages=[(None, b"legacy-v1-gzip-%d" % i, t + 10 + i) for i in range(4)], compression=Compression.GZIP
    )


def _empty_control_batch(c: Cluster, tp: TopicPartition, producer_id: int, producer_epoch: int) -> None:
    """A control batch the cleaner emptied (zero records): readers ignore it."""
    c.partition(*tp).append(
        encode.encode_control_batch(offset=0, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=c.now)
    )


# ---------------------------------------------------------------------------
# Situations: each makes one known kind of open transaction
# ---------------------------------------------------------------------------


def _late_batch_after_abort(
    c: Cluster,
    txn_id: str,
    hang: TopicPartition,
    other: TopicPartition,
    *,
    tv: int = 1,
    compression: Compression = Compression.LZ4,
    timeout_ms: int = 60_000,
) -> TransactionalProducer:
    """KAFKA-14053: a produce request to ``hang`` is stuck in flight; the client aborts
    (delivery timeout), markers go out, then the stale request lands after the ABORT
    marker and opens a transaction nothing will end. Pre-KIP-890 brokers (before 3.6,
    or transaction.partition.verification.enable=false) accept it: same epoch."""
    p = c.transactional_producer(
        txn_id, transaction_version=tv, compression=compression, transaction_timeout_ms=timeout_ms
    ).init_transactions()
    p.begin_transaction()
    p.send(*other)
    stuck = p.send_deferred(*hang)
    p.send(*other)
    c.advance(c.rng.randint(2_000, 8_000))
    p.abort_transaction()
    c.advance(c.rng.randint(50, 400))
    stuck.deliver()
    return p


def _commit_elsewhere(c: Cluster, p: TransactionalProducer, tp: TopicPartition, n: int = 2) -> None:
    for _ in range(n):
        p.begin_transaction()
        p.send(*tp)
        p.commit_transaction()
        c.advance(c.rng.randint(500, 3_000))


def situation_coordinator_completed(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "payment-processor"
) -> list[Intent]:
    p = _late_batch_after_abort(c, txn_id, hang, other)
    _commit_elsewhere(c, p, other)  # the app carries on, never touching `hang` again
    return [Intent(HANGING, "COORDINATOR_COMPLETED", *hang, transactional_id=txn_id, label="KAFKA-14053 late batch")]


def situation_no_transactional_id(
    c: Cluster, hang: TopicPartition, txn_id: str = "legacy-batch-loader"
) -> list[Intent]:
    """A producer whose __transaction_state records are gone (the id expired long ago and
    the cleaner removed its records and tombstone): its pid is owned by nobody."""
    p = c.transactional_producer(txn_id, transaction_version=1, coordinator_records=False, compression=Compression.ZSTD)
    p.init_transactions()
    p.begin_transaction()
    p.send(*hang)
    c.advance(c.rng.randint(200, 2_000))
    p.send(*hang)
    p.crash()
    c.coordinator.stall(txn_id)
    return [
        Intent(HANGING, "NO_TRANSACTIONAL_ID", *hang, producer_id=p.producer_id, label="pid unknown to the coordinator")
    ]


def situation_transactional_id_expired(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "invoice-writer"
) -> list[Intent]:
    """A late batch (as KAFKA-14053), then the application is retired; 7 days later the
    coordinator expires the id and writes a tombstone. Advance the clock past expiry."""
    _late_batch_after_abort(c, txn_id, hang, other, compression=Compression.GZIP)
    return [Intent(HANGING, "TRANSACTIONAL_ID_EXPIRED", *hang, transactional_id=txn_id, label="owner tombstoned")]


def situation_partition_not_in_transaction_start(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "stock-sync"
) -> TransactionalProducer:
    # A 15-minute transaction timeout: its last transaction is still Ongoing at as_of.
    p = _late_batch_after_abort(c, txn_id, hang, other, tv=1, compression=Compression.SNAPPY, timeout_ms=MAX_TIMEOUT)
    _commit_elsewhere(c, p, other, n=1)
    return p


def situation_partition_not_in_transaction_finish(
    c: Cluster, p: TransactionalProducer, other: TopicPartition
) -> list[Intent]:
    """Minutes before as_of the owner opens a new transaction on another partition only."""
    p.begin_transaction()
    p.send(*other)
    return [
        Intent(HANGING, "PARTITION_NOT_IN_TRANSACTION", transactional_id=p.transactional_id, label="stale partition"),
        Intent(None, None, *other, producer_id=p.producer_id, label="owner's current transaction"),
    ]


def situation_markers_pending(
    c: Cluster, delivered: TopicPartition, pending: TopicPartition, txn_id: str = "ledger-sync"
) -> list[Intent]:
    """PrepareCommit written; the marker reached ``delivered`` but ``pending``'s leader never took it."""
    p = c.transactional_producer(txn_id, transaction_version=2, compression=Compression.ZSTD).init_transactions()
    p.begin_transaction()
    p.send(*delivered)
    p.send(*pending)
    p.send(*pending)
    p.commit_transaction(deliver_markers_to=[delivered])
    return [Intent(LATE, "MARKERS_PENDING", *pending, transactional_id=txn_id, label="PrepareCommit, marker missing")]


def situation_timeout_overdue(c: Cluster, hang: TopicPartition, txn_id: str = "cart-writer") -> list[Intent]:
    """The producer dies mid-transaction and its coordinator never runs the timeout abort."""
    p = c.transactional_producer(
        txn_id, transaction_version=2, transaction_timeout_ms=60_000, compression=Compression.LZ4
    )
    p.init_transactions()
    p.begin_transaction()
    p.send(*hang)
    c.advance(c.rng.randint(500, 5_000))
    p.send(*hang)
    p.crash()
    c.coordinator.stall(txn_id)
    return [
        Intent(LATE, "COORDINATOR_TIMEOUT_OVERDUE", *hang, transactional_id=txn_id, label="Ongoing past its timeout")
    ]


def situation_two_phase_in_doubt(c: Cluster, tps: list[TopicPartition], txn_id: str = "xa-bridge") -> list[Intent]:
    """KIP-939: a 2PC participant prepared, crashed and came back with keepPreparedTxn=true."""
    p = c.transactional_producer(txn_id, transaction_version=2, two_phase_commit=True, compression=Compression.NONE)
    p.init_transactions()
    p.begin_transaction()
    for tp in tps:
        p.send(*tp)
    p.crash()
    c.advance(c.rng.randint(5_000, 30_000))
    c.transactional_producer(txn_id, transaction_version=2, two_phase_commit=True).init_transactions(
        keep_prepared_txn=True
    )
    return [Intent(LATE, "TWO_PHASE_IN_DOUBT", *tp, transactional_id=txn_id, label="2PC in doubt") for tp in tps]


def situation_coordinator_stuck(c: Cluster, tps: list[TopicPartition], txn_id: str = "archiver") -> list[Intent]:
    """PrepareAbort whose markers never went out, for partitions that are not in the dump."""
    p = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.GZIP).init_transactions()
    p.begin_transaction()
    for tp in tps:
        p.send(*tp)
    p.abort_transaction(deliver_markers_to=[])
    return [Intent(LATE, "COORDINATOR_STUCK", transactional_id=txn_id, label="coordinator-only")]


def situation_ongoing_within_timeout(
    c: Cluster, tps: list[TopicPartition], txn_id: str = "report-builder"
) -> list[Intent]:
    p = c.transactional_producer(txn_id, transaction_version=2, transaction_timeout_ms=MAX_TIMEOUT).init_transactions()
    p.begin_transaction()
    for tp in tps:
        p.send(*tp)
    return [Intent(None, None, *tp, producer_id=p.producer_id, label="ongoing") for tp in tps]


def situation_tv2_rollover(
    c: Cluster, tps: list[TopicPartition], txn_id: str = "fx-rates", transactions: int = 8
) -> TransactionalProducer:
    """A TV2 id near epoch exhaustion: each end bumps the epoch; at 32766 the coordinator
    rolls over to NextProducerId (markers keep the old id at epoch 32767)."""
    c.coordinator.seed_transactional_id(txn_id, producer_epoch=32760, timeout_ms=60_000, client_transaction_version=2)
    p = c.transactional_producer(txn_id, transaction_version=2, compression=Compression.ZSTD)
    p.producer_id, p.producer_epoch = c.coordinator.init_producer_id(txn_id, timeout_ms=60_000)
    for i in range(transactions):
        p.begin_transaction()
        for tp in tps:
            p.send(*tp)
        if i % 3 == 2:
            p.abort_transaction()
        else:
            p.commit_transaction()
        c.advance(c.rng.randint(1_000, 10_000))
    return p


def situation_rolled_over_producer_id(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "fx-ledger"
) -> list[Intent]:
    """A KAFKA-14053 late batch leaves the id's producer id open on ``hang``; the application moves to
    transaction version 2, whose epoch bumps exhaust the epoch and roll the id over to a new producer id;
    the new producer's transactions list ``hang`` (one committed, the last left Ongoing past its timeout).
    Its markers carry the new producer id (``TransactionMarkerChannelManager.addTxnMarkersToSend`` sends
    ``txnMetadata.producerId``), so none ends the old producer's transaction: HANGING, as find-hanging
    says (no transactional.id's current producer id is the old one)."""
    c.coordinator.seed_transactional_id(txn_id, producer_epoch=32760, timeout_ms=60_000, client_transaction_version=1)
    first = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.LZ4).init_transactions()
    first.begin_transaction()
    first.send(*other)
    stuck = first.send_deferred(*hang)
    c.advance(c.rng.randint(2_000, 8_000))
    first.abort_transaction()  # transaction version 1: the markers keep the epoch
    c.advance(c.rng.randint(50, 400))
    stuck.deliver()
    old_pid = first.producer_id
    p = c.transactional_producer(txn_id, transaction_version=2, compression=Compression.ZSTD).init_transactions()
    while p.producer_id == old_pid:  # each end bumps the epoch; at 32766 the id rolls over
        p.begin_transaction()
        p.send(*other)
        p.commit_transaction()
        c.advance(c.rng.randint(1_000, 5_000))
    new_pid = p.producer_id
    p.begin_transaction()
    p.send(*hang)
    p.send(*other)
    p.commit_transaction()  # a COMMIT marker of the new producer id on `hang`
    c.advance(c.rng.randint(1_000, 5_000))
    p.begin_transaction()
    p.send(*hang)
    p.crash()
    c.coordinator.stall(txn_id)  # the new producer's transaction, listing `hang`, stays Ongoing
    return [
        Intent(HANGING, "NO_TRANSACTIONAL_ID", *hang, producer_id=old_pid, label="rolled-over producer id"),
        Intent(
            LATE,
            "COORDINATOR_TIMEOUT_OVERDUE",
            *hang,
            producer_id=new_pid,
            transactional_id=txn_id,
            label="the new producer id's transaction",
        ),
    ]


def situation_tv1_rotation(c: Cluster, tp: TopicPartition, txn_id: str = "fx-rates-legacy") -> None:
    """TV1 exhaustion is handled at InitProducerId: a new producer id at epoch 0."""
    c.coordinator.seed_transactional_id(txn_id, producer_epoch=32765, timeout_ms=60_000, client_transaction_version=1)
    for _ in range(2):
        p = c.transactional_producer(txn_id, transaction_version=1).init_transactions()
        p.begin_transaction()
        p.send(*tp)
        p.commit_transaction()
        c.advance(c.rng.randint(1_000, 5_000))


def situation_replica_lost_marker(
    c: Cluster, tp: TopicPartition, follower: int, other: TopicPartition, txn_id: str = "order-router"
) -> list[Intent]:
    """The COMMIT marker reached the leader; ``follower`` was cut off and never got it."""
    p = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.LZ4).init_transactions()
    p.begin_transaction()
    p.send(*tp)
    p.send(*other)
    rp = c.partition(*tp)
    rp.offline_followers.add(follower)
    p.commit_transaction()
    rp.offline_followers.discard(follower)
    _commit_elsewhere(c, p, other, n=1)
    return [
        Intent(
            HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label=f"marker lost on broker {follower}"
        )
    ]


# ---------------------------------------------------------------------------
# Scenario plumbing
# ---------------------------------------------------------------------------


def _prepare_out(out: str | Path, overwrite: bool) -> Path:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} is not empty (use overwrite=True / --force)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _finish(
    c: Cluster,
    w: Workload | None,
    *,
    name: str,
    description: str,
    intents: list[Intent],
    started: float,
    tail_ms: int = 2 * MINUTE,
    remove: Callable[[], object] | None = None,
    preallocate: tuple[TopicPartition, ...] = (),
    notes: dict[str, object] | None = None,
    before_close: Callable[[], object] | None = None,
) -> ScenarioResult:
    if w is not None:
        w.finish()
        w.run_until(c.now + tail_ms)
        w.final_batch()
    if before_close is not None:
        before_close()
    as_of = c.now
    c.close(preallocate_active_indexes=preallocate)
    if remove is not None:
        remove()
    result = assemble(
        c, name=name, description=description, intents=intents, elapsed_s=time.perf_counter() - started, notes=notes
    )
    if result.as_of_ms != as_of:
        raise AssertionError(f"{name}: as_of {result.as_of_ms} is not the final traffic time {as_of}")
    return result


def _small_cluster(out: Path, seed: int, *, brokers: tuple[int, ...] = (1,), **kw: Any) -> tuple[Cluster, Workload]:
    c = Cluster(out, seed=seed, name=f"sim-{out.name}", broker_ids=brokers, **kw)
    w = _standard_workload(c, rf=len(brokers), with_legacy=False, tv_apps=(1, 2))
    w.run_until(c.now + 20 * MINUTE)
    return c, w


# ---------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------


def _situation(
    out: str | Path,
    seed: int,
    overwrite: bool,
    *,
    name: str,
    description: str,
    act: Callable[[Cluster], list[Intent]],
    run_ms: int = 30 * MINUTE,
    **finish: Any,
) -> ScenarioResult:
    """A small cluster with background traffic, one situation, then ``run_ms`` more traffic."""
    started = time.perf_counter()
    c, w = _small_cluster(_prepare_out(out, overwrite), seed)
    intents = act(c)
    w.run_until(c.now + run_ms)
    return _finish(c, w, name=name, started=started, intents=intents, description=description, **finish)


def healthy(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Plain, idempotent and transactional traffic (TV0, then TV1/TV2 after a feature
    upgrade), commits and aborts, every codec, LogAppendTime, legacy entries, an
    offsets-in-transaction app, a crashed producer aborted by the coordinator's
    timeout, a cleaned (empty) control batch, TV2 rollover. No findings."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c = Cluster(out, seed=seed, name="healthy", transaction_version=0)
    w = _standard_workload(c, rf=2, tv_apps=(0, 0, 2, 2))
    w.run_until(c.now + 20 * MINUTE)
    c.set_transaction_version_feature(2)
    w.apps.append(_TxnApp("inventory-sync", 1, Compression.ZSTD, [("inventory", 0), ("inventory", 1)], abort_rate=0.2))
    w.apps.append(_TxnApp("customer-sync", 2, Compression.NONE, [("customers", 0)], abort_rate=0.0))
    w.run_until(c.now + 30 * MINUTE)
    crashed = c.transactional_producer("nightly-export", transaction_version=2).init_transactions()
    crashed.begin_transaction()
    crashed.send("orders", 5)
    crashed.crash()  # aborted by the coordinator after its 60 s timeout, below
    situation_tv2_rollover(c, [("payments", 0), ("orders", 0)])
    situation_tv1_rotation(c, ("payments", 2))
    w.run_until(c.now + 10 * MINUTE)
    sync = c.coordinator.metadata["customer-sync"]
    _empty_control_batch(c, ("customers", 0), sync.producer_id, sync.producer_epoch)
    return _finish(
        c,
        w,
        name="healthy",
        started=started,
        intents=[],
        description="busy 3-broker cluster, every producer kind and codec, no late or hanging transaction",
    )


def ongoing_within_timeout(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A transaction opened 4 minutes before as_of (timeout 15 min): OPEN, no finding."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    intents = situation_ongoing_within_timeout(c, [("orders", 1), ("payments", 1)])
    return _finish(
        c,
        w,
        name="ongoing_within_timeout",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        description="an ongoing transaction younger than the max timeout",
    )


def tv2_rollover(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """TV2 markers at epoch+1, producer-id rollover at epoch 32766 (and a TV1 rotation). No findings."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    p = situation_tv2_rollover(c, [("orders", 2), ("payments", 0)], transactions=10)
    seeded = next(r.producer_id for r in c.coordinator.records if r.transactional_id == "fx-rates")
    situation_tv1_rotation(c, ("payments", 2))
    return _finish(
        c,
        w,
        name="tv2_rollover",
        started=started,
        intents=[],
        description="KIP-890 epoch bumps and producer-id rollover",
        notes={"rolled_over_from": seeded, "rolled_over_to": p.producer_id},
    )


def rolled_over_producer_id(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """An open transaction of an id's previous producer id on a partition its new producer id's transaction
    lists: HANGING (the new producer id's markers never end it), the new one's LATE."""
    return _situation(
        out,
        seed,
        overwrite,
        name="rolled_over_producer_id",
        act=lambda c: situation_rolled_over_producer_id(c, ("payments", 1), ("orders", 2)),
        description="an open transaction of a rolled-over producer id on a partition the new producer id's "
        "transaction lists",
    )


def no_transactional_id(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A hanging transaction whose producer id no transactional.id owns (records compacted away)."""
    return _situation(
        out,
        seed,
        overwrite,
        name="no_transactional_id",
        act=lambda c: situation_no_transactional_id(c, ("payments", 1)),
        description="an open transaction whose producer id no transactional.id owns",
    )


def transactional_id_expired(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A late batch left open; 7 days later the coordinator expired the id (tombstone)."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    intents = situation_transactional_id_expired(c, ("orders", 3), ("orders", 4))
    c.advance(7 * DAY + 2 * HOUR)  # the coordinator expires the idle ids (tombstones)
    w.run_until(c.now + 30 * MINUTE)
    return _finish(
        c,
        w,
        name="transactional_id_expired",
        started=started,
        intents=intents,
        description="a hanging transaction whose transactional.id has since expired (tombstone)",
    )


def coordinator_completed(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """KAFKA-14053: a batch appended after its own ABORT marker; the coordinator shows the id completed."""
    return _situation(
        out,
        seed,
        overwrite,
        name="coordinator_completed",
        act=lambda c: situation_coordinator_completed(c, ("payments", 0), ("payments", 2)),
        description="KAFKA-14053: data appended after the producer's ABORT marker; coordinator completed",
    )


def partition_not_in_transaction(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A stale open transaction on a partition the owner's current (Ongoing) transaction does not list."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    p = situation_partition_not_in_transaction_start(c, ("inventory", 0), ("inventory", 1))
    w.run_until(c.now + 30 * MINUTE)
    intents = situation_partition_not_in_transaction_finish(c, p, ("inventory", 1))
    return _finish(
        c,
        w,
        name="partition_not_in_transaction",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        description="a stale open transaction on a partition the owner's current transaction does not list",
    )


def markers_pending(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """PrepareCommit whose COMMIT marker never reached one of its partitions (LATE, never abort)."""
    return _situation(
        out,
        seed,
        overwrite,
        name="markers_pending",
        act=lambda c: situation_markers_pending(c, ("orders", 1), ("orders", 5)),
        description="PrepareCommit whose COMMIT marker never reached one partition",
    )


def coordinator_timeout_overdue(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Ongoing far past its 60 s timeout: the coordinator never ran the timeout abort."""
    return _situation(
        out,
        seed,
        overwrite,
        name="coordinator_timeout_overdue",
        act=lambda c: situation_timeout_overdue(c, ("inventory", 1)),
        description="Ongoing far past its 60 s timeout: the coordinator never aborted it",
    )


def two_phase_in_doubt(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """KIP-939 2PC transaction prepared and kept (keepPreparedTxn): the external manager decides."""

    def act(c: Cluster) -> list[Intent]:
        c.create_topic("settlements", 2)
        return situation_two_phase_in_doubt(c, [("settlements", 0), ("settlements", 1)])

    return _situation(
        out,
        seed,
        overwrite,
        name="two_phase_in_doubt",
        act=act,
        run_ms=40 * MINUTE,
        description="KIP-939 prepared transaction awaiting the external transaction manager",
    )


def coordinator_stuck(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A coordinator record stuck in PrepareAbort for 2 h; its partitions were not copied."""
    cluster: list[Cluster] = []

    def act(c: Cluster) -> list[Intent]:
        cluster.append(c)
        c.create_topic("ledger-archive", 2)
        return situation_coordinator_stuck(c, [("ledger-archive", 0), ("ledger-archive", 1)])

    return _situation(
        out,
        seed,
        overwrite,
        name="coordinator_stuck",
        act=act,
        run_ms=2 * HOUR,
        remove=lambda: cluster[0].remove_partition_dirs("ledger-archive"),
        description="a coordinator record stuck in PrepareAbort; its partitions were not copied",
    )


def partial_txn_state(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Only 30 of the 50 __transaction_state partitions copied, the owner's among the missing."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed, txn_state_partitions=wire.DEFAULT_TRANSACTION_STATE_PARTITIONS)
    txn_id = "payment-processor"
    situation_coordinator_completed(c, ("payments", 0), ("payments", 2), txn_id=txn_id)
    w.run_until(c.now + 30 * MINUTE)
    owner_partition = c.coordinator.partition_for(txn_id)
    others = [p for p in range(c.txn_state_partitions) if p != owner_partition]
    missing = [owner_partition] + sorted(c.rng.sample(others, 19))
    intents = [Intent(HANGING, "NO_TRANSACTIONAL_ID", "payments", 0, label="owner's partition not copied")]
    result = _finish(
        c,
        w,
        name="partial_txn_state",
        started=started,
        intents=intents,
        remove=lambda: c.remove_partition_dirs(wire.TRANSACTION_STATE_TOPIC, missing),
        description="20 __transaction_state partitions missing (the owner's too): NO_TRANSACTIONAL_ID is VERIFY_FIRST",
        notes={"missing_txn_state_partitions": missing, "owner_partition": owner_partition},
    )
    assert result.findings[0].safety == "VERIFY_FIRST"
    return result


def corrupt_and_truncated(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A corrupt batch (bad CRC) mid-segment with a hanging transaction after it; bad magic
    and bad length in another partition; a truncated tail in a copied active segment."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    c.create_topic("events", 2, segment_bytes=256 * 1024)
    plain = c.plain_producer(compression=Compression.NONE, value_bytes=150)
    for _ in range(40):
        plain.send("events", 0)
        plain.send("events", 1)
        c.advance(200)
    log0 = c.partition("events", 0).leader_log
    log1 = c.partition("events", 1).leader_log
    log0.corrupt_batch(plain.send("events", 0), "crc_mismatch")
    for _ in range(5):
        plain.send("events", 0)
    intents = situation_coordinator_completed(c, ("events", 0), ("events", 1), txn_id="event-relay")
    for _ in range(20):
        plain.send("events", 0)
        plain.send("events", 1)
        c.advance(300)
    log1.corrupt_batch(plain.send("events", 1), "bad_magic")
    plain.send("events", 1)
    log1.corrupt_batch(plain.send("events", 1), "bad_length")
    for _ in range(10):
        plain.send("events", 1)
    w.run_until(c.now + 30 * MINUTE)

    def tail() -> None:
        records, ts = c.records.batch(end_ts=c.now - 5, n_records=4, value_bytes=150, key_prefix="events")
        batch = encode.encode_record_batch(base_offset=0, records=records, base_timestamp=ts)
        log0.append_truncated_tail(batch, len(batch) // 2)

    return _finish(
        c,
        w,
        name="corrupt_and_truncated",
        started=started,
        intents=intents,
        before_close=tail,
        preallocate=(("events", 0),),
        description=(
            "segment damage: crc_mismatch, bad_magic, bad_length, truncated_tail; a hanging txn after the damage"
        ),
    )


def damage_around_transactions(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A damaged batch (bad CRC) before, inside and after a hanging transaction, one partition each (each the
    KAFKA-14053 late batch after an ABORT marker, owner CompleteAbort). Before the producer's ABORT marker
    the damage hides nothing of the transaction after it: SAFE. Between two of its batches it may hold its
    marker (the batches after it would then be a transaction of their own): VERIFY_FIRST. After its last
    batch it may hold its marker: VERIFY_FIRST."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    c.create_topic("ledger", 4, segment_bytes=256 * 1024)
    plain = c.plain_producer(compression=Compression.NONE, value_bytes=150)
    other = ("ledger", 3)

    def filler(tp: TopicPartition, n: int = 5) -> None:
        for _ in range(n):
            plain.send(*tp)
            c.advance(200)

    def damage(tp: TopicPartition) -> None:
        c.partition(*tp).leader_log.corrupt_batch(plain.send(*tp), "crc_mismatch")

    intents: list[Intent] = []
    for tp, txn_id in (
        (("ledger", 0), "ledger-before"),
        (("ledger", 1), "ledger-inside"),
        (("ledger", 2), "ledger-after"),
    ):
        filler(tp)
        if tp[1] == 0:
            damage(tp)
            filler(tp)
        p = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.NONE).init_transactions()
        p.begin_transaction()
        p.send(*other)
        stuck = [p.send_deferred(*tp) for _ in range(2 if tp[1] == 1 else 1)]
        c.advance(c.rng.randint(2_000, 8_000))
        p.abort_transaction()
        c.advance(c.rng.randint(50, 400))
        stuck[0].deliver()
        if tp[1] == 1:
            damage(tp)
            stuck[1].deliver()
        if tp[1] == 2:
            damage(tp)
        filler(tp)
        _commit_elsewhere(c, p, other)
        intents.append(Intent(HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label=txn_id))
    w.run_until(c.now + 30 * MINUTE)
    return _finish(
        c,
        w,
        name="damage_around_transactions",
        started=started,
        intents=intents,
        description="a damaged batch before (SAFE), inside and after (VERIFY_FIRST) a hanging transaction",
    )


def clean_restart(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Two brokers' copies, the same moment on each: a transaction has just committed on ``positions-N`` (its
    COMMIT marker the last entry, the log end one past it) and the checkpointed high watermark sits on the
    marker (the follower has not fetched it yet). Broker 1 was shut down cleanly (``.kafka_cleanshutdown``):
    restarted on its copy it loads the snapshot at the log end, holds nothing back and serves LSO = HW.
    Broker 2's copy is a running broker's: its leader still holds the LSO at the transaction's first offset
    until the marker is below the high watermark (``ProducerStateManager.unreplicatedTxns``)."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed, brokers=(1, 2))
    c.create_topic("positions", 2, assignment=[[1], [2]])
    for partition in (0, 1):
        tp = ("positions", partition)
        p = c.transactional_producer(f"position-keeper-{partition}", transaction_version=2).init_transactions()
        for _ in range(3):
            p.begin_transaction()
            p.send(*tp)
            p.send(*tp)
            p.commit_transaction()
            c.advance(c.rng.randint(500, 3_000))
        log = c.partition(*tp).leader_log
        c.high_watermarks[(partition + 1, *tp)] = log.markers[-1].offset
    c.clean_shutdown_brokers.add(1)
    w.run_until(c.now + 10 * MINUTE)
    return _finish(
        c,
        w,
        name="clean_restart",
        started=started,
        intents=[],
        description="a clean and a running broker's copy, the HW on a COMMIT marker: LSO by restart and live rules",
    )


def replicas_disagree(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Two replicas of orders-0; the COMMIT marker reached the leader only."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed, brokers=(1, 2))
    leader = c.partition("orders", 0).leader
    follower = next(b for b in c.partition("orders", 0).replicas if b != leader)
    intents = situation_replica_lost_marker(c, ("orders", 0), follower, ("orders", 3))
    w.run_until(c.now + 30 * MINUTE)
    return _finish(
        c,
        w,
        name="replicas_disagree",
        started=started,
        intents=intents,
        description=f"two replicas of orders-0; the COMMIT marker is missing on broker {follower}",
    )


def deleted_segment_snapshot(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """The hanging transaction's first batch is in a segment deleted by retention;
    only the producer snapshot at the new log start still knows it."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    c.create_topic("metrics", 1, segment_bytes=64 * 1024)
    c.create_topic("metrics-side", 1)
    metrics = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(30):
        metrics.send("metrics", 0)
        c.advance(500)
    intents = situation_coordinator_completed(c, ("metrics", 0), ("metrics-side", 0), txn_id="metrics-rollup")
    log = c.partition("metrics", 0).leader_log
    first_open = log.open_txns[next(iter(log.open_txns))].first_offset
    while len(log.segments) < 5:
        metrics.send("metrics", 0)
        c.advance(200)
    cut = next(s.base_offset for s in log.segments if s.base_offset > first_open)
    deleted = log.delete_segments_before(cut)
    w.run_until(c.now + 30 * MINUTE)
    for _ in range(20):
        metrics.send("metrics", 0)
        c.advance(100)
    result = _finish(
        c,
        w,
        name="deleted_segment_snapshot",
        started=started,
        intents=intents,
        description="retention deleted the segment holding a hanging transaction's first batch",
        notes={"deleted_segments": deleted, "log_start_offset": log.log_start_offset},
    )
    assert [t.source for t in result.open_transactions if t.topic == "metrics"] == ["snapshot"]
    return result


def _abort_plan_truth(twins: dict[TopicPartition, PartitionLog], result: ScenarioResult) -> list[dict[str, int | str]]:
    """What aborting every HANGING transaction of a partition, in start-offset order, does to its LSO.

    ``twins`` are copies of the leaders' logs taken at ``as_of`` (before close), writing to a scratch
    directory: each abort is the ABORT marker WriteTxnMarkers makes the leader append
    (``append_end_txn_marker``), and ``last_stable_offset`` is read after each one. The marker is one more
    offset at the log end, so with no unstable transaction left the LSO is the log end *including* the
    markers appended so far (``log_end_after``; ``log_end_at_as_of`` is the log end without them)."""
    plan: list[dict[str, int | str]] = []
    for tp, twin in sorted(twins.items()):
        hanging = sorted(
            (f for f in result.findings if f.verdict == HANGING and (f.topic, f.partition) == tp),
            key=lambda f: (f.start_offset or 0, f.producer_id),
        )
        log_end_at_as_of = twin.log_end_offset
        for step, f in enumerate(hanging, start=1):
            txn = twin.open_txns[f.producer_id]
            assert txn.first_offset == f.start_offset, (tp, f)
            lso_before = twin.last_stable_offset
            marker = twin.append_end_txn_marker(
                producer_id=f.producer_id,
                producer_epoch=twin.producers[f.producer_id].producer_epoch,
                control_type=wire.ControlType.ABORT,
                coordinator_epoch=twin.producers[f.producer_id].coordinator_epoch,
                timestamp=result.as_of_ms,
            )
            plan.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "step": step,
                    "producer_id": f.producer_id,
                    "start_offset": txn.first_offset,
                    "marker_offset": marker.base_offset,
                    "lso_before": lso_before,
                    "lso_after": twin.last_stable_offset,
                    "log_end_at_as_of": log_end_at_as_of,
                    "log_end_after": twin.log_end_offset,
                }
            )
    return plan


def several_open_transactions(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Several open transactions on one partition, HANGING ones around LATE and ongoing ones.

    * ``payments-1`` (committed traffic from a transactional app): a transaction whose id later expired
      (TRANSACTIONAL_ID_EXPIRED), then a PrepareCommit whose marker never arrived (LATE, MARKERS_PENDING),
      then a NO_TRANSACTIONAL_ID one and a KAFKA-14053 late batch (COORDINATOR_COMPLETED): aborting the first
      moves the LSO only to the LATE transaction; the two after it release nothing while it stays open;
    * ``orders-3``: one COORDINATOR_COMPLETED transaction, nothing else open: its abort releases everything;
    * ``orders-5``: two HANGING ones, then an ongoing transaction within its timeout (opened 4 minutes
      before ``as_of``): the first abort moves the LSO to the second, the second to the ongoing one.

    ``notes["abort_plan"]``: the LSO before and after each abort of a HANGING transaction, in start-offset order
    per partition, from the writer's own ABORT markers on copies of the leaders' logs
    (:func:`_abort_plan_truth`)."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed)
    blocked, single, chained = ("payments", 1), ("orders", 3), ("orders", 5)
    intents = situation_transactional_id_expired(c, blocked, ("payments", 2))
    c.advance(7 * DAY + 2 * HOUR)  # the coordinator expires the idle ids (tombstones)
    w.run_until(c.now + 10 * MINUTE)
    intents += situation_markers_pending(c, ("orders", 1), blocked)
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_no_transactional_id(c, blocked)
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, blocked, ("payments", 2))
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, single, ("orders", 4), txn_id="refund-writer")
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_no_transactional_id(c, chained, txn_id="audit-loader")
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, chained, ("orders", 2), txn_id="metrics-rollup")
    w.run_until(c.now + 30 * MINUTE)
    intents += situation_ongoing_within_timeout(c, [chained])
    scratch = tempfile.TemporaryDirectory(prefix="txnlog-abort-plan-")
    twins: dict[TopicPartition, PartitionLog] = {}

    def copy_leaders() -> None:  # at as_of, before close: the twins write to the scratch directory only
        for tp in (blocked, single, chained):
            twin = copy.deepcopy(c.partition(*tp).leader_log)
            twin.log_dir = Path(scratch.name)
            twin.dir = twin.log_dir / twin.dir.name
            twin.dir.mkdir()
            twins[tp] = twin

    result = _finish(
        c,
        w,
        name="several_open_transactions",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        before_close=copy_leaders,
        description="several HANGING transactions on one partition around a LATE and an ongoing one",
    )
    with scratch:
        result.notes["abort_plan"] = _abort_plan_truth(twins, result)
    return result


def _roll_to(c: Cluster, producer: IdempotentProducer, tp: TopicPartition, segments: int) -> None:
    """Keep ``producer`` writing to ``tp`` until its leader's log has ``segments`` segments."""
    log = c.partition(*tp).leader_log
    while len(log.segments) < segments:
        producer.send(*tp)
        c.advance(150)


def _retention_past_open_transaction(c: Cluster, producer: IdempotentProducer, tp: TopicPartition) -> PartitionLog:
    """Retention deletes the segment holding the first batch of ``tp``'s oldest open transaction."""
    log = c.partition(*tp).leader_log
    first_open = min(t.first_offset for t in log.open_txns.values())
    _roll_to(c, producer, tp, 4)
    log.delete_segments_before(next(s.base_offset for s in log.segments if s.base_offset > first_open))
    return log


def situation_lagging_follower(
    c: Cluster, tp: TopicPartition, follower: int, other: TopicPartition, txn_id: str = "order-audit"
) -> list[Intent]:
    """``follower`` drops out before the COMMIT marker and never catches up: its copy ends before
    the marker. Behind, not diverged: the transaction is committed, nothing is open (no intent)."""
    p = c.transactional_producer(txn_id, transaction_version=2, compression=Compression.NONE).init_transactions()
    p.begin_transaction()
    p.send(*tp)
    p.send(*other)
    c.partition(*tp).offline_followers.add(follower)  # for good: the copy was taken while it lagged
    p.commit_transaction()
    _commit_elsewhere(c, p, other, n=1)
    return []


def situation_damaged_marker(
    c: Cluster, tp: TopicPartition, other: TopicPartition, txn_id: str = "fee-calculator"
) -> list[Intent]:
    """The COMMIT marker of a transaction on ``tp`` is damaged on disk (bad CRC): the copy shows the
    transaction open, the coordinator shows it complete. HANGING by what can be read, but the marker
    may be in the quarantined bytes: VERIFY_FIRST, never SAFE (docs/design.md §4)."""
    p = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.NONE).init_transactions()
    p.begin_transaction()
    p.send(*tp)
    p.send(*other)
    p.commit_transaction()
    log = c.partition(*tp).leader_log
    info = log.last_append  # the COMMIT marker just written
    assert info is not None and log.markers[-1].offset == info.base_offset
    log.corrupt_marker(info)
    _commit_elsewhere(c, p, other, n=1)
    return [Intent(HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label="damaged COMMIT marker")]


def messy_incident(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Logs copied during an incident, each broker rule in one run:

    * a follower copy of ``orders-1`` that lags behind a COMMIT marker (nothing open);
    * a follower of ``orders-2`` that missed a COMMIT marker and holds later data (diverged:
      HANGING, VERIFY_FIRST);
    * broker 1 restarted after retention on ``metrics-0``: the snapshots at or below the log start
      are gone, later ones hold the hanging transaction's older ``currentTxnFirstOffset``;
    * DeleteRecords on ``audit-trail-0`` moved the log start inside a segment past an open transaction's
      first batch (LSO clamped to the log start);
    * the coordinator failed over to a broker whose clock is an hour behind: later records carry
      earlier timestamps (the latest state is the last record by offset, CompleteAbort);
    * a damaged COMMIT marker on ``fees-0`` (VERIFY_FIRST).
    """
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c, w = _small_cluster(out, seed, brokers=(1, 2, 3))
    c.create_topic("metrics", 1, replication_factor=1, segment_bytes=64 * 1024)
    c.create_topic("audit-trail", 1, replication_factor=1, segment_bytes=64 * 1024)
    c.create_topic("fees", 3, replication_factor=1)
    intents: list[Intent] = []
    # lagging and diverged followers
    rp1 = c.partition("orders", 1)
    lagging = next(b for b in rp1.replicas if b != rp1.leader)
    intents += situation_lagging_follower(c, ("orders", 1), lagging, ("orders", 3))
    rp2 = c.partition("orders", 2)
    diverged = next(b for b in rp2.replicas if b != rp2.leader)
    intents += situation_replica_lost_marker(c, ("orders", 2), diverged, ("orders", 3), txn_id="order-router")
    w.run_until(c.now + 2 * MINUTE)
    # retention, then a restart of metrics-0's broker
    metrics = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(30):
        metrics.send("metrics", 0)
        c.advance(300)
    intents += situation_coordinator_completed(c, ("metrics", 0), ("fees", 1), txn_id="metrics-rollup")
    mlog = _retention_past_open_transaction(c, metrics, ("metrics", 0))
    _roll_to(c, metrics, ("metrics", 0), 6)  # rolls write snapshots above the new log start
    deleted_snapshots = mlog.restart()
    # DeleteRecords past an open transaction's first batch
    audit = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(10):
        audit.send("audit-trail", 0)
        c.advance(200)
    intents += situation_no_transactional_id(c, ("audit-trail", 0), txn_id="audit-loader")
    alog = c.partition("audit-trail", 0).leader_log
    open_at = min(t.first_offset for t in alog.open_txns.values())
    for _ in range(10):
        audit.send("audit-trail", 0)
        c.advance(200)
    alog.delete_records(open_at + 3)
    intents.append(_failover_mid_late_batch(c))
    intents += situation_damaged_marker(c, ("fees", 2), ("fees", 1))
    w.run_until(c.now + 30 * MINUTE)
    return _finish(
        c,
        w,
        name="messy_incident",
        started=started,
        intents=intents,
        description=(
            "lagging and diverged replicas, a restarted broker, DeleteRecords, a coordinator failover, a damaged marker"
        ),
        notes={
            "lagging_follower": lagging,
            "diverged_follower": diverged,
            "deleted_snapshots": deleted_snapshots,
            "audit_log_start": alog.log_start_offset,
            "metrics_log_start": mlog.log_start_offset,
        },
    )


def sample(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """The embedded default: a 3-broker cluster over 8 days with healthy traffic and every verdict."""
    started = time.perf_counter()
    out = _prepare_out(out, overwrite)
    c = Cluster(out, seed=seed, name="sample", transaction_version=2)
    w = _standard_workload(c, rf=2, tv_apps=(0, 1, 2, 2))
    w.mean_gap_ms = 7_000  # a few MB in all
    c.create_topic("invoices", 2, replication_factor=2)
    c.create_topic("ledger", 2, replication_factor=2)
    c.create_topic("ledger-archive", 1, replication_factor=1)
    c.create_topic("settlements", 2, replication_factor=2)
    c.create_topic("metrics", 1, replication_factor=1, segment_bytes=64 * 1024)
    intents: list[Intent] = []
    # Day 0: a normal morning, then an invoicing app leaves a late batch behind and is retired.
    w.run_until(c.now + 40 * MINUTE)
    intents += situation_transactional_id_expired(c, ("invoices", 1), ("invoices", 0))
    w.run_until(c.now + 20 * MINUTE)
    # A quiet week; the coordinator expires idle transactional.ids on the way.
    end = c.now + 7 * DAY + 3 * HOUR
    c.advance_to(end - 2 * HOUR)
    w.finish()
    intents += situation_coordinator_stuck(c, [("ledger-archive", 0)])
    metrics = c.idempotent_producer(value_bytes=200, records_per_batch=(5, 10))
    for _ in range(20):
        metrics.send("metrics", 0)
        c.advance(300)
    intents += situation_coordinator_completed(c, ("metrics", 0), ("ledger", 0), txn_id="metrics-rollup")
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_coordinator_completed(c, ("payments", 1), ("payments", 2))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_no_transactional_id(c, ("orders", 5))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_markers_pending(c, ("ledger", 0), ("ledger", 1))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_timeout_overdue(c, ("inventory", 1))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_two_phase_in_doubt(c, [("settlements", 0), ("settlements", 1)])
    leader = c.partition("orders", 2).leader
    follower = next(b for b in c.partition("orders", 2).replicas if b != leader)
    intents += situation_replica_lost_marker(c, ("orders", 2), follower, ("orders", 3))
    stock = situation_partition_not_in_transaction_start(c, ("inventory", 0), ("settlements", 1))
    # Retention on metrics: the segment holding metrics-rollup's late batch goes away.
    _retention_past_open_transaction(c, metrics, ("metrics", 0))
    situation_tv2_rollover(c, [("payments", 0), ("orders", 0)], transactions=6)
    w.run_until(end - 20 * MINUTE)
    clog = c.partition("clicks", 3).leader_log
    info = c.plain_producer().send("clicks", 3)
    clog.corrupt_batch(info, "crc_mismatch")
    c.plain_producer().send("clicks", 3)  # readable data after the damage: the log end stays knowable
    w.run_until(end - 5 * MINUTE)
    intents += situation_partition_not_in_transaction_finish(c, stock, ("settlements", 1))
    intents += situation_ongoing_within_timeout(c, [("orders", 4)])
    w.run_until(end - 2 * MINUTE)

    def tail() -> None:
        records, ts = c.records.batch(end_ts=c.now - 3, n_records=3, value_bytes=150, key_prefix="clicks")
        batch = encode.encode_record_batch(
            base_offset=0, records=records, base_timestamp=ts, compression=Compression.SNAPPY
        )
        c.partition("clicks", 1).leader_log.append_truncated_tail(batch, len(batch) - 7)

    return _finish(
        c,
        w,
        name="sample",
        started=started,
        intents=intents,
        before_close=tail,
        remove=lambda: c.remove_partition_dirs("ledger-archive"),
        description="embedded sample: 3 brokers, 8 days, healthy traffic and every verdict class",
    )


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


def _failover_mid_late_batch(c: Cluster) -> Intent:
    """A coordinator failover to a broker whose clock is an hour behind, in the middle of a late batch
    (KAFKA-14053): the batch lands on ``fees-0`` after the abort completed."""
    p = c.transactional_producer(
        "refund-writer", transaction_version=1, compression=Compression.NONE
    ).init_transactions()
    p.begin_transaction()
    p.send("fees", 1)
    stuck = p.send_deferred("fees", 0)
    c.advance(5_000)
    c.coordinator.failover(clock_skew_ms=-HOUR)
    p.abort_transaction()
    c.advance(200)
    stuck.deliver()
    label = "after a failover"
    return Intent(HANGING, "COORDINATOR_COMPLETED", "fees", 0, transactional_id="refund-writer", label=label)


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
    out = _prepare_out(out, overwrite)
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


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


def extreme_values(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """µs and ns CreateTime, CreateTime −1 and 0, producer id and offsets at Long.MAX (txnlog.brokerlog.extreme)."""
    started = time.perf_counter()
    c, w = _small_cluster(_prepare_out(out, overwrite), seed)
    intents = write_extreme_values(c)
    w.run_until(c.now + 20 * MINUTE)
    return _finish(
        c, w, name="extreme_values", started=started, intents=intents, description=EXTREME_VALUES,
        notes={"partitions": {k: f"{t}-{p}" for k, (t, p) in EXTREME_PARTITIONS.items()}},
    )  # fmt: skip


SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "healthy": healthy,
    "ongoing_within_timeout": ongoing_within_timeout,
    "tv2_rollover": tv2_rollover,
    "no_transactional_id": no_transactional_id,
    "rolled_over_producer_id": rolled_over_producer_id,
    "transactional_id_expired": transactional_id_expired,
    "coordinator_completed": coordinator_completed,
    "partition_not_in_transaction": partition_not_in_transaction,
    "markers_pending": markers_pending,
    "coordinator_timeout_overdue": coordinator_timeout_overdue,
    "two_phase_in_doubt": two_phase_in_doubt,
    "coordinator_stuck": coordinator_stuck,
    "partial_txn_state": partial_txn_state,
    "corrupt_and_truncated": corrupt_and_truncated,
    "damage_around_transactions": damage_around_transactions,
    "clean_restart": clean_restart,
    "replicas_disagree": replicas_disagree,
    "deleted_segment_snapshot": deleted_segment_snapshot,
    "messy_incident": messy_incident,
    "several_open_transactions": several_open_transactions,
    "sample": sample,
    "extreme_values": extreme_values,
    "bulk": bulk,
    **INTEGRITY_SCENARIOS,  # what read_committed consumers are served, damaged (txnlog.brokerlog.integrity_faults)
    **BLOCKED_SCENARIOS,  # consumer groups behind hanging transactions (txnlog.brokerlog.blocked_groups)
}


def scenario_names() -> list[str]:
    return list(SCENARIOS)


def write_scenario(
    name: str, out: str | Path, seed: int = 0, *, internal_partitions: int | None = None, **kwargs: Any
) -> ScenarioResult:
    """Write scenario ``name`` under ``out`` (which must be empty unless ``overwrite=True``); with
    ``internal_partitions``, ``__transaction_state`` and ``__consumer_offsets`` get that many partitions
    (:func:`txnlog.brokerlog.cluster.internal_partitions`) unless the scenario names its own count.

    >>> sorted(SCENARIOS)[:3]
    ['bulk', 'clean_restart', 'coordinator_completed']
    """
    try:
        fn = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
    with cluster_internal_partitions(internal_partitions):
        return fn(out, seed, **kwargs)
