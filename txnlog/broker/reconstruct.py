"""Transactions of whole partitions, the way a broker's producer state rebuilds them: every replica's
fragments (txnlog.broker.fragments) and producer snapshots merged into one row per transaction and replica
(:func:`replica_transactions`), then across replicas (:func:`merge_replicas`). Pure module: numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from txnlog.broker.fragments import CONTROL_STATUS_END_TXN as CONTROL_STATUS_END_TXN
from txnlog.broker.fragments import FRAGMENT_COLUMNS as FRAGMENT_COLUMNS
from txnlog.broker.fragments import MARKER as MARKER
from txnlog.broker.fragments import RUN as RUN
from txnlog.broker.fragments import SEQUENCE_END_COLUMNS as SEQUENCE_END_COLUMNS
from txnlog.broker.fragments import SNAPSHOT_OPEN as SNAPSHOT_OPEN
from txnlog.broker.fragments import SUMMARY_FRAGMENT_COLUMNS as SUMMARY_FRAGMENT_COLUMNS
from txnlog.broker.fragments import cut_sequence_gaps as cut_sequence_gaps
from txnlog.broker.fragments import empty_fragments as empty_fragments
from txnlog.broker.fragments import files_fragments as files_fragments
from txnlog.broker.fragments import merge_fragments as merge_fragments
from txnlog.broker.fragments import segment_fragments as segment_fragments
from txnlog.model.arrow import filled, group_starts, strictly_increasing, validity

# ---------------------------------------------------------------------------
# Transactions of whole partitions: every replica's fragments → one row per transaction
# ---------------------------------------------------------------------------
#
# The rules, each from the broker class that implements it (README "How txnlog decides"):
#
# * a replica's producer state is its newest producer snapshot at or below its log end plus the
#   batches after it (``ProducerStateManager.truncateAndReload``/``loadFromSnapshot``,
#   ``UnifiedLog.rebuildProducerState``); a cleanly shut-down copy skips the snapshots at or below its
#   log start, which its next load deletes; an entry keeps ``currentTxnFirstOffset`` below the log start;
# * per replica and producer, in offset order, a run opens or extends the open transaction and a
#   marker closes it (``ProducerAppendInfo``); a marker with nothing open closed nothing;
# * replicas are copies of the leader in offset order (``ReplicaFetcherThread``): a copy that ends at
#   or before another replica's marker for a transaction is *behind*, not open; one that holds data past
#   that marker and still lacks it has *diverged*. The most advanced replica (largest log end, ties:
#   the first broker name) is the one whose view the leader reports.
#
# Everything is vectorized over all partitions of a Spark task: a few sorts and ``reduceat``s.

I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max

#: Nullable value columns of a fragment (and of a snapshot entry): values + a validity mask each.
Col = tuple[np.ndarray, np.ndarray]


def col(values: np.ndarray, valid: np.ndarray | None = None) -> Col:
    values = np.asarray(values)
    if valid is None:  # all valid: a read-only view of one shared mask (an allocation per column of every file
        # cost ~4 % of the driver's GIL on a log dir of many small segments)
        return values, (_ALL_VALID[: values.size] if values.size <= _ALL_VALID.size else np.ones(values.size, bool))
    return values, np.asarray(valid, bool)


def arrow_col(table: pa.Table, name: str, dtype: np.dtype) -> Col:
    """``table``'s column ``name`` as a :data:`Col`: its values as ``dtype`` (a null: 0, or False), its validity."""
    column = table.column(name)
    null = False if pa.types.is_boolean(column.type) else 0
    return filled(column, null).astype(dtype, copy=False), validity(column)


_ALL_VALID = np.ones(1 << 16, bool)
_ALL_VALID.flags.writeable = False


