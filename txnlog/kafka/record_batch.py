"""Walk a ``.log`` segment: one row of header columns per magic-2 batch, damage as quarantine.

Wire grammar (DefaultRecordBatch.java, FileLogInputStream.java)::

    Entry       => baseOffset:int64 batchLength:int32 <batchLength bytes>     (any magic)
    RecordBatch => baseOffset:int64 batchLength:int32 partitionLeaderEpoch:int32
                   magic:int8(=2) crc:uint32 attributes:int16 lastOffsetDelta:int32
                   baseTimestamp:int64 maxTimestamp:int64 producerId:int64
                   producerEpoch:int16 baseSequence:int32 recordsCount:int32
                   records                                    (61-byte header)
    crc        = CRC-32C over [attributes, end of batch)      (partitionLeaderEpoch not covered)
    attributes = codec:bits 0-2 | timestampType:bit 3 | isTransactional:bit 4
                 | isControl:bit 5 | hasDeleteHorizon:bit 6   (bits 7-15 unused)
    Record     => length:varint attributes:int8 timestampDelta:varlong offsetDelta:varint
                  keyLength:varint key valueLength:varint value headersCount:varint headers

How the walk treats bad bytes (docs/design.md §4a) — a broker's recovery truncates at
the first bad batch, an offline analyser must not lose what follows:

* a partial last entry (a copied active segment) ends the segment with one
  ``truncated_tail`` entry running to the end of the buffer — if what is there
  could be the start of a batch (magic, length, visible header fields, base
  offset after the previous batch); otherwise it is damage;
* a bad CRC, an impossible length (< 49 after the length field, or past the end
  while a valid batch follows) or a magic other than 0/1/2 inside the segment
  becomes one quarantine entry covering ``[bad position, next valid batch)``;
  the next valid batch is found by scanning forward byte by byte for a
  plausible header whose CRC checks (:func:`_resync`), so everything after the
  damage still decodes. Adjacent entries with the same reason are merged;
* with no valid batch after it, damage is the tail: a complete entry with a bad
  CRC is quarantined by its own length and the walk looks at what follows it;
  other damage runs to the end of the data;
* an all-zero remainder (``log.preallocate``, or a crash in a preallocated
  file) ends the segment quietly and is counted in ``zero_padding_bytes``;
* legacy magic 0/1 entries are skipped and counted: they cannot be transactional.
  Their plain CRC-32 is checked too, so that damage which happens to leave a
  0 or 1 in the magic byte is not skipped as "legacy";
* bytes missing at the end of a batch can leave it valid while it swallows the
  first bytes of the next one (:func:`_overlapping_next`): both are emitted and
  the shared bytes counted in ``overlap_bytes``;
* nothing here raises on input.

Batches whose CRC fails are never emitted: their header cannot be trusted.
``crc_valid`` is therefore always True; it is a column so that readers of the
table need not know this. With ``check_crc=False`` it is also True and the scan
says ``crc_checked=False``.

Data batches are never decompressed. Control batches (markers) are parsed: the
first record's key (version, type) and, for ABORT/COMMIT, the EndTxnMarker value
(version, coordinator epoch) — EndTransactionMarker and :mod:`txnlog.kafka.control`. A broker
never compresses them; one that is compressed is decompressed within
``max_decompressed_bytes`` for the whole scan (a budget, so that a segment of
many small bombs costs no more than one), else ``decompressed_too_large``.

All per-batch work is compiled with numba, in one pass: the walk follows the chain,
checks CRCs and, while each valid header is in cache, writes all its fields and
the flags derived from them straight into native columns (:func:`_walk`). A run of
valid v2 batches goes through a tight loop; anything else takes the careful path
above. (Walking first and reading the headers in a second pass missed the cache
twice per 1 KiB batch; gathering the headers into an (n, 61) matrix viewed as a
packed big-endian structured dtype measured 2-4x slower on 100-byte batches.
RESULTS.md §1.) The columns of large segments live in reused, huge-page-aligned
memory (:class:`_OutputBlocks`).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.binary import be_i16, be_i32, be_i64, be_u32
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, budget_detail, decompress
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.crc import NUMBA_CACHEABLE, crc32_ieee, crc32c_update
from txnlog.kafka.errors import DecodeError, QuarantineEntry
from txnlog.kafka.jit import jit
from txnlog.kafka.records import RECORD_OK, read_record
from txnlog.kafka.wire import (
    ATTRIBUTES_OFFSET,
    ATTRIBUTES_UNUSED_MASK,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_KEY_SIZE,
    CONTROL_MASK,
    CRC_COVERAGE_START,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    END_TXN_MARKER_VALUE_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_CRC_OFFSET,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_COMPRESSION_CODEC,
    MAX_PLAUSIBLE_MESSAGE_VERSION,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Compression,
    ControlType,
    TimestampType,
)

__all__ = [
    "BATCH_COLUMNS",
    "Buffer",
    "SegmentScan",
    "as_uint8",
    "mapped_file",
    "scan_segment",
    "scan_segment_file",
]

Buffer = bytes | bytearray | memoryview | np.ndarray

#: The columns of :attr:`SegmentScan.batches`, in order, with their dtypes. The single source of truth.
BATCH_COLUMNS: dict[str, np.dtype] = {
    "position": np.dtype(np.int64),  # byte position of the batch in the file
    "base_offset": np.dtype(np.int64),
    "last_offset": np.dtype(np.int64),  # base_offset + last_offset_delta
    "batch_length": np.dtype(np.int32),  # bytes after the length field; the batch is 12 + this
    "partition_leader_epoch": np.dtype(np.int32),
    "magic": np.dtype(np.int8),
    "crc": np.dtype(np.uint32),  # as stored
    "crc_valid": np.dtype(np.bool_),
    "compression": np.dtype(np.int8),  # wire.Compression
    "timestamp_type": np.dtype(np.int8),  # wire.TimestampType
    "is_transactional": np.dtype(np.bool_),
    "is_control": np.dtype(np.bool_),
    "has_delete_horizon": np.dtype(np.bool_),  # attributes bit 6: base_timestamp is the delete horizon
    "last_offset_delta": np.dtype(np.int32),
    # The delete horizon instead when attributes bit 6 is set (cleaned batches, DefaultRecordBatch.deleteHorizonMs).
    "base_timestamp": np.dtype(np.int64),
    "max_timestamp": np.dtype(np.int64),
    "producer_id": np.dtype(np.int64),
    "producer_epoch": np.dtype(np.int16),
    "base_sequence": np.dtype(np.int32),
    "record_count": np.dtype(np.int32),
    # Control batches only (-1 elsewhere); see control_status.
    "control_key_version": np.dtype(np.int16),
    "control_type": np.dtype(np.int16),  # wire.ControlType value, or an unknown raw type
    "control_value_version": np.dtype(np.int16),
    "coordinator_epoch": np.dtype(np.int32),
    "marker_timestamp": np.dtype(np.int64),  # the control record's timestamp
    "control_status": np.dtype(np.int8),  # control.ControlStatus
}

# --- constants frozen into the compiled code -----------------------------------
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49: smallest legal batchLength field
_ENTRY_V2 = -1
_ENTRY_LEGACY = -2
_R_CRC = errors.REASON_CODES[errors.CRC_MISMATCH]
_R_BAD_LENGTH = errors.REASON_CODES[errors.BAD_LENGTH]
_R_BAD_MAGIC = errors.REASON_CODES[errors.BAD_MAGIC]
_R_TRUNCATED = errors.REASON_CODES[errors.TRUNCATED_TAIL]
#: When a resync candidate fails only the base-offset preference, look this much further for one
#: that satisfies it before settling (bounds the work per damaged region).
_RESYNC_PREFERENCE_WINDOW = 16 << 20
#: How far a batch may start inside the previous one after bytes were deleted (see _overlapping_next).
_MAX_OVERLAP = 8
#: The least distance between the starts of two batches the walk emits (see _max_batches).
_MIN_BATCH_STRIDE = RECORD_BATCH_OVERHEAD - _MAX_OVERLAP

_CS_END_TXN = int(ControlStatus.END_TXN_MARKER)
_CS_ZERO = int(ControlStatus.ZERO_RECORDS)
_CS_OTHER = int(ControlStatus.OTHER_TYPE)
_CS_BAD_KEY = int(ControlStatus.BAD_KEY)
_CS_BAD_VALUE = int(ControlStatus.BAD_VALUE)
_ABORT = int(ControlType.ABORT)
_COMMIT = int(ControlType.COMMIT)

# Why a control record got status BAD_KEY / BAD_VALUE (index = code).
_CONTROL_DETAILS = (
    "",
    "record framing is broken",
    "record count is negative",
    "key is null or shorter than 4 bytes",
    "key version is negative",
    "key version is implausible (not a control key)",
    "value is null",
    "value is shorter than 6 bytes",
    "value version is negative",
    "value version is implausible (not an EndTxnMarker)",
    "records could not be decompressed",
)
_CD_FRAMING, _CD_NEG_COUNT, _CD_KEY_SHORT, _CD_KEY_NEG, _CD_KEY_BIG = 1, 2, 3, 4, 5
_CD_VALUE_NULL, _CD_VALUE_SHORT, _CD_VALUE_NEG, _CD_VALUE_BIG = 6, 7, 8, 9
_CD_DECOMPRESSION = 10


# --- the compiled walk ------------------------------------------------------------


@jit(cacheable=NUMBA_CACHEABLE)
def _batch_crc_ok(buf: np.ndarray, pos: int, size: int) -> bool:
    stored = be_u32(buf, pos + CRC_OFFSET)
    return crc32c_update(0, buf, pos + CRC_COVERAGE_START, pos + LOG_OVERHEAD + size) == stored


@jit(cacheable=NUMBA_CACHEABLE, inline=True)
def _entry_status(buf: np.ndarray, pos: int, n: int, check_crc: bool) -> int:
    """_ENTRY_V2, _ENTRY_LEGACY, or the reason code of what is wrong with the entry at ``pos``.

    _R_TRUNCATED means "the entry runs past the end of the buffer"; whether that is
    a truncated tail or an impossible length is decided by the caller.
    """
    rem = n - pos
    if rem < HEADER_SIZE_UP_TO_MAGIC:
        if rem >= LOG_OVERHEAD and be_i32(buf, pos + BATCH_LENGTH_OFFSET) < LEGACY_RECORD_OVERHEAD_V0:
            return _R_BAD_LENGTH
        return _R_TRUNCATED
    size = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
    magic = buf[pos + MAGIC_OFFSET]
    if magic == CURRENT_MAGIC:
        if size < _MIN_BATCH_LENGTH:
            return _R_BAD_LENGTH
        if size > rem - LOG_OVERHEAD:
            return _R_TRUNCATED
        if check_crc and not _batch_crc_ok(buf, pos, size):
            return _R_CRC
        return _ENTRY_V2
    if magic == 0 or magic == 1:
        minimum = LEGACY_RECORD_OVERHEAD_V0 if magic == 0 else LEGACY_RECORD_OVERHEAD_V1
        if size < minimum:
            return _R_BAD_LENGTH
        if size > rem - LOG_OVERHEAD:
            return _R_TRUNCATED
        if check_crc and crc32_ieee(buf, pos + MAGIC_OFFSET, pos + LOG_OVERHEAD + size) != be_u32(
            buf, pos + LEGACY_CRC_OFFSET
        ):
            return _R_CRC
        return _ENTRY_LEGACY
    return _R_BAD_MAGIC


@jit(cacheable=NUMBA_CACHEABLE)
def _plausible_header(buf: np.ndarray, q: int, n: int) -> bool:
    """Cheap structural checks of a complete v2 header at ``q`` (no CRC, no base offset)."""
    if q + RECORD_BATCH_OVERHEAD > n or buf[q + MAGIC_OFFSET] != CURRENT_MAGIC:
        return False
    size = be_i32(buf, q + BATCH_LENGTH_OFFSET)
    if size < _MIN_BATCH_LENGTH or size > n - q - LOG_OVERHEAD:
        return False
    attributes = be_i16(buf, q + ATTRIBUTES_OFFSET)
    if attributes & ATTRIBUTES_UNUSED_MASK or (attributes & COMPRESSION_CODEC_MASK) > MAX_COMPRESSION_CODEC:
        return False
    return be_i32(buf, q + LAST_OFFSET_DELTA_OFFSET) >= 0 and be_i32(buf, q + RECORDS_COUNT_OFFSET) >= 0


@jit(cacheable=NUMBA_CACHEABLE)
def _plausible_batch(buf: np.ndarray, q: int, n: int, check_crc: bool, min_base: int) -> bool:
    if not _plausible_header(buf, q, n) or be_i64(buf, q + BASE_OFFSET_OFFSET) < min_base:
        return False
    return not check_crc or _batch_crc_ok(buf, q, be_i32(buf, q + BATCH_LENGTH_OFFSET))


@jit(cacheable=NUMBA_CACHEABLE)
def _followed_well(buf: np.ndarray, q: int, n: int, check_crc: bool, zero_start: int) -> bool:
    """Does what follows the (valid) batch at ``q`` look like the rest of a log?

    True when the batch ends the data (end of buffer or start of zero padding), or is
    followed by a valid entry or by a plausible partial batch at the tail.
    """
    s = q + LOG_OVERHEAD + be_i32(buf, q + BATCH_LENGTH_OFFSET)
    if s >= n or s >= zero_start:
        return True
    status = _entry_status(buf, s, n, check_crc)
    if status == _ENTRY_V2 or status == _ENTRY_LEGACY:
        return True
    last = be_i64(buf, q + BASE_OFFSET_OFFSET) + be_i32(buf, q + LAST_OFFSET_DELTA_OFFSET)
    return status == _R_TRUNCATED and _plausible_partial(buf, s, n, last + 1)


@jit(cacheable=NUMBA_CACHEABLE)
def _resync(buf: np.ndarray, pos: int, n: int, check_crc: bool, min_base: int, memo: np.ndarray) -> int:
    """Position of the next valid v2 batch after the damaged entry at ``pos``, or -1.

    The first valid batch (plausible header, CRC) after ``pos`` wins, with one
    exception: a batch whose base offset is below ``min_base`` (the previous batch's
    last offset + 1) *and* that is not followed by a valid entry (or the end) is
    suspect — typically a producer batch (base offset 0) embedded in a record value of
    the damaged batch. It is passed over only for a later valid batch (within
    _RESYNC_PREFERENCE_WINDOW bytes) whose base offset is >= ``min_base``. baseOffset is
    outside the CRC, so neither signal alone is trusted: a corrupt base offset of the
    previous batch must not hide the genuine batches after the damage.

    ``memo`` keeps repeated resyncs linear: memo[0] is a position from which no valid
    batch follows at all; from memo[1] on no unsuspect batch follows for a min_base
    >= memo[2]; memo[3] is where the all-zero tail of the buffer starts.
    """
    start = pos + 1
    if start >= memo[0]:
        return -1
    zero_start = memo[3]
    prefer = min_base > 0 and not (start >= memo[1] and min_base >= memo[2])
    # No shortcut to "pos + 12 + the damaged entry's length": that length may be the damage,
    # and a flipped bit can land it exactly on a later batch, skipping a good one.
    fallback = -1
    limit = n - RECORD_BATCH_OVERHEAD
    q = start
    while q <= limit:
        if buf[q + MAGIC_OFFSET] == CURRENT_MAGIC and _plausible_batch(buf, q, n, check_crc, 0):
            base = be_i64(buf, q)
            if fallback < 0:
                if not prefer or base >= min_base or _followed_well(buf, q, n, check_crc, zero_start):
                    return q
                fallback = q
                # Do not look for a better candidate forever.
                limit = min(limit, q + _RESYNC_PREFERENCE_WINDOW)
            else:
                # Only the base offset can tell the suspect apart from the next genuine batch; if this
                # candidate is below min_base too, min_base itself is suspect: keep log order.
                return q if base >= min_base else fallback
        q += 1
    if fallback >= 0:
        if limit >= n - RECORD_BATCH_OVERHEAD:
            memo[1] = start
            memo[2] = min_base
        return fallback
    memo[0] = start
    return -1


@jit(cacheable=NUMBA_CACHEABLE)
def _plausible_partial(buf: np.ndarray, pos: int, n: int, min_base: int) -> bool:
    """Could the bytes from ``pos`` to the end be the start of a batch (or legacy entry) cut short?"""
    rem = n - pos
    if rem >= 8 and be_i64(buf, pos + BASE_OFFSET_OFFSET) < min_base:
        return False
    if rem < LOG_OVERHEAD:
        return True
    size = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
    if size <= rem - LOG_OVERHEAD:
        return False  # not cut short at all
    if rem < HEADER_SIZE_UP_TO_MAGIC:
        return size >= LEGACY_RECORD_OVERHEAD_V0
    magic = buf[pos + MAGIC_OFFSET]
    if magic == 0:
        return size >= LEGACY_RECORD_OVERHEAD_V0
    if magic == 1:
        return size >= LEGACY_RECORD_OVERHEAD_V1
    if magic != CURRENT_MAGIC or size < _MIN_BATCH_LENGTH:
        return False
    if rem >= ATTRIBUTES_OFFSET + 2:
        attributes = be_i16(buf, pos + ATTRIBUTES_OFFSET)
        if attributes & ATTRIBUTES_UNUSED_MASK or (attributes & COMPRESSION_CODEC_MASK) > MAX_COMPRESSION_CODEC:
            return False
    if rem >= LAST_OFFSET_DELTA_OFFSET + 4 and be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET) < 0:
        return False
    if rem >= RECORDS_COUNT_OFFSET + 4 and be_i32(buf, pos + RECORDS_COUNT_OFFSET) < 0:
        return False
    return True


@jit(cacheable=NUMBA_CACHEABLE, inline=True)
def _add_quarantine(
    q_pos: np.ndarray, q_len: np.ndarray, q_code: np.ndarray, nq: int, pos: int, length: int, code: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    if length <= 0:
        return q_pos, q_len, q_code, nq
    # Adjacent regions with the same reason (e.g. a run of batches with bad CRCs) are one entry.
    if nq > 0 and q_code[nq - 1] == code and q_pos[nq - 1] + q_len[nq - 1] == pos and code != _R_TRUNCATED:
        q_len[nq - 1] += length
        return q_pos, q_len, q_code, nq
    if nq == q_pos.size:
        grown = max(16, 2 * nq)
        new_pos = np.empty(grown, np.int64)
        new_len = np.empty(grown, np.int64)
        new_code = np.empty(grown, np.int8)
        new_pos[:nq] = q_pos[:nq]
        new_len[:nq] = q_len[:nq]
        new_code[:nq] = q_code[:nq]
        q_pos, q_len, q_code = new_pos, new_len, new_code
    q_pos[nq] = pos
    q_len[nq] = length
    q_code[nq] = code
    return q_pos, q_len, q_code, nq + 1


@jit(cacheable=NUMBA_CACHEABLE)
def _overlapping_next(buf: np.ndarray, pos: int, n: int, check_crc: bool, min_base: int, prev_start: int) -> int:
    """A valid batch starting up to _MAX_OVERLAP bytes *before* ``pos``, the end of the previous batch.

    When bytes go missing at the end of a batch, the batch can still pass its CRC by
    "borrowing" the first bytes of the next one — typically zeros: a batch usually ends
    with 0x00 (no headers) and the next starts with the zero high bytes of its base
    offset. Both batches are then intact on disk, overlapping. Only a batch whose base
    offset follows the previous one is taken.
    """
    lowest = max(pos - _MAX_OVERLAP, prev_start + 1)
    for q in range(pos - 1, lowest - 1, -1):
        if _plausible_batch(buf, q, n, check_crc, min_base):
            return q
    return -1


@jit(cacheable=NUMBA_CACHEABLE, inline=True)
def _emit(cols, i: int, buf: np.ndarray, p: int, size: int) -> None:
    """Row ``i`` of every batch column from the header at ``p`` (in cache: the walk just read its length)."""
    (
        position,
        base_offset,
        last_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        crc_valid,
        compression,
        timestamp_type,
        is_transactional,
        is_control,
        has_delete_horizon,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
        control_key_version,
        control_type,
        control_value_version,
        coordinator_epoch,
        marker_timestamp,
        control_status,
    ) = cols
    base = be_i64(buf, p + BASE_OFFSET_OFFSET)
    delta = be_i32(buf, p + LAST_OFFSET_DELTA_OFFSET)
    attributes = be_i16(buf, p + ATTRIBUTES_OFFSET)
    position[i] = p
    base_offset[i] = base
    last_offset[i] = base + delta
    batch_length[i] = size
    leader_epoch[i] = be_i32(buf, p + PARTITION_LEADER_EPOCH_OFFSET)
    magic[i] = CURRENT_MAGIC
    crc[i] = be_u32(buf, p + CRC_OFFSET)
    crc_valid[i] = True  # batches whose CRC fails are never emitted
    compression[i] = attributes & COMPRESSION_CODEC_MASK
    timestamp_type[i] = 1 if attributes & TIMESTAMP_TYPE_MASK else 0
    is_transactional[i] = (attributes & TRANSACTIONAL_MASK) != 0
    is_control[i] = (attributes & CONTROL_MASK) != 0
    has_delete_horizon[i] = (attributes & DELETE_HORIZON_MASK) != 0
    last_offset_delta[i] = delta
    base_timestamp[i] = be_i64(buf, p + BASE_TIMESTAMP_OFFSET)
    max_timestamp[i] = be_i64(buf, p + MAX_TIMESTAMP_OFFSET)
    producer_id[i] = be_i64(buf, p + PRODUCER_ID_OFFSET)
    producer_epoch[i] = be_i16(buf, p + PRODUCER_EPOCH_OFFSET)
    base_sequence[i] = be_i32(buf, p + BASE_SEQUENCE_OFFSET)
    record_count[i] = be_i32(buf, p + RECORDS_COUNT_OFFSET)
    # Filled for control batches afterwards (_fill_control_columns): few, and their records are elsewhere.
    control_key_version[i] = -1
    control_type[i] = -1
    control_value_version[i] = -1
    coordinator_epoch[i] = -1
    marker_timestamp[i] = -1
    control_status[i] = 0


@jit(cacheable=NUMBA_CACHEABLE)
def _walk(
    buf: np.ndarray,
    check_crc: bool,
    cols,
    tight_loop: bool,
    start: int,
    stops: np.ndarray,
    stop_after: int,
    first_row: int,
):
    """Follow the chain of entries, writing each valid batch's header into ``cols`` as it passes.

    One pass: the header is read while it is in cache (the walk has just read its length and
    magic), and the flags are derived here, not in numpy passes over the columns. ``cols`` are
    the arrays of BATCH_COLUMNS, with room for :func:`_max_batches` rows from ``first_row`` on (the walk writes
    its first batch there). Returns (batch count,
    quarantine arrays, counters, where it stopped). ``tight_loop=False`` sends every entry the
    careful way (the tests' reference: both must give the same result).

    A piece of a segment (txnlog.engine.spark.stitch) starts at ``start``, a valid v2 batch, and stops at
    the first entry start of its chain that is one of ``stops`` (sorted positions after ``start``):
    the position returned last; ``buf.size`` when the walk reached the end of the data. The whole
    buffer is still what the walk sees (resync scans, the zero tail, the truncated tail), so from a
    valid batch on it does exactly what the walk from 0 does when it reaches that batch. It also stops
    at the first valid v2 batch that starts at or after ``stop_after`` (a window of the segment, see
    :func:`_scan`): a walk from there goes on as this one would have.
    """
    n = buf.size
    nb = first_row
    q_pos = np.empty(16, np.int64)
    q_len = np.empty(16, np.int64)
    q_code = np.empty(16, np.int8)
    nq = 0
    legacy_entries = 0
    overlap = 0
    prev_start = -1  # start and end of the last batch emitted
    prev_end = -1
    legacy_bytes = 0
    zero_padding = 0
    # Everything from zero_start on is 0x00: preallocated space, not data.
    zero_start = n
    while zero_start > 0 and buf[zero_start - 1] == 0:
        zero_start -= 1
    memo = np.array([n + 1, n + 1, 0, zero_start], np.int64)
    # The previous valid entry; its last offset + 1 (min_base) is only needed at damage.
    last_entry = -1
    last_is_legacy = False
    pos = start
    stop_k = 0
    next_stop = stops[0] if stops.size else n + 1
    stopped = n
    while pos < n:
        if pos >= next_stop:
            # An entry start at or past the next stop: hand over if it is a stop, else walk on.
            while stop_k < stops.size and stops[stop_k] < pos:
                stop_k += 1
            if stop_k < stops.size and stops[stop_k] == pos:
                stopped = pos
                break
            next_stop = stops[stop_k] if stop_k < stops.size else n + 1
        # The common case, a run of valid v2 batches, in a tight loop: the same checks as
        # _entry_status makes of a v2 entry (a batch of at least 61 bytes inside the buffer, CRC).
        # Anything else -- legacy entries, damage, a cut tail, padding -- goes the careful way below.
        if tight_loop:
            run_start = nb
            while pos + RECORD_BATCH_OVERHEAD <= n and pos < next_stop:
                size = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
                if (
                    buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC
                    or size < _MIN_BATCH_LENGTH
                    or size > n - pos - LOG_OVERHEAD
                ):
                    break
                if check_crc and not _batch_crc_ok(buf, pos, size):
                    break
                if pos >= stop_after:
                    stopped = pos
                    break
                _emit(cols, nb, buf, pos, size)
                nb += 1
                last_entry = pos
                pos += LOG_OVERHEAD + size
            if nb > run_start:
                last_is_legacy = False
                prev_start = last_entry
                prev_end = pos
            if pos >= n or stopped < n:
                break
            if pos >= next_stop:
                continue
        status = _entry_status(buf, pos, n, check_crc)
        if status == _ENTRY_V2:
            if pos >= stop_after:
                stopped = pos
                break
            size = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
            _emit(cols, nb, buf, pos, size)
            nb += 1
            last_entry = pos
            last_is_legacy = False
            pos += LOG_OVERHEAD + size
            prev_start = last_entry
            prev_end = pos
            continue
        if status == _ENTRY_LEGACY:
            size = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
            legacy_entries += 1
            legacy_bytes += LOG_OVERHEAD + size
            last_entry = pos
            last_is_legacy = True
            pos += LOG_OVERHEAD + size
            continue
        # Damage at pos.
        if pos >= zero_start:
            zero_padding = n - pos
            break
        if last_entry < 0:
            min_base = 0
        elif last_is_legacy:
            # A legacy entry's offset is its last (inner) offset (AbstractLegacyRecordBatch).
            min_base = be_i64(buf, last_entry) + 1
        else:
            min_base = be_i64(buf, last_entry) + be_i32(buf, last_entry + LAST_OFFSET_DELTA_OFFSET) + 1
        if pos == prev_end and min_base > 0:
            back = _overlapping_next(buf, pos, n, check_crc, min_base, prev_start)
            if back >= 0:
                overlap += pos - back
                pos = back
                continue
        nxt = _resync(buf, pos, n, check_crc, min_base, memo)
        if nxt >= 0:
            code = _R_BAD_LENGTH if status == _R_TRUNCATED else status
            q_pos, q_len, q_code, nq = _add_quarantine(q_pos, q_len, q_code, nq, pos, nxt - pos, code)
            pos = nxt
            continue
        # No valid batch follows: this is the tail.
        if status == _R_CRC:
            # A complete entry (by its own length): quarantine it and look at what follows it.
            end = pos + LOG_OVERHEAD + be_i32(buf, pos + BATCH_LENGTH_OFFSET)
            q_pos, q_len, q_code, nq = _add_quarantine(q_pos, q_len, q_code, nq, pos, end - pos, _R_CRC)
            pos = end
            continue
        if status == _R_TRUNCATED:
            code = _R_TRUNCATED if _plausible_partial(buf, pos, n, min_base) else _R_BAD_LENGTH
            q_pos, q_len, q_code, nq = _add_quarantine(q_pos, q_len, q_code, nq, pos, n - pos, code)
            break
        q_pos, q_len, q_code, nq = _add_quarantine(q_pos, q_len, q_code, nq, pos, zero_start - pos, status)
        zero_padding = n - zero_start
        break
    return (
        nb - first_row,
        q_pos[:nq].copy(),
        q_len[:nq].copy(),
        q_code[:nq].copy(),
        legacy_entries,
        legacy_bytes,
        zero_padding,
        overlap,
        stopped,
    )


@jit()
def _parse_control_records(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    counts: np.ndarray,
    base_ts: np.ndarray,
    max_ts: np.ndarray,
    log_append_time: np.ndarray,
):
    """First record of each control batch: key (version, type), EndTxnMarker value, timestamp.

    ``buf[starts[i]:ends[i]]`` holds the (uncompressed) records of batch i.
    Rules: txnlog.kafka.control; record framing: txnlog.kafka.records.read_record.
    """
    m = starts.size
    key_version = np.full(m, -1, np.int16)
    control_type = np.full(m, -1, np.int16)
    value_version = np.full(m, -1, np.int16)
    coordinator_epoch = np.full(m, -1, np.int32)
    marker_ts = np.full(m, -1, np.int64)
    status = np.empty(m, np.int8)
    detail = np.zeros(m, np.int8)
    for i in range(m):
        if counts[i] == 0:
            status[i] = _CS_ZERO
            continue
        status[i] = _CS_BAD_KEY
        if counts[i] < 0:
            detail[i] = _CD_NEG_COUNT
            continue
        detail[i] = _CD_FRAMING
        (
            frame,
            _next,
            ts_delta,
            _offset_delta,
            key_start,
            key_len,
            value_start,
            value_len,
            _headers_start,
            _header_count,
        ) = read_record(buf, starts[i], ends[i])
        if frame != RECORD_OK:
            continue
        marker_ts[i] = max_ts[i] if log_append_time[i] else base_ts[i] + ts_delta
        detail[i] = 0
        if key_len < CONTROL_KEY_SIZE:
            detail[i] = _CD_KEY_SHORT
            continue
        kv = be_i16(buf, key_start)
        if kv < 0 or kv > MAX_PLAUSIBLE_MESSAGE_VERSION:
            detail[i] = _CD_KEY_NEG if kv < 0 else _CD_KEY_BIG
            continue
        key_version[i] = kv
        kt = be_i16(buf, key_start + 2)
        control_type[i] = kt
        if kt != _ABORT and kt != _COMMIT:
            status[i] = _CS_OTHER
            continue
        status[i] = _CS_BAD_VALUE
        if value_len < 0:
            detail[i] = _CD_VALUE_NULL
            continue
        if value_len >= 2:
            value_version[i] = be_i16(buf, value_start)
        if value_len < END_TXN_MARKER_VALUE_SIZE:
            detail[i] = _CD_VALUE_SHORT
            continue
        vv = be_i16(buf, value_start)
        if vv < 0 or vv > MAX_PLAUSIBLE_MESSAGE_VERSION:
            detail[i] = _CD_VALUE_NEG if vv < 0 else _CD_VALUE_BIG
            continue
        coordinator_epoch[i] = be_i32(buf, value_start + 2)
        status[i] = _CS_END_TXN
    return key_version, control_type, value_version, coordinator_epoch, marker_ts, status, detail


# --- Python side ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """Everything a walk over one segment found.

    ``batches`` maps each name of :data:`BATCH_COLUMNS` to an array with one row
    per valid magic-2 batch, in file order. ``quarantine`` lists every byte
    range that could not be read (and control records that could not be
    understood); every other byte belongs to a batch, a legacy entry
    (``legacy_bytes``) or the zero padding (``zero_padding_bytes``):
    batch bytes + segment-damage bytes + legacy_bytes + zero_padding_bytes
    - overlap_bytes == size.
    """

    file: str
    size: int
    batches: dict[str, np.ndarray]
    quarantine: list[QuarantineEntry] = field(default_factory=list)
    legacy_entries: int = 0
    legacy_bytes: int = 0
    zero_padding_bytes: int = 0
    crc_checked: bool = True
    #: Bytes read as part of two consecutive batches (only after bytes went missing: _overlapping_next).
    overlap_bytes: int = 0
    #: Where the walk stopped: ``size`` (the end of the data), or a piece's stop (scan_segment_piece).
    stopped_at: int = -1

    @property
    def batch_count(self) -> int:
        return int(self.batches["position"].size)


def as_uint8(buf: Buffer) -> np.ndarray:
    """A read-only 1-D uint8 view of ``buf`` (no copy for bytes, bytearray, memoryview, contiguous arrays)."""
    if isinstance(buf, np.ndarray):
        arr = np.ascontiguousarray(buf).reshape(-1)
        if arr.dtype != np.uint8:
            arr = arr.view(np.uint8)
    else:
        mv = memoryview(buf)
        if not mv.c_contiguous:
            mv = memoryview(mv.tobytes())
        arr = np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv, dtype=np.uint8)
    view = arr.view()
    # One array type for numba whatever the caller passed (bytes are read-only, bytearrays are not):
    # one compiled specialisation instead of two.
    view.flags.writeable = False
    return view


def empty_batches(n: int = 0) -> dict[str, np.ndarray]:
    return {name: np.empty(n, dtype) for name, dtype in BATCH_COLUMNS.items()}


def _max_batches(n: int) -> int:
    """How many batches ``n`` bytes can hold at most: the row capacity the walk is given.

    Batch starts strictly increase, and each is at least 61 bytes long, overlapping the previous
    one by at most _MAX_OVERLAP bytes (_overlapping_next), so starts are >= 53 bytes apart.
    """
    return n // _MIN_BATCH_STRIDE + 1


#: Bytes of a mapped segment walked before the pages behind are given back (:func:`mapped_pages`): two threads
#: walking a hot partition's 256 MiB segment and another held both whole (benchmarks/RESULTS.md §2, "Flat memory
#: with threads").
SCAN_WINDOW_BYTES = 32 << 20

#: From this many bytes of input on, a scan's columns are carved from one block (_OutputBlocks).
_BLOCK_MIN_INPUT = 8 << 20
#: Transparent huge page size (x86-64, arm64 with 4 KiB pages). Columns in the block start on one.
_HUGE_PAGE = 2 << 20


def _column_spans(rows: int) -> list[int]:
    """Bytes each column takes in a block: ``rows`` rows, rounded up to whole huge pages."""
    return [-(-rows * dtype.itemsize // _HUGE_PAGE) * _HUGE_PAGE for dtype in BATCH_COLUMNS.values()]


class _OutputBlocks:
    """Output memory for the columns of large segments, reused once the previous result is gone.

    Fresh memory costs as much as the walk itself on 150-byte batches: the columns take 108 bytes
    per batch, ~770 MB per GiB of input, and the kernel zeroes every page it hands out (RESULTS.md
    §1). So the columns of a scan are views into one block that a later scan reuses as soon as
    nothing refers to any of them -- in a Spark task or a loop over segments, right after the
    previous segment was summarised. The columns are carved from one *lease* array over the block;
    every column, and every view of a column, keeps the lease alive, and when the last one goes
    the lease's finalizer gives the block back. A result that is kept simply keeps its block, and
    the next scan takes another. Up to ``keep`` free blocks are kept (one per thread that scans at
    the same time), so a process holds on to at most ``keep`` times the output of the largest
    segment it has scanned.

    Each column starts on a huge page and numpy asks for transparent huge pages on large arrays,
    so even fresh memory is faulted in 2 MiB at a time. Only the pages the walk writes become
    resident: a block is sized for the most batches the segment could hold (_max_batches).
    """

    def __init__(self, keep: int = 2) -> None:
        # Reentrant: a lease's finalizer can run inside columns() when the garbage collector does.
        self._lock = threading.RLock()
        self._free: list[np.ndarray] = []
        self._keep = keep

    def columns(self, rows: int) -> dict[str, np.ndarray]:
        spans = _column_spans(rows)
        need = sum(spans) + _HUGE_PAGE  # + alignment
        block = None
        with self._lock:
            # the smallest that fits: a small scan (a __transaction_state segment) taking the block of a hot
            # partition's segment would make the next of those fault in a new one while another thread walks
            fits = [i for i in range(len(self._free)) if self._free[i].size >= need]
            if fits:
                block = self._free.pop(min(fits, key=lambda i: self._free[i].size))
        if block is None:
            block = np.empty(need, np.uint8)
        # Not a view of ``block`` (numpy would make every view's base the block itself), so that the
        # lease is what the columns refer to.
        lease = np.frombuffer(block.data, np.uint8)
        weakref.finalize(lease, self._give_back, block)
        offset = -block.ctypes.data % _HUGE_PAGE
        cols = {}
        for (name, dtype), span in zip(BATCH_COLUMNS.items(), spans):
            cols[name] = lease[offset : offset + rows * dtype.itemsize].view(dtype)
            offset += span
        return cols

    def _give_back(self, block: np.ndarray) -> None:
        with self._lock:
            self._free.append(block)
            if len(self._free) > self._keep:
                # Let the smallest go (by index: == on arrays compares elements).
                del self._free[min(range(len(self._free)), key=lambda i: self._free[i].size)]

    def clear(self) -> None:
        """Forget the free blocks (the memory goes back to the system)."""
        with self._lock:
            self._free.clear()


_OUTPUT_BLOCKS = _OutputBlocks()


def release_output_blocks(trim: bool = False) -> None:
    """Give the free output blocks back to the system (blocks still in use are kept by their scans): for a
    process that has scanned its data segments and goes on to other work. With ``trim``, what the C allocator
    holds free too (glibc's ``malloc_trim``, where there is one): the driver placement, once, before it builds
    and writes the tables; not after every segment, as the pages given back fault in again when needed."""
    _OUTPUT_BLOCKS.clear()
    if trim:
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass  # not glibc


def _allocate_batches(n: int, blocks: bool = True) -> dict[str, np.ndarray]:
    """Uninitialised columns with room for every batch ``n`` bytes can hold (carved from a reused block when
    ``blocks`` and ``n`` is large)."""
    rows = _max_batches(n)
    if blocks and n >= _BLOCK_MIN_INPUT:
        return _OUTPUT_BLOCKS.columns(rows)
    # np.empty does not touch the memory: only the pages the walk writes become resident.
    return {name: np.empty(rows, dtype) for name, dtype in BATCH_COLUMNS.items()}


def _trim(cols: dict[str, np.ndarray], nb: int) -> dict[str, np.ndarray]:
    """The first ``nb`` rows of each column."""
    first = next(iter(cols.values()))
    if first.base is not None:
        return {name: col[:nb] for name, col in cols.items()}  # views into a block
    for col in cols.values():
        # Shrinks the allocation in place (realloc): no copy, and no capacity kept alive. The
        # array was just allocated and the walk has returned: nothing else refers to it.
        col.resize(nb, refcheck=False)
    return cols


def _fill_control_columns(
    buf: np.ndarray, cols: dict[str, np.ndarray], file: str, budget: int, max_decompressed_bytes: int
) -> tuple[list[QuarantineEntry], int]:
    """The control columns of the control batches of ``cols`` (a scan's rows, or a window's), and their
    quarantine entries; compressed ones may decompress to ``budget`` bytes together (the scan's
    ``max_decompressed_bytes``, less what earlier windows used): also returns what they used."""
    left = [budget]
    quarantine = fill_controls(buf, cols, [file], _ZERO, _ZERO, left, max_decompressed_bytes)
    return [entry for _, entry in quarantine], budget - left[0]


_ZERO = np.zeros(1, np.int64)


def fill_controls(
    buf: np.ndarray,
    cols: dict[str, np.ndarray],
    files: list[str],
    origins: np.ndarray,
    first_rows: np.ndarray,
    left: list[int],
    max_decompressed_bytes: int,
) -> list[tuple[int, QuarantineEntry]]:
    """The control columns of the control batches of ``cols``, rows of the files ``files`` one after another
    (file k's bytes start at ``buf[origins[k]]``, its rows at ``first_rows[k]``; positions are the file's), and
    their quarantine entries, each with the index of its file. File k's compressed control batches may
    decompress to ``left[k]`` bytes together (its scan's budget, spent here: the total work stays bounded, not
    only each batch's)."""
    idx = np.flatnonzero(cols["is_control"])
    if idx.size == 0:
        return []
    owner = np.searchsorted(first_rows, idx, "right") - 1 if len(files) > 1 else np.zeros(idx.size, np.int64)
    positions = cols["position"][idx]
    origin = origins[owner]
    starts = positions + origin + RECORD_BATCH_OVERHEAD
    ends = positions + origin + LOG_OVERHEAD + cols["batch_length"][idx].astype(np.int64)
    counts = cols["record_count"][idx]
    base_ts = cols["base_timestamp"][idx]
    max_ts = cols["max_timestamp"][idx]
    log_append = cols["timestamp_type"][idx] == TimestampType.LOG_APPEND_TIME
    parsed = list(_parse_control_records(buf, starts, ends, counts, base_ts, max_ts, log_append))
    quarantine: list[tuple[int, QuarantineEntry]] = []
    # Brokers never compress control batches (MemoryRecords.withEndTransactionMarker); if someone did,
    # read them the slow way.
    for k in np.flatnonzero((cols["compression"][idx] != Compression.NONE) & (counts != 0)):
        i, f = int(idx[k]), int(owner[k])
        position = int(positions[k])
        try:
            records = decompress(
                int(cols["compression"][i]),
                buf[int(starts[k]) : int(ends[k])],
                file=files[f],
                position=position,
                limit=left[f],
            )
        except DecodeError as e:
            for arr in parsed[:5]:
                arr[k] = -1
            parsed[5][k] = _CS_BAD_KEY
            parsed[6][k] = _CD_DECOMPRESSION
            length = int(ends[k] - origin[k]) - position
            detail = budget_detail(e, max_decompressed_bytes)
            quarantine.append((f, QuarantineEntry(files[f], position, length, e.reason, detail)))
            continue
        left[f] -= len(records)
        one = _parse_control_records(
            as_uint8(records),
            np.zeros(1, np.int64),
            np.array([len(records)], np.int64),
            counts[k : k + 1],
            base_ts[k : k + 1],
            max_ts[k : k + 1],
            log_append[k : k + 1],
        )
        for arr, value in zip(parsed, one):
            arr[k] = value[0]
    key_version, control_type, value_version, coordinator_epoch, marker_ts, status, detail = parsed
    cols["control_key_version"][idx] = key_version
    cols["control_type"][idx] = control_type
    cols["control_value_version"][idx] = value_version
    cols["coordinator_epoch"][idx] = coordinator_epoch
    cols["marker_timestamp"][idx] = marker_ts
    cols["control_status"][idx] = status
    # A control record we cannot understand is recorded, but its batch header still counts.
    for k in np.flatnonzero((status == _CS_BAD_KEY) | (status == _CS_BAD_VALUE)):
        if detail[k] == _CD_DECOMPRESSION:
            continue  # already quarantined as decompression_failed / decompressed_too_large
        i, f = int(idx[k]), int(owner[k])
        position = int(positions[k])
        length = int(ends[k] - origin[k]) - position
        why = f"offset {int(cols['base_offset'][i])}: {_CONTROL_DETAILS[int(detail[k])]}"
        quarantine.append((f, QuarantineEntry(files[f], position, length, errors.BAD_CONTROL_RECORD, why)))
    return quarantine


def scan_segment(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    release: Callable[[int], None] | None = None,
    blocks: bool = True,
) -> SegmentScan:
    """Walk the batches of one ``.log`` segment held in memory.

    Never raises on bad input: damage is reported in ``quarantine``. ``max_decompressed_bytes``
    bounds what the (rare) compressed control batches of the segment may expand to, together.
    ``release``: a mapped file's (:func:`mapped_pages`), to give back the pages behind the walk.
    ``blocks=False``: fresh columns even for a large segment, not a reused block (:class:`_OutputBlocks`):
    for a caller whose own work per batch dwarfs the page faults a block saves.

    >>> data = open("00000000000000000000.log", "rb").read()  # doctest: +SKIP
    >>> scan = scan_segment(data, file="00000000000000000000.log")  # doctest: +SKIP
    >>> scan.batches["base_offset"][:3], scan.quarantine  # doctest: +SKIP
    """
    return _scan(
        as_uint8(buf),
        file,
        bool(check_crc),
        tight_loop=True,
        max_decompressed_bytes=max_decompressed_bytes,
        release=release,
        blocks=blocks,
    )


def scan_segment_piece(
    buf: Buffer,
    start: int,
    stops: np.ndarray,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> SegmentScan:
    """:func:`scan_segment` of the entries of ``buf`` (a whole segment) from ``start`` on, up to the first
    entry start of the chain that is one of ``stops`` (``SegmentScan.stopped_at``; the data's end if none).

    ``start`` must be 0 or a valid v2 batch (:func:`valid_batch_at`): the walk then emits exactly what
    the walk from 0 emits from that batch on (txnlog.engine.spark.stitch stitches pieces on that)."""
    arr = as_uint8(buf)
    return _scan(
        arr,
        file,
        bool(check_crc),
        tight_loop=True,
        max_decompressed_bytes=max_decompressed_bytes,
        start=int(start),
        stops=np.asarray(stops, np.int64),
    )


def valid_batch_at(buf: Buffer, position: int, check_crc: bool = True) -> tuple[int, int] | None:
    """(base offset, last offset) of the v2 batch that starts at ``position`` if the walk would take it
    as one (magic 2, a length inside the buffer, the CRC when checked), else None."""
    arr = as_uint8(buf)
    if position < 0 or position + RECORD_BATCH_OVERHEAD > arr.size:
        return None
    if _entry_status(arr, int(position), int(arr.size), bool(check_crc)) != _ENTRY_V2:
        return None
    base = int(be_i64(arr, int(position) + BASE_OFFSET_OFFSET))
    return base, base + int(be_i32(arr, int(position) + LAST_OFFSET_DELTA_OFFSET))


_NO_STOPS = np.empty(0, np.int64)


def _scan(
    arr: np.ndarray,
    file: str,
    check_crc: bool,
    *,
    tight_loop: bool,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    start: int = 0,
    stops: np.ndarray = _NO_STOPS,
    release: Callable[[int], None] | None = None,
    blocks: bool = True,
) -> SegmentScan:
    """The walk, then the control records. With ``release`` (a mapped file's, :func:`mapped_pages`), a
    window of :data:`SCAN_WINDOW_BYTES` at a time: each window's batches and control records are read, then
    ``release(position)`` says the bytes before ``position`` are done with, so the pages of a mapped segment
    the process holds stay a window's, not the segment's. The windows give exactly the whole walk's scan."""
    batches = _allocate_batches(arr.size - start, blocks)
    columns = tuple(batches.values())
    window = SCAN_WINDOW_BYTES if release is not None and not stops.size else arr.size + 1
    nb = legacy_entries = legacy_bytes = zero_padding = overlap = 0
    quarantine: list[QuarantineEntry] = []
    budget = max_decompressed_bytes  # the segment's, spent in log order window after window
    pos = start
    while True:
        k, q_pos, q_len, q_code, legacy_k, legacy_bytes_k, zero_padding, overlap_k, stopped = _walk(
            arr, check_crc, columns, tight_loop, pos, stops, pos + window, nb
        )
        quarantine += [
            QuarantineEntry(file, int(p), int(length), errors.REASONS[int(c)])
            for p, length, c in zip(q_pos, q_len, q_code)
        ]
        controls, used = _fill_control_columns(
            arr, {name: col[nb : nb + k] for name, col in batches.items()}, file, budget, max_decompressed_bytes
        )
        quarantine += controls
        budget -= used
        nb, legacy_entries, legacy_bytes, overlap = (
            nb + k,
            legacy_entries + legacy_k,
            legacy_bytes + legacy_bytes_k,
            overlap + overlap_k,
        )
        if stopped >= arr.size or stopped <= pos or release is None:
            break
        release(int(stopped))
        pos = int(stopped)
    quarantine.sort(key=lambda e: e.position)
    return SegmentScan(
        file=file,
        size=int(arr.size),
        batches=_trim(batches, int(nb)),
        quarantine=quarantine,
        legacy_entries=int(legacy_entries),
        legacy_bytes=int(legacy_bytes),
        zero_padding_bytes=int(zero_padding),
        crc_checked=bool(check_crc),
        overlap_bytes=int(overlap),
        stopped_at=int(stopped),
    )


@contextmanager
def mapped_file(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """A read-only uint8 view of a file, memory-mapped (no copy; pages come from the page cache).

    The scans copy what they return, so nothing they return keeps the mapping alive.
    """
    with mapped_pages(path) as (arr, _):
        yield arr


@contextmanager
def mapped_pages(path: str | os.PathLike[str]) -> Iterator[tuple[np.ndarray, Callable[[int], None]]]:
    """:func:`mapped_file`, and a ``release(position)`` that gives back the mapped pages before ``position``
    (``madvise(MADV_DONTNEED)``: the page cache keeps them; this process no longer counts them). A page read
    again after that comes back from the page cache. Where there is no such call, ``release`` does nothing."""
    with open(os.fspath(path), "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield np.empty(0, np.uint8), lambda position: None
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        dontneed = getattr(mmap, "MADV_DONTNEED", None)

        def release(position: int) -> None:
            end = position - position % mmap.PAGESIZE
            if dontneed is not None and end > 0:
                mm.madvise(dontneed, 0, end)

        try:
            yield np.frombuffer(mm, dtype=np.uint8), release
        finally:
            try:
                mm.close()
            except BufferError:
                pass  # a view is still alive (the caller's name for it): unmapped when it is collected


def scan_segment_file(
    path: str | os.PathLike[str],
    check_crc: bool = True,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> SegmentScan:
    """:func:`scan_segment` over a file, memory-mapped."""
    with mapped_file(path) as arr:
        return scan_segment(
            arr, file=os.fspath(path), check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
        )
