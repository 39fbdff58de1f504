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
* :class:`TransactionCoordinator` — the transaction state machine (TransactionMetadata,
  docs/formats.md §7, §9): InitProducerId (epoch bump, fencing an Ongoing transaction,
  TV0/1 producer-id rotation at epoch exhaustion), AddPartitions
  (Ongoing), EndTxn (PrepareCommit/PrepareAbort, markers to every partition,
  CompleteCommit/CompleteAbort), TV2 epoch bump on every end and producer-id
  rollover via NextProducerId, KIP-939 2PC (timeout 2147483647,
  keepPreparedTxn → NextProducerId/NextProducerEpoch), timeout aborts and
  transactional.id expiry (tombstone) as the clock advances. Records go to
  ``__transaction_state-<partitionFor(id)>``; the coordinator epoch is that
  partition's leader epoch. Value v0 while the cluster's
  ``transaction.version`` feature is 0, v1 (flexible, tagged fields) from 1.
* Producers — :class:`PlainProducer` (no producer id),
  :class:`IdempotentProducer` (producer id, sequences) and
  :class:`TransactionalProducer` (TV0/1/2, several partitions per
  transaction, offsets to ``__consumer_offsets``, commit, abort, crash, late
  "deferred" batches), each with its own compression codec.

Fault injection is explicit: undelivered markers, a stalled coordinator, a
replica that misses a batch, records compacted away. The scenarios in
:mod:`txnlog.brokerlog.scenarios` compose these into known situations.
"""

from __future__ import annotations

import base64
import random
import shutil
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import AppendInfo, PartitionLog
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, ControlType, TimestampType, TransactionState

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


TopicPartition = tuple[str, int]


class _ProducerKwargs(TypedDict):
    """The keyword arguments every producer kind takes (Cluster._producer_kwargs)."""

    client_id: str
    compression: Compression
    value_bytes: int
    records_per_batch: tuple[int, int]
    linger_ms: int


class _TxnLogTags(TypedDict, total=False):
    """The tagged fields of a TransactionLogValue v1 (encode.encode_transaction_log_value)."""

    client_transaction_version: int
    previous_producer_id: int
    next_producer_id: int
    next_producer_epoch: int


_COMPLETED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


class ProducerFencedError(RuntimeError):
    """The coordinator moved on (timeout abort, newer epoch, expiry): this producer instance is dead."""


class SimClock:
    """Simulated wall clock in epoch milliseconds (UTC)."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = int(now_ms)

    def __call__(self) -> int:
        return self.now_ms

    def iso(self) -> str:
        return datetime.fromtimestamp(self.now_ms / 1000, tz=UTC).isoformat()


# ---------------------------------------------------------------------------
# Record contents
# ---------------------------------------------------------------------------

_WORDS = (
    b"alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    b"quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
).split()


