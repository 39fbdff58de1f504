"""The job's integrity audit step: the ``integrity`` table (txnlog.rules.integrity) from the run's staged
transactions and coordinator history and the inputs' ``.txnindex`` files (txnlog.sources.txnindex), and the
quarantine rows of the ``.txnindex`` files that could not be read whole.

The audit runs where the partitions' other work runs (txnlog.engine.spark.placement): in Spark's tasks, per
(topic, partition), over the staged transactions where they were staged (txnlog.engine.spark.integrity); or, for
a small input, in this process, a group of whole partitions at a time on the placement's threads, over the audited
columns the merges kept as they staged them, up to a budget (:func:`audited_in_memory`), and the coordinator's
decisions built a ``__transaction_state`` partition at a time (txnlog.engine.integrity.audit_here). The
``.txnindex`` entries (34 bytes per aborted transaction) are read here and handed to every partition's check.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from txnlog.engine.decoded import GroupOffsets, offsets_for
from txnlog.engine.integrity import audit_here, decisions_of, kept_columns
from txnlog.model.rows import Checkpoint
from txnlog.rules.blocked import groups_past
from txnlog.rules.integrity import compacted_gaps, unserved, with_readers, with_timestamps
from txnlog.sources.logdirs import Inventory
from txnlog.sources.txnindex import TxnIndexes, read_txn_indexes

__all__ = ["audited_in_memory", "with_integrity"]


def audited_in_memory(scratch: str, driver: bool) -> AbstractContextManager[None]:
    """Around a run's decode and build: where they stage in this process (``driver``: the driver placement), the
    audited columns are kept as the merges write them, so that :func:`with_integrity` reads nothing again
    (txnlog.engine.integrity.kept_columns)."""
    return kept_columns(scratch) if driver else nullcontext()


def _entries(reading: Future[TxnIndexes]) -> tuple[pa.Table, pa.Table]:
    """The ``.txnindex`` entries and their segments, once ``reading`` has read them."""
    found = reading.result()
    return found.entries, found.segments


def with_integrity(
    tables: dict[str, Any],
    inventory: Inventory,
    checkpoints: Sequence[Checkpoint],
    as_of: datetime,
    offsets: GroupOffsets | pa.Table | None = None,
) -> dict[str, Any]:
    """``tables`` (``pipeline.build_tables``' answer) with ``integrity`` and the ``.txnindex`` quarantine rows;
    ``offsets`` the consumer groups' rows (txnlog.engine.decoded, None: no ``__consumer_offsets`` in the input),
    whose groups the evidence names where they read a faulty range (txnlog.rules.blocked.groups_past; the groups'
    offsets are read for those ranges' partitions only, txnlog.engine.decoded)."""
    history, staged = tables["coordinator_history"].raw_files(), tables["transactions"]
    if staged.driver or staged.spark is None:
        # A group of whole partitions at a time, with the decisions that name them, on the placement's threads
        # (txnlog.engine.integrity.audit_here): the memory does not grow with the input.
        # The .txnindex files read on a thread of their own while the decisions are built and split.
        spill = posixpath.join(posixpath.dirname(staged.stage), "audit_decisions")
        with ThreadPoolExecutor(1, thread_name_prefix="txnlog-txnindex") as beside:
            reading = beside.submit(read_txn_indexes, inventory.segments, inventory.txn_indexes, checkpoints)
            rows = audit_here(staged.raw_files(), history, partial(_entries, reading), spill, staged.threads)
            found = reading.result()
    else:  # Lazy: pyspark loads only where a run uses Spark.
        from txnlog.engine.spark.integrity import integrity_in_tasks

        found = read_txn_indexes(inventory.segments, inventory.txn_indexes, checkpoints)
        decided_here = decisions_of(history)
        rows = integrity_in_tasks(staged.spark, staged.raw_files(), found.entries, found.segments, decided_here)
    out = dict(tables)
    rows = unserved(compacted_gaps(rows, checkpoints), tables["partition_health"])
    rows = with_readers(rows, groups_past(offsets_for(offsets, rows), rows))
    out["integrity"] = with_timestamps(rows)
    if found.quarantine:
        mine = out["quarantine"]
        quarantined = pa.Table.from_pylist(
            [
                {
                    "file": q.file,
                    "position": q.position,
                    "length": q.length,
                    "reason": q.reason,
                    "detail": q.detail,
                    "topic": f.topic,
                    "partition": f.partition,
                    "replica": f.broker,
                }
                for f, q in found.quarantine
            ]
        )
        out["quarantine"] = pa.concat_tables([mine, quarantined.select(mine.column_names).cast(mine.schema)])
    return out
