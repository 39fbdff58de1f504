"""Both placements give the same tables (txnlog.engine.spark.placement).

A small input runs its Python steps in the driver process (``driver_max_bytes``: by default up to where the
two placements cross), a large one in Spark's Python tasks. Every other test runs small inputs, so here each
input runs twice in the shared session, once per placement, at the same ``as_of`` and ``cluster``, and every
table (but ``runs``: run id, timings, config) must be equal row for row: copied log dirs with replicas,
checkpoints, snapshots and damage; the same brokers as kafka-dump-log.sh output; both together (fragments
merged with the decode's transactions); and an empty __transaction_state.

The dumps' driver-placed tables are the session's ``./spark-submit.sh`` run of the same dumps, at the same
``as_of`` and ``cluster`` (tests/e2e/shared.py messy_dumps_run: a small input, so placed in the driver,
as its progress line says): the same run, not made twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.shared import MESSY_AS_OF, MESSY_CLUSTER
from tests.e2e.test_previous_pipeline import TABLES, differences, read_delta
from tests.oracle.judge import ScenarioRun

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

AS_OF, CLUSTER = MESSY_AS_OF, MESSY_CLUSTER  # those of the shared dumps run


def _run(spark, out: Path, *, driver: bool, as_of: str = AS_OF, **inputs) -> None:
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    config = load_config(
        None,
        {
            **inputs,
            "output": str(out),
            "as_of": as_of,
            "cluster": CLUSTER,
            "driver_max_bytes": 64 * 2**20 if driver else 0,
            "progress": False,
        },
    )
    run(config, spark=spark, progress=lambda _m: None)


@pytest.fixture(scope="module")
def messy(messy_incident) -> Path:
    """The messy_incident scenario's logs/ and dumps/ (the session's, tests/e2e/shared.py)."""
    return messy_incident.work


def _inputs(work: Path, kind: str) -> dict:
    dumps = [str(p) for p in sorted((work / "dumps").iterdir())]
    brokers = [str(p) for p in sorted((work / "logs").iterdir()) if p.is_dir()]
    return {
        "logs": {"logs": [str(work / "logs")]},
        "dumps": {"dump_log": dumps},
        "logs_and_dumps": {"logs": brokers[:1], "dump_log": dumps[1:]},
    }[kind]


@pytest.mark.parametrize("kind", ["logs", "dumps", "logs_and_dumps"])
def test_driver_and_tasks_write_the_same_tables(spark, messy, tmp_path, kind, request):
    inputs = _inputs(messy, kind)
    driver = tmp_path / "driver"
    if kind == "dumps":  # the shared spark-submit run: --dump-log per broker directory, in that order
        shared = request.getfixturevalue("messy_dumps_run")
        assert [a for a in shared.proc.args if a in inputs["dump_log"]] == inputs["dump_log"]
        assert "here (a small input)" in shared.proc.stdout + shared.proc.stderr, "placed in the driver"
        driver = Path(shared.out)
    else:
        _run(spark, driver, driver=True, **inputs)
    _run(spark, tmp_path / "tasks", driver=False, **inputs)
    problems: list[str] = []
    for table in TABLES:
        want = read_delta(tmp_path / "tasks", table, {})
        got = read_delta(driver, table, {})
        problems += differences(table, want, got)
    assert not problems, "\n".join(problems)
    # not vacuous: the scenario's hanging transactions and damage are in both
    findings = read_delta(driver, "findings", {})
    assert findings.num_rows > 0
    assert read_delta(driver, "transactions", {}).num_rows > 0


def test_placement_follows_the_input_size():
    from txnlog.engine.spark.placement import Placement

    assert Placement.for_input(10, 64).driver
    assert not Placement.for_input(65, 64).driver
    assert not Placement.for_input(0, 0).driver  # 0: always in tasks
    assert not Placement.for_input(10, 64, live=True).driver  # a live read's size is not known


def test_the_driver_reads_with_a_thread_per_core(monkeypatch):
    """In the driver one thread per core of this machine reads the files, or fewer when the master says so; a
    cluster's cores are not this machine's."""
    from txnlog.engine.spark import placement

    monkeypatch.setattr(placement, "local_cores", lambda: 4)
    assert placement.Placement.for_input(10, 64).threads == 4
    assert placement.Placement.for_input(10, 64, cores=2).threads == 2  # local[2]
    assert placement.Placement.for_input(10, 64, cores=64).threads == 4  # a cluster's default parallelism


def test_threads_read_the_rows_one_thread_reads(tmp_path):
    """The threads' tables come back in each reader's partition order (txnlog.engine.tasks.run_here), so
    the rows of both sources are those one thread reads, in the same order."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.placement import read_all_here
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import SOURCE_SCHEMA, TxnStateSource
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
    from txnlog.sources.logdirs import discover

    write_scenario("replicas_disagree", tmp_path / "logs", seed=1)
    inventory = discover([str(tmp_path / "logs")])
    segments = {"files": files_option([*inventory.segments, *inventory.snapshots]), "min_partitions": "5"}
    txn_state = {"files": files_option(inventory.txn_state_segments), "min_partitions": "5"}
    reads = [(SegmentsSource, segments, SEGMENT_SUMMARY_SCHEMA), (TxnStateSource, txn_state, SOURCE_SCHEMA)]
    one = read_all_here(reads, threads=1)
    assert one[0].num_rows > 0 and one[1].num_rows > 0
    three = read_all_here(reads, threads=3)
    assert three[0].equals(one[0]) and three[1].equals(one[1])


