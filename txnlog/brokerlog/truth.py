"""A scenario's :class:`~txnlog.brokerlog.ground_truth.ScenarioResult`, assembled from the simulation's state and
from what is left on disk, and checked against what the scenario meant to produce (its intents)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from txnlog.brokerlog.broker_time import broker_time_ms
from txnlog.brokerlog.cluster import Cluster, CoordinatorRecordTruth, TopicPartition
from txnlog.brokerlog.ground_truth import (
    LATE,
    SAFE,
    VERIFY_FIRST,
    ExpectedCoordinatorState,
    ExpectedFinding,
    ExpectedOpenTransaction,
    ExpectedPartition,
    ExpectedProducer,
    ExpectedTransaction,
    Intent,
    ScenarioResult,
)
from txnlog.brokerlog.partition import PartitionLog, QuarantineTruth, TxnRecord
from txnlog.brokerlog.truth_partitions import (
    classify,
    damage_in_doubt,
    damaged_ranges,
    files_and_bytes,
    last_stable_offset,
    latest_records,
    partition_truth,
    reference_log,
    tp_name,
    txn_state_damaged,
)
from txnlog.kafka import wire
from txnlog.kafka.wire import ControlType, TransactionState

#: a coordinator record's states that should have ended by its timeout
_STUCK = {
    TransactionState.ONGOING,
    TransactionState.PREPARE_COMMIT,
    TransactionState.PREPARE_ABORT,
    TransactionState.PREPARE_EPOCH_FENCE,
}


@dataclass
class _Truth:
    """What :func:`assemble` gathers, partition by partition, before it becomes a :class:`ScenarioResult`."""

    as_of_ms: int
    max_transaction_timeout_ms: int
    latest: dict[str, CoordinatorRecordTruth]
    history: dict[str, list[CoordinatorRecordTruth]]
    all_txn_state: bool
    open_txns: list[ExpectedOpenTransaction] = field(default_factory=list)
    findings: list[ExpectedFinding] = field(default_factory=list)
    transactions: list[ExpectedTransaction] = field(default_factory=list)
    partitions: dict[TopicPartition, ExpectedPartition] = field(default_factory=dict)
    replica_partitions: dict[tuple[int, str, int], ExpectedPartition] = field(default_factory=dict)
    marker_counts: dict[TopicPartition, dict[str, int]] = field(default_factory=dict)
    legacy: int = 0
    behind: list[tuple[int, str, int, int, int]] = field(default_factory=list)
    producers: list[ExpectedProducer] = field(default_factory=list)


def assemble(
    cluster: Cluster,
    *,
    name: str,
    description: str,
    intents: Iterable[Intent] = (),
    max_transaction_timeout_ms: int = wire.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    as_of_ms: int | None = None,
    elapsed_s: float = 0.0,
    notes: Mapping[str, object] | None = None,
    strict_intents: bool = True,
) -> ScenarioResult:
    """Compute the ground truth of a closed cluster's on-disk output and check it against the intents."""
    present = cluster.present_partitions()
    txn_present = cluster.present_txn_state_partitions()
    if as_of_ms is None:  # the job's rule: the newest broker-written time (txnlog.brokerlog.broker_time)
        as_of_ms = broker_time_ms(cluster)
    latest, history = latest_records(cluster.coordinator.records, txn_present)
    truth = _Truth(
        as_of_ms, max_transaction_timeout_ms, latest, history, len(txn_present) == cluster.txn_state_partitions
    )
    for tp in sorted(tp for tp in present if tp[0] != wire.TRANSACTION_STATE_TOPIC):
        rp = cluster.partitions[tp]
        copies = [(b, rp.logs[b]) for b in rp.replicas if rp.logs[b].dir.exists()]
        _partition_rows(cluster, tp, copies, truth)
        _open_transactions(cluster, tp, copies, truth)
    truth.findings.extend(_coordinator_stuck(truth, present))
    files, size = files_and_bytes(cluster.root)
    result = ScenarioResult(
        name=name,
        seed=cluster.seed,
        root=cluster.root,
        log_dirs=tuple(sorted((b.log_dir for b in cluster.brokers.values() if b.log_dir.exists()), key=str)),
        cluster_name=cluster.name,
        as_of_ms=as_of_ms,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        description=description,
        open_transactions=tuple(truth.open_txns),
        findings=tuple(truth.findings),
        transactions=tuple(truth.transactions),
        partitions=truth.partitions,
        replica_partitions=truth.replica_partitions,
        coordinator=_coordinator_rows(latest, history),
        marker_counts=truth.marker_counts,
        quarantine=_quarantine(cluster, present),
        legacy_entries=truth.legacy,
        txn_state_partitions_present=tuple(sorted(txn_present)),
        all_txn_state_partitions_present=truth.all_txn_state,
        bytes_written=size,
        files_written=files,
        elapsed_s=elapsed_s,
        notes=dict(notes or {}),
        behind=tuple(truth.behind),
        producers=tuple(truth.producers),
        txn_state_partitions=cluster.txn_state_partitions,
    )
    _check_intents(result, list(intents), strict=strict_intents)
    return result


