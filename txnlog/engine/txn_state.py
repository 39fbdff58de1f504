"""A ``__transaction_state`` partition's task: its segments' records decoded a window at a time (the compiled scan,
``txnlog.kafka.txn_state.scan_transaction_log_windows``, returns columns; they become Arrow arrays here without a
loop per record: string and list columns are assembled from their offset buffers), and reduced where they are
read (txnlog.rules.coordinator), every record staged once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.engine.segments import limit_kwargs, log_bytes
from txnlog.engine.settings import Decode
from txnlog.engine.source_schemas import TXN_STATE_SOURCE_SCHEMA as SOURCE_SCHEMA
from txnlog.engine.staging import records_writer, reduced_staged
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.txn_state import scan_transaction_log_windows
from txnlog.model.rows import KIND_QUARANTINE, TXN_STATE_SCHEMA, batch_of
from txnlog.rules.coordinator import reduce_records
from txnlog.sources.logdirs import LogFile


def _strings(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    n = offsets.size - 1
    arr = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int64)), pa.py_buffer(np.ascontiguousarray(data))
    )
    return arr.cast(pa.string())


def record_batch_of(scan: Any, file: LogFile) -> pa.RecordBatch | None:
    """Arrow rows of kind ``record`` for one scanned segment (None if it holds no record)."""
    r = scan.records
    n = int(r["offset"].size)
    if n == 0:
        return None
    tomb = r["is_tombstone"].astype(bool)

    def val(name: str, typ: pa.DataType) -> pa.Array:
        return pa.array(r[name], mask=tomb).cast(typ)

    # partitions: list<string> of "topic-partition", null where the array is null (or a tombstone)
    tps = _strings(*scan.topic_partitions())
    offsets = scan.partition_list_offsets().astype(np.int32)
    null_parts = tomb | (r["partition_count"] < 0)
    partitions = pa.ListArray.from_arrays(pa.array(offsets), tps, mask=pa.array(null_parts))

    batches = scan.segment.batches
    idx = np.searchsorted(batches["position"], r["position"])
    idx = np.clip(idx, 0, max(batches["position"].size - 1, 0))
    epochs = batches["partition_leader_epoch"][idx] if batches["position"].size else np.full(n, -1, np.int32)
    return batch_of(
        TXN_STATE_SCHEMA,
        n,
        {
            "kind": "record",
            "broker": file.broker,
            "coordinator_partition": np.full(n, file.partition, np.int32),
            "file": file.path,
            "record_offset": r["offset"],
            "record_timestamp": r["timestamp"],
            "coordinator_epoch": epochs.astype(np.int32),
            "transactional_id": _strings(scan.transactional_id_data, scan.transactional_id_offsets),
            "is_tombstone": tomb,
            "key_version": r["key_version"].astype(np.int32),
            "value_version": val("value_version", pa.int32()),
            "producer_id": val("producer_id", pa.int64()),
            "producer_epoch": val("producer_epoch", pa.int32()),
            "timeout_ms": val("transaction_timeout_ms", pa.int64()),
            "state": val("state", pa.int32()),
            "partitions": partitions,
            "last_update_timestamp": val("last_update_timestamp_ms", pa.int64()),
            "txn_start_timestamp": val("start_timestamp_ms", pa.int64()),
            "previous_producer_id": val("previous_producer_id", pa.int64()),
            "next_producer_id": val("next_producer_id", pa.int64()),
            "next_producer_epoch": val("next_producer_epoch", pa.int32()),
            "client_transaction_version": val("client_transaction_version", pa.int32()),
        },
    )


def quarantine_of(file: LogFile, entries: list[Any], schema: pa.Schema = TXN_STATE_SCHEMA) -> pa.RecordBatch:
    """``quarantine`` rows of a coordinator log's file (``__transaction_state``, ``__consumer_offsets``) in
    ``schema``: the entries' byte ranges, reasons and details."""
    n = len(entries)
    return batch_of(
        schema,
        n,
        {
            "kind": KIND_QUARANTINE,
            "broker": file.broker,
            "coordinator_partition": np.full(n, file.partition, np.int32),
            "file": pa.array([e.file or file.path for e in entries], pa.string()),
            "position": pa.array([e.position for e in entries], pa.int64()),
            "length": pa.array([e.length for e in entries], pa.int64()),
            "reason": pa.array([e.reason for e in entries], pa.string()),
            "detail": pa.array([e.detail for e in entries], pa.string()),
        },
    )


