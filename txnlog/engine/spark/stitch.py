"""The stitch of split segments in Spark (txnlog.sources.splits has the design and why it is exact).

After the decode, the summary of a split segment holds, per piece, its fragments, quarantine and
producer rows (``piece`` set) and one row of kind ``piece``. :func:`stitch_pieces` groups the ``piece`` rows
by file (``groupBy(broker, file).applyInArrow``) and, in the tasks, follows each file's chain of live pieces
(:func:`live_and_dead`) and makes the file's one ``segment`` row from them (txnlog.sources.splits.segment_row);
the dead pieces (none unless the walk passed over a split point) come out of the same function as their
``piece`` rows, and their other rows are dropped by an anti-join on (broker, file, piece). Nothing of the
pieces reaches the driver. The result is the summary a whole read gives, with the split partitions'
transactions still to merge from their pieces' edges (txnlog.engine.spark.collect.merged_fragments, which
drops what the dead pieces staged; the transactions a piece finished itself are rows of the summary
already, those of dead pieces dropped here with their other rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txnlog.model.rows import KIND_PIECE, KIND_SEGMENT
from txnlog.sources import splits as S

#: a dead piece's key: its other rows carry the same
DEAD_KEY = ("broker", "file", "piece")


def live_and_dead(
    pieces: Iterable[Mapping[str, Any]],
) -> tuple[dict[tuple[str, str], list[Any]], set[tuple[str, str, int]]]:
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


def stitched_rows(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One file's ``piece`` rows (or several files'): each file's ``segment`` row (the first live piece's
    values, the live pieces' reduced, txnlog.sources.splits.segment_row) and its dead pieces' ``piece`` rows."""
    live, dead = live_and_dead(pieces)
    out: list[dict[str, Any]] = []
    for chain in live.values():
        if chain:
            out.append({**chain[0], **S.segment_row(chain), "kind": KIND_SEGMENT, "piece": None, "next_piece": None})
    out += [r for r in pieces if (r["broker"], r["file"], int(r["piece"])) in dead]
    return out


@dataclass(frozen=True)
class Stitched:
    """:func:`stitch_pieces`' answer, every part a DataFrame (nothing collected)."""

    summary: DataFrame  # the summary a whole read gives: no piece row, no dead piece's row
    segments: DataFrame  # the split files' segment rows (in ``summary`` too)
    partitions: DataFrame  # (topic, partition) of every split segment: the partitions to merge
    dead: DataFrame  # the dead pieces' ``piece`` rows (the summary's columns): what the merge drops


def stitch_pieces(summary: DataFrame, persist: Callable[[DataFrame], DataFrame] | None = None) -> Stitched:
    """The summary with split segments stitched (see the module doc): ``persist`` keeps the stitch's few rows
    (a file's segment row and its dead pieces) for the several uses downstream."""
    kind = F.col("kind")
    pieces = summary.filter(kind == KIND_PIECE)

    def stitch_file(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        return pa.Table.from_pylist(stitched_rows(table.to_pylist()), schema=table.schema)

    out = pieces.groupBy("broker", "file").applyInArrow(stitch_file, summary.schema)
    out = persist(out) if persist is not None else out
    segments = out.filter(kind == KIND_SEGMENT)
    dead = out.filter(kind == KIND_PIECE)
    # the dead keys are a handful of rows at most (usually none): broadcast, the summary is not shuffled
    rest = summary.filter(kind != KIND_PIECE).join(F.broadcast(dead.select(*DEAD_KEY)), list(DEAD_KEY), "left_anti")
    partitions = pieces.select("topic", "partition").distinct()
    return Stitched(rest.unionByName(segments), segments, partitions, dead)
