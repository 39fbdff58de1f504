"""The writer's ordinary traffic and the plumbing every named scenario shares.

:class:`Workload` is a busy cluster's background traffic, which ends every transaction it starts; :func:`run_situation`
is a small cluster with that traffic, one situation acted on it, and the ground truth assembled at the end
(:func:`finish_scenario`)."""

from __future__ import annotations

import functools
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import (
    Cluster,
    IdempotentProducer,
    PlainProducer,
    ProducerFencedError,
    TopicPartition,
    TransactionalProducer,
)
from txnlog.brokerlog.ground_truth import Intent, ScenarioResult
from txnlog.brokerlog.truth import assemble
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, TimestampType

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
MAX_TIMEOUT = wire.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS


# ---------------------------------------------------------------------------
# Healthy traffic
# ---------------------------------------------------------------------------


@dataclass
class TxnApp:
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
    apps: list[TxnApp] = field(default_factory=list)
    mean_gap_ms: int = 1500

    def add_plain(
        self, partitions: list[TopicPartition], compression: Compression = Compression.NONE, **kw: Any
    ) -> None:
        self.plain.append((self.cluster.plain_producer(compression=compression, **kw), partitions))

    def add_idempotent(
        self, partitions: list[TopicPartition], compression: Compression = Compression.NONE, **kw: Any
    ) -> None:
        self.idempotent.append((self.cluster.idempotent_producer(compression=compression, **kw), partitions))

    def add_app(self, app: TxnApp) -> None:
        self.apps.append(app)

    def _producer(self, app: TxnApp) -> TransactionalProducer | None:
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

    def _run_app(self, app: TxnApp) -> None:
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


def standard_workload(
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
            TxnApp(
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
        write_legacy_prefix(c, (f"{prefix}legacy-events", 0))
        w.add_plain([(f"{prefix}legacy-events", 0)], Compression.GZIP, value_bytes=120)
    return w


def write_legacy_prefix(c: Cluster, tp: TopicPartition) -> None:
    """Messages from pre-0.11 producers at the start of the log (magic 0, magic 1, a gzip wrapper)."""
    log = c.partition(*tp).leader_log
    t = c.now - 30 * DAY
    log.append_legacy(magic=0, messages=[(b"k%d" % i, b"legacy-v0-%d" % i, None) for i in range(3)])
    log.append_legacy(magic=1, messages=[(b"k%d" % i, b"legacy-v1-%d" % i, t + i) for i in range(3)])
    log.append_legacy(
        magic=1, messages=[(None, b"legacy-v1-gzip-%d" % i, t + 10 + i) for i in range(4)], compression=Compression.GZIP
    )


def empty_control_batch(c: Cluster, tp: TopicPartition, producer_id: int, producer_epoch: int) -> None:
    """A control batch the cleaner emptied (zero records): readers ignore it."""
    c.partition(*tp).append(
        encode.encode_control_batch(offset=0, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=c.now)
    )


def prepare_out(out: str | Path, overwrite: bool) -> Path:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} is not empty (use overwrite=True / --force)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def finish_scenario(
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


def small_cluster(out: Path, seed: int, *, brokers: tuple[int, ...] = (1,), **kw: Any) -> tuple[Cluster, Workload]:
    c = Cluster(out, seed=seed, name=f"sim-{out.name}", broker_ids=brokers, **kw)
    w = standard_workload(c, rf=len(brokers), with_legacy=False, tv_apps=(1, 2))
    w.run_until(c.now + 20 * MINUTE)
    return c, w


def run_situation(
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
    c, w = small_cluster(prepare_out(out, overwrite), seed)
    intents = act(c)
    w.run_until(c.now + run_ms)
    return finish_scenario(c, w, name=name, started=started, intents=intents, description=description, **finish)
