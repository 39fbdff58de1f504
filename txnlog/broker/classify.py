"""Verdicts: why an open transaction blocks its partition, and what to do.

Pure domain logic (docs/design.md §4): an open transaction that has been idle longer
than ``transaction.max.timeout.ms`` is a *candidate*; what the coordinator
says about the transactional.id that owns its producer id decides the verdict.
The rules run vectorized over Arrow tables (numpy ``select``); only the
human-readable evidence sentences (txnlog.broker.evidence) are formatted per
finding, and findings are, by definition, the few transactions that are stuck.

Order of the checks for a candidate whose producer id has an owner: owner
Empty / CompleteCommit / CompleteAbort → COORDINATOR_COMPLETED; owner Dead →
TRANSACTIONAL_ID_EXPIRED; partition not in the owner's set →
PARTITION_NOT_IN_TRANSACTION; owner PrepareCommit / PrepareAbort →
MARKERS_PENDING (even for 2PC: the decision has been taken); owner Ongoing with
a 2147483647 timeout → TWO_PHASE_IN_DOUBT (KIP-939); owner Ongoing past
txn_start_timestamp + timeout_ms → COORDINATOR_TIMEOUT_OVERDUE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import (
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    LATE_TRANSACTION_BUFFER_MS,
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    TransactionState,
)


class Verdict(StrEnum):
    """``findings.verdict`` (docs/design.md §3, §4): the values are the contract's, written as they are."""

    HANGING = "HANGING"  # nothing will end it: abort
    LATE = "LATE"  # something should end it: check the coordinator, never abort


class Reason(StrEnum):
    """``findings.reason`` / ``abort_recommendations.reason`` (docs/design.md §4), in the table's order."""

    NO_TRANSACTIONAL_ID = "NO_TRANSACTIONAL_ID"
    TRANSACTIONAL_ID_EXPIRED = "TRANSACTIONAL_ID_EXPIRED"
    COORDINATOR_COMPLETED = "COORDINATOR_COMPLETED"
    PARTITION_NOT_IN_TRANSACTION = "PARTITION_NOT_IN_TRANSACTION"
    MARKERS_PENDING = "MARKERS_PENDING"
    COORDINATOR_TIMEOUT_OVERDUE = "COORDINATOR_TIMEOUT_OVERDUE"
    TWO_PHASE_IN_DOUBT = "TWO_PHASE_IN_DOUBT"
    COORDINATOR_STUCK = "COORDINATOR_STUCK"


#: The reasons whose verdict is HANGING; every other one is LATE.
HANGING_REASONS = (
    Reason.NO_TRANSACTIONAL_ID,
    Reason.TRANSACTIONAL_ID_EXPIRED,
    Reason.COORDINATOR_COMPLETED,
    Reason.PARTITION_NOT_IN_TRANSACTION,
)


class Safety(StrEnum):
    """``abort_recommendations.safety`` (docs/design.md §3, §4)."""

    SAFE = "SAFE"
    VERIFY_FIRST = "VERIFY_FIRST"  # the input cannot show for sure that nothing will end it


class Owner(StrEnum):
    """How a producer id was tied to a transactional.id (the candidates' column ``owner_match``)."""

    CURRENT = "current"  # the id's latest ProducerId: the only one its markers are written with
    #: the NextProducerId of the id's Prepare* record (a KIP-890 rollover under way): not the id's yet, and no
    #: batch of it can precede the record that makes it so, so the copy of __transaction_state predates one
    NEXT = "next"
    EXPIRED = "expired"  # the id owned it when it was tombstoned or went Dead
    NONE = "none"


#: Coordinator states (Kafka's names, as the tables hold them) with nothing in flight.
COMPLETED_STATES = tuple(
    s.kafka_name for s in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
)
#: The coordinator decided; its markers are on their way.
PREPARE_STATES = tuple(s.kafka_name for s in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT))
#: States with a transaction in flight: DescribeTransactions lists partitions, kafka-transactions.sh
#: shows a duration, and a record left in one far past its timeout is COORDINATOR_STUCK.
IN_FLIGHT_STATES = tuple(
    s.kafka_name
    for s in (
        TransactionState.ONGOING,
        TransactionState.PREPARE_COMMIT,
        TransactionState.PREPARE_ABORT,
        TransactionState.PREPARE_EPOCH_FENCE,
    )
)
STUCK_STATES = IN_FLIGHT_STATES

