"""The verdicts: the candidate transactions and coordinator states, classified (txnlog.broker.classify), and
the tables that carry them (``findings``, ``abort_recommendations``), in Arrow steps both placements run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import classify
from txnlog.model.arrow import (
    greatest,
    is_true,
    project,
    with_columns,
)
from txnlog.model.times import timestamps as _ts  # epoch ms → UTC timestamps, the tables' rule
from txnlog.rules.plan import lso_after_steps
from txnlog.rules.remedy import (
    REMEDY_COLUMNS,
    candidates_text,
    coordinator_stuck_evidence_and_advice,
    remedy_arrays,
    remedy_columns,
)

if TYPE_CHECKING:
    pass

TP = ["topic", "partition"]


@dataclass(frozen=True)
class Intermediates:
    """What several tables read, computed once per run."""

    txns: pa.Table  # the transactions the verdicts need, with LSO lag and owners (times in ms)
    health: pa.Table  # partition health, ms
    input_partitions: frozenset[str]  # the data partitions read ("topic-n")
    state: pa.Table  # coordinator state per transactional.id
    owner_ids: pa.Table  # producer_id → transactional.id (staged.OWNERS_SCHEMA)
    producers: pa.Table  # each partition's leader's producer state, before expiry (txnlog.rules.producers)


#: what classify.verdicts / evidence read of a candidate (its Arrow batches)
CANDIDATE_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "start_offset",
    "last_offset",
    "batch_count",
    "first_timestamp_ms",
    "last_timestamp_ms",
    "open_ms",
    "idle_ms",
    "lso_lag",
    "replicas",
    "open_replicas",
    "started_before_log_start",
    "prev_marker_offset",
    "prev_marker_type",
    "prev_marker_epoch",
    "last_coordinator_epoch",
    "diverged",
    "behind_replicas",
    "snapshot_offset",
    "log_start_offset",
    "checkpoint_note",
    "owner_match",
    "transactional_id",
    "history_transactional_id",
    "owner_state",
    "owner_partitions",
    "owner_timeout_ms",
    "owner_txn_start_ms",
    "owner_last_update_ms",
    "owner_coordinator_partition",
    "owner_coordinator_epoch",
    "owner_producer_id",
    "source",
)

CANDIDATE_SCHEMA_EXTRA = [
    ("verdict", pa.string()),
    ("reason", pa.string()),
    ("safety", pa.string()),
    ("evidence", pa.string()),
    ("advice", pa.string()),
    *((name, pa.string()) for name in REMEDY_COLUMNS),
]
#: what classify_batches' coordinator counterpart, stuck_batches, adds to a coordinator state
STUCK_SCHEMA_EXTRA = [("evidence", pa.string()), ("advice", pa.string()), *((n, pa.string()) for n in REMEDY_COLUMNS)]


# --- the Arrow steps both placements run ------------------------------------------------------------------


def classify_batches(
    batches: Iterator[pa.RecordBatch], thresholds: classify.Thresholds, damage: classify.Damage, out_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Candidates → the same rows with verdict, reason, safety, evidence and advice (txnlog.broker.classify)."""
    for batch in batches:
        table = pa.Table.from_batches([batch])
        for name, values in classify.damage_flags(table, damage).items():
            table = table.append_column(name, values)
        verdict, reason, safety = classify.verdicts(table, thresholds)
        # one Python row and one remedy per candidate: its evidence, its advice and its remedy columns
        evidence, advice, remedies = candidates_text(table.to_pylist(), reason, safety, thresholds)
        cols = {name: batch.column(name) for name in batch.schema.names}
        cols.update(
            verdict=pa.array([v or None for v in verdict], pa.string()),
            reason=pa.array([v or None for v in reason], pa.string()),
            safety=pa.array([v or None for v in safety], pa.string()),
            evidence=pa.array(evidence, pa.string()),
            advice=pa.array(advice, pa.string()),
        )
        cols.update(remedy_arrays(remedies))
        yield pa.RecordBatch.from_arrays([cols[f.name] for f in out_schema], schema=out_schema)


