"""Walk many small ``.log`` segments in one compiled call: their bytes one after another in one buffer, their
batches into one set of columns (:data:`txnlog.kafka.record_batch.BATCH_COLUMNS`), each file's rows after the
previous file's.

Each file is walked exactly as :func:`txnlog.kafka.record_batch.scan_segment` walks it alone: the walk sees only
that file's bytes (a view of the buffer from its first byte to its last), so its resync, zero tail and truncated
tail end at the file's end, and damage in one file never touches another's rows. What a walk per file costs in
Python (allocating every column, trimming it, the control records, the results) is paid once for all the files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from txnlog.kafka.crc import NUMBA_CACHEABLE
from txnlog.kafka.errors import QuarantineEntry
from txnlog.kafka.jit import jit
from txnlog.kafka.record_batch import BATCH_COLUMNS, _max_batches, _trim, _walk, as_uint8, fill_controls

__all__ = ["SegmentsScan", "scan_segments"]


@dataclass(frozen=True, slots=True)
class SegmentsScan:
    """What :func:`scan_segments` found: per file what a ``SegmentScan`` of it says, the batches of all of them.

    ``batches``: one column per name of BATCH_COLUMNS, the rows of file 0, then of file 1, ... (``counts[k]``
    rows of file k, positions in the file); ``quarantine[k]``: file k's entries, by position."""

    files: list[str]
    sizes: np.ndarray
    batches: dict[str, np.ndarray]
    counts: np.ndarray
    quarantine: list[list[QuarantineEntry]]
    legacy_entries: np.ndarray
    legacy_bytes: np.ndarray
    zero_padding_bytes: np.ndarray
    overlap_bytes: np.ndarray
    crc_checked: bool = True


@jit(cacheable=NUMBA_CACHEABLE)
def _walk_files(buf: np.ndarray, bounds: np.ndarray, check_crc: bool, cols):
    """:func:`txnlog.kafka.record_batch._walk` of each file ``buf[bounds[k]:bounds[k + 1]]``, its rows written
    after the previous file's. Returns per file the batch count, legacy entries and bytes, zero padding and
    overlap bytes, and the quarantine regions of all (file index, position, length, reason code)."""
    m = bounds.size - 1
    counts = np.zeros(m, np.int64)
    legacy_entries = np.zeros(m, np.int64)
    legacy_bytes = np.zeros(m, np.int64)
    zero_padding = np.zeros(m, np.int64)
    overlap = np.zeros(m, np.int64)
    q_file = np.empty(0, np.int64)
    q_pos = np.empty(0, np.int64)
    q_len = np.empty(0, np.int64)
    q_code = np.empty(0, np.int8)
    no_stops = np.empty(0, np.int64)
    nb = 0
    for k in range(m):
        view = buf[bounds[k] : bounds[k + 1]]
        n = view.size
        count, qp, ql, qc, le, lb, zp, ov, _stopped = _walk(view, check_crc, cols, True, 0, no_stops, n + 1, nb)
        counts[k] = count
        nb += count
        legacy_entries[k] = le
        legacy_bytes[k] = lb
        zero_padding[k] = zp
        overlap[k] = ov
        if qp.size:
            q_file = np.concatenate((q_file, np.full(qp.size, k, np.int64)))
            q_pos = np.concatenate((q_pos, qp))
            q_len = np.concatenate((q_len, ql))
            q_code = np.concatenate((q_code, qc))
    return counts, legacy_entries, legacy_bytes, zero_padding, overlap, q_file, q_pos, q_len, q_code


def scan_segments(
    buf: np.ndarray,
    bounds: np.ndarray,
    files: list[str],
    *,
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> SegmentsScan:
    """Walk the segments ``files`` whose bytes are ``buf[bounds[k]:bounds[k + 1]]`` (``bounds``: one more than
    the files, ascending). Each file gives the rows and quarantine entries :func:`scan_segment` of its bytes
    gives (its compressed control batches within its own ``max_decompressed_bytes``). Never raises on input."""
    arr = as_uint8(buf)
    bounds = np.asarray(bounds, np.int64)
    sizes = np.diff(bounds)
    rows = int(sum(_max_batches(int(n)) for n in sizes.tolist()))
    cols = {name: np.empty(rows, dtype) for name, dtype in BATCH_COLUMNS.items()}
    counts, legacy_entries, legacy_bytes, zero_padding, overlap, q_file, q_pos, q_len, q_code = _walk_files(
        arr, bounds, bool(check_crc), tuple(cols.values())
    )
    batches = _trim(cols, int(counts.sum()))
    quarantine: list[list[QuarantineEntry]] = [[] for _ in files]
    for k, p, length, c in zip(q_file.tolist(), q_pos.tolist(), q_len.tolist(), q_code.tolist(), strict=True):
        quarantine[k].append(QuarantineEntry(files[k], p, length, errors.REASONS[c]))
    first_rows = np.cumsum(counts) - counts
    left = [max_decompressed_bytes] * len(files)
    controls = fill_controls(arr, batches, files, bounds[:-1], first_rows, left, max_decompressed_bytes)
    for k, entry in controls:
        quarantine[k].append(entry)
    if controls:
        for entries in quarantine:
            entries.sort(key=lambda e: e.position)
    return SegmentsScan(
        files=list(files),
        sizes=sizes,
        batches=batches,
        counts=counts,
        quarantine=quarantine,
        legacy_entries=legacy_entries,
        legacy_bytes=legacy_bytes,
        zero_padding_bytes=zero_padding,
        overlap_bytes=overlap,
        crc_checked=bool(check_crc),
    )