def test_coordinator_partitions_read_a_window_at_a_time(tmp_path, monkeypatch):
    """Reducing a coordinator partition a window at a time (every replica's segments, windows of a few
    batches) keeps and stages exactly the records reducing each partition whole keeps and stages."""
    import glob

    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine import txn_state
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.placement import read_all_here
    from txnlog.engine.spark.txn_state_source import SOURCE_SCHEMA, TxnStateSource
    from txnlog.engine.staging import read_raw
    from txnlog.rules.finish import HISTORY_COLUMNS
    from txnlog.sources.logdirs import discover

    write_scenario("replicas_disagree", tmp_path / "logs", seed=3)
    inventory = discover([str(tmp_path / "logs")])
    assert len({f.broker for f in inventory.txn_state_segments}) > 1  # replicas of each coordinator partition

    def read(window: int, stage: str):
        monkeypatch.setattr(txn_state, "WINDOW_BYTES", window)
        options = {"files": files_option(inventory.txn_state_segments), "reduce": "true", "stage": stage}
        (table,) = read_all_here([(TxnStateSource, options, SOURCE_SCHEMA)], threads=2)
        staged = [read_raw(f) for f in sorted(glob.glob(f"{stage}/*.arrow"))]
        order = [("coordinator_partition", "ascending"), ("record_offset", "ascending")]
        # the staged records hold what coordinator_history takes from them: not which broker's copy was kept
        assert all(t.column_names == list(HISTORY_COLUMNS) for t in staged)
        return table.drop_columns(["broker", "file"]).sort_by(order), [t.sort_by(order) for t in staged]

    whole, whole_staged = read(1 << 30, str(tmp_path / "whole"))
    windows, windows_staged = read(300, str(tmp_path / "windows"))
    assert whole.num_rows > 0 and sum(t.num_rows for t in whole_staged) > whole.num_rows
    assert windows.equals(whole)
    assert len(windows_staged) == len(whole_staged)
    assert all(a.equals(b) for a, b in zip(windows_staged, whole_staged, strict=True))


