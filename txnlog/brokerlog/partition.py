"""One partition replica's log directory, appended to the way a broker does it.

:class:`PartitionLog` takes record batches as a producer (or the transaction
coordinator) sends them and does what ``UnifiedLog`` / ``LogSegment`` /
``ProducerStateManager`` do with them:

* assigns offsets by patching ``baseOffset`` (outside the CRC) and stamps the
  partition leader epoch (also outside the CRC); for LogAppendTime topics sets
  ``maxTimestamp`` and the timestamp-type bit and re-checksums, as
  ``DefaultRecordBatch.setMaxTimestamp`` does;
* rolls segments by size (``size > segment.bytes - batchSize``) into files
  named by their 20-digit base offset;
* writes a ``.index`` entry (last offset of the appended batch → its position)
  whenever more than ``index.interval.bytes`` were appended since the last one,
  and a ``.timeindex`` entry (max timestamp so far → its offset) with it, plus
  the closing time-index entry when a segment becomes inactive;
* keeps producer state exactly like ``ProducerAppendInfo`` (docs/formats.md §8.2): the
  first transactional data batch of a producer id with nothing open opens a
  transaction; any ABORT/COMMIT control batch of that producer id closes it,
  whatever its epoch; an ABORT that closed a transaction becomes a
  ``.txnindex`` entry (firstOffset, marker offset, LSO);
* takes a producer snapshot named after the new segment's base offset at each
  roll, and one at the log end offset on close;
* deletes old segments (retention): the log start offset moves to the oldest
  retained segment, and the snapshots of deleted segments go with them — the
  one at the new log start stays, which is how an offline reader learns of a
  transaction that began before the oldest retained segment.

It also records, for ground truth, every transaction it saw
(:class:`TxnRecord`) and every marker.
"""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import google_crc32c
import numpy as np

from txnlog.brokerlog import encode
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression, ControlType, TimestampType

__all__ = [
    "AppendInfo",
    "InvalidProducerEpoch",
    "MarkerRecord",
    "PartitionLog",
    "ProducerState",
    "QuarantineTruth",
    "TxnRecord",
    "segment_file_name",
]

_PARTITION_LEADER_EPOCH = struct.Struct(">i")


class InvalidProducerEpoch(ValueError):
    """A data batch from a fenced (older) producer epoch, refused as a leader refuses it."""


_BASE_OFFSET = struct.Struct(">q")