@dataclass(frozen=True)
class ReplicaLogs:
    """What the merge needs of each replica ``r`` (replicas ordered by partition, then broker name).

    ``log_start``: the segments' log start raised to the checkpointed one (``log-start-offset-checkpoint``
    after DeleteRecords: ``UnifiedLog.maybeIncrementLogStartOffset``), never past the log end;
    ``is_lead``: the most advanced replica of its partition.
    """

    tp: np.ndarray  # int32: index of the replica's partition
    log_start: np.ndarray  # int64
    log_end: np.ndarray  # int64
    clean_shutdown: np.ndarray  # bool
    has_segments: np.ndarray  # bool: a replica known only from snapshots has no log to merge

    @property
    def is_lead(self) -> np.ndarray:
        n = self.tp.size
        if n == 0:
            return np.zeros(0, bool)
        leo = np.where(self.has_segments, self.log_end, I64_MIN)
        # per partition: the largest log end, ties to the first replica (= first broker name): the last
        # row of each partition when sorted by log end, then by descending index
        order = np.lexsort((-np.arange(n), leo, self.tp))
        last = np.ones(n, bool)
        last[:-1] = self.tp[order][1:] != self.tp[order][:-1]
        lead = np.zeros(n, bool)
        lead[order[last]] = True
        return lead & self.has_segments


def replica_logs(
    tp: np.ndarray,
    segment_replica: np.ndarray,
    segment_base: np.ndarray,
    segment_last: Col,
    checkpoint_log_start: Col,
    clean_shutdown: np.ndarray,
) -> ReplicaLogs:
    """Per replica bounds from its segments (one row per segment: base offset, last offset or null
    when empty) and its log-dir checkpoints (arrays indexed by replica)."""
    n = tp.size
    has = np.zeros(n, bool)
    has[segment_replica] = True
    start = np.full(n, I64_MAX, np.int64)
    np.minimum.at(start, segment_replica, segment_base)
    max_base = np.full(n, I64_MIN, np.int64)
    np.maximum.at(max_base, segment_replica, segment_base)
    last_vals, last_ok = segment_last
    max_last = np.full(n, I64_MIN, np.int64)
    np.maximum.at(max_last, segment_replica[last_ok], last_vals[last_ok])
    any_last = np.zeros(n, bool)
    any_last[segment_replica[last_ok]] = True
    end = np.where(any_last, max_last + 1, max_base)
    ck, ck_ok = checkpoint_log_start
    log_start = np.where(ck_ok, np.maximum(start, np.minimum(ck, end)), start)
    return ReplicaLogs(tp=tp, log_start=log_start, log_end=end, clean_shutdown=clean_shutdown, has_segments=has)


