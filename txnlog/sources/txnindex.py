"""The ``.txnindex`` files beside the data partitions' segments, for the integrity audit (txnlog.rules.integrity).

They are small (34 bytes per aborted transaction) and read whole where the job plans its work. Kafka creates a
segment's ``.txnindex`` only when it appends the segment's first aborted transaction (``LogSegment.updateTxnIndex``
-> ``TransactionIndex.append``), so a segment without one is normal unless it holds an ABORT marker; the audit
decides that. A file that cannot be read, a partial entry or an entry Kafka would reject is a quarantine row
(txnlog.kafka.indexes), never a crash.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import pyarrow as pa

from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.indexes import decode_txn_indexes
from txnlog.model.rows import TXN_INDEX_SCHEMA, TXN_SEGMENT_SCHEMA, Checkpoint
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile

__all__ = ["TxnIndexes", "read_txn_indexes"]

_ENTRY_COLUMNS = ("producer_id", "first_offset", "last_offset", "last_stable_offset")


class TxnIndexes:
    """What :func:`read_txn_indexes` found: ``entries`` and ``segments`` (:data:`TXN_INDEX_SCHEMA` /
    :data:`TXN_SEGMENT_SCHEMA`) and ``quarantine`` (with the file's replica and partition)."""

    def __init__(self, entries: pa.Table, segments: pa.Table, quarantine: list[tuple[LogFile, QuarantineEntry]]):
        self.entries, self.segments, self.quarantine = entries, segments, quarantine


def read_txn_indexes(
    segments: Sequence[LogFile], indexes: Sequence[LogFile], checkpoints: Sequence[Checkpoint] = ()
) -> TxnIndexes:
    """Decode every ``.txnindex`` in ``indexes`` and say, for every segment in ``segments``, whether one is beside
    it (the same replica, partition and base offset); ``checkpoints`` give each replica's recovery point."""
    quarantine: list[tuple[LogFile, QuarantineEntry]] = []
    present = set()
    read: list[LogFile] = []
    bufs: list[bytes] = []
    for f in indexes:
        present.add((f.broker, f.topic, f.partition, f.base_offset))
        try:
            bufs.append(storage.read_bytes(f.path))
        except OSError as e:
            quarantine.append((f, QuarantineEntry(f.path, 0, f.size, UNREADABLE_FILE, f"{type(e).__name__}: {e}")))
            continue
        read.append(f)
    decoded = decode_txn_indexes(bufs, [f.path for f in read])
    by_path = {f.path: f for f in read}
    quarantine.extend((by_path[q.file], q) for q in decoded.quarantine)
    position = {f.path: k for k, f in enumerate(indexes)}
    quarantine.sort(key=lambda fq: position[fq[0].path])  # in the files' order, as each was read
    owner = pa.array(decoded.entries["file_index"], pa.int64())
    per_file = {
        "broker": pa.array([f.broker for f in read], pa.string()),
        "topic": pa.array([f.topic for f in read], pa.string()),
        "partition": pa.array([f.partition for f in read], pa.int32()),
        "segment_offset": pa.array([f.base_offset for f in read], pa.int64()),
        "file": pa.array([posixpath.basename(f.path) for f in read], pa.string()),
    }
    cols = {name: values.take(owner) for name, values in per_file.items()}
    cols.update({name: pa.array(decoded.entries[name], pa.int64()) for name in _ENTRY_COLUMNS})
    recovery = {(c.broker, c.topic, int(c.partition)): c.recovery_point for c in checkpoints}
    seg_columns = {
        "broker": [s.broker for s in segments],
        "topic": [s.topic for s in segments],
        "partition": [s.partition for s in segments],
        "base_offset": [s.base_offset for s in segments],
        "has_txnindex": [(s.broker, s.topic, s.partition, s.base_offset) in present for s in segments],
        "recovery_point": [recovery.get((s.broker, s.topic, s.partition)) for s in segments],
    }
    return TxnIndexes(
        pa.table(cols, schema=TXN_INDEX_SCHEMA), pa.table(seg_columns, schema=TXN_SEGMENT_SCHEMA), quarantine
    )
