"""Splitting one big segment into pieces read by several tasks, and stitching them back exactly.

A 1 GiB segment of one hot partition would be one Spark task; its offset index says where batches
start, so the segment can be cut there and its pieces walked in parallel.

**Planning** (:func:`plan_pieces`, in the planning worker): a ``.log`` file larger than
``split_segment_bytes`` is cut into ``ceil(size / split_segment_bytes)`` pieces at the ``.index``
positions nearest to equal cuts. The index must pass the checks a broker makes of it
(``OffsetIndex.sanityCheck``, storage/src/main/java/org/apache/kafka/storage/internals/log/OffsetIndex.java:
a length that is a multiple of 8, a last offset not below the base offset) and the invariants
``OffsetIndex.append`` keeps (offsets strictly increasing) and ``LogSegment.append`` gives it
(positions strictly increasing, inside the file); otherwise — no index, an empty one, a failed check
— the file is read whole by one task, as before (:func:`index_split_points` says why).

**Reading** (txnlog.engine.spark.sources): every piece task maps the whole file and first checks every split
point of the file the same way (:func:`valid_points`): the bytes there must be a v2 batch the walk
takes (magic, length, CRC) whose offsets fit its index entry — ``LogSegment.append`` writes
``(largest offset of the appended records, position of their first batch)`` once more than
``index.interval.bytes`` were appended since the last entry, so the batch at the position has
``previous entry's offset < base offset <= last offset <= entry's offset``. Piece 0 starts at byte 0;
piece ``k`` starts at its split point if that point is valid (else it reads nothing). A piece walks
from its start and stops at the first entry start *on its own chain* that is a valid split point
(``txnlog.kafka.record_batch.scan_segment_piece``); it says which piece that is (``next_piece``).

**Why the stitch is exact.** The walk's state at an entry start only matters when that entry is
damaged (where the previous batch ended, its last offset); at a valid v2 batch the walk emits it and
continues from it whatever came before. The piece walks see the whole file (resync scans, the zero
tail, a truncated tail are decided on the same bytes). So a piece started at a valid batch that the
walk from byte 0 also reaches emits exactly what that walk emits from there on. The *live* pieces are
piece 0 and, from each live piece, the piece it stopped at (:func:`live_pieces`): their entries,
concatenated, are the whole file's walk, entry for entry — batches, quarantine regions (a region ends
where the resync found a valid batch, so none is cut or merged at a stop), legacy entries, the tail.
A piece the chain never stops at is *dead*: the whole walk passed over its start (a damaged region
or a batch that spans the split point, e.g. a resync that landed beyond it, or an index entry pointing
inside a batch); its rows are dropped, and the live piece before it simply walked on through its range
(up to the next split point its chain hits, or the end of the file). So a damaged batch that straddles
a split point, or a damaged batch at one, gives the same quarantine rows as the whole read: the region
from the damage to its resync point is found by the one live walk that crosses it. Its offsets are bounded
by the valid batches either side of it in that piece's walk, else by its segment's bounds
(txnlog.rules.damage): never narrower than a whole read's, so no abort is SAFE that a whole read doubts.

**Transactions: finished in the pieces, edges stitched.** A piece's fragments (txnlog.broker.reconstruct) are its
producers' runs and markers. The transactions between a producer's first and last marker in the piece need
nothing from outside it (their previous marker is in the piece too), so the piece finishes them itself, with
the rule a whole read uses (txnlog.rules.transactions.piece_edges, txnlog.engine.segments.finished_transactions), and
stages them for the ``transactions`` table as a whole partition's task does. What it hands on are its *edges*:
per producer, the fragments up to its first marker, its last marker and what follows it. The partition's
merge (txnlog.engine.spark.collect) reduces the edges of its live pieces and other files like fragments of
consecutive segments: a run cut at a stop is two runs of one transaction, one spanning many pieces is the
tail of one piece, the heads of the pieces where the producer has no marker and the head of the piece with
its marker. A run cut at a stop carries the sequences at its ends (its first batch's epoch and base sequence, its
last batch's last sequence), so the merge checks the cut as a whole read checks a run's batches: the gap a damaged
batch leaves in its producer's sequences is found when the batch after it is in the next piece
(txnlog.broker.reconstruct.cut_sequence_gaps). What else a row needs from outside its piece, the merge has: a
producer snapshot's open transaction (a producer whose snapshot start lies between its first and last marker in a
piece keeps all its fragments at the edge), the snapshot's coordinator epoch (a fact of a producer's first
transaction only), the log's bounds and the replicas (a partition that several log dirs hold is not finished in
pieces: a transaction's row merges every replica's view of it; its pieces hand on every fragment). A dead piece's
finished transactions are dropped with its other rows. The pieces'
``piece`` rows become the file's one ``segment`` row (:func:`segment_row`: min/max/sum of the pieces'),
so log bounds, damage ranges and as_of are those of the whole file.

Limits: remote files (s3a://, hdfs://) are not split — every piece would fetch the whole object;
the budget of ``max_decompressed_bytes`` for compressed *control* batches (a broker never compresses
them) is per piece instead of per file; a piece task whose file cannot be read at all says so
(``next_piece`` = :data:`UNREADABLE`) and the stitch keeps one ``unreadable_file`` row for the file and
nothing else of it, as a whole read of a file that vanished would.

Pure module: numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from txnlog.kafka.wire import OFFSET_INDEX_ENTRY_SIZE

if TYPE_CHECKING:
    from txnlog.kafka.record_batch import Buffer

# txnlog.kafka.record_batch (numba and the compiled walk; txnlog.kafka.indexes imports it) is imported lazily,
# where bytes are read: the stitch (live_pieces, segment_row, txnlog.engine.spark.stitch) needs none of it, nor
# does the driver that plans it (benchmarks/RESULTS.md §2, "Both mixes at 1-8 GiB, index splits only for stragglers").

#: why a file is read whole although it is above the threshold
INDEX_MISSING = "index_missing"
INDEX_EMPTY = "index_empty"
INDEX_BAD_LENGTH = "index_length_not_multiple_of_8"
INDEX_BELOW_BASE = "index_offset_below_base"
INDEX_OFFSETS_NOT_INCREASING = "index_offsets_not_increasing"
INDEX_POSITIONS_NOT_INCREASING = "index_positions_not_increasing"
INDEX_POSITION_PAST_END = "index_position_past_end"
INDEX_TOO_FEW = "index_has_no_inner_position"


@dataclass(frozen=True, slots=True)
class SplitPoints:
    """The index entries a file may be cut at: byte ``positions`` (> 0, < size, increasing), each batch's
    index ``offsets`` and the ``previous`` entry's offset (base offset − 1 for the first)."""

    positions: np.ndarray
    offsets: np.ndarray
    previous: np.ndarray


