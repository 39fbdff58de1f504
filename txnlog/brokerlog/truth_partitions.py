"""The ground truth of one partition, from the simulation's logs: its reference replica, its last stable offset
as the leader computes it, the damaged ranges of its copies, and the verdict an open transaction earns
(txnlog.brokerlog.truth assembles a scenario's whole result from these)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from txnlog.brokerlog.cluster import Cluster, CoordinatorRecordTruth, TopicPartition
from txnlog.brokerlog.ground_truth import HANGING, LATE, SAFE, VERIFY_FIRST, ExpectedPartition
from txnlog.brokerlog.partition import PartitionLog, QuarantineTruth, TxnRecord
from txnlog.kafka import wire
from txnlog.kafka.wire import ControlType, TransactionState

_COMPLETED = {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
_PREPARE = {TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT}


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def latest_records(
    records: Iterable[CoordinatorRecordTruth], present: set[int]
) -> tuple[dict[str, CoordinatorRecordTruth], dict[str, list[CoordinatorRecordTruth]]]:
    latest: dict[str, CoordinatorRecordTruth] = {}
    history: dict[str, list[CoordinatorRecordTruth]] = {}
    for r in records:
        if r.txn_state_partition not in present:
            continue
        latest[r.transactional_id] = r
        history.setdefault(r.transactional_id, []).append(r)
    return latest, history


def classify(
    *,
    tp: TopicPartition,
    pid: int,
    idle_ms: int,
    as_of: int,
    threshold: int,
    latest: Mapping[str, CoordinatorRecordTruth],
    history: Mapping[str, list[CoordinatorRecordTruth]],
    all_txn_state: bool,
) -> tuple[str | None, str | None, str | None, str | None, str | None, int | None]:
    """docs/design.md §4 on the writer's view.

    Returns (verdict, reason, safety, transactional_id, state name, coordinator partition).
    """
    owner = None
    for r in latest.values():
        if r.state is not None and r.producer_id == pid:
            owner = r
    expired_id = None
    if owner is None:
        for tid, recs in history.items():
            last = recs[-1]
            values = [r for r in recs if r.state is not None]
            if values and values[-1].producer_id == pid and (last.state is None or last.state == TransactionState.DEAD):
                expired_id = tid
    txn_id = owner.transactional_id if owner else expired_id
    state = owner.state.kafka_name if owner and owner.state is not None else None
    cpart = (
        owner.txn_state_partition if owner else (history[expired_id][-1].txn_state_partition if expired_id else None)
    )
    if idle_ms <= threshold:
        return None, None, None, txn_id, state, cpart
    if owner is None:
        if expired_id is not None:
            return HANGING, "TRANSACTIONAL_ID_EXPIRED", SAFE, expired_id, None, cpart
        return HANGING, "NO_TRANSACTIONAL_ID", SAFE if all_txn_state else VERIFY_FIRST, None, None, None
    s = owner.state
    if s in _COMPLETED:
        return HANGING, "COORDINATOR_COMPLETED", SAFE, txn_id, state, cpart
    if s == TransactionState.DEAD:
        return HANGING, "TRANSACTIONAL_ID_EXPIRED", SAFE, txn_id, state, cpart
    if tp not in owner.partitions:
        return HANGING, "PARTITION_NOT_IN_TRANSACTION", SAFE, txn_id, state, cpart
    if s in _PREPARE:
        return LATE, "MARKERS_PENDING", None, txn_id, state, cpart
    if s == TransactionState.ONGOING and owner.timeout_ms == wire.TWO_PHASE_COMMIT_TIMEOUT_MS:
        return LATE, "TWO_PHASE_IN_DOUBT", None, txn_id, state, cpart
    if s == TransactionState.ONGOING and as_of > owner.txn_start_timestamp + owner.timeout_ms:
        return LATE, "COORDINATOR_TIMEOUT_OVERDUE", None, txn_id, state, cpart
    raise AssertionError(f"open transaction of {pid} on {tp_name(tp)} fits no verdict (owner {owner})")


def reference_log(cluster: Cluster, tp: TopicPartition) -> tuple[int, PartitionLog] | None:
    rp = cluster.partitions[tp]
    order = [rp.leader] + [b for b in rp.replicas if b != rp.leader]
    for b in order:
        if rp.logs[b].dir.exists():
            return b, rp.logs[b]
    return None


def last_stable_offset(cluster: Cluster, broker: int, tp: TopicPartition, log: PartitionLog) -> tuple[int, bool]:
    """The LSO the copy speaks for (``UnifiedLog.lastStableOffset``: the first unstable offset if below the
    high watermark, else the high watermark; never below the log start, ``updateFirstUnstableOffset``).

    A running broker's copy: what its leader served. A completed transaction whose marker is not yet below
    the high watermark still holds it (``ProducerStateManager.unreplicatedTxns``). A cleanly shut-down
    broker's copy: what that broker serves after it restarts on it. It loads its producer state from the
    snapshot at the log end (``LogLoader``, ``ProducerStateManager.truncateAndReload``), which holds only
    the ongoing transactions, so only those hold it back."""
    hw = cluster.high_watermark(broker, tp, log)
    ongoing = min((t.first_offset for t in log.open_txns.values()), default=hw)
    unreplicated = hw
    if broker not in cluster.clean_shutdown_brokers:
        done = [t.first_offset for t in log.transactions if t.marker_offset is not None and t.marker_offset >= hw]
        unreplicated = min(done, default=hw)
    lso = max(min(ongoing, unreplicated, hw), log.log_start_offset)
    return lso, unreplicated < min(ongoing, hw) and lso < max(min(ongoing, hw), log.log_start_offset)


def partition_truth(
    tp: TopicPartition,
    broker: int,
    brokers: tuple[int, ...],
    log: PartitionLog,
    as_of: int,
    threshold: int,
    lso: tuple[int, bool],
    hw: int,
) -> ExpectedPartition:
    markers = log.retained_markers()
    oldest = min(log.open_txns.values(), key=lambda t: t.first_offset, default=None)
    return ExpectedPartition(
        topic=tp[0],
        partition=tp[1],
        broker=broker,
        brokers=brokers,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        last_stable_offset=lso[0],
        lso_lag=log.log_end_offset - lso[0],
        open_transactions=len(log.open_txns),
        max_open_ms=as_of - oldest.first_timestamp if oldest else 0,
        has_late_transaction=oldest is not None
        and as_of - oldest.last_timestamp > threshold + wire.LATE_TRANSACTION_BUFFER_MS,
        commit_markers=sum(1 for m in markers if m.control_type == ControlType.COMMIT),
        abort_markers=sum(1 for m in markers if m.control_type == ControlType.ABORT),
        batches=log.retained_batch_count,
        legacy_entries=log.legacy_entry_count,
        high_watermark=hw,
        held_by_unreplicated=lso[1],
    )


def damaged_ranges(copies: list[tuple[int, PartitionLog]]) -> list[tuple[int, int | None]]:
    """(from, to exclusive or None = the log end) offset ranges a damaged region may hold, bounded as its
    bytes bound it: after the valid batch before it in its file, before the valid batch after it (damaged
    batches next to each other are one region); the segment's base offset where no valid batch precedes it,
    the next segment's base offset (or the log end) where none follows it."""
    out: list[tuple[int, int | None]] = []
    for _b, log in copies:
        bases = sorted(s.base_offset for s in log.segments)
        sizes = {s.base_offset: s.size for s in log.segments}
        by_file: dict[int, dict[int, QuarantineTruth]] = {}
        for q in log.damage:
            by_file.setdefault(int(Path(q.file).name.split(".")[0]), {})[q.position] = q
        for base, regions in by_file.items():
            later = [x for x in bases if x > base]
            for q in regions.values():
                if any(p + r.length == q.position for p, r in regions.items()):
                    continue  # the damaged batch before it starts the region
                lo = q.first_offset if q.position > 0 and q.first_offset is not None else base
                end, last = q.position + q.length, q
                while end in regions:  # the region runs on to the next valid batch
                    last = regions[end]
                    end += last.length
                hi = later[0] if later else None
                if end < sizes[base] and last.last_offset is not None:  # a valid batch follows in the file
                    hi = last.last_offset + 1
                out.append((lo, hi))
    return out


def damage_in_doubt(damage: list[tuple[int, int | None]], txn: TxnRecord) -> bool:
    """A damaged region may hide something of the transaction unless it lies wholly before the producer's
    previous marker: after the first batch it may hold the marker (after the last batch, or between batches,
    which would make those after it a transaction of their own); before the first batch but after the
    previous marker, an earlier batch of it."""
    prev = txn.previous_marker_offset if txn.previous_marker_offset is not None else -1
    return any((hi if hi is not None else 2**62) > prev for _lo, hi in damage)


def txn_state_damaged(cluster: Cluster, partition: int) -> bool:
    rp = cluster.partitions.get((wire.TRANSACTION_STATE_TOPIC, partition))
    return rp is not None and any(log.damage for log in rp.logs.values() if log.dir.exists())


def files_and_bytes(root: Path) -> tuple[int, int]:
    files = 0
    size = 0
    for p in root.rglob("*"):
        if p.is_file():
            files += 1
            size += p.stat().st_size
    return files, size