def _partition_rows(
    cluster: Cluster, tp: TopicPartition, copies: list[tuple[int, PartitionLog]], truth: _Truth
) -> None:
    """A data partition's rows: each replica's partition row, and of the reference replica the partition row,
    marker counts, legacy entries, producers and retained transactions."""
    brokers = tuple(b for b, _ in copies)
    ref = reference_log(cluster, tp)
    assert ref is not None
    ref_broker, ref_log = ref
    for b, log in copies:
        truth.replica_partitions[(b, tp[0], tp[1])] = partition_truth(
            tp,
            b,
            brokers,
            log,
            truth.as_of_ms,
            truth.max_transaction_timeout_ms,
            last_stable_offset(cluster, b, tp, log),
            cluster.high_watermark(b, tp, log),
        )
    truth.partitions[tp] = truth.replica_partitions[(ref_broker, tp[0], tp[1])]
    retained = ref_log.retained_markers()
    truth.marker_counts[tp] = {
        "COMMIT": sum(1 for m in retained if m.control_type == ControlType.COMMIT),
        "ABORT": sum(1 for m in retained if m.control_type == ControlType.ABORT),
    }
    truth.legacy += ref_log.legacy_entry_count
    truth.producers.extend(
        _producer_truth(tp, ref_broker, ref_log, truth.as_of_ms, ref_broker in cluster.clean_shutdown_brokers)
    )
    for t in ref_log.transactions:
        if t.first_offset >= ref_log.log_start_offset or t.outcome == "OPEN":
            truth.transactions.append(_transaction_row(tp, t))


def _closing_markers(copies: list[tuple[int, PartitionLog]]) -> dict[tuple[int, int], int]:
    """(producer id, first offset) → the furthest offset of a marker closing that transaction on any copy."""
    closing: dict[tuple[int, int], int] = {}
    for _b, log in copies:
        for t in log.transactions:
            if t.marker_offset is not None:
                k = (t.producer_id, t.first_offset)
                closing[k] = max(closing.get(k, -1), t.marker_offset)
    return closing


def _open_transactions(
    cluster: Cluster, tp: TopicPartition, copies: list[tuple[int, PartitionLog]], truth: _Truth
) -> None:
    """Open transactions across replicas, reported once with the replicas where open. Replicas are copies of
    the leader in offset order (docs/design.md §4): a copy that ends at or before another copy's marker for the
    transaction is behind and does not make it open; one that holds data past that marker and still lacks it
    has diverged (the abort is VERIFY_FIRST)."""
    closing = _closing_markers(copies)
    seen: dict[tuple[int, int], tuple[TxnRecord, PartitionLog, list[int]]] = {}
    for b, log in copies:
        for txn in log.open_txns.values():
            key = (txn.producer_id, txn.first_offset)
            if key in closing and log.log_end_offset <= closing[key]:
                truth.behind.append((b, tp[0], tp[1], *key))  # the marker has not reached this copy yet
                continue
            if key not in seen:
                seen[key] = (txn, log, [])
            seen[key][2].append(b)
    damage = damaged_ranges(copies)
    for (pid, _first), (txn, log, where) in sorted(seen.items(), key=lambda kv: kv[0][1]):
        _open_transaction(cluster, tp, copies, truth, pid, txn, log, tuple(where), closing, damage)


