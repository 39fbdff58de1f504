"""One suite every engine passes: each per-partition task (txnlog.engine.tasks) run on the writer's scenarios through
both placements, the local one (the task functions on threads of this process, txnlog.engine.tasks.run_here, as a
run's driver placement calls them) and Spark (the Data Sources in the shared session, whose readers call the same
functions from their string options), and the Arrow outputs compared table by table: every row and every column,
order aside, and every file the tasks stage.

No job runs and nothing is written to Delta, so a scenario takes seconds; tests/e2e/test_placement.py compares the
two placements' whole runs on one larger input. Each task is run as a run gives it work:

* ``merged``: log dirs alone, so the data tasks hold whole partitions and finish their transactions (staged), and the
  ``__transaction_state`` tasks reduce their records (staged); the ``__consumer_offsets`` tasks replay the groups;
* ``fragments``: log dirs beside kafka-dump-log.sh files, so the data tasks hand on fragments and the coordinator
  tasks every record;
* ``integrity``: the integrity audit's per-partition check (txnlog.rules.integrity.partition_integrity) over the
  transactions the ``merged`` data tasks staged, every partition at once in this process
  (txnlog.engine.integrity.integrity_here), a partition per group in Spark (txnlog.engine.spark.integrity);
* ``dumps``: the kafka-dump-log.sh files of a scenario's log dirs (rendered as Kafka's tool prints them,
  tests/e2e/shared.py), through the dump tasks: the "Dumping" lines' pass, then the summary and the records.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import ipc

from tests.e2e.shared import render_broker_dumps

pytestmark = [pytest.mark.spark]

#: small scenarios of the broker-log writer: transactions open and finished, TV2, damage, replicas that disagree,
#: consumer groups behind a hanging transaction (``__consumer_offsets``)
SCENARIOS = [
    "healthy",
    "several_open_transactions",
    "corrupt_and_truncated",
    "replicas_disagree",
    "groups_behind_hanging_transaction",
]
THREADS = 2  # the shared session's local[2]: both placements plan the same tasks


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``written(name)``: scenario ``name``'s log dirs (written once for the module)."""
    from txnlog.brokerlog.scenarios import write_scenario

    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            logs = tmp_path_factory.mktemp(f"engine-{name}") / "logs"
            write_scenario(name, logs, seed=1)
            made[name] = logs
        return made[name]

    return get


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """``table``'s rows as tuples, sorted (the placements hand rows over in different orders); NaN made comparable."""

    def value(v: Any) -> Any:
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    rows = [tuple(value(v) for v in row.values()) for row in table.to_pylist()]
    return sorted(rows, key=repr)


def _assert_same(name: str, local: pa.Table, spark: pa.Table) -> None:
    assert local.schema.equals(spark.schema, check_metadata=False), f"{name}: {local.schema} != {spark.schema}"
    got, want = _rows(local), _rows(spark)
    assert len(got) == len(want), f"{name}: {len(got)} rows here, {len(want)} in Spark"
    differ = [(g, w) for g, w in zip(got, want, strict=True) if g != w]
    assert not differ, f"{name}: {len(differ)} rows differ, first: here {differ[0][0]} / Spark {differ[0][1]}"


def _staged(scratch: Path) -> dict[str, pa.Table]:
    """Every file the tasks staged under ``scratch`` (but the manifests), by its path below it."""
    out: dict[str, pa.Table] = {}
    for path in sorted(p for p in scratch.rglob("*") if p.is_file() and "inputs" not in p.relative_to(scratch).parts):
        with ipc.open_file(str(path)) as reader:
            out[path.relative_to(scratch).as_posix()] = reader.read_all()
    return out


def _spark_read(spark: Any, source: Any, options: dict[str, str], schema: pa.Schema) -> pa.Table:
    spark.dataSource.register(source)
    return spark.read.format(source.name()).options(**options).load().toArrow().cast(schema)


def _log_dirs_both_ways(
    spark: Any, logs: Path, tmp_path: Path, beside_dumps: bool
) -> dict[str, tuple[pa.Table, pa.Table]]:
    from txnlog.engine.consumer_offsets import SOURCE_SCHEMA as OFFSETS_SCHEMA
    from txnlog.engine.settings import Decode
    from txnlog.engine.spark.consumer_offsets_source import ConsumerOffsetsSource
    from txnlog.engine.spark.log_dir_options import log_dir_options
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import TxnStateSource
    from txnlog.engine.tasks import log_dir_jobs, run_here
    from txnlog.engine.txn_state import SOURCE_SCHEMA as TXN_STATE_SCHEMA
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
    from txnlog.sources.logdirs import discover

    inv = discover([str(logs)])
    here, there = tmp_path / "here", tmp_path / "spark"
    jobs, offsets_jobs = log_dir_jobs(
        inv, Decode(), str(here), shared=beside_dumps, dumps=beside_dumps, threads=THREADS
    )
    local = run_here([*jobs, *offsets_jobs(None)], THREADS)
    segments, txn_state, groups = log_dir_options(
        inv, check_crc=True, scratch=str(there), shared=beside_dumps, dumps=beside_dumps, cores=THREADS,
        max_decompressed_bytes=None, split_segment_bytes=0,
    )  # fmt: skip
    in_spark = [
        _spark_read(spark, SegmentsSource, segments, SEGMENT_SUMMARY_SCHEMA),
        _spark_read(spark, TxnStateSource, txn_state, TXN_STATE_SCHEMA),
        _spark_read(spark, ConsumerOffsetsSource, groups, OFFSETS_SCHEMA),
    ]
    tables = dict(zip(("summary", "records", "offsets"), zip(local, in_spark, strict=True), strict=True))
    staged_here, staged_there = _staged(here), _staged(there)
    assert sorted(staged_here) == sorted(staged_there), "the tasks staged different files"
    tables.update({f"staged {name}": (staged_here[name], staged_there[name]) for name in staged_here})
    return tables


