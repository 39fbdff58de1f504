"""Segment index files: ``.index``, ``.timeindex`` and ``.txnindex`` (OffsetIndex, TimeIndex, TransactionIndex).

Wire grammar::

    .index     => entries of relativeOffset:int32 position:int32             (8 bytes)
    .timeindex => entries of timestamp:int64 relativeOffset:int32            (12 bytes)
    .txnindex  => entries of version:int16 producerId:int64 firstOffset:int64
                  lastOffset:int64 lastStableOffset:int64                    (34 bytes)

The offset and time indexes are preallocated (or sparse): a crash leaves
trailing all-zero entries. DumpLogSegments stops at the first entry, after the
first, whose offset equals the segment base offset (relative offset 0); so do
we. A partial last entry (file size not a multiple of the entry size) is
reported and ignored.

``.txnindex`` lists aborted transactions only. Kafka's reader takes the version
from the entry's first byte (AbortedTxn.version() reads a signed byte although
the writer stores an int16) and rejects anything above 0; so do we (the
``version`` column is that byte): decoding stops at such an entry and the rest
of the file is quarantined.

Nothing here raises on input; problems are in ``quarantine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.errors import QuarantineEntry
from txnlog.kafka.record_batch import Buffer, as_uint8
from txnlog.kafka.wire import ABORTED_TXN_ENTRY_SIZE, OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE

__all__ = ["IndexFile", "decode_offset_index", "decode_time_index", "decode_txn_index", "decode_txn_indexes"]

_OFFSET_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_TIME_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
# The version is read as Kafka's reader does: AbortedTxn.version() is the signed first byte.
_TXN_DTYPE = np.dtype(
    [
        ("version", "i1"),
        ("_version_low_byte", "u1"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)
assert _OFFSET_DTYPE.itemsize == OFFSET_INDEX_ENTRY_SIZE
assert _TIME_DTYPE.itemsize == TIME_INDEX_ENTRY_SIZE
assert _TXN_DTYPE.itemsize == ABORTED_TXN_ENTRY_SIZE


@dataclass(frozen=True, slots=True)
class IndexFile:
    """Decoded entries as native-endian columns, plus what was not read."""

    file: str
    entries: dict[str, np.ndarray]
    quarantine: list[QuarantineEntry] = field(default_factory=list)
    #: Trailing all-zero (preallocated) entries that were not returned.
    unused_entries: int = 0

    @property
    def entry_count(self) -> int:
        first = next(iter(self.entries.values()))
        return int(first.size)


def _entries(arr: np.ndarray, dtype: np.dtype, file: str) -> tuple[np.ndarray, list[QuarantineEntry]]:
    whole = arr.size - arr.size % dtype.itemsize
    quarantine = []
    if whole != arr.size:
        quarantine.append(
            QuarantineEntry(
                file, whole, arr.size - whole, errors.TRUNCATED_TAIL, f"partial {dtype.itemsize}-byte entry"
            )
        )
    return arr[:whole].view(dtype), quarantine


def _native(raw: np.ndarray) -> dict[str, np.ndarray]:
    return {name: raw[name].astype(raw.dtype.fields[name][0].newbyteorder("=")) for name in raw.dtype.names}  # type: ignore[index,union-attr]  # a structured dtype: fields and names are set


def decode_offset_index(buf: Buffer, *, base_offset: int = 0, file: str = "") -> IndexFile:
    """``.index``: columns relative_offset, offset (absolute), position."""
    raw, quarantine = _entries(as_uint8(buf), _OFFSET_DTYPE, file)
    stop = _first_unused(raw["relative_offset"])
    cols = _native(raw[:stop])
    cols["offset"] = cols["relative_offset"].astype(np.int64) + base_offset
    return IndexFile(file, cols, quarantine, unused_entries=int(raw.size - stop))


def decode_time_index(buf: Buffer, *, base_offset: int = 0, file: str = "") -> IndexFile:
    """``.timeindex``: columns timestamp, relative_offset, offset (absolute)."""
    raw, quarantine = _entries(as_uint8(buf), _TIME_DTYPE, file)
    stop = _first_unused(raw["relative_offset"])
    cols = _native(raw[:stop])
    cols["offset"] = cols["relative_offset"].astype(np.int64) + base_offset
    return IndexFile(file, cols, quarantine, unused_entries=int(raw.size - stop))


def _first_unused(relative_offsets: np.ndarray) -> int:
    # DumpLogSegments: `if (entry.offset == index.baseOffset && i > 0) break`.
    hits = np.flatnonzero(relative_offsets[1:] == 0)
    return int(hits[0] + 1) if hits.size else int(relative_offsets.size)


def decode_txn_index(buf: Buffer, *, file: str = "") -> IndexFile:
    """``.txnindex``: columns version, producer_id, first_offset, last_offset, last_stable_offset."""
    raw, quarantine = _entries(as_uint8(buf), _TXN_DTYPE, file)
    # TransactionIndex rejects versions above AbortedTxn.CURRENT_VERSION (0).
    bad = np.flatnonzero(raw["version"] > 0)
    stop = int(bad[0]) if bad.size else int(raw.size)
    if bad.size:
        position = stop * ABORTED_TXN_ENTRY_SIZE
        quarantine.insert(
            0,
            QuarantineEntry(
                file,
                position,
                raw.size * ABORTED_TXN_ENTRY_SIZE - position,
                errors.BAD_INDEX,
                f"aborted-transaction entry {stop} has version {int(raw['version'][stop])}",
            ),
        )
    cols = _native(raw[:stop])
    del cols["_version_low_byte"]
    cols["version"] = cols["version"].astype(np.int16)
    return IndexFile(file, cols, quarantine)


def decode_txn_indexes(bufs: Sequence[bytes], files: Sequence[str]) -> IndexFile:
    """Many ``.txnindex`` files at once, as :func:`decode_txn_index` decodes each, plus a ``file_index`` column
    (the position of the entry's file in ``bufs``); entries in file order. The files Kafka writes (whole entries
    of version 0) are decoded together in one pass; a file with a partial entry or a later version goes through
    :func:`decode_txn_index` alone, for its quarantine rows."""
    sizes = np.fromiter((len(b) for b in bufs), np.int64, len(bufs))
    regular = np.flatnonzero(sizes % ABORTED_TXN_ENTRY_SIZE == 0)
    raw = np.frombuffer(b"".join([bufs[i] for i in regular.tolist()]), _TXN_DTYPE)
    owner = np.repeat(regular, sizes[regular] // ABORTED_TXN_ENTRY_SIZE)
    irregular = np.union1d(np.flatnonzero(sizes % ABORTED_TXN_ENTRY_SIZE != 0), owner[raw["version"] > 0])
    keep = ~np.isin(owner, irregular)
    cols = _native(raw[keep])
    del cols["_version_low_byte"]
    cols["version"] = cols["version"].astype(np.int16)
    cols["file_index"] = owner[keep]
    quarantine: list[QuarantineEntry] = []
    parts = [cols]
    for i in irregular.tolist():
        one = decode_txn_index(bufs[i], file=files[i])
        quarantine.extend(one.quarantine)
        parts.append({**one.entries, "file_index": np.full(one.entry_count, i, np.int64)})
    merged = {name: np.concatenate([part[name] for part in parts]) for name in cols}
    order = np.argsort(merged["file_index"], kind="stable")
    return IndexFile("", {name: values[order] for name, values in merged.items()}, quarantine)
