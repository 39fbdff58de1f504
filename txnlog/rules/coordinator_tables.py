"""The coordinator's tables from its reduced ``__transaction_state`` records (txnlog.rules.coordinator): its
history, each transactional.id's state, and which transactional.id owns a producer id
(``TransactionStateManager``, ``TransactionMetadata``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import classify
from txnlog.kafka.wire import TransactionState
from txnlog.model.arrow import (
    Shaped,
    first_rows,
    is_true,
    left_join,
    of_kind,
    with_columns,
)
from txnlog.model.times import timestamps as _ts  # epoch ms → UTC timestamps, the tables' rule
from txnlog.rules import finish as staged

if TYPE_CHECKING:
    pass

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
    recs = first_rows(of_kind(records, "record"), ["coordinator_partition", "record_offset"], [])
    names = [_STATE_NAMES.get(s) if s is not None else None for s in recs.column("state").to_pylist()]
    return with_columns(recs, state_name=pa.array(names, pa.string()))


def _newest(table: pa.Table, key: str) -> pa.Table:
    """The newest row per ``key`` by (coordinator partition, offset): the order the coordinator loads them."""
    return first_rows(table, [key], [("coordinator_partition", "descending"), ("record_offset", "descending")])


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
    values = _newest(history.filter(pc.invert(is_true(history.column("is_tombstone")))), tid)
    transitions = history.column("transitions") if "transitions" in history.column_names else None
    counted = with_columns(history.select([tid]), _n=pc.fill_null(transitions, 1) if transitions is not None else 1)
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
    state = left_join(state, values.select([tid, *STATE_COLUMNS]), [tid])
    state = left_join(state, totals, [tid])
    live_name = pc.if_else(
        is_true(state.column("is_tombstoned")), pa.scalar(None, pa.string()), state.column("state_name")
    )
    return with_columns(state, state=live_name, transitions=state.column("_n_sum").cast(pa.int64())).drop_columns(
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
    live = is_true(live)
    parts = []
    for rows, pid_column, rank, match in (
        (state.filter(live), "producer_id", 0, classify.Owner.CURRENT),
        (state.filter(live), "next_producer_id", 1, classify.Owner.NEXT),
        (state.filter(pc.invert(live)), "producer_id", 2, classify.Owner.EXPIRED),
    ):
        if rank == 1:
            rows = rows.filter(is_true(pc.greater_equal(rows.column(pid_column), 0)))
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
    owners = first_rows(
        owners,
        ["pid"],
        [("_rank", "ascending"), ("owner_record_offset", "descending"), ("owner_coordinator_partition", "ascending")],
    )
    return owners.drop_columns(["_rank", "owner_record_offset"])


def history_owners(history: pa.Table) -> pa.Table:
    """producer_id → the transactional.id of the newest record naming it, by (offset, partition): for evidence."""
    named = history.filter(pc.is_valid(history.column("producer_id")))
    newest = first_rows(
        named, ["producer_id"], [("record_offset", "descending"), ("coordinator_partition", "descending")]
    )
    return pa.table(
        {"pid": newest.column("producer_id"), "history_transactional_id": newest.column("transactional_id")}
    )


def owners_by_producer(state: pa.Table, history: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Per producer id (``producer_id``) that a record names: the transactional.id of the newest record naming it
    (``history_transactional_id``, :func:`history_owners`) and its owner's columns (:func:`producer_owners`), null
    where it has none: what the transactions take in one join; and producer_id → transactional.id for the
    ``transactions`` table: the owner, else the history's name."""
    owners, seen_under = producer_owners(state), history_owners(history)
    pids = pc.unique(
        pa.concat_arrays([owners.column("pid").combine_chunks(), seen_under.column("pid").combine_chunks()])
    )
    ids = left_join(left_join(pa.table({"pid": pids.drop_null()}), seen_under, ["pid"]), owners, ["pid"])
    tid = pc.coalesce(ids.column("transactional_id"), ids.column("history_transactional_id"))
    named = pa.table({"producer_id": ids.column("pid"), "transactional_id": tid})
    named = named.filter(pc.is_valid(tid)).cast(staged.OWNERS_SCHEMA)
    return ids.rename_columns(["producer_id", *ids.column_names[1:]]), named


def coordinator_state_table(state: pa.Table) -> Shaped:
    """The ``coordinator_state`` table: per transactional.id, the coordinator's ``state`` as it loads it
    (:func:`coordinator_state`)."""
    return state, {
        "txn_start_timestamp": _ts(state.column("txn_start_timestamp")),
        "last_update_timestamp": _ts(state.column("last_update_timestamp")),
    }