def test_a_failing_staged_write_is_not_an_unreadable_coordinator_file(tmp_path):
    """The coordinator reader quarantines a segment it cannot read; a scratch directory it cannot write stops the
    run with the one-line error instead (txnlog.engine.staging.StagingError)."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.placement import read_all_here
    from txnlog.engine.spark.txn_state_source import SOURCE_SCHEMA, TxnStateSource
    from txnlog.engine.staging import StagingError
    from txnlog.sources.logdirs import discover

    write_scenario("replicas_disagree", tmp_path / "logs", seed=3)
    inventory = discover([str(tmp_path / "logs")])
    blocked = tmp_path / "stage"
    blocked.write_text("a file where the scratch directory should be")
    options = {"files": files_option(inventory.txn_state_segments), "reduce": "true", "stage": str(blocked)}
    with pytest.raises(StagingError):
        read_all_here([(TxnStateSource, options, SOURCE_SCHEMA)], threads=2)


def test_auto_threshold_is_where_the_placements_cross(monkeypatch):
    """``driver_max_bytes: auto``: the driver up to the size at which the two cost lines meet for the cores
    Spark has; on one core Spark's tasks never catch up (they cost more per byte than the one process)."""
    from txnlog.engine.spark import placement
    from txnlog.engine.spark.placement import COSTS, Costs

    costs = Costs(spark_fixed_s=12.0, driver_serial_s_per_gib=2.0, driver_parallel_s_per_gib=2.0, task_s_per_gib=4.0)
    for cores in (2, 4, 8, 64):
        gib = costs.crossover(cores) / 2**30
        driver_s = gib * (2.0 + 2.0 / cores)  # the threads share the parallel part
        spark_s = costs.spark_fixed_s + gib * costs.task_s_per_gib / cores
        assert abs(driver_s - spark_s) < 1e-6, cores  # the lines meet there
    assert costs.crossover(2) == 12 * 2**30  # 12 s / (2 + 1 − 2) s per GiB
    assert costs.crossover(4) == 8 * 2**30  # 12 s / (2 + 0.5 − 1)
    assert costs.crossover(1) is None  # 4 s per GiB on one core: never cheaper than the driver's 2 + 2
    # this project's measured costs: more cores, never a larger threshold (None: the driver at every size)
    more = [COSTS.crossover(c) or float("inf") for c in (1, 2, 4, 8, 16, 64)]
    assert all(a >= b for a, b in zip(more, more[1:], strict=False))
    assert more[-1] < float("inf")  # on enough cores Spark's tasks pay for its fixed cost
    # a cluster's session: Spark's cores are its executors', the driver's threads this machine's
    monkeypatch.setattr(placement, "local_cores", lambda: 2)
    on_cluster = COSTS.crossover(64, 2)
    assert on_cluster is not None and on_cluster < (COSTS.crossover(64) or 0)  # fewer threads: Spark sooner
    assert placement.Placement.for_input(on_cluster, "auto", cores=64) == placement.Placement(True, 2)
    assert not placement.Placement.for_input(on_cluster + 1, "auto", cores=64).driver
    monkeypatch.setattr(placement, "COSTS", costs)
    assert placement.Placement.for_input(12 * 2**30, "auto", cores=2).driver
    assert not placement.Placement.for_input(12 * 2**30 + 1, "auto", cores=2).driver
    assert placement.Placement.for_input(2**50, "auto", cores=1).driver  # never crossed
    assert not placement.Placement.for_input(10, 0, cores=1).driver  # 0 still means always Spark
    assert not placement.Placement.for_input(10, "auto", live=True, cores=1).driver


def test_auto_threshold_counts_files(monkeypatch):
    """The per-file terms: an input of many files per GiB (small segments) crosses over to Spark sooner, on 2 cores
    too, where the driver's per-file work (one thread at a time, under the GIL) outweighs Spark's per core."""
    from txnlog.engine.spark import placement
    from txnlog.engine.spark.placement import Costs

    costs = Costs(
        spark_fixed_s=12.0,
        driver_serial_s_per_gib=1.0,
        driver_parallel_s_per_gib=2.0,
        task_s_per_gib=4.0,
        driver_s_per_file=0.001,
        task_s_per_file=0.0002,
    )
    assert costs.crossover(2) is None  # by bytes alone: 1 + 1 s per GiB in the driver, 2 in Spark
    # 1,000 files per GiB: 1 + 1 + 1 s per GiB in the driver, 2 + 0.1 in Spark: the lines meet at 12 / 0.9 GiB
    gib = costs.crossover(2, files_per_gib=1000) / 2**30
    driver_s = gib * (1.0 + 2.0 / 2 + 1000 * 0.001)
    spark_s = 12.0 + gib * (4.0 + 1000 * 0.0002) / 2
    assert abs(driver_s - spark_s) < 1e-6
    assert costs.crossover(2, files_per_gib=2000) < costs.crossover(2, files_per_gib=1000)  # more files: sooner
    monkeypatch.setattr(placement, "local_cores", lambda: 2)
    monkeypatch.setattr(placement, "COSTS", costs)
    size = 20 * 2**30
    assert placement.Placement.for_input(size, "auto", cores=2).driver  # the files not counted
    assert not placement.Placement.for_input(size, "auto", cores=2, files=20 * 1000).driver
    assert placement.Placement.for_input(size, "auto", cores=2, files=20 * 10).driver  # few large files


