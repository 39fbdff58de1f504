"""The simulated producers: :class:`PlainProducer` (no producer id),
:class:`IdempotentProducer` (producer id, sequences) and
:class:`TransactionalProducer` (TV0/1/2, several partitions per
transaction, offsets to ``__consumer_offsets``, commit, abort, crash, late
"deferred" batches), each with its own compression codec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from txnlog.brokerlog import encode
from txnlog.brokerlog.coordinator import TransactionCoordinator, TxnMetadata
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import AppendInfo
from txnlog.brokerlog.replicas import ProducerFencedError, TopicPartition
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, TransactionState

if TYPE_CHECKING:
    from txnlog.brokerlog.cluster import Cluster


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
