"""One segment's transactional batches collapsed into *fragments*, the way a broker's producer state reads them.

The rules (``ProducerAppendInfo``; docs/formats.md §6, §8.2):

* the first *transactional data* batch of a producer id with nothing open opens
  a transaction at that batch's base offset;
* any ABORT/COMMIT control batch of that producer id closes it, whatever its
  epoch (TV2 markers carry epoch + 1, fences larger ones);
* control batches with zero records, or of other control types, are ignored
  (the broker ignores them: the transaction was cleaned away);
* non-transactional batches never open or close anything.

Work is split so that the heavy part runs where the bytes are: each segment is
collapsed, vectorized, into fragments — one ``RUN`` per maximal sequence of a
producer's data batches between two of its markers, and one ``MARKER`` per end
marker; txnlog.broker.reconstruct merges them into transactions.
:func:`merge_fragments` is the step-by-step reference the tests hold that merge
against. Pure module: numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

RUN = 0
MARKER = 1
#: Marker-like pseudo fragment: an open transaction known only from a producer snapshot.
SNAPSHOT_OPEN = 2

CONTROL_STATUS_END_TXN = 1  # txnlog.kafka.record_batch: an ABORT/COMMIT marker that decoded

FRAGMENT_COLUMNS: dict[str, np.dtype] = {
    "kind": np.dtype(np.int8),
    "producer_id": np.dtype(np.int64),
    "producer_epoch": np.dtype(np.int32),  # epoch of the run's last batch, or the marker's
    "first_offset": np.dtype(np.int64),  # run: first batch base offset; marker: its offset
    "last_offset": np.dtype(np.int64),  # run: last offset of its last batch; marker: its offset
    "first_timestamp": np.dtype(np.int64),  # run: base timestamp of its first batch
    "last_timestamp": np.dtype(np.int64),  # run: max timestamp of its last batch; marker: record ts
    "batch_count": np.dtype(np.int64),
    "record_count": np.dtype(np.int64),
    "size_bytes": np.dtype(np.int64),
    "control_type": np.dtype(np.int16),  # marker: 0 ABORT / 1 COMMIT; run: -1
    "coordinator_epoch": np.dtype(np.int32),  # marker only, else -1
    "min_epoch": np.dtype(np.int32),  # run: smallest epoch among its batches
    # run: base offset of its first batch whose base sequence does not follow the previous batch's last sequence
    # at the same epoch (ProducerAppendInfo.checkSequence's test); -1: none, or a marker
    "sequence_gap": np.dtype(np.int64),
    # run: its first batch's epoch and base sequence, its last batch's last sequence (its epoch: producer_epoch);
    # -1: none, or a marker. What the test above needs at a run's ends, where a split segment's pieces cut it
    # (:func:`cut_sequence_gaps`)
    "first_epoch": np.dtype(np.int32),
    "first_sequence": np.dtype(np.int32),
    "last_sequence": np.dtype(np.int32),
}
#: the run's sequences at its ends, of the columns above
SEQUENCE_END_COLUMNS = ("first_epoch", "first_sequence", "last_sequence")


#: Fragment columns the segment and kafka-dump-log.sh readers copy as they are into their summary rows
#: (``kind`` and ``control_type`` are converted on the way).
SUMMARY_FRAGMENT_COLUMNS = (
    "producer_id",
    "producer_epoch",
    "min_epoch",
    "first_offset",
    "last_offset",
    "first_timestamp",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "coordinator_epoch",
    "sequence_gap",
    "first_epoch",
    "first_sequence",
    "last_sequence",
)


def empty_fragments() -> dict[str, np.ndarray]:
    return {name: np.empty(0, dtype) for name, dtype in FRAGMENT_COLUMNS.items()}


def segment_fragments(batches: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Collapse one segment's batch headers into RUN and MARKER fragments.

    ``batches`` holds the columns of ``txnlog.kafka.record_batch.BATCH_COLUMNS``
    for one segment in log order. Vectorized: a sort and a few reductions.
    """
    return files_fragments(batches, None)[0]


