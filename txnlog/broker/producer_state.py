"""Producer state per partition, as the partition leader holds it: what DescribeProducers answers.

Pure module (numpy): the ``producer_state`` table's rows are rebuilt from batch headers and producer
snapshots exactly as the broker's ``ProducerStateManager`` keeps them (Kafka's storage module):

* a *data* batch of a producer id (``producerId`` ≥ 0: idempotent and transactional producers alike)
  updates the entry with its epoch, its last sequence (``DefaultRecordBatch.lastSequence``:
  ``baseSequence + lastOffsetDelta``, wrapping past ``Integer.MAX_VALUE`` to 0; −1 without a sequence)
  and its ``maxTimestamp`` as the producer's last timestamp (``ProducerAppendInfo.appendDataBatch``,
  ``ProducerStateEntry.addBatch``);
* an ABORT/COMMIT *marker* sets the epoch, the coordinator epoch and the last timestamp (the control
  record's timestamp) and ends the open transaction (``ProducerAppendInfo.appendEndTxnMarker``,
  ``ProducerStateEntry.update``); a control batch with no records changes nothing;
* a change of epoch clears the entry's batch metadata (``ProducerStateEntry.maybeUpdateProducerEpoch``),
  so after a marker with a new epoch (transactions v2 bumps it at every end, KIP-890) the last sequence
  is −1 until the producer's next batch;
* on load the broker starts from the newest usable snapshot of the replica and replays the batches at
  and after its offset (``ProducerStateManager.truncateAndReload``/``loadFromSnapshot``,
  ``UnifiedLog.rebuildProducerState``; see :func:`txnlog.broker.reconstruct.chosen_snapshot_rows`): a producer
  whose batches retention deleted still has the snapshot's state, and one that was already gone from
  that snapshot (expired) comes back only with a batch after it;
* a producer with no open transaction whose ``lastTimestamp + producer.id.expiration.ms`` ≤ now is
  removed (``ProducerStateManager.isProducerExpired``/``removeExpiredProducers``): :func:`expired`.

The broker runs that expiry check every ``producer.id.expiration.check.interval.ms`` (10 min;
``producer.id.expiration.ms`` 1 day), so a producer idle longer than the expiration that wrote again
afterwards restarts from an empty entry (coordinator epoch −1) on a live broker: :func:`leader_producers`
applies it on a running broker's copy where the idle time certainly held a run of the check.

Work is split as for transactions (:mod:`txnlog.broker.reconstruct`): each segment is collapsed, vectorized,
into one row per producer id (:func:`segment_producers`), wherever it is decoded; the rows of every
segment and snapshot of a partition are reduced by :func:`leader_producers`, whose result does not depend
on which task decoded which segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from txnlog.broker import reconstruct as R
from txnlog.broker.reconstruct import Col, col
from txnlog.kafka.wire import DEFAULT_PRODUCER_ID_EXPIRATION_MS

__all__ = ["DEFAULT_PRODUCER_ID_EXPIRATION_MS", "expired", "last_sequences", "leader_producers", "segment_producers"]

NO_SEQUENCE = -1  # RecordBatch.NO_SEQUENCE
NO_COORDINATOR_EPOCH = -1  # ProducerStateEntry.empty: no marker seen
_I32_MAX = np.iinfo(np.int32).max
_I32_MIN = np.iinfo(np.int32).min

#: What one segment says of one producer id: the row's columns and their dtypes. Offsets order the rows
#: of a producer across segments: the newest event wins.
PRODUCER_COLUMNS: dict[str, np.dtype] = {
    "producer_id": np.dtype(np.int64),
    "producer_epoch": np.dtype(np.int32),  # of its last event (data batch or marker)
    "last_offset": np.dtype(np.int64),  # of its last event: a data batch's last offset, a marker's offset
    "last_timestamp": np.dtype(np.int64),  # of its last event: a batch's maxTimestamp, a marker record's time
    "data_offset": np.dtype(np.int64),  # last offset of its last data batch (null: none)
    "data_epoch": np.dtype(np.int32),  # that batch's epoch
    "last_sequence": np.dtype(np.int32),  # that batch's last sequence
    "marker_offset": np.dtype(np.int64),  # its last ABORT/COMMIT marker (null: none)
    "coordinator_epoch": np.dtype(np.int32),  # that marker's coordinator epoch
    # the smallest and largest epoch of its markers after its last data batch (all of them when it has
    # none; null: no such marker): whether an epoch change cleared that batch's sequence
    "after_min_epoch": np.dtype(np.int32),
    "after_max_epoch": np.dtype(np.int32),
    # for the expiry check between its batches (:func:`leader_producers`): the time of its first event, whether
    # a transaction of it is open after its last one, and the longest idle time (ms between two of its
    # events, nothing open after the first) from its last marker on, and from its last data batch on (all of
    # its events where it has none; null: no such two events)
    "first_event_timestamp": np.dtype(np.int64),
    "ends_open": np.dtype(np.bool_),
    "idle_after_marker": np.dtype(np.int64),
    "idle_after_data": np.dtype(np.int64),
}

#: nullable columns of :data:`PRODUCER_COLUMNS`
NULLABLE = ("data_offset", "data_epoch", "last_sequence", "marker_offset", "coordinator_epoch")
NULLABLE_AFTER = ("after_min_epoch", "after_max_epoch", "idle_after_marker", "idle_after_data")


def last_sequences(base_sequence: np.ndarray, last_offset_delta: np.ndarray) -> np.ndarray:
    """``DefaultRecordBatch.lastSequence`` of each batch: −1 when ``baseSequence`` is −1, else
    ``incrementSequence(baseSequence, lastOffsetDelta)`` — past ``Integer.MAX_VALUE`` it wraps to 0 and
    counts on (Java int arithmetic: header fields are untrusted, any value is computed as Kafka would).

    >>> last_sequences(np.array([-1, 0, 2147483646, 5]), np.array([3, 3, 3, 0])).tolist()
    [-1, 3, 1, 5]
    """
    base = np.asarray(base_sequence, np.int64)
    delta = np.asarray(last_offset_delta, np.int64)
    with np.errstate(over="ignore"):
        wrapped = np.where(base > _I32_MAX - delta, base - (_I32_MAX - delta) - 1, base + delta)
    # Java's int arithmetic: modulo 2**32, signed
    out = ((wrapped + 2**31) % 2**32 - 2**31).astype(np.int32)
    return np.where(base == NO_SEQUENCE, np.int32(NO_SEQUENCE), out).astype(np.int32)


def _empty() -> dict[str, Col]:
    return {name: col(np.empty(0, dtype)) for name, dtype in PRODUCER_COLUMNS.items()}


def segment_producers(batches: Mapping[str, np.ndarray]) -> dict[str, Col]:
    """One row per producer id with state in one segment (``txnlog.kafka.record_batch.BATCH_COLUMNS`` of
    its batches, in log order): see :data:`PRODUCER_COLUMNS`. Vectorized: a sort and a few reductions.

    Counted, as ``UnifiedLog`` counts them for producer state: batches with ``producerId`` ≥ 0 that are
    data batches (idempotent or transactional) or ABORT/COMMIT markers that decoded; a control batch of
    no records or of another type is ignored (``ProducerAppendInfo.append``).
    """
    return files_producers(batches, None)[0]


def files_producers(batches: Mapping[str, np.ndarray], owner: np.ndarray | None) -> tuple[dict[str, Col], np.ndarray]:
    """:func:`segment_producers` of several segments at once: ``batches`` their columns one after another,
    ``owner`` (ascending) the segment of each row (None: one segment). Returns the rows, segment after segment
    (each segment's as its own call gives them), and the segment of each."""
    pid_all = np.asarray(batches["producer_id"], np.int64)
    is_control = np.asarray(batches["is_control"], bool)
    is_marker = is_control & (np.asarray(batches["control_status"]) == R.CONTROL_STATUS_END_TXN)
    keep = np.flatnonzero((pid_all >= 0) & (is_marker | ~is_control))
    if keep.size == 0:
        return _empty(), np.empty(0, np.int64)
    base_offset = np.asarray(batches["base_offset"], np.int64)
    if owner is None:
        order = np.lexsort((base_offset[keep], pid_all[keep]))
    else:
        order = np.lexsort((base_offset[keep], pid_all[keep], owner[keep]))
    idx = keep[order]
    pid = pid_all[idx]
    marker = is_marker[idx]
    n = idx.size
    g = R._Groups(R.group_starts(pid) if owner is None else R.group_starts(owner[idx], pid), n)
    pos = np.arange(n)
    last = g.ends
    epoch = np.asarray(batches["producer_epoch"], np.int32)[idx]
    event_offset = np.where(marker, base_offset[idx], np.asarray(batches["last_offset"], np.int64)[idx])
    event_ts = np.where(
        marker, np.asarray(batches["marker_timestamp"], np.int64)[idx], np.asarray(batches["max_timestamp"])[idx]
    )
    last_data = np.maximum.reduceat(np.where(~marker, pos, -1), g.starts)
    last_marker = np.maximum.reduceat(np.where(marker, pos, -1), g.starts)
    has_data, has_marker = last_data >= 0, last_marker >= 0
    d, m = np.maximum(last_data, 0), np.maximum(last_marker, 0)
    seqs = last_sequences(
        np.asarray(batches["base_sequence"], np.int64)[idx], np.asarray(batches["last_offset_delta"], np.int64)[idx]
    )
    after = marker & (pos > last_data[g.of_row])
    after_min = g.min(col(epoch), after)
    after_max = g.max(col(epoch), after)
    coordinator = np.asarray(batches["coordinator_epoch"], np.int32)[idx]
    # a transaction of it is open after an event when its last marker-or-transactional-batch so far is a
    # transactional batch (``currentTxnFirstOffset``); a batch-header without the flag counts as open: no expiry
    transactional = batches.get("is_transactional")
    txn_data = ~marker & (np.asarray(transactional, bool)[idx] if transactional is not None else True)
    relevant = np.maximum.accumulate(np.where(marker | txn_data, pos, -1))
    open_after = (relevant >= g.starts[g.of_row]) & txn_data[np.maximum(relevant, 0)]
    ts64 = event_ts.astype(np.int64)
    follows = np.ones(n, bool)
    follows[g.starts] = False  # each event but a producer's first, after the one before it
    idle_gap = follows & ~np.roll(open_after, 1)
    gap = (np.where(follows, ts64 - np.roll(ts64, 1), 0), idle_gap)
    prev_pos = pos - 1
    of = np.zeros(g.starts.size, np.int64) if owner is None else owner[idx[g.starts]].astype(np.int64)
    return {
        "producer_id": col(pid[g.starts]),
        "producer_epoch": col(epoch[last]),
        "last_offset": col(event_offset[last]),
        "last_timestamp": col(event_ts[last]),
        "data_offset": col(event_offset[d], has_data),
        "data_epoch": col(epoch[d], has_data),
        "last_sequence": col(seqs[d], has_data),
        "marker_offset": col(event_offset[m], has_marker),
        "coordinator_epoch": col(coordinator[m], has_marker),
        "after_min_epoch": after_min,
        "after_max_epoch": after_max,
        "first_event_timestamp": col(ts64[g.starts]),
        "ends_open": col(open_after[last]),
        "idle_after_marker": g.max(gap, prev_pos >= last_marker[g.of_row]),
        "idle_after_data": g.max(gap, prev_pos >= last_data[g.of_row]),
    }, of


#: Columns of a snapshot entry this module reads (``txnlog.kafka.producer_snapshot`` names, as the
#: segments source's rows carry them): the snapshot's offset and the entry's fields.
SNAPSHOT_COLUMNS = (
    "file_offset",
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_timestamp",
    "coordinator_epoch",
)

#: the reduced rows: one per producer id of a partition, on its leader
RESULT_COLUMNS = (
    "replica",
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_timestamp",
    "coordinator_epoch",
    "last_offset",  # of its last event (null: its state is the snapshot's)
    "from_snapshot",  # its state is the snapshot's: no batch of it at or after the snapshot's offset
)


def _last_in_group(
    group: np.ndarray, offset: np.ndarray, rank: np.ndarray, valid: np.ndarray, groups_n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the valid row with the largest (offset, rank), and whether there is one."""
    rows = np.flatnonzero(valid)
    order = rows[np.lexsort((rank[rows], offset[rows], group[rows]))]
    at = np.zeros(groups_n, np.int64)
    found = np.zeros(groups_n, bool)
    if order.size:
        g = group[order]
        last = np.ones(order.size, bool)
        last[:-1] = g[1:] != g[:-1]
        at[g[last]] = order[last]
        found[g[last]] = True
    return at, found


def leader_producers(
    events: Mapping[str, Col], snaps: Mapping[str, Col], replicas: R.ReplicaLogs, *, expiry_gap_ms: int | None = None
) -> dict[str, Col]:
    """The producer state of each partition's leader (:attr:`txnlog.broker.reconstruct.ReplicaLogs.is_lead`, the
    most advanced replica — the one whose offsets ``partition_health`` reports), one row per producer id
    (:data:`RESULT_COLUMNS`), before expiry.

    ``events``: :func:`segment_producers` rows plus ``replica`` (int32 index into ``replicas``); ``snaps``:
    snapshot entries (:data:`SNAPSHOT_COLUMNS` plus ``replica``), of every snapshot file (a row with a null
    ``producer_id``: a snapshot file of no entries). The replica's snapshot is chosen as for transactions
    (:func:`txnlog.broker.reconstruct.chosen_snapshot_rows`); its entries
    stand just before its offset: a segment row counts only when its last event is at or after it, and a
    newer event wins field by field (epoch and last timestamp: the last event; last sequence: the last data
    batch, −1 when a later marker changed the epoch; coordinator epoch: the last marker). Rows are per segment:
    for a producer the snapshot lacks, a segment that holds batches on both sides of the snapshot's offset (a
    snapshot written at the log end on restart, then more appends to that segment) also lends what it held
    before that offset.

    ``expiry_gap_ms`` (``producer.id.expiration.ms`` + ``producer.id.expiration.check.interval.ms``; None: not
    applied): on a running broker's copy, a producer idle that long with nothing open between two of its
    events was removed by the leader's periodic check (``UnifiedLog.producerExpireCheck`` →
    ``ProducerStateManager.removeExpiredProducers``, ``isProducerExpired``) — some run of it fell in the
    idle time at least ``producer.id.expiration.ms`` after the first event — and its next event started from
    ``ProducerStateEntry.empty``: its coordinator epoch is −1 unless a marker follows the last such gap, its
    last sequence −1 unless a data batch does. A shorter gap past ``producer.id.expiration.ms`` depends on when
    the checks ran, which no byte shows: the entry is kept, as a restart keeps it. A clean copy speaks for a
    restart, which replays without expiring (``UnifiedLog.rebuildProducerState``): not applied.
    """
    rows = _stacked(events, snaps, replicas, with_expiry=expiry_gap_ms is not None)
    return _newest_per_producer(rows, replicas, expiry_gap_ms)


@dataclass(frozen=True)
class _Stacked:
    """The leaders' segment rows that count, then their chosen snapshots' entries as rows at (their offset, rank 0),
    in one set of columns (:func:`leader_producers`)."""

    replica: np.ndarray
    pid: np.ndarray
    is_snap: np.ndarray
    rank: np.ndarray
    cols: dict[str, Col]


def _stacked(
    events: Mapping[str, Col], snaps: Mapping[str, Col], replicas: R.ReplicaLogs, *, with_expiry: bool
) -> _Stacked:
    lead = replicas.is_lead
    n_rep = replicas.tp.size
    s_rep, s_off = snaps["replica"][0].astype(np.int64), snaps["file_offset"][0]
    chosen = R.chosen_snapshot_rows(s_rep, s_off, replicas) & lead[s_rep] if s_rep.size else np.zeros(0, bool)
    snap_at = R.snapshot_offsets(s_rep, s_off, chosen, n_rep)
    # a row without a producer id says only that its snapshot file exists: a snapshot of no producer (taken
    # when none was left, all expired, ``ProducerStateManager.takeSnapshot``) is loaded like any other, and
    # the batches before it no longer count
    chosen &= snaps["producer_id"][1]
    # a clean copy speaks for its broker restarted on it, whose rebuild reads from the log start on
    # (UnifiedLog.rebuildProducerState): below a DeleteRecords log start no batch of the copy counts
    read_from = np.where(replicas.clean_shutdown, np.maximum(snap_at, replicas.log_start), snap_at)
    e_rep = events["replica"][0].astype(np.int64)
    e_keep = lead[e_rep] & (events["last_offset"][0] >= read_from[e_rep]) if e_rep.size else np.zeros(0, bool)
    ev = {name: (c[0][e_keep], c[1][e_keep]) for name, c in events.items()}
    sn = {name: (c[0][chosen], c[1][chosen]) for name, c in snaps.items()}
    ne, ns = int(e_keep.sum()), int(chosen.sum())
    is_snap = np.concatenate([np.zeros(ne, bool), np.ones(ns, bool)])
    s_offset = sn["file_offset"][0].astype(np.int64)
    always = np.ones(ns, bool)

    def both(name: str, snap: Col, dtype: type) -> Col:
        return (
            np.concatenate([ev[name][0].astype(dtype), snap[0].astype(dtype)]),
            np.concatenate([ev[name][1], snap[1]]),
        )

    def snap_col(name: str) -> Col:
        return sn[name][0], sn[name][1]

    none = (np.zeros(ns, np.int32), np.zeros(ns, bool))
    cols = {
        "event_off": both("last_offset", (s_offset, always), np.int64),
        "data_off": both("data_offset", (s_offset, always), np.int64),
        "marker_off": both("marker_offset", (s_offset, always), np.int64),
        "epoch": both("producer_epoch", snap_col("producer_epoch"), np.int32),
        "ts": both("last_timestamp", snap_col("last_timestamp"), np.int64),
        "data_epoch": both("data_epoch", snap_col("producer_epoch"), np.int32),
        "seq": both("last_sequence", snap_col("last_sequence"), np.int32),
        "ce": both("coordinator_epoch", snap_col("coordinator_epoch"), np.int32),
        "after_min": both("after_min_epoch", none, np.int32),
        "after_max": both("after_max_epoch", none, np.int32),
    }
    if with_expiry:
        unknown = (np.zeros(ns, np.int64), np.zeros(ns, bool))
        cols |= {
            "first_ts": both("first_event_timestamp", (cols["ts"][0][ne:], always), np.int64),
            # a snapshot entry's transaction: its CurrentTxnFirstOffset (unknown: open, no expiry)
            "ends_open": both("ends_open", _snap_open(snaps, chosen), bool),
            "after_marker": both("idle_after_marker", unknown, np.int64),
            "after_data": both("idle_after_data", unknown, np.int64),
        }
    return _Stacked(
        replica=np.concatenate([ev["replica"][0].astype(np.int64), sn["replica"][0].astype(np.int64)]),
        pid=np.concatenate([ev["producer_id"][0], sn["producer_id"][0]]).astype(np.int64),
        is_snap=is_snap,
        rank=np.where(is_snap, 0, 1),
        cols=cols,
    )


def _newest_per_producer(rows: _Stacked, replicas: R.ReplicaLogs, expiry_gap_ms: int | None) -> dict[str, Col]:
    """:func:`leader_producers`' result from its stacked rows: per (replica, producer id), the newest of each field."""
    c, pid, replica, rank = rows.cols, rows.pid, rows.replica, rows.rank
    event_off, data_off, marker_off = c["event_off"], c["data_off"], c["marker_off"]
    after_min, after_max = c["after_min"], c["after_max"]
    by_key = np.lexsort((pid, replica))
    starts = R.group_starts(replica[by_key], pid[by_key]) if pid.size else np.zeros(0, np.int64)
    ng = starts.size
    group = np.empty(pid.size, np.int64)
    group[by_key] = R._Groups(starts, pid.size).of_row if pid.size else by_key
    keys = (replica[by_key][starts], pid[by_key][starts])
    ev_at, _ = _last_in_group(group, event_off[0], rank, event_off[1], ng)
    d_at, d_found = _last_in_group(group, data_off[0], rank, data_off[1], ng)
    m_at, m_found = _last_in_group(group, marker_off[0], rank, marker_off[1], ng)
    # the last data batch keeps its sequence only if every marker after it has its epoch
    d_off, d_rank, d_epoch = data_off[0][d_at], rank[d_at], c["data_epoch"][0][d_at]
    g_off, g_rank = d_off[group], d_rank[group]
    later = (event_off[0] > g_off) | ((event_off[0] == g_off) & (rank > g_rank))
    counts = (later | (np.arange(group.size) == d_at[group])) & d_found[group]
    lo = np.full(ng, _I32_MAX, np.int64)
    hi = np.full(ng, _I32_MIN, np.int64)
    np.minimum.at(lo, group[counts & after_min[1]], after_min[0][counts & after_min[1]])
    np.maximum.at(hi, group[counts & after_max[1]], after_max[0][counts & after_max[1]])
    kept = d_found & ((lo == _I32_MAX) | (lo == d_epoch)) & ((hi == _I32_MIN) | (hi == d_epoch))
    seq, ce, ts = c["seq"], c["ce"], c["ts"]
    seq_ok = seq[1][d_at]
    from_snapshot = rows.is_snap[ev_at]
    if expiry_gap_ms is not None and pid.size:
        idle = _expired_between(
            group, event_off[0], rank, ng,
            first_ts=c["first_ts"], last_ts=ts, ends_open=c["ends_open"],
            after_marker=c["after_marker"], after_data=c["after_data"],
            marker_at=m_at, data_at=d_at, gap_ms=expiry_gap_ms,
        )  # fmt: skip
        running = ~replicas.clean_shutdown[keys[0]]
        m_found = m_found & ~(idle[0] & running)
        kept = kept & ~(idle[1] & running)
    return {
        "replica": col(keys[0].astype(np.int32)),
        "producer_id": col(keys[1].astype(np.int64)),
        "producer_epoch": col(c["epoch"][0][ev_at]),
        "last_sequence": col(np.where(kept & seq_ok, seq[0][d_at], NO_SEQUENCE).astype(np.int32)),
        "last_timestamp": (ts[0][ev_at], ts[1][ev_at]),
        "coordinator_epoch": col(np.where(m_found & ce[1][m_at], ce[0][m_at], NO_COORDINATOR_EPOCH).astype(np.int32)),
        "last_offset": (event_off[0][ev_at], ~from_snapshot),
        "from_snapshot": col(from_snapshot),
    }


