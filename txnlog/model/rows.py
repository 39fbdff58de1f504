"""The rows the decoders hand to the rules: the kinds and Arrow schemas of what a read yields.

``SEGMENT_SUMMARY_SCHEMA``: what the segments source (txnlog.engine.spark.sources) yields per data segment and
producer snapshot, and the rows the partitions' merges add (``KIND_*``); ``TXN_STATE_SCHEMA``: one
``__transaction_state`` record decoded (txnlog.engine.spark.txn_state_source). kafka-dump-log.sh output
(txnlog.engine.spark.dump_log) and a live read (txnlog.engine.spark.live_batches, txnlog.engine.spark.live_source) give
the same rows. :func:`batch_of` builds a batch of a schema, :func:`producer_rows` a segment's ``producer`` rows,
:func:`broker_timestamps` a ``segment`` row's broker-written times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

#: kinds of rows the segments source yields
KIND_RUN = "run"
KIND_MARKER = "marker"
KIND_SEGMENT = "segment"
KIND_QUARANTINE = "quarantine"
KIND_SNAPSHOT = "snapshot"
#: what one segment (or, with ``snapshot_offset`` set, one producer snapshot entry) says of a producer id's
#: state: txnlog.broker.producer_state.segment_producers, reduced per partition by txnlog.rules.producers
KIND_PRODUCER = "producer"
#: a piece of a split segment (txnlog.sources.splits): the ``segment`` columns of its batches, and the piece its
#: walk handed over to; txnlog.engine.spark.stitch.stitch_pieces turns a file's pieces into its segment row
KIND_PIECE = "piece"

SEGMENT_SUMMARY_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file", pa.string()),
        ("file_offset", pa.int64()),  # segment base offset or snapshot offset (from the name)
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("min_epoch", pa.int32()),
        # run rows: the first out-of-sequence batch's offset, -1 none; transaction rows: null none
        # (txnlog.broker.reconstruct.FRAGMENT_COLUMNS)
        ("sequence_gap", pa.int64()),
        # run rows: its first batch's epoch and base sequence (its last batch's last sequence: last_sequence
        # below); -1 none (txnlog.broker.reconstruct.FRAGMENT_COLUMNS)
        ("first_epoch", pa.int32()),
        ("first_sequence", pa.int32()),
        # quarantine rows of a data segment: the first and last offset the region may hold, from the valid
        # batches either side of it in the file (null: none on that side; txnlog.rules.damage)
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("first_timestamp", pa.int64()),  # ms
        ("last_timestamp", pa.int64()),  # ms
        ("batch_count", pa.int64()),
        ("record_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("control_type", pa.int32()),
        ("coordinator_epoch", pa.int32()),
        ("legacy_entries", pa.int64()),
        ("position", pa.int64()),
        ("length", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        # segment rows: the newest time a broker's clock wrote (see broker_timestamps), ms; null: none
        ("marker_timestamp", pa.int64()),  # max over the marker (control) batches
        ("log_append_timestamp", pa.int64()),  # max over the LogAppendTime batches
        # transaction rows (kind "transaction", txnlog.rules.transactions): one per transaction of a
        # partition, replicas merged; marker_timestamp above is then its marker's timestamp
        ("replicas", pa.list_(pa.string())),
        ("open_replicas", pa.list_(pa.string())),
        ("behind_replicas", pa.list_(pa.string())),
        ("open_on_lead", pa.bool_()),
        ("diverged", pa.bool_()),
        ("started_before_log_start", pa.bool_()),
        ("marker_offset", pa.int64()),
        ("marker_epoch", pa.int32()),
        ("prev_marker_offset", pa.int64()),
        ("prev_marker_type", pa.int32()),
        ("prev_marker_epoch", pa.int32()),
        ("prev_coordinator_epoch", pa.int32()),
        ("snapshot_coordinator_epoch", pa.int32()),
        ("snapshot_offset", pa.int64()),
        # producer rows (kind "producer", txnlog.broker.producer_state.PRODUCER_COLUMNS; producer_epoch, last_offset,
        # last_timestamp, marker_offset and coordinator_epoch above are its last event's and last marker's)
        # and snapshot rows (last_sequence: the entry's LastSequence; run rows: its last batch's last sequence)
        ("last_sequence", pa.int32()),
        ("data_offset", pa.int64()),
        ("data_epoch", pa.int32()),
        ("after_min_epoch", pa.int32()),
        ("after_max_epoch", pa.int32()),
        ("first_event_timestamp", pa.int64()),
        ("ends_open", pa.bool_()),
        ("idle_after_marker", pa.int64()),
        ("idle_after_data", pa.int64()),
        # rows of a split segment's piece (txnlog.sources.splits): which piece (0: from byte 0; k: from split point
        # k - 1), and on ``piece`` rows the piece its walk stopped at (pieces + 1: the end; null: the piece
        # did not start, its split point failed the checks)
        ("piece", pa.int32()),
        ("next_piece", pa.int32()),
    ]
)


TXN_STATE_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # record / quarantine
        ("broker", pa.string()),
        ("coordinator_partition", pa.int32()),
        ("file", pa.string()),
        ("record_offset", pa.int64()),
        ("record_timestamp", pa.int64()),  # ms
        ("coordinator_epoch", pa.int32()),  # leader epoch of the __transaction_state partition (batch header)
        ("transactional_id", pa.string()),
        ("is_tombstone", pa.bool_()),
        ("key_version", pa.int32()),
        ("value_version", pa.int32()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("timeout_ms", pa.int64()),
        ("state", pa.int32()),
        ("partitions", pa.list_(pa.string())),
        ("last_update_timestamp", pa.int64()),  # ms
        ("txn_start_timestamp", pa.int64()),  # ms; -1 after InitProducerId
        ("previous_producer_id", pa.int64()),
        ("next_producer_id", pa.int64()),
        ("next_producer_epoch", pa.int32()),
        ("client_transaction_version", pa.int32()),
        ("position", pa.int64()),
        ("length", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One broker's checkpointed offsets of one partition (None where its file lacks the partition)."""

    broker: str
    topic: str
    partition: int
    high_watermark: int | None = None
    log_start_offset: int | None = None
    recovery_point: int | None = None
    clean_shutdown: bool = False
    #: the log cleaner's ``cleaner-offset-checkpoint``: the partition's log is compacted below it (LogCleanerManager)
    cleaner_offset: int | None = None


