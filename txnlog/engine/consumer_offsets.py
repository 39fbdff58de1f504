"""The ``__consumer_offsets`` partitions' task: the consumer groups' offsets of each partition, replayed where it
is read.

Each task holds whole ``__consumer_offsets-<n>`` partitions. Of a partition's replicas one broker's segments are
read: the most advanced, as the rest of the job picks the leader of a partition
(:attr:`txnlog.broker.reconstruct.ReplicaLogs.is_lead`: the largest log end offset, ties to the first broker name),
since a follower's copy may lack the newest commits and markers. Each segment is scanned (its batches checked and
its compressed ones decompressed: :func:`txnlog.kafka.consumer_offsets_scan.scan_batches`) and its records walked
once, each checked and its position and topic-partition hash noted (:func:`index_partitions`; this does not depend
on what is asked, so the local placement starts it beside the other inputs' decode: txnlog.engine.tasks). Then,
from those notes, the commits of the topic partitions asked for (:func:`read_partitions`' ``wanted``) and of those a
producer's batch commits to are read again, and every record that is not a well-formed OffsetCommit
(:func:`read_indexed`). The kept rows
of all the task's segments are built into columns at once (:func:`txnlog.kafka.consumer_offsets.decode_kept`) and
replayed together, each partition as its group coordinator replays it
(:func:`txnlog.rules.consumer_offsets.replay_partitions`). The partition's transactions and markers are analysed
as any data partition's by the segments source; this one adds what the groups committed.

Rows (:data:`SOURCE_SCHEMA`, ``kind``): ``offset`` (a committed or pending offset, :data:`OFFSETS_SCHEMA`'s
columns), ``group`` (a classic group's members from its last GroupMetadata record) and ``quarantine``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.engine.segments import limit_kwargs, log_bytes
from txnlog.engine.txn_state import quarantine_of
from txnlog.kafka.consumer_offsets import GROUP_METADATA_TYPE, Kept, decode_kept, kept_of
from txnlog.kafka.consumer_offsets_scan import MARKERS_SCHEMA, Indexed, index_scanned, pick, scan_batches
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.kafka.framing import whole_entries
from txnlog.model.contract import MEMBER
from txnlog.model.rows import batch_of
from txnlog.rules.consumer_offsets import OFFSETS_SCHEMA, replay_partitions
from txnlog.sources.logdirs import LogFile

KIND_OFFSET = "offset"
_NOTHING = np.zeros(0, np.uint8)
#: The source option naming the topic partitions whose groups' offsets are asked for (JSON
#: [[topic, partition], ...]; absent: every one's): :func:`read_partition`'s ``wanted``.
TOPIC_PARTITIONS = "topic_partitions"
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


def read_partition(
    files: list[LogFile], check_crc: bool, max_decompressed_bytes: int | None, wanted: np.ndarray | None = None
) -> list[pa.RecordBatch]:
    """One ``__consumer_offsets`` partition's rows (:data:`SOURCE_SCHEMA`) from its lead replica's segments
    (:func:`read_partitions`)."""
    return read_partitions([files], check_crc, max_decompressed_bytes, wanted)


def read_partitions(
    partitions: list[list[LogFile]],
    check_crc: bool,
    max_decompressed_bytes: int | None,
    wanted: np.ndarray | None = None,
) -> list[pa.RecordBatch]:
    """The rows (:data:`SOURCE_SCHEMA`) of ``__consumer_offsets`` partitions (each its files, every replica's),
    each from its lead replica's segments: :func:`index_partitions`, then :func:`read_indexed`.

    ``wanted``: the hashes of the topic partitions whose groups' offsets are asked for
    (:func:`txnlog.kafka.consumer_offsets_commits.hashes_of`; None: every one). Every record is walked and
    checked (a bad one is a quarantine row wherever it is), but only the OffsetCommit records of those topic
    partitions, and of the topic partitions a producer's batch commits to (their pending offsets, and the
    committed ones beside them), are built into columns and replayed; the group rows are all built. The kept
    records of all the partitions' segments are built at once and replayed together, each partition on its own
    (:func:`txnlog.rules.consumer_offsets.replay_partitions`): one build and one pass, not one per segment."""
    indexed = index_partitions(partitions, check_crc, max_decompressed_bytes)
    return read_indexed(indexed, check_crc, max_decompressed_bytes, wanted)


@dataclass(frozen=True)
class IndexedPartition:
    """One ``__consumer_offsets`` partition's lead replica, its segments walked and checked
    (:func:`txnlog.kafka.consumer_offsets_scan.index_scanned`) and nothing kept yet; no segment's bytes held."""

    files: list[LogFile]  # the lead replica's segments, in offset order
    segments: list[tuple[int, Indexed]]  # the readable ones: (index in ``files``, the segment indexed)
    unreadable: list[list[QuarantineEntry]]  # per file, the entry saying it could not be read


