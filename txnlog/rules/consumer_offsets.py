"""The committed offsets of one ``__consumer_offsets`` partition, replayed as the group coordinator replays them.

The rule is Kafka's ``OffsetMetadataManager.replay`` and ``OffsetMetadataManager.replayEndTransactionMarker``
(group-coordinator), applied in log order to the partition's decoded OffsetCommit records
(:func:`txnlog.kafka.consumer_offsets.decode_records`) and its COMMIT/ABORT markers:

* a commit from a batch without a producer (``producerId == NO_PRODUCER_ID``) sets the group's offset of the
  topic partition;
* a commit from a producer's batch (``TxnOffsetCommit``) is *pending* for that producer until its marker;
  a later pending commit of the same producer, group and partition replaces it;
* a tombstone removes the committed offset and the pending ones of every open transaction of the group;
* a COMMIT marker moves the producer's pending offsets to the committed ones, each only if its record offset
  is above the committed offset's record offset (so a plain commit written after the transactional one
  wins); an ABORT marker drops them; a marker of a producer with nothing pending does nothing.

Groups are told apart by their bytes as stored. Each partition on its own: a marker ends only the pending
offsets of the partition it is written in, as each coordinator replays its own partition
(:func:`replay_partitions` replays several at once, each key and producer told apart by its partition).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The control types of the COMMIT/ABORT markers (``ControlRecordType``).
_ABORT, _COMMIT = 0, 1
_OFFSET_COMMIT_TYPES = (0, 1)

#: One row per committed offset (``state`` "committed", ``producer_id`` null) and per pending transactional
#: one (``state`` "pending", the producer whose transaction holds it), as of the partition's last record.
OFFSETS_SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("group_bytes", pa.large_binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("state", pa.string()),
        ("producer_id", pa.int64()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
        ("record_offset", pa.int64()),  # the offset of the OffsetCommit record in __consumer_offsets
    ]
)
_VALUE = ("group", "topic", "committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp")

_KEY = ["group_bytes", "topic", "partition"]
_NONE = np.iinfo(np.int64).max  # no marker / no tombstone after a record
_BEFORE = np.iinfo(np.int64).min  # no tombstone of a key
_ONE_INT64 = 2**31  # (group, topic) pairs below this fit a key in one int64 with its partition


def _ranks(column: pa.ChunkedArray) -> np.ndarray:
    """Per row, the rank of its value among the column's distinct values in ascending (bytewise) order."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    rank = np.empty(len(encoded.dictionary), np.int64)
    rank[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(len(rank))
    return rank[encoded.indices.to_numpy(zero_copy_only=False)]


def _key_ids(commits: pa.Table, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A dense id per (part, group bytes, topic, partition) of ``commits`` (``part``: each row's
    ``__consumer_offsets`` partition, numbered from 0), numbered in the keys' ascending order, and per id the index
    of its last row (the highest record offset)."""
    group, topic = _ranks(commits["group_bytes"]), _ranks(commits["topic"])
    group = part * (group.max() + 1) + group
    partition = commits["partition"].to_numpy().astype(np.int64) + 2**31  # from 0, below 2**32
    pair = group * (topic.max() + 1) + topic
    if pair.max() < _ONE_INT64:  # one int64 per key
        composite = (pair << 32) | partition
        order = np.lexsort((commits["offset"].to_numpy(), composite))
        new = np.ones(len(order), bool)
        new[1:] = composite[order][1:] != composite[order][:-1]
    else:
        order = np.lexsort((commits["offset"].to_numpy(), partition, topic, group))
        columns = np.stack([group[order], topic[order], partition[order]])
        new = np.ones(len(order), bool)
        new[1:] = (columns[:, 1:] != columns[:, :-1]).any(axis=0)
    ids = np.empty(len(order), np.int64)
    ids[order] = np.cumsum(new) - 1
    last = np.ones(len(order), bool)
    last[:-1] = new[1:]
    return ids, order[last]


def _next_of(group: np.ndarray, at: np.ndarray, is_event: np.ndarray) -> np.ndarray:
    """Per entry, the index of the first event (``is_event``) of the same ``group`` at or after it in ``at``
    order (events after the others at one offset), -1 for none."""
    order = np.lexsort((is_event, at, group))
    n = len(order)
    where = np.where(is_event[order], np.arange(n), n)
    nxt = np.minimum.accumulate(where[::-1])[::-1]
    found = nxt < n
    same = np.zeros(n, bool)
    same[found] = group[order][nxt[found]] == group[order][found]
    out = np.full(n, -1, np.int64)
    out[order[same]] = order[nxt[same]]
    return out


def _last_per(keys: tuple[np.ndarray, ...], at: np.ndarray) -> np.ndarray:
    """The index of the entry with the highest ``at`` of each distinct ``keys``."""
    order = np.lexsort((at, *reversed(keys)))
    ends = np.zeros(len(order), bool)
    ends[-1:] = True
    for k in keys:
        ends[:-1] |= k[order][1:] != k[order][:-1]
    return order[ends]


def replay_offsets(decoded: pa.Table, markers: pa.Table) -> pa.Table:
    """The committed and pending offsets (:data:`OFFSETS_SCHEMA`) of one ``__consumer_offsets`` partition from
    its decoded records (:data:`txnlog.kafka.consumer_offsets.DECODED_SCHEMA`) and its markers
    (:data:`txnlog.kafka.consumer_offsets_scan.MARKERS_SCHEMA`), sorted by key (:func:`replay_partitions`)."""
    no_part = np.zeros(decoded.num_rows, np.int64)
    return replay_partitions(decoded, markers, no_part, np.zeros(markers.num_rows, np.int64))[0]


def replay_partitions(
    decoded: pa.Table, markers: pa.Table, part: np.ndarray, marker_part: np.ndarray
) -> tuple[pa.Table, np.ndarray]:
    """:func:`replay_offsets` of several ``__consumer_offsets`` partitions at once: ``part`` and ``marker_part``
    number the partition of each decoded record and each marker (from 0). Each partition is replayed on its own
    (a key or a producer of one partition is not another's); the rows come sorted by (part, key), with each
    row's part.

    The replay's outcome, computed for all records at once rather than record by record. A key no producer's
    batch touched has only plain commits and tombstones, each replacing what came before: its last record is
    its committed offset, or none if it is a tombstone (what the log cleaner keeps of it). The keys a producer
    touched are replayed in full (:func:`_replay_touched`)."""
    needed = ["record_type", "offset", "producer_id", "is_tombstone", *_KEY, *(v for v in _VALUE if v not in _KEY)]
    columns = decoded.select(needed)  # the others (a group's members) are not carried through the filter
    is_commit = pc.is_in(columns["record_type"], pa.array(_OFFSET_COMMIT_TYPES, pa.int16()))
    if not pc.all(is_commit).as_py():
        mask = is_commit.to_numpy(zero_copy_only=False)
        columns, part = columns.filter(is_commit), part[mask]
    commits = columns
    if commits.num_rows == 0:
        return OFFSETS_SCHEMA.empty_table(), np.zeros(0, np.int64)
    key, last = _key_ids(commits, part)
    offset = commits["offset"].to_numpy()
    producer = commits["producer_id"].to_numpy()
    tomb = commits["is_tombstone"].to_numpy(zero_copy_only=False)
    touched = np.zeros(len(last), bool)
    touched[key[producer != -1]] = True  # RecordBatch.NO_PRODUCER_ID
    plain = last[~touched]
    plain = plain[~tomb[plain]]
    rows = np.flatnonzero(touched[key])
    committed, pending = _replay_touched(
        key[rows], offset[rows], producer[rows], tomb[rows], part[rows], markers, marker_part
    )
    table, index = _rows(commits, key, np.concatenate([plain, rows[committed]]), rows[pending], producer)
    return table, part[index]


def _producer_ids(part: np.ndarray, producer: np.ndarray) -> np.ndarray:
    """A dense id per (part, producer id): a producer of one partition is not the same producer in another's
    replay."""
    if len(part) == 0 or part.min() == part.max():
        return producer
    return np.unique(np.stack([part, producer], axis=1), axis=0, return_inverse=True)[1].reshape(-1)


def _replay_touched(
    key: np.ndarray,
    offset: np.ndarray,
    producer: np.ndarray,
    tomb: np.ndarray,
    part: np.ndarray,
    markers: pa.Table,
    marker_part: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(the committed, the pending) among commits given by ``key``/``offset``/``producer``/``tomb``:

    * a transactional commit is ended by its producer's first COMMIT/ABORT marker after it (or still open);
      of one producer's commits of one key before one marker only the last counts; a tombstone of the key
      between the commit and its marker (or after it, while open) drops it;
    * the committed offset of a key is, of its plain commits and its transactional commits that a COMMIT
      applied, the one with the highest record offset after the key's last tombstone: a plain commit is newer
      than all before it, and a COMMIT keeps the newer record (what ``replayEndTransactionMarker`` compares).

    ``part``/``marker_part``: each commit's and marker's partition (a marker ends its own partition's only)."""
    if len(key) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    last_tomb = np.full(key.max() + 1, _BEFORE, np.int64)
    np.maximum.at(last_tomb, key[tomb], offset[tomb])
    txn = np.flatnonzero((producer != -1) & ~tomb)  # RecordBatch.NO_PRODUCER_ID
    is_end = pc.is_in(markers["control_type"], pa.array([_ABORT, _COMMIT], pa.int16()))
    ends = markers.filter(is_end)
    m_offset, m_producer = ends["offset"].to_numpy(), ends["producer_id"].to_numpy()
    m_type = ends["control_type"].to_numpy()
    m_part = marker_part[is_end.to_numpy(zero_copy_only=False)]
    # the marker ending each transactional commit (of the commit's producer in the commit's partition)
    nt = len(txn)
    nxt = _next_of(
        _producer_ids(np.concatenate([part[txn], m_part]), np.concatenate([producer[txn], m_producer])),
        np.concatenate([offset[txn], m_offset]),
        np.concatenate([np.zeros(nt, bool), np.ones(len(m_offset), bool)]),
    )[:nt]
    marker = np.where(nxt >= 0, nxt - nt, -1)
    end = np.where(marker >= 0, m_offset[np.maximum(marker, 0)] if len(m_offset) else _NONE, _NONE)
    keep = _last_per((producer[txn], key[txn], marker), offset[txn])
    txn, marker, end = txn[keep], marker[keep], end[keep]
    # a tombstone of the key after the commit and before its end drops it
    tombs = np.flatnonzero(tomb)
    nk = len(txn)
    nxt = _next_of(
        np.concatenate([key[txn], key[tombs]]),
        np.concatenate([offset[txn], offset[tombs]]),
        np.concatenate([np.zeros(nk, bool), np.ones(len(tombs), bool)]),
    )[:nk]
    next_tomb = np.where(nxt >= 0, offset[tombs[np.maximum(nxt - nk, 0)]] if len(tombs) else _NONE, _NONE)
    alive = (next_tomb > end) | (next_tomb == _NONE)
    pending = txn[alive & (marker < 0)]
    applied = txn[alive & (marker >= 0)]
    applied = applied[m_type[marker[alive & (marker >= 0)]] == _COMMIT]
    candidates = np.concatenate([np.flatnonzero((producer == -1) & ~tomb), applied])
    candidates = candidates[offset[candidates] > last_tomb[key[candidates]]]
    return candidates[_last_per((key[candidates],), offset[candidates])], pending


def _rows(
    commits: pa.Table, key: np.ndarray, committed: np.ndarray, pending: np.ndarray, producer: np.ndarray
) -> tuple[pa.Table, np.ndarray]:
    """The output rows of the ``committed`` and ``pending`` commits, by key, the committed one first, then by
    producer (the keys' ids are numbered in their order), and the index in ``commits`` of each."""
    index = np.concatenate([committed, pending]).astype(np.int64)
    is_pending = np.arange(len(index)) >= len(committed)
    order = np.lexsort((producer[index], is_pending, key[index]))
    index, is_pending = index[order], is_pending[order]
    rows = commits.select(["group_bytes", "partition", *_VALUE, "offset"]).take(pa.array(index))
    state = pc.take(pa.array(["committed", "pending"], pa.string()), pa.array(is_pending.astype(np.int8)))
    table = pa.table(
        {
            **{name: rows[name] for name in ("group_bytes", "topic", "partition", *_VALUE)},
            "state": state,
            "producer_id": pa.array(producer[index], pa.int64(), mask=~is_pending),
            "record_offset": rows["offset"],
        }
    )
    return table.select(OFFSETS_SCHEMA.names).cast(OFFSETS_SCHEMA), index
