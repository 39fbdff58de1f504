"""The output tables, built from the decoded rows with pyarrow and numpy: one function per rule.

Every input size runs this code. A small input (``driver_max_bytes``, txnlog.engine.spark.placement) is decoded in
this process; a large one in Spark's tasks, where the partitions decoded in pieces are merged and the
coordinator partitions reduced by the same functions, and the rest (a few rows per segment, producer and
open transaction) is collected here (txnlog.engine.spark.collect). Each function below names the Kafka classes
its rule follows. The run key (``cluster``, ``as_of``) is set by the Delta writer (txnlog.output.delta), and the
columns and their order come from the contract (txnlog.model.contract).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import as_of as as_of_rule
from txnlog.broker import classify
from txnlog.broker import reconstruct as R
from txnlog.broker.producer_state import expired
from txnlog.kafka.wire import TransactionState
from txnlog.model import contract
from txnlog.model.contract import InputSource
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules import damage as rule
from txnlog.rules import staged
from txnlog.rules.coordinator import reduce_records
from txnlog.rules.plan import lso_after_steps
from txnlog.rules.producers import KINDS as PRODUCER_KINDS
from txnlog.rules.producers import SUMMARY_COLUMNS as PRODUCER_SUMMARY_COLUMNS
from txnlog.rules.producers import producers_of_summary
from txnlog.rules.remedy import (
    REMEDY_COLUMNS,
    coordinator_stuck_evidence_and_advice,
    evidence_and_advice,
    remedy_columns,
)
from txnlog.rules.staged import timestamps as _ts  # epoch ms → UTC timestamps, the writer's rule
from txnlog.rules.transactions import KIND_TRANSACTION, checkpoints_of, transactions_of_summary

if TYPE_CHECKING:
    from txnlog.model.rows import Checkpoint

RUN_KEY = ("cluster", "as_of")
REPLICA = ["broker", "topic", "partition"]
TP = ["topic", "partition"]

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
        rows = table.to_pylist()
        evidence, advice = [], []
        for row, r in zip(rows, reason, strict=True):
            if r:
                e, a = evidence_and_advice(row, r, thresholds)
            else:
                e, a = None, None
            evidence.append(e)
            advice.append(a)
        cols = {name: batch.column(name) for name in batch.schema.names}
        cols.update(
            verdict=pa.array([v or None for v in verdict], pa.string()),
            reason=pa.array([v or None for v in reason], pa.string()),
            safety=pa.array([v or None for v in safety], pa.string()),
            evidence=pa.array(evidence, pa.string()),
            advice=pa.array(advice, pa.string()),
        )
        found = table.append_column("reason", pa.array([v or None for v in reason], pa.string()))
        found = found.append_column("safety", pa.array([v or None for v in safety], pa.string()))
        cols.update(remedy_columns(found, thresholds.bootstrap_servers))
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


# --- small Arrow helpers ----------------------------------------------------------------------------------


def groups(table: pa.Table, keys: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of ``table`` per distinct value of ``keys`` (nulls form their own group), as Spark's
    ``groupBy(...).applyInArrow`` hands them to its function: one table per group."""
    if table.num_rows == 0:
        return
    order = table.sort_by([(k, "ascending") for k in keys]).combine_chunks()
    bounds = [*group_starts(order, keys).tolist(), order.num_rows]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        yield order.slice(begin, end - begin)


def group_starts(order: pa.Table, keys: Sequence[str]) -> Any:
    """The row numbers where a new group of ``keys`` starts in ``order`` (sorted by ``keys``; null == null
    here): a numpy int64 array, empty for an empty table."""
    if order.num_rows == 0 or not keys:
        return np.flatnonzero(np.arange(order.num_rows) == 0)
    arrays = []
    for key in keys:
        column = order.column(key)
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)
        arrays.append(valid)
        if valid.any():  # a null takes a valid row's value: where validity agrees, only two valid values differ
            values = column.to_numpy(zero_copy_only=False)
            if not valid.all():
                values = values.copy()
                values[~valid] = values[np.argmax(valid)]
            arrays.append(values)
    return R.group_starts(*arrays)


def _least(*values: Any) -> Any:
    """Spark's ``least``: the smallest non-null value per row, null when all are."""
    return reduce(lambda a, b: pc.min_element_wise(a, b, skip_nulls=True), values)


def _greatest(*values: Any) -> Any:
    return reduce(lambda a, b: pc.max_element_wise(a, b, skip_nulls=True), values)


def _true(values: Any) -> Any:
    """A boolean column with null read as false (a SQL filter's reading)."""
    return pc.fill_null(values, False)


def _kind(table: pa.Table, *kinds: str) -> pa.Table:
    return table.filter(pc.is_in(table.column("kind"), pa.array(list(kinds), pa.string())))


def _with(table: pa.Table, **columns: Any) -> pa.Table:
    """``table`` with ``columns`` added or replaced (Spark's ``withColumns``)."""
    for name, values in columns.items():
        if not isinstance(values, pa.Array | pa.ChunkedArray):
            values = pa.array(values) if isinstance(values, list | np.ndarray) else pa.repeat(values, table.num_rows)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, values)
        else:
            table = table.append_column(name, values)
    return table


