"""Producer-state snapshots (``<offset>.snapshot`` in a partition directory).

Wire grammar (ProducerSnapshot.json, ProducerStateManager.readSnapshot)::

    ProducerSnapshot => version:int16(=1) crc:uint32 entryCount:int32 entries
    entry (46 bytes) => producerId:int64 epoch:int16 lastSequence:int32 lastOffset:int64
                        offsetDelta:int32 timestamp:int64 coordinatorEpoch:int32
                        currentTxnFirstOffset:int64
    crc = CRC-32C over [6, end of file)

Kafka's reader rejects (CorruptSnapshotException) a version other than 1, a
count that is negative or overruns the file, and a CRC mismatch; it ignores
bytes after the last entry (they are still covered by the CRC). Here a bad
version, count or size raises :class:`DecodeError` (``bad_snapshot``); a bad CRC
does not — the entries are decoded and ``crc_valid`` is False, and the caller
decides (the broker would discard the snapshot and rebuild from the log).

``currentTxnFirstOffset >= 0`` is an open transaction (ProducerStateEntry); ``lastOffset
< 0`` means no batch metadata. The file name is the offset up to which state was
captured (the log end offset when taken), not a segment base.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

import numpy as np

from txnlog.kafka.binary import be_i16, be_i32, be_u32
from txnlog.kafka.crc import NUMBA_CACHEABLE, crc32c, crc32c_update
from txnlog.kafka.errors import BAD_SNAPSHOT, DecodeError
from txnlog.kafka.jit import jit
from txnlog.kafka.record_batch import Buffer, as_uint8
from txnlog.kafka.wire import (
    PRODUCER_SNAPSHOT_COUNT_OFFSET,
    PRODUCER_SNAPSHOT_CRC_OFFSET,
    PRODUCER_SNAPSHOT_ENTRIES_OFFSET,
    PRODUCER_SNAPSHOT_ENTRY_SIZE,
    PRODUCER_SNAPSHOT_HEADER_SIZE,
    PRODUCER_SNAPSHOT_VERSION,
)

__all__ = [
    "SNAPSHOT_ENTRY_COLUMNS",
    "ProducerSnapshot",
    "ProducerSnapshots",
    "decode_producer_snapshot",
    "decode_producer_snapshots",
    "decode_producer_snapshot_file",
    "snapshot_offset_from_name",
]

# Packed big-endian entry, in schema order (ProducerSnapshot.json).
_ENTRY_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
assert _ENTRY_DTYPE.itemsize == PRODUCER_SNAPSHOT_ENTRY_SIZE

#: Columns of :attr:`ProducerSnapshot.entries` (native byte order).
SNAPSHOT_ENTRY_COLUMNS: dict[str, np.dtype] = {
    name: _ENTRY_DTYPE.fields[name][0].newbyteorder("=")  # type: ignore[index]  # a structured dtype: fields is set
    for name in _ENTRY_DTYPE.names or ()
}

_VERSION = struct.Struct(">h")
_CRC = struct.Struct(">I")
_COUNT = struct.Struct(">i")
_NAME = re.compile(r"^(\d+)\.snapshot$")


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    file: str
    version: int
    crc: int  # as stored
    crc_valid: bool
    #: SNAPSHOT_ENTRY_COLUMNS -> one row per producer id.
    entries: dict[str, np.ndarray]
    #: Bytes after the last entry (Kafka ignores them; they are covered by the CRC).
    trailing_bytes: int = 0

    @property
    def entry_count(self) -> int:
        return int(self.entries["producer_id"].size)

    @property
    def open_transactions(self) -> np.ndarray:
        """Boolean mask of entries with an open transaction (currentTxnFirstOffset >= 0)."""
        return self.entries["current_txn_first_offset"] >= 0


def decode_producer_snapshot(buf: Buffer, *, file: str = "") -> ProducerSnapshot:
    """Decode a producer snapshot file's bytes.

    >>> snap = decode_producer_snapshot(open("00000000000000001234.snapshot", "rb").read())  # doctest: +SKIP
    >>> snap.entries["producer_id"][snap.open_transactions]  # doctest: +SKIP
    """
    arr = as_uint8(buf)
    if arr.size < PRODUCER_SNAPSHOT_HEADER_SIZE:
        raise DecodeError(
            file,
            0,
            "ProducerSnapshot",
            BAD_SNAPSHOT,
            f"{arr.size} bytes, shorter than the {PRODUCER_SNAPSHOT_HEADER_SIZE}-byte header",
        )
    header = arr[:PRODUCER_SNAPSHOT_HEADER_SIZE].tobytes()
    (version,) = _VERSION.unpack_from(header, 0)
    (crc,) = _CRC.unpack_from(header, PRODUCER_SNAPSHOT_CRC_OFFSET)
    (count,) = _COUNT.unpack_from(header, PRODUCER_SNAPSHOT_COUNT_OFFSET)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise DecodeError(file, 0, "ProducerSnapshot.version", BAD_SNAPSHOT, f"unknown snapshot version {version}")
    room = (arr.size - PRODUCER_SNAPSHOT_HEADER_SIZE) // PRODUCER_SNAPSHOT_ENTRY_SIZE
    if count < 0 or count > room:
        raise DecodeError(
            file,
            PRODUCER_SNAPSHOT_COUNT_OFFSET,
            "ProducerSnapshot.ProducerEntries",
            BAD_SNAPSHOT,
            f"entry count {count} does not fit in {arr.size} bytes (room for {room})",
        )
    end = PRODUCER_SNAPSHOT_HEADER_SIZE + count * PRODUCER_SNAPSHOT_ENTRY_SIZE
    raw = arr[PRODUCER_SNAPSHOT_HEADER_SIZE:end].view(_ENTRY_DTYPE)
    entries = {name: raw[name].astype(dtype) for name, dtype in SNAPSHOT_ENTRY_COLUMNS.items()}
    computed = crc32c(arr[PRODUCER_SNAPSHOT_ENTRIES_OFFSET:])
    return ProducerSnapshot(
        file=file,
        version=version,
        crc=crc,
        crc_valid=computed == crc,
        entries=entries,
        trailing_bytes=int(arr.size - end),
    )


@dataclass(frozen=True, slots=True)
class ProducerSnapshots:
    """Many snapshot files decoded at once (:func:`decode_producer_snapshots`): ``entries`` (SNAPSHOT_ENTRY_COLUMNS)
    of file 0, then of file 1, ... (``counts[k]`` of file k); ``errors[k]``: why file k does not decode (the
    DecodeError :func:`decode_producer_snapshot` raises; its count is then 0), else None; ``crc_valid[k]`` as
    :attr:`ProducerSnapshot.crc_valid`."""

    files: list[str]
    entries: dict[str, np.ndarray]
    counts: np.ndarray
    crc_valid: np.ndarray
    errors: list[DecodeError | None]


@jit(cacheable=NUMBA_CACHEABLE)
def _check_snapshots(buf: np.ndarray, bounds: np.ndarray):
    """Per file ``buf[bounds[k]:bounds[k + 1]]``: whether it decodes, its entry count, whether its CRC matches."""
    m = bounds.size - 1
    ok = np.zeros(m, np.bool_)
    counts = np.zeros(m, np.int64)
    crc_ok = np.zeros(m, np.bool_)
    for k in range(m):
        start, end = bounds[k], bounds[k + 1]
        if end - start < PRODUCER_SNAPSHOT_HEADER_SIZE or be_i16(buf, start) != PRODUCER_SNAPSHOT_VERSION:
            continue
        count = be_i32(buf, start + PRODUCER_SNAPSHOT_COUNT_OFFSET)
        if count < 0 or count > (end - start - PRODUCER_SNAPSHOT_HEADER_SIZE) // PRODUCER_SNAPSHOT_ENTRY_SIZE:
            continue
        ok[k] = True
        counts[k] = count
        stored = be_u32(buf, start + PRODUCER_SNAPSHOT_CRC_OFFSET)
        crc_ok[k] = crc32c_update(0, buf, start + PRODUCER_SNAPSHOT_ENTRIES_OFFSET, end) == stored
    return ok, counts, crc_ok


def decode_producer_snapshots(buf: Buffer, bounds: np.ndarray, files: list[str]) -> ProducerSnapshots:
    """:func:`decode_producer_snapshot` of each file ``files[k]``, whose bytes are ``buf[bounds[k]:bounds[k + 1]]``,
    all at once: one compiled pass checks every header and CRC, one gather reads every entry."""
    arr = as_uint8(buf)
    bounds = np.asarray(bounds, np.int64)
    ok, counts, crc_ok = _check_snapshots(arr, bounds)
    errors: list[DecodeError | None] = [None] * len(files)
    for k in np.flatnonzero(~ok).tolist():
        try:
            decode_producer_snapshot(arr[bounds[k] : bounds[k + 1]], file=files[k])
        except DecodeError as e:
            errors[k] = e
    firsts = np.repeat(bounds[:-1] + PRODUCER_SNAPSHOT_HEADER_SIZE, counts)
    within = np.arange(firsts.size) - np.repeat(np.cumsum(counts) - counts, counts)
    starts = firsts + within * PRODUCER_SNAPSHOT_ENTRY_SIZE
    raw = arr[starts[:, None] + np.arange(PRODUCER_SNAPSHOT_ENTRY_SIZE)].reshape(-1).view(_ENTRY_DTYPE)
    entries = {name: raw[name].astype(dtype) for name, dtype in SNAPSHOT_ENTRY_COLUMNS.items()}
    return ProducerSnapshots(list(files), entries, counts, crc_ok, errors)


def decode_producer_snapshot_file(path: str | os.PathLike[str]) -> ProducerSnapshot:
    name = os.fspath(path)
    with open(name, "rb") as f:
        return decode_producer_snapshot(f.read(), file=name)


def snapshot_offset_from_name(path: str | os.PathLike[str]) -> int:
    """The offset in a snapshot's file name (``00000000000000001234.snapshot`` -> 1234).

    Raises ValueError for any other name (including ``*.snapshot.deleted``).
    """
    base = os.path.basename(os.fspath(path))
    match = _NAME.match(base)
    if match is None:
        raise ValueError(f"{base!r} is not a producer snapshot file name (<offset>.snapshot)")
    return int(match.group(1))
