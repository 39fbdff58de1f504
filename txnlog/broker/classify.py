"""Verdicts: why an open transaction blocks its partition, and what to do.

Pure domain logic (docs/design.md §4): an open transaction that has been idle longer
than ``transaction.max.timeout.ms`` is a *candidate*; what the coordinator
says about the transactional.id that owns its producer id decides the verdict.
The rules run vectorized over Arrow tables (numpy ``select``); only the
human-readable ``evidence``/``advice`` sentences are formatted per finding,
and findings are, by definition, the few transactions that are stuck.

Order of the checks for a candidate whose producer id has an owner: owner
Empty / CompleteCommit / CompleteAbort → COORDINATOR_COMPLETED; owner Dead →
TRANSACTIONAL_ID_EXPIRED; partition not in the owner's set →
PARTITION_NOT_IN_TRANSACTION; owner PrepareCommit / PrepareAbort →
MARKERS_PENDING (even for 2PC: the decision has been taken); owner Ongoing with
a 2147483647 timeout → TWO_PHASE_IN_DOUBT (KIP-939); owner Ongoing past
txn_start_timestamp + timeout_ms → COORDINATOR_TIMEOUT_OVERDUE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import (
    CONSUMER_OFFSETS_TOPIC,
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    LATE_TRANSACTION_BUFFER_MS,
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    ControlType,
    TransactionState,
)
from txnlog.model.contract import LIVE_REPLICA


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


def _utc(ms: float | int | None) -> str:
    if ms is None or (isinstance(ms, float) and np.isnan(ms)):
        return "an unknown time"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _duration(ms: float | int | None) -> str:
    if ms is None or (isinstance(ms, float) and np.isnan(ms)):
        return "an unknown time"
    s = int(ms // 1000)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"


def _offset_suffix(offset: int | None) -> str:
    return "" if offset is None else f" offset {offset}"


def _timeout(ms: int | None) -> str:
    return "unknown" if ms is None else f"{ms} ms"


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}–{last}"


def evidence(row: dict, reason: Reason | str, thresholds: Thresholds) -> str:
    """One readable sentence of evidence for a partition-level finding (its advice is its remedy's:
    txnlog.rules.remedy.evidence_and_advice): what the log holds, how idle it is, what the coordinator says, and
    the doubts (replicas, damage, checkpoints)."""
    idle = f"last written {_utc(row.get('last_timestamp_ms'))}, idle {_duration(row.get('idle_ms'))}"
    tp = f"{row['topic']}-{row['partition']}"
    text = (
        f"{_what_the_log_holds(row)} on {tp} ({idle}); {_coordinator_says(row, reason, thresholds)}"
        f"{_compaction_stopped(row)}{_doubts(row)}."
    )
    return text[:1].upper() + text[1:]


def _compaction_stopped(row: dict) -> str:
    """For a transaction in ``__consumer_offsets``: the log cleaner compacts a partition only below its LSO
    (``LogCleanerManager.cleanableOffsets``), so while the transaction is open that partition is not compacted."""
    if row.get("topic") != CONSUMER_OFFSETS_TOPIC:
        return ""
    tp = f"{row['topic']}-{row['partition']}"
    return (
        f"; while it is open the LSO of {tp} stays at or below offset {row['start_offset']}, and the log cleaner "
        f"compacts only below the LSO (LogCleanerManager.cleanableOffsets): compaction of {tp} has stopped for every "
        "group placed there"
    )


def with_pending_groups(evidence: str, pending: Mapping[str, Sequence[str]]) -> str:
    """``evidence`` of a transaction in a ``__consumer_offsets`` partition, naming the groups whose transactional
    offset commits it holds pending (group -> its "topic-partition"s): until its marker their committed offsets do
    not move, and an OffsetFetch with requireStable answers UNSTABLE_OFFSET_COMMIT for those partitions
    (``OffsetMetadataManager.fetchOffsets``)."""
    if not pending:
        return evidence
    named = ", ".join(f"{g} ({', '.join(sorted(tps))})" for g, tps in sorted(pending.items()))
    clause = (
        f"; it holds the transactional offset commits of {'group' if len(pending) == 1 else 'groups'} {named} "
        "pending: their members fail to fetch those offsets with UNSTABLE_OFFSET_COMMIT at start-up and rebalance"
    )
    return f"{evidence[:-1]}{clause}." if evidence.endswith(".") else evidence + clause


def _what_the_log_holds(row: dict) -> str:
    """The transaction's batches and what precedes them: the producer's previous marker, or none."""
    pid, epoch = row["producer_id"], row["producer_epoch"]
    batches = row.get("batch_count") or 0
    what = (
        f"{batches} batch{'es' if batches != 1 else ''} of producer {pid} epoch {epoch} at "
        f"{_offsets(row['start_offset'], row.get('last_offset') or row['start_offset'])}"
    )
    verb = "follows" if batches == 1 else "follow"
    snap = row.get("snapshot_offset")
    snap_name = f"the producer snapshot at offset {snap}" if snap is not None else "the producer snapshot"
    if row.get("started_before_log_start"):
        return (
            f"producer {pid} epoch {epoch} has had a transaction open since offset {row['start_offset']}, "
            f"before the log start{_offset_suffix(row.get('log_start_offset'))} (known from {snap_name}, as the "
            "broker rebuilds its producer state from it)"
            + (
                f", with {batches} retained batch{'es' if batches != 1 else ''} up to offset {row['last_offset']}"
                if batches
                else ""
            )
        )
    prev_type = row.get("prev_marker_type")
    if prev_type in (ControlType.ABORT, ControlType.COMMIT):
        marker = ControlType(prev_type).name
        what += f" {verb} that producer's {marker} marker at offset {row['prev_marker_offset']}"
        if row.get("prev_marker_epoch") is not None:
            what += f" (marker epoch {row['prev_marker_epoch']})"
        return what
    what += f" {'is' if batches == 1 else 'are'} in a transaction that has no marker"
    if list(row.get("replicas") or []) == [LIVE_REPLICA]:
        what += (
            f", and no earlier marker of that producer lies in the offsets read live (from offset "
            f"{row.get('log_start_offset')}; --live-lookback-bytes reads further back)"
        )
    return what


def _doubts(row: dict) -> str:
    """What may make the finding wrong, as clauses after the sentence ("" when nothing does)."""
    open_on = row.get("open_replicas") or []
    replicas = row.get("replicas") or []
    behind = set(row.get("behind_replicas") or [])
    replica_note = ""
    if row.get("diverged"):
        closed = [r for r in replicas if r not in open_on and r not in behind]
        replica_note = (
            f"; the replicas diverged: open only on {', '.join(open_on)}, which holds data past the marker that "
            f"{', '.join(closed)} {'has' if len(closed) == 1 else 'have'} for it — verify on the leader before aborting"
        )
    notes = []
    regions = ", ".join(row.get("damaged_files") or [])
    if row.get("damage_after"):
        notes.append(f"a quarantined region after its first batch may hold its marker ({regions})")
    if row.get("damage_before"):
        notes.append(
            f"a quarantined region after the producer's previous marker may hold an earlier batch of it ({regions})"
        )
    if row.get("txn_state_damaged"):
        notes.append(
            f"__transaction_state-{row.get('owner_coordinator_partition')} has a quarantined region, "
            "where a newer coordinator record may be"
        )
    if row.get("checkpoint_note"):
        notes.append(str(row["checkpoint_note"]))
    if notes:
        replica_note += (
            "; "
            + "; ".join(notes)
            + (" — verify with kafka-transactions.sh describe-producers first" if _doubt_row(row) else "")
        )
    return replica_note


def _coordinator_says(row: dict, reason: Reason | str, thresholds: Thresholds) -> str:
    """What the coordinator's state says of the transaction, for the finding's reason."""
    tid = row.get("transactional_id") or "its transactional.id"  # the sentences name it, known or not
    state = row.get("owner_state")
    is_state = f"is {state}" if state else "is in an unknown state"
    since = _utc(row.get("owner_last_update_ms"))
    tp = f"{row['topic']}-{row['partition']}"
    if reason == Reason.NO_TRANSACTIONAL_ID:
        return _no_owner(row, tid, state, thresholds)
    if reason == Reason.TRANSACTIONAL_ID_EXPIRED:
        named = f"its transactional.id {row['transactional_id']}" if row.get("transactional_id") else tid
        return f"{named} has expired (tombstoned or Dead since {since})"
    if reason == Reason.COORDINATOR_COMPLETED:
        coord = f"the coordinator shows {tid} {state or 'in an unknown state'} since {since}, with nothing in flight"
        if row.get("prev_marker_type") == ControlType.ABORT:
            coord += " — the signature of a produce request that arrived after the abort (KAFKA-14053 / KIP-890)"
        return coord
    if reason == Reason.PARTITION_NOT_IN_TRANSACTION:
        listed = ", ".join(row.get("owner_partitions") or []) or "no partitions"
        return f"{tid} {is_state} but its transaction lists {listed}, not {tp}"
    if reason == Reason.MARKERS_PENDING:
        return (
            f"{tid} {is_state} since {since}, listing {tp}: "
            "the coordinator decided but the markers were never delivered"
        )
    if reason == Reason.TWO_PHASE_IN_DOUBT:
        return (
            f"{tid} is {TransactionState.ONGOING.kafka_name} with timeout {TWO_PHASE_COMMIT_TIMEOUT_MS}: "
            "a KIP-939 two-phase-commit transaction in doubt"
        )
    if reason == Reason.COORDINATOR_TIMEOUT_OVERDUE:
        return (
            f"{tid} {is_state} since {_utc(_first_known(row, 'owner_txn_start_ms', 'owner_last_update_ms'))} "
            f"with timeout {_timeout(row.get('owner_timeout_ms'))}: "
            "the coordinator should already have aborted it"
        )
    return f"{tid} {is_state}"


def _no_owner(row: dict, tid: str, state: str | None, thresholds: Thresholds) -> str:
    """NO_TRANSACTIONAL_ID: no id owns the producer, and how much of __transaction_state that claim rests on."""
    pid = row["producer_id"]
    coord = f"no transactional.id in __transaction_state currently owns producer id {pid}"
    seen = row.get("history_transactional_id")
    if row.get("owner_match") == Owner.NEXT:
        coord += (
            f"; {tid}'s {state or 'latest'} record names it as the next producer id of a KIP-890 rollover, so "
            "this copy of __transaction_state predates the record that made it that id's: verify with "
            "kafka-transactions.sh describe-producers first"
        )
    elif seen:
        coord += f" (it was last seen under {seen}, which has moved on to another producer id)"
    read = thresholds.txn_state_partitions_read
    if not thresholds.all_txn_state_partitions_read and read == 0:
        coord = (
            f"no transactional.id is known to own producer id {pid}: __transaction_state was not read (the "
            "input holds none of its partitions), so verify with kafka-transactions.sh describe-producers first"
        )
    elif not thresholds.all_txn_state_partitions_read:
        share = "not every" if read is None else f"only {read} of {thresholds.txn_state_partitions}"
        coord += (
            f"; {share} __transaction_state partition{'' if read == 1 else 's'} "
            f"{'was' if read == 1 else 'were'} read, so verify with kafka-transactions.sh describe-producers first"
        )
    elif thresholds.txn_state_partitions_from and read is not None:
        coord += f"; every __transaction_state partition was read: {thresholds.txn_state_partitions_from}"
    if not thresholds.all_txn_state_partitions_read and read and thresholds.txn_state_partitions_from:
        coord += f" ({thresholds.txn_state_partitions} partitions: {thresholds.txn_state_partitions_from})"
    return coord


def _doubt_row(row: dict) -> bool:
    return any(bool(row.get(name)) for name in DOUBT_COLUMNS)


def _first_known(row: dict, *names: str) -> Any:
    return next((row[n] for n in names if row.get(n) is not None), None)


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


def coordinator_stuck_evidence(row: dict, thresholds: Thresholds) -> str:
    since_ms = max(x for x in (row.get("txn_start_ms"), row.get("last_update_ms")) if x is not None)
    listed = row.get("partitions") or []
    parts = f"it lists {', '.join(listed)}, none of which is in the input" if listed else "it lists no partitions"
    text = (
        f"{row['transactional_id']} (producer {row['producer_id']} epoch {row['producer_epoch']}) has been "
        f"{row['state']} since {_utc(since_ms)} ({_duration(thresholds.as_of_ms - since_ms)}), far past its "
        f"{_timeout(row.get('timeout_ms'))} timeout; {parts}."
    )
    return text