def with_transitions(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*batch.columns, pa.nulls(batch.num_rows, pa.int64())], schema=SOURCE_SCHEMA)


#: bytes of a ``__transaction_state`` segment whose records are decoded (and reduced) at a time: what a reading
#: thread holds of a coordinator partition is one window's records and the reduction so far, whatever the
#: segment's size (benchmarks/RESULTS.md §2, "Flat memory with threads")
WINDOW_BYTES = 4 << 20
#: reduced rows of a coordinator partition's windows held before they are reduced together
_REDUCED_ROWS = 1 << 16


def decoded_records(file: LogFile, decode: Decode) -> Iterator[pa.RecordBatch]:
    """``file``'s records, a window at a time, then its quarantine rows."""

    quarantine: list[QuarantineEntry] = []
    try:
        with log_bytes(file.path) as (buf, _):
            for scan in scan_transaction_log_windows(
                buf, WINDOW_BYTES, file=file.path, check_crc=decode.check_crc,
                **limit_kwargs(decode.max_decompressed_bytes),
            ):  # fmt: skip
                quarantine.extend(scan.quarantine)
                batch = record_batch_of(scan, file)
                if batch is not None:
                    yield batch
    except OSError as e:
        quarantine = [QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e))]
    if quarantine:
        yield quarantine_of(file, sorted(quarantine, key=lambda e: e.position))


def reduced_records(files: list[LogFile], decode: Decode, stage: str | None) -> Iterator[pa.RecordBatch]:
    """One coordinator partition's records (``files``: every replica's segments), reduced; all of
    them staged once. A record several replicas hold is taken from the least broker name, as
    txnlog.rules.coordinator.distinct_records takes it, whatever the order of ``files``."""
    ordered = sorted(files, key=lambda f: f.broker)  # stable: each broker's files in their order
    seen: list[np.ndarray] = []  # the offsets of each window read so far, sorted
    parts: list[pa.Table] = []  # the windows' reductions, reduced together once they hold many rows
    rows = 0
    with records_writer(stage, "\n".join(sorted(f.path for f in files))) as sink:
        for file in ordered:
            for batch in decoded_records(file, decode):
                if batch.column("kind")[0].as_py() == KIND_QUARANTINE:
                    yield with_transitions(batch)
                    continue
                window = pa.Table.from_batches([batch])
                offsets = window.column("record_offset").to_numpy()
                known = _read_already(seen, offsets)
                if known.any():  # another replica's copy of a record already read
                    window, offsets = window.filter(pa.array(~known)), offsets[~known]
                seen.append(offsets if np.all(offsets[1:] > offsets[:-1]) else np.sort(offsets))  # log order
                parts.append(reduced_staged(window, sink))
                rows += parts[-1].num_rows
                if rows > _REDUCED_ROWS and len(parts) > 1:
                    parts = [reduce_records(pa.concat_tables(parts))]
                    rows = parts[0].num_rows
    if parts:
        reduced = reduce_records(pa.concat_tables(parts)) if len(parts) > 1 else parts[0]
        yield from reduced.to_batches()


def _read_already(seen: list[np.ndarray], offsets: np.ndarray) -> np.ndarray:
    """Which of ``offsets`` one of the sorted arrays ``seen`` holds. Only the arrays whose range overlaps
    ``offsets``' are searched: a segment's windows follow one another, so usually none is."""
    known = np.zeros(offsets.size, bool)
    if offsets.size == 0:
        return known
    low, high = offsets.min(), offsets.max()
    for done in seen:
        if done.size and done[0] <= high and done[-1] >= low:
            at = np.minimum(np.searchsorted(done, offsets), done.size - 1)
            known |= done[at] == offsets
    return known
