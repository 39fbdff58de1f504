"""The data partitions' tables from the decoded summary: per replica (log start and end, checkpoints, the lead),
per partition (health, the LSO and its lag, damage). Each function names the Kafka classes its rule follows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import classify
from txnlog.broker import reconstruct as R
from txnlog.model import contract
from txnlog.model.arrow import (
    Shaped,
    filled,
    first_rows,
    greatest,
    is_true,
    least,
    left_join,
    lookup,
    of_kind,
    table_group_starts,
    validity,
    with_columns,
)
from txnlog.model.times import timestamps as _ts  # epoch ms → UTC timestamps, the tables' rule
from txnlog.rules import damage as rule

if TYPE_CHECKING:
    from txnlog.model.rows import Checkpoint

REPLICA = ["broker", "topic", "partition"]
TP = ["topic", "partition"]


# --- data partitions ---------------------------------------------------------------------------------------


def replica_stats(summary: pa.Table, checkpoints: Sequence[Checkpoint]) -> pa.Table:
    """Per replica: log start/end, batches, newest timestamp, its checkpoints, whether it is the most
    advanced (txnlog.broker.reconstruct.replica_logs, the bounds and the leader the transactions' merge and
    the producer state use).

    The checkpointed log start (``log-start-offset-checkpoint``) is the real log start once DeleteRecords moved
    it inside a segment (``UnifiedLog.maybeIncrementLogStartOffset``); the segments alone only say where the
    oldest retained segment begins. ``is_lead``: the replica with the largest log end offset (ties: the first
    broker name), whose offsets the leader reports."""

    seg = of_kind(summary, "segment")
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
    g = left_join(g, marks, REPLICA)
    n = g.num_rows
    tp_of = np.zeros(n, np.int32)
    tp_of[table_group_starts(g, TP)[1:]] = 1
    numbered = with_columns(g, _replica=pa.array(np.arange(n, dtype=np.int64)))
    # a dump may name no broker or partition: its null is a replica of its own, as group_by makes it
    replica = lookup(seg, REPLICA, numbered, "_replica", nulls_match=True)
    replica_of = np.asarray(replica.to_numpy(zero_copy_only=False))
    logs = R.replica_logs(
        np.cumsum(tp_of, dtype=np.int32),
        replica_of.astype(np.int64),
        filled(seg.column("file_offset"), 0),
        (filled(seg.column("last_offset"), 0), validity(seg.column("last_offset"))),
        (filled(g.column("checkpoint_log_start"), 0), validity(g.column("checkpoint_log_start"))),
        filled(pc.fill_null(g.column("clean_shutdown"), False), False),
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


def _at_least(table: pa.Table, col: str, end: Any) -> Any:
    """``col`` raised to the checkpointed log start (capped by ``end``) where one is known."""
    known = pc.is_valid(table.column("checkpoint_log_start"))
    bound = least(table.column("checkpoint_log_start"), end)
    return pc.if_else(known, greatest(table.column(col), bound), table.column(col))


def partition_stats(stats: pa.Table, roles: pa.Table | None = None, deleted: pa.Table | None = None) -> pa.Table:
    """Replicas merged per partition: the most advanced replica's offsets, the most advanced checkpoints,
    a note where the brokers' checkpoints disagree (each broker writes them every few seconds), and what the
    copy's KRaft metadata log says of the partition (``roles``, ``deleted``: :func:`replica_notes`)."""
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
    g = left_join(g, lead, TP)
    end = g.column("log_end_offset")
    hw = g.column("high_watermark_max")
    merged = pa.table(
        {
            **{k: g.column(k) for k in TP},
            "log_end_offset": end,
            "high_watermark": pc.if_else(pc.is_valid(hw), least(hw, end), pa.nulls(g.num_rows, pa.int64())),
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
    merged = with_columns(merged, log_start_offset=_at_least(merged, "segment_log_start", end))
    notes = [
        "; ".join(n for n in pair if n) or None
        for pair in zip(_checkpoint_notes(stats, g), replica_notes(merged, roles, deleted), strict=True)
    ]
    return with_columns(merged, checkpoint_note=pa.array(notes, pa.string())).drop_columns(
        ["checkpoint_log_start", "segment_log_start"]
    )


def replica_notes(merged: pa.Table, roles: pa.Table | None, deleted: pa.Table | None) -> list[str | None]:
    """Per partition of ``merged`` (its ``replicas`` and ``lead_replica``, the most advanced: ReplicaLogs.is_lead,
    the one rule of which replica's view is reported): where the copy holds several replicas, which one led and
    which were in sync as the copy's KRaft metadata log says (``roles``: txnlog.broker.cluster_image.replica_roles;
    ``PartitionRegistration``'s leader and ISR); and, of a topic it deleted (``deleted``:
    cluster_image.deleted_topics, RemoveTopicRecord), that the broker serves none of these files."""
    n = merged.num_rows
    notes: list[str | None] = [None] * n
    by_tp = {(r["topic"], r["partition"]): r for r in (roles.to_pylist() if roles is not None else ())}
    gone = {r["topic"]: r for r in (deleted.to_pylist() if deleted is not None else ())}
    if not by_tp and not gone:
        return notes
    cols = merged.select([*TP, "replicas", "lead_replica"]).to_pylist()
    for i, m in enumerate(cols):
        texts = []
        d = gone.get(m["topic"])
        if d is not None:
            texts.append(
                f"{d['said_by']} deleted topic {m['topic']} at its offset {d['offset']} (RemoveTopicRecord): the "
                "broker serves none of these files and removes them (renamed *-delete), so nothing here pins a "
                "consumer"
            )
        r = by_tp.get((m["topic"], m["partition"]))
        replicas = m["replicas"] or []
        if r is not None and len(replicas) > 1:
            led = (
                f"{r['leader_replica']} (node {r['leader']}) led, leader epoch {r['leader_epoch']}"
                if r["leader_replica"]
                else ("no replica led (leader -1)" if r["leader"] < 0 else f"node {r['leader']}, not in the copy, led")
            )
            in_sync = [b for b in replicas if b in (r["in_sync_replicas"] or [])]
            out = [b for b in replicas if b not in in_sync]
            text = f"{r['said_by']} says {led}; in sync: {', '.join(in_sync) or 'none of the copy'}"
            if out:
                text += f"; not in sync: {', '.join(out)}"
            if r["leader_replica"] and r["leader_replica"] != m["lead_replica"]:
                text += f"; the state shown is {m['lead_replica']}'s, the most advanced replica in the copy"
            texts.append(text)
        notes[i] = "; ".join(texts) or None
    return notes


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
    on_lead = txns.filter(is_true(txns.column("open_on_lead")))
    started = pc.coalesce(on_lead.column("first_timestamp_ms"), on_lead.column("last_timestamp_ms"))
    on_lead = with_columns(on_lead, _open_ms=pc.subtract(pa.scalar(as_of_ms, pa.int64()), started), _started=started)
    agg = on_lead.group_by(TP, use_threads=False).aggregate([("_open_ms", "max"), ("first_offset", "count")])
    oldest = first_rows(on_lead, TP, [("first_offset", "ascending")])
    oldest = with_columns(
        oldest, oldest_idle_ms=pc.subtract(pa.scalar(as_of_ms, pa.int64()), oldest.column("last_timestamp_ms"))
    )
    with_hw = left_join(
        txns.select([*TP, "first_offset", "marker_offset", "open_on_lead"]),
        pstats,
        TP,
        ["high_watermark", "lead_clean_shutdown"],
    )
    marker = with_hw.column("marker_offset")
    # a clean copy speaks for its broker restarted on it: the snapshot at the log end holds no completed txn
    late_marker = pc.and_(
        is_true(pc.greater_equal(marker, with_hw.column("high_watermark"))),
        pc.invert(is_true(with_hw.column("lead_clean_shutdown"))),
    )
    unstable = with_hw.filter(pc.or_(is_true(with_hw.column("open_on_lead")), late_marker))
    first_unstable = unstable.group_by(TP, use_threads=False).aggregate([("first_offset", "min")])
    health = left_join(pstats, agg, TP)
    health = left_join(health, oldest.select([*TP, "oldest_idle_ms", "_started"]), TP)
    health = left_join(health, first_unstable, TP)
    bound = pc.coalesce(health.column("high_watermark"), health.column("log_end_offset"))
    lso = greatest(least(health.column("first_offset_min"), bound), health.column("log_start_offset"))
    lso = pc.coalesce(lso, bound)
    health = with_columns(
        health,
        last_stable_offset=lso,
        lso_lag=pc.subtract(health.column("log_end_offset"), lso),
        open_transactions=pc.fill_null(health.column("first_offset_count"), 0).cast(pa.int64()),
        max_open_ms=health.column("_open_ms_max"),
        oldest_first_ms=health.column("_started"),
    ).drop_columns(["_open_ms_max", "first_offset_count", "_started", "first_offset_min"])
    carried = ["lso_lag", "log_start_offset", "log_end_offset", "high_watermark", "checkpoint_note", "source"]
    return left_join(txns, health, TP, carried), health


def damage(summary: pa.Table, records: pa.Table) -> classify.Damage:
    """The quarantined regions per data partition (txnlog.rules.damage.ranges) and the damaged
    ``__transaction_state`` partitions, applied to the few candidates by the verdicts."""

    quarantined = of_kind(summary, "quarantine")
    bad = of_kind(records, "quarantine").column("coordinator_partition").drop_null().to_pylist()
    return classify.Damage(
        ranges=rule.ranges(of_kind(summary, "segment"), quarantined), txn_state_partitions=frozenset(bad)
    )


def partition_health(health: pa.Table, thresholds: classify.Thresholds) -> Shaped:
    """The ``partition_health`` table from ``health`` (:func:`with_lso`): per partition, offsets, the LSO and its lag,
    open transactions, whether one is late (txnlog.broker.classify.has_late_transaction)."""
    late = classify.has_late_transaction(health.column("oldest_idle_ms"), thresholds.max_transaction_timeout_ms)
    has_late = pc.fill_null(late, False)
    since = pc.if_else(has_late, _ts(health.column("oldest_first_ms")), pa.scalar(None, contract.TS))
    return health, {
        "has_late_transaction": has_late, "stuck_since": since, "max_timestamp": _ts(health.column("max_timestamp_ms")),
    }  # fmt: skip