class RecordFactory:
    """Plausible keys and JSON-ish values (compressible like real payloads), deterministic."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seq = 0

    def value(self, size: int, ts: int) -> bytes:
        rng = self.rng
        self.seq += 1
        head = b'{"id":%d,"ts":%d,"customer":"c-%05d","amount":%d.%02d,"currency":"EUR","note":"' % (
            self.seq,
            ts,
            rng.randrange(100000),
            rng.randrange(1, 5000),
            rng.randrange(100),
        )
        if size < len(head) + 8:
            head = b'{"id":%d,"v":"' % self.seq
        words = []
        length = len(head) + 2
        while length < size:
            w = _WORDS[rng.randrange(len(_WORDS))]
            words.append(w)
            length += len(w) + 1
        return (head + b" ".join(words))[: max(size - 2, len(head))] + b'"}'

    def batch(
        self,
        *,
        end_ts: int,
        n_records: int,
        value_bytes: int,
        key_prefix: str,
        linger_ms: int = 5,
        header_probability: float = 0.2,
    ) -> tuple[list[RecordSpec], int]:
        """Records created over ``linger_ms`` ending at ``end_ts``; returns (records, base timestamp)."""
        rng = self.rng
        span = rng.randint(0, linger_ms) if n_records > 1 else 0
        base_ts = end_ts - span
        deltas = sorted([0] + [rng.randint(0, span) for _ in range(n_records - 1)])
        records = []
        for i, delta in enumerate(deltas):
            key = f"{key_prefix}-{rng.randrange(100000):05d}".encode()
            size = max(24, int(value_bytes * rng.uniform(0.6, 1.4)))
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if rng.random() < header_probability:
                headers = (("trace-id", b"%032x" % rng.getrandbits(128)), ("source", b"checkout-service"))
            records.append(RecordSpec(i, delta, key, self.value(size, base_ts + delta), headers))
        return records, base_ts


# ---------------------------------------------------------------------------
# Brokers, topics, replicas
# ---------------------------------------------------------------------------


@dataclass
class Broker:
    broker_id: int
    log_dir: Path
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)


@dataclass
class TopicConfig:
    name: str
    partitions: int
    replication_factor: int
    segment_bytes: int
    index_interval_bytes: int
    timestamp_type: TimestampType
    compacted: bool
    topic_id: bytes


class ReplicatedPartition:
    """One partition and its replicas; appends go to the leader and are copied to followers."""

    def __init__(
        self, topic: str, partition: int, replicas: Sequence[int], logs: dict[int, PartitionLog], leader_epoch: int
    ):
        self.topic = topic
        self.partition = partition
        self.replicas = tuple(replicas)
        self.leader = self.replicas[0]
        self.logs = logs
        self.leader_epoch = leader_epoch
        #: broker id → True while that follower is cut off (misses appends).
        self.offline_followers: set[int] = set()

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def leader_log(self) -> PartitionLog:
        return self.logs[self.leader]

    def append(self, batch: bytes, *, skip_replicas: Iterable[int] = ()) -> AppendInfo:
        """Leader append, then followers copy the same bytes at the same offsets."""
        info = self.leader_log.append(batch)
        skip = set(skip_replicas) | self.offline_followers
        for broker_id, log in self.logs.items():
            if broker_id != self.leader and broker_id not in skip:
                log.append(info.data, base_offset=info.base_offset)
        return info

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        control_type: ControlType,
        coordinator_epoch: int,
        timestamp: int,
        skip_replicas: Iterable[int] = (),
    ) -> AppendInfo:
        batch = encode.encode_end_txn_marker_batch(
            offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            control_type=control_type,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
        )
        return self.append(batch, skip_replicas=skip_replicas)

    def bump_leader_epoch(self, new_leader: int | None = None) -> int:
        """A leader election: new leader (default: same) and leader epoch + 1."""
        if new_leader is not None:
            if new_leader not in self.replicas:
                raise ValueError(f"broker {new_leader} holds no replica of {self.topic}-{self.partition}")
            self.leader = new_leader
        self.leader_epoch += 1
        for log in self.logs.values():
            log.leader_epoch = self.leader_epoch
        return self.leader_epoch


# ---------------------------------------------------------------------------
# Transaction coordinator
# ---------------------------------------------------------------------------


@dataclass
class TxnMetadata:
    """The coordinator's in-memory TransactionMetadata for one transactional.id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = wire.NO_PRODUCER_EPOCH
    last_producer_epoch: int = wire.NO_PRODUCER_EPOCH
    previous_producer_id: int = wire.NO_PRODUCER_ID
    next_producer_id: int = wire.NO_PRODUCER_ID
    next_producer_epoch: int = wire.NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    tombstoned: bool = False
    #: The coordinator makes no progress on this id (no timeout abort, no marker retry).
    stalled: bool = False
    #: Its records are not in the log (compacted away, tombstone included).
    unlogged: bool = False
    pending_markers: set[TopicPartition] = field(default_factory=set)

    @property
    def is_two_phase_commit(self) -> bool:
        return self.timeout_ms == wire.TWO_PHASE_COMMIT_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class CoordinatorRecordTruth:
    """One TransactionLogKey/Value record as written (``state`` None for a tombstone)."""

    transactional_id: str
    txn_state_partition: int
    offset: int
    timestamp: int
    value_version: int | None
    producer_id: int
    producer_epoch: int
    state: TransactionState | None
    partitions: tuple[TopicPartition, ...]
    timeout_ms: int
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    previous_producer_id: int
    next_producer_id: int
    next_producer_epoch: int
    client_transaction_version: int
    coordinator_epoch: int