def _join(left: pa.Table, right: pa.Table, on: list[str], columns: Sequence[str] | None = None) -> pa.Table:
    """A left join on ``on``, unique in ``right``: ``left`` (rows and order kept) plus ``right``'s ``columns``."""
    names = [c for c in (columns or right.column_names) if c not in on]
    if right.num_rows == 0:
        return _with(left, **{c: pa.nulls(left.num_rows, right.schema.field(c).type) for c in names})
    return _with(left, **{c: staged.lookup(left, on, right, c) for c in names})


def _first_rows(table: pa.Table, keys: list[str], order: list[tuple[str, str]]) -> pa.Table:
    """The first row of each ``keys`` group in ``order`` (Spark's ``row_number() == 1`` over that window)."""
    ordered = table.sort_by([(k, "ascending") for k in keys] + order)
    return ordered.take(pa.array(group_starts(ordered, keys), pa.int64()))


def _project(table: pa.Table, name: str, **derived: Any) -> pa.Table:
    """The contract's columns of ``name`` but the run key (txnlog.model.contract), from ``derived`` or ``table``."""
    fields = [f for f in contract.TABLES[name] if f.name not in RUN_KEY]
    arrays = []
    for f in fields:
        value = derived[f.name] if f.name in derived else table.column(f.name)
        if not isinstance(value, pa.Array | pa.ChunkedArray):
            value = pa.repeat(pa.scalar(value, f.type), table.num_rows)
        arrays.append(value.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in fields]))


# --- data partitions ---------------------------------------------------------------------------------------


def replica_stats(summary: pa.Table, checkpoints: Sequence[Checkpoint]) -> pa.Table:
    """Per replica: log start/end, batches, newest timestamp, its checkpoints, whether it is the most
    advanced (txnlog.broker.reconstruct.replica_logs, the bounds and the leader the transactions' merge and
    the producer state use).

    The checkpointed log start (``log-start-offset-checkpoint``) is the real log start once DeleteRecords moved
    it inside a segment (``UnifiedLog.maybeIncrementLogStartOffset``); the segments alone only say where the
    oldest retained segment begins. ``is_lead``: the replica with the largest log end offset (ties: the first
    broker name), whose offsets the leader reports."""

    seg = _kind(summary, "segment")
    aggs = [("file_offset", "min"), ("batch_count", "sum"), ("last_timestamp", "max"), ("input", "max")]
    g = seg.group_by(REPLICA, use_threads=False).aggregate(aggs)
    g = g.sort_by([("topic", "ascending"), ("partition", "ascending"), ("broker", "ascending")])
    marks = pa.table(
        {
            "broker": pa.array([c.broker for c in checkpoints], pa.string()),
            "topic": pa.array([c.topic for c in checkpoints], pa.string()),
            "partition": pa.array([int(c.partition) for c in checkpoints], pa.int32()),
            "high_watermark": pa.array([c.high_watermark for c in checkpoints], pa.int64()),
            "checkpoint_log_start": pa.array([c.log_start_offset for c in checkpoints], pa.int64()),
            "clean_shutdown": pa.array([bool(c.clean_shutdown) for c in checkpoints], pa.bool_()),
        }
    )
    g = _join(g, marks, REPLICA)
    n = g.num_rows
    tp_of = np.zeros(n, np.int32)
    tp_of[group_starts(g, TP)[1:]] = 1
    numbered = _with(_keyed(g), _replica=pa.array(np.arange(n, dtype=np.int64)))
    replica_of = np.asarray(staged.lookup(_keyed(seg), REPLICA, numbered, "_replica").to_numpy(zero_copy_only=False))
    logs = R.replica_logs(
        np.cumsum(tp_of, dtype=np.int32),
        replica_of.astype(np.int64),
        _values(seg.column("file_offset"), 0),
        (_values(seg.column("last_offset"), 0), _valid(seg.column("last_offset"))),
        (_values(g.column("checkpoint_log_start"), 0), _valid(g.column("checkpoint_log_start"))),
        _values(pc.fill_null(g.column("clean_shutdown"), False), False),
    )
    return pa.table(
        {
            **{k: g.column(k) for k in REPLICA},
            "log_start_offset": pa.array(logs.log_start),
            "log_end_offset": pa.array(logs.log_end),
            "batch_count": g.column("batch_count_sum"),
            "max_timestamp_ms": g.column("last_timestamp_max"),
            "input": g.column("input_max"),
            "high_watermark": g.column("high_watermark"),
            "checkpoint_log_start": g.column("checkpoint_log_start"),
            "clean_shutdown": g.column("clean_shutdown"),
            "segment_log_start": g.column("file_offset_min"),
            "is_lead": pa.array(logs.is_lead),
        }
    )


def _keyed(table: pa.Table) -> pa.Table:
    """``table``'s replica key columns with nulls as a value of their own (a dump may name no broker or
    partition): a group of its own, as ``group_by`` makes it, that a lookup can find."""
    nulls = {"broker": "\x00", "topic": "\x00", "partition": np.iinfo(np.int32).min}
    return _with(table, **{k: pc.fill_null(table.column(k), v) for k, v in nulls.items()})


