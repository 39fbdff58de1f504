"""``__transaction_state`` records reduced where they are decoded.

The coordinator's records grow with the number of transactions (three per transaction and
producer: Ongoing, Prepare*, Complete*; each lists the transaction's partitions), but what the
verdicts need of them is small: per transactional.id its newest record and its newest *value* record
(``TransactionStateManager.loadTransactionMetadata`` replays a partition in offset order, so the newest
record by (partition, offset) is the state), per producer id the newest record naming it, the newest
broker-written timestamp, which coordinator partitions were read. :func:`reduce_records` keeps exactly
those records (with the id's record count in ``transitions``), after dropping the copies other
replicas hold of the same record; every record still goes to ``coordinator_history``, staged as
an Arrow file by the task (txnlog.engine.staging). A task must hold every replica of the coordinator
partitions it reduces (the source packs them so; other inputs are grouped by partition in Spark).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the count of records of the row's transactional.id (on its newest record; 0 on the other kept rows)
TRANSITIONS = pa.field("transitions", pa.int64())


def _last_per_group(keys: list[np.ndarray], order: list[np.ndarray], mask: np.ndarray) -> np.ndarray:
    """Indexes of the rows with the largest ``order`` per distinct ``keys``, among rows where ``mask``."""
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return rows
    sort = np.lexsort([o[rows] for o in reversed(order)] + [k[rows] for k in reversed(keys)])
    ordered = rows[sort]
    last = np.ones(ordered.size, bool)
    same = np.ones(ordered.size - 1, bool)
    for k in keys:
        same &= k[ordered][1:] == k[ordered][:-1]
    last[:-1] = ~same
    return ordered[last]


def _last_in_row_order(key: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """:func:`_last_per_group` of one key when the rows already stand in the ``order`` asked for: a stable sort
    of the key alone, not a sort of the key and the order."""
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return rows
    ordered = rows[np.argsort(key[rows], kind="stable")]
    k = key[ordered]
    last = np.ones(ordered.size, bool)
    last[:-1] = k[1:] != k[:-1]
    return ordered[last]


def _in_log_order(part: np.ndarray, offset: np.ndarray) -> bool:
    """Whether the rows stand in (partition, offset) order with no record twice: as a segment's window, or a
    partition's reductions in turn, come."""
    if part.size < 2:
        return True
    step = np.diff(part)
    return bool(np.all((step > 0) | ((step == 0) & (np.diff(offset) > 0))))


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Dense integer codes of a (string) column; nulls get -1."""
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def distinct_records(records: pa.Table) -> pa.Table:
    """Rows of kind ``record`` (every replica of some coordinator partitions) → each record once, in
    (partition, offset) order: replicas of a partition hold the same records at the same offsets.

    Which copy of a record is kept is decided by the copies themselves, never by the order the rows come in
    (the order a run meets its files, tasks or replicas in): the least replica name (``broker``), then the least
    segment ``file``, then the copy's other values (one that shows a field before one that does not; what
    tells apart two dumps of one segment by the same replica). The copies of a replica can differ in what they
    show (Kafka 3.x's ``--transaction-log-decoder`` prints no start timestamp, value version or tagged fields,
    4.x's does), so keeping "the first copy met" would make the rows depend on how the input was dealt."""
    if records.num_rows == 0:
        return records
    part = records.column("coordinator_partition").to_numpy(zero_copy_only=False).astype(np.int64)
    offset = records.column("record_offset").to_numpy(zero_copy_only=False).astype(np.int64)
    if _in_log_order(part, offset):
        return records
    keys = _copy_keys(records)
    order = pc.sort_indices(keys, [(k, "ascending", "at_end") for k in keys.column_names]).to_numpy()
    first = np.ones(order.size, bool)
    first[1:] = (part[order][1:] != part[order][:-1]) | (offset[order][1:] != offset[order][:-1])
    return records.take(pa.array(order[first]))


#: the columns that order the copies of a record ahead of the rest of its values (:func:`distinct_records`)
_COPY_ORDER = ("coordinator_partition", "record_offset", "broker", "file")


def _copy_keys(records: pa.Table) -> pa.Table:
    """The sort keys of :func:`distinct_records`: :data:`_COPY_ORDER`, then every other value of the row (a list
    of strings joined), ``k0``, ``k1``, ... in that order."""
    rest = [f.name for f in records.schema if f.name not in _COPY_ORDER and f.name != TRANSITIONS.name]
    columns = []
    for name in [*_COPY_ORDER, *rest]:
        column = records.column(name)
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            column = pc.binary_join(column.cast(pa.list_(pa.string())), "\x00")
        elif pa.types.is_nested(column.type):
            continue
        columns.append(column)
    return pa.table({f"k{i}": c for i, c in enumerate(columns)})


def reduce_records(records: pa.Table) -> pa.Table:
    """Rows of kind ``record`` (every replica of some coordinator partitions) → the rows the verdicts
    need, with a ``transitions`` column (every record, once, is :func:`distinct_records`, which a task
    stages for ``coordinator_history``: txnlog.engine.staging.reduced_staged).

    A reducer: applied to the union of its results over disjoint sets of records, it gives what it gives
    applied to all those records at once. Disjoint: no record is in two sets, so the sets are different
    coordinator partitions, or pieces of one that share no (partition, offset)."""
    if records.num_rows == 0:
        return (
            records
            if TRANSITIONS.name in records.column_names
            else records.append_column(TRANSITIONS, pa.nulls(0, pa.int64()))
        )
    records = distinct_records(records)
    part = records.column("coordinator_partition").to_numpy(zero_copy_only=False).astype(np.int64)
    offset = records.column("record_offset").to_numpy(zero_copy_only=False).astype(np.int64)
    # the rows now stand in (partition, offset) order, each record once
    tid = _codes(records.column("transactional_id"))
    tomb = pc.fill_null(records.column("is_tombstone"), False).to_numpy(zero_copy_only=False).astype(bool)
    pid_valid = pc.is_valid(records.column("producer_id")).to_numpy(zero_copy_only=False).astype(bool)
    pid = pc.fill_null(records.column("producer_id"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ts = pc.fill_null(records.column("record_timestamp"), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
    id_last = _last_in_row_order(tid, tid >= 0)
    kept = np.concatenate(
        [
            id_last,
            _last_in_row_order(tid, (tid >= 0) & ~tomb),  # its newest value
            # history_owners' order: offset, then partition (the row order when there is one partition)
            _last_in_row_order(pid, pid_valid)
            if part[0] == part[-1]
            else _last_per_group([pid], [offset, part], pid_valid),
            np.flatnonzero(np.append(part[1:] != part[:-1], True)),  # which coordinator partitions were read
            np.array([int(np.argmax(ts))]),  # the newest broker-written time
        ]
    )
    kept = np.unique(kept)
    # each record counts once; a row a previous reduction kept carries its id's count (0 on the other kept
    # rows), so reducing the union of partial reductions of disjoint coordinator partitions counts the same
    weight = np.ones(records.num_rows, np.int64)
    if TRANSITIONS.name in records.column_names:
        weight = pc.fill_null(records.column(TRANSITIONS.name), 1).to_numpy(zero_copy_only=False).astype(np.int64)
        records = records.drop_columns([TRANSITIONS.name])
    counts = np.bincount(tid[tid >= 0], weights=weight[tid >= 0], minlength=int(tid.max()) + 1 if tid.size else 0)
    counts = counts.astype(np.int64)
    transitions = np.zeros(records.num_rows, np.int64)
    transitions[id_last] = counts[tid[id_last]]
    out = records.take(pa.array(kept))
    return out.append_column(TRANSITIONS, pa.array(transitions[kept]))