def test_auto_threshold_counts_partitions(monkeypatch):
    """The per-partition terms: a partition costs Spark its rows through the JVM and the driver, besides its share
    of the tasks, so an input of many tiny partitions is no reason to leave the driver on a small machine; with
    enough cores the tasks' share falls and Spark wins on it again."""
    from txnlog.engine.spark import placement
    from txnlog.engine.spark.placement import Costs

    costs = Costs(
        spark_fixed_s=12.0,
        driver_serial_s_per_gib=1.0,
        driver_parallel_s_per_gib=2.0,
        task_s_per_gib=4.0,
        driver_s_per_file=0.0,
        task_s_per_file=0.0,
        driver_s_per_partition=0.001,
        task_s_per_partition=0.002,
        spark_s_per_partition=0.0005,
    )
    # 1,000 partitions per GiB on 2 cores: the driver 1 + 1 + 1 s per GiB, Spark (4 + 2) / 2 + 0.5: never
    assert costs.crossover(2, partitions_per_gib=1000) is None
    # on 8: Spark (4 + 2) / 8 + 0.5 = 1.25 s per GiB against the driver's 1 + 0.25 + 1: they meet at 12 / 1 GiB
    gib = costs.crossover(8, partitions_per_gib=1000) / 2**30
    driver_s = gib * (1.0 + 2.0 / 8 + 1000 * 0.001)
    spark_s = 12.0 + gib * ((4.0 + 1000 * 0.002) / 8 + 1000 * 0.0005)
    assert abs(driver_s - spark_s) < 1e-6 and abs(gib - 12.0) < 1e-6
    monkeypatch.setattr(placement, "COSTS", costs)
    monkeypatch.setattr(placement, "local_cores", lambda: 8)
    assert placement.Placement.for_input(12 * 2**30, "auto", cores=8, partitions=12_000).driver
    assert not placement.Placement.for_input(12 * 2**30 + 2**20, "auto", cores=8, partitions=12_001).driver


def test_many_tiny_partitions_stay_in_the_driver_on_two_cores(monkeypatch):
    """This project's measured costs (benchmarks/RESULTS.md, "Where the placements cross: per file and per
    partition"): the copy of 100,000 tiny partitions (300,003 files, 124 MB; benchmarks/many_partitions.py), which
    the driver reads in about a minute and Spark in far longer, stays in the driver on 2 cores; so does every mix
    measured there, whose files and partitions cost Spark more than the driver per byte on this machine."""
    from txnlog.engine.spark import placement

    monkeypatch.setattr(placement, "local_cores", lambda: 2)
    assert placement.Placement.for_input(124_000_000, "auto", cores=2, files=300_003, partitions=100_000).driver
    assert placement.Placement.for_input(124_000_000, "auto", files=300_003, partitions=100_000).driver  # local[*]
    # the small-segments mix (4,250 files and 586 partitions per GiB) at 64 GiB, the dense mix's 685 partitions
    assert placement.Placement.for_input(64 * 2**30, "auto", cores=2, files=64 * 4250, partitions=64 * 586).driver
    assert placement.Placement.for_input(64 * 2**30, "auto", cores=2, files=1420, partitions=685).driver
    assert not placement.Placement.for_input(124_000_000, 0, files=300_003, partitions=100_000).driver  # 0: Spark


def test_cores_of_a_master():
    from txnlog.engine.spark.placement import local_cores, master_cores, session_cores

    assert master_cores("local") == 1
    assert master_cores("local[3]") == 3
    assert master_cores("local[4, 2]") == 4
    assert master_cores("local[*]") == master_cores(None) == local_cores() >= 1
    assert master_cores("spark://host:7077") is None  # known once the cluster's session is
    assert master_cores("yarn") is None
    assert session_cores("local[3]", None) == 3  # no session yet: the cores of the one the run would start


