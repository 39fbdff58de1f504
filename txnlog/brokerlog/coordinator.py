"""The simulated transaction coordinator: the transaction state machine (TransactionMetadata,
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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.replicas import TopicPartition
from txnlog.kafka import wire
from txnlog.kafka.wire import ControlType, TransactionState

if TYPE_CHECKING:
    from txnlog.brokerlog.cluster import Cluster


class _TxnLogTags(TypedDict, total=False):
    """The tagged fields of a TransactionLogValue v1 (encode.encode_transaction_log_value)."""

    client_transaction_version: int
    previous_producer_id: int
    next_producer_id: int
    next_producer_epoch: int


_COMPLETED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


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