def _values(column: Any, null: Any) -> np.ndarray:
    """A column's values as numpy, nulls as ``null``."""
    return np.asarray(pc.fill_null(column, null).to_numpy(zero_copy_only=False))


def _valid(column: Any) -> np.ndarray:
    return np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), bool)


def _at_least(table: pa.Table, col: str, end: Any) -> Any:
    """``col`` raised to the checkpointed log start (capped by ``end``) where one is known."""
    known = pc.is_valid(table.column("checkpoint_log_start"))
    bound = _least(table.column("checkpoint_log_start"), end)
    return pc.if_else(known, _greatest(table.column(col), bound), table.column(col))


def partition_stats(stats: pa.Table) -> pa.Table:
    """Replicas merged per partition: the most advanced replica's offsets, the most advanced checkpoints,
    a note where the brokers' checkpoints disagree (each broker writes them every few seconds)."""
    lead = stats.filter(stats.column("is_lead")).select(
        [*TP, "log_end_offset", "segment_log_start", "broker", "clean_shutdown"]
    )
    aggs = [
        ("checkpoint_log_start", "max"),
        ("high_watermark", "max"),
        ("high_watermark", "count_distinct"),
        ("checkpoint_log_start", "count_distinct"),
        ("batch_count", "max"),
        ("max_timestamp_ms", "max"),
        ("broker", "distinct"),
        ("input", "distinct"),
    ]
    g = stats.group_by(TP, use_threads=False).aggregate(aggs)
    g = _join(g, lead, TP)
    end = g.column("log_end_offset")
    hw = g.column("high_watermark_max")
    merged = pa.table(
        {
            **{k: g.column(k) for k in TP},
            "log_end_offset": end,
            "high_watermark": pc.if_else(pc.is_valid(hw), _least(hw, end), pa.nulls(g.num_rows, pa.int64())),
            "lead_replica": g.column("broker"),
            "batch_count": g.column("batch_count_max"),
            "max_timestamp_ms": g.column("max_timestamp_ms_max"),
            "replicas": pa.array([sorted(v) for v in g.column("broker_distinct").to_pylist()], pa.list_(pa.string())),
            "source": pa.array(["+".join(sorted(v)) for v in g.column("input_distinct").to_pylist()], pa.string()),
            "checkpoint_log_start": g.column("checkpoint_log_start_max"),
            "segment_log_start": g.column("segment_log_start"),
            "lead_clean_shutdown": pc.fill_null(g.column("clean_shutdown"), False),
        }
    )
    merged = _with(merged, log_start_offset=_at_least(merged, "segment_log_start", end))
    notes = _checkpoint_notes(stats, g)
    return _with(merged, checkpoint_note=pa.array(notes, pa.string())).drop_columns(
        ["checkpoint_log_start", "segment_log_start"]
    )


def _checkpoint_notes(stats: pa.Table, g: pa.Table) -> list[str | None]:
    """Per row of ``g``: where the brokers' high-watermark or log-start checkpoints disagree, which say
    what (the few partitions whose brokers wrote different values)."""
    disagree = pc.or_(
        pc.greater(g.column("high_watermark_count_distinct"), 1),
        pc.greater(g.column("checkpoint_log_start_count_distinct"), 1),
    )
    notes: list[str | None] = [None] * g.num_rows
    rows = np.flatnonzero(np.asarray(disagree.to_numpy(zero_copy_only=False), bool))
    if not rows.size:
        return notes
    by_tp: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in stats.select(["broker", *TP, "high_watermark", "checkpoint_log_start"]).to_pylist():
        by_tp.setdefault((r["topic"], r["partition"]), []).append(r)
    topics, parts = g.column("topic").to_pylist(), g.column("partition").to_pylist()
    for i in rows.tolist():
        replicas = by_tp[(topics[i], parts[i])]
        texts = []
        for column, what in (("high_watermark", "high-watermark"), ("checkpoint_log_start", "log-start")):
            pairs = sorted({f"{r['broker']}: {r[column]}" for r in replicas if r[column] is not None})
            if len({r[column] for r in replicas if r[column] is not None}) > 1:
                texts.append(
                    f"the brokers' {what} checkpoints disagree ({', '.join(pairs)}; the most advanced is used)"
                )
        notes[i] = "; ".join(texts) or None
    return notes


