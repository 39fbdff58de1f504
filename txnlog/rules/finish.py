"""The rows of the two staged tables, finished: ``transactions`` and ``coordinator_history``.

A task that merges a partition's transactions stages every one (txnlog.engine.staging) and hands on only those
:func:`verdict_relevant` keeps. Once the run's ``as_of`` and the coordinator's owners are known, :class:`Finish`
turns staged transaction rows into ``transactions`` rows and :class:`FinishHistory` staged
``__transaction_state`` records into ``coordinator_history`` rows: tables in, tables out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import ControlType, TransactionState
from txnlog.model import contract
from txnlog.model.arrow import lookup
from txnlog.model.contract import Outcome
from txnlog.model.rows import repeated
from txnlog.model.times import timestamps

#: columns of a staged transaction (names of the segments source's schema; the job reads the same ones)
RAW_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "first_offset",
    "replicas",
    "open_replicas",
    "behind_replicas",
    "open_on_lead",
    "diverged",
    "last_offset",
    "producer_epoch",
    "min_epoch",
    "sequence_gap",
    "first_timestamp",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "marker_offset",
    "control_type",
    "marker_epoch",
    "coordinator_epoch",
    "marker_timestamp",
    "prev_marker_offset",
    "prev_marker_type",
    "prev_marker_epoch",
    "prev_coordinator_epoch",
    "snapshot_coordinator_epoch",
    "snapshot_offset",
    "started_before_log_start",
)

#: columns of a staged ``__transaction_state`` record: what a ``coordinator_history`` row takes from it (the
#: record's file, broker and quarantine columns stay behind: the file path alone weighed a third of a row)
HISTORY_COLUMNS = tuple(f.name for f in contract.COORDINATOR_HISTORY if f.name not in ("cluster", "as_of"))


def verdict_relevant(table: pa.Table, bound: np.ndarray) -> np.ndarray:
    """The rows the verdicts and the LSO need: open on some replica or on the lead, or closed by a marker
    at or above ``bound`` (per row: a lower bound of the partition's high watermark, so every completed
    transaction the LSO may still count as unstable is kept; the Spark side applies the exact rule)."""
    open_somewhere = pc.greater(pc.list_value_length(table.column("open_replicas")), 0)
    open_lead = pc.fill_null(table.column("open_on_lead"), False)
    marker = table.column("marker_offset")
    late_marker = pc.fill_null(pc.greater_equal(marker, pa.array(bound)), False)
    keep = pc.or_(pc.or_(pc.fill_null(open_somewhere, False), open_lead), late_marker)
    return np.asarray(keep.to_numpy(zero_copy_only=False), bool)


# ---------------------------------------------------------------------------
# staged rows → the table's rows
# ---------------------------------------------------------------------------


OWNERS_SCHEMA = pa.schema([("producer_id", pa.int64()), ("transactional_id", pa.string())])
SOURCES_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("source", pa.string())])


@dataclass(frozen=True)
class Finish:
    """What turns a staged transaction into a ``transactions`` row besides the run key: ``as_of`` for
    open transactions' durations, producer id → transactional.id, (topic, partition) → input label."""

    as_of_ms: int
    owners: pa.Table  # producer_id int64 (unique), transactional_id string
    sources: pa.Table  # topic string, partition int32, source string
    #: a live run's bounds (txnlog.engine.spark.live_batches.LiveCut.history_bounds): topic, partition, marker_from,
    #: first_from; a transaction is written only when its marker is at or after marker_from (or it has
    #: none) and its first offset at or after first_from
    bounds: pa.Table | None = None

    def __call__(self, raw: pa.Table, cluster: str, as_of: datetime) -> pa.Table:
        return finish(raw, self, cluster, as_of)


@dataclass(frozen=True)
class FinishHistory:
    """Staged ``__transaction_state`` records (``TXN_STATE_SCHEMA``) → ``coordinator_history`` rows."""

    def __call__(self, raw: pa.Table, cluster: str, as_of: datetime) -> pa.Table:

        n = raw.num_rows
        names = {int(s): s.kafka_name for s in TransactionState}
        codes = pc.fill_null(raw.column("state"), -1).to_numpy(zero_copy_only=False)
        state = pa.array([names.get(int(c)) for c in np.unique(codes)], pa.string())
        lookup = pa.array(np.searchsorted(np.unique(codes), codes))
        columns = {
            **_run_key(cluster, as_of, n),
            "record_timestamp": timestamps(raw.column("record_timestamp")),
            "state": state.take(lookup) if n else pa.array([], pa.string()),
            "txn_start_timestamp": timestamps(raw.column("txn_start_timestamp")),
            "last_update_timestamp": timestamps(raw.column("last_update_timestamp")),
        }
        arrays = []
        for field in contract.COORDINATOR_HISTORY:
            value = columns[field.name] if field.name in columns else raw.column(field.name)
            arrays.append(value.cast(field.type))
        return pa.Table.from_arrays(arrays, schema=contract.COORDINATOR_HISTORY)


