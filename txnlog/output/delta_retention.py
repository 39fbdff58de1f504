"""The history's retention: dropping old runs' rows from every output table, and vacuuming the files no
recent version references (``txnlog retain``, and the job after a complete run: txnlog.output.retention says what
to keep). Rows are removed with the writer's own file rewrite (txnlog.output.delta), one commit per table.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model import contract
from txnlog.output.delta_base import ONE_MS, STAGE_PREFIX, DataFile, Location, iso_ms, key_as_of
from txnlog.output.delta_rs import rewrite_without

log = logging.getLogger(__name__)


def drop_runs_before(output: str, cutoffs: Mapping[str, datetime]) -> dict[str, int]:
    """Delete every row of cluster ``c`` whose ``as_of`` is before ``cutoffs[c]``, from every output table;
    return the rows deleted per table.

    One commit per table, ``runs`` first: a run whose ``runs`` row is gone is invisible to every reader
    before its other rows go, so an interrupted retention never shows a run with missing rows, and the
    next one (the same cutoffs, not a list of runs) deletes what is left. Files that hold only deleted rows
    are removed whole (a run's files hold that run alone unless someone compacted the table); any other
    file that may hold such rows is rewritten without them. The removed files stay on disk for time
    travel and running readers until :func:`vacuum` deletes them.
    """
    # Lazy in this module: deltalake loads only on the path that writes or reads with delta-rs.
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction

    base = Location.of(output)
    cuts = {c: key_as_of(t) for c, t in cutoffs.items()}
    deleted: dict[str, int] = {}
    for name in ["runs", *(t for t in contract.TABLES if t != "runs")]:
        location = base.child(name)
        if not location.is_table() or not cuts:
            continue
        table = location.table()
        actions = pa.table(table.get_add_actions(flatten=True))
        names = set(actions.column_names)

        def column(key: str, actions: pa.Table = actions, names: set[str] = names) -> list[Any]:
            return actions.column(key).to_pylist() if key in names else [None] * actions.num_rows

        stage = f"{STAGE_PREFIX}{uuid.uuid4().hex}"
        removes: list[Any] = []
        adds: list[DataFile] = []
        rows = 0
        now_ms = int(time.time() * 1000)
        files = zip(
            column("path"), column("size_bytes"), column("num_records"), column("min.cluster"),
            column("max.cluster"), column("min.as_of"), column("max.as_of"), strict=True,
        )  # fmt: skip
        for path, size, records, c_lo, c_hi, t_lo, t_hi in files:
            known = None not in (c_lo, c_hi, t_lo, t_hi)
            if known and c_lo == c_hi and c_lo in cuts and t_hi + ONE_MS <= cuts[c_lo] and records is not None:
                removes.append(RemoveAction(path, True, now_ms, size=size, partition_values={}))
                rows += int(records)
                continue
            if known and not any(c_lo <= c <= c_hi and t_lo < cut for c, cut in cuts.items()):
                continue
            outcome = rewrite_without(location, path, stage, lambda b: _before(b, cuts))
            if outcome is not None:
                removes.append(RemoveAction(path, True, now_ms, size=size, partition_values={}))
                rows += outcome.dropped
                if outcome.file.rows:
                    adds.append(outcome.file)
        if removes:
            commit = CommitProperties(custom_metadata={"txnlog.output.retention": json.dumps(
                {c: iso_ms(t) for c, t in sorted(cuts.items())})})  # fmt: skip
            new = [AddAction(f.path, f.size, {}, now_ms, True, f.stats) for f in adds]
            table.create_write_transaction([*removes, *new], "append", contract.TABLES[name], commit_properties=commit)
        deleted[name] = rows
        log.info("%s: %d rows before the cutoffs deleted (%d files)", location.uri, rows, len(removes))
    return deleted


def vacuum(output: str, *, retention_hours: int) -> dict[str, int]:
    """Delete the data files no version of the last ``retention_hours`` references, in every output table
    (delta-rs vacuum; Delta's default retention is 168 hours: a shorter one can break readers still on an
    older version and time travel); then checkpoint each table's log. Returns the files deleted per table."""

    base = Location.of(output)
    deleted: dict[str, int] = {}
    for name in contract.TABLES:
        location = base.child(name)
        if not location.is_table():
            continue
        table = location.table()
        gone = table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
        table.create_checkpoint()
        deleted[name] = len(gone)
    return deleted


def _before(batch: pa.RecordBatch, cuts: Mapping[str, datetime]) -> pa.Array:
    as_of_type = batch.schema.field("as_of").type
    mask = pa.repeat(pa.scalar(False), batch.num_rows)
    for cluster, cut in cuts.items():
        term = pc.and_(
            pc.equal(batch.column("cluster"), pa.scalar(cluster, batch.schema.field("cluster").type)),
            pc.less(batch.column("as_of"), pa.scalar(cut).cast(as_of_type)),
        )
        mask = pc.or_(mask, term)
    return mask.fill_null(False)