def with_lso(txns: pa.Table, pstats: pa.Table, as_of_ms: int) -> tuple[pa.Table, pa.Table]:
    """(transactions with lso_lag, partition health in ms), as the leader computes them.

    ``UnifiedLog.lastStableOffset``: the first unstable offset if it is below the high watermark, else the
    high watermark; the first unstable offset is the smallest first offset of the ongoing transactions and
    of the completed ones whose marker is not yet below the high watermark
    (``ProducerStateManager.firstUnstableOffset``, ``unreplicatedTxns``: a running broker's copy; a cleanly
    shut-down broker restarted on its copy loads the snapshot at the log end, which holds no completed
    transaction, ``LogLoader``), never below the log start (``UnifiedLog.updateFirstUnstableOffset``).
    Ongoing = open on the most advanced replica (so are ``open_transactions``, ``max_open_ms`` and the
    late-transaction flag: what the leader reports; a transaction open only on a diverged follower is a
    finding, not part of the leader's numbers); with no checkpoint the high watermark is the log end."""
    on_lead = txns.filter(_true(txns.column("open_on_lead")))
    started = pc.coalesce(on_lead.column("first_timestamp_ms"), on_lead.column("last_timestamp_ms"))
    on_lead = _with(on_lead, _open_ms=pc.subtract(pa.scalar(as_of_ms, pa.int64()), started), _started=started)
    agg = on_lead.group_by(TP, use_threads=False).aggregate([("_open_ms", "max"), ("first_offset", "count")])
    oldest = _first_rows(on_lead, TP, [("first_offset", "ascending")])
    oldest = _with(
        oldest, oldest_idle_ms=pc.subtract(pa.scalar(as_of_ms, pa.int64()), oldest.column("last_timestamp_ms"))
    )
    with_hw = _join(
        txns.select([*TP, "first_offset", "marker_offset", "open_on_lead"]),
        pstats,
        TP,
        ["high_watermark", "lead_clean_shutdown"],
    )
    marker = with_hw.column("marker_offset")
    # a clean copy speaks for its broker restarted on it: the snapshot at the log end holds no completed txn
    late_marker = pc.and_(
        _true(pc.greater_equal(marker, with_hw.column("high_watermark"))),
        pc.invert(_true(with_hw.column("lead_clean_shutdown"))),
    )
    unstable = with_hw.filter(pc.or_(_true(with_hw.column("open_on_lead")), late_marker))
    first_unstable = unstable.group_by(TP, use_threads=False).aggregate([("first_offset", "min")])
    health = _join(pstats, agg, TP)
    health = _join(health, oldest.select([*TP, "oldest_idle_ms", "_started"]), TP)
    health = _join(health, first_unstable, TP)
    bound = pc.coalesce(health.column("high_watermark"), health.column("log_end_offset"))
    lso = _greatest(_least(health.column("first_offset_min"), bound), health.column("log_start_offset"))
    lso = pc.coalesce(lso, bound)
    health = _with(
        health,
        last_stable_offset=lso,
        lso_lag=pc.subtract(health.column("log_end_offset"), lso),
        open_transactions=pc.fill_null(health.column("first_offset_count"), 0).cast(pa.int64()),
        max_open_ms=health.column("_open_ms_max"),
        oldest_first_ms=health.column("_started"),
    ).drop_columns(["_open_ms_max", "first_offset_count", "_started", "first_offset_min"])
    carried = ["lso_lag", "log_start_offset", "log_end_offset", "high_watermark", "checkpoint_note", "source"]
    return _join(txns, health, TP, carried), health


def damage(summary: pa.Table, records: pa.Table) -> classify.Damage:
    """The quarantined regions per data partition (txnlog.rules.damage.ranges) and the damaged
    ``__transaction_state`` partitions, applied to the few candidates by the verdicts."""

    quarantined = _kind(summary, "quarantine")
    bad = _kind(records, "quarantine").column("coordinator_partition").drop_null().to_pylist()
    return classify.Damage(
        ranges=rule.ranges(_kind(summary, "segment"), quarantined), txn_state_partitions=frozenset(bad)
    )


# --- __transaction_state -----------------------------------------------------------------------------------

_STATE_NAMES = {int(s): s.kafka_name for s in TransactionState}

#: a value record's fields the coordinator's state holds (:func:`coordinator_state`)
STATE_COLUMNS = (
    "producer_id",
    "producer_epoch",
    "state_name",
    "timeout_ms",
    "partitions",
    "txn_start_timestamp",
    "last_update_timestamp",
    "previous_producer_id",
    "next_producer_id",
    "next_producer_epoch",
    "client_transaction_version",
    "coordinator_epoch",
)


def coordinator_history(records: pa.Table) -> pa.Table:
    """Every decoded record once (replicas deduplicated), with its state's name."""
    recs = _first_rows(_kind(records, "record"), ["coordinator_partition", "record_offset"], [])
    names = [_STATE_NAMES.get(s) if s is not None else None for s in recs.column("state").to_pylist()]
    return _with(recs, state_name=pa.array(names, pa.string()))


def _newest(table: pa.Table, key: str) -> pa.Table:
    """The newest row per ``key`` by (coordinator partition, offset): the order the coordinator loads them."""
    return _first_rows(table, [key], [("coordinator_partition", "descending"), ("record_offset", "descending")])