def test_driver_max_bytes_auto_in_the_config(tmp_path):
    from txnlog.model.config import load_config

    assert load_config(None).driver_max_bytes == "auto"  # by default
    assert load_config(None, {"driver_max_bytes": "Auto"}).driver_max_bytes == "auto"
    assert load_config(None, {"driver_max_bytes": "64"}).driver_max_bytes == 64
    conf = tmp_path / "c.yaml"
    conf.write_text("driver_max_bytes: AUTO\n")
    assert load_config(conf).driver_max_bytes == "auto"
    conf.write_text("driver_max_bytes: 0\n")
    assert load_config(conf).driver_max_bytes == 0


def test_groups_are_those_of_spark(spark):
    """The driver's grouping hands a function the same groups as groupBy().applyInArrow: nulls together."""
    import pyarrow as pa

    from txnlog.model.arrow import groups

    table = pa.table(
        {"k": ["b", None, "a", "b", None, None], "n": [1, 2, 3, None, 2, None], "v": [10, 20, 30, 40, 50, 60]}
    )
    got = sorted(
        (repr(g.column("k")[0].as_py()), repr(g.column("n")[0].as_py()), sorted(g.column("v").to_pylist()))
        for g in groups(table, ["k", "n"])
    )
    df = spark.createDataFrame(table)
    want = sorted(
        (repr(r["k"]), repr(r["n"]), sorted(r["vs"]))
        for r in df.groupBy("k", "n").agg({"v": "collect_list"}).withColumnRenamed("collect_list(v)", "vs").collect()
    )
    assert got == want
    assert len(want) == 5  # (None, 2) holds two rows; (None, None) and ("b", None) are groups of their own


def _scenarios() -> list[str]:
    """Every scenario the writer knows but the messy incident (above) and the bulk mix (a benchmark's size)."""
    from txnlog.brokerlog.scenarios import scenario_names

    return [n for n in scenario_names() if n not in ("messy_incident", "bulk")]


SCENARIOS = _scenarios()


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_gives_the_same_tables_in_both_placements(
    spark, tmp_path, name, scenario_run, scenario_tasks_run
):
    """The driver decodes, merges and reduces in this process, Spark in its tasks (txnlog.engine.spark.collect), and
    the same code builds the tables from what each hands over: every situation the writer makes must give the
    same tables row for row, as
    read from the copied log dirs and, for the scenarios with replicas and damage, from their dumps.

    The log dirs' runs are the session's (tests/conftest.py): the driver's is the run the oracle's scenario
    modules judge (``scenario_run``: a small input, so placed in the driver, as its progress line says), the
    tasks' the same copy, ``as_of`` and cluster placed in Spark (``scenario_tasks_run``)."""
    from tests.e2e.shared import render_broker_dumps

    shared = scenario_run(name)
    assert any("here (a small input)" in line for line in shared.progress), "placed in the driver"
    truth = shared.truth
    kinds: dict[str, dict[str, Any]] = {"logs": {"logs": [str(shared.logs)]}}
    if name in ("replicas_disagree", "corrupt_and_truncated", "several_open_transactions"):
        render_broker_dumps(shared.logs, tmp_path / "dumps")
        kinds["dumps"] = {
            "dump_log": [str(p) for p in sorted((tmp_path / "dumps").iterdir())],
            **ScenarioRun.options(truth),
        }
    problems: list[str] = []
    for kind, inputs in kinds.items():
        if kind == "logs":  # the session's runs of the copy
            outs = {True: shared.out, False: scenario_tasks_run(name)}
        else:
            outs = {driver: tmp_path / f"{kind}-{'driver' if driver else 'tasks'}" for driver in (True, False)}
            for driver, out in outs.items():
                _run(spark, out, driver=driver, as_of=str(truth.as_of_ms), **inputs)
        for table in TABLES:
            want, got = read_delta(outs[False], table, {}), read_delta(outs[True], table, {})
            problems += [f"{kind}: {p}" for p in differences(table, want, got)]
    assert not problems, "\n".join(problems)