def _run_key(cluster: str, as_of: datetime, n: int) -> dict[str, pa.Array]:
    """The run key columns of ``n`` rows (one value repeated, not a Python list of ``n`` objects)."""
    return {"cluster": repeated(cluster, pa.string(), n), "as_of": repeated(as_of, pa.timestamp("us", tz="UTC"), n)}


def _duration(end: pa.ChunkedArray | pa.Array, start: pa.ChunkedArray | pa.Array) -> pa.Array:
    """end - start, null where either is unknown or the difference does not fit a long (extreme clocks)."""
    ok = np.asarray(pc.and_(pc.is_valid(end), pc.is_valid(start)).to_numpy(zero_copy_only=False), bool)
    e = pc.fill_null(end, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    s = pc.fill_null(start, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    with np.errstate(over="ignore"):
        d = e - s
    ok &= ((e ^ s) & (e ^ d)) >= 0  # no signed overflow
    return pa.array(np.where(ok, d, 0), pa.int64(), mask=~ok)


def finish(raw: pa.Table, how: Finish, cluster: str, as_of: datetime) -> pa.Table:
    """Staged transaction rows → rows of ``txnlog.model.contract.TRANSACTIONS`` for the run (cluster, as_of)."""
    if how.bounds is not None and how.bounds.num_rows and raw.num_rows:
        raw = raw.filter(_within_bounds(raw, how.bounds))
    n = raw.num_rows
    marker = raw.column("marker_offset")
    control = raw.column("control_type")

    outcome = pc.if_else(
        pc.is_null(marker),
        Outcome.OPEN.value,
        pc.if_else(
            pc.equal(control, int(ControlType.ABORT)),
            Outcome.ABORT.value,
            # a marker whose type the input does not show (kafka-dump-log.sh without --deep-iteration)
            pc.if_else(pc.equal(control, int(ControlType.COMMIT)), Outcome.COMMIT.value, Outcome.UNKNOWN.value),
        ),
    )
    outcome = pc.fill_null(outcome, Outcome.UNKNOWN.value)
    first_ms = pc.coalesce(raw.column("first_timestamp"), raw.column("last_timestamp"))
    end_ms = pc.coalesce(raw.column("marker_timestamp"), pa.scalar(how.as_of_ms, pa.int64()))
    columns = {
        **_run_key(cluster, as_of, n),
        "outcome": outcome,
        "first_timestamp": timestamps(raw.column("first_timestamp")),
        "last_timestamp": timestamps(raw.column("last_timestamp")),
        "marker_timestamp": timestamps(raw.column("marker_timestamp")),
        "duration_ms": _duration(end_ms, first_ms),
        "transactional_id": lookup(raw, ["producer_id"], how.owners, "transactional_id"),
        "source": lookup(raw, ["topic", "partition"], how.sources, "source"),
    }
    arrays = []
    for field in contract.TRANSACTIONS:
        value = columns[field.name] if field.name in columns else raw.column(field.name)
        arrays.append(value.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=contract.TRANSACTIONS)


def _within_bounds(raw: pa.Table, bounds: pa.Table) -> pa.ChunkedArray:
    """Rows of ``raw`` the run writes (see :attr:`Finish.bounds`); partitions without bounds: all."""
    on = ["topic", "partition"]
    marker_from = pc.fill_null(lookup(raw, on, bounds, "marker_from"), -1)
    first_from = pc.fill_null(lookup(raw, on, bounds, "first_from"), -1)
    marker = raw.column("marker_offset")
    new_end = pc.or_(pc.is_null(marker), pc.greater_equal(pc.fill_null(marker, 0), marker_from))
    return pc.and_(new_end, pc.greater_equal(raw.column("first_offset"), first_from))


Finisher = Callable[[pa.Table, str, datetime], pa.Table]