def _snap_open(snaps: Mapping[str, Col], chosen: np.ndarray) -> Col:
    """Whether each chosen snapshot entry has a transaction open (``CurrentTxnFirstOffset`` ≥ 0; unknown: yes)."""
    first = snaps.get("first_offset")
    if first is None:
        return np.ones(int(chosen.sum()), bool), np.ones(int(chosen.sum()), bool)
    values, valid = first[0][chosen], first[1][chosen]
    return ~valid | (values >= 0), np.ones(values.size, bool)


def _expired_between(
    group: np.ndarray,
    offset: np.ndarray,
    rank: np.ndarray,
    ng: int,
    *,
    first_ts: Col,
    last_ts: Col,
    ends_open: Col,
    after_marker: Col,
    after_data: Col,
    marker_at: np.ndarray,
    data_at: np.ndarray,
    gap_ms: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per group (a replica's producer id): whether the expiry check removed it after its last marker, and after
    its last data batch (:func:`leader_producers`). Its rows (a snapshot entry, segments) in log order: a gap
    of at least ``gap_ms`` inside a row after that event, or between a row at or after it and the next one
    (the first with nothing open at its end), counts."""
    order = np.lexsort((rank, offset, group))
    g = group[order]
    same = np.zeros(order.size, bool)
    same[1:] = g[1:] == g[:-1]
    prev = np.roll(order, 1)
    cross = np.zeros(group.size, np.int64)
    cross_ok = np.zeros(group.size, bool)
    ok = same & first_ts[1][order] & last_ts[1][prev] & ends_open[1][prev] & ~ends_open[0][prev]
    cross[order] = np.where(ok, first_ts[0][order] - last_ts[0][prev], 0)
    cross_ok[order] = ok
    # each row's position in its group's log order, and the position of the row holding the event
    position = np.empty(group.size, np.int64)
    position[order] = np.arange(order.size)
    out = []
    for inside, at in ((after_marker, marker_at), (after_data, data_at)):
        after_row = position > position[at][group]
        long_inside = inside[1] & (inside[0] >= gap_ms) & (after_row | (np.arange(group.size) == at[group]))
        long_cross = cross_ok & (cross >= gap_ms) & after_row
        hit = np.zeros(ng, bool)
        np.logical_or.at(hit, group, long_inside | long_cross)
        out.append(hit)
    return out[0], out[1]


def expired(
    last_timestamp: np.ndarray, has_open_transaction: np.ndarray, now_ms: int, expiration_ms: int
) -> np.ndarray:
    """``ProducerStateManager.isProducerExpired``: no transaction in flight and ``now − lastTimestamp ≥
    producer.id.expiration.ms`` (a producer with an open transaction never expires). Compared as
    ``lastTimestamp ≤ now − expiration`` so that no timestamp can overflow.

    >>> expired(np.array([0, 1, 0]), np.array([False, False, True]), 86_400_000, 86_400_000).tolist()
    [True, False, False]
    """
    return ~np.asarray(has_open_transaction, bool) & (np.asarray(last_timestamp, np.int64) <= now_ms - expiration_ms)
