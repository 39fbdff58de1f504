"""What a run's decode hands on, whichever placement decodes (txnlog.engine.tasks.decode_here in this process,
txnlog.engine.spark.decode in Spark's tasks; txnlog.pipeline.decode chooses, and tells it
txnlog.engine.settings.ReadSettings): :class:`Decoded`.

The consumer groups' offsets of a copy's ``__consumer_offsets`` partitions are read when a step asks for them and
only for the topic partitions it names (:class:`GroupOffsets`). The job needs a group's committed offset only where
it matters: on a partition whose LSO a finding's transaction holds (txnlog.rules.blocked.held_partitions) and on a
partition with an integrity anomaly (txnlog.rules.blocked.groups_past); and every pending transactional commit with
the committed offsets beside it, which the reader keeps whatever is asked
(txnlog.engine.consumer_offsets.read_partition). Those partitions are known only once the tables are built, so the
``__consumer_offsets`` partitions are read then, not with the other inputs: every record is still walked and
checked (a bad one is a quarantine row), but only the records of those topic partitions are built into columns and
replayed. The walk over every record does not depend on what is asked: the local placement starts it with the decode,
on a thread of its own, and a step's request only picks the records it needs from what the walk noted
(txnlog.engine.tasks.OffsetsJobs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA as OFFSETS_ROWS
from txnlog.model.rows import Checkpoint

__all__ = ["Decoded", "GroupOffsets", "live_offsets", "offsets_for"]


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


def live_offsets(groups: pa.Table) -> pa.Table:
    """A live cluster's groups (txnlog.live.groups.GROUPS_SCHEMA) as the ``__consumer_offsets`` source's rows
    (txnlog.engine.consumer_offsets.SOURCE_SCHEMA; what a live answer lacks is null): one rule reads both."""
    n = groups.num_rows
    columns = {f.name: groups[f.name] if f.name in groups.column_names else pa.nulls(n, f.type) for f in OFFSETS_ROWS}
    return pa.table(columns).cast(OFFSETS_ROWS)


@dataclass(frozen=True)
class Decoded:
    """The inputs' rows as Arrow tables, and what the decode found out on the way: everything the tables are built
    from besides the run's ``as_of`` and thresholds (txnlog.pipeline.build)."""

    #: segment / quarantine / transaction / producer / snapshot rows, every partition's fragments merged into its
    #: transactions (txnlog.rules.transactions)
    summary: pa.Table
    records: pa.Table  # __transaction_state records, reduced per coordinator partition (txnlog.rules.coordinator)
    #: the newest broker-written time per source (txnlog.broker.as_of)
    times: dict[str, int | None] = field(default_factory=dict)
    txn_state_read: frozenset[int] = frozenset()  # the __transaction_state partitions the input holds
    checkpoints: tuple[Checkpoint, ...] = ()  # the log dirs' and a live cut's checkpoint files
    history_bounds: pa.Table | None = None  # a live run's bounds of the transactions it writes (LiveCut)
    #: the __consumer_offsets partitions' groups: offsets, members, quarantine
    #: (txnlog.engine.consumer_offsets.SOURCE_SCHEMA), read when a step asks (:class:`GroupOffsets`); a live
    #: run's answers as a table (:func:`live_offsets`)
    offsets: GroupOffsets | pa.Table | None = None