def _marker_fragments(
    batches: Mapping[str, np.ndarray], m_idx: np.ndarray, epochs: np.ndarray
) -> dict[str, np.ndarray]:
    """The fragments of the marker batches at ``m_idx``: one each, its offset and marker time on both ends."""
    return {
        "kind": np.full(m_idx.size, MARKER, np.int8),
        "producer_id": batches["producer_id"][m_idx],
        "producer_epoch": epochs[m_idx],
        "first_offset": batches["base_offset"][m_idx],
        "last_offset": batches["base_offset"][m_idx],
        "first_timestamp": batches["marker_timestamp"][m_idx],
        "last_timestamp": batches["marker_timestamp"][m_idx],
        "batch_count": np.ones(m_idx.size, np.int64),
        "record_count": batches["record_count"][m_idx].astype(np.int64),
        "size_bytes": batches["batch_length"][m_idx].astype(np.int64) + 12,
        "control_type": batches["control_type"][m_idx].astype(np.int16),
        "coordinator_epoch": batches["coordinator_epoch"][m_idx].astype(np.int32),
        "min_epoch": epochs[m_idx],
        "sequence_gap": np.full(m_idx.size, -1, np.int64),
        **{name: np.full(m_idx.size, -1, np.int32) for name in SEQUENCE_END_COLUMNS},
    }