def batch_of(schema: pa.Schema, n: int, columns: dict[str, Any]) -> pa.RecordBatch:
    """A RecordBatch of ``schema``: given columns (arrays or scalars), the rest null."""
    _, names, types, null_columns = _layout(schema)
    arrays = []
    for name, type, null in zip(names, types, null_columns, strict=True):
        value = columns.get(name)
        if value is None:
            arrays.append(null.slice(0, n) if n <= _NULLS_KEPT else pa.nulls(n, type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value if value.type == type else value.cast(type))
        elif isinstance(value, np.ndarray):
            array = pa.array(value)
            arrays.append(array if array.type == type else array.cast(type))
        else:
            arrays.append(repeated(value, type, n))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: rows of the all-null columns kept per schema for :func:`batch_of`
_NULLS_KEPT = 1 << 12
#: per schema (by identity; the schema is kept so its id is not reused): its names, types and all-null columns.
#: A reader builds a batch of a few dozen columns per file, most of them null; looking each field up and
#: allocating its nulls per batch cost half as much again (benchmarks/RESULTS.md §2, "Fewer CPU-seconds per GiB").
#: Arrow arrays are immutable, so the batches share the null columns' buffers (zero-copy slices).
_LAYOUTS: dict[int, tuple[pa.Schema, list[str], list[pa.DataType], list[pa.Array]]] = {}


def _layout(schema: pa.Schema) -> tuple[pa.Schema, list[str], list[pa.DataType], list[pa.Array]]:
    entry = _LAYOUTS.get(id(schema))
    if entry is None or entry[0] is not schema:
        types = list(schema.types)
        entry = _LAYOUTS[id(schema)] = (schema, list(schema.names), types, [pa.nulls(_NULLS_KEPT, t) for t in types])
    return entry


def fragment_kinds(kind: np.ndarray) -> pa.Array:
    """The ``kind`` column of a segment's fragments (txnlog.broker.reconstruct.segment_fragments: 1 a marker, else a run
    of a producer's batches)."""
    codes = pa.array(np.asarray(kind == 1, np.int8))
    return pa.DictionaryArray.from_arrays(codes, pa.array([KIND_RUN, KIND_MARKER])).cast(pa.string())


def repeated(value: Any, type: pa.DataType, n: int) -> pa.Array:
    """``value`` ``n`` times, as an Arrow array of ``type``. A string's rows are laid out directly (offsets and
    the value's bytes repeated): a list of n Python strings, or ``pa.repeat``, holds the GIL many times longer."""
    large = pa.types.is_large_string(type)
    if value is not None and (pa.types.is_string(type) or large):
        data = str(value).encode()
        if large or len(data) * n < 2**31:  # what int32 offsets can address; else Arrow says it cannot
            offsets = np.arange(n + 1, dtype=np.int64 if large else np.int32) * len(data)
            return pa.Array.from_buffers(type, n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])
    return pa.repeat(pa.scalar(value, type=type), n)