#: what reading a partition in pieces costs besides its bytes, in units of the partition's own decode. Each piece
#: finishes the transactions between its producers' markers and hands on only its edges, so the pieces' CPU is the
#: whole read's, and the merge of their edge fragments is small beside it. What remains is the merge's own Spark
#: stages, a few seconds of wall time whatever the partition (benchmarks/RESULTS.md §2, "Pieces hand on their
#: edges"): about a quarter of a 1 GiB partition's decode.
SPLIT_OVERHEAD = 0.25


def worth_splitting(sizes: np.ndarray, units: np.ndarray, split_bytes: int, cores: int) -> np.ndarray:
    """Which files to read in pieces: those above ``split_bytes`` whose *unit* (``units[i]``: the partition
    when one task reads a partition whole, else the file itself) would still be walking when every other
    core is done, by more than splitting costs.

    Read whole, such a unit takes ``unit`` (its bytes, in time) on one core while the rest of the input
    shares the others; read in pieces, every core shares the input plus the split's overhead
    (:data:`SPLIT_OVERHEAD` × ``unit``). Splitting wins when ``unit > (total + overhead × unit) / cores``,
    i.e. ``unit × (cores − overhead) > total``: on 2 cores a partition holding more than 57 % of the input,
    on 8 one holding more than ~13 %. Before the pieces finished their own transactions (every fragment was
    merged in one task per partition, an overhead of about 1): on 4 GiB of exactly-once traffic
    (685 partitions, the 12 largest ~0.2 GiB each with one ~200 MiB segment) splitting every segment above
    128 MiB took the job from 28 s to 73 s on 2 cores and won nothing (RESULTS §2, "Both mixes at 1–8 GiB,
    index splits only for stragglers"), and a partition holding 55 % of the input was 1.3–2.3× slower split
    on 2 cores. It is not split on 2 cores now either: read whole, its task is a fraction of the decode (the rest
    keeps the other core busy as long), so the split's fixed cost buys nothing. A hot 4 GiB partition of 1 GiB
    segments on its own is one to split (its share is all of it).
    """
    sizes = np.asarray(sizes, np.int64)
    if sizes.size == 0 or split_bytes <= 0 or cores < 2:
        return np.zeros(sizes.size, bool)
    units = np.asarray(units, np.int64)
    _, inverse = np.unique(units, return_inverse=True)
    unit_bytes = np.bincount(inverse.reshape(-1), weights=sizes).astype(np.int64)
    wins = unit_bytes * (cores - SPLIT_OVERHEAD) > sizes.sum()
    return (sizes > split_bytes) & wins[inverse.reshape(-1)]