def _is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= wire.EPOCH_EXHAUSTION_THRESHOLD


class TransactionCoordinator:
    """The transaction coordinator of the whole cluster (all ``__transaction_state`` partitions)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.metadata: dict[str, TxnMetadata] = {}
        self.records: list[CoordinatorRecordTruth] = []
        #: Skew of the clock of the broker that leads the ``__transaction_state`` partitions: after a
        #: failover another broker's clock stamps the records, so timestamps can go backwards in
        #: offset order (``failover``).
        self.record_clock_skew_ms = 0

    def failover(self, *, clock_skew_ms: int, txn_state_partitions: Iterable[int] | None = None) -> None:
        """The coordinator moves to another broker: each ``__transaction_state`` partition gets a new
        leader epoch (the coordinator epoch markers carry) and the new broker's clock, ``clock_skew_ms``
        off the old one, stamps the records from now on."""
        parts = range(self.cluster.txn_state_partitions) if txn_state_partitions is None else txn_state_partitions
        for p in parts:
            self.cluster.partition(wire.TRANSACTION_STATE_TOPIC, p).bump_leader_epoch()
        self.record_clock_skew_ms += clock_skew_ms

    # -- placement --------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return wire.transaction_state_partition_for(transactional_id, self.cluster.txn_state_partitions)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """Leader epoch of the id's ``__transaction_state`` partition (what markers carry)."""
        return self.cluster.partition(wire.TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)).leader_epoch

    # -- writing ------------------------------------------------------------

    def _write(self, meta: TxnMetadata, *, tombstone: bool = False) -> None:
        if meta.unlogged:
            return
        cluster = self.cluster
        now = cluster.clock() + self.record_clock_skew_ms
        p = self.partition_for(meta.transactional_id)
        version = wire.TXN_LOG_VALUE_V1 if cluster.transaction_version_feature >= 1 else wire.TXN_LOG_VALUE_V0
        value: bytes | None = None
        if not tombstone:
            grouped: dict[str, list[int]] = {}
            for topic, part in meta.partitions:
                grouped.setdefault(topic, []).append(part)
            tags: _TxnLogTags = {}
            if version >= wire.TXN_LOG_VALUE_V1:
                tags["client_transaction_version"] = meta.client_transaction_version
                if cluster.txn_log_tagged_fields == "trunk":
                    tags["previous_producer_id"] = meta.previous_producer_id
                    tags["next_producer_id"] = meta.next_producer_id
                    tags["next_producer_epoch"] = meta.next_producer_epoch
            value = encode.encode_transaction_log_value(
                version=version,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                transaction_timeout_ms=meta.timeout_ms,
                state=meta.state,
                partitions=None if meta.state == TransactionState.EMPTY else grouped,
                last_update_timestamp_ms=meta.txn_last_update_timestamp,
                start_timestamp_ms=meta.txn_start_timestamp,
                **tags,
            )
        batch = encode.encode_record_batch(
            base_offset=0,
            records=[RecordSpec(0, 0, encode.encode_transaction_log_key(meta.transactional_id), value)],
            base_timestamp=now,
        )
        info = cluster.partition(wire.TRANSACTION_STATE_TOPIC, p).append(batch)
        v1 = version >= wire.TXN_LOG_VALUE_V1 and not tombstone
        trunk = v1 and cluster.txn_log_tagged_fields == "trunk"
        self.records.append(
            CoordinatorRecordTruth(
                transactional_id=meta.transactional_id,
                txn_state_partition=p,
                offset=info.base_offset,
                timestamp=now,
                value_version=None if tombstone else version,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                state=None if tombstone else meta.state,
                partitions=() if tombstone else tuple(meta.partitions),
                timeout_ms=meta.timeout_ms,
                txn_start_timestamp=meta.txn_start_timestamp,
                txn_last_update_timestamp=meta.txn_last_update_timestamp,
                previous_producer_id=meta.previous_producer_id if trunk else wire.NO_PRODUCER_ID,
                next_producer_id=meta.next_producer_id if trunk else wire.NO_PRODUCER_ID,
                next_producer_epoch=meta.next_producer_epoch if trunk else wire.NO_PRODUCER_EPOCH,
                client_transaction_version=meta.client_transaction_version if v1 else 0,
                coordinator_epoch=self.coordinator_epoch(meta.transactional_id),
            )
        )

    def _transition(self, meta: TxnMetadata, state: TransactionState, **changes: object) -> None:
        # TransactionMetadata.prepareTransitionTo: PreviousProducerId is the
        # producer id held *before* the transition (equal to ProducerId except
        # after a rotation or a KIP-890 rollover).
        meta.previous_producer_id = meta.producer_id
        for name, value in changes.items():
            setattr(meta, name, value)
        meta.state = state
        meta.txn_last_update_timestamp = self.cluster.clock()
        self._write(meta)

    # -- requests -------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        *,
        timeout_ms: int,
        keep_prepared_txn: bool = False,
        unlogged: bool = False,
    ) -> tuple[int, int]:
        """InitProducerId for a transactional producer; returns (producer id, epoch)."""
        meta = self.metadata.get(transactional_id)
        if meta is None or meta.tombstoned:
            meta = TxnMetadata(transactional_id, producer_id=self.cluster.allocate_producer_id(), unlogged=unlogged)
            self.metadata[transactional_id] = meta
            self._transition(
                meta,
                TransactionState.EMPTY,
                producer_epoch=0,
                last_producer_epoch=wire.NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions={},
                txn_start_timestamp=-1,
            )
            return meta.producer_id, meta.producer_epoch
        if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise RuntimeError(f"{transactional_id}: markers pending, InitProducerId would get CONCURRENT_TRANSACTIONS")
        if meta.state == TransactionState.ONGOING:
            if keep_prepared_txn and meta.is_two_phase_commit:
                # KIP-939: keep the prepared transaction; the new identity waits in Next*.
                self._transition(
                    meta,
                    TransactionState.ONGOING,
                    next_producer_id=self.cluster.allocate_producer_id(),
                    next_producer_epoch=0,
                )
                return meta.producer_id, meta.producer_epoch
            # Fence the current producer: abort its transaction with a bumped epoch.
            self.end_transaction(transactional_id, commit=False, fence=True)
        if _is_epoch_exhausted(meta.producer_epoch):
            # prepareProducerIdRotation (TV0/1 exhaustion at InitProducerId).
            self._transition(
                meta,
                TransactionState.EMPTY,
                producer_id=self.cluster.allocate_producer_id(),
                producer_epoch=0,
                last_producer_epoch=wire.NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions={},
                txn_start_timestamp=-1,
                next_producer_id=wire.NO_PRODUCER_ID,
                next_producer_epoch=wire.NO_PRODUCER_EPOCH,
            )
        else:
            self._transition(
                meta,
                TransactionState.EMPTY,
                producer_epoch=meta.producer_epoch + 1,
                last_producer_epoch=wire.NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions={},
                txn_start_timestamp=-1,
                next_producer_id=wire.NO_PRODUCER_ID,
                next_producer_epoch=wire.NO_PRODUCER_EPOCH,
            )
        return meta.producer_id, meta.producer_epoch

    def seed_transactional_id(
        self,
        transactional_id: str,
        *,
        producer_epoch: int,
        timeout_ms: int,
        client_transaction_version: int,
    ) -> tuple[int, int]:
        """An id with a long history, of which compaction kept only the latest record (Empty)."""
        if transactional_id in self.metadata:
            raise ValueError(f"{transactional_id} already exists")
        meta = TxnMetadata(transactional_id, producer_id=self.cluster.allocate_producer_id())
        self.metadata[transactional_id] = meta
        self._transition(
            meta,
            TransactionState.EMPTY,
            producer_epoch=producer_epoch,
            timeout_ms=timeout_ms,
            partitions={},
            txn_start_timestamp=-1,
            client_transaction_version=client_transaction_version,
        )
        return meta.producer_id, meta.producer_epoch

    def add_partitions(
        self, transactional_id: str, tps: Iterable[TopicPartition], client_transaction_version: int
    ) -> None:
        """AddPartitionsToTxn (TV0/1 client; TV2 brokers do it implicitly on produce)."""
        meta = self.metadata[transactional_id]
        if meta.state not in (TransactionState.ONGOING, *_COMPLETED):
            raise RuntimeError(f"{transactional_id}: cannot add partitions in {meta.state.kafka_name}")
        new = [tp for tp in tps if tp not in meta.partitions]
        if meta.state == TransactionState.ONGOING and not new:
            return
        start = meta.txn_start_timestamp if meta.state == TransactionState.ONGOING else self.cluster.clock()
        partitions = dict(meta.partitions)
        partitions.update(dict.fromkeys(new))
        self._transition(
            meta,
            TransactionState.ONGOING,
            partitions=partitions,
            txn_start_timestamp=start,
            client_transaction_version=client_transaction_version,
        )

    def end_transaction(
        self,
        transactional_id: str,
        *,
        commit: bool,
        fence: bool = False,
        deliver_markers_to: Iterable[TopicPartition] | None = None,
        complete: bool = True,
    ) -> tuple[int, int] | None:
        """EndTxn (or a coordinator-side abort when ``fence``): Prepare*, markers, Complete*.

        Returns the (producer id, epoch) the producer continues with, or None
        when markers were left undelivered (the id stays in Prepare*).
        """
        cluster = self.cluster
        meta = self.metadata[transactional_id]
        tv2 = meta.client_transaction_version >= 2
        empty_abort = meta.state in _COMPLETED and tv2 and not commit
        if meta.state != TransactionState.ONGOING and not empty_abort:
            raise RuntimeError(f"{transactional_id}: EndTxn in state {meta.state.kafka_name}")
        old_pid, old_epoch = meta.producer_id, meta.producer_epoch
        if fence:
            # TransactionMetadata.prepareFenceProducerEpoch: the abort markers carry the fenced epoch.
            new_epoch = min(old_epoch + 1, wire.MAX_PRODUCER_EPOCH)
        elif tv2 and not (old_epoch == wire.MAX_PRODUCER_EPOCH and not commit):
            new_epoch = old_epoch + 1  # KIP-890: epoch bump on every transaction end
        else:
            new_epoch = old_epoch
        next_pid = wire.NO_PRODUCER_ID
        if tv2 and not fence and _is_epoch_exhausted(old_epoch):
            next_pid = cluster.allocate_producer_id()  # rollover: markers keep the old id at epoch 32767
        start = cluster.clock() if empty_abort else meta.txn_start_timestamp
        self._transition(
            meta,
            TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT,
            producer_epoch=new_epoch,
            last_producer_epoch=old_epoch if tv2 else meta.last_producer_epoch,
            next_producer_id=next_pid,
            txn_start_timestamp=start,
        )
        deliver = None if deliver_markers_to is None else set(deliver_markers_to)
        coordinator_epoch = self.coordinator_epoch(transactional_id)
        control = ControlType.COMMIT if commit else ControlType.ABORT
        pending: set[TopicPartition] = set()
        for tp in meta.partitions:
            if deliver is not None and tp not in deliver:
                pending.add(tp)
                continue
            cluster.tick(0, 2)
            cluster.partition(*tp).append_end_txn_marker(
                producer_id=old_pid,
                producer_epoch=new_epoch,
                control_type=control,
                coordinator_epoch=coordinator_epoch,
                timestamp=cluster.clock(),
            )
        meta.pending_markers = pending
        if pending or not complete:
            meta.stalled = True
            return None
        return self._complete(meta)

    def _complete(self, meta: TxnMetadata) -> tuple[int, int]:
        self.cluster.tick(1, 3)
        rollover = meta.client_transaction_version >= 2 and meta.next_producer_id != wire.NO_PRODUCER_ID
        self._transition(
            meta,
            TransactionState.COMPLETE_COMMIT
            if meta.state == TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT,
            producer_id=meta.next_producer_id if rollover else meta.producer_id,
            producer_epoch=0 if rollover else meta.producer_epoch,
            next_producer_id=wire.NO_PRODUCER_ID,
            partitions={},
        )
        meta.pending_markers = set()
        return meta.producer_id, meta.producer_epoch

    def deliver_pending_markers(self, transactional_id: str) -> tuple[int, int]:
        """The unreachable partition leaders came back: send the rest of the markers, complete."""
        meta = self.metadata[transactional_id]
        control = ControlType.COMMIT if meta.state == TransactionState.PREPARE_COMMIT else ControlType.ABORT
        old_pid = meta.producer_id  # Prepare* keeps the transaction's producer id (a rollover waits in Next*)
        for tp in sorted(meta.pending_markers):
            self.cluster.tick(0, 2)
            self.cluster.partition(*tp).append_end_txn_marker(
                producer_id=old_pid,
                producer_epoch=meta.producer_epoch,
                control_type=control,
                coordinator_epoch=self.coordinator_epoch(transactional_id),
                timestamp=self.cluster.clock(),
            )
        meta.stalled = False
        return self._complete(meta)

    def expire(self, transactional_id: str) -> None:
        """removeExpiredTransactionalIds: Dead in memory, a tombstone in the log."""
        meta = self.metadata[transactional_id]
        if meta.state not in _COMPLETED:
            raise RuntimeError(f"{transactional_id}: only Empty/Complete* ids expire")
        meta.tombstoned = True
        self._write(meta, tombstone=True)

    def stall(self, transactional_id: str) -> None:
        """The coordinator stops making progress on this id (no timeout abort, no expiry)."""
        self.metadata[transactional_id].stalled = True

    # -- background work, as the clock advances ------------------------------

    def next_due(self, until_ms: int) -> tuple[int, str, str] | None:
        """Earliest (time, action, transactional id) the coordinator would act on by ``until_ms``."""
        best: tuple[int, str, str] | None = None
        cluster = self.cluster
        for txn_id, meta in self.metadata.items():
            if meta.tombstoned or meta.stalled or meta.unlogged:
                continue
            if meta.state == TransactionState.ONGOING and not meta.is_two_phase_commit:
                interval = wire.DEFAULT_ABORT_TIMED_OUT_TRANSACTIONS_INTERVAL_MS
                due = ((meta.txn_start_timestamp + meta.timeout_ms) // interval + 1) * interval
                action = "abort"
            elif meta.state in _COMPLETED:
                interval = wire.DEFAULT_REMOVE_EXPIRED_TRANSACTIONAL_IDS_INTERVAL_MS
                due = (
                    (meta.txn_last_update_timestamp + cluster.transactional_id_expiration_ms) // interval + 1
                ) * interval
                action = "expire"
            else:
                continue
            if due <= until_ms and (best is None or (due, txn_id) < (best[0], best[2])):
                best = (due, action, txn_id)
        return best

    def run_due(self, due: tuple[int, str, str]) -> None:
        _, action, txn_id = due
        if action == "abort":
            self.end_transaction(txn_id, commit=False, fence=True)
        else:
            self.expire(txn_id)


# ---------------------------------------------------------------------------
# Producers
# ---------------------------------------------------------------------------


class _Producer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        client_id: str,
        compression: Compression,
        value_bytes: int,
        records_per_batch: tuple[int, int],
        linger_ms: int,
    ) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self.compression = Compression(compression)
        self.value_bytes = value_bytes
        self.records_per_batch = records_per_batch
        self.linger_ms = linger_ms
        self.producer_id = wire.NO_PRODUCER_ID
        self.producer_epoch = wire.NO_PRODUCER_EPOCH
        self._sequences: dict[TopicPartition, int] = {}

    def _records(self, topic: str, n_records: int | None, value_bytes: int | None) -> tuple[list[RecordSpec], int]:
        c = self.cluster
        if n_records is None:
            n_records = c.rng.randint(*self.records_per_batch)
        c.tick(1, 4)
        return c.records.batch(
            end_ts=c.clock(),
            n_records=n_records,
            value_bytes=value_bytes or self.value_bytes,
            key_prefix=topic,
            linger_ms=self.linger_ms,
        )

    def _build(
        self,
        topic: str,
        partition: int,
        *,
        records: Sequence[RecordSpec] | None,
        n_records: int | None,
        value_bytes: int | None,
        transactional: bool,
    ) -> bytes:
        if records is None:
            records, base_ts = self._records(topic, n_records, value_bytes)
        else:
            base_ts = self.cluster.clock()
        seq = wire.NO_SEQUENCE
        if self.producer_id >= 0:
            tp = (topic, partition)
            seq = self._sequences.get(tp, 0)
            self._sequences[tp] = (seq + records[-1].offset_delta + 1) % (1 << 31)
        return encode.encode_record_batch(
            base_offset=0,
            records=records,
            base_timestamp=base_ts,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=seq,
            is_transactional=transactional,
            compression=self.compression,
        )