def coordinator_state(history: pa.Table) -> pa.Table:
    """Per transactional.id, the newest record by offset, whole, as the coordinator loads it.

    ``TransactionStateManager.loadTransactionMetadata`` reads a ``__transaction_state`` partition in offset
    order and *replaces* the id's metadata with each value record, or removes the id on a tombstone. So the
    newest record by offset is the state, whole: a field it lacks (a v0 value has no tagged fields) is
    absent, never inherited from an older record. Record timestamps are not an order (after a failover
    another broker's clock writes them). A tombstoned id keeps the fields of its last value (which producer
    id it owned) with ``is_tombstoned`` = true: what TRANSACTIONAL_ID_EXPIRED needs."""
    tid = "transactional_id"
    newest = _newest(history, tid)
    values = _newest(history.filter(pc.invert(_true(history.column("is_tombstone")))), tid)
    transitions = history.column("transitions") if "transitions" in history.column_names else None
    counted = _with(history.select([tid]), _n=pc.fill_null(transitions, 1) if transitions is not None else 1)
    totals = counted.group_by([tid], use_threads=False).aggregate([("_n", "sum")])
    state = pa.table(
        {
            tid: newest.column(tid),
            "is_tombstoned": newest.column("is_tombstone"),
            "coordinator_partition": newest.column("coordinator_partition"),
            "record_offset": newest.column("record_offset"),
            "source": newest.column("input"),
        }
    )
    state = _join(state, values.select([tid, *STATE_COLUMNS]), [tid])
    state = _join(state, totals, [tid])
    live_name = pc.if_else(
        _true(state.column("is_tombstoned")), pa.scalar(None, pa.string()), state.column("state_name")
    )
    return _with(state, state=live_name, transitions=state.column("_n_sum").cast(pa.int64())).drop_columns(
        ["state_name", "_n_sum"]
    )


_OWNER_COLUMNS = {
    "transactional_id": "transactional_id",
    "owner_state": "state",
    "owner_partitions": "partitions",
    "owner_timeout_ms": "timeout_ms",
    "owner_txn_start_ms": "txn_start_timestamp",
    "owner_last_update_ms": "last_update_timestamp",
    "owner_coordinator_partition": "coordinator_partition",
    "owner_coordinator_epoch": "coordinator_epoch",
    "owner_producer_id": "producer_id",
    "owner_record_offset": "record_offset",
}


def producer_owners(state: pa.Table) -> pa.Table:
    """producer_id → the transactional.id that owns it, best match first (classify.Owner): the id whose current
    producer id it is, else one whose Prepare* record names it as the next (KIP-890 rollover; it owns nothing
    yet), else the one that owned it when it was tombstoned or went Dead; two records claiming one id: the
    later record of a partition (offsets, never clocks). A previous producer id owns nothing: the coordinator
    writes every marker with the current one (``TransactionMarkerChannelManager.addTxnMarkersToSend``)."""
    dead = pc.equal(state.column("state"), TransactionState.DEAD.kafka_name)
    live = pc.and_(pc.invert(state.column("is_tombstoned")), pc.invert(pc.fill_null(dead, False)))
    live = _true(live)
    parts = []
    for rows, pid_column, rank, match in (
        (state.filter(live), "producer_id", 0, classify.Owner.CURRENT),
        (state.filter(live), "next_producer_id", 1, classify.Owner.NEXT),
        (state.filter(pc.invert(live)), "producer_id", 2, classify.Owner.EXPIRED),
    ):
        if rank == 1:
            rows = rows.filter(_true(pc.greater_equal(rows.column(pid_column), 0)))
        parts.append(
            pa.table(
                {
                    "pid": rows.column(pid_column).cast(pa.int64()),
                    "_rank": pa.repeat(pa.scalar(rank, pa.int32()), rows.num_rows),
                    "owner_match": pa.repeat(pa.scalar(match.value, pa.string()), rows.num_rows),
                    **{name: rows.column(source) for name, source in _OWNER_COLUMNS.items()},
                }
            )
        )
    owners = pa.concat_tables(parts)
    owners = _first_rows(
        owners,
        ["pid"],
        [("_rank", "ascending"), ("owner_record_offset", "descending"), ("owner_coordinator_partition", "ascending")],
    )
    return owners.drop_columns(["_rank", "owner_record_offset"])


def history_owners(history: pa.Table) -> pa.Table:
    """producer_id → the transactional.id of the newest record naming it, by (offset, partition): for evidence."""
    named = history.filter(pc.is_valid(history.column("producer_id")))
    newest = _first_rows(
        named, ["producer_id"], [("record_offset", "descending"), ("coordinator_partition", "descending")]
    )
    return pa.table(
        {"pid": newest.column("producer_id"), "history_transactional_id": newest.column("transactional_id")}
    )


def owner_ids(owners: pa.Table, seen_under: pa.Table) -> pa.Table:
    """producer_id → transactional.id for the ``transactions`` table: the owner, else the history's name."""
    pids = pc.unique(
        pa.concat_arrays([owners.column("pid").combine_chunks(), seen_under.column("pid").combine_chunks()])
    )
    ids = pa.table({"pid": pids.drop_null()})
    ids = _join(_join(ids, owners, ["pid"], ["transactional_id"]), seen_under, ["pid"])
    tid = pc.coalesce(ids.column("transactional_id"), ids.column("history_transactional_id"))
    out = pa.table({"producer_id": ids.column("pid"), "transactional_id": tid})
    return out.filter(pc.is_valid(tid)).cast(staged.OWNERS_SCHEMA)


# --- the run's intermediates and tables ---------------------------------------------------------------------


