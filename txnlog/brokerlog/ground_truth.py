"""What a scenario's log dirs contain, as the writer knows it: the expected answers.

A :class:`ScenarioResult` is computed from the simulation's own state (the
partition logs' producer state and transaction history, the coordinator's
records) and from what is left on disk (partition directories an operator
"did not copy" are gone). The expected verdicts follow docs/design.md §4 applied to
*that* view; each scenario also states the verdicts it means to produce and
:func:`txnlog.brokerlog.truth.assemble` refuses to return a result that contradicts them, so a
scenario cannot silently drift from its purpose.

Expected values describe what the job should output: e.g. for a hanging
transaction whose owner lives in a ``__transaction_state`` partition that was
not copied, ``transactional_id`` is None and the reason NO_TRANSACTIONAL_ID
with VERIFY_FIRST, while ``true_transactional_id`` says who really owned it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from txnlog.brokerlog.cluster import TopicPartition
from txnlog.brokerlog.partition import QuarantineTruth
from txnlog.kafka import wire

__all__ = [
    "ExpectedCoordinatorState",
    "ExpectedFinding",
    "ExpectedOpenTransaction",
    "ExpectedPartition",
    "ExpectedProducer",
    "ExpectedTransaction",
    "Intent",
    "ScenarioResult",
]

HANGING = "HANGING"
LATE = "LATE"
SAFE = "SAFE"
VERIFY_FIRST = "VERIFY_FIRST"


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
