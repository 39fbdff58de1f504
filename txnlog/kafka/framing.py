"""Whole log entries at the start of a buffer: where a Fetch response's records end usefully.

A Fetch response's ``records`` are log entries exactly as the leader keeps them in its segment
(``FileRecords.slice``: the broker sends a byte range of the file, cut at ``partition_max_bytes``),
so the last entry may be cut short. Since KIP-74 (Fetch v3) the broker returns at least one whole
batch even when it is larger than the limit; what follows the last whole entry is dropped and
fetched again from the next offset, as the consumer's ``DefaultRecordBatch`` iterator does
(``ByteBufferLogInputStream.nextBatch`` returns null for a partial entry)::

    Entry => baseOffset:int64 batchLength:int32 <batchLength bytes>
    next offset = baseOffset + lastOffsetDelta + 1  (magic 2, lastOffsetDelta at byte 23)
                = baseOffset + 1                     (magic 0/1: the entry's offset is its last)

Compiled (one loop per entry, not per record); the batches themselves are decoded afterwards by
the same walk as segment files (:func:`txnlog.kafka.record_batch.scan_segment`).
"""

from __future__ import annotations

import numpy as np

from txnlog.kafka.binary import be_i32, be_i64
from txnlog.kafka.crc import NUMBA_CACHEABLE
from txnlog.kafka.jit import jit
from txnlog.kafka.wire import BATCH_LENGTH_OFFSET, LAST_OFFSET_DELTA_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET

#: the smallest entry a length field can announce (the legacy v0 record overhead after the length)
_MIN_ENTRY_LENGTH = 14


@jit(cacheable=NUMBA_CACHEABLE)
def _whole_entries(buf: np.ndarray, stop_offset: int) -> tuple[int, int, int, int]:
    n = buf.size
    pos = 0
    count = 0
    next_offset = -1
    first_base = -1
    while pos + LOG_OVERHEAD <= n:
        base = be_i64(buf, pos)
        length = be_i32(buf, pos + BATCH_LENGTH_OFFSET)
        size = LOG_OVERHEAD + length
        if length < _MIN_ENTRY_LENGTH or pos + size > n or base >= stop_offset:
            break
        if buf[pos + MAGIC_OFFSET] >= 2:
            after = base + be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET) + 1
        else:
            after = base + 1
        if first_base < 0:
            first_base = base
        next_offset = after
        count += 1
        pos += size
    return pos, next_offset, count, first_base


def whole_entries(buf: np.ndarray, stop_offset: int = 2**63 - 1) -> tuple[int, int, int, int]:
    """(bytes, next offset, entries, first base offset) of the whole entries at the start of ``buf``
    whose base offset is below ``stop_offset``; next offset and first base are -1 when there are none."""
    if buf.size == 0:
        return 0, -1, 0, -1
    pos, after, count, first = _whole_entries(buf, int(stop_offset))
    return int(pos), int(after), int(count), int(first)
