"""``txnlog describe`` / ``describe-producers`` over tables written by hand with delta-rs (no Spark):
the columns that depend on a coordinator state or a transaction outcome."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from txnlog import tables
from txnlog.cli import main
from txnlog.delta import write_tables

AS_OF = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)


def _table(schema: pa.Schema, rows: list[dict]) -> pa.Table:
    keys = {"cluster": "c1", "as_of": AS_OF}
    return pa.Table.from_pylist([{**{f.name: None for f in schema}, **keys, **r} for r in rows], schema=schema)


def _cli(output: Path, *argv: str) -> list[list[str]]:
    out = io.StringIO()
    assert main([*argv, "--output", str(output)], out=out) == 0
    return [line.split() for line in out.getvalue().splitlines()]


def test_describe_shows_a_duration_only_while_in_flight(tmp_path: Path) -> None:
    start = AS_OF - timedelta(minutes=5)
    state = {"producer_id": 7, "producer_epoch": 0, "coordinator_partition": 3, "is_tombstoned": False}
    coordinator = _table(
        tables.COORDINATOR_STATE,
        [
            {**state, "transactional_id": "busy", "state": "PrepareCommit", "txn_start_timestamp": start},
            {**state, "transactional_id": "done", "state": "CompleteCommit", "txn_start_timestamp": start},
        ],
    )
    history = _table(tables.COORDINATOR_HISTORY, [])
    write_tables(
        None,
        str(tmp_path),
        {"coordinator_state": coordinator, "coordinator_history": history},
        cluster="c1",
        as_of=AS_OF,
    )
    header, busy = _cli(tmp_path, "describe", "--transactional-id", "busy")
    assert dict(zip(header, busy, strict=True))["TransactionDurationMs"] == "300000"
    header, done = _cli(tmp_path, "describe", "--transactional-id", "done")
    assert dict(zip(header, done, strict=True))["TransactionDurationMs"] == "-"


def test_describe_producers_shows_the_open_transactions_start(tmp_path: Path) -> None:
    t0 = AS_OF - timedelta(hours=1)
    txn = {"topic": "orders", "partition": 0, "producer_epoch": 1, "last_timestamp": t0, "coordinator_epoch": 2}
    transactions = _table(
        tables.TRANSACTIONS,
        [
            {**txn, "producer_id": 1, "first_offset": 0, "outcome": "COMMIT", "marker_timestamp": t0},
            {**txn, "producer_id": 1, "first_offset": 10, "outcome": "OPEN"},
            {**txn, "producer_id": 2, "first_offset": 5, "outcome": "ABORT", "marker_timestamp": t0},
        ],
    )
    write_tables(None, str(tmp_path), {"transactions": transactions}, cluster="c1", as_of=AS_OF)
    header, *rows = _cli(tmp_path, "describe-producers", "--topic", "orders", "--partition", "0")
    start = {r[0]: dict(zip(header, r, strict=True))["CurrentTransactionStartOffset"] for r in rows}
    assert start == {"1": "10", "2": "-"}