def broker_timestamps(batches: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """The newest broker-written timestamps of a segment's batch columns, for its ``segment`` row.

    A client stamps CreateTime with its own clock (it may run in microseconds, or wrong), so the
    job's "now" comes only from what a broker's clock wrote:

    * ``marker_timestamp``: the max timestamp of the control batches. The partition leader stamps a
      transaction marker itself (``MemoryRecords.withEndTransactionMarker(…, System.currentTimeMillis(), …)``
      in ``KafkaApis.handleWriteTxnMarkersRequest``);
    * ``log_append_timestamp``: the max timestamp of the LogAppendTime batches (``LogValidator``
      sets it to the leader's clock for ``message.timestamp.type=LogAppendTime``).

    Null when the segment has no such batch.
    """
    return {
        name: pa.array([newest_timestamp(batches["max_timestamp"], mask)], pa.int64())
        for name, mask in broker_written(batches).items()
    }


def broker_written(batches: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Which batches carry a time a broker's clock wrote, per column of :func:`broker_timestamps`."""
    return {
        "marker_timestamp": np.asarray(batches["is_control"], bool),
        "log_append_timestamp": np.asarray(batches["timestamp_type"] == 1, bool),
    }


def producer_rows(
    broker: str, topic: str, partition: int | None, path: str, base_offset: int | None, producers: dict[str, Any]
) -> pa.RecordBatch:
    """Rows of kind ``producer`` of one segment (txnlog.broker.producer_state.segment_producers: (values, valid)
    columns)."""
    n = producers["producer_id"][0].size
    return batch_of(
        SEGMENT_SUMMARY_SCHEMA,
        n,
        {
            "kind": KIND_PRODUCER,
            "broker": broker,
            "topic": topic,
            "partition": partition,
            "file": path,
            "file_offset": base_offset,
            **{name: pa.array(values, mask=~valid) for name, (values, valid) in producers.items()},
        },
    )


def newest_timestamp(max_timestamp: np.ndarray, mask: np.ndarray) -> int | None:
    chosen = max_timestamp[mask]
    return int(chosen.max()) if chosen.size else None


#: one ``.txnindex`` entry of one replica's segment (txnlog.sources.txnindex, read by txnlog.rules.integrity)
TXN_INDEX_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("segment_offset", pa.int64()),
        ("file", pa.string()),
        ("producer_id", pa.int64()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("last_stable_offset", pa.int64()),
    ]
)

#: one segment of one replica: whether a ``.txnindex`` is beside it, and the replica's recovery point
TXN_SEGMENT_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("has_txnindex", pa.bool_()),
        ("recovery_point", pa.int64()),
    ]
)