def index_partitions(
    partitions: list[list[LogFile]], check_crc: bool, max_decompressed_bytes: int | None
) -> list[IndexedPartition]:
    """Each partition of ``partitions`` (its files, every replica's) indexed: its lead replica's segments scanned
    and every record walked and checked, which does not depend on what a step will ask for (:func:`read_indexed`
    decides that)."""
    out = []
    for files in partitions:
        files = sorted(lead_replica(files), key=lambda f: f.base_offset)
        if files:
            out.append(_index_one(files, check_crc, max_decompressed_bytes))
    return out


def _index_one(files: list[LogFile], check_crc: bool, max_decompressed_bytes: int | None) -> IndexedPartition:
    unreadable: list[list[QuarantineEntry]] = [[] for _ in files]
    segments: list[tuple[int, Indexed]] = []
    limit = limit_kwargs(max_decompressed_bytes)
    for i, file in enumerate(files):
        try:
            with log_bytes(file.path) as (buf, _):
                ix = index_scanned(scan_batches(buf, file=file.path, check_crc=check_crc, **limit))
            # a compressed segment's decompressed bytes are not held until the pick: decompressed again there
            segments.append((i, replace(ix, extra=_NOTHING) if ix.extra.size else ix))
        except OSError as e:
            unreadable[i].append(QuarantineEntry(file.path, 0, file.size, UNREADABLE_FILE, str(e)))
    return IndexedPartition(files, segments, unreadable)


def read_indexed(
    indexed: list[IndexedPartition],
    check_crc: bool,
    max_decompressed_bytes: int | None,
    wanted: np.ndarray | None = None,
) -> list[pa.RecordBatch]:
    """:func:`read_partitions`' rows of partitions already indexed (:func:`index_partitions`): each segment's
    bytes read again for the records kept only. A segment whose bytes changed since is indexed again."""
    firsts: list[LogFile] = []
    kept: list[Kept] = []
    kept_part: list[int] = []
    markers: list[pa.Table] = []
    marker_part: list[np.ndarray] = []
    quarantine: list[pa.RecordBatch] = []
    for part in indexed:
        files = part.files
        segments, marks, entries = _read_one(part, check_crc, max_decompressed_bytes, wanted)
        if entries:
            quarantine.append(quarantine_of(files[0], entries, SOURCE_SCHEMA))
        if not segments:
            continue
        kept_part.extend([len(firsts)] * len(segments))
        marker_part.append(np.full(marks.num_rows, len(firsts), np.int64))
        firsts.append(files[0])
        kept.extend(segments)
        markers.append(marks)
    out: list[pa.RecordBatch] = []
    if kept:
        rows, of_kept = decode_kept(kept)
        of_rows = np.asarray(kept_part, np.int64)[of_kept]
        offsets, offsets_part = replay_partitions(rows, pa.concat_tables(markers), of_rows, np.concatenate(marker_part))
        out.append(_offset_rows(offsets, offsets_part, firsts))
        out.extend(_group_rows(rows, of_rows, firsts))
    return out + quarantine