class PlainProducer(_Producer):
    """``enable.idempotence=false``: no producer id, no sequences."""

    def send(
        self,
        topic: str,
        partition: int,
        *,
        records: Sequence[RecordSpec] | None = None,
        n_records: int | None = None,
        value_bytes: int | None = None,
    ) -> AppendInfo:
        batch = self._build(
            topic, partition, records=records, n_records=n_records, value_bytes=value_bytes, transactional=False
        )
        return self.cluster.partition(topic, partition).append(batch)


class IdempotentProducer(PlainProducer):
    """The default Java producer since 3.0: a producer id (no transactional.id) and sequences."""

    def __init__(self, cluster: Cluster, **kwargs: Any) -> None:
        super().__init__(cluster, **kwargs)
        self.producer_id = cluster.allocate_producer_id()
        self.producer_epoch = 0


@dataclass
class DeferredBatch:
    """A produce request built now and appended later (a request stuck in flight)."""

    cluster: Cluster
    tp: TopicPartition
    batch: bytes

    def deliver(self) -> AppendInfo:
        return self.cluster.partition(*self.tp).append(self.batch)


class TransactionalProducer(_Producer):
    """A transactional producer (TV0, TV1 or TV2; 2PC with ``two_phase_commit``)."""

    def __init__(
        self,
        cluster: Cluster,
        transactional_id: str,
        *,
        transaction_version: int = 2,
        transaction_timeout_ms: int = 60_000,
        two_phase_commit: bool = False,
        coordinator_records: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(cluster, **kwargs)
        self.transactional_id = transactional_id
        self.requested_transaction_version = transaction_version
        self.transaction_timeout_ms = wire.TWO_PHASE_COMMIT_TIMEOUT_MS if two_phase_commit else transaction_timeout_ms
        self.coordinator_records = coordinator_records
        self.in_transaction = False
        self.partitions: list[TopicPartition] = []
        self.crashed = False
        self.transaction_version = min(transaction_version, cluster.transaction_version_feature)

    @property
    def coordinator(self) -> TransactionCoordinator:
        return self.cluster.coordinator

    def _check_alive(self) -> TxnMetadata:
        if self.crashed:
            raise ProducerFencedError(f"{self.transactional_id}: producer crashed")
        meta = self.coordinator.metadata.get(self.transactional_id)
        if (
            meta is None
            or meta.tombstoned
            or (meta.producer_id, meta.producer_epoch) != (self.producer_id, self.producer_epoch)
        ):
            raise ProducerFencedError(
                f"{self.transactional_id}: producer {self.producer_id}/{self.producer_epoch} fenced"
            )
        return meta

    def init_transactions(self, *, keep_prepared_txn: bool = False) -> TransactionalProducer:
        # The client settles on a transaction version when it starts (finalized feature level).
        self.transaction_version = min(self.requested_transaction_version, self.cluster.transaction_version_feature)
        self.cluster.tick(1, 10)
        self.producer_id, self.producer_epoch = self.coordinator.init_producer_id(
            self.transactional_id,
            timeout_ms=self.transaction_timeout_ms,
            keep_prepared_txn=keep_prepared_txn,
            unlogged=not self.coordinator_records,
        )
        meta = self.coordinator.metadata[self.transactional_id]
        self.in_transaction = meta.state == TransactionState.ONGOING
        self.partitions = list(meta.partitions) if self.in_transaction else []
        self._sequences = {}
        return self

    def begin_transaction(self) -> None:
        self._check_alive()
        if self.in_transaction:
            raise RuntimeError(f"{self.transactional_id}: a transaction is already open")
        self.in_transaction = True
        self.partitions = []

    def _ensure_partition(self, tp: TopicPartition) -> None:
        if tp not in self.partitions:
            self.coordinator.add_partitions(self.transactional_id, [tp], self.transaction_version)
            self.partitions.append(tp)

    def send(
        self,
        topic: str,
        partition: int,
        *,
        records: Sequence[RecordSpec] | None = None,
        n_records: int | None = None,
        value_bytes: int | None = None,
    ) -> AppendInfo:
        return self.send_deferred(
            topic, partition, records=records, n_records=n_records, value_bytes=value_bytes
        ).deliver()

    def send_deferred(
        self,
        topic: str,
        partition: int,
        *,
        records: Sequence[RecordSpec] | None = None,
        n_records: int | None = None,
        value_bytes: int | None = None,
    ) -> DeferredBatch:
        """Build the produce request now (partition added to the transaction); append it when delivered."""
        self._check_alive()
        if not self.in_transaction:
            raise RuntimeError(f"{self.transactional_id}: send outside a transaction")
        tp = (topic, partition)
        self._ensure_partition(tp)
        batch = self._build(
            topic, partition, records=records, n_records=n_records, value_bytes=value_bytes, transactional=True
        )
        return DeferredBatch(self.cluster, tp, batch)

    def send_offsets_to_transaction(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> AppendInfo:
        """AddOffsetsToTxn + TxnOffsetCommit: a transactional batch in the group's ``__consumer_offsets`` partition."""
        self._check_alive()
        cluster = self.cluster
        cluster.ensure_consumer_offsets()
        # GroupCoordinator.partitionFor uses the same abs(hashCode) % partitions rule.
        p = wire.transaction_state_partition_for(group_id, cluster.consumer_offsets_partitions)
        tp = (wire.CONSUMER_OFFSETS_TOPIC, p)
        self._ensure_partition(tp)
        cluster.tick(1, 5)
        now = cluster.clock()
        records = [
            RecordSpec(
                i,
                0,
                encode.encode_offset_commit_key(group_id, topic, part),
                encode.encode_offset_commit_value(offset, -1, "", now),
            )
            for i, ((topic, part), offset) in enumerate(sorted(offsets.items()))
        ]
        batch = encode.encode_record_batch(
            base_offset=0,
            records=records,
            base_timestamp=now,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        return cluster.partition(*tp).append(batch)

    def _end(self, commit: bool, deliver_markers_to: Iterable[TopicPartition] | None, complete: bool) -> None:
        self._check_alive()
        if not self.in_transaction:
            raise RuntimeError(f"{self.transactional_id}: no transaction to end")
        self.cluster.tick(1, 10)
        if not self.partitions:
            # Nothing was added: the client ends the transaction locally, no EndTxn request.
            self.in_transaction = False
            return
        result = self.coordinator.end_transaction(
            self.transactional_id, commit=commit, deliver_markers_to=deliver_markers_to, complete=complete
        )
        self.in_transaction = False
        if result is not None:
            if (result[0], result[1]) != (self.producer_id, self.producer_epoch):
                self._sequences = {}
            self.producer_id, self.producer_epoch = result
        else:
            self.crashed = True  # the application waits forever on EndTxn; treat it as gone

    def commit_transaction(
        self, *, deliver_markers_to: Iterable[TopicPartition] | None = None, complete: bool = True
    ) -> None:
        self._end(True, deliver_markers_to, complete)

    def abort_transaction(
        self, *, deliver_markers_to: Iterable[TopicPartition] | None = None, complete: bool = True
    ) -> None:
        self._end(False, deliver_markers_to, complete)

    def crash(self) -> None:
        """The process dies: nothing more is sent; the coordinator times the transaction out."""
        self.crashed = True


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
