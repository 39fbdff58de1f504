"""Values at the edges of their types, and the ``as_of`` rule.

One run over the ``extreme_values`` scenario holds every value class (µs and ns CreateTime,
CreateTime −1 and 0, producer id and offsets at Long.MAX): the run completes, ``as_of`` is the newest
broker-written time (never the µs/ns clocks), the far-future segments are reported, every table reads
back with duckdb, delta-rs and the ``txnlog`` verbs (the job script's ``main`` in process, on the shared
Spark session: tests/e2e/jobrun.py). One more run over a log dir without any broker-written time, through
``./spark-submit.sh``, stops with one line asking for ``--as-of`` (exit 2); with ``--as-of`` it runs.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process, run_job
from tests.e2e.test_job import duckdb_delta_extension
from txnlog.broker.as_of import AS_OF_FLAG, FUTURE_BOUND_MS, REASON_FUTURE, SOURCES
from txnlog.brokerlog.extreme import LONG_MAX, PARTITIONS
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.model.contract import TABLES

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def extreme_run(spark, tmp_path_factory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("extreme")
    truth = write_scenario("extreme_values", work / "logs")
    proc = run_in_process(spark, "--logs", "logs", "--output", "out", "--cluster", "edge", cwd=work)
    return {"proc": proc, "out": str(work / "out"), "truth": truth, "work": work}


def _health(run: dict[str, Any], value_class: str) -> dict[str, Any]:
    topic, partition = PARTITIONS[value_class]
    rows = [r for r in T.rows(run["out"], "partition_health") if (r["topic"], r["partition"]) == (topic, partition)]
    assert len(rows) == 1, rows
    return rows[0]


def test_run_completes_with_broker_time_as_of(extreme_run) -> None:
    proc = extreme_run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = T.rows(extreme_run["out"], "runs")
    assert len(runs) == 1 and runs[0]["status"] == "SUCCEEDED"
    # the µs and ns producers' clocks (year 56 000 and beyond) are never "now"
    assert T.ms(runs[0]["as_of"]) == extreme_run["truth"].as_of_ms
    assert runs[0]["as_of_source"] in SOURCES
    assert f"(from {runs[0]['as_of_source']})" in proc.stdout
    for table in TABLES:
        assert (Path(extreme_run["out"]) / table / "_delta_log").is_dir(), table


def test_findings_are_the_ground_truth(extreme_run) -> None:
    recs = T.recommendations_by_key(extreme_run["out"])
    assert T.actual_findings(extreme_run["out"], recs) == T.expected_findings(extreme_run["truth"])


@pytest.mark.parametrize("value_class", ["micros", "nanos"])
def test_client_clock_in_micros_or_nanos_is_reported_not_used(extreme_run, value_class) -> None:
    topic, partition = PARTITIONS[value_class]
    warnings = [q for q in T.rows(extreme_run["out"], "quarantine") if q["reason"] == REASON_FUTURE]
    mine = [q for q in warnings if (q["topic"], q["partition"]) == (topic, partition)]
    assert len(mine) == 1, warnings
    q = mine[0]
    assert q["file"].endswith(f"{topic}-{partition}/00000000000000000000.log") and q["replica"] == "broker-1"
    newest = int(q["detail"].split()[3])
    scale = 1000 if value_class == "micros" else 1_000_000
    assert (
        newest > extreme_run["truth"].as_of_ms * (scale // 10)
        and newest > extreme_run["truth"].as_of_ms + FUTURE_BOUND_MS
    )
    h = _health(extreme_run, value_class)
    assert h["max_timestamp"] is None  # past the year 9999: no reader's datetime holds it
    assert h["log_end_offset"] > 0 and h["lso_lag"] == 0
    # only the µs/ns segments are in the future
    assert {(q["topic"], q["partition"]) for q in warnings} == {PARTITIONS["micros"], PARTITIONS["nanos"]}


@pytest.mark.parametrize("value_class,expected_ms", [("timestamp_minus_1", None), ("timestamp_0", 0)])
def test_timestamp_minus_1_and_0_are_kept(extreme_run, value_class, expected_ms) -> None:
    h = _health(extreme_run, value_class)
    assert h["log_start_offset"] == 0 and h["log_end_offset"] == 3 and h["lso_lag"] == 0
    assert T.ms(h["max_timestamp"]) == expected_ms  # −1 is Kafka's NO_TIMESTAMP: unknown, null


def test_producer_id_and_offsets_at_long_max(extreme_run) -> None:
    h = _health(extreme_run, "offset_max")
    assert h["log_end_offset"] == LONG_MAX and h["last_stable_offset"] == LONG_MAX - 1 and h["lso_lag"] == 1
    (f,) = T.rows(extreme_run["out"], "findings")
    assert (f["producer_id"], f["start_offset"], f["verdict"], f["reason"]) == (
        LONG_MAX,
        LONG_MAX - 1,
        "HANGING",
        "NO_TRANSACTIONAL_ID",
    )
    (rec,) = T.rows(extreme_run["out"], "abort_recommendations")
    assert (
        rec["command"].endswith(f"--start-offset {LONG_MAX - 1}")
        and f"--producer-id {LONG_MAX}" in rec["legacy_command"]
    )
    (t,) = [t for t in T.rows(extreme_run["out"], "transactions") if t["producer_id"] == LONG_MAX]
    assert (t["first_offset"], t["last_offset"], t["outcome"]) == (LONG_MAX - 1, LONG_MAX - 1, "OPEN")
    assert _health(extreme_run, "producer_id_max")["log_end_offset"] == 3


def test_every_table_reads_back_with_duckdb(extreme_run) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(f"LOAD '{duckdb_delta_extension()}'")
    for table in TABLES:
        rows = con.execute(f"SELECT * FROM delta_scan('{extreme_run['out']}/{table}')").fetchall()  # to Python values
        assert len(rows) == len(T.rows(extreme_run["out"], table)), table
    newest = con.execute(
        f"SELECT max(log_end_offset), max(max_timestamp) FROM delta_scan('{extreme_run['out']}/partition_health')"
    ).fetchone()
    assert (
        newest[0] == LONG_MAX
        and T.ms(newest[1].replace(tzinfo=__import__("datetime").timezone.utc)) <= extreme_run["truth"].as_of_ms
    )


def test_txnlog_verbs_read_the_tables(extreme_run) -> None:
    from txnlog.ops.cli import main

    def cli(*args: str) -> str:
        buf = io.StringIO()
        code = main([*args, "--output", extreme_run["out"]], out=buf)
        # find-hanging exits 1 exactly when it lists a HANGING finding; the other verbs 0
        listed = [line.split("\t") for line in buf.getvalue().split("\n\n")[0].splitlines()[1:]]
        hanging = args[0] == "find-hanging" and any(c.strip() == "HANGING" for row in listed for c in row)
        assert code == (1 if hanging else 0), (args, code)
        return buf.getvalue()

    hanging = cli("find-hanging", "-v").splitlines()
    assert any(line.split()[:3] == ["limits", "1", str(LONG_MAX)] for line in hanging[1:])
    listing = cli("list").splitlines()
    assert len(listing) > 1
    tid = listing[1].split()[0]
    assert tid in cli("describe", "--transactional-id", tid)
    for topic, partition in PARTITIONS.values():
        cli("describe-producers", "--topic", topic, "--partition", str(partition))
        cli("timeline", "--topic", topic, "--partition", str(partition))
        cli("find-hanging", "--topic", topic, "--partition", str(partition))
    producers = cli("describe-producers", "--topic", "limits", "--partition", "1")
    assert str(LONG_MAX) in producers and str(LONG_MAX - 1) in producers


def test_no_broker_written_time_asks_for_as_of(spark, tmp_path) -> None:
    """Only CreateTime data (no marker, no __transaction_state, no LogAppendTime): one line, exit 2;
    with --as-of the same input runs."""
    from txnlog.brokerlog.encode import RecordSpec, encode_record_batch
    from txnlog.brokerlog.partition import PartitionLog

    log = PartitionLog(tmp_path / "logs" / "broker-1", "clicks", 0)
    for i in range(3):
        log.append(
            encode_record_batch(
                base_offset=0, records=[RecordSpec(0, 0, b"k", b"v")], base_timestamp=1_717_000_000_000 + i
            )
        )
    log.close()
    proc = run_job("--logs", "logs", "--output", "out", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    # after Spark started, spark-submit hands the Python driver's stderr to stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("txnlog: error: ") and "no broker-written time" in last and "--as-of" in last
    assert not (tmp_path / "out" / "runs").exists()
    proc = run_in_process(spark, "--logs", "logs", "--output", "out", "--as-of", "1717000000002", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = T.rows(str(tmp_path / "out"), "runs")
    assert run["as_of_source"] == AS_OF_FLAG and T.ms(run["as_of"]) == 1_717_000_000_002