BOOTSTRAP_PLACEHOLDER = "<bootstrap>"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The clock and limits every verdict is computed against."""

    as_of_ms: int
    max_transaction_timeout_ms: int = 900_000
    all_txn_state_partitions_read: bool = True
    bootstrap_servers: str | None = None
    #: how many __transaction_state partitions the input held (None: not counted), of how many
    txn_state_partitions_read: int | None = None
    txn_state_partitions: int = 50
    #: what decided ``txn_state_partitions`` when not the configuration alone (the cluster's metadata log)
    txn_state_partitions_from: str = ""
    #: the brokers' producer.id.expiration.ms: producers idle longer (and with nothing open) have no state
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    #: the brokers' producer.id.expiration.check.interval.ms: how often a running leader removes those
    producer_id_expiration_check_interval_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS


def abort_command(bootstrap: str | None, topic: str, partition: int, start_offset: int) -> str:
    """``kafka-transactions.sh … abort --start-offset`` (brokers 3.0+), docs/design.md §3."""
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap or BOOTSTRAP_PLACEHOLDER} abort "
        f"--topic {topic} --partition {partition} --start-offset {start_offset}"
    )


def legacy_abort_command(
    bootstrap: str | None, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> str:
    """The pre-3.0 form; a coordinator epoch of −1 (unknown) prints as 0, as the tool does."""
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap or BOOTSTRAP_PLACEHOLDER} abort "
        f"--topic {topic} --partition {partition} --producer-id {producer_id} "
        f"--producer-epoch {producer_epoch} --coordinator-epoch {max(coordinator_epoch, 0)}"
    )


def has_late_transaction(oldest_idle_ms: pa.Array | pa.ChunkedArray, max_transaction_timeout_ms: int) -> pa.Array:
    """The broker's ``hasLateTransaction`` metric, per partition: its oldest open transaction has been idle
    longer than ``transaction.max.timeout.ms`` + LATE_TRANSACTION_BUFFER_MS (5 min). ``oldest_idle_ms`` is that
    transaction's idle time in ms; null (no open transaction, or not known) stays null."""
    return pc.greater(oldest_idle_ms, pa.scalar(max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS, pa.int64()))


def _col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def _ms_of(table: pa.Table, name: str) -> np.ndarray:
    """A timestamp or int64-ms column as float ms with NaN for null (for vectorized comparisons)."""
    col = table.column(name)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    return col.cast(pa.float64()).fill_null(np.nan).to_numpy()


@dataclass(frozen=True)
class Damage:
    """Where the input could not be read: per data partition the offset ranges quarantined regions
    may cover (from, to exclusive or None = to the log end, file), and the ``__transaction_state``
    partitions with a quarantined region. Small: one entry per damaged region."""

    ranges: Mapping[tuple[str, int], tuple[tuple[int, int | None, str], ...]] = field(default_factory=dict)
    txn_state_partitions: frozenset[int] = frozenset()


def damage_flags(candidates: pa.Table, damage: Damage) -> dict[str, pa.Array]:
    """Per candidate: ``damage_after`` — a quarantined region of its partition lies after its first batch,
    where its marker may be (after its last batch; or between its batches, which would make those after the
    region a transaction of their own, with another start offset); ``damage_before`` — one lies before its
    first batch but after the producer's previous marker, where an earlier batch of it may be;
    ``txn_state_damaged`` — the owner's ``__transaction_state`` partition has a quarantined region, where a
    newer record may be. A region wholly before the producer's previous marker can hide nothing of it.
    ``damaged_files``: each region in doubt, as "offsets FROM-TO of FILE" (txnlog.rules.damage)."""
    n = candidates.num_rows
    topics = candidates.column("topic").to_pylist()
    parts = candidates.column("partition").to_pylist()
    start = candidates.column("start_offset").to_pylist()
    prev = (
        candidates.column("prev_marker_offset").to_pylist()
        if "prev_marker_offset" in candidates.column_names
        else [None] * n
    )
    after = np.zeros(n, dtype=bool)
    before = np.zeros(n, dtype=bool)
    files: list[list[str]] = [[] for _ in range(n)]
    for i in range(n):  # candidates are the few open, idle transactions; damaged regions are few
        prev_i = prev[i]
        for lo, hi, file in damage.ranges.get((topics[i], parts[i]), ()):
            end = hi if hi is not None else 2**62
            a = end > start[i] + 1  # it holds an offset past the first batch (which is valid, so not in it)
            b = not a and end > (prev_i if prev_i is not None else -1)
            after[i] |= a
            before[i] |= b
            if a or b:
                files[i].append(region_text(lo, hi, file))
    owner_cp = (
        candidates.column("owner_coordinator_partition").to_pylist()
        if "owner_coordinator_partition" in candidates.column_names
        else [None] * n
    )
    txn_state = np.array([cp is not None and cp in damage.txn_state_partitions for cp in owner_cp], dtype=bool)
    return {
        "damage_after": pa.array(after),
        "damage_before": pa.array(before),
        "txn_state_damaged": pa.array(txn_state),
        "damaged_files": pa.array([sorted(set(f)) for f in files], pa.list_(pa.string())),
    }


def region_text(first: int, end: int | None, file: str) -> str:
    """How evidence names a damaged region: the offsets it may hold and its file.

    >>> region_text(217, 261, "/k/events-0/00000000000000000000.log")
    'offsets 217-260 of /k/events-0/00000000000000000000.log'
    >>> region_text(374, None, "x.log")
    'offsets 374 to the log end of x.log'
    """
    span = f"{first}-{end - 1}" if end is not None else f"{first} to the log end"
    return f"offsets {span} of {file}"


#: Candidate columns that, when true, mean the verdict rests on something the input could not show
#: for sure: damage lowers confidence, never raises it (docs/design.md §4).
DOUBT_COLUMNS = ("diverged", "damage_after", "damage_before", "txn_state_damaged")