def index_split_points(index: Buffer | None, base_offset: int, size: int) -> SplitPoints | str:
    """The usable entries of a segment's ``.index`` bytes (None: no index), or why there are none."""
    if index is None:
        return INDEX_MISSING
    from txnlog.kafka.indexes import decode_offset_index  # lazy: see the note at the imports
    from txnlog.kafka.record_batch import as_uint8

    raw = as_uint8(index)
    if raw.size % OFFSET_INDEX_ENTRY_SIZE:  # OffsetIndex.sanityCheck: length() % entrySize() != 0
        return INDEX_BAD_LENGTH
    decoded = decode_offset_index(raw, base_offset=base_offset)
    relative = decoded.entries["relative_offset"].astype(np.int64)
    positions = decoded.entries["position"].astype(np.int64)
    offsets = decoded.entries["offset"].astype(np.int64)
    if relative.size == 0 or (relative.size == 1 and relative[0] == 0 and positions[0] == 0):
        return INDEX_EMPTY  # nothing, or only the zeros of a preallocated index
    if (relative < 0).any():  # OffsetIndex.sanityCheck: lastOffset < baseOffset
        return INDEX_BELOW_BASE
    if (np.diff(offsets) <= 0).any():  # OffsetIndex.append: "no larger than the last offset appended"
        return INDEX_OFFSETS_NOT_INCREASING
    if (np.diff(positions) <= 0).any() or positions[0] < 0:
        return INDEX_POSITIONS_NOT_INCREASING
    if positions[-1] >= size:
        return INDEX_POSITION_PAST_END
    previous = np.concatenate([[base_offset - 1], offsets[:-1]]).astype(np.int64)
    inner = positions > 0
    if not inner.any():
        return INDEX_TOO_FEW
    return SplitPoints(positions[inner], offsets[inner], previous[inner])


def plan_pieces(points: SplitPoints, size: int, piece_bytes: int) -> SplitPoints:
    """The split points that cut a ``size``-byte file into about ``ceil(size / piece_bytes)`` equal pieces:
    for each equal cut, the index position nearest to it (each used once)."""
    pieces = -(-size // max(piece_bytes, 1))
    if pieces < 2 or points.positions.size == 0:
        return SplitPoints(*(np.empty(0, np.int64) for _ in range(3)))
    cuts = (np.arange(1, pieces, dtype=np.float64) * (size / pieces)).astype(np.int64)
    right = np.clip(np.searchsorted(points.positions, cuts), 0, points.positions.size - 1)
    left = np.clip(right - 1, 0, points.positions.size - 1)
    nearer_left = np.abs(points.positions[left] - cuts) <= np.abs(points.positions[right] - cuts)
    chosen = np.unique(np.where(nearer_left, left, right))
    return SplitPoints(points.positions[chosen], points.offsets[chosen], points.previous[chosen])


def valid_points(buf: Buffer, points: SplitPoints, check_crc: bool) -> np.ndarray:
    """Which split points hold the batch their index entry promises (see the module doc). Every piece
    of a file computes this on the same bytes for the points from its own on, so all of them agree on
    where a piece may start."""
    from txnlog.kafka.record_batch import as_uint8, valid_batch_at  # lazy: see the note at the imports

    arr = as_uint8(buf)
    ok = np.zeros(points.positions.size, bool)
    for i, (position, offset, previous) in enumerate(
        zip(points.positions.tolist(), points.offsets.tolist(), points.previous.tolist(), strict=True)
    ):
        batch = valid_batch_at(arr, position, check_crc)
        ok[i] = batch is not None and previous < batch[0] <= batch[1] <= offset
    return ok


#: ``next_piece`` of a piece whose file could not be read at all (the task's I/O failed)
UNREADABLE = -1


def piece_of_stop(positions: np.ndarray, stopped_at: int) -> int:
    """The piece a walk handed over to: ``k`` for split point ``k - 1``; ``len(positions) + 1`` (past the
    last piece) when it reached the end of the data."""
    k = int(np.searchsorted(positions, stopped_at))
    return k + 1 if k < positions.size and positions[k] == stopped_at else positions.size + 1


def live_pieces(next_piece: Mapping[int, int | None]) -> list[int]:
    """The pieces whose entries are the whole file's walk: 0, then each live piece's ``next_piece``.
    ``next_piece[k]`` is None for a piece that did not start (its split point is not valid)."""
    live: list[int] = []
    k: int | None = 0
    while k is not None and k in next_piece and next_piece[k] is not None:
        live.append(k)
        nxt = next_piece[k]
        if nxt is None or nxt <= k:
            break
        k = nxt
    return live


#: columns of a file's ``segment`` row and how the pieces' values reduce to it
SEGMENT_REDUCTIONS: dict[str, str] = {
    "first_offset": "min",
    "last_offset": "max",
    "first_timestamp": "min",
    "last_timestamp": "max",
    "batch_count": "sum",
    "record_count": "sum",
    "size_bytes": "max",
    "legacy_entries": "sum",
    "marker_timestamp": "max",
    "log_append_timestamp": "max",
}


def segment_row(pieces: Sequence[Mapping[str, int | None]]) -> dict[str, int | None]:
    """A file's ``segment`` row values from its live pieces' rows (nulls skipped, as Spark does)."""
    out: dict[str, int | None] = {}
    for name, how in SEGMENT_REDUCTIONS.items():
        values = [int(v) for p in pieces if (v := p.get(name)) is not None]
        if how == "sum":
            out[name] = sum(values)
        else:
            out[name] = (min if how == "min" else max)(values) if values else None
    return out
