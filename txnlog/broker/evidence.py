"""The evidence sentences of findings: what a hanging or late transaction's log holds, what the coordinator
says of it, and what may make the finding wrong (replicas, damage, checkpoints); and of a stuck coordinator
record. Written per finding (the few transactions that are stuck); the verdicts are txnlog.broker.classify's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from txnlog.broker.classify import DOUBT_COLUMNS, Owner, Reason, Thresholds
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, TWO_PHASE_COMMIT_TIMEOUT_MS, ControlType, TransactionState
from txnlog.model.contract import LIVE_REPLICA
from txnlog.model.times import duration_text, utc_text


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
    idle = f"last written {utc_text(row.get('last_timestamp_ms'))}, idle {duration_text(row.get('idle_ms'))}"
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


def _with_clause(evidence: str, clause: str) -> str:
    """``clause`` (starting "; ") added to the sentence ``evidence``, before its full stop."""
    return f"{evidence[:-1]}{clause}." if evidence.endswith(".") else evidence + clause


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
    return _with_clause(evidence, clause)


def with_blocked_groups(evidence: str, lso: int | None, groups: Sequence[str]) -> str:
    """``evidence`` of a transaction that holds its partition's LSO, naming the consumer groups BLOCKED behind it:
    their committed offset is that LSO, below the high watermark, and a read_committed fetch stops at the LSO
    (``UnifiedLog.read``, ``FetchIsolation.TXN_COMMITTED``), so they read nothing more until it ends (read_committed
    is inferred: ``__consumer_offsets`` does not record the isolation level)."""
    if not groups:
        return evidence
    one = len(groups) == 1
    clause = (
        f"; consumer {'group' if one else 'groups'} {', '.join(sorted(groups))} {'waits' if one else 'wait'} behind "
        f"it: {'its' if one else 'their'} committed offset is this LSO ({lso}), where a read_committed fetch stops "
        f"(UnifiedLog.read; read_committed is inferred), so ending the transaction unblocks {'it' if one else 'them'}"
    )
    return _with_clause(evidence, clause)


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
    since = utc_text(row.get("owner_last_update_ms"))
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
            f"{tid} {is_state} since {utc_text(_first_known(row, 'owner_txn_start_ms', 'owner_last_update_ms'))} "
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


def coordinator_stuck_evidence(row: dict, thresholds: Thresholds) -> str:
    since_ms = max(x for x in (row.get("txn_start_ms"), row.get("last_update_ms")) if x is not None)
    listed = row.get("partitions") or []
    parts = f"it lists {', '.join(listed)}, none of which is in the input" if listed else "it lists no partitions"
    text = (
        f"{row['transactional_id']} (producer {row['producer_id']} epoch {row['producer_epoch']}) has been "
        f"{row['state']} since {utc_text(since_ms)} ({duration_text(thresholds.as_of_ms - since_ms)}), far past its "
        f"{_timeout(row.get('timeout_ms'))} timeout; {parts}."
    )
    return text