@dataclass(frozen=True)
class Intermediates:
    """What several tables read, computed once per run."""

    txns: pa.Table  # the transactions the verdicts need, with LSO lag and owners (times in ms)
    health: pa.Table  # partition health, ms
    input_partitions: frozenset[str]  # the data partitions read ("topic-n")
    state: pa.Table  # coordinator state per transactional.id
    owner_ids: pa.Table  # producer_id → transactional.id (staged.OWNERS_SCHEMA)
    producers: pa.Table  # each partition's leader's producer state, before expiry (txnlog.rules.producers)


def partition_transactions(
    summary: pa.Table,
    checkpoints: Sequence[Checkpoint],
    *,
    fragments: bool,
    stage: str,
    fragment_partitions: frozenset[tuple[str, int]] | None,
) -> pa.Table:
    """One row per transaction of a partition, replicas merged (txnlog.broker.reconstruct): those
    the decode tasks finished, and with ``fragments`` the others (kafka-dump-log.sh output, split segments'
    pieces) merged here by the same function (txnlog.rules.transactions.transactions_of_summary; in Spark it
    runs per partition in tasks, txnlog.engine.spark.collect)."""

    names = SEGMENT_SUMMARY_SCHEMA.names
    done = _kind(summary, KIND_TRANSACTION).select(names)
    if fragments:
        pieces = _kind(summary, "run", "marker", "segment", "snapshot").select(names)
        pieces = pieces.filter(pc.and_(pc.is_valid(pieces.column("topic")), pc.is_valid(pieces.column("partition"))))
        if fragment_partitions is not None:
            wanted = pa.table(
                {
                    "topic": pa.array([t for t, _ in fragment_partitions], pa.string()),
                    "partition": pa.array([p for _, p in fragment_partitions], pa.int32()),
                    "_split": pa.repeat(True, len(fragment_partitions)),
                }
            )
            pieces = pieces.filter(_true(_join(pieces.select(TP), wanted, TP).column("_split")))
        if pieces.num_rows:
            merged = transactions_of_summary(pieces, checkpoints_of(checkpoints), stage)
            done = pa.concat_tables([done, merged.cast(done.schema)])
    ms = {"first_timestamp", "last_timestamp", "marker_timestamp"}
    return done.select(list(staged.RAW_COLUMNS)).rename_columns(
        [f"{c}_ms" if c in ms else c for c in staged.RAW_COLUMNS]
    )


def reduced_records(records: pa.Table, stage: str) -> pa.Table:
    """``records`` whose records were not reduced where decoded, reduced by the same code, every record
    staged for ``coordinator_history`` (txnlog.rules.coordinator; in Spark per partition in tasks,
    txnlog.engine.spark.collect)."""

    columns = [c for c in records.column_names if c != "transitions"]
    recs = _kind(records, "record").select(columns)
    parts = sorted(set(recs.column("coordinator_partition").drop_null().to_pylist()))
    reduced = []
    for p in parts:
        with staged.records_writer(stage, str(p)) as sink:
            reduced.append(reduce_records(recs.filter(pc.equal(recs.column("coordinator_partition"), p)), sink))
    others = records.filter(pc.not_equal(records.column("kind"), "record")).select(columns)
    others = others.append_column("transitions", pa.nulls(others.num_rows, pa.int64()))
    return pa.concat_tables([*[r.select(others.column_names).cast(others.schema) for r in reduced], others])


def intermediates(
    summary: pa.Table,
    records: pa.Table,
    *,
    as_of_ms: int,
    checkpoints: Sequence[Checkpoint],
    fragments: bool,
    records_reduced: bool,
    scratch: str,
    fragment_partitions: frozenset[tuple[str, int]] | None = None,
    expiry_gap_ms: int | None = None,
) -> Intermediates:
    """The run's :class:`Intermediates`: partition stats, transactions with their LSO lag and owners, health,
    the coordinator's state and owners, the leaders' producer state (``expiry_gap_ms``:
    txnlog.rules.producers.producers_of_summary)."""

    pstats = partition_stats(replica_stats(summary, checkpoints))
    txns = partition_transactions(
        summary, checkpoints, fragments=fragments, stage=f"{scratch}/transactions",
        fragment_partitions=fragment_partitions,
    )  # fmt: skip
    txns, health = with_lso(txns, pstats, as_of_ms)
    if not records_reduced:
        records = reduced_records(records, f"{scratch}/coordinator_history")
    history = coordinator_history(records)
    state = coordinator_state(history)
    owners, seen_under = producer_owners(state), history_owners(history)
    txns = _join(txns, seen_under.rename_columns(["producer_id", "history_transactional_id"]), ["producer_id"])
    txns = _join(txns, owners.rename_columns(["producer_id", *owners.column_names[1:]]), ["producer_id"])
    rows = _kind(summary, *PRODUCER_KINDS).select(list(PRODUCER_SUMMARY_COLUMNS))
    rows = rows.filter(pc.and_(pc.is_valid(rows.column("topic")), pc.is_valid(rows.column("partition"))))
    producers = producers_of_summary(rows, checkpoints_of(checkpoints), expiry_gap_ms=expiry_gap_ms)
    partitions = frozenset(
        f"{t}-{p}"
        for t, p in zip(pstats.column("topic").to_pylist(), pstats.column("partition").to_pylist(), strict=True)
    )
    return Intermediates(txns, health, partitions, state, owner_ids(owners, seen_under), producers)


