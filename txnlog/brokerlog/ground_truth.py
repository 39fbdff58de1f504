"""What a scenario's log dirs contain, as the writer knows it: the expected answers.

A :class:`ScenarioResult` is computed from the simulation's own state (the
partition logs' producer state and transaction history, the coordinator's
records) and from what is left on disk (partition directories an operator
"did not copy" are gone). The expected verdicts follow docs/design.md §4 applied to
*that* view; each scenario also states the verdicts it means to produce and
:func:`assemble` refuses to return a result that contradicts them, so a
scenario cannot silently drift from its purpose.

Expected values describe what the job should output: e.g. for a hanging
transaction whose owner lives in a ``__transaction_state`` partition that was
not copied, ``transactional_id`` is None and the reason NO_TRANSACTIONAL_ID
with VERIFY_FIRST, while ``true_transactional_id`` says who really owned it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from txnlog.brokerlog.broker_time import broker_time_ms
from txnlog.brokerlog.cluster import Cluster, CoordinatorRecordTruth, TopicPartition
from txnlog.brokerlog.partition import PartitionLog, QuarantineTruth, TxnRecord
from txnlog.kafka import wire
from txnlog.kafka.wire import ControlType, TransactionState

__all__ = [
    "ExpectedCoordinatorState",
    "ExpectedFinding",
    "ExpectedOpenTransaction",
    "ExpectedPartition",
    "ExpectedProducer",
    "ExpectedTransaction",
    "Intent",
    "ScenarioResult",
    "assemble",
]

HANGING = "HANGING"
LATE = "LATE"
SAFE = "SAFE"
VERIFY_FIRST = "VERIFY_FIRST"

_COMPLETED = {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
_PREPARE = {TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT}
_STUCK = {TransactionState.ONGOING, *_PREPARE, TransactionState.PREPARE_EPOCH_FENCE}


@dataclass(frozen=True, slots=True)
class ExpectedOpenTransaction:
    """A transaction still open at the end of a partition's log (OPEN in ``transactions``)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_offset: int
    first_timestamp: int
    last_timestamp: int
    open_ms: int
    idle_ms: int
    batch_count: int
    record_count: int
    transactional_id: str | None  # as the job can know it from the copied __transaction_state
    true_transactional_id: str | None  # who really owned the producer id
    coordinator_state: str | None
    coordinator_epoch: int  # of this producer's last marker here (or the snapshot's); -1 unknown
    verdict: str | None  # HANGING / LATE, None when not a candidate (idle <= threshold)
    reason: str | None
    safety: str | None  # SAFE / VERIFY_FIRST for HANGING
    brokers: tuple[int, ...]  # replicas where it is open
    source: str  # "log", or "snapshot" when its first batch is below the log start offset
    previous_marker_offset: int | None  # this producer's previous marker on the partition


@dataclass(frozen=True, slots=True)
class ExpectedFinding:
    """A row the ``findings`` table must contain (topic/partition None for coordinator-only)."""

    topic: str | None
    partition: int | None
    producer_id: int
    producer_epoch: int
    start_offset: int | None
    verdict: str
    reason: str
    transactional_id: str | None
    safety: str | None
    coordinator_state: str | None
    coordinator_partition: int | None
    brokers: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ExpectedTransaction:
    """A ``transactions`` row (finished or open) on the reference replica, within the retained log."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    last_offset: int
    marker_offset: int | None
    outcome: str
    marker_epoch: int | None
    coordinator_epoch: int | None
    first_timestamp: int
    last_timestamp: int
    marker_timestamp: int | None
    batch_count: int
    record_count: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class ExpectedPartition:
    """A ``partition_health`` row, from the reference replica (the leader if it was copied)."""

    topic: str
    partition: int
    broker: int
    brokers: tuple[int, ...]
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    lso_lag: int
    open_transactions: int
    max_open_ms: int  # as_of − first_timestamp of the oldest open transaction (0 if none)
    has_late_transaction: bool  # broker metric: oldest open idle > max timeout + 5 min
    commit_markers: int
    abort_markers: int
    batches: int  # readable v2 batches in the retained segments
    legacy_entries: int
    high_watermark: int | None = None  # what the copy's replication-offset-checkpoint says
    #: a completed transaction whose marker is not yet below the high watermark holds this LSO: what the
    #: running leader serves; a broker restarted on the copy would not hold it (see _last_stable_offset)
    held_by_unreplicated: bool = False


@dataclass(frozen=True, slots=True)
class ExpectedProducer:
    """A ``producer_state`` row: the writer's own producer state of the reference replica (its simulated
    ``ProducerStateManager``, fed by every batch and marker it appended, never read back from disk), less the
    producers expired at as_of (``ProducerStateManager.isProducerExpired``: nothing open and ``last_timestamp
    + producer.id.expiration.ms ≤ as_of``)."""

    topic: str
    partition: int
    broker: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int | None


@dataclass(frozen=True, slots=True)
class ExpectedCoordinatorState:
    """The latest ``__transaction_state`` record of a transactional.id, if its partition was copied."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str | None  # None for a tombstone
    timeout_ms: int
    partitions: tuple[str, ...]
    txn_start_timestamp: int
    last_update_timestamp: int
    coordinator_partition: int
    coordinator_epoch: int
    previous_producer_id: int
    next_producer_id: int
    next_producer_epoch: int
    client_transaction_version: int
    is_tombstoned: bool
    records: int  # how many records of this id the partition holds