CASES = [(s, "merged") for s in SCENARIOS] + [
    ("several_open_transactions", "fragments"),
    ("replicas_disagree", "fragments"),
]


@pytest.mark.parametrize(("scenario", "mode"), CASES)
def test_log_dir_tasks_give_the_same_rows_in_both_placements(spark, written, tmp_path, scenario, mode) -> None:  # type: ignore[no-untyped-def]
    tables = _log_dirs_both_ways(spark, written(scenario), tmp_path, beside_dumps=mode == "fragments")
    for name, (local, in_spark) in tables.items():
        _assert_same(f"{scenario} {mode} {name}", local, in_spark)
    # not vacuous: the scenario's segments, records and (merged) staged transactions are there
    summary, records = tables["summary"][0], tables["records"][0]
    kinds = set(summary.column("kind").to_pylist())
    assert "segment" in kinds and records.num_rows > 0, kinds
    staged = sum(local.num_rows for name, (local, _) in tables.items() if name.startswith("staged "))
    # merged: the transactions are staged, and the reduced records' history; fragments: runs and markers handed on
    assert staged > 0 if mode == "merged" else ("run" in kinds and "marker" in kinds), (kinds, staged)
    if scenario == "groups_behind_hanging_transaction":
        assert tables["offsets"][0].num_rows > 0
    if scenario == "corrupt_and_truncated":
        assert "quarantine" in kinds


@pytest.mark.parametrize("scenario", ["several_open_transactions", "replicas_disagree"])
def test_dump_tasks_give_the_same_rows_in_both_placements(spark, written, tmp_path, scenario) -> None:  # type: ignore[no-untyped-def]
    from txnlog.engine.spark.dump_log import read_dump_logs, read_dump_logs_here
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA
    from txnlog.sources.dump_log.lines import list_dump_inputs

    render_broker_dumps(written(scenario), tmp_path / "dumps")
    paths = [str(p) for p in sorted((tmp_path / "dumps").iterdir())]
    summary, records = read_dump_logs_here(list_dump_inputs(paths), THREADS)
    frames = read_dump_logs(spark, list_dump_inputs(paths))
    _assert_same(f"{scenario} dump summary", summary, frames.summary.toArrow().cast(SEGMENT_SUMMARY_SCHEMA))
    _assert_same(f"{scenario} dump records", records, frames.records.toArrow().cast(TXN_STATE_SCHEMA))
    kinds = set(summary.column("kind").to_pylist())
    assert {"segment", "run", "marker"} <= kinds and records.num_rows > 0, kinds


@pytest.mark.parametrize("scenario", ["index_entry_missing", "split_outcome"])
def test_integrity_checks_give_the_same_rows_in_both_placements(spark, written, tmp_path, scenario) -> None:  # type: ignore[no-untyped-def]
    from txnlog.engine.integrity import decisions_of, integrity_here
    from txnlog.engine.settings import Decode
    from txnlog.engine.spark.integrity import integrity_in_tasks
    from txnlog.engine.staging import staged_files
    from txnlog.engine.tasks import log_dir_jobs, run_here
    from txnlog.sources.logdirs import discover
    from txnlog.sources.txnindex import read_txn_indexes

    inv = discover([str(written(scenario))])
    scratch = tmp_path / "scratch"
    run_here(log_dir_jobs(inv, Decode(), str(scratch), shared=False, dumps=False, threads=THREADS)[0], THREADS)
    files = staged_files(str(scratch / "transactions"))
    found = read_txn_indexes(inv.segments, inv.txn_indexes, inv.checkpoints)
    decided = decisions_of(staged_files(str(scratch / "coordinator_history")))
    local = integrity_here(files, found.entries, found.segments, decided, THREADS)
    in_spark = integrity_in_tasks(spark, files, found.entries, found.segments, decided)
    _assert_same(f"{scenario} integrity", local, in_spark)
    assert files and local.num_rows > 0, "the scenario's fault is found"