def _read_one(
    part: IndexedPartition, check_crc: bool, max_decompressed_bytes: int | None, wanted: np.ndarray | None
) -> tuple[list[Kept], pa.Table, list[QuarantineEntry]]:
    """One indexed partition's (its segments' kept rows, none when nothing is kept; markers; quarantine entries).
    The keys to keep are those asked and those its producers' batches commit to (:func:`_keys`); each segment with
    a record kept is mapped again and those records read (:func:`txnlog.kafka.consumer_offsets_scan.pick`)."""
    files = part.files
    quarantine = [list(q) for q in part.unreadable]
    keys = _keys([ix for _, ix in part.segments], wanted)
    kept: list[Kept] = []
    for i, ix in part.segments:
        try:
            with log_bytes(files[i].path) as (buf, _):
                limit = limit_kwargs(max_decompressed_bytes)
                if buf.size != ix.size:  # changed since it was indexed: indexed again
                    ix = index_scanned(scan_batches(buf, file=files[i].path, check_crc=check_crc, **limit))
                elif np.any(ix.batches["src"] == 1):  # its compressed batches decompressed again, as in the walk
                    ix = replace(ix, extra=scan_batches(buf, file=files[i].path, check_crc=check_crc, **limit).extra)
                walked = pick(ix, buf, keys)
                if keys is not None and len(walked.recs) == 0:  # nothing asked for, nothing to decode
                    quarantine[i].extend(walked.quarantine)
                    continue
                rows, bad = kept_of(walked, file=files[i].path)
        except OSError as e:
            quarantine[i].append(QuarantineEntry(files[i].path, 0, files[i].size, UNREADABLE_FILE, str(e)))
            continue
        kept.append(rows)
        quarantine[i].extend(bad)
    entries = [q for qs in quarantine for q in qs]
    if not kept:
        return [], MARKERS_SCHEMA.empty_table(), entries
    return kept, pa.concat_tables([ix.markers for _, ix in part.segments]), entries


def _keys(indexed: list[Indexed], wanted: np.ndarray | None) -> np.ndarray | None:
    """The topic-partition hashes whose commits a partition's walk keeps (None: all): the ``wanted`` ones and
    those any producer's batch of the partition commits to, found first from those batches alone, so that each
    key kept has all its records (the replay of a key needs them all, in every segment). A hash that two topic
    partitions share keeps both: more rows, the same answers for those asked."""
    if wanted is None:
        return None
    return np.unique(np.concatenate([wanted.astype(np.uint64), *(ix.producer_hashes() for ix in indexed)]))


def _offset_rows(offsets: pa.Table, part: np.ndarray, firsts: list[LogFile]) -> pa.RecordBatch:
    """``offsets`` as rows of :data:`SOURCE_SCHEMA`, each with its partition's broker and number (``part``: the
    index in ``firsts``, the first file of each partition's lead replica)."""
    n = offsets.num_rows
    columns = {name: offsets.column(name).combine_chunks() for name in OFFSETS_SCHEMA.names}
    return batch_of(SOURCE_SCHEMA, n, {**columns, "kind": KIND_OFFSET, **_placed(part, firsts)})


def _placed(part: np.ndarray, firsts: list[LogFile]) -> dict[str, object]:
    """The ``broker`` and ``coordinator_partition`` columns of rows of the partitions ``part`` (indexes in
    ``firsts``)."""
    if len(firsts) == 1:
        return {"broker": firsts[0].broker, "coordinator_partition": np.full(len(part), firsts[0].partition, np.int32)}
    brokers = pa.array([f.broker for f in firsts], pa.string())
    numbers = np.array([f.partition for f in firsts], np.int32)
    return {"broker": brokers.take(pa.array(part)), "coordinator_partition": numbers[part]}


def _group_rows(rows: pa.Table, part: np.ndarray, firsts: list[LogFile]) -> list[pa.RecordBatch]:
    """Each classic group's members as of its last GroupMetadata record of its partition (none after a
    tombstone); ``part``: each row's partition, an index in ``firsts``."""
    is_meta = pc.equal(rows["record_type"], GROUP_METADATA_TYPE)
    meta = rows.filter(is_meta)
    if meta.num_rows == 0:
        return []
    meta = meta.append_column("_i", pa.array(np.arange(meta.num_rows, dtype=np.int64)))
    meta = meta.append_column("_part", pa.array(part[is_meta.to_numpy(zero_copy_only=False)]))
    last = meta.take(meta.group_by(["_part", "group_bytes"], use_threads=False).aggregate([("_i", "max")])["_i_max"])
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
                **_placed(last.column("_part").to_numpy(), firsts),
                "group": last.column("group").combine_chunks(),
                "group_bytes": last.column("group_bytes").combine_chunks(),
                "members": pa.array(members, pa.list_(MEMBER)),
            },
        )
    ]
