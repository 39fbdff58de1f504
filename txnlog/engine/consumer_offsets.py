"""The ``__consumer_offsets`` partitions' task: the consumer groups' offsets of each partition, replayed where it
is read.

Each task holds whole ``__consumer_offsets-<n>`` partitions. Of a partition's replicas one broker's segments are
read: the most advanced, as the rest of the job picks the leader of a partition
(:attr:`txnlog.broker.reconstruct.ReplicaLogs.is_lead`: the largest log end offset, ties to the first broker name),
since a follower's copy may lack the newest commits and markers. Each segment is read and its records decoded
(:func:`txnlog.kafka.consumer_offsets.decode_segment`: its compressed batches decompressed, each record parsed
once), and the partition's offsets replayed as the group coordinator does
(:func:`txnlog.rules.consumer_offsets.replay_offsets`). The partition's transactions and markers are analysed as
any data partition's by the segments source; this one adds what the groups committed.

Rows (:data:`SOURCE_SCHEMA`, ``kind``): ``offset`` (a committed or pending offset, :data:`OFFSETS_SCHEMA`'s
columns), ``group`` (a classic group's members from its last GroupMetadata record) and ``quarantine``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.engine.segments import limit_kwargs, log_bytes
from txnlog.engine.txn_state import quarantine_of
from txnlog.kafka.consumer_offsets import GROUP_METADATA_TYPE, decode_segment
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.framing import whole_entries
from txnlog.model.contract import MEMBER
from txnlog.model.rows import batch_of
from txnlog.rules.consumer_offsets import OFFSETS_SCHEMA, replay_offsets
from txnlog.sources.logdirs import LogFile

KIND_OFFSET = "offset"
KIND_GROUP = "group"

SOURCE_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("broker", pa.string()),
        ("coordinator_partition", pa.int32()),  # the __consumer_offsets partition
        *(pa.field(f.name, pa.binary()) if f.name == "group_bytes" else f for f in OFFSETS_SCHEMA),
        ("members", pa.list_(MEMBER)),  # kind group
        ("file", pa.string()),  # kind quarantine
        ("position", pa.int64()),
        ("length", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


def log_end(files: list[LogFile]) -> int:
    """The log end offset of one replica from its segments' batch headers (the offset after the last whole batch
    of its newest segment holding one; the newest segment's base offset when none does), as
    :func:`txnlog.broker.reconstruct.replica_logs` bounds a replica."""
    for file in sorted(files, key=lambda f: f.base_offset, reverse=True):
        try:
            with log_bytes(file.path) as (buf, _):
                _, after, count, _ = whole_entries(buf)
        except OSError:
            continue  # unreadable: a quarantine row when this replica is read
        if count:
            return after
    return max(f.base_offset for f in files)


def lead_replica(files: list[LogFile]) -> list[LogFile]:
    """The files of the most advanced replica among ``files`` (one partition's, every replica's): the largest log
    end offset, ties to the first broker name (:attr:`txnlog.broker.reconstruct.ReplicaLogs.is_lead`)."""
    by_broker: dict[str, list[LogFile]] = {}
    for f in sorted(files, key=lambda f: f.broker):
        by_broker.setdefault(f.broker, []).append(f)
    if len(by_broker) < 2:
        return list(files)
    ends = {broker: log_end(own) for broker, own in by_broker.items()}
    return by_broker[max(by_broker, key=ends.__getitem__)]  # max: the first of equals


def read_partition(files: list[LogFile], check_crc: bool, max_decompressed_bytes: int | None) -> list[pa.RecordBatch]:
    """One ``__consumer_offsets`` partition's rows (:data:`SOURCE_SCHEMA`) from its lead replica's segments."""
    files = sorted(lead_replica(files), key=lambda f: f.base_offset)
    if not files:
        return []
    first = files[0]
    decoded: list[pa.Table] = []
    markers: list[pa.Table] = []
    quarantine: list[QuarantineEntry] = []
    for file in files:
        try:
            with log_bytes(file.path) as (buf, _):
                rows, marks, bad = decode_segment(
                    buf, file=file.path, check_crc=check_crc, **limit_kwargs(max_decompressed_bytes)
                )
        except OSError as e:
            quarantine.append(QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e)))
            continue
        decoded.append(rows)
        markers.append(marks)
        quarantine.extend(bad)
    out: list[pa.RecordBatch] = []
    if decoded:
        rows = pa.concat_tables(decoded)
        offsets = replay_offsets(rows, pa.concat_tables(markers))
        out.append(_offset_rows(offsets, first))
        out.extend(_group_rows(rows, first))
    if quarantine:
        out.append(quarantine_of(first, quarantine, SOURCE_SCHEMA))
    return out


def _offset_rows(offsets: pa.Table, file: LogFile) -> pa.RecordBatch:
    n = offsets.num_rows
    columns = {name: offsets.column(name).combine_chunks() for name in OFFSETS_SCHEMA.names}
    return batch_of(
        SOURCE_SCHEMA,
        n,
        {
            **columns,
            "kind": KIND_OFFSET,
            "broker": file.broker,
            "coordinator_partition": np.full(n, file.partition, np.int32),
        },
    )


def _group_rows(rows: pa.Table, file: LogFile) -> list[pa.RecordBatch]:
    """Each classic group's members as of its last GroupMetadata record (none after a tombstone)."""
    meta = rows.filter(pc.equal(rows["record_type"], GROUP_METADATA_TYPE))
    if meta.num_rows == 0:
        return []
    meta = meta.append_column("_i", pa.array(np.arange(meta.num_rows, dtype=np.int64)))
    last = meta.take(meta.group_by(["group_bytes"], use_threads=False).aggregate([("_i", "max")])["_i_max"])
    last = last.filter(pc.invert(last["is_tombstone"]))
    members = [
        [{k: m[k] for k in ("member_id", "client_id", "client_host")} for m in (ms or [])]
        for ms in last.column("members").to_pylist()
    ]
    n = last.num_rows
    return [
        batch_of(
            SOURCE_SCHEMA,
            n,
            {
                "kind": KIND_GROUP,
                "broker": file.broker,
                "coordinator_partition": np.full(n, file.partition, np.int32),
                "group": last.column("group").combine_chunks(),
                "group_bytes": last.column("group_bytes").combine_chunks(),
                "members": pa.array(members, pa.list_(MEMBER)),
            },
        )
    ]
