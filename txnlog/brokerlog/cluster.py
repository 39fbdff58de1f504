"""A simulated Kafka cluster that writes real broker log dirs, deterministically.

Everything runs on a simulated clock (:class:`SimClock`, epoch ms UTC) and
one ``random.Random(seed)``: the same seed and the same calls give the same
bytes. The pieces and the Kafka behaviour they reproduce:

* :class:`Cluster` — brokers (one log dir each: ``<root>/broker-<id>``),
  topics with replicas on several brokers (followers copy the leader's bytes
  and offsets), partition leader epochs, ``__transaction_state`` with its 50
  partitions (fewer under :func:`internal_partitions`), ``__consumer_offsets`` on
  first use, the KRaft metadata log, and the log-dir checkpoint files a broker
  leaves behind.
* :class:`~txnlog.brokerlog.coordinator.TransactionCoordinator` and the producers
  (txnlog.brokerlog.producers), which the cluster makes.

Fault injection is explicit: undelivered markers, a stalled coordinator, a
replica that misses a batch, records compacted away. The scenarios in
:mod:`txnlog.brokerlog.scenarios` compose these into known situations.
"""

from __future__ import annotations

import base64
import random
import shutil
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from txnlog.brokerlog import encode
from txnlog.brokerlog.coordinator import CoordinatorRecordTruth, TransactionCoordinator, TxnMetadata
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import PartitionLog
from txnlog.brokerlog.producers import DeferredBatch, IdempotentProducer, PlainProducer, TransactionalProducer
from txnlog.brokerlog.replicas import (
    Broker,
    ProducerFencedError,
    RecordFactory,
    ReplicatedPartition,
    SimClock,
    TopicConfig,
    TopicPartition,
)
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, ControlType, TimestampType

__all__ = [
    "DEFAULT_CONSUMER_OFFSETS_PARTITIONS",
    "DEFAULT_START_MS",
    "Cluster",
    "CoordinatorRecordTruth",
    "DeferredBatch",
    "IdempotentProducer",
    "PlainProducer",
    "ProducerFencedError",
    "RecordFactory",
    "ReplicatedPartition",
    "SimClock",
    "TopicPartition",
    "TransactionCoordinator",
    "TransactionalProducer",
    "TxnMetadata",
    "internal_partitions",
]

#: 2024-06-03T08:00:00Z: where simulated time starts unless told otherwise.
DEFAULT_START_MS = 1_717_401_600_000
#: ``offsets.topic.num.partitions``'s default (GroupCoordinatorConfig)
DEFAULT_CONSUMER_OFFSETS_PARTITIONS = 50

#: the partition count of both internal topics for a Cluster made without one (:func:`internal_partitions`)
_INTERNAL_PARTITIONS: ContextVar[int | None] = ContextVar("internal_partitions", default=None)


@contextmanager
def internal_partitions(count: int | None) -> Iterator[None]:
    """Clusters made inside the block whose maker names no count get ``count`` partitions of
    ``__transaction_state`` and of ``__consumer_offsets`` instead of the brokers' defaults (50 each): a smaller
    copy to read where the count is not what is looked at. Every coordinator partition follows the count
    (``partitionFor``: abs(hash) % count). The random draws and the round-robin placement go on as if the
    default count had been made, so the data partitions keep their replicas and records; a topic made with
    an explicit count is made as asked. ``None``: the defaults."""
    if count is not None and count < 1:
        raise ValueError(f"internal_partitions: {count} is not a partition count")
    token = _INTERNAL_PARTITIONS.set(count)
    try:
        yield
    finally:
        _INTERNAL_PARTITIONS.reset(token)


class _ProducerKwargs(TypedDict):
    """The keyword arguments every producer kind takes (Cluster._producer_kwargs)."""

    client_id: str
    compression: Compression
    value_bytes: int
    records_per_batch: tuple[int, int]
    linger_ms: int


# ---------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------


