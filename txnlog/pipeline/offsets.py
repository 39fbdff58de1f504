"""The consumer groups' offsets of a copy's ``__consumer_offsets`` partitions, read when a step asks for them and
only for the topic partitions it names.

The job needs a group's committed offset only where it matters: on a partition whose LSO a finding's transaction
holds (txnlog.rules.blocked.held_partitions) and on a partition with an integrity anomaly
(txnlog.rules.blocked.groups_past); and every pending transactional commit with the committed offsets beside it,
which the reader keeps whatever is asked (txnlog.engine.consumer_offsets.read_partition). Those
partitions are known only once the tables are built, so the ``__consumer_offsets`` partitions are read then, not
with the other inputs: every record is still walked and checked (a bad one is a quarantine row), but only the
records of those topic partitions are built into columns and replayed.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

__all__ = ["GroupOffsets", "offsets_for"]


class GroupOffsets:
    """The ``__consumer_offsets`` source's rows (txnlog.engine.consumer_offsets.SOURCE_SCHEMA) for the topic partitions
    asked so far. ``read`` reads them for a sorted list of (topic, partition); a request that names a partition
    not yet read reads again for all asked (the same quarantine rows each time: every record is walked)."""

    def __init__(self, read: Callable[[list[tuple[str, int]]], pa.Table]) -> None:
        self._read = read
        self._asked: set[tuple[str, int]] = set()
        self._table: pa.Table | None = None

    def rows(self, partitions: pa.Table) -> pa.Table:
        """The rows of every group's offsets on the topic partitions of ``partitions`` (its ``topic`` and
        ``partition`` columns; nulls ignored), the pending ones of every partition, and the groups' members;
        the rows of earlier requests' partitions too."""
        pairs = partitions.select(["topic", "partition"]).drop_null().to_pylist()
        wanted = {(p["topic"], p["partition"]) for p in pairs}
        if self._table is None or not wanted <= self._asked:
            self._asked |= wanted
            self._table = self._read(sorted(self._asked))
        return self._table


def offsets_for(offsets: GroupOffsets | pa.Table | None, partitions: pa.Table) -> pa.Table | None:
    """``offsets``' rows for ``partitions`` (:meth:`GroupOffsets.rows`): a table as given (a live cluster's
    answers, read whole), None where the input holds no ``__consumer_offsets`` partition."""
    if offsets is None or isinstance(offsets, pa.Table):
        return offsets
    return offsets.rows(partitions)
