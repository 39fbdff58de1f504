"""The stitch of split segments in Spark (txnlog.sources.splits has the design and why it is exact).

After the decode, the summary of a split segment holds, per piece, its fragments, quarantine and
producer rows (``piece`` set) and one row of kind ``piece``. :func:`stitch_pieces` reads the ``piece``
rows (one per piece: a handful per big segment), follows each file's chain of live pieces on the
driver, drops the rows of dead pieces (none unless the walk passed over a split point) and replaces
the ``piece`` rows by the file's one ``segment`` row. The result is the summary a whole read gives,
with the split partitions' transactions still to merge from their pieces' edges (``fragments=True``
downstream; the transactions a piece finished itself are rows of the summary already, those of dead pieces
dropped here with their other rows).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txnlog.model.rows import KIND_PIECE, KIND_SEGMENT
from txnlog.sources import splits as S

_KEY_SEPARATOR = "\u0000"


def live_and_dead(pieces: Iterable[Any]) -> tuple[dict[tuple[str, str], list[Any]], set[tuple[str, str, int]]]:
    """Per (broker, file): its live ``piece`` rows in order; and the (broker, file, piece) of dead ones."""
    by_file: dict[tuple[str, str], dict[int, Any]] = {}
    for row in pieces:
        by_file.setdefault((row["broker"], row["file"]), {})[int(row["piece"])] = row
    live: dict[tuple[str, str], list[Any]] = {}
    dead: set[tuple[str, str, int]] = set()
    for key, rows in by_file.items():
        unreadable = sorted(k for k, r in rows.items() if r["next_piece"] == S.UNREADABLE)
        if unreadable:  # as a whole read of an unreadable file: its one quarantine row, no segment row
            live[key] = []
            dead |= {(*key, k) for k in rows if k != unreadable[0]}
            continue
        chain = S.live_pieces({k: r["next_piece"] for k, r in rows.items()})
        live[key] = [rows[k] for k in chain]
        dead |= {(*key, k) for k in rows if k not in chain}
    return live, dead


def stitch_pieces(
    summary: DataFrame,
) -> tuple[DataFrame, frozenset[tuple[str, int]], frozenset[tuple[str, str, int]]]:
    """(the summary with split segments stitched, the (topic, partition)s that had a split segment, the dead
    pieces: (broker, file, piece) of each piece the whole walk passes over). One small Spark job: the
    ``piece`` rows are collected to the driver — one per piece, at most one per ``split_segment_bytes`` of
    the split segments (8 per GiB at the default), the same order as the file listing the driver already
    holds; never a row per batch or transaction."""
    pieces = summary.filter(F.col("kind") == KIND_PIECE).collect()
    rest = summary.filter(F.col("kind") != KIND_PIECE)
    if not pieces:
        return rest, frozenset(), frozenset()
    split = frozenset((r["topic"], int(r["partition"])) for r in pieces)
    live, dead = live_and_dead(pieces)
    if dead:
        key = F.concat_ws(_KEY_SEPARATOR, "broker", "file", F.col("piece").cast("string"))
        names = [_KEY_SEPARATOR.join((b, f, str(k))) for b, f, k in dead]
        rest = rest.filter(F.col("piece").isNull() | ~key.isin(names))
    rows = []
    for chain in live.values():
        if not chain:
            continue
        first = chain[0].asDict()
        values = {**first, **S.segment_row([r.asDict() for r in chain])}
        values.update(kind=KIND_SEGMENT, piece=None, next_piece=None)
        rows.append(tuple(values.get(name) for name in summary.columns))
    segments = summary.sparkSession.createDataFrame(rows, schema=summary.schema)
    return rest.unionByName(segments), split, frozenset(dead)