def _open_transaction(
    cluster: Cluster,
    tp: TopicPartition,
    copies: list[tuple[int, PartitionLog]],
    truth: _Truth,
    pid: int,
    txn: TxnRecord,
    log: PartitionLog,
    where: tuple[int, ...],
    closing: dict[tuple[int, int], int],
    damage: list[tuple[int, int | None]],
) -> None:
    """One open transaction's row, classified, and its finding when it has a verdict."""
    as_of_ms = truth.as_of_ms
    idle = as_of_ms - txn.last_timestamp
    verdict, reason, safety, txn_id, state, cpart = classify(
        tp=tp,
        pid=pid,
        idle_ms=idle,
        as_of=as_of_ms,
        threshold=truth.max_transaction_timeout_ms,
        latest=truth.latest,
        history=truth.history,
        all_txn_state=truth.all_txn_state,
    )
    if safety == SAFE and (
        (pid, txn.first_offset) in closing
        or damage_in_doubt(damage, txn)
        or (cpart is not None and txn_state_damaged(cluster, cpart))
    ):
        safety = VERIFY_FIRST
    # the producer's last marker on the partition: the most advanced copy's (coordinator epochs only grow)
    ce = max((lg.producers[pid].coordinator_epoch for _b, lg in copies if pid in lg.producers), default=-1)
    truth.open_txns.append(
        ExpectedOpenTransaction(
            topic=tp[0],
            partition=tp[1],
            producer_id=pid,
            producer_epoch=txn.producer_epoch,
            start_offset=txn.first_offset,
            last_offset=txn.last_offset,
            first_timestamp=txn.first_timestamp,
            last_timestamp=txn.last_timestamp,
            open_ms=as_of_ms - txn.first_timestamp,
            idle_ms=idle,
            batch_count=txn.batch_count,
            record_count=txn.record_count,
            transactional_id=txn_id,
            true_transactional_id=_true_owner(cluster, pid),
            coordinator_state=state,
            coordinator_epoch=ce,
            verdict=verdict,
            reason=reason,
            safety=safety,
            brokers=where,
            # "snapshot": its first batch is in no retained segment (DeleteRecords leaves it on disk)
            source="log" if txn.first_offset >= log.segments[0].base_offset else "snapshot",
            previous_marker_offset=txn.previous_marker_offset,
        )
    )
    if verdict is not None:
        truth.findings.append(
            ExpectedFinding(
                topic=tp[0],
                partition=tp[1],
                producer_id=pid,
                producer_epoch=txn.producer_epoch,
                start_offset=txn.first_offset,
                verdict=verdict,
                reason=reason or "",
                transactional_id=txn_id,
                safety=safety,
                coordinator_state=state,
                coordinator_partition=cpart,
                brokers=where,
            )
        )


def _coordinator_stuck(truth: _Truth, present: Iterable[TopicPartition]) -> list[ExpectedFinding]:
    """Coordinator-only: records stuck in a non-final state far past their timeout, none of whose partitions is
    in the input (docs/design.md §4, COORDINATOR_STUCK)."""
    present = set(present)
    findings = []
    for txn_id, r in sorted(truth.latest.items()):
        if r.state not in _STUCK or r.timeout_ms == wire.TWO_PHASE_COMMIT_TIMEOUT_MS:
            continue
        if (
            truth.as_of_ms - max(r.txn_start_timestamp, r.txn_last_update_timestamp)
            <= r.timeout_ms + truth.max_transaction_timeout_ms
        ):
            continue
        if any(tp in present for tp in r.partitions):
            continue
        findings.append(
            ExpectedFinding(
                topic=None,
                partition=None,
                producer_id=r.producer_id,
                producer_epoch=r.producer_epoch,
                start_offset=None,
                verdict=LATE,
                reason="COORDINATOR_STUCK",
                transactional_id=txn_id,
                safety=None,
                coordinator_state=r.state.kafka_name if r.state is not None else None,
                coordinator_partition=r.txn_state_partition,
            )
        )
    return findings


def _coordinator_rows(
    latest: Mapping[str, CoordinatorRecordTruth], history: Mapping[str, list[CoordinatorRecordTruth]]
) -> dict[str, ExpectedCoordinatorState]:
    """Each transactional id's latest coordinator record as the coordinator table's row."""
    return {
        txn_id: ExpectedCoordinatorState(
            transactional_id=txn_id,
            producer_id=r.producer_id,
            producer_epoch=r.producer_epoch,
            state=r.state.kafka_name if r.state is not None else None,
            timeout_ms=r.timeout_ms,
            partitions=tuple(tp_name(tp) for tp in r.partitions),
            txn_start_timestamp=r.txn_start_timestamp,
            last_update_timestamp=r.txn_last_update_timestamp,
            coordinator_partition=r.txn_state_partition,
            coordinator_epoch=r.coordinator_epoch,
            previous_producer_id=r.previous_producer_id,
            next_producer_id=r.next_producer_id,
            next_producer_epoch=r.next_producer_epoch,
            client_transaction_version=r.client_transaction_version,
            is_tombstoned=r.state is None,
            records=len(history[txn_id]),
        )
        for txn_id, r in latest.items()
    }


def _quarantine(cluster: Cluster, present: Iterable[TopicPartition]) -> tuple[QuarantineTruth, ...]:
    """The damage the writer made in the partitions present, its files relative to the cluster's root."""
    quarantine = []
    for tp in sorted(present):
        for b in cluster.partitions[tp].replicas:
            log = cluster.partitions[tp].logs[b]
            if log.dir.exists():
                for q in log.damage:
                    quarantine.append(replace(q, file=str(Path(q.file).relative_to(cluster.root))))
    return tuple(quarantine)


