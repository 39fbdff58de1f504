"""The integrity audit: did read_committed consumers receive what the markers decided? (docs/integrity.md)

A read_committed consumer does not read markers to drop aborted data: it drops a transactional batch only when
its producer is in the fetch response's aborted-transaction list (``CompletedFetch.isBatchAborted``), which the
broker takes from the segments' ``.txnindex`` files (``LocalLog.collectAbortedTransactions`` ->
``LogSegment.collectAbortedTxns`` -> ``TransactionIndex.collectAbortedTxns``). So, per replica:

* an ABORT-ended transaction with no ``.txnindex`` entry (producer id, last offset = its marker's offset) is
  delivered as committed: ``ABORTED_DATA_VISIBLE``;
* an entry that ends at no ABORT marker of its producer hides that producer's committed batches from its first
  offset on (the consumer forgets the producer only at the producer's next ABORT marker,
  ``CompletedFetch``'s ``abortedProducerIds.remove``): ``COMMITTED_DATA_HIDDEN``. The batches up to the entry's
  last offset are hidden whatever the fetches; later ones only when the same fetch holds them, so those rows
  say ``DEPENDS_ON_FETCH`` rather than one number.

The checks against the coordinator's decisions and the producer's own invariants are in
txnlog.rules.integrity_producers (``SPLIT_OUTCOME``, ``EPOCH_REGRESSION``, ``SEQUENCE_GAP``) and
txnlog.rules.integrity_markers (``MARKER_MISSING``).

Pure and vectorized: Arrow tables in (joins and numpy over the transactions of whole partitions), the
``integrity`` table's rows out (txnlog.model.contract.INTEGRITY, without the run key). Only the anomalies found
are formatted row by row (their evidence sentences). :func:`partition_integrity` takes the transactions of any
set of whole partitions, so the engine runs it per partition where the partitions' other work runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model import contract
from txnlog.model.rows import Checkpoint
from txnlog.model.times import timestamps  # epoch ms → UTC timestamps, the tables' rule
from txnlog.rules import integrity_index as index_checks
from txnlog.rules import integrity_markers as markers
from txnlog.rules import integrity_producers as producers
from txnlog.rules.integrity_index import (
    ABORTED_DATA_VISIBLE,
    COMMITTED_DATA_HIDDEN,
    DEPENDS,
    INDEX_NOT_CHECKED,
    WARNING,
)
from txnlog.rules.integrity_producers import Decisions, decisions, decisions_by, joined

__all__ = [
    "ABORTED_DATA_VISIBLE",
    "COMMITTED_DATA_HIDDEN",
    "INDEX_NOT_CHECKED",
    "MS_SCHEMA",
    "compacted_gaps",
    "NOT_YET",
    "TXN_COLUMNS",
    "Decisions",
    "as_rows",
    "audited",
    "index_rows",
    "producer_rows",
    "decisions",
    "decisions_by",
    "integrity",
    "joined",
    "partition_integrity",
    "unserved",
    "with_readers",
    "with_timestamps",
]

#: ``consumers_received`` of an index fault at or above the partition's last stable offset: not fetched yet
NOT_YET = "NOT_YET"

#: the columns of a staged transaction the audit reads (txnlog.rules.finish.RAW_COLUMNS; ``min_epoch`` and
#: ``prev_marker_epoch`` only for ``EPOCH_REGRESSION``, ``sequence_gap`` only for ``SEQUENCE_GAP``, optional)
TXN_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "min_epoch",
    "first_offset",
    "last_offset",
    "marker_offset",
    "control_type",
    "prev_marker_epoch",
    "sequence_gap",
    "replicas",
    "open_replicas",
    "record_count",
    "size_bytes",
    "first_timestamp",
    "last_timestamp",
)

_SCHEMA = pa.schema([f for f in contract.INTEGRITY if f.name not in ("cluster", "as_of")])
#: the rows as the checks give them: times in epoch ms (:func:`with_timestamps` makes them timestamps)
MS_SCHEMA = pa.schema([pa.field(f.name, pa.int64()) if f.type == contract.TS else f for f in _SCHEMA])


def integrity(txns: pa.Table, index: pa.Table, segments: pa.Table, history: pa.Table) -> pa.Table:
    """The ``integrity`` rows: ``txns`` the partitions' transactions (:data:`TXN_COLUMNS`, times in ms),
    ``index`` and ``segments`` as txnlog.model.rows.TXN_INDEX_SCHEMA / TXN_SEGMENT_SCHEMA, ``history`` the
    ``coordinator_history`` rows."""
    return with_timestamps(partition_integrity(txns, index, segments, decisions(history)))


def partition_integrity(txns: pa.Table, index: pa.Table, segments: pa.Table, decided: Decisions) -> pa.Table:
    """The rows (:data:`MS_SCHEMA`) of the partitions whose every transaction ``txns`` holds; ``index`` and
    ``segments`` may hold other partitions' too (unused), ``decided`` is :func:`decisions` of the history.
    ``txns`` may be in many chunks (each merge's, as staged): they are read as they are, not combined."""
    txns = audited(txns)
    rows = index_rows(txns, index, segments, lambda: decided.owners)
    return as_rows(rows + producer_rows(txns, decided))


def audited(txns: pa.Table) -> pa.Table:
    """``txns``' columns of :data:`TXN_COLUMNS` (absent optional ones null) in the staged types: a column already
    in its type is taken as it is (its chunks and buffers), only another is cast. :func:`index_rows` and
    :func:`producer_rows` take ``txns`` so; they are independent of each other (the engine may run them side by
    side, txnlog.engine.integrity), and :func:`partition_integrity` is both, in that order."""
    return _audited(txns)


def index_rows(
    txns: pa.Table, index: pa.Table, segments: pa.Table, owners: Callable[[], pa.Table]
) -> list[dict[str, Any]]:
    """The ``.txnindex`` checks' rows of :func:`partition_integrity` (``txns`` as :func:`audited` gives them);
    ``owners`` gives :class:`Decisions`' ``owners``, asked only to name the producers of the anomalies found."""
    return index_checks.index_rows(txns, index, segments, owners)


def producer_rows(txns: pa.Table, decided: Decisions) -> list[dict[str, Any]]:
    """The checks against the coordinator's decisions and the producer's own invariants of
    :func:`partition_integrity` (``txns`` as :func:`audited` gives them)."""
    owners = decided.owners
    coded = producers.codes(txns, decided) if decided.decided.num_rows and txns.num_rows else None
    rows, shifted = markers.marker_rows(txns, decided, coded)
    rows += producers.coordinator_rows(txns, decided, shifted, coded)
    rows += producers.epoch_rows(txns, owners)
    rows += producers.sequence_rows(txns, owners)
    return rows


def as_rows(rows: list[dict[str, Any]]) -> pa.Table:
    """The checks' rows as a :data:`MS_SCHEMA` table."""
    return pa.Table.from_pylist(rows, schema=MS_SCHEMA)


def compacted_gaps(rows: pa.Table, checkpoints: Sequence[Checkpoint]) -> pa.Table:
    """``rows`` with each ``SEQUENCE_GAP`` of a partition the log cleaner has compacted past the transaction (a
    replica's ``cleaner-offset-checkpoint`` above its first offset) a ``WARNING`` that says so: the cleaner
    removes a batch whose records are all superseded (``LogCleaner``), which leaves a gap no broker refused."""
    cleaned: dict[tuple[str, int], int] = {}
    for c in checkpoints:
        if c.cleaner_offset is not None:
            key = (c.topic, c.partition)
            cleaned[key] = max(cleaned.get(key, c.cleaner_offset), c.cleaner_offset)
    gaps = pc.equal(rows.column("check"), producers.SEQUENCE_GAP)
    if not cleaned or not pc.any(gaps).as_py():
        return rows
    out = []
    for r in rows.to_pylist():
        point = cleaned.get((r["topic"], r["partition"]))
        if r["check"] == producers.SEQUENCE_GAP and point is not None and r["first_offset"] < point:
            r["severity"] = WARNING
            r["evidence"] += f" The log cleaner has compacted this partition up to offset {point}: it may be its doing."
        out.append(r)
    return pa.Table.from_pylist(out, schema=rows.schema)


def unserved(rows: pa.Table, health: pa.Table) -> pa.Table:
    """``rows`` with each index fault (``ABORTED_DATA_VISIBLE``, ``COMMITTED_DATA_HIDDEN``) of a transaction that
    ends at or above its partition's last stable offset (``health``: partition_health's topic, partition,
    last_stable_offset, as the leader computes it) a ``WARNING``: its consumers received nothing yet (``NOT_YET``)
    where it starts there too, else only its batches wholly below the LSO (``DEPENDS_ON_FETCH``).

    A read_committed fetch stops at the LSO (``UnifiedLog.read`` with ``FetchIsolation.TXN_COMMITTED``), which is
    at most the high watermark and at most the first offset of a transaction still open or whose marker is not yet
    below the high watermark (``ProducerStateManager.firstUnstableOffset``): no consumer has been served such a
    transaction's batches, but the broker will serve them with the ``.txnindex`` as it is once the LSO passes them."""
    index_checks = pc.is_in(rows.column("check"), value_set=pa.array([ABORTED_DATA_VISIBLE, COMMITTED_DATA_HIDDEN]))
    if not rows.num_rows or not pc.any(index_checks).as_py() or not health.num_rows:
        return rows
    lso = {
        (r["topic"], r["partition"]): r["last_stable_offset"]
        for r in health.select(["topic", "partition", "last_stable_offset"]).to_pylist()
        if r["last_stable_offset"] is not None
    }
    out = []
    for r in rows.to_pylist():
        stable = lso.get((r["topic"], r["partition"]))
        index_check = r["check"] in (ABORTED_DATA_VISIBLE, COMMITTED_DATA_HIDDEN)
        if index_check and stable is not None and r["last_offset"] >= stable:
            whole = r["first_offset"] >= stable
            r["severity"], r["consumers_received"] = WARNING, NOT_YET if whole else DEPENDS
            r["evidence"] += (
                f" Not served yet: the transaction starts at or above the partition's last stable offset {stable}, "
                "where read_committed fetches stop (UnifiedLog.read); the broker serves it so once the LSO passes it."
                if whole
                else f" Partly served: the partition's last stable offset {stable} falls inside the transaction, and "
                "a fetch returns only the batches wholly below it (UnifiedLog.read): those were served so, the rest "
                "will be once the LSO passes them."
            )
        out.append(r)
    return pa.Table.from_pylist(out, schema=rows.schema)


def with_readers(rows: pa.Table, groups: pa.Array) -> pa.Table:
    """``rows`` with the evidence of each served index fault (``ABORTED_DATA_VISIBLE``, ``COMMITTED_DATA_HIDDEN``;
    not ``NOT_YET``) naming ``groups``' entry for it (txnlog.rules.blocked.groups_past: the consumer groups whose
    committed offset on the partition is past the transaction's first offset, so they consumed its range; null
    where the input holds no ``__consumer_offsets``). ``__consumer_offsets`` does not record a group's isolation
    level: a read_uncommitted group receives every batch whatever the index, so the evidence says "if"."""
    if not rows.num_rows or groups.null_count == len(groups):
        return rows
    out = []
    for r, named in zip(rows.to_pylist(), groups.to_pylist(), strict=True):
        served = r["check"] in (ABORTED_DATA_VISIBLE, COMMITTED_DATA_HIDDEN) and r["consumers_received"] != NOT_YET
        if served and named is not None:
            what = (
                "aborted records as committed"
                if r["check"] == ABORTED_DATA_VISIBLE
                else "without its committed records"
            )
            r["evidence"] += (
                f" Consumer groups that read it (committed offsets on this partition past {r['first_offset']}): "
                + (", ".join(named) if named else "none")
                + (f"; those reading read_committed from this replica consumed it {what}." if named else ".")
            )
        out.append(r)
    return pa.Table.from_pylist(out, schema=rows.schema)


def with_timestamps(rows: pa.Table) -> pa.Table:
    """:data:`MS_SCHEMA` rows with their times as UTC timestamps: the ``integrity`` table's rows."""
    for name in ("from_time", "to_time"):
        i = rows.schema.get_field_index(name)
        rows = rows.set_column(i, name, timestamps(rows.column(name)))
    return rows.cast(_SCHEMA)


_TYPES = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "producer_epoch": pa.int32(),
    "min_epoch": pa.int32(),
    "prev_marker_epoch": pa.int32(),
    "control_type": pa.int32(),
    "replicas": pa.list_(pa.string()),
    "open_replicas": pa.list_(pa.string()),
}


def _audited(txns: pa.Table) -> pa.Table:
    """``txns``' columns of :data:`TXN_COLUMNS` (absent optional ones null) in the staged types: a column already
    in its type is taken as it is (its chunks and buffers), only another is cast."""
    n = txns.num_rows
    arrays = []
    for name in TXN_COLUMNS:
        kind = _TYPES.get(name, pa.int64())
        column = txns.column(name) if name in txns.column_names else pa.chunked_array([pa.nulls(n, kind)])
        arrays.append(column if column.type == kind else pc.cast(column, kind))
    return pa.Table.from_arrays(arrays, names=list(TXN_COLUMNS))
