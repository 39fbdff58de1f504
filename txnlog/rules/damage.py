"""Where a quarantined region of a data partition may hold offsets: bounded as the bytes bound it.

A region the reader could not decode (a batch with a bad CRC, a bad magic byte or length, garbage, a
truncated tail) lies in one file, between the last valid batch before it and the first valid batch after it.
Every offset it may hold is therefore *after* that earlier batch's last offset and *before* that later
batch's base offset: a marker or a first batch hidden in it can only be there. Only where the file has no
valid batch on a side does the bound fall back to the segment's base offset (before) or to the next
segment's base offset of the same replica, or the log end (after).

What a broker does with such bytes (``LogSegment.recover``, ``LogLoader.recoverLog``): below the recovery
point it never reads them again (a consumer fetching there fails with a corrupt-record error); in the
segments a restart after an unclean shutdown recovers (every segment from the one holding the recovery
point on, always the active one), it truncates the log at the first invalid batch, dropping the region and
everything after it.

Two steps, one function each: :func:`region_offsets` at decode time, where a file's valid batches are at
hand, and :func:`ranges` over the decoded rows, where the segments of every replica are. A segment given as
kafka-dump-log.sh text is bounded by the same :func:`region_offsets`, over the batches the dump prints valid
(txnlog.engine.dump_log.assemble); where the tool stopped or printed invalid bytes at the end, no batch bounds the
region after, as in a file. :func:`region_source` says, for the evidence, how each region was bounded and, for
a dump, the line that showed it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model.contract import InputSource

__all__ = ["region_offsets", "ranges", "region_source"]

#: one damaged region: (first offset it may hold, end offset exclusive or None = up to the log end, file)
Range = tuple[int, int | None, str]


def region_offsets(
    batch_position: np.ndarray,
    batch_base_offset: np.ndarray,
    batch_last_offset: np.ndarray,
    position: np.ndarray,
    length: np.ndarray,
) -> tuple[pa.Array, pa.Array]:
    """Per quarantined region ``[position, position + length)`` of one file whose valid batches start at
    ``batch_position``: (the first offset it may hold, the last one), from the valid batches either side.
    Null where the file has no valid batch on that side (:func:`ranges` then uses the segment bounds).

    >>> first, last = region_offsets(np.array([0, 100, 300]), np.array([0, 5, 9]), np.array([4, 8, 12]),
    ...                              np.array([200, 400]), np.array([100, 50]))
    >>> first.to_pylist(), last.to_pylist()
    ([9, 13], [8, None])
    """
    order = np.argsort(batch_position, kind="stable")
    pos = np.asarray(batch_position, np.int64)[order]
    base = np.asarray(batch_base_offset, np.int64)[order]
    last = np.asarray(batch_last_offset, np.int64)[order]
    start = np.asarray(position, np.int64)
    end = start + np.asarray(length, np.int64)
    before = np.searchsorted(pos, start, side="left") - 1  # the last valid batch starting before the region
    after = np.searchsorted(pos, end, side="left")  # the first valid batch starting at or after its end
    has_before = before >= 0
    has_after = after < pos.size
    first = np.where(has_before, last[np.clip(before, 0, None)] + 1 if pos.size else 0, 0)
    upto = np.where(has_after, base[np.clip(after, None, pos.size - 1)] - 1 if pos.size else 0, 0)
    return pa.array(first, pa.int64(), mask=~has_before), pa.array(upto, pa.int64(), mask=~has_after)


def ranges(segments: pa.Table, quarantined: pa.Table) -> Mapping[tuple[str, int], tuple[Range, ...]]:
    """Per data partition (all replicas): the offsets each quarantined region may hold.

    ``segments``: (broker, topic, partition, file_offset) of every segment of the replicas concerned;
    ``quarantined``: (broker, topic, partition, file_offset, file, first_offset, last_offset) of the
    regions, ``first_offset``/``last_offset`` from :func:`region_offsets` (null: no valid batch on that
    side in the file). Few rows: one per damaged region and per segment of a damaged replica.
    """
    replica = ["broker", "topic", "partition"]
    segs = segments.select([*replica, "file_offset"]).filter(pc.is_valid(segments.column("file_offset")))
    # only the damaged partitions' segments bound a region (grouping every segment of a copy of many partitions
    # cost more than the rest of this rule)
    damaged = quarantined.select(["topic", "partition"]).drop_null().group_by(["topic", "partition"]).aggregate([])
    segs = segs.join(damaged, ["topic", "partition"], join_type="left semi", use_threads=False)
    next_base: dict[tuple[str, str, int], np.ndarray] = {}
    for key, bases in _grouped(segs, replica, "file_offset").items():
        next_base[key] = np.unique(bases)
    columns = [*replica, "file_offset", "file", "first_offset", "last_offset"]
    columns += [c for c in ("detail", "input") if c in quarantined.column_names]
    out: dict[tuple[str, int], set[Range]] = {}
    for q in quarantined.select(columns).to_pylist():
        if q["topic"] is None or q["file_offset"] is None:
            continue
        base = int(q["file_offset"])
        lo = int(q["first_offset"]) if q["first_offset"] is not None else base
        if q["last_offset"] is not None:
            hi: int | None = int(q["last_offset"]) + 1
        else:
            bases = next_base.get((q["broker"], q["topic"], int(q["partition"])), np.empty(0, np.int64))
            later = bases[bases > base]
            hi = int(later[0]) if later.size else None
        line = q.get("detail") if q.get("input") == InputSource.DUMP_LOG else None
        where = region_source(q["file"], q["first_offset"] is not None, q["last_offset"] is not None, line)
        out.setdefault((q["topic"], int(q["partition"])), set()).add((lo, hi, where))
    return {k: tuple(sorted(v, key=repr)) for k, v in out.items()}


def region_source(file: str, bounded_before: bool, bounded_after: bool, dump_line: str | None = None) -> str:
    """The file a region lies in, how its offsets were bounded and, for a kafka-dump-log.sh input, the dump
    line that showed it (``DUMP FILE:LINE: text``): what a finding's evidence names after the offsets.

    >>> region_source("/k/e-0/0.log", True, True)
    '/k/e-0/0.log (bounded by the valid batches either side)'
    >>> region_source("/k/e-0/0.log", True, False, "b1.txt:7: baseOffset: 5 lastOffset: 9 ... isvalid: false")
    '/k/e-0/0.log (no valid batch after it in the file: up to the next segment or the log end; b1.txt:7: \
baseOffset: 5 lastOffset: 9 ... isvalid: false)'
    """
    if bounded_before and bounded_after:
        bound = "bounded by the valid batches either side"
    elif bounded_after:
        bound = "no valid batch before it in the file: from the segment's base offset"
    elif bounded_before:
        bound = "no valid batch after it in the file: up to the next segment or the log end"
    else:
        bound = "no valid batch in the file: the whole segment"
    return f"{file} ({bound}{'; ' + dump_line if dump_line else ''})"


def _grouped(table: pa.Table, keys: list[str], value: str) -> dict[tuple, np.ndarray]:
    rows: dict[tuple, list[int]] = {}
    for r in table.to_pylist():
        rows.setdefault(tuple(r[k] for k in keys), []).append(int(r[value]))
    return {k: np.asarray(v, np.int64) for k, v in rows.items()}