def stuck_batches(
    batches: Iterator[pa.RecordBatch], thresholds: classify.Thresholds, out_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Coordinator states → the COORDINATOR_STUCK ones with evidence and advice (txnlog.broker.classify)."""
    for batch in batches:
        table = pa.Table.from_batches([batch])
        mask = classify.coordinator_stuck(table, thresholds)
        if not mask.any():
            continue
        batch = batch.filter(pa.array(mask))
        ev, adv = zip(*(coordinator_stuck_evidence_and_advice(r, thresholds) for r in batch.to_pylist()), strict=True)
        cols = {name: batch.column(name) for name in batch.schema.names}
        cols.update(evidence=pa.array(ev, pa.string()), advice=pa.array(adv, pa.string()))
        stuck_rows = pa.Table.from_batches([batch]).append_column(
            "reason", pa.repeat(pa.scalar(classify.Reason.COORDINATOR_STUCK.value), batch.num_rows)
        )
        cols.update(remedy_columns(stuck_rows, thresholds.bootstrap_servers))
        yield pa.RecordBatch.from_arrays([cols[f.name] for f in out_schema], schema=out_schema)


def candidates(it: Intermediates, thresholds: classify.Thresholds) -> pa.Table:
    """Transactions open on some replica and idle past the timeout, with the evidence classify reads
    (the last marker's coordinator epoch, else the snapshot's: what
    ``ProducerAppendInfo.appendEndTxnMarker`` fences WriteTxnMarkers with)."""
    txns = it.txns
    as_of = pa.scalar(thresholds.as_of_ms, pa.int64())
    idle = pc.subtract(as_of, txns.column("last_timestamp_ms"))
    opened = pc.greater(pc.list_value_length(txns.column("open_replicas")), 0)
    keep = is_true(pc.and_(opened, pc.greater(idle, thresholds.max_transaction_timeout_ms)))
    rows = txns.filter(keep)
    started = pc.coalesce(rows.column("first_timestamp_ms"), rows.column("last_timestamp_ms"))
    rows = with_columns(
        rows,
        start_offset=rows.column("first_offset"),
        open_ms=pc.subtract(as_of, started),
        idle_ms=pc.subtract(as_of, rows.column("last_timestamp_ms")),
        started_before_log_start=pc.fill_null(rows.column("started_before_log_start"), False),
        last_coordinator_epoch=pc.coalesce(
            rows.column("prev_coordinator_epoch"), rows.column("snapshot_coordinator_epoch"), pa.scalar(-1, pa.int32())
        ),
        owner_match=pc.fill_null(rows.column("owner_match"), classify.Owner.NONE.value),
    )
    return rows.select(list(CANDIDATE_COLUMNS))


def classified(cands: pa.Table, thresholds: classify.Thresholds, damaged: classify.Damage) -> pa.Table:
    """The candidates with a verdict (txnlog.broker.classify, vectorised per Arrow batch)."""
    out = pa.schema(list(cands.schema) + [pa.field(n, t) for n, t in CANDIDATE_SCHEMA_EXTRA])
    table = pa.Table.from_batches(list(classify_batches(iter(cands.to_batches()), thresholds, damaged, out)), out)
    return table.filter(pc.is_valid(table.column("verdict")))


def stuck(it: Intermediates, thresholds: classify.Thresholds) -> pa.Table:
    """COORDINATOR_STUCK records: stuck far past their timeout, none of whose partitions is in the input."""
    state = it.state
    listed = state.column("partitions").to_pylist()
    present = [any(tp in it.input_partitions for tp in (tps or ())) for tps in listed]
    cand = pa.table(
        {
            **{
                c: state.column(c) for c in ("transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms")
            },
            "partitions": state.column("partitions"),
            "txn_start_ms": state.column("txn_start_timestamp"),
            "last_update_ms": state.column("last_update_timestamp"),
            "txn_start_timestamp": state.column("txn_start_timestamp"),
            "last_update_timestamp": state.column("last_update_timestamp"),
            **{c: state.column(c) for c in ("coordinator_partition", "coordinator_epoch", "is_tombstoned", "source")},
            "any_partition_in_input": pa.array(present, pa.bool_()),
        }
    )
    out = pa.schema(list(cand.schema) + [pa.field(n, t) for n, t in STUCK_SCHEMA_EXTRA])
    return pa.Table.from_batches(list(stuck_batches(iter(cand.to_batches()), thresholds, out)), out)


def findings(verdicts: pa.Table, stuck_rows: pa.Table, as_of_ms: int) -> pa.Table:
    """HANGING and LATE transactions of the data partitions, and stuck coordinator records whose partitions
    are not in the input."""
    n = stuck_rows.num_rows
    as_of = pa.scalar(as_of_ms, pa.int64())
    start, update = stuck_rows.column("txn_start_ms"), stuck_rows.column("last_update_ms")
    data = project(
        verdicts, "findings",
        first_timestamp=_ts(verdicts.column("first_timestamp_ms")),
        last_timestamp=_ts(verdicts.column("last_timestamp_ms")),
        coordinator_state=verdicts.column("owner_state"),
        coordinator_partition=verdicts.column("owner_coordinator_partition"),
        coordinator_epoch=_legacy_epoch(verdicts), blocked_groups=None,  # named by txnlog.pipeline.blocked
    )  # fmt: skip
    coordinator = project(
        stuck_rows, "findings",
        topic=pa.nulls(n, pa.string()), partition=pa.nulls(n, pa.int32()), start_offset=pa.nulls(n, pa.int64()),
        first_timestamp=_ts(start), last_timestamp=_ts(update),
        open_ms=pc.subtract(as_of, start), idle_ms=pc.subtract(as_of, greatest(start, update)),
        lso_lag=pa.nulls(n, pa.int64()), verdict=classify.Verdict.LATE.value,
        reason=classify.Reason.COORDINATOR_STUCK.value, coordinator_state=stuck_rows.column("state"),
        replicas=pa.nulls(n, pa.list_(pa.string())), open_replicas=pa.nulls(n, pa.list_(pa.string())),
        started_before_log_start=False, blocked_groups=None,
    )  # fmt: skip
    return pa.concat_tables([data, coordinator])


def _legacy_epoch(rows: pa.Table) -> Any:
    return greatest(rows.column("last_coordinator_epoch"), pa.scalar(0, pa.int32()))


def abort_impact(it: Intermediates, hanging: pa.Table) -> tuple[list[int | None], list[int | None]]:
    """(lso_after_abort, offsets_released) per HANGING row, aborted in offset order on each partition.
    HANGING transactions are few: a loop over them.

    The LSO is the first offset of the earliest unstable transaction (open on the leader, or ended by a
    marker the high watermark has not passed), else the high watermark (``UnifiedLog.lastStableOffset``).
    Aborting a HANGING transaction removes it from that set once its ABORT marker is replicated; a completed
    transaction whose marker the high watermark has not passed yet does not hold the LSO after an abort,
    because the abort's marker lands after its marker and the high watermark passes both at once
    (``ProducerStateManager.removeUnreplicatedTransactions``). After the aborts of the partition's HANGING
    transactions up to this one, the LSO moves to the first offset of the earliest transaction left open on
    the leader (a LATE or active one, or the next HANGING one), else to the log end, never below the log
    start. ``offsets_released``: the LSO after this abort minus the LSO before it (the partition's LSO for the
    first). The rule is :func:`txnlog.rules.plan.lso_after_steps`, which the remediation plan applies too."""
    key = ("topic", "partition", "producer_id", "start_offset")
    marked = {tuple(r[k] for k in key) for r in hanging.select(list(key)).to_pylist()}
    on_lead = it.txns.filter(is_true(it.txns.column("open_on_lead"))).select(
        ["topic", "partition", "producer_id", "first_offset"]
    )
    blocker: dict[tuple[str, int], int] = {}
    later: dict[tuple[str, int], list[int]] = {}
    for r in on_lead.to_pylist():
        tp, row = (r["topic"], r["partition"]), (r["topic"], r["partition"], r["producer_id"], r["first_offset"])
        if row in marked:
            later.setdefault(tp, []).append(r["first_offset"])
        else:
            blocker[tp] = min(blocker.get(tp, r["first_offset"]), r["first_offset"])
    bounds = {
        (r["topic"], r["partition"]): r
        for r in it.health.select([*TP, "last_stable_offset", "log_start_offset", "log_end_offset"]).to_pylist()
    }
    rows = hanging.select(list(key)).to_pylist()
    after: list[int | None] = [None] * len(rows)
    released: list[int | None] = [None] * len(rows)
    by_tp: dict[tuple[str, int], list[int]] = {}
    for i in sorted(range(len(rows)), key=lambda i: (rows[i]["start_offset"], rows[i]["producer_id"])):
        by_tp.setdefault((rows[i]["topic"], rows[i]["partition"]), []).append(i)
    for tp, steps in by_tp.items():
        b = bounds.get(tp, {})
        # the next HANGING transaction still open on the leader after each step
        nexts = [min((s for s in later.get(tp, ()) if s > rows[i]["start_offset"]), default=None) for i in steps]
        lso = lso_after_steps(
            nexts, blocker=blocker.get(tp), lso=b.get("last_stable_offset"),
            log_start=b.get("log_start_offset"), log_end=b.get("log_end_offset"),
        )  # fmt: skip
        for i, (a, r) in zip(steps, lso, strict=True):
            after[i], released[i] = a, r
    return after, released


def abort_recommendations(verdicts: pa.Table, bootstrap: str, it: Intermediates) -> pa.Table:
    """One per HANGING transaction: the kafka-transactions.sh abort commands (KIP-664 and the legacy
    form) and what the abort releases (:func:`abort_impact`)."""
    hanging = verdicts.filter(pc.equal(verdicts.column("verdict"), classify.Verdict.HANGING.value))
    after, released = abort_impact(it, hanging)
    epoch = _legacy_epoch(hanging)
    commands, legacy = [], []
    for r, e in zip(
        hanging.select(["topic", "partition", "start_offset", "producer_id", "producer_epoch"]).to_pylist(),
        epoch.to_pylist(),
        strict=True,
    ):
        topic, partition = r["topic"], r["partition"]
        commands.append(classify.abort_command(bootstrap, topic, partition, r["start_offset"]))
        legacy.append(
            classify.legacy_abort_command(bootstrap, topic, partition, r["producer_id"], r["producer_epoch"], e)
        )
    return project(
        hanging, "abort_recommendations",
        coordinator_epoch=epoch, command=pa.array(commands, pa.string()), legacy_command=pa.array(legacy, pa.string()),
        lso_after_abort=pa.array(after, pa.int64()), offsets_released=pa.array(released, pa.int64()),
        blocked_groups=None,  # named by txnlog.pipeline.blocked
    )  # fmt: skip
