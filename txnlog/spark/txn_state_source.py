"""``txnlog_txn_state``: every ``__transaction_state`` record, decoded in the executor.

One input partition per segment file of ``__transaction_state-<n>``. The
compiled scan (``txnlog.kafka.txn_state.scan_transaction_log``) returns
columns; they become Arrow arrays here without a loop per record (string
and list columns are assembled from their offset buffers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.logdirs import LogFile
from txnlog.rows import KIND_QUARANTINE, TXN_STATE_SCHEMA, batch_of
from txnlog.rules.coordinator import TRANSITIONS, reduce_records
from txnlog.segments import limit_kwargs, read_file_bytes
from txnlog.spark.sources import FilesReader, arrow_to_spark_schema, option_flag, partition_files


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
    topics = _strings(*scan.partition_topics())
    ids = pa.array(scan.partitions["partition"]).cast(pa.string())
    tps = pc.binary_join_element_wise(topics, ids, "-") if len(ids) else pa.array([], pa.string())
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


def quarantine_of(file: LogFile, entries: list[Any]) -> pa.RecordBatch:
    n = len(entries)
    return batch_of(
        TXN_STATE_SCHEMA,
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


#: what the source yields: the records, plus ``transitions`` (set when the reader reduces them)
SOURCE_SCHEMA = TXN_STATE_SCHEMA.append(TRANSITIONS)


def _with_transitions(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*batch.columns, pa.nulls(batch.num_rows, pa.int64())], schema=SOURCE_SCHEMA)


class _TxnStateReader(FilesReader):
    """Option ``reduce``: each task holds every replica of its coordinator partitions and yields only
    the records the verdicts need (txnlog.rules.coordinator), staging all of them under ``stage``. Each
    coordinator partition is reduced once its files are read (a reducer: the union of disjoint partitions'
    reductions is the reduction of them all), so a task holds one partition's records at a time."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        self.start_task()
        reduce = option_flag(self.options, "reduce", False)
        by_partition: dict[tuple[str, int], list[LogFile]] = {}
        for f in partition_files(partition):
            by_partition.setdefault((f.topic, f.partition), []).append(f)
        for files in by_partition.values():
            records: list[pa.RecordBatch] = []
            for file in files:
                yield from self._decoded(file, records if reduce else None)
            if reduce:
                yield from self._reduced(records, [f.path for f in files])

    def _decoded(self, file: LogFile, records: list[pa.RecordBatch] | None) -> Iterator[pa.RecordBatch]:
        """``file``'s records, appended to ``records`` (to be reduced) or else yielded, and its quarantine rows."""
        from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
        from txnlog.kafka.txn_state import scan_transaction_log

        try:
            scan = scan_transaction_log(
                read_file_bytes(file.path),
                file=file.path,
                check_crc=self.check_crc,
                **limit_kwargs(self.max_decompressed_bytes),
            )
        except OSError as e:
            yield _with_transitions(
                quarantine_of(file, [QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e))])
            )
            return
        batch = record_batch_of(scan, file)
        if batch is not None:
            if records is not None:
                records.append(batch)
            else:
                yield _with_transitions(batch)
        if scan.quarantine:
            yield _with_transitions(quarantine_of(file, list(scan.quarantine)))

    def _reduced(self, records: list[pa.RecordBatch], paths: list[str]) -> Iterator[pa.RecordBatch]:
        """The reduction of one coordinator partition's ``records`` (read from ``paths``), its records staged."""
        if records:
            table = pa.Table.from_batches(records, schema=TXN_STATE_SCHEMA)
            yield from reduce_records(table, self.options.get("stage"), "\n".join(sorted(paths))).to_batches()


class TxnStateSource(DataSource):
    """``spark.read.format("txnlog_txn_state").option("files", files_option(...)).load()``"""

    @classmethod
    def name(cls) -> str:
        return "txnlog_txn_state"

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SOURCE_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _TxnStateReader(dict(self.options))