def doubtful(candidates: pa.Table) -> np.ndarray:
    """Rows whose abort must be verified first: replicas diverged, or damage where a marker, an
    earlier first batch or a newer coordinator record could hide."""
    out = np.zeros(candidates.num_rows, dtype=bool)
    for name in DOUBT_COLUMNS:
        if name in candidates.column_names:
            out |= np.asarray(candidates.column(name).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return out


def verdicts(candidates: pa.Table, thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verdict, reason, safety) for every candidate row; '' where no finding is due.

    Needs columns: owner_match, owner_state, owner_partitions (list<string>),
    owner_timeout_ms, owner_txn_start_ms (epoch ms), topic, partition.
    """
    n = candidates.num_rows
    match = _col(candidates, "owner_match").astype(object)
    state = np.array([s or "" for s in candidates.column("owner_state").to_pylist()], dtype=object)
    timeout = _ms_of(candidates, "owner_timeout_ms")
    start = _ms_of(candidates, "owner_txn_start_ms")
    if "owner_last_update_ms" in candidates.column_names:
        # kafka-dump-log.sh 2.x/3.x print no TxnStartTimestamp; the last update is never earlier than
        # the start, so falling back to it can only find an overdue transaction later, never wrongly.
        start = np.where(np.isnan(start), _ms_of(candidates, "owner_last_update_ms"), start)
    topics = candidates.column("topic").to_pylist()
    parts = candidates.column("partition").to_pylist()
    owner_parts = candidates.column("owner_partitions").to_pylist()
    in_set = np.array(
        [f"{t}-{p}" in (ps or ()) for t, p, ps in zip(topics, parts, owner_parts, strict=True)], dtype=bool
    )
    # Only the id's current producer id owns a transaction: the coordinator writes every marker with it
    # (README "How txnlog decides": a rolled-over producer id).
    has_owner = match == Owner.CURRENT
    completed = np.isin(state, COMPLETED_STATES)
    prepare = np.isin(state, PREPARE_STATES)
    ongoing = state == TransactionState.ONGOING.kafka_name
    two_phase = timeout == TWO_PHASE_COMMIT_TIMEOUT_MS
    overdue = ~np.isnan(start) & (thresholds.as_of_ms > start + np.nan_to_num(timeout))
    fencing = state == TransactionState.PREPARE_EPOCH_FENCE.kafka_name

    conditions = [
        match == Owner.EXPIRED,
        ~has_owner,
        completed,
        state == TransactionState.DEAD.kafka_name,
        ~in_set,
        prepare,
        ongoing & two_phase,
        (ongoing & overdue) | fencing,
    ]
    reasons = [
        Reason.TRANSACTIONAL_ID_EXPIRED,
        Reason.NO_TRANSACTIONAL_ID,
        Reason.COORDINATOR_COMPLETED,
        Reason.TRANSACTIONAL_ID_EXPIRED,
        Reason.PARTITION_NOT_IN_TRANSACTION,
        Reason.MARKERS_PENDING,
        Reason.TWO_PHASE_IN_DOUBT,
        Reason.COORDINATOR_TIMEOUT_OVERDUE,
    ]
    # numpy keeps the enums' values: the arrays hold plain str, the tables the contract's text.
    reason = np.select(conditions, reasons, default="").astype(object)
    is_hanging = np.isin(reason, HANGING_REASONS)
    verdict = np.where(is_hanging, Verdict.HANGING, np.where(reason == "", "", Verdict.LATE)).astype(object)
    verify = (
        ((reason == Reason.NO_TRANSACTIONAL_ID) & (not thresholds.all_txn_state_partitions_read))
        | (match == Owner.NEXT)
        | doubtful(candidates)
    )
    safety = np.where(is_hanging, np.where(verify, Safety.VERIFY_FIRST, Safety.SAFE), "").astype(object)
    assert verdict.shape == (n,)
    return verdict, reason, safety


def coordinator_stuck(coordinator: pa.Table, thresholds: Thresholds) -> np.ndarray:
    """Mask of coordinator_state rows that are COORDINATOR_STUCK (docs/design.md §4).

    Needs: state, timeout_ms, txn_start_timestamp, last_update_timestamp,
    is_tombstoned, any_partition_in_input.
    """
    state = np.array([s or "" for s in coordinator.column("state").to_pylist()], dtype=object)
    timeout = _ms_of(coordinator, "timeout_ms")
    start = _ms_of(coordinator, "txn_start_timestamp")
    update = _ms_of(coordinator, "last_update_timestamp")
    since = np.fmax(start, update)
    tomb = _col(coordinator, "is_tombstoned").astype(bool)
    in_input = _col(coordinator, "any_partition_in_input").astype(bool)
    return (
        np.isin(state, STUCK_STATES)
        & ~tomb
        & (timeout != TWO_PHASE_COMMIT_TIMEOUT_MS)
        & ~np.isnan(since)
        & (thresholds.as_of_ms - since > np.nan_to_num(timeout) + thresholds.max_transaction_timeout_ms)
        & ~in_input
    )