class _Groups:
    """Contiguous groups of sorted rows and the reductions over them, nulls skipped as Spark does."""

    def __init__(self, starts: np.ndarray, n: int):
        self.starts = starts
        self.n = n
        flags = np.zeros(n, np.int64)
        flags[starts] = 1
        self.of_row = np.cumsum(flags) - 1
        self.ends = np.append(starts[1:], n) - 1 if starts.size else np.zeros(0, np.int64)

    def any(self, mask: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(mask, self.starts) if self.n else np.zeros(0, bool)

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.add.reduceat(mask.astype(np.int64), self.starts) if self.n else np.zeros(0, np.int64)

    def max(self, c: Col, mask: np.ndarray | None = None) -> Col:
        ok = c[1] if mask is None else c[1] & mask
        if not self.n:
            return c[0][:0], ok[:0]
        info = np.iinfo(c[0].dtype)
        return np.maximum.reduceat(np.where(ok, c[0], info.min), self.starts), self.any(ok)

    def min(self, c: Col, mask: np.ndarray | None = None) -> Col:
        ok = c[1] if mask is None else c[1] & mask
        if not self.n:
            return c[0][:0], ok[:0]
        info = np.iinfo(c[0].dtype)
        return np.minimum.reduceat(np.where(ok, c[0], info.max), self.starts), self.any(ok)

    def sum(self, c: Col, mask: np.ndarray | None = None) -> Col:
        ok = c[1] if mask is None else c[1] & mask
        if not self.n:
            return c[0][:0].astype(np.int64), ok[:0]
        return np.add.reduceat(np.where(ok, c[0], 0).astype(np.int64), self.starts), self.any(ok)

    def arg_max(self, c: Col, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per group: the row holding the largest value of ``c`` (ties: the last), and whether any row
        qualified (Spark's ``max_by``: rows whose ordering is null are skipped)."""
        best, found = self.max(c, mask)
        ok = c[1] if mask is None else c[1] & mask
        cand = ok & (c[0] == best[self.of_row]) if self.n else ok
        rows = np.where(cand, np.arange(self.n), -1)
        at = np.maximum.reduceat(rows, self.starts) if self.n else rows
        return np.maximum(at, 0), found


def _take(c: Col, rows: np.ndarray, ok: np.ndarray) -> Col:
    return c[0][rows], c[1][rows] & ok


def chosen_snapshot_rows(replica: np.ndarray, offset: np.ndarray, replicas: ReplicaLogs) -> np.ndarray:
    """Which snapshot entries (rows: their replica, their snapshot's offset) belong to the snapshot each
    replica's producer state is loaded from: the newest at or below its log end, skipping those at or below
    its log start after a clean shutdown (``ProducerStateManager.truncateAndReload``, ``loadFromSnapshot``)."""
    eligible = (
        replicas.has_segments[replica]
        & (offset <= replicas.log_end[replica])
        & (~replicas.clean_shutdown[replica] | (offset > replicas.log_start[replica]))
    )
    newest = snapshot_offsets(replica, offset, eligible, replicas.tp.size)
    return eligible & (offset == newest[replica])


def snapshot_offsets(replica: np.ndarray, offset: np.ndarray, chosen: np.ndarray, replicas_n: int) -> np.ndarray:
    """Per replica: the largest ``offset`` among the ``chosen`` rows, ``I64_MIN`` where it has none."""
    newest = np.full(replicas_n, I64_MIN, np.int64)
    np.maximum.at(newest, replica[chosen], offset[chosen])
    return newest


def _snapshot_fragments(snaps: Mapping[str, Col], replicas: ReplicaLogs) -> tuple[dict[str, Col], dict[str, Col]]:
    """(the chosen snapshots' open transactions as SNAPSHOT_OPEN fragments, every chosen entry:
    replica, producer_id, coordinator_epoch, snapshot_offset)."""
    r = snaps["replica"][0]
    offset = snaps["file_offset"][0]
    chosen = np.flatnonzero(chosen_snapshot_rows(r, offset, replicas))
    entries = {
        "replica": col(r[chosen]),
        "producer_id": _take(snaps["producer_id"], chosen, np.ones(chosen.size, bool)),
        "coordinator_epoch": _take(snaps["coordinator_epoch"], chosen, np.ones(chosen.size, bool)),
        "snapshot_offset": col(offset[chosen]),
    }
    first, first_ok = snaps["first_offset"]
    opened = chosen[first_ok[chosen] & (first[chosen] >= 0)]
    every = np.ones(opened.size, bool)
    last = snaps["last_offset"]
    last_off = np.where(last[1][opened], np.maximum(last[0][opened], first[opened]), first[opened])
    epoch = _take(snaps["producer_epoch"], opened, every)
    zero = col(np.zeros(opened.size, np.int64))
    frags = {
        "replica": col(r[opened]),
        "kind": col(np.full(opened.size, SNAPSHOT_OPEN, np.int8)),
        "producer_id": _take(snaps["producer_id"], opened, every),
        "producer_epoch": epoch,
        "min_epoch": epoch,
        "sequence_gap": col(np.full(opened.size, -1, np.int64)),
        **{name: col(np.full(opened.size, -1, np.int32)) for name in SEQUENCE_END_COLUMNS},  # no run's
        "first_offset": col(first[opened]),
        "last_offset": col(last_off),
        "first_timestamp": col(np.zeros(opened.size, np.int64), np.zeros(opened.size, bool)),
        "last_timestamp": _take(snaps["last_timestamp"], opened, every),
        "batch_count": zero,
        "record_count": zero,
        "size_bytes": zero,
        "control_type": col(np.zeros(opened.size, np.int16), np.zeros(opened.size, bool)),
        "coordinator_epoch": col(np.zeros(opened.size, np.int32), np.zeros(opened.size, bool)),
    }
    return frags, entries


#: snapshot entry columns it reads: the snapshot's offset (``file_offset``) and the entry's fields
SNAPSHOT_ENTRY_COLUMNS = (
    "file_offset",
    "producer_id",
    "producer_epoch",
    "first_offset",  # currentTxnFirstOffset, -1: none
    "last_offset",
    "last_timestamp",
    "coordinator_epoch",
)


def _concat(parts: list[Mapping[str, Col]], names: tuple[str, ...]) -> dict[str, Col]:
    parts = [p for p in parts if p[names[0]][0].size] or parts[:1]
    if len(parts) == 1:
        return {n: parts[0][n] for n in names}
    return {n: (np.concatenate([p[n][0] for p in parts]), np.concatenate([p[n][1] for p in parts])) for n in names}


#: fragment columns the merge reduces over a transaction's rows (in offset order); the others are read at
#: one row of it (its first, its last data row, its marker)
_REDUCED = (
    "replica",
    "kind",
    "producer_id",
    "first_offset",
    "last_offset",
    "min_epoch",
    "sequence_gap",
    "batch_count",
    "record_count",
    "size_bytes",
)


def replica_transactions(frags: Mapping[str, Col], snaps: Mapping[str, Col], replicas: ReplicaLogs) -> dict[str, Col]:
    """One row per transaction and replica (the fragments of all its segments, and its snapshot)."""
    opened, entries = _snapshot_fragments(snaps, replicas)
    names = ("replica", *FRAGMENT_COLUMNS)
    unsorted = _concat([frags, opened], names)
    kind = unsorted["kind"][0]
    rank = np.where(kind == MARKER, 2, np.where(kind == SNAPSHOT_OPEN, 1, 0))  # at one offset: data first
    order = np.lexsort((rank, unsorted["first_offset"][0], unsorted["producer_id"][0], unsorted["replica"][0]))
    f = {n: (unsorted[n][0][order], unsorted[n][1][order]) for n in _REDUCED}

    def at(name: str, rows: np.ndarray, ok: np.ndarray) -> Col:
        """Column ``name`` at sorted rows ``rows``, valid where ``ok``."""
        return _take(unsorted[name], order[rows], ok)

    r, pid, kind = f["replica"][0], f["producer_id"][0], f["kind"][0]
    n = r.size
    marker = kind == MARKER
    data = ~marker
    snap = kind == SNAPSHOT_OPEN
    # a transaction = a producer's rows up to and including its next marker
    start = np.zeros(n, bool)
    if n:
        start[group_starts(r, pid)] = True
        start[1:] |= marker[:-1]
    g = _Groups(np.flatnonzero(start), n)
    first = g.starts
    last = g.ends
    has_data = g.any(data)
    has_marker = marker[last] if n else np.zeros(0, bool)
    yes = np.ones(first.size, bool)
    at_last, _ = g.arg_max(f["last_offset"], data)
    t: dict[str, Col] = {
        "replica": col(r[first]),
        "producer_id": col(pid[first]),
        "first_offset": col(f["first_offset"][0][first]),
        # a snapshot entry at the first batch's offset only confirms it (the batch's timestamp wins:
        # data sorts first at one offset); a snapshot entry below every batch leaves it unknown
        "first_timestamp": at("first_timestamp", first, ~snap[first] if n else yes),
        "last_offset": g.max(f["last_offset"], data),
        "last_timestamp": at("last_timestamp", at_last, yes),
        "producer_epoch": at("producer_epoch", at_last, yes),
        "min_epoch": g.min(f["min_epoch"], data),
        "sequence_gap": g.min(f["sequence_gap"], data & (f["sequence_gap"][0] >= 0)),
        "batch_count": g.sum(f["batch_count"], data),
        "record_count": g.sum(f["record_count"], data),
        "size_bytes": g.sum(f["size_bytes"], data),
        "marker_offset": _take(f["first_offset"], last, has_marker),
        "control_type": at("control_type", last, has_marker),
        "marker_epoch": at("producer_epoch", last, has_marker),
        "coordinator_epoch": at("coordinator_epoch", last, has_marker),
        "marker_timestamp": at("last_timestamp", last, has_marker),
    }
    from_snapshot = g.any(snap)
    snap_first = g.min(f["first_offset"], snap)
    _add_previous_markers(t, r[first], pid[first])
    if not has_data.all():  # groups of markers alone: markers with nothing open closed nothing
        keep = np.flatnonzero(has_data)
        t = {name: _take(c, keep, np.ones(keep.size, bool)) for name, c in t.items()}
        from_snapshot, snap_first = from_snapshot[keep], (snap_first[0][keep], snap_first[1][keep])
    # the chosen snapshot's entry for this producer: its coordinator epoch (and offset)
    r_t = t["replica"][0]
    if entries["producer_id"][0].size:
        row, hit = _entry_of(r_t, t["producer_id"][0], entries["replica"][0], entries["producer_id"][0])
        t["snapshot_coordinator_epoch"] = _take(entries["coordinator_epoch"], row, hit)
        # the snapshot is what tells the start of this transaction only when it is the first thing of it
        t["snapshot_offset"] = _take(entries["snapshot_offset"], row, hit & from_snapshot)
    else:
        t["snapshot_coordinator_epoch"], t["snapshot_offset"] = _null(r_t.size, np.int32), _null(r_t.size, np.int64)
    before = from_snapshot & snap_first[1] & (snap_first[0] < replicas.log_start[r_t])
    t["started_before_log_start"] = col(before)
    return t


def _add_previous_markers(t: dict[str, Col], replica: np.ndarray, pid: np.ndarray) -> None:
    """Into ``t``, transactions in (replica, producer) order: the marker that closed the same producer's previous
    transaction on the replica (offset, type, epochs), null for a producer's first."""
    same_producer = np.zeros(replica.size, bool)
    if replica.size:
        same_producer[1:] = (replica[1:] == replica[:-1]) & (pid[1:] == pid[:-1])
    prev = np.maximum(np.arange(replica.size) - 1, 0)
    for name, source in (
        ("prev_marker_offset", "marker_offset"),
        ("prev_marker_type", "control_type"),
        ("prev_marker_epoch", "marker_epoch"),
        ("prev_coordinator_epoch", "coordinator_epoch"),
    ):
        t[name] = _take(t[source], prev, same_producer)


def _entry_of(
    replica: np.ndarray, pid: np.ndarray, entry_replica: np.ndarray, entry_pid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each (replica, producer id): the row of the entry with the same pair (entries hold each pair at
    most once; at least one), and whether there is one; the row is 0 where there is none."""
    ids = np.unique(entry_pid)
    code = np.minimum(np.searchsorted(ids, pid), ids.size - 1)
    known = ids[code] == pid
    width = np.int64(ids.size)
    key = replica.astype(np.int64) * width + code
    entry_key = entry_replica.astype(np.int64) * width + np.searchsorted(ids, entry_pid)
    e_order = np.argsort(entry_key, kind="stable")
    pos = np.minimum(np.searchsorted(entry_key[e_order], key), entry_key.size - 1)
    hit = known & (entry_key[e_order][pos] == key)
    return np.where(hit, e_order[pos], 0), hit


def _null(n: int, dtype: type) -> Col:
    return np.zeros(n, dtype), np.zeros(n, bool)


#: columns of a merged transaction that :func:`merge_replicas` reduces (besides the lists and flags)
_MAX = (
    "last_offset",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "marker_offset",
    "prev_marker_offset",
    "snapshot_coordinator_epoch",
    "snapshot_offset",
)
_AT_MARKER = ("control_type", "marker_epoch", "coordinator_epoch", "marker_timestamp")
_AT_PREV_MARKER = ("prev_marker_type", "prev_marker_epoch", "prev_coordinator_epoch")


def merge_replicas(
    per_replica: Mapping[str, Col], replicas: ReplicaLogs
) -> tuple[dict[str, Col], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """One row per transaction of a partition: (columns, list columns as (offsets, replica indexes)).

    ``open_replicas``: replicas where the transaction counts as open (no marker, and the copy goes past
    any other replica's marker for it, or nobody has one); ``behind_replicas``: replicas that simply
    have not fetched its marker yet; ``diverged``: open somewhere and closed elsewhere;
    ``open_on_lead``: open on the most advanced replica.

    Rows come from :func:`replica_transactions`: sorted by replica, producer and first offset. When no
    two of them are one transaction (no partition has two replicas that hold it), every row is its own
    group: :func:`_one_replica_each` takes them as they are instead of sorting and reducing.
    """
    r = per_replica["replica"][0]
    tp = replicas.tp[r]
    pid = per_replica["producer_id"][0]
    first_offset = per_replica["first_offset"][0]
    if strictly_increasing(tp, pid, first_offset):
        return _one_replica_each(per_replica, replicas)
    order = np.lexsort((r, first_offset, pid, tp))
    t = {name: (v[order], ok[order]) for name, (v, ok) in per_replica.items()}
    r, tp, pid, first_offset = r[order], tp[order], pid[order], first_offset[order]
    n = r.size
    g = _Groups(group_starts(tp, pid, first_offset) if n else np.zeros(0, np.int64), n)
    closing, closing_ok = g.max(t["marker_offset"])
    closed = t["marker_offset"][1]
    counts_open = ~closed & (~closing_ok[g.of_row] | (replicas.log_end[r] > closing[g.of_row]))
    behind = ~closed & ~counts_open
    lead = replicas.is_lead
    out: dict[str, Col] = {
        "tp": col(tp[g.starts]),
        "producer_id": col(pid[g.starts]),
        "first_offset": col(first_offset[g.starts]),
        "open_on_lead": col(g.any(counts_open & lead[r])),
        "diverged": col(g.any(counts_open) & g.any(closed)),
        "min_epoch": g.min(t["min_epoch"]),
        "sequence_gap": g.min(t["sequence_gap"]),
        "first_timestamp": g.min(t["first_timestamp"]),
        "started_before_log_start": col(g.any(t["started_before_log_start"][0])),
    }
    for name in _MAX:
        out[name] = g.max(t[name])
    at, found = g.arg_max(t["last_offset"])
    out["producer_epoch"] = _take(t["producer_epoch"], at, found)
    at, found = g.arg_max(t["marker_offset"])
    for name in _AT_MARKER:
        out[name] = _take(t[name], at, found)
    at, found = g.arg_max(t["prev_marker_offset"])
    for name in _AT_PREV_MARKER:
        out[name] = _take(t[name], at, found)
    lists: dict[str, tuple[np.ndarray, np.ndarray]] = {"replicas": (g.starts, r)}
    for name, mask in (("open_replicas", counts_open), ("behind_replicas", behind)):
        offsets = np.concatenate([[0], np.cumsum(g.count(mask))])[:-1] if n else np.zeros(0, np.int64)
        lists[name] = (offsets, r[mask])
    return out, lists


def _one_replica_each(
    t: Mapping[str, Col], replicas: ReplicaLogs
) -> tuple[dict[str, Col], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """:func:`merge_replicas` of rows that are each a whole transaction (in order): what its reductions
    give over groups of one row. With no other replica, no marker is elsewhere: a transaction without
    one counts as open, none is behind, none diverged."""
    r = t["replica"][0]
    n = r.size
    open_ = ~t["marker_offset"][1]
    out: dict[str, Col] = {
        "tp": col(replicas.tp[r]),
        "producer_id": col(t["producer_id"][0]),
        "first_offset": col(t["first_offset"][0]),
        "open_on_lead": col(open_ & replicas.is_lead[r]),
        "diverged": col(np.zeros(n, bool)),
        "min_epoch": t["min_epoch"],
        "sequence_gap": t["sequence_gap"],
        "first_timestamp": t["first_timestamp"],
        "started_before_log_start": col(t["started_before_log_start"][0]),
    }
    for name in _MAX:
        out[name] = t[name]
    for names, at in (
        (("producer_epoch",), "last_offset"),
        (_AT_MARKER, "marker_offset"),
        (_AT_PREV_MARKER, "prev_marker_offset"),
    ):
        for name in names:
            out[name] = (t[name][0], t[name][1] & t[at][1])
    opened = np.cumsum(open_) - open_
    lists = {
        "replicas": (np.arange(n), r),
        "open_replicas": (opened, r[open_]),
        "behind_replicas": (np.zeros(n, np.int64), r[:0]),
    }
    return out, lists