def files_fragments(
    batches: Mapping[str, np.ndarray], owner: np.ndarray | None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """:func:`segment_fragments` of several segments at once: ``batches`` their columns one after another,
    ``owner`` (ascending) the segment of each row (None: one segment). Returns the fragments, each segment's
    in the order its own call would give them, segment after segment, and the segment of each."""
    is_control = batches["is_control"]
    transactional = batches["is_transactional"] & (batches["producer_id"] >= 0)
    is_marker = is_control & (batches["control_status"] == CONTROL_STATUS_END_TXN)
    keep = np.flatnonzero(transactional & (is_marker | ~is_control))
    if keep.size == 0:
        return empty_fragments(), np.empty(0, np.int64)
    pid = batches["producer_id"][keep]
    if owner is None:
        order = np.lexsort((batches["base_offset"][keep], pid))
    else:
        order = np.lexsort((batches["base_offset"][keep], pid, owner[keep]))
    idx = keep[order]
    pid = pid[order]
    marker = is_marker[idx]

    # A run starts at a data batch whose predecessor (same producer and segment) is a marker or absent.
    new_pid = np.ones(idx.size, dtype=bool)
    new_pid[1:] = pid[1:] != pid[:-1]
    if owner is not None:
        of = owner[idx]
        new_pid[1:] |= of[1:] != of[:-1]
    prev_marker = np.ones(idx.size, dtype=bool)
    prev_marker[1:] = marker[:-1]
    run_start = ~marker & (new_pid | prev_marker)
    # Runs end where the next item is a marker, another producer, or the end.
    next_breaks = np.ones(idx.size, dtype=bool)
    next_breaks[:-1] = new_pid[1:] | marker[1:]
    run_end = ~marker & next_breaks

    starts = np.flatnonzero(run_start)
    ends = np.flatnonzero(run_end)
    data_pos = np.flatnonzero(~marker)
    # reduceat over the data items only: map run starts to positions in data_pos
    start_in_data = np.searchsorted(data_pos, starts)
    data_idx = idx[~marker]

    def reduce_sum(col: np.ndarray) -> np.ndarray:
        return np.add.reduceat(col[data_idx].astype(np.int64), start_in_data) if starts.size else np.empty(0, np.int64)

    epochs = batches["producer_epoch"].astype(np.int32)
    run_cols = {
        "kind": np.full(starts.size, RUN, np.int8),
        "producer_id": pid[starts],
        "producer_epoch": epochs[idx[ends]],
        "first_offset": batches["base_offset"][idx[starts]],
        "last_offset": batches["last_offset"][idx[ends]],
        # a cleaned batch stores its delete horizon in base_timestamp (attributes bit 6, docs/formats.md §2)
        "first_timestamp": np.where(
            batches["has_delete_horizon"][idx[starts]],
            batches["max_timestamp"][idx[starts]],
            batches["base_timestamp"][idx[starts]],
        ),
        "last_timestamp": batches["max_timestamp"][idx[ends]],
        "batch_count": (ends - starts + 1).astype(np.int64),
        "record_count": reduce_sum(batches["record_count"]),
        "size_bytes": reduce_sum(batches["batch_length"]) + 12 * (ends - starts + 1),
        "control_type": np.full(starts.size, -1, np.int16),
        "coordinator_epoch": np.full(starts.size, -1, np.int32),
        "min_epoch": (np.minimum.reduceat(epochs[data_idx], start_in_data) if starts.size else np.empty(0, np.int32)),
        **_sequence_ends(batches, idx[starts], idx[ends]),
        "sequence_gap": _sequence_gaps(batches, data_idx, start_in_data),
    }
    m_idx = idx[marker]
    marker_cols = _marker_fragments(batches, m_idx, epochs)
    out = {}
    for name, dtype in FRAGMENT_COLUMNS.items():
        out[name] = np.concatenate([run_cols[name], marker_cols[name]]).astype(dtype, copy=False)
    if owner is None:
        return out, np.zeros(out["kind"].size, np.int64)
    of = np.concatenate([owner[idx[starts]], owner[m_idx]]).astype(np.int64, copy=False)
    by_owner = np.argsort(of, kind="stable")  # each segment's runs, then its markers
    return {name: values[by_owner] for name, values in out.items()}, of[by_owner]


#: sequences wrap at Integer.MAX_VALUE (``DefaultRecordBatch.incrementSequence``)
SEQUENCE_MODULUS = 1 << 31


def last_sequences(batches: Mapping[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The last sequence of the batches at ``rows`` (base sequence + last offset delta, wrapped), -1 where they
    have no sequence."""
    seq = batches["base_sequence"][rows].astype(np.int64)
    last = (seq + batches["last_offset"][rows] - batches["base_offset"][rows]) % SEQUENCE_MODULUS
    return np.where(seq < 0, -1, last)


def in_sequence(prev_epoch: np.ndarray, prev_last: np.ndarray, epoch: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Whether a producer's batch (``epoch``, ``base`` sequence) follows its previous batch (``prev_epoch``, its
    last sequence ``prev_last``): the next sequence at the same epoch, after Integer.MAX_VALUE 0
    (``ProducerAppendInfo.checkSequence``/``inSequence``); another epoch, or a batch without sequences (-1),
    breaks nothing. The one rule of ``sequence_gap``, inside a run and where pieces cut one."""
    base = np.asarray(base, np.int64)
    prev_last = np.asarray(prev_last, np.int64)
    return (epoch != prev_epoch) | (base < 0) | (prev_last < 0) | (base == (prev_last + 1) % SEQUENCE_MODULUS)


def _sequence_ends(batches: Mapping[str, np.ndarray], first: np.ndarray, last: np.ndarray) -> dict[str, np.ndarray]:
    """Per run (rows of its ``first`` and ``last`` batch): ``first_epoch``, ``first_sequence``, ``last_sequence``."""
    if "base_sequence" not in batches:
        return {name: np.full(first.size, -1, np.int32) for name in SEQUENCE_END_COLUMNS}
    return {
        "first_epoch": batches["producer_epoch"][first].astype(np.int32),
        "first_sequence": batches["base_sequence"][first].astype(np.int32),
        "last_sequence": last_sequences(batches, last).astype(np.int32),
    }


def _sequence_gaps(batches: Mapping[str, np.ndarray], data_idx: np.ndarray, start_in_data: np.ndarray) -> np.ndarray:
    """Per run (its data batches ``data_idx``, starting at ``start_in_data``): the base offset of its first batch
    not :func:`in_sequence` after the previous one, or -1. A batch without sequences (-1, or headers without the
    column) breaks nothing."""
    if "base_sequence" not in batches:
        return np.full(start_in_data.size, -1, np.int64)
    if not data_idx.size:
        return np.empty(0, np.int64)
    epoch = batches["producer_epoch"][data_idx]
    last = last_sequences(batches, data_idx)
    follows = np.ones(data_idx.size, bool)  # in order (or the run's first batch)
    follows[1:] = in_sequence(epoch[:-1], last[:-1], epoch[1:], batches["base_sequence"][data_idx][1:])
    follows[start_in_data] = True
    at = np.where(follows, np.iinfo(np.int64).max, batches["base_offset"][data_idx].astype(np.int64))
    first = np.minimum.reduceat(at, start_in_data)
    return np.where(first == np.iinfo(np.int64).max, -1, first)


def cut_sequence_gaps(frags: Mapping[str, np.ndarray], file: np.ndarray) -> np.ndarray:
    """``sequence_gap`` of fragments of one replica with the gaps where a split segment's pieces cut a run
    (txnlog.sources.splits): ``file`` says which segment each fragment is of (equal values: one file's pieces;
    -1: a fragment of no split file). Of one producer and file, two runs with no marker between them (in offset
    order) are one run of the whole file, cut at a piece's edge: the later one's first batch is checked
    against the earlier one's last by :func:`in_sequence`, as a whole read checks every batch of a run
    (``_sequence_gaps``); a run that does not follow gets its first offset as its gap. Runs of different
    segments are not checked, as a whole read does not."""
    gap = np.asarray(frags["sequence_gap"], np.int64).copy()
    n = gap.size
    if n < 2:
        return gap
    order = np.lexsort((frags["first_offset"], frags["producer_id"], file))
    run = frags["kind"][order] == RUN
    f, pid = file[order], frags["producer_id"][order]
    cut = run[1:] & run[:-1] & (f[1:] == f[:-1]) & (f[1:] >= 0) & (pid[1:] == pid[:-1])
    if not cut.any():
        return gap
    prev, cur = order[:-1][cut], order[1:][cut]
    last_epoch, first_epoch = frags["producer_epoch"][prev], frags["first_epoch"][cur]
    broken = ~in_sequence(last_epoch, frags["last_sequence"][prev], first_epoch, frags["first_sequence"][cur])
    at = cur[broken]
    gap[at] = frags["first_offset"][at]  # a gap inside the run is at a later batch
    return gap


def merge_fragments(fragments: Mapping[str, np.ndarray]) -> list[dict[str, int | None]]:
    """Reference merge of one replica's fragments into transactions, one fragment at a time (the tests'
    oracle for the vectorized :func:`replica_transactions`). Returns one
    dict per transaction: producer_id, first_offset, last_offset, marker_offset
    (None if open), control_type (None if open), batch_count, ...
    """
    order = np.lexsort((fragments["first_offset"], fragments["producer_id"]))
    open_txn: dict[int, dict[str, int | None]] = {}
    done: list[dict[str, int | None]] = []
    for i in order:
        pid = int(fragments["producer_id"][i])
        kind = int(fragments["kind"][i])
        if kind in (RUN, SNAPSHOT_OPEN):
            cur = open_txn.get(pid)
            if cur is None:
                open_txn[pid] = {
                    "producer_id": pid,
                    "producer_epoch": int(fragments["producer_epoch"][i]),
                    "first_offset": int(fragments["first_offset"][i]),
                    "last_offset": int(fragments["last_offset"][i]),
                    "first_timestamp": int(fragments["first_timestamp"][i]),
                    "last_timestamp": int(fragments["last_timestamp"][i]),
                    "batch_count": int(fragments["batch_count"][i]),
                    "record_count": int(fragments["record_count"][i]),
                    "marker_offset": None,
                    "control_type": None,
                }
            else:
                cur["producer_epoch"] = int(fragments["producer_epoch"][i])
                cur["last_offset"] = int(fragments["last_offset"][i])
                cur["last_timestamp"] = int(fragments["last_timestamp"][i])
                cur["batch_count"] = int(cur["batch_count"] or 0) + int(fragments["batch_count"][i])
                cur["record_count"] = int(cur["record_count"] or 0) + int(fragments["record_count"][i])
        else:
            cur = open_txn.pop(pid, None)
            if cur is not None:  # a marker with nothing open is ignored, as the broker does
                cur["marker_offset"] = int(fragments["first_offset"][i])
                cur["control_type"] = int(fragments["control_type"][i])
                done.append(cur)
    done.extend(open_txn.values())
    return sorted(done, key=lambda t: (t["first_offset"], t["producer_id"]))
