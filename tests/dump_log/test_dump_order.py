"""A run's rows do not depend on how its kafka-dump-log.sh files are dealt into tasks.

The same dumps are read through the dump tasks' one pass (txnlog.engine.tasks.dump_rows_task, what both placements
call, its rows named by txnlog.engine.dump_log.rows.named_outputs) dealt in several ways: a task per file in the listing's order and in reverse order, and the files shuffled into
three tasks (a task reads its files together, in the order of their paths). Each way's rows are then merged and
reduced as a run's driver does (txnlog.engine.staging.merged_here) and made into the coordinator's tables
(txnlog.rules.coordinator_tables): every table, and every file staged for ``transactions`` and
``coordinator_history``, must be equal, every row and every column.

Each coordinator record is in the dumps four times, and the copies differ in what they show (Kafka 3.x's
``--transaction-log-decoder`` prints no start timestamp, value version or tagged fields; 4.x's does). Which copy a
run keeps is decided by the copies (txnlog.rules.coordinator.distinct_records), never by which file a task met
first.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from txnlog.engine.dump_log.rows import BOTH, BOTH_SCHEMA, named_outputs
from txnlog.engine.staging import merged_here, read_raw, staged_files
from txnlog.engine.tasks import dump_rows_task, run_here
from txnlog.rules.coordinator_tables import coordinator_history, coordinator_state
from txnlog.sources.dump_log.lines import DEFAULT_CHUNK_BYTES, list_dump_inputs

Files = list[tuple[str, str | None, bool]]

#: ways to deal the dump files into tasks
DEALS: dict[str, Callable[[Files], list[Files]]] = {
    "a task per file, in listing order": lambda files: [[f] for f in files],
    "a task per file, reversed": lambda files: [[f] for f in reversed(files)],
    "shuffled, three tasks": lambda files: [
        s[i::3] for s in [random.Random(7).sample(files, len(files))] for i in range(3)
    ],
}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``--dump-log`` values over one broker's files: every file dumped by Kafka 4.x's tool (replica ``b``), its
    ``__transaction_state`` by 3.x's (``c``) and by each again, both given as replica ``a`` (``a=DIR``: two
    dumps of the same segments under one name)."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    root = tmp_path_factory.mktemp("dump-order")
    write_scenario("tv2_rollover", root / "logs", seed=1)
    inv = discover([str(root / "logs")])
    ways = {"b": ("4.x", False), "c": ("3.x", True), "a4": ("4.x", True), "a3": ("3.x", True)}
    for f in [*inv.segments, *inv.snapshots, *inv.txn_state_segments]:
        txn = f.topic == "__transaction_state"
        for where, (version, txn_only) in ways.items():
            if txn or not txn_only:
                out = root / where / ("txn-state.txt" if txn else f"{f.topic}-{f.partition}.txt")
                out.parent.mkdir(exist_ok=True)
                shown = "/var/lib/kafka/data/" + "/".join(Path(f.path).parts[-2:])
                with open(out, "a") as fh:
                    fh.write(render_dump(f.path, version, deep_iteration=not txn, transaction_log_decoder=txn,
                                         dumping_path=shown))  # fmt: skip
    return [str(root / "b"), str(root / "c"), f"a={root / 'a4'}", f"a={root / 'a3'}"]


def _tasks(groups: list[Files], names: Any, output: str) -> list[Any]:
    return [partial(dump_rows_task, g, names, output, DEFAULT_CHUNK_BYTES) for g in groups if g]


def _read(paths: list[str], deal: Callable[[Files], list[Files]], scratch: Path) -> dict[str, pa.Table]:
    """The tables a run makes of the dumps ``paths`` when its tasks are ``deal`` of the files."""
    groups = deal(list_dump_inputs(paths))
    (rows,) = run_here([(_tasks(groups, {}, BOTH), BOTH_SCHEMA)], 2)
    summary, records = named_outputs(rows)
    summary, records = merged_here(summary, records, [], str(scratch))
    history = coordinator_history(records.append_column("input", pa.repeat(pa.scalar("dump_log"), records.num_rows)))
    tables = {"summary": summary, "records": records, "history": history, "state": coordinator_state(history)}
    for staged in ("transactions", "coordinator_history"):
        tables[f"staged {staged}"] = pa.concat_tables(read_raw(f) for f in staged_files(str(scratch / staged)))
    return tables


def _rows(table: pa.Table) -> list[str]:
    return sorted(repr(sorted(r.items())) for r in table.to_pylist())


def test_the_tables_do_not_depend_on_how_the_dump_files_are_dealt(dumps: list[str], tmp_path: Path) -> None:
    read = {deal: _read(dumps, how, tmp_path / f"deal{i}") for i, (deal, how) in enumerate(DEALS.items())}
    (first, want), *others = read.items()
    for deal, got in others:
        for name, table in want.items():
            assert table.schema.equals(got[name].schema), name
            assert _rows(got[name]) == _rows(table), f"{name}: {deal} differs from {first}"
    # not vacuous: four copies of each coordinator record were read, two of them (3.x's) showing less
    history = want["staged coordinator_history"]
    assert history.num_rows > 0 and want["state"].num_rows > 0
    records = _read_records(dumps)
    assert records.num_rows == 4 * history.num_rows
    shown = records.group_by("broker").aggregate([("txn_start_timestamp", "count")]).to_pylist()
    values = history.num_rows - pc.sum(history.column("is_tombstone")).as_py()  # a tombstone has no start time
    assert sorted((s["broker"], s["txn_start_timestamp_count"]) for s in shown) == [
        ("a", values),
        ("b", values),
        ("c", 0),
    ], shown
    # the copy kept: replica a's (the least name), of its two the one that shows the start timestamp
    kept = want["records"].filter(pc.equal(want["records"].column("kind"), "record"))
    assert set(pc.unique(kept.column("broker")).to_pylist()) == {"a"}
    assert history.column("txn_start_timestamp").null_count == history.num_rows - values


def _read_records(paths: list[str]) -> pa.Table:
    """Every copy of the coordinator's records the dumps hold (one task, the listing's order)."""
    (rows,) = run_here([(_tasks([list_dump_inputs(paths)], {}, BOTH), BOTH_SCHEMA)])
    _, records = named_outputs(rows)
    return records.filter(pc.equal(records.column("kind"), "record"))
