"""The job's integrity audit step: the ``integrity`` table (txnlog.rules.integrity) from the run's staged
transactions and coordinator history and the inputs' ``.txnindex`` files (txnlog.sources.txnindex), and the
quarantine rows of the ``.txnindex`` files that could not be read whole.

The staged rows are read back on the driver (every transaction: the rule needs each ABORT and each producer's
COMMITs around an index entry); in both placements they are files under the run's scratch directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from txnlog.engine import staging
from txnlog.model import contract
from txnlog.model.rows import Checkpoint
from txnlog.rules.finish import FinishHistory
from txnlog.rules.integrity import integrity
from txnlog.sources.logdirs import Inventory
from txnlog.sources.txnindex import read_txn_indexes

__all__ = ["with_integrity"]

_TXN_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "first_offset",
    "last_offset",
    "marker_offset",
    "control_type",
    "replicas",
    "open_replicas",
    "record_count",
    "size_bytes",
    "first_timestamp",
    "last_timestamp",
)


def with_integrity(
    tables: dict[str, Any], inventory: Inventory, checkpoints: Sequence[Checkpoint], as_of: datetime
) -> dict[str, Any]:
    """``tables`` (``pipeline.build_tables``' answer) with ``integrity`` and the ``.txnindex`` quarantine rows."""
    found = read_txn_indexes(inventory.segments, inventory.txn_indexes, checkpoints)
    txns = _staged(tables["transactions"], list(_TXN_COLUMNS))
    raw_history = _staged(tables["coordinator_history"], None)
    history = FinishHistory()(raw_history, "", as_of) if raw_history.num_rows else _empty_history()
    out = dict(tables)
    out["integrity"] = integrity(txns, found.entries, found.segments, history)
    if found.quarantine:
        mine = out["quarantine"]
        rows = pa.Table.from_pylist(
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
        out["quarantine"] = pa.concat_tables([mine, rows.select(mine.column_names).cast(mine.schema)])
    return out


def _staged(table: Any, columns: list[str] | None) -> pa.Table:
    """Every row a staged table (txnlog.engine.spark.staged_table.StagedTable) holds, as staged."""
    parts = [staging.read_raw(path) for path in table.raw_files()]
    parts = [p if columns is None else p.select(columns) for p in parts if p.num_rows]
    if not parts:
        if columns is None:
            return pa.table({})
        return pa.Table.from_pylist([], schema=pa.schema([(c, _RAW_TYPES.get(c, pa.int64())) for c in columns]))
    return pa.concat_tables(parts, promote_options="permissive")


_RAW_TYPES = {
    "topic": pa.string(),
    "partition": pa.int32(),
    "producer_epoch": pa.int32(),
    "control_type": pa.int32(),
    "replicas": pa.list_(pa.string()),
    "open_replicas": pa.list_(pa.string()),
}


def _empty_history() -> pa.Table:
    return contract.COORDINATOR_HISTORY.empty_table()