@dataclass(frozen=True, slots=True)
class Intent:
    """What a scenario means to produce for one producer on one partition (or coordinator-only)."""

    verdict: str | None
    reason: str | None
    topic: str | None = None
    partition: int | None = None
    producer_id: int | None = None
    transactional_id: str | None = None
    label: str = ""


@dataclass
class ScenarioResult:
    """Ground truth of one written scenario. ``as_of_ms`` is the newest broker-written timestamp in the input."""

    name: str
    seed: int
    root: Path
    log_dirs: tuple[Path, ...]
    cluster_name: str
    as_of_ms: int
    max_transaction_timeout_ms: int
    description: str
    open_transactions: tuple[ExpectedOpenTransaction, ...]
    findings: tuple[ExpectedFinding, ...]
    transactions: tuple[ExpectedTransaction, ...]
    partitions: dict[TopicPartition, ExpectedPartition]
    replica_partitions: dict[tuple[int, str, int], ExpectedPartition]
    coordinator: dict[str, ExpectedCoordinatorState]
    marker_counts: dict[TopicPartition, dict[str, int]]
    quarantine: tuple[QuarantineTruth, ...]
    legacy_entries: int
    txn_state_partitions_present: tuple[int, ...]
    all_txn_state_partitions_present: bool
    bytes_written: int
    files_written: int
    elapsed_s: float = 0.0
    notes: dict[str, object] = field(default_factory=dict)
    #: (broker, topic, partition, producer_id, first_offset) of transactions open in a copy that is only
    #: behind another replica's marker for them: not open (docs/design.md §4), but open if that copy is read alone
    behind: tuple[tuple[int, str, int, int, int], ...] = ()
    #: producer_state: every producer with state on each partition's reference replica at as_of
    producers: tuple[ExpectedProducer, ...] = ()
    #: the cluster's ``__transaction_state`` partition count (``transaction.state.log.num.partitions``)
    txn_state_partitions: int = wire.DEFAULT_TRANSACTION_STATE_PARTITIONS

    @property
    def as_of(self) -> datetime:
        return datetime.fromtimestamp(self.as_of_ms / 1000, tz=UTC)

    def findings_by_reason(self) -> dict[str, list[ExpectedFinding]]:
        out: dict[str, list[ExpectedFinding]] = {}
        for f in self.findings:
            out.setdefault(f.reason, []).append(f)
        return out

    def to_dict(self) -> dict[str, object]:
        def tp_key(k: object) -> str:
            if isinstance(k, tuple):
                return "-".join(str(x) for x in k)
            return str(k)

        return {
            "name": self.name,
            "seed": self.seed,
            "root": str(self.root),
            "log_dirs": [str(p) for p in self.log_dirs],
            "cluster_name": self.cluster_name,
            "as_of_ms": self.as_of_ms,
            "as_of": self.as_of.isoformat(),
            "max_transaction_timeout_ms": self.max_transaction_timeout_ms,
            "description": self.description,
            "open_transactions": [asdict(t) for t in self.open_transactions],
            "findings": [asdict(f) for f in self.findings],
            "transactions": [asdict(t) for t in self.transactions],
            "partitions": {tp_key(k): asdict(v) for k, v in sorted(self.partitions.items())},
            "replica_partitions": {tp_key(k): asdict(v) for k, v in sorted(self.replica_partitions.items())},
            "coordinator": {k: asdict(v) for k, v in sorted(self.coordinator.items())},
            "marker_counts": {tp_key(k): v for k, v in sorted(self.marker_counts.items())},
            "quarantine": [asdict(q) for q in self.quarantine],
            "legacy_entries": self.legacy_entries,
            "txn_state_partitions": self.txn_state_partitions,
            "txn_state_partitions_present": list(self.txn_state_partitions_present),
            "all_txn_state_partitions_present": self.all_txn_state_partitions_present,
            "bytes_written": self.bytes_written,
            "files_written": self.files_written,
            "elapsed_s": round(self.elapsed_s, 3),
            "notes": self.notes,
            "producers": [asdict(p) for p in self.producers],
        }

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=False, default=str) + "\n")
        return path

    def summary(self) -> str:
        """A few human lines: what was written and what the job should find."""
        lines = [
            f"scenario {self.name} (seed {self.seed}): {self.bytes_written / 1e6:.1f} MB in "
            f"{self.files_written} files under {self.root} in {self.elapsed_s:.2f} s",
            f"  brokers: {', '.join(p.name for p in self.log_dirs)}; as_of {self.as_of.isoformat()} ({self.as_of_ms})",
            f"  partitions: {len(self.partitions)}; __transaction_state partitions copied: "
            f"{len(self.txn_state_partitions_present)}"
            + ("" if self.all_txn_state_partitions_present else " (NOT all: NO_TRANSACTIONAL_ID is VERIFY_FIRST)"),
        ]
        commits = sum(c.get("COMMIT", 0) for c in self.marker_counts.values())
        aborts = sum(c.get("ABORT", 0) for c in self.marker_counts.values())
        lines.append(
            f"  markers: {commits} COMMIT, {aborts} ABORT; open transactions: {len(self.open_transactions)}; "
            f"legacy entries: {self.legacy_entries}; quarantine rows expected: {len(self.quarantine)}"
        )
        if not self.findings:
            lines.append("  expected findings: none")
        else:
            lines.append(f"  expected findings ({len(self.findings)}):")
            for f in self.findings:
                where = f"{f.topic}-{f.partition}@{f.start_offset}" if f.topic is not None else "(coordinator only)"
                lines.append(
                    f"    {f.verdict:7} {f.reason:28} {where:32} pid {f.producer_id} epoch {f.producer_epoch}"
                    f" id {f.transactional_id}" + (f" {f.safety}" if f.safety else "")
                )
        for q in self.quarantine:
            lines.append(f"  quarantine: {q.reason} {q.file} @{q.position} +{q.length}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _latest_records(
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


def _classify(
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
    raise AssertionError(f"open transaction of {pid} on {_tp_name(tp)} fits no verdict (owner {owner})")


def _reference_log(cluster: Cluster, tp: TopicPartition) -> tuple[int, PartitionLog] | None:
    rp = cluster.partitions[tp]
    order = [rp.leader] + [b for b in rp.replicas if b != rp.leader]
    for b in order:
        if rp.logs[b].dir.exists():
            return b, rp.logs[b]
    return None


def _last_stable_offset(cluster: Cluster, broker: int, tp: TopicPartition, log: PartitionLog) -> tuple[int, bool]:
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


def _partition_truth(
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


def _damaged_ranges(copies: list[tuple[int, PartitionLog]]) -> list[tuple[int, int | None]]:
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


def _damage_in_doubt(damage: list[tuple[int, int | None]], txn: TxnRecord) -> bool:
    """A damaged region may hide something of the transaction unless it lies wholly before the producer's
    previous marker: after the first batch it may hold the marker (after the last batch, or between batches,
    which would make those after it a transaction of their own); before the first batch but after the
    previous marker, an earlier batch of it."""
    prev = txn.previous_marker_offset if txn.previous_marker_offset is not None else -1
    return any((hi if hi is not None else 2**62) > prev for _lo, hi in damage)


def _txn_state_damaged(cluster: Cluster, partition: int) -> bool:
    rp = cluster.partitions.get((wire.TRANSACTION_STATE_TOPIC, partition))
    return rp is not None and any(log.damage for log in rp.logs.values() if log.dir.exists())


def _files_and_bytes(root: Path) -> tuple[int, int]:
    files = 0
    size = 0
    for p in root.rglob("*"):
        if p.is_file():
            files += 1
            size += p.stat().st_size
    return files, size


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
    latest, history = _latest_records(cluster.coordinator.records, txn_present)
    truth = _Truth(
        as_of_ms, max_transaction_timeout_ms, latest, history, len(txn_present) == cluster.txn_state_partitions
    )
    for tp in sorted(tp for tp in present if tp[0] != wire.TRANSACTION_STATE_TOPIC):
        rp = cluster.partitions[tp]
        copies = [(b, rp.logs[b]) for b in rp.replicas if rp.logs[b].dir.exists()]
        _partition_rows(cluster, tp, copies, truth)
        _open_transactions(cluster, tp, copies, truth)
    truth.findings.extend(_coordinator_stuck(truth, present))
    files, size = _files_and_bytes(cluster.root)
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
    ref = _reference_log(cluster, tp)
    assert ref is not None
    ref_broker, ref_log = ref
    for b, log in copies:
        truth.replica_partitions[(b, tp[0], tp[1])] = _partition_truth(
            tp,
            b,
            brokers,
            log,
            truth.as_of_ms,
            truth.max_transaction_timeout_ms,
            _last_stable_offset(cluster, b, tp, log),
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
    damage = _damaged_ranges(copies)
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
    verdict, reason, safety, txn_id, state, cpart = _classify(
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
        or _damage_in_doubt(damage, txn)
        or (cpart is not None and _txn_state_damaged(cluster, cpart))
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
            partitions=tuple(_tp_name(tp) for tp in r.partitions),
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