class Cluster:
    """Brokers, topics, a coordinator and a clock; :meth:`close` leaves real log dirs behind.

    >>> import tempfile
    >>> c = Cluster(tempfile.mkdtemp(), seed=1, broker_ids=(1,))
    >>> _ = c.create_topic("orders", partitions=2)
    >>> p = c.transactional_producer("tx-1").init_transactions()
    >>> p.begin_transaction(); _ = p.send("orders", 0); p.commit_transaction()
    >>> c.close()
    """

    def __init__(
        self,
        root: str | Path,
        *,
        seed: int = 0,
        name: str = "txnlog-sim",
        start_ms: int = DEFAULT_START_MS,
        broker_ids: Sequence[int] = (1, 2, 3),
        transaction_version: int = 2,
        txn_state_partitions: int | None = None,
        txn_state_replication_factor: int | None = None,
        txn_state_segment_bytes: int = wire.DEFAULT_TRANSACTION_STATE_SEGMENT_BYTES,
        consumer_offsets_partitions: int | None = None,
        transactional_id_expiration_ms: int = wire.DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
        txn_log_tagged_fields: str = "trunk",
        first_producer_id: int | None = None,
    ) -> None:
        if txn_log_tagged_fields not in ("trunk", "client_version_only"):
            raise ValueError("txn_log_tagged_fields is 'trunk' or 'client_version_only'")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = SimClock(start_ms)
        self.start_ms = start_ms
        self.records = RecordFactory(random.Random(self.rng.getrandbits(64)))
        self.brokers = {b: Broker(b, self.root / f"broker-{b}") for b in broker_ids}
        for broker in self.brokers.values():
            broker.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._uuid_b64()
        self.transaction_version_feature = transaction_version
        fewer = _INTERNAL_PARTITIONS.get()
        #: partitions to place as if made, per internal topic: the defaults less the counts made under
        #: :func:`internal_partitions`
        self._unmade: dict[str, int] = {}
        if txn_state_partitions is None and fewer is not None:
            self._unmade[wire.TRANSACTION_STATE_TOPIC] = max(0, wire.DEFAULT_TRANSACTION_STATE_PARTITIONS - fewer)
        if consumer_offsets_partitions is None and fewer is not None:
            self._unmade[wire.CONSUMER_OFFSETS_TOPIC] = max(0, DEFAULT_CONSUMER_OFFSETS_PARTITIONS - fewer)
        self.txn_state_partitions = txn_state_partitions or fewer or wire.DEFAULT_TRANSACTION_STATE_PARTITIONS
        self.consumer_offsets_partitions = consumer_offsets_partitions or fewer or DEFAULT_CONSUMER_OFFSETS_PARTITIONS
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.txn_log_tagged_fields = txn_log_tagged_fields
        self.topics: dict[str, TopicConfig] = {}
        self.partitions: dict[TopicPartition, ReplicatedPartition] = {}
        self._next_producer_id = first_producer_id if first_producer_id is not None else 1000 * self.rng.randint(1, 40)
        self._next_leader = 0
        self.coordinator = TransactionCoordinator(self)
        self.closed = False
        #: (broker, topic, partition) -> the high watermark its replication-offset-checkpoint says (default:
        #: the log end); a follower's fetch has not yet moved it past the newest batches
        self.high_watermarks: dict[tuple[int, str, int], int] = {}
        #: brokers shut down cleanly before the copy: their log dir holds ``.kafka_cleanshutdown``, so a broker
        #: restarted on it trusts its snapshots and serves what ``LogLoader`` loads (no recovery)
        self.clean_shutdown_brokers: set[int] = set()
        rf = txn_state_replication_factor or min(wire.DEFAULT_TRANSACTION_STATE_REPLICATION_FACTOR, len(self.brokers))
        self.create_topic(
            wire.TRANSACTION_STATE_TOPIC,
            partitions=self.txn_state_partitions,
            replication_factor=rf,
            segment_bytes=txn_state_segment_bytes,
            compacted=True,
            leader_epochs=lambda: self.rng.choice((0, 0, 1, 2, 3, 5, 8)),
        )

    # -- ids ----------------------------------------------------------------

    def _uuid_b64(self) -> str:
        return base64.urlsafe_b64encode(self.rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")

    def allocate_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    # -- time ---------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.clock.now_ms

    def tick(self, low: int = 1, high: int = 5) -> None:
        """Advance a few milliseconds (between requests) without background work."""
        self.clock.now_ms += self.rng.randint(low, high)

    def advance(self, ms: int) -> None:
        """Advance the clock; the coordinator aborts timed-out transactions and expires ids on the way."""
        target = self.clock.now_ms + int(ms)
        while True:
            due = self.coordinator.next_due(target)
            if due is None:
                break
            self.clock.now_ms = max(self.clock.now_ms, due[0])
            self.coordinator.run_due(due)
        self.clock.now_ms = max(self.clock.now_ms, target)

    def advance_to(self, when_ms: int) -> None:
        self.advance(max(0, when_ms - self.clock.now_ms))

    # -- topics -------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        assignment: Sequence[Sequence[int]] | None = None,
        segment_bytes: int = wire.DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = wire.DEFAULT_INDEX_INTERVAL_BYTES,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        compacted: bool = False,
        leader_epochs: Callable[[], int] | None = None,
    ) -> TopicConfig:
        """Create a topic; replicas are spread round-robin over brokers unless ``assignment`` is given."""
        if name in self.topics:
            raise ValueError(f"topic {name} exists")
        broker_ids = sorted(self.brokers)
        if replication_factor > len(broker_ids):
            raise ValueError(f"replication factor {replication_factor} > {len(broker_ids)} brokers")
        config = TopicConfig(
            name,
            partitions,
            replication_factor,
            segment_bytes,
            index_interval_bytes,
            TimestampType(timestamp_type),
            compacted,
            self.rng.getrandbits(128).to_bytes(16, "big"),
        )
        self.topics[name] = config
        for p in range(partitions):
            if assignment is not None:
                replicas = list(assignment[p])
            else:
                start = self._next_leader
                self._next_leader += 1
                replicas = [broker_ids[(start + i) % len(broker_ids)] for i in range(replication_factor)]
            epoch = leader_epochs() if leader_epochs is not None else 0
            logs = {
                b: PartitionLog(
                    self.brokers[b].log_dir,
                    name,
                    p,
                    segment_bytes=segment_bytes,
                    index_interval_bytes=index_interval_bytes,
                    leader_epoch=epoch,
                    timestamp_type=TimestampType(timestamp_type),
                    clock=self.clock,
                    topic_id=config.topic_id,
                )
                for b in replicas
            }
            for b, log in logs.items():
                self.brokers[b].logs[(name, p)] = log
            self.partitions[(name, p)] = ReplicatedPartition(name, p, replicas, logs, epoch)
        for _ in range(self._unmade.get(name, 0)):  # as if made: the next topics' placement and draws are unchanged
            if assignment is None:
                self._next_leader += 1
            if leader_epochs is not None:
                leader_epochs()
        return config

    def ensure_consumer_offsets(self) -> None:
        if wire.CONSUMER_OFFSETS_TOPIC not in self.topics:
            self.create_topic(
                wire.CONSUMER_OFFSETS_TOPIC,
                partitions=self.consumer_offsets_partitions,
                replication_factor=min(3, len(self.brokers)),
                segment_bytes=100 * 1024 * 1024,
                compacted=True,
            )

    def partition(self, topic: str, partition: int) -> ReplicatedPartition:
        return self.partitions[(topic, partition)]

    def set_transaction_version_feature(self, level: int) -> None:
        """``kafka-features.sh upgrade --feature transaction.version=<level>``."""
        self.transaction_version_feature = level

    # -- producers ----------------------------------------------------------

    def _producer_kwargs(
        self,
        client_id: str | None,
        compression: Compression,
        value_bytes: int,
        records_per_batch: tuple[int, int],
        linger_ms: int,
    ) -> _ProducerKwargs:
        return {
            "client_id": client_id or f"producer-{self.rng.randrange(1 << 16)}",
            "compression": compression,
            "value_bytes": value_bytes,
            "records_per_batch": records_per_batch,
            "linger_ms": linger_ms,
        }

    def plain_producer(
        self,
        *,
        client_id: str | None = None,
        compression: Compression = Compression.NONE,
        value_bytes: int = 200,
        records_per_batch: tuple[int, int] = (1, 10),
        linger_ms: int = 5,
    ) -> PlainProducer:
        return PlainProducer(
            self, **self._producer_kwargs(client_id, compression, value_bytes, records_per_batch, linger_ms)
        )

    def idempotent_producer(
        self,
        *,
        client_id: str | None = None,
        compression: Compression = Compression.NONE,
        value_bytes: int = 200,
        records_per_batch: tuple[int, int] = (1, 10),
        linger_ms: int = 5,
    ) -> IdempotentProducer:
        return IdempotentProducer(
            self, **self._producer_kwargs(client_id, compression, value_bytes, records_per_batch, linger_ms)
        )

    def transactional_producer(
        self,
        transactional_id: str,
        *,
        transaction_version: int = 2,
        transaction_timeout_ms: int = 60_000,
        two_phase_commit: bool = False,
        coordinator_records: bool = True,
        client_id: str | None = None,
        compression: Compression = Compression.NONE,
        value_bytes: int = 200,
        records_per_batch: tuple[int, int] = (1, 10),
        linger_ms: int = 5,
    ) -> TransactionalProducer:
        return TransactionalProducer(
            self,
            transactional_id,
            transaction_version=transaction_version,
            transaction_timeout_ms=transaction_timeout_ms,
            two_phase_commit=two_phase_commit,
            coordinator_records=coordinator_records,
            **self._producer_kwargs(
                client_id or transactional_id, compression, value_bytes, records_per_batch, linger_ms
            ),
        )

    # -- closing ------------------------------------------------------------

    def max_timestamp(self, *, brokers: Iterable[int] | None = None) -> int:
        """Largest batch timestamp written to any log still on disk."""
        ids = self.brokers if brokers is None else brokers
        best = -1
        for b in ids:
            for log in self.brokers[b].logs.values():
                if log.dir.exists():
                    best = max(best, log.max_timestamp)
        return best

    def close(self, *, preallocate_active_indexes: Iterable[TopicPartition] = (), kraft_metadata: bool = True) -> None:
        """Close every log (final snapshots, indexes) and write each broker's log-dir files."""
        if self.closed:
            return
        prealloc = set(preallocate_active_indexes)
        for broker in self.brokers.values():
            for tp, log in broker.logs.items():
                log.close(preallocate_active_indexes=tp in prealloc)
            if kraft_metadata:
                self._write_kraft_metadata_log(broker)
            self._write_log_dir_files(broker)
        self.closed = True

    def _write_kraft_metadata_log(self, broker: Broker) -> None:
        # KRaft's metadata log: a LeaderChange control record and a few opaque
        # metadata records. Readers must skip this directory (docs/design.md §4a).
        log = PartitionLog(broker.log_dir, wire.CLUSTER_METADATA_TOPIC, 0, leader_epoch=1)
        ts = self.start_ms - 60_000
        leader_change = struct.pack(">hiii", 0, min(self.brokers), 1, min(self.brokers))
        log.append(
            encode.encode_control_batch(
                offset=0,
                producer_id=-1,
                producer_epoch=-1,
                timestamp=ts,
                is_transactional=False,
                records=[(encode.encode_control_record_key(ControlType.LEADER_CHANGE), leader_change)],
            )
        )
        # the finalized features, as FeatureLevelRecords (frame version 1, type 12, version 0: a compact name, the
        # level, no tagged fields); the draws keep the scenarios' random sequence of earlier versions of this writer
        for _ in range(3 * 24):
            self.rng.getrandbits(8)
        tv = self.transaction_version_feature
        features = (("metadata.version", 22), ("transaction.version", tv), ("group.version", 1))
        log.append(
            encode.encode_record_batch(
                base_offset=0,
                records=[
                    RecordSpec(i, 0, None, b"\x01\x0c\x00" + _feature_level(name, level))
                    for i, (name, level) in enumerate(features)
                ],
                base_timestamp=ts + 5,
            )
        )
        log.close(snapshot=False)
        voters = ",".join(f'{{"voterId":{b}}}' for b in sorted(self.brokers))
        (log.dir / "quorum-state").write_text(
            f'{{"leaderId":{min(self.brokers)},"leaderEpoch":1,"votedId":-1,"appliedOffset":0,'
            f'"currentVoters":[{voters}],"data_version":0}}'
        )

    def high_watermark(self, broker: int, tp: TopicPartition, log: PartitionLog) -> int:
        """What ``broker``'s replication-offset-checkpoint says of ``tp``: the log end unless set otherwise."""
        return min(self.high_watermarks.get((broker, *tp), log.log_end_offset), log.log_end_offset)

    def _write_log_dir_files(self, broker: Broker) -> None:
        d = broker.log_dir
        present = [(tp, log) for tp, log in sorted(broker.logs.items()) if log.dir.exists()]

        def checkpoint(name: str, values: list[tuple[TopicPartition, int]]) -> None:
            body = "".join(f"{t} {p} {o}\n" for (t, p), o in values)
            (d / name).write_text(f"0\n{len(values)}\n{body}")

        checkpoint("recovery-point-offset-checkpoint", [(tp, log.log_end_offset) for tp, log in present])
        checkpoint(
            "replication-offset-checkpoint",
            [(tp, self.high_watermark(broker.broker_id, tp, log)) for tp, log in present],
        )
        if broker.broker_id in self.clean_shutdown_brokers:
            (d / ".kafka_cleanshutdown").touch()
        checkpoint(
            "log-start-offset-checkpoint",
            [(tp, log.log_start_offset) for tp, log in present if log.log_start_offset > 0],
        )
        checkpoint(
            "cleaner-offset-checkpoint",
            [(tp, log.log_start_offset) for tp, log in present if self.topics[tp[0]].compacted],
        )
        stamp = datetime.fromtimestamp(self.clock.now_ms / 1000, tz=UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
        (d / "meta.properties").write_text(
            f"#\n#{stamp}\ncluster.id={self.cluster_id}\ndirectory.id={self._uuid_b64()}\n"
            f"node.id={broker.broker_id}\nversion=1\n"
        )
        (d / ".lock").touch()

    # -- output selection (what an operator copied) ------------------------

    def remove_partition_dirs(
        self, topic: str, partitions: Iterable[int] | None = None, *, brokers: Iterable[int] | None = None
    ) -> list[Path]:
        """Delete partition directories from the output, as if they had not been copied."""
        removed = []
        ids = set(self.brokers if brokers is None else brokers)
        for (t, p), rp in self.partitions.items():
            if t != topic or (partitions is not None and p not in set(partitions)):
                continue
            for b, log in rp.logs.items():
                if b in ids and log.dir.exists():
                    shutil.rmtree(log.dir)
                    removed.append(log.dir)
        return removed

    def present_partitions(self) -> set[TopicPartition]:
        return {tp for tp, rp in self.partitions.items() if any(log.dir.exists() for log in rp.logs.values())}

    def present_txn_state_partitions(self) -> set[int]:
        return {p for (t, p) in self.present_partitions() if t == wire.TRANSACTION_STATE_TOPIC}


def _feature_level(name: str, level: int) -> bytes:
    """A FeatureLevelRecord's body (version 0, flexible): the name as a compact string, the level, no tagged field.
    Level 22 of ``metadata.version`` is Kafka 4.0-IV0 (``MetadataVersion.IBP_4_0_IV0``)."""
    raw = name.encode()
    return bytes([len(raw) + 1]) + raw + struct.pack(">h", level) + b"\x00"