def segment_file_name(offset: int, suffix: str) -> str:
    """``00000000000000001234.log`` (LogFileUtils.filenamePrefixFromOffset + suffix)."""
    return f"{offset:0{wire.LOG_FILE_NAME_DIGITS}d}{suffix}"


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where one appended batch landed."""

    base_offset: int
    last_offset: int
    position: int
    segment_base_offset: int
    size: int
    max_timestamp: int
    data: bytes = b""  # the bytes as written (offsets assigned), for replication


@dataclass(slots=True)
class ProducerState:
    """ProducerStateEntry: what a ``.snapshot`` persists per producer id."""

    producer_id: int
    producer_epoch: int = wire.NO_PRODUCER_EPOCH
    last_sequence: int = wire.NO_SEQUENCE
    last_offset: int = -1  # last data offset; -1 = no batch metadata
    offset_delta: int = 0
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    def snapshot_entry(self) -> encode.ProducerSnapshotEntry:
        return encode.ProducerSnapshotEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_sequence=self.last_sequence,
            last_offset=self.last_offset,
            offset_delta=self.offset_delta,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )


#: What one appended batch did to its producer's state, for :meth:`PartitionLog.producers_on_disk`:
#: (base offset, producer id, epoch, then for a data batch: last offset, offset delta, max timestamp, last
#: sequence, transactional; for an ABORT/COMMIT marker: None, None, timestamp, coordinator epoch, None; for
#: the periodic expiry check removing the producer before the batch at that offset: None, None, the check's
#: time, None, None).
_ProducerEvent = tuple[int, int, int, int | None, int | None, int, int | None, bool | None]


def _feed(producers: dict[int, ProducerState], event: _ProducerEvent) -> None:
    """``ProducerStateManager.update`` of one batch (``ProducerAppendInfo``: a data batch, or a marker, whose new
    epoch clears the batch metadata: ``ProducerStateEntry.maybeUpdateProducerEpoch``)."""
    base, pid, epoch, last_offset, delta, timestamp, value, transactional = event
    if last_offset is None and value is None:  # removed by the expiry check (PartitionLog._expire_idle)
        producers.pop(pid, None)
        return
    assert value is not None
    state = producers.get(pid)
    if state is None:
        state = producers[pid] = ProducerState(producer_id=pid)
    if last_offset is None:  # a marker: value is its coordinator epoch
        if epoch != state.producer_epoch:
            state.last_sequence, state.last_offset, state.offset_delta = wire.NO_SEQUENCE, -1, 0
        state.coordinator_epoch = value
        state.current_txn_first_offset = -1
    else:  # a data batch: value is its last sequence
        state.last_sequence, state.last_offset, state.offset_delta = value, last_offset, delta or 0
        if transactional and state.current_txn_first_offset < 0:
            state.current_txn_first_offset = base
    state.producer_epoch = epoch
    state.last_timestamp = timestamp


@dataclass(slots=True)
class TxnRecord:
    """One transaction of one producer id on this partition (a ``transactions`` row)."""

    producer_id: int
    producer_epoch: int  # epoch of its first data batch
    first_offset: int
    last_offset: int  # last data offset
    first_timestamp: int  # base timestamp of the first data batch
    last_timestamp: int  # max timestamp of the last data batch
    batch_count: int = 0
    record_count: int = 0
    size_bytes: int = 0
    marker_offset: int | None = None
    outcome: str = "OPEN"  # COMMIT / ABORT / OPEN
    marker_epoch: int | None = None
    coordinator_epoch: int | None = None
    marker_timestamp: int | None = None
    #: Offset of this producer id's previous ABORT/COMMIT marker on the partition
    #: (None for its first transaction here). For a batch appended after its own
    #: transaction's ABORT (KAFKA-14053) this is that marker.
    previous_marker_offset: int | None = None


@dataclass(frozen=True, slots=True)
class MarkerRecord:
    """An ABORT/COMMIT control batch appended to this partition."""

    offset: int
    producer_id: int
    producer_epoch: int
    control_type: int
    coordinator_epoch: int
    timestamp: int
    closed_transaction: bool  # False when the producer id had nothing open here


@dataclass(frozen=True, slots=True)
class QuarantineTruth:
    """A damaged byte range a reader must report (docs/design.md §4a)."""

    file: str  # path relative to the scenario root (set by the scenario), or absolute
    position: int
    length: int
    reason: str  # crc_mismatch / bad_magic / bad_length / truncated_tail
    #: the offsets the damaged batch held (None for a truncated tail: from the log end on)
    first_offset: int | None = None
    last_offset: int | None = None


@dataclass(slots=True)
class _Segment:
    base_offset: int
    size: int = 0
    flushed: int = 0
    pending: bytearray = field(default_factory=bytearray)
    index: bytearray = field(default_factory=bytearray)
    time_index: bytearray = field(default_factory=bytearray)
    txn_index: bytearray = field(default_factory=bytearray)
    bytes_since_last_index_entry: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    last_time_index_timestamp: int = -1
    last_time_index_offset: int = -1
    next_offset: int = 0
    batches: int = 0  # readable v2 batches (damaged ones are taken off)
    closed: bool = False


_FLUSH_BYTES = 1 << 20


class PartitionLog:
    """A partition replica's directory ``<log_dir>/<topic>-<partition>``, written like a broker.

    >>> import tempfile
    >>> from txnlog.brokerlog.encode import encode_record_batch, RecordSpec
    >>> log = PartitionLog(tempfile.mkdtemp(), "orders", 0)
    >>> log.append(encode_record_batch(base_offset=0, records=[RecordSpec(0, 0, b"k", b"v")],
    ...                                base_timestamp=1_700_000_000_000)).base_offset
    0
    >>> log.close()
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        topic: str,
        partition: int,
        *,
        segment_bytes: int = wire.DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = wire.DEFAULT_INDEX_INTERVAL_BYTES,
        leader_epoch: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        clock: Callable[[], int] | None = None,
        producer_id_expiration_ms: int = wire.DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        producer_id_expiration_check_interval_ms: int = wire.DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
        topic_id: bytes | None = None,
        log_start_offset: int = 0,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.topic = topic
        self.partition = partition
        self.dir = self.log_dir / f"{topic}-{partition}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.leader_epoch = leader_epoch
        self.leader_epoch_starts: list[tuple[int, int]] = []  # (epoch, start offset)
        self.timestamp_type = TimestampType(timestamp_type)
        self.clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        #: the periodic expiry check (``UnifiedLog.producerExpireCheck``) runs every interval from the log's
        #: load: its first run one interval after this time (None: no clock, no check)
        self.expiry_checks_from: int | None = clock() if clock is not None else None
        #: (check time, offset of the batch it came before, producer id): producers the check removed
        self.expired_between: list[tuple[int, int, int]] = []
        self.topic_id = topic_id
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_start_offset
        self.segments: list[_Segment] = [_Segment(base_offset=log_start_offset, next_offset=log_start_offset)]
        self.producers: dict[int, ProducerState] = {}
        self.open_txns: dict[int, TxnRecord] = {}
        self.transactions: list[TxnRecord] = []
        self.markers: list[MarkerRecord] = []
        self.snapshot_offsets: list[int] = []
        #: the producer state each snapshot file holds, and the producer-state events of the batches appended
        #: since the snapshot before the newest one (older ones can no longer be the first one a reader
        #: of the files replays: :meth:`producers_on_disk`)
        self._snapshot_states: dict[int, dict[int, ProducerState]] = {}
        self._producer_events: list[_ProducerEvent] = []
        self._producer_events_from = log_start_offset  # every event at or after it is kept
        self.deleted_segment_bases: list[int] = []
        self.max_timestamp = -1  # over every valid batch appended
        self.batch_count = 0
        self.legacy_entry_count = 0
        self.damage: list[QuarantineTruth] = []
        self._last_marker_offset: dict[int, int] = {}
        self.last_append: AppendInfo | None = None  # of the latest append(), e.g. a marker just written
        # ProducerStateManager only snapshots past its last snapshot offset, which
        # starts at the log start offset: an empty log gets no snapshot.
        self._last_snapshot_offset = log_start_offset
        self._closed = False
        # Kafka creates the first segment's files at once.
        self._touch(self.segments[0])

    # ------------------------------------------------------------------ paths

    def segment_path(self, base_offset: int, suffix: str = ".log") -> Path:
        return self.dir / segment_file_name(base_offset, suffix)

    @property
    def active_segment(self) -> _Segment:
        return self.segments[-1]

    @property
    def last_stable_offset(self) -> int:
        """Smallest first offset of an open transaction, else the log end offset."""
        if not self.open_txns:
            return self.log_end_offset
        return min(t.first_offset for t in self.open_txns.values())

    def _touch(self, seg: _Segment) -> None:
        for suffix in (".log", ".index", ".timeindex"):
            self.segment_path(seg.base_offset, suffix).touch()

    # ---------------------------------------------------------------- writing

    def _maybe_roll(self, size: int, next_base_offset: int) -> None:
        seg = self.active_segment
        if seg.size > 0 and seg.size > self.segment_bytes - size:
            self.roll(next_base_offset)

    def roll(self, new_base_offset: int | None = None) -> None:
        """Start a new segment at ``new_base_offset`` (default: the log end offset) and snapshot."""
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        old = self.active_segment
        self._finish_segment(old)
        seg = _Segment(base_offset=base, next_offset=base)
        self.segments.append(seg)
        self._touch(seg)
        # UnifiedLog.roll: updateMapEndOffset(newSegment.baseOffset); takeSnapshot().
        self.take_snapshot(base)

    def _finish_segment(self, seg: _Segment) -> None:
        if seg.closed:
            return
        # onBecomeInactiveSegment / close: the biggest timestamp seen always gets a time-index entry.
        self._maybe_append_time_index(seg, seg.max_timestamp, seg.offset_of_max_timestamp)
        self._flush(seg)
        self.segment_path(seg.base_offset, ".index").write_bytes(bytes(seg.index))
        self.segment_path(seg.base_offset, ".timeindex").write_bytes(bytes(seg.time_index))
        if seg.txn_index:
            self.segment_path(seg.base_offset, ".txnindex").write_bytes(bytes(seg.txn_index))
        seg.closed = True

    def _flush(self, seg: _Segment) -> None:
        if seg.pending:
            with open(self.segment_path(seg.base_offset), "ab") as f:
                f.write(seg.pending)
            seg.flushed += len(seg.pending)
            seg.pending = bytearray()

    def _write(self, seg: _Segment, data: bytes | bytearray | memoryview) -> int:
        position = seg.size
        seg.pending += data
        seg.size += len(data)
        if len(seg.pending) >= _FLUSH_BYTES:
            self._flush(seg)
        return position

    def _maybe_append_time_index(self, seg: _Segment, timestamp: int, offset: int) -> None:
        # TimeIndex.maybeAppend: only a strictly larger timestamp makes an entry.
        if timestamp > seg.last_time_index_timestamp and timestamp >= 0:
            seg.time_index += encode.encode_time_index_entry(timestamp, offset - seg.base_offset)
            seg.last_time_index_timestamp = timestamp
            seg.last_time_index_offset = offset

    def _index_and_write(
        self, data: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int
    ) -> tuple[_Segment, int]:
        """LogSegment.append for one batch already placed at the log end."""
        seg = self.active_segment
        position = self._write(seg, data)
        if max_timestamp > seg.max_timestamp:
            seg.max_timestamp = max_timestamp
            seg.offset_of_max_timestamp = last_offset
        if seg.bytes_since_last_index_entry > self.index_interval_bytes:
            seg.index += encode.encode_offset_index_entry(last_offset - seg.base_offset, position)
            self._maybe_append_time_index(seg, seg.max_timestamp, seg.offset_of_max_timestamp)
            seg.bytes_since_last_index_entry = 0
        seg.bytes_since_last_index_entry += len(data)
        seg.next_offset = last_offset + 1
        return seg, position

    def _note_leader_epoch(self, epoch: int, offset: int) -> None:
        if not self.leader_epoch_starts or self.leader_epoch_starts[-1][0] < epoch:
            self.leader_epoch_starts.append((epoch, offset))

    def append(self, batch: bytes, *, base_offset: int | None = None) -> AppendInfo:
        """Append one v2 record batch (its ``baseOffset`` is replaced, as a leader does).

        ``base_offset`` forces the offset (a follower copying the leader; gaps
        allowed). As a leader, a data batch whose producer epoch is below the
        producer's current epoch here is refused (``InvalidProducerEpoch``),
        as the broker refuses a zombie's produce request.
        """
        if self._closed:
            raise RuntimeError(f"{self.dir} is closed")
        data = bytearray(batch)
        if len(data) < wire.RECORD_BATCH_OVERHEAD or data[wire.MAGIC_OFFSET] != wire.CURRENT_MAGIC:
            raise ValueError("PartitionLog.append takes magic-2 batches; use append_legacy for magic 0/1")
        (_, _, _, _, _, attributes, last_offset_delta, base_ts, max_ts, pid, epoch, base_seq, count) = (
            encode.BATCH_HEADER.unpack_from(data)
        )
        if base_offset is None:
            if pid >= 0 and not attributes & wire.CONTROL_MASK:
                known = self.producers.get(pid)
                if known is not None and epoch < known.producer_epoch:
                    raise InvalidProducerEpoch(
                        f"{self.topic}-{self.partition}: producer {pid} epoch {epoch} < current {known.producer_epoch}"
                    )
        elif base_offset < self.log_end_offset:
            raise ValueError(f"offset {base_offset} is below the log end offset {self.log_end_offset}")
        as_leader = base_offset is None
        if base_offset is None:
            base_offset = self.log_end_offset
        _BASE_OFFSET.pack_into(data, 0, base_offset)
        if as_leader:
            _PARTITION_LEADER_EPOCH.pack_into(data, wire.PARTITION_LEADER_EPOCH_OFFSET, self.leader_epoch)
        batch_epoch = _PARTITION_LEADER_EPOCH.unpack_from(data, wire.PARTITION_LEADER_EPOCH_OFFSET)[0]
        if as_leader and self.timestamp_type is TimestampType.LOG_APPEND_TIME and self.clock is not None:
            max_ts = self.clock()
            attributes |= wire.TIMESTAMP_TYPE_MASK
            struct.pack_into(">h", data, wire.ATTRIBUTES_OFFSET, attributes)
            struct.pack_into(">q", data, wire.MAX_TIMESTAMP_OFFSET, max_ts)
            struct.pack_into(">I", data, wire.CRC_OFFSET, google_crc32c.value(bytes(data[wire.CRC_COVERAGE_START :])))
        last_offset = base_offset + last_offset_delta
        self._maybe_roll(len(data), base_offset)
        self._note_leader_epoch(batch_epoch, base_offset)
        seg, position = self._index_and_write(data, last_offset, max_ts)
        self.log_end_offset = last_offset + 1
        self.max_timestamp = max(self.max_timestamp, max_ts)
        self.batch_count += 1
        seg.batches += 1
        if pid >= 0:
            if attributes & wire.CONTROL_MASK:
                self._apply_control(data, base_offset, pid, epoch, max_ts, count)
            else:
                self._apply_data(
                    pid=pid,
                    epoch=epoch,
                    base_offset=base_offset,
                    last_offset=last_offset,
                    base_timestamp=base_ts,
                    max_timestamp=max_ts,
                    base_sequence=base_seq,
                    last_offset_delta=last_offset_delta,
                    transactional=bool(attributes & wire.TRANSACTIONAL_MASK),
                    record_count=count,
                    size=len(data),
                    batches=1,
                )
        self.last_append = AppendInfo(
            base_offset, last_offset, position, seg.base_offset, len(data), max_ts, bytes(data)
        )
        return self.last_append

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        control_type: ControlType | int,
        coordinator_epoch: int,
        timestamp: int,
    ) -> AppendInfo:
        """Write an ABORT/COMMIT marker (what WriteTxnMarkers makes the leader do)."""
        return self.append(
            encode.encode_end_txn_marker_batch(
                offset=0,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                control_type=control_type,
                coordinator_epoch=coordinator_epoch,
                timestamp=timestamp,
            )
        )

    def append_legacy(
        self,
        *,
        magic: int,
        messages: list[tuple[bytes | None, bytes | None, int | None]],
        compression: Compression = Compression.NONE,
    ) -> AppendInfo:
        """Append magic 0/1 messages (a pre-0.11 producer): one entry each, or one compressed wrapper."""
        first = self.log_end_offset
        if compression is Compression.NONE:
            data = b"".join(
                encode.encode_legacy_message(offset=first + i, magic=magic, key=k, value=v, timestamp=ts)
                for i, (k, v, ts) in enumerate(messages)
            )
        else:
            data = encode.encode_legacy_wrapper(
                last_offset=first + len(messages) - 1, magic=magic, messages=messages, compression=compression
            )
        last = first + len(messages) - 1
        max_ts = max((ts for _, _, ts in messages if ts is not None), default=-1)
        self._maybe_roll(len(data), first)
        seg, position = self._index_and_write(data, last, max_ts)
        self.log_end_offset = last + 1
        self.max_timestamp = max(self.max_timestamp, max_ts)
        self.legacy_entry_count += len(messages) if compression is Compression.NONE else 1
        return AppendInfo(first, last, position, seg.base_offset, len(data), max_ts, data)

    def append_raw(self, data: bytes) -> tuple[int, int]:
        """Write bytes at the end of the active segment with no broker bookkeeping.

        For damage: a partial batch (truncated tail) or garbage. Returns
        (segment base offset, position).
        """
        seg = self.active_segment
        return seg.base_offset, self._write(seg, data)

    # ----------------------------------------------------------- bulk path

    def append_data_batches(
        self,
        payload: encode.EncodedRecords,
        *,
        count: int,
        base_timestamps: np.ndarray,
        producer_id: int = wire.NO_PRODUCER_ID,
        producer_epoch: int = wire.NO_PRODUCER_EPOCH,
        first_sequence: int = wire.NO_SEQUENCE,
        is_transactional: bool = False,
    ) -> tuple[int, int]:
        """Append ``count`` batches that share one pre-encoded payload (vectorized).

        Batch ``i`` has base timestamp ``base_timestamps[i]``; sequences (when
        ``first_sequence`` ≥ 0) continue from batch to batch. Same rolling,
        indexing and producer-state rules as :meth:`append`. Returns (first
        offset, last offset).
        """
        if count <= 0:
            raise ValueError("count must be positive")
        if self.timestamp_type is TimestampType.LOG_APPEND_TIME:
            raise ValueError("the bulk path writes CreateTime topics only")
        base_timestamps = np.asarray(base_timestamps, dtype=np.int64)
        per = payload.last_offset_delta + 1
        size = wire.RECORD_BATCH_OVERHEAD + len(payload.data)
        first_offset = self.log_end_offset
        done = 0
        while done < count:
            seg = self.active_segment
            room = (self.segment_bytes - seg.size) // size
            if seg.size > 0 and room <= 0:
                self.roll(self.log_end_offset)
                continue
            n = min(count - done, max(room, 1))
            offsets = self.log_end_offset + per * np.arange(n, dtype=np.int64)
            ts = base_timestamps[done : done + n]
            seqs: np.ndarray | int = wire.NO_SEQUENCE
            if first_sequence >= 0:
                seqs = (first_sequence + (done + np.arange(n, dtype=np.int64)) * per) % (1 << 31)
            rows = encode.encode_data_batches(
                base_offsets=offsets,
                payload=payload,
                base_timestamps=ts,
                producer_ids=producer_id,
                producer_epochs=producer_epoch,
                base_sequences=seqs,
                partition_leader_epoch=self.leader_epoch,
                is_transactional=is_transactional,
            )
            self._note_leader_epoch(self.leader_epoch, int(offsets[0]))
            self._bulk_index(seg, rows, offsets + payload.last_offset_delta, ts + payload.max_timestamp_delta, size)
            self.log_end_offset = int(offsets[-1]) + per
            self.max_timestamp = max(self.max_timestamp, int(ts.max()) + payload.max_timestamp_delta)
            self.batch_count += n
            seg.batches += n
            if producer_id >= 0:
                # Producer state per segment chunk, so a roll's snapshot sees only what precedes it.
                last_seq = wire.NO_SEQUENCE
                if first_sequence >= 0:
                    last_seq = (first_sequence + (done + n) * per - 1) % (1 << 31)
                self._apply_data(
                    pid=producer_id,
                    epoch=producer_epoch,
                    base_offset=int(offsets[0]),
                    last_offset=self.log_end_offset - 1,
                    base_timestamp=int(ts[0]),
                    max_timestamp=int(ts[-1]) + payload.max_timestamp_delta,
                    base_sequence=last_seq - payload.last_offset_delta if last_seq >= 0 else wire.NO_SEQUENCE,
                    last_offset_delta=payload.last_offset_delta,
                    transactional=is_transactional,
                    record_count=payload.record_count * n,
                    size=size * n,
                    batches=n,
                )
            done += n
        last_offset = self.log_end_offset - 1
        return first_offset, last_offset

    def _bulk_index(
        self, seg: _Segment, rows: np.ndarray, last_offsets: np.ndarray, max_ts: np.ndarray, size: int
    ) -> None:
        n = rows.shape[0]
        positions = seg.size + size * np.arange(n, dtype=np.int64)
        # Running max timestamp and the last offset of the batch that first reached it.
        prev = np.int64(seg.max_timestamp)
        running = np.maximum.accumulate(np.maximum(max_ts, prev))
        rises = np.empty(n, dtype=bool)
        rises[0] = running[0] > prev
        rises[1:] = running[1:] > running[:-1]
        idx = np.maximum.accumulate(np.where(rises, np.arange(n), -1))
        offset_of_max = np.where(idx >= 0, last_offsets[np.maximum(idx, 0)], seg.offset_of_max_timestamp)
        # Index entries: before appending batch i, bytes_since > interval (see _index_and_write).
        interval = self.index_interval_bytes
        b0 = seg.bytes_since_last_index_entry
        first = 0 if b0 > interval else (interval - b0) // size + 1
        step = interval // size + 1
        entries = np.arange(first, n, step, dtype=np.int64)
        if entries.size:
            rel = last_offsets[entries] - seg.base_offset
            seg.index += np.stack([rel, positions[entries]], axis=1).astype(">i4").tobytes()
            for i in entries.tolist():  # time index: few entries (one per interval)
                self._maybe_append_time_index(seg, int(running[i]), int(offset_of_max[i]))
            seg.bytes_since_last_index_entry = size * (n - int(entries[-1]))
        else:
            seg.bytes_since_last_index_entry = b0 + size * n
        if running[-1] > seg.max_timestamp:
            seg.max_timestamp = int(running[-1])
            seg.offset_of_max_timestamp = int(offset_of_max[-1])
        self._flush(seg)
        with open(self.segment_path(seg.base_offset), "ab") as f:
            f.write(rows.data)
        seg.size += rows.nbytes
        seg.flushed = seg.size
        seg.next_offset = int(last_offsets[-1]) + 1

    # ------------------------------------------------------ producer state

    def _producer(self, pid: int) -> ProducerState:
        state = self.producers.get(pid)
        if state is None:
            state = self.producers[pid] = ProducerState(producer_id=pid)
        return state

    def _expire_idle(self, pid: int, offset: int) -> None:
        """What the periodic expiry check did to ``pid`` since its last batch, before its batch at ``offset``:
        ``ProducerStateManager.removeExpiredProducers`` at each run (``UnifiedLog.producerExpireCheck`` every
        ``producer.id.expiration.check.interval.ms``) removes a producer with no transaction open and idle for
        at least ``producer.id.expiration.ms`` (``isProducerExpired``); its next batch then starts from
        ``ProducerStateEntry.empty`` (no coordinator epoch). The other producers' removal shows only at
        a snapshot or at ``as_of``, where it is applied."""
        state = self.producers.get(pid)
        start = self.expiry_checks_from
        if state is None or state.current_txn_first_offset >= 0 or start is None or self.clock is None:
            return
        interval = self.producer_id_expiration_check_interval_ms
        due = state.last_timestamp + self.producer_id_expiration_ms  # the first time a check removes it
        check = start + max(1, -(-(due - start) // interval)) * interval  # the first run at or after it
        if check <= self.clock():
            del self.producers[pid]
            self.expired_between.append((check, offset, pid))
            self._producer_events.append((offset, pid, wire.NO_PRODUCER_EPOCH, None, None, check, None, None))

    def _apply_data(
        self,
        *,
        pid: int,
        epoch: int,
        base_offset: int,
        last_offset: int,
        base_timestamp: int,
        max_timestamp: int,
        base_sequence: int,
        last_offset_delta: int,
        transactional: bool,
        record_count: int,
        size: int,
        batches: int,
    ) -> None:
        self._expire_idle(pid, base_offset)
        state = self._producer(pid)
        if epoch != state.producer_epoch:
            state.producer_epoch = epoch
        state.last_sequence = wire.NO_SEQUENCE if base_sequence < 0 else (base_sequence + last_offset_delta) % (1 << 31)
        self._producer_events.append(
            (base_offset, pid, epoch, last_offset, last_offset_delta, max_timestamp, state.last_sequence, transactional)
        )
        state.last_offset = last_offset
        state.offset_delta = last_offset_delta
        state.last_timestamp = max_timestamp
        if not transactional:
            return
        txn = self.open_txns.get(pid)
        if txn is None:
            txn = TxnRecord(
                producer_id=pid,
                producer_epoch=epoch,
                first_offset=base_offset,
                last_offset=last_offset,
                first_timestamp=base_timestamp,
                last_timestamp=max_timestamp,
                previous_marker_offset=self._last_marker_offset.get(pid),
            )
            self.open_txns[pid] = txn
            self.transactions.append(txn)
            state.current_txn_first_offset = base_offset
        txn.last_offset = last_offset
        txn.last_timestamp = max_timestamp
        txn.batch_count += batches
        txn.record_count += record_count
        txn.size_bytes += size

    def _apply_control(self, data: bytearray, offset: int, pid: int, epoch: int, timestamp: int, count: int) -> None:
        if count == 0:
            return  # emptied by the cleaner: ProducerAppendInfo ignores it
        key, value = _first_record_key_value(data)
        if key is None or len(key) < wire.CONTROL_KEY_SIZE:
            return
        control_type = struct.unpack_from(">h", key, 2)[0]
        if control_type not in (ControlType.ABORT, ControlType.COMMIT) or value is None or len(value) < 6:
            return
        coordinator_epoch = struct.unpack_from(">i", value, 2)[0]
        self._expire_idle(pid, offset)
        self._producer_events.append((offset, pid, epoch, None, None, timestamp, coordinator_epoch, None))
        state = self._producer(pid)
        if epoch != state.producer_epoch:  # ProducerStateEntry.maybeUpdateProducerEpoch clears the batch metadata
            state.last_sequence, state.last_offset, state.offset_delta = wire.NO_SEQUENCE, -1, 0
        state.producer_epoch = epoch
        state.coordinator_epoch = coordinator_epoch
        state.current_txn_first_offset = -1
        state.last_timestamp = timestamp
        txn = self.open_txns.pop(pid, None)
        if txn is not None:
            txn.marker_offset = offset
            txn.outcome = "COMMIT" if control_type == ControlType.COMMIT else "ABORT"
            txn.marker_epoch = epoch
            txn.coordinator_epoch = coordinator_epoch
            txn.marker_timestamp = timestamp
            if control_type == ControlType.ABORT:
                # ProducerStateManager.lastStableOffset: the first offset of the earliest
                # *other* open transaction, else the marker offset + 1.
                others = [t.first_offset for t in self.open_txns.values()]
                lso = min(others) if others else offset + 1
                self.active_segment.txn_index += encode.encode_aborted_txn(
                    producer_id=pid, first_offset=txn.first_offset, last_offset=offset, last_stable_offset=lso
                )
        self.markers.append(
            MarkerRecord(offset, pid, epoch, control_type, coordinator_epoch, timestamp, txn is not None)
        )
        self._last_marker_offset[pid] = offset

    # ------------------------------------------------------------ snapshots

    def take_snapshot(self, offset: int | None = None) -> Path | None:
        """Write ``<offset>.snapshot`` with every unexpired producer (sorted by id)."""
        offset = self.log_end_offset if offset is None else offset
        if offset <= self._last_snapshot_offset:
            return None
        if self.clock is not None:
            now = self.clock()
            for pid in [
                p
                for p, s in self.producers.items()
                if s.current_txn_first_offset < 0 and now - s.last_timestamp >= self.producer_id_expiration_ms
            ]:
                del self.producers[pid]
        entries = [self.producers[p].snapshot_entry() for p in sorted(self.producers)]
        path = self.dir / segment_file_name(offset, ".snapshot")
        path.write_bytes(encode.encode_producer_snapshot(entries))
        self._last_snapshot_offset = offset
        if self.snapshot_offsets:  # from the newest snapshot but one on, what a reader may replay
            keep_from = self.snapshot_offsets[-1]
            self._producer_events = [e for e in self._producer_events if e[0] >= keep_from]
            self._producer_events_from = keep_from
            self._snapshot_states = {o: s for o, s in self._snapshot_states.items() if o >= keep_from}
        self.snapshot_offsets.append(offset)
        self._snapshot_states[offset] = {p: replace(self.producers[p]) for p in self.producers}
        return path

    def producers_on_disk(self) -> dict[int, ProducerState]:
        """The producer state as far as this replica's files show it: the newest snapshot at or below the log
        end, then every batch at or after both its offset and the oldest segment's base offset, as a reader
        of the files rebuilds it (``ProducerStateManager.loadFromSnapshot``, ``ProducerAppendInfo``), batches
        below the log start included.

        Equal to :attr:`producers` (the state in the running leader's memory) unless deleted segments fed a
        producer that no snapshot left on disk holds: after DeleteRecords or retention the leader keeps
        every producer (``ProducerStateManager.onLogStartOffsetIncremented`` removes none), and where the
        segment below the log start goes with no snapshot taken since (``ProducerStateManager.takeSnapshot``
        takes none at a roll when nothing was appended past the log start), no byte of a copy shows them.
        """
        first = self.segments[0].base_offset
        on_disk = [o for o in self.snapshot_offsets if o <= self.log_end_offset]
        snap = max(on_disk, default=None)
        start = first if snap is None else max(snap, first)
        if start < self._producer_events_from or (snap is not None and snap not in self._snapshot_states):
            raise NotImplementedError(f"{self.dir}: the files show producer state from {start}, kept from later")
        producers = {} if snap is None else {p: replace(s) for p, s in self._snapshot_states[snap].items()}
        for event in self._producer_events:
            if event[0] >= start:
                _feed(producers, event)
        return producers

    # ------------------------------------------------------------ retention

    def delete_segments_before(self, offset: int) -> list[int]:
        """Retention: delete every segment that lies wholly below ``offset`` (never the active one).

        ``UnifiedLog.deleteSegments``: the log start offset moves to the oldest retained segment's base
        offset (``maybeIncrementLogStartOffset``), then the segments go with the snapshots named after
        them (``UnifiedLog.deleteProducerSnapshots``); every other snapshot stays. Returns the deleted base
        offsets.
        """
        doomed = self._wholly_below(offset)
        if doomed:
            self._increment_log_start_offset(self.segments[len(doomed)].base_offset)
        return self._delete_segments(doomed)

    def delete_records(self, offset: int) -> list[int]:
        """DeleteRecords: the log start offset moves to ``offset``, inside a segment.

        ``UnifiedLog.maybeIncrementLogStartOffset`` only moves the offset (and the LSO with it): no snapshot
        is deleted (``ProducerStateManager.onLogStartOffsetIncremented``) and the producer state in memory
        keeps every producer, those fed by the bytes now below the log start too. The log's next cleanup
        (``deleteLogStartOffsetBreachedSegments``) deletes the segments wholly below it with the snapshots
        named after them; the segment it cut into stays, its bytes below the log start on disk (logically
        deleted) and the snapshot at its base with them, until a restart deletes the snapshots at or below
        the log start (``ProducerStateManager.truncateAndReload``). Only ``log-start-offset-checkpoint``
        tells the new log start. Returns the deleted base offsets.
        """
        if offset <= self.log_start_offset:
            return []
        self._increment_log_start_offset(offset)
        return self._delete_segments(self._wholly_below(offset))

    def _wholly_below(self, offset: int) -> list[int]:
        """The base offsets of the oldest segments whose next segment starts at or below ``offset``."""
        return [
            s.base_offset
            for s, after in zip(self.segments, self.segments[1:], strict=False)
            if after.base_offset <= offset
        ]

    def _increment_log_start_offset(self, offset: int) -> None:
        """``UnifiedLog.maybeIncrementLogStartOffset`` → ``ProducerStateManager.onLogStartOffsetIncremented``:
        the producers stay; the next snapshot is taken only past the newest snapshot file, or past the log
        start where there is none (``lastSnapOffset = latestSnapshotOffset().orElse(logStartOffset)``)."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._last_snapshot_offset = max(self.snapshot_offsets, default=offset)

    def _delete_segments(self, bases: list[int]) -> list[int]:
        """Delete the oldest segments (their base offsets ``bases``) and the snapshots at those offsets."""
        for base in bases:
            seg = self.segments.pop(0)
            assert seg.base_offset == base and self.segments, (seg.base_offset, base)
            self._finish_segment(seg)
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                self.segment_path(seg.base_offset, suffix).unlink(missing_ok=True)
            snap = self.dir / segment_file_name(seg.base_offset, ".snapshot")
            if snap.exists():
                snap.unlink()
                self.snapshot_offsets.remove(seg.base_offset)
        self.deleted_segment_bases += bases
        return bases

    def restart(self) -> list[int]:
        """What a broker's log load does to the producer snapshots (``ProducerStateManager.truncateAndReload``).

        Every snapshot at or below the log start offset or past the log end is deleted; producer
        state is rebuilt from the newest remaining snapshot plus the batches after it, and a new
        snapshot is written at the log end (``UnifiedLog.rebuildProducerState``). With a snapshot
        above the log start the rebuilt state equals the live one (a producer with a transaction in
        flight never expires), so only the files change. Returns the deleted snapshot offsets.
        """
        doomed = [o for o in self.snapshot_offsets if o <= self.log_start_offset or o > self.log_end_offset]
        for o in doomed:
            (self.dir / segment_file_name(o, ".snapshot")).unlink(missing_ok=True)
            self.snapshot_offsets.remove(o)
        if not any(o > self.log_start_offset for o in self.snapshot_offsets) and any(
            t.first_offset < self.log_start_offset for t in self.open_txns.values()
        ):
            raise NotImplementedError("restart without a snapshot above the log start: rebuild from the log start")
        self._last_snapshot_offset = min(self._last_snapshot_offset, self.log_end_offset - 1)
        self.take_snapshot(self.log_end_offset)
        if self.clock is not None:  # the loaded log schedules its expiry check anew
            self.expiry_checks_from = self.clock()
        return doomed

    # ---------------------------------------------------------------- damage

    def corrupt_marker(self, info: AppendInfo, kind: str = "crc_mismatch") -> QuarantineTruth:
        """Damage an ABORT/COMMIT marker batch: a reader cannot see it, so the transaction it closed
        looks open in the copy. The ground truth follows the copy (the transaction is open, and its
        abort may only be VERIFY_FIRST: the marker may be in the damaged bytes)."""
        truth = self.corrupt_batch(info, kind)
        marker = next(m for m in self.markers if m.offset == info.base_offset)
        txn = next(t for t in self.transactions if t.marker_offset == marker.offset)
        txn.marker_offset = None
        txn.outcome = "OPEN"
        txn.marker_epoch = txn.coordinator_epoch = txn.marker_timestamp = None
        self.open_txns[txn.producer_id] = txn
        self.markers.remove(marker)
        # the producer state a reader can rebuild: the marker never happened (its coordinator epoch too)
        state = self.producers[txn.producer_id]
        earlier = [m for m in self.markers if m.producer_id == txn.producer_id and m.offset < marker.offset]
        state.coordinator_epoch = earlier[-1].coordinator_epoch if earlier else -1
        state.current_txn_first_offset = txn.first_offset
        return truth

    def _patch(self, segment_base: int, position: int, data: bytes) -> None:
        seg = next(s for s in self.segments if s.base_offset == segment_base)
        if position >= seg.flushed and not seg.closed:
            start = position - seg.flushed
            seg.pending[start : start + len(data)] = data
            return
        with open(self.segment_path(segment_base), "r+b") as f:
            f.seek(position)
            f.write(data)

    def corrupt_batch(self, info: AppendInfo, kind: str) -> QuarantineTruth:
        """Damage an appended batch in place; returns the quarantine row a reader owes.

        ``crc_mismatch``: one payload byte flipped (length and header intact).
        ``bad_magic``: magic byte set to 7. ``bad_length``: batchLength set to 3
        (below the 14-byte minimum). The batch keeps its place, so the next
        batch is where a reader must resynchronise.
        """
        original = info.data
        if kind == "crc_mismatch":
            pos = len(original) - 1
            self._patch(info.segment_base_offset, info.position + pos, bytes([original[pos] ^ 0x5A]))
        elif kind == "bad_magic":
            self._patch(info.segment_base_offset, info.position + wire.MAGIC_OFFSET, b"\x07")
        elif kind == "bad_length":
            self._patch(info.segment_base_offset, info.position + wire.BATCH_LENGTH_OFFSET, struct.pack(">i", 3))
        else:
            raise ValueError(f"unknown damage kind {kind!r}")
        next(s for s in self.segments if s.base_offset == info.segment_base_offset).batches -= 1
        truth = QuarantineTruth(
            file=str(self.segment_path(info.segment_base_offset)),
            position=info.position,
            length=info.size,
            reason=kind,
            first_offset=info.base_offset,
            last_offset=info.last_offset,
        )
        self.damage.append(truth)
        return truth

    def append_truncated_tail(self, batch: bytes, keep_bytes: int) -> QuarantineTruth:
        """Write only the first ``keep_bytes`` of ``batch``: a copied active segment's partial tail."""
        if not 0 < keep_bytes < len(batch):
            raise ValueError("keep_bytes must cut the batch")
        data = bytearray(batch)
        _BASE_OFFSET.pack_into(data, 0, self.log_end_offset)
        base, position = self.append_raw(bytes(data[:keep_bytes]))
        truth = QuarantineTruth(
            file=str(self.segment_path(base)),
            position=position,
            length=keep_bytes,
            reason="truncated_tail",
            first_offset=self.log_end_offset,  # where the cut batch would have begun
        )
        self.damage.append(truth)
        return truth

    # ----------------------------------------------------------------- close

    def close(self, *, preallocate_active_indexes: bool = False, snapshot: bool = True) -> None:
        """Flush everything, write the indexes, a final snapshot and the partition's metadata files.

        ``preallocate_active_indexes`` leaves the active segment's ``.index`` and
        ``.timeindex`` at their preallocated size (zero-filled tail), as in a copy
        taken from a running broker.
        """
        if self._closed:
            return
        active = self.active_segment
        for seg in self.segments:
            self._finish_segment(seg)
        if preallocate_active_indexes:
            size = wire.DEFAULT_SEGMENT_INDEX_BYTES
            for suffix, entry in ((".index", wire.OFFSET_INDEX_ENTRY_SIZE), (".timeindex", wire.TIME_INDEX_ENTRY_SIZE)):
                with open(self.segment_path(active.base_offset, suffix), "r+b") as f:
                    f.truncate(size // entry * entry)
        if snapshot:
            self.take_snapshot(self.log_end_offset)
        epochs = self.leader_epoch_starts or [(self.leader_epoch, self.log_start_offset)]
        (self.dir / "leader-epoch-checkpoint").write_text(
            "0\n" + f"{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs)
        )
        if self.topic_id is not None:
            tid = base64.urlsafe_b64encode(self.topic_id).decode().rstrip("=")
            (self.dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {tid}\n")
        self._closed = True

    # ---------------------------------------------------------- inspection

    def segment_files(self) -> list[Path]:
        return [self.segment_path(s.base_offset) for s in self.segments]

    @property
    def retained_batch_count(self) -> int:
        """Readable v2 batches in the segments still on disk."""
        return sum(s.batches for s in self.segments)

    def retained_markers(self) -> list[MarkerRecord]:
        return [m for m in self.markers if m.offset >= self.log_start_offset]


def _read_varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (value >> 1) ^ -(value & 1), pos


def _first_record_key_value(batch: bytes | bytearray) -> tuple[bytes | None, bytes | None]:
    """Key and value of the first record of an uncompressed batch (control batches are never compressed)."""
    pos = wire.RECORDS_OFFSET
    _, pos = _read_varint(batch, pos)  # length
    pos += 1  # attributes
    _, pos = _read_varint(batch, pos)  # timestamp delta
    _, pos = _read_varint(batch, pos)  # offset delta
    key_len, pos = _read_varint(batch, pos)
    key = None
    if key_len >= 0:
        key = bytes(batch[pos : pos + key_len])
        pos += key_len
    value_len, pos = _read_varint(batch, pos)
    value = None if value_len < 0 else bytes(batch[pos : pos + value_len])
    return key, value
