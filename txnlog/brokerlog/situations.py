"""Situations: each acts one known kind of open transaction (or damage) on a cluster and returns what it
intends, for the ground truth. The named scenarios (txnlog.brokerlog.scenarios) combine them."""

from __future__ import annotations

from txnlog.brokerlog.cluster import (
    Cluster,
    IdempotentProducer,
    TopicPartition,
    TransactionalProducer,
)
from txnlog.brokerlog.ground_truth import HANGING, LATE, Intent
from txnlog.brokerlog.partition import PartitionLog
from txnlog.brokerlog.workload import HOUR, MAX_TIMEOUT
from txnlog.kafka.wire import Compression

# ---------------------------------------------------------------------------
# Situations: each makes one known kind of open transaction
# ---------------------------------------------------------------------------


def late_batch_after_abort(
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


def commit_elsewhere(c: Cluster, p: TransactionalProducer, tp: TopicPartition, n: int = 2) -> None:
    for _ in range(n):
        p.begin_transaction()
        p.send(*tp)
        p.commit_transaction()
        c.advance(c.rng.randint(500, 3_000))


def situation_coordinator_completed(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "payment-processor"
) -> list[Intent]:
    p = late_batch_after_abort(c, txn_id, hang, other)
    commit_elsewhere(c, p, other)  # the app carries on, never touching `hang` again
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
    late_batch_after_abort(c, txn_id, hang, other, compression=Compression.GZIP)
    return [Intent(HANGING, "TRANSACTIONAL_ID_EXPIRED", *hang, transactional_id=txn_id, label="owner tombstoned")]


def situation_partition_not_in_transaction_start(
    c: Cluster, hang: TopicPartition, other: TopicPartition, txn_id: str = "stock-sync"
) -> TransactionalProducer:
    # A 15-minute transaction timeout: its last transaction is still Ongoing at as_of.
    p = late_batch_after_abort(c, txn_id, hang, other, tv=1, compression=Compression.SNAPPY, timeout_ms=MAX_TIMEOUT)
    commit_elsewhere(c, p, other, n=1)
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
    commit_elsewhere(c, p, other, n=1)
    return [
        Intent(
            HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label=f"marker lost on broker {follower}"
        )
    ]


def roll_to(c: Cluster, producer: IdempotentProducer, tp: TopicPartition, segments: int) -> None:
    """Keep ``producer`` writing to ``tp`` until its leader's log has ``segments`` segments."""
    log = c.partition(*tp).leader_log
    while len(log.segments) < segments:
        producer.send(*tp)
        c.advance(150)


def retention_past_open_transaction(c: Cluster, producer: IdempotentProducer, tp: TopicPartition) -> PartitionLog:
    """Retention deletes the segment holding the first batch of ``tp``'s oldest open transaction."""
    log = c.partition(*tp).leader_log
    first_open = min(t.first_offset for t in log.open_txns.values())
    roll_to(c, producer, tp, 4)
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
    commit_elsewhere(c, p, other, n=1)
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
    commit_elsewhere(c, p, other, n=1)
    return [Intent(HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label="damaged COMMIT marker")]


def failover_mid_late_batch(c: Cluster) -> Intent:
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