def _producer_truth(
    tp: TopicPartition, broker: int, log: PartitionLog, as_of: int, clean: bool = False
) -> list[ExpectedProducer]:
    """The reference replica's producers at ``as_of``: its producer state as the writer kept it, without the
    expired ones (``ProducerStateManager.removeExpiredProducers``: no open transaction and idle for at
    least ``producer.id.expiration.ms``).

    A clean copy speaks for its broker restarted on it: with no snapshot above the log start to load
    (``truncateAndReload`` deletes those at or below it), its rebuild reads from the log start
    (``UnifiedLog.rebuildProducerState``) and knows no producer whose last batch lies below it.

    A running broker's copy speaks for what its leader served, as far as the copy's files show it. The
    leader keeps every producer when its log start moves (``ProducerStateManager.onLogStartOffsetIncremented``
    removes none), and its disk keeps the snapshots and the bytes below a DeleteRecords log start that fed
    them, so the files show its state (:meth:`PartitionLog.producers_on_disk`), except where deleted
    segments fed producers that no snapshot on disk holds: then only what the files show counts."""
    reloaded = any(log.log_start_offset < o <= log.log_end_offset for o in log.snapshot_offsets)
    first = log.segments[0].base_offset
    unseen = (
        not clean
        and bool(log.deleted_segment_bases)
        and not any(first <= o <= log.log_end_offset for o in log.snapshot_offsets)
    )
    out = []
    for pid, state in sorted((log.producers_on_disk() if unseen else log.producers).items()):
        open_txn = state.current_txn_first_offset >= 0
        if not open_txn and as_of - state.last_timestamp >= log.producer_id_expiration_ms:
            continue
        if clean and not reloaded and not open_txn and state.last_offset < log.log_start_offset:
            continue
        out.append(
            ExpectedProducer(
                topic=tp[0],
                partition=tp[1],
                broker=broker,
                producer_id=pid,
                producer_epoch=state.producer_epoch,
                last_sequence=state.last_sequence,
                last_timestamp=state.last_timestamp,
                coordinator_epoch=state.coordinator_epoch,
                current_txn_start_offset=state.current_txn_first_offset if open_txn else None,
            )
        )
    return out


def _transaction_row(tp: TopicPartition, t: TxnRecord) -> ExpectedTransaction:
    return ExpectedTransaction(
        topic=tp[0],
        partition=tp[1],
        producer_id=t.producer_id,
        producer_epoch=t.producer_epoch,
        first_offset=t.first_offset,
        last_offset=t.last_offset,
        marker_offset=t.marker_offset,
        outcome=t.outcome,
        marker_epoch=t.marker_epoch,
        coordinator_epoch=t.coordinator_epoch,
        first_timestamp=t.first_timestamp,
        last_timestamp=t.last_timestamp,
        marker_timestamp=t.marker_timestamp,
        batch_count=t.batch_count,
        record_count=t.record_count,
        size_bytes=t.size_bytes,
    )


def _true_owner(cluster: Cluster, pid: int) -> str | None:
    owner = None
    for meta in cluster.coordinator.metadata.values():
        if pid in (meta.producer_id, meta.previous_producer_id):
            owner = meta.transactional_id
    if owner is None:
        for r in cluster.coordinator.records:
            if r.producer_id == pid:
                owner = r.transactional_id
    return owner


def _check_intents(result: ScenarioResult, intents: list[Intent], *, strict: bool) -> None:
    """Every intent must match exactly one finding (or open non-finding); with ``strict`` nothing else may be found."""
    matched: set[int] = set()
    for intent in intents:
        hits = []
        for i, f in enumerate(result.findings):
            if intent.reason is not None and f.reason != intent.reason:
                continue
            if intent.topic is not None and (f.topic, f.partition) != (intent.topic, intent.partition):
                continue
            if intent.producer_id is not None and f.producer_id != intent.producer_id:
                continue
            if (
                intent.transactional_id is not None
                and intent.reason != "NO_TRANSACTIONAL_ID"
                and f.transactional_id != intent.transactional_id
            ):
                continue
            hits.append(i)
        if intent.verdict is None:
            opens = [
                t
                for t in result.open_transactions
                if (intent.topic is None or (t.topic, t.partition) == (intent.topic, intent.partition))
                and (intent.producer_id is None or t.producer_id == intent.producer_id)
            ]
            if not opens or any(t.verdict is not None for t in opens):
                raise AssertionError(f"scenario {result.name}: intent {intent} expected an open, unflagged transaction")
            continue
        if len(hits) != 1 or result.findings[hits[0]].verdict != intent.verdict:
            raise AssertionError(
                f"scenario {result.name}: intent {intent.label or intent} matched {len(hits)} findings: "
                f"{[result.findings[i] for i in hits] or result.findings}"
            )
        matched.add(hits[0])
    if strict:
        extra = [f for i, f in enumerate(result.findings) if i not in matched]
        if extra:
            raise AssertionError(f"scenario {result.name}: unintended findings {extra}")
