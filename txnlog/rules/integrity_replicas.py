"""The integrity audit's look at the replicas of whole partitions' transactions (txnlog.rules.integrity): which
partitions' replicas the input holds no segment files of, and which transactions an index entry's producer and
partition name, over the staged columns as they are (the list columns' offsets and values, integer keys), no
row taken whole."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model.arrow import distinct, per_run, runs

__all__ = ["copied_brokers", "copied_rows", "ended", "producer_keys", "unchecked"]

_REPLICA = ["broker", "topic", "partition"]


def _flat(lists: pa.ChunkedArray) -> tuple[np.ndarray, pa.ChunkedArray]:
    """The row of each value of the list column ``lists`` and the values, chunk by chunk as the column is (each
    chunk's values are a slice of its buffers; only the row numbers are made)."""
    rows, values, start = [], [], 0
    for chunk in lists.chunks:
        rows.append(np.asarray(pc.list_parent_indices(chunk).to_numpy(), np.int64) + start)
        values.append(pc.list_flatten(chunk))
        start += len(chunk)
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64)), pa.chunked_array(values, pa.string())


def copied_rows(txns: pa.Table, seg: pa.Table) -> np.ndarray:
    """Whether each transaction's topic and partition are among ``seg``'s (each column compared alone, as
    txnlog.model.arrow.key_codes does; a null is not): a lookup per run of rows of one partition."""
    topics, partitions = (distinct(seg.column(c)) for c in _REPLICA[1:])
    starts, values = runs(txns, _REPLICA[1:])
    found = np.array([t in topics and p in partitions for t, p in values], bool)
    return per_run(starts, txns.num_rows, found)


def copied_brokers(brokers: pa.ChunkedArray | pa.Array, seg: pa.Table) -> np.ndarray:
    """Whether each of ``brokers`` is among ``seg``'s (a null is not)."""
    return _found(brokers, pc.unique(seg.column("broker")).drop_null())


def unchecked(txns: pa.Table, ended: np.ndarray, seg: pa.Table, row_ok: np.ndarray) -> list[tuple[str, int]]:
    """The partitions (sorted) where a replica holding an ended transaction's marker (in ``replicas``, not in
    ``open_replicas``) has no segment files in the input: its broker, topic or partition is not among ``seg``'s
    (as txnlog.model.arrow.key_codes compares them, a column at a time; ``row_ok``: :func:`copied_rows`). Each
    broker is looked up in ``seg``'s few values, over the flattened replica lists; only the pairs found missing
    are named."""
    rows, brokers = _flat(txns.column("replicas"))
    missing = np.flatnonzero(ended[rows] & ~(copied_brokers(brokers, seg) & row_ok[rows]))
    if not missing.size:
        return []
    pairs = pa.table({"row": rows[missing], "broker": brokers.take(pa.array(missing))})
    open_rows, open_brokers = _flat(txns.column("open_replicas"))
    if open_rows.size:  # a replica where the transaction is still open does not hold its marker
        opens = pa.table({"row": open_rows, "broker": open_brokers})
        pairs = pairs.join(opens, ["row", "broker"], join_type="left anti")
    named = txns.select(["topic", "partition"]).take(pairs.column("row"))
    found = named.filter(pc.and_(pc.is_valid(named.column("topic")), pc.is_valid(named.column("partition"))))
    return sorted({(t, int(p)) for t, p in zip(*(found.column(c).to_pylist() for c in ("topic", "partition")))})


def producer_keys(table: pa.Table) -> pa.Array:
    """An integer per row of ``table`` from its producer id and partition, equal where both are (a pair's key may
    be another pair's too: a filter on it keeps too much, never too little)."""
    pid = np.asarray(pc.fill_null(table.column("producer_id"), -1).to_numpy(), np.int64)
    part = np.asarray(pc.fill_null(table.column("partition"), -1).to_numpy(), np.int64)
    with np.errstate(over="ignore"):
        return pa.array(pid * 1_000_003 + part)


def _found(values: pa.ChunkedArray, among: pa.Array) -> np.ndarray:
    """Whether each of ``values`` is among ``among`` (a null is not)."""
    return np.asarray(pc.fill_null(pc.is_in(values, value_set=among), False).to_numpy(), bool)


def ended(txns: pa.Table) -> np.ndarray:
    """Whether each transaction of ``txns`` ended with a marker (its offset and type known)."""
    ended = pc.and_(pc.is_valid(txns.column("marker_offset")), pc.is_valid(txns.column("control_type")))
    return np.asarray(ended.to_numpy(), bool)