def candidates(it: Intermediates, thresholds: classify.Thresholds) -> pa.Table:
    """Transactions open on some replica and idle past the timeout, with the evidence classify reads
    (the last marker's coordinator epoch, else the snapshot's: what
    ``ProducerAppendInfo.appendEndTxnMarker`` fences WriteTxnMarkers with)."""
    txns = it.txns
    as_of = pa.scalar(thresholds.as_of_ms, pa.int64())
    idle = pc.subtract(as_of, txns.column("last_timestamp_ms"))
    opened = pc.greater(pc.list_value_length(txns.column("open_replicas")), 0)
    keep = _true(pc.and_(opened, pc.greater(idle, thresholds.max_transaction_timeout_ms)))
    rows = txns.filter(keep)
    started = pc.coalesce(rows.column("first_timestamp_ms"), rows.column("last_timestamp_ms"))
    rows = _with(
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
    data = _project(
        verdicts, "findings",
        first_timestamp=_ts(verdicts.column("first_timestamp_ms")),
        last_timestamp=_ts(verdicts.column("last_timestamp_ms")),
        coordinator_state=verdicts.column("owner_state"),
        coordinator_partition=verdicts.column("owner_coordinator_partition"),
        coordinator_epoch=_legacy_epoch(verdicts),
    )  # fmt: skip
    coordinator = _project(
        stuck_rows, "findings",
        topic=pa.nulls(n, pa.string()), partition=pa.nulls(n, pa.int32()), start_offset=pa.nulls(n, pa.int64()),
        first_timestamp=_ts(start), last_timestamp=_ts(update),
        open_ms=pc.subtract(as_of, start), idle_ms=pc.subtract(as_of, _greatest(start, update)),
        lso_lag=pa.nulls(n, pa.int64()), verdict=classify.Verdict.LATE.value,
        reason=classify.Reason.COORDINATOR_STUCK.value, coordinator_state=stuck_rows.column("state"),
        replicas=pa.nulls(n, pa.list_(pa.string())), open_replicas=pa.nulls(n, pa.list_(pa.string())),
        started_before_log_start=False,
    )  # fmt: skip
    return pa.concat_tables([data, coordinator])


def _legacy_epoch(rows: pa.Table) -> Any:
    return _greatest(rows.column("last_coordinator_epoch"), pa.scalar(0, pa.int32()))


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
    on_lead = it.txns.filter(_true(it.txns.column("open_on_lead"))).select(
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
    return _project(
        hanging, "abort_recommendations",
        coordinator_epoch=epoch, command=pa.array(commands, pa.string()), legacy_command=pa.array(legacy, pa.string()),
        lso_after_abort=pa.array(after, pa.int64()), offsets_released=pa.array(released, pa.int64()),
    )  # fmt: skip


def partition_health(it: Intermediates, thresholds: classify.Thresholds) -> pa.Table:
    """Per partition: offsets, the LSO and its lag, open transactions, whether one is late
    (txnlog.broker.classify.has_late_transaction)."""
    health = it.health
    late = classify.has_late_transaction(health.column("oldest_idle_ms"), thresholds.max_transaction_timeout_ms)
    has_late = pc.fill_null(late, False)
    since = pc.if_else(has_late, _ts(health.column("oldest_first_ms")), pa.scalar(None, contract.TS))
    return _project(
        health, "partition_health",
        has_late_transaction=has_late, stuck_since=since, max_timestamp=_ts(health.column("max_timestamp_ms")),
    )  # fmt: skip


_renamed = {"first_offset_min": "current_txn_start_offset"}


def producer_state(it: Intermediates, thresholds: classify.Thresholds) -> pa.Table:
    """Per partition: what DescribeProducers would have answered at as_of (txnlog.broker.producer_state).

    The leader's producers (the most advanced replica's, as for ``partition_health``), each with the first
    offset of the transaction open on that replica (the transactions' merge's, so the same offset the
    findings and the LSO use), less the producers ``producer.id.expiration.ms`` removed: nothing open and
    ``last_timestamp + producer.id.expiration.ms ≤ as_of`` (``ProducerStateManager.isProducerExpired``; an
    unknown timestamp is Kafka's −1: expired)."""
    key = ["topic", "partition", "producer_id"]
    on_lead = it.txns.filter(_true(it.txns.column("open_on_lead")))
    open_txn = on_lead.group_by(key, use_threads=False).aggregate([("first_offset", "min")])
    open_txn = open_txn.rename_columns([_renamed.get(c, c) for c in open_txn.column_names])
    rows = _join(it.producers, open_txn, key)
    rows = _join(rows, it.health, TP, ["source"])

    gone = expired(
        _values(rows.column("last_timestamp_ms"), -1),  # unknown: Kafka's -1
        _valid(rows.column("current_txn_start_offset")),
        thresholds.as_of_ms,
        thresholds.producer_id_expiration_ms,
    )
    rows = rows.filter(pa.array(~gone))
    return _project(rows, "producer_state", last_timestamp=_ts(rows.column("last_timestamp_ms")))


def coordinator_state_table(it: Intermediates) -> pa.Table:
    """Per transactional.id: the coordinator's state as it loads it (:func:`coordinator_state`)."""
    state = it.state
    return _project(
        state, "coordinator_state",
        txn_start_timestamp=_ts(state.column("txn_start_timestamp")),
        last_update_timestamp=_ts(state.column("last_update_timestamp")),
    )  # fmt: skip


def quarantine(summary: pa.Table, records: pa.Table, as_of: datetime | None, as_of_source: str) -> pa.Table:
    """Unreadable regions by file and position, and warning rows for client clocks far past ``as_of``
    (txnlog.broker.as_of: kept as read, never "now")."""

    data = _kind(summary, "quarantine")
    coordinator = _kind(records, "quarantine")
    parts = [
        _project(data, "quarantine", replica=data.column("broker")),
        _project(
            coordinator,
            "quarantine",
            topic="__transaction_state",
            partition=coordinator.column("coordinator_partition"),
            replica=coordinator.column("broker"),
        ),  # fmt: skip
    ]
    if as_of is not None:
        as_of_ms = as_of_rule.to_ms(as_of)
        late = _kind(summary, "segment")
        late = late.filter(_true(pc.greater(late.column("last_timestamp"), as_of_ms + as_of_rule.FUTURE_BOUND_MS)))
        stamp = as_of.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        details = [
            as_of_rule.FUTURE_DETAIL % (newest, newest - as_of_ms, stamp, as_of_source)
            for newest in late.column("last_timestamp").to_pylist()
        ]
        n = late.num_rows
        parts.append(
            _project(
                late,
                "quarantine",
                position=pa.nulls(n, pa.int64()),
                length=pa.nulls(n, pa.int64()),
                reason=as_of_rule.REASON_FUTURE,
                detail=pa.array(details, pa.string()),
                replica=late.column("broker"),
            )  # fmt: skip
        )
    return pa.concat_tables(parts)


#: the tables whose rows are staged as files under ``scratch``/<name> (txnlog.rules.staged): :func:`build` gives
#: what finishes them (a ``staged.Finisher``), the writer's side
#: (txnlog.engine.spark.staged_table.StagedTable) the files
STAGED = ("transactions", "coordinator_history")


def build(
    summary: pa.Table,
    records: pa.Table,
    thresholds: classify.Thresholds,
    *,
    scratch: str,
    checkpoints: Sequence[Checkpoint] = (),
    fragments: bool = True,
    fragment_partitions: frozenset[tuple[str, int]] | None = None,
    records_reduced: bool = False,
    as_of: datetime | None = None,
    as_of_source: str = "",
    history_bounds: pa.Table | None = None,
) -> dict[str, Any]:
    """Every output table (``pipeline.build_tables``): Arrow tables, and for the :data:`STAGED` tables
    (``transactions``, ``coordinator_history``: their rows staged under ``scratch``) what finishes their
    staged files (``staged.Finish``, ``staged.FinishHistory``)."""
    # one chunk each: the readers hand on a batch per task or window, and every filter and join below pays per
    # chunk and column (benchmarks/RESULTS.md §2, "Fewer CPU-seconds per GiB")
    summary, records = _with_input(summary).combine_chunks(), _with_input(records).combine_chunks()
    it = intermediates(
        summary, records, as_of_ms=thresholds.as_of_ms, checkpoints=checkpoints, fragments=fragments,
        records_reduced=records_reduced, scratch=scratch, fragment_partitions=fragment_partitions,
        expiry_gap_ms=thresholds.producer_id_expiration_ms + thresholds.producer_id_expiration_check_interval_ms,
    )  # fmt: skip
    verdicts = classified(candidates(it, thresholds), thresholds, damage(summary, records))
    sources = it.health.select([*TP, "source"]).cast(staged.SOURCES_SCHEMA)
    finish = staged.Finish(as_of_ms=thresholds.as_of_ms, owners=it.owner_ids, sources=sources, bounds=history_bounds)
    return {
        "transactions": finish,
        "findings": findings(verdicts, stuck(it, thresholds), thresholds.as_of_ms),
        "abort_recommendations": abort_recommendations(
            verdicts, thresholds.bootstrap_servers or classify.BOOTSTRAP_PLACEHOLDER, it
        ),
        "partition_health": partition_health(it, thresholds),
        "producer_state": producer_state(it, thresholds),
        "coordinator_state": coordinator_state_table(it),
        "coordinator_history": staged.FinishHistory(),
        "quarantine": quarantine(summary, records, as_of, as_of_source),
    }


def _with_input(table: pa.Table) -> pa.Table:
    """``table`` with its ``input`` column (a source's own output has none: segments)."""
    if "input" in table.column_names:
        return table
    return table.append_column("input", pa.repeat(pa.scalar(InputSource.SEGMENTS.value, pa.string()), table.num_rows))
