"""The output tables, built from the decoded rows with pyarrow and numpy: one function per rule.

Every input size runs this code. A small input (``driver_max_bytes``, txnlog.engine.spark.placement) is decoded in
this process; a large one in Spark's tasks, where the partitions decoded in pieces are merged and the
coordinator partitions reduced by the same functions, and the rest (a few rows per segment, producer and
open transaction) is collected here (txnlog.engine.spark.collect). Each function below names the Kafka classes
its rule follows. The run key (``cluster``, ``as_of``) is set by the Delta writer (txnlog.output.delta), and the
columns and their order come from the contract (txnlog.model.contract).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import as_of as as_of_rule
from txnlog.broker import classify
from txnlog.model.arrow import (
    is_true,
    left_join,
    of_kind,
    project,
)
from txnlog.model.contract import InputSource
from txnlog.rules import finish as staged
from txnlog.rules.coordinator_tables import (
    coordinator_history,
    coordinator_state,
    coordinator_state_table,
    owners_by_producer,
)
from txnlog.rules.partitions import damage, partition_health, partition_stats, replica_stats, with_lso
from txnlog.rules.producers import KINDS as PRODUCER_KINDS
from txnlog.rules.producers import SUMMARY_COLUMNS as PRODUCER_SUMMARY_COLUMNS
from txnlog.rules.producers import producer_state, producers_of_summary
from txnlog.rules.transactions import KIND_TRANSACTION, checkpoints_of
from txnlog.rules.verdicts import (
    Intermediates,
    abort_recommendations,
    candidates,
    classified,
    findings,
    stuck,
)

if TYPE_CHECKING:
    from txnlog.model.rows import Checkpoint

TP = ["topic", "partition"]


# --- the run's intermediates and tables ---------------------------------------------------------------------


def partition_transactions(summary: pa.Table) -> pa.Table:
    """One row per transaction of a partition, replicas merged (txnlog.broker.reconstruct; by the decode's
    tasks, or by the engine from fragments: txnlog.engine.staging.merged_here), times in ms."""

    done = of_kind(summary, KIND_TRANSACTION)
    ms = {"first_timestamp", "last_timestamp", "marker_timestamp"}
    return done.select(list(staged.RAW_COLUMNS)).rename_columns(
        [f"{c}_ms" if c in ms else c for c in staged.RAW_COLUMNS]
    )


def intermediates(
    summary: pa.Table,
    records: pa.Table,
    *,
    as_of_ms: int,
    checkpoints: Sequence[Checkpoint],
    expiry_gap_ms: int | None = None,
    metadata: tuple[pa.Table, pa.Table] | None = None,
) -> Intermediates:
    """The run's :class:`Intermediates`: partition stats, transactions with their LSO lag and owners, health,
    the coordinator's state and owners, the leaders' producer state (``expiry_gap_ms``:
    txnlog.rules.producers.producers_of_summary); ``metadata``: the copy's KRaft metadata log's replica roles and
    deleted topics (txnlog.rules.partitions.replica_notes)."""

    txns = partition_transactions(summary)
    pstats = partition_stats(replica_stats(summary, checkpoints), *(metadata or ()))
    txns, health = with_lso(txns, pstats, as_of_ms)
    history = coordinator_history(records)
    state = coordinator_state(history)
    owners, ids = owners_by_producer(state, history)
    txns = left_join(txns, owners, ["producer_id"])
    rows = of_kind(summary, *PRODUCER_KINDS).select(list(PRODUCER_SUMMARY_COLUMNS))
    rows = rows.filter(pc.and_(pc.is_valid(rows.column("topic")), pc.is_valid(rows.column("partition"))))
    producers = producers_of_summary(rows, checkpoints_of(checkpoints), expiry_gap_ms=expiry_gap_ms)
    partitions = frozenset(
        f"{t}-{p}"
        for t, p in zip(pstats.column("topic").to_pylist(), pstats.column("partition").to_pylist(), strict=True)
    )
    return Intermediates(txns, health, partitions, state, ids, producers)


def quarantine(summary: pa.Table, records: pa.Table, as_of: datetime | None, as_of_source: str) -> pa.Table:
    """Unreadable regions by file and position, and warning rows for client clocks far past ``as_of``
    (txnlog.broker.as_of: kept as read, never "now")."""

    data = of_kind(summary, "quarantine")
    coordinator = of_kind(records, "quarantine")
    parts = [
        project(data, "quarantine", replica=data.column("broker")),
        project(
            coordinator,
            "quarantine",
            topic="__transaction_state",
            partition=coordinator.column("coordinator_partition"),
            replica=coordinator.column("broker"),
        ),  # fmt: skip
    ]
    if as_of is not None:
        as_of_ms = as_of_rule.to_ms(as_of)
        late = of_kind(summary, "segment")
        late = late.filter(is_true(pc.greater(late.column("last_timestamp"), as_of_ms + as_of_rule.FUTURE_BOUND_MS)))
        stamp = as_of.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        details = [
            as_of_rule.FUTURE_DETAIL % (newest, newest - as_of_ms, stamp, as_of_source)
            for newest in late.column("last_timestamp").to_pylist()
        ]
        n = late.num_rows
        parts.append(
            project(
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


def build(
    summary: pa.Table,
    records: pa.Table,
    thresholds: classify.Thresholds,
    *,
    checkpoints: Sequence[Checkpoint] = (),
    as_of: datetime | None = None,
    as_of_source: str = "",
    history_bounds: pa.Table | None = None,
    metadata: tuple[pa.Table, pa.Table] | None = None,
) -> dict[str, Any]:
    """Every output table (``pipeline.build_tables``) from the decoded rows as the engine hands them over
    (fragments merged into transactions, coordinator records reduced: txnlog.engine.staging.merged_here): Arrow
    tables, and for ``transactions`` and ``coordinator_history`` (their rows staged by the engine) what finishes
    their staged rows (``txnlog.rules.finish.Finish``, ``FinishHistory``). ``metadata``: what the copy's KRaft
    metadata log says of its partitions (:func:`intermediates`)."""
    # one chunk each: the readers hand on a batch per task or window, and every filter and join below pays per
    # chunk and column (benchmarks/RESULTS.md §2, "Fewer CPU-seconds per GiB")
    summary, records = _with_input(summary).combine_chunks(), _with_input(records).combine_chunks()
    it = intermediates(
        summary, records, as_of_ms=thresholds.as_of_ms, checkpoints=checkpoints,
        expiry_gap_ms=thresholds.producer_id_expiration_ms + thresholds.producer_id_expiration_check_interval_ms,
        metadata=metadata,
    )  # fmt: skip
    verdicts = classified(candidates(it, thresholds), thresholds, damage(summary, records))
    sources = it.health.select([*TP, "source"]).cast(staged.SOURCES_SCHEMA)
    finish = staged.Finish(as_of_ms=thresholds.as_of_ms, owners=it.owner_ids, sources=sources, bounds=history_bounds)
    shaped = {
        "partition_health": partition_health(it.health, thresholds),
        "producer_state": producer_state(it.txns, it.producers, it.health, thresholds),
        "coordinator_state": coordinator_state_table(it.state),
    }
    return {
        "transactions": finish,
        "findings": findings(verdicts, stuck(it, thresholds), thresholds.as_of_ms),
        "abort_recommendations": abort_recommendations(
            verdicts, thresholds.bootstrap_servers or classify.BOOTSTRAP_PLACEHOLDER, it
        ),
        # each in the contract's columns, the derived ones as the rule made them, the rest from its rows
        **{name: project(rows, name, **derived) for name, (rows, derived) in shaped.items()},
        "coordinator_history": staged.FinishHistory(),
        "quarantine": quarantine(summary, records, as_of, as_of_source),
    }


def _with_input(table: pa.Table) -> pa.Table:
    """``table`` with its ``input`` column (a source's own output has none: segments)."""
    if "input" in table.column_names:
        return table
    return table.append_column("input", pa.repeat(pa.scalar(InputSource.SEGMENTS.value, pa.string()), table.num_rows))
