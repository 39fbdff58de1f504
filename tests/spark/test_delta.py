"""txnlog.output.delta against real Delta tables, written by real Spark and read by deltalake, polars and duckdb."""

from __future__ import annotations

import glob
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from txnlog.engine.spark.schemas import spark_schema
from txnlog.model import contract as tables
from txnlog.model.errors import UsageError
from txnlog.output.delta import read_table, resolve_writer, table_uris, write_tables
from txnlog.output.spark_base import delta_spark_available

pytestmark = pytest.mark.spark

UTC = UTC
A1 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
A2 = datetime(2026, 11, 3, 0, 0, tzinfo=UTC)
T0 = datetime(2026, 11, 1, 22, 30, 0, 123000, tzinfo=UTC)


def finding(i: int, cluster: str = "c1", as_of: datetime = A1, verdict: str = "HANGING") -> dict[str, Any]:
    """One findings row, every contract column set by hand."""
    first = T0 + timedelta(seconds=i)
    last = first + timedelta(minutes=1)
    return {
        "cluster": cluster,
        "as_of": as_of,
        "topic": "orders",
        "partition": i,
        "producer_id": 4711 + i,
        "producer_epoch": 3,
        "start_offset": 550 + i,
        "first_timestamp": first,
        "last_timestamp": last,
        "open_ms": int((as_of - first) / timedelta(milliseconds=1)),
        "idle_ms": int((as_of - last) / timedelta(milliseconds=1)),
        "lso_lag": 10 * i,
        "verdict": verdict,
        "reason": "COORDINATOR_COMPLETED" if verdict == "HANGING" else "MARKERS_PENDING",
        "transactional_id": f"txn-{i}" if i % 2 == 0 else None,
        "coordinator_state": "CompleteAbort",
        "coordinator_partition": 7,
        "coordinator_epoch": 12,
        "evidence": f"2 batches of producer {4711 + i} follow its ABORT marker",
        "advice": "abort it",
        "remedy": "ABORT" if verdict == "HANGING" else "DELIVER_MARKERS",
        "remedy_command": "kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic orders",
        "remedy_kafka_version": "Kafka 3.0+",
        "remedy_fallback_command": None,
        "remedy_fallback_kafka_version": None,
        "remedy_condition": "SAFE",
        "replicas": ["broker-1", "broker-2"],
        "open_replicas": ["broker-2"] if i % 2 else [],
        "started_before_log_start": i == 0,
        "source": "segments",
        "blocked_groups": ["dashboards"] if i % 2 else None,
    }


def findings_df(spark, rows: list[dict[str, Any]]):
    schema = spark_schema("findings")
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema=schema)


def run_row(cluster: str = "c1", as_of: datetime = A1, status: str = "SUCCEEDED") -> dict[str, Any]:
    row: dict[str, Any] = {f.name: None for f in tables.RUNS}
    row.update(
        cluster=cluster,
        as_of=as_of,
        run_id=f"{cluster}-{as_of:%Y%m%d}",
        started_at=as_of + timedelta(hours=1),
        finished_at=as_of + timedelta(hours=1, seconds=42),
        inputs=["/data/broker-1", "/data/broker-2"],
        findings_count=3,
        hanging_count=2,
        late_count=1,
        txnlog_version="0.1.0",
        status=status,
        config='{"cluster": "c1"}',
    )
    return row


def rows_of(table: pa.Table, key: tuple[str, ...] = ("cluster", "as_of", "partition")) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: tuple(r[k] for k in key))


def run_rows(out: Path, name: str, cluster: str, as_of: datetime) -> list[dict[str, Any]]:
    return rows_of(read_table(str(out), name, cluster=cluster, as_of=as_of))


def data_files(table_dir: Path) -> list[str]:
    return sorted(p for p in os.listdir(table_dir) if not p.startswith("_"))


# --- writing and replacing runs -----------------------------------------------------------------


def test_dataframe_run_is_written_with_contract_schema_and_values(spark, tmp_path):
    expected = [finding(0), finding(1), finding(2, verdict="LATE")]
    counts = write_tables(spark, str(tmp_path), {"findings": findings_df(spark, expected)}, cluster="c1", as_of=A1)

    assert counts == {"findings": 3}
    got = read_table(str(tmp_path), "findings")
    assert got.schema.equals(tables.FINDINGS)  # names, order, types, nullability
    assert rows_of(got) == expected
    assert DeltaTable(str(tmp_path / "findings")).protocol().min_writer_version == 2


def test_rerun_same_run_replaces_rows_in_one_commit(spark, tmp_path):
    rows = [finding(i) for i in range(4)]
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, rows)}, cluster="c1", as_of=A1)
    table = DeltaTable(str(tmp_path / "findings"))
    version_before = table.version()

    # Same data again: same rows, nothing duplicated.
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, rows)}, cluster="c1", as_of=A1)
    assert run_rows(tmp_path, "findings", "c1", A1) == rows
    assert read_table(str(tmp_path), "findings").num_rows == 4

    # Different data for the same run: the old rows are gone, in exactly one new commit.
    replacement = [finding(7, verdict="LATE"), finding(8)]
    counts = write_tables(spark, str(tmp_path), {"findings": findings_df(spark, replacement)}, cluster="c1", as_of=A1)
    assert counts == {"findings": 2}
    assert run_rows(tmp_path, "findings", "c1", A1) == replacement
    table = DeltaTable(str(tmp_path / "findings"))
    assert table.version() == version_before + 2
    last = table.history(1)[0]
    assert last["txnlog.cluster"] == "c1" and last["txnlog.broker.as_of"] == "2026-11-02T00:00:00.000Z"


def test_second_as_of_appends_and_other_runs_stay(spark, tmp_path):
    c1_a1 = [finding(i) for i in range(3)]
    c1_a2 = [finding(i, as_of=A2) for i in range(2)]
    c2_a1 = [finding(i, cluster="c2") for i in range(5)]
    for rows, cluster, as_of in ((c1_a1, "c1", A1), (c1_a2, "c1", A2), (c2_a1, "c2", A1)):
        write_tables(spark, str(tmp_path), {"findings": findings_df(spark, rows)}, cluster=cluster, as_of=as_of)
    assert read_table(str(tmp_path), "findings").num_rows == 10

    new_c1_a1 = [finding(9)]
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, new_c1_a1)}, cluster="c1", as_of=A1)

    assert run_rows(tmp_path, "findings", "c1", A1) == new_c1_a1
    assert run_rows(tmp_path, "findings", "c1", A2) == c1_a2
    assert run_rows(tmp_path, "findings", "c2", A1) == c2_a1
    assert read_table(str(tmp_path), "findings").num_rows == 8


def test_run_key_comes_from_arguments_and_columns_are_conformed(spark, tmp_path):
    # Columns out of order, `partition` as a long, an extra column, no cluster/as_of columns.
    rows = [finding(1), finding(2)]
    df = findings_df(spark, rows).drop("cluster", "as_of")
    df = df.withColumn("partition", df["partition"].cast("long")).withColumn("debug", df["topic"])
    df = df.select(*reversed(df.columns))
    write_tables(spark, str(tmp_path), {"findings": df}, cluster="c1", as_of=A1 + timedelta(microseconds=999))

    got = read_table(str(tmp_path), "findings")
    assert got.column_names == tables.FINDINGS.names
    assert got.schema.field("partition").type == pa.int32()
    assert rows_of(got) == rows  # as_of stored at millisecond precision


def test_missing_contract_column_is_a_programmer_error(spark, tmp_path):
    df = findings_df(spark, [finding(1)]).drop("verdict")
    with pytest.raises(ValueError, match="missing contract columns \\['verdict'\\]"):
        write_tables(spark, str(tmp_path), {"findings": df}, cluster="c1", as_of=A1)
    assert not (tmp_path / "findings").exists() or data_files(tmp_path / "findings") == []


def test_naive_as_of_is_refused(spark, tmp_path):
    with pytest.raises(ValueError, match="time-zone aware"):
        write_tables(
            spark,
            str(tmp_path),
            {"runs": pa.Table.from_pylist([run_row()], tables.RUNS)},
            cluster="c1",
            as_of=datetime(2026, 11, 2),
        )


def test_arrow_table_run_without_spark(tmp_path):
    first = pa.Table.from_pylist([run_row(status="FAILED")], schema=tables.RUNS)
    assert write_tables(None, str(tmp_path), {"runs": first}, cluster="c1", as_of=A1) == {"runs": 1}
    other = pa.Table.from_pylist([run_row(as_of=A2)], schema=tables.RUNS)
    write_tables(None, str(tmp_path), {"runs": other}, cluster="c1", as_of=A2)

    again = pa.Table.from_pylist([run_row()], schema=tables.RUNS)
    write_tables(None, str(tmp_path), {"runs": again}, cluster="c1", as_of=A1)

    assert rows_of(read_table(str(tmp_path), "runs"), ("as_of",)) == [run_row(), run_row(as_of=A2)]


def test_arrow_and_dataframe_tables_in_one_call(spark, tmp_path):
    counts = write_tables(
        spark,
        str(tmp_path),
        {"findings": findings_df(spark, [finding(1)]), "runs": pa.Table.from_pylist([run_row()], schema=tables.RUNS)},
        cluster="c1",
        as_of=A1,
    )
    assert counts == {"findings": 1, "runs": 1}
    assert set(os.listdir(tmp_path)) == {"findings", "runs"}
    assert table_uris(str(tmp_path))["runs"] == str(tmp_path / "runs")


def test_empty_dataframe_creates_table_and_empties_the_run(spark, tmp_path):
    empty = findings_df(spark, [])
    # First write ever, no rows: the table exists, with the contract schema.
    assert write_tables(spark, str(tmp_path), {"findings": empty}, cluster="c1", as_of=A1) == {"findings": 0}
    got = read_table(str(tmp_path), "findings")
    assert got.num_rows == 0 and got.column_names == tables.FINDINGS.names
    assert data_files(tmp_path / "findings") == []

    kept = [finding(i, as_of=A2) for i in range(2)]
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, kept)}, cluster="c1", as_of=A2)
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, [finding(5)])}, cluster="c1", as_of=A1)
    assert len(run_rows(tmp_path, "findings", "c1", A1)) == 1

    # Rerun of A1 that finds nothing: A1 now has no rows; A2 is untouched.
    assert write_tables(spark, str(tmp_path), {"findings": empty.filter("1 = 0")}, cluster="c1", as_of=A1) == {
        "findings": 0
    }
    assert run_rows(tmp_path, "findings", "c1", A1) == []
    assert run_rows(tmp_path, "findings", "c1", A2) == kept


def test_staging_leaves_no_spark_leftovers(spark, tmp_path):
    write_tables(
        spark, str(tmp_path), {"findings": findings_df(spark, [finding(i) for i in range(5)])}, cluster="c1", as_of=A1
    )
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, [])}, cluster="c1", as_of=A2)
    names = [os.path.basename(p) for p in glob.glob(str(tmp_path / "findings" / "stage-*" / "*"), recursive=False)]
    hidden = glob.glob(str(tmp_path / "findings" / "stage-*" / ".*"))
    assert names and all(n.startswith("part-") and n.endswith(".parquet") for n in names)
    assert hidden == []
    # Every staged file is live in the table: nothing orphaned.
    live = set(pa.table(DeltaTable(str(tmp_path / "findings")).get_add_actions()).column("path").to_pylist())
    on_disk = {
        os.path.relpath(p, tmp_path / "findings") for p in glob.glob(str(tmp_path / "findings" / "stage-*" / "*"))
    }
    assert on_disk == live


def test_run_in_a_compacted_file_is_replaced_and_neighbours_kept(spark, tmp_path):
    a1 = [finding(i) for i in range(3)]
    a2 = [finding(i, as_of=A2) for i in range(3)]
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, a1)}, cluster="c1", as_of=A1)
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, a2)}, cluster="c1", as_of=A2)
    DeltaTable(str(tmp_path / "findings")).optimize.compact()  # one file now holds both runs
    assert len(DeltaTable(str(tmp_path / "findings")).file_uris()) == 1

    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, [finding(4)])}, cluster="c1", as_of=A1)

    assert run_rows(tmp_path, "findings", "c1", A1) == [finding(4)]
    assert run_rows(tmp_path, "findings", "c1", A2) == a2


# --- readers ------------------------------------------------------------------------------------


def _duckdb_with_delta():
    import duckdb
    import duckdb_extension_delta

    extension = (
        Path(duckdb_extension_delta.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "delta.duckdb_extension"
    )
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"LOAD '{extension}'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def test_other_readers_see_the_same_rows(spark, tmp_path):
    import polars as pl

    stale = [finding(i) for i in range(3)]
    current = [finding(1, verdict="LATE"), finding(2)]
    later = [finding(3, as_of=A2)]
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, stale)}, cluster="c1", as_of=A1)
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, later)}, cluster="c1", as_of=A2)
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, current)}, cluster="c1", as_of=A1)
    uri = str(tmp_path / "findings")
    expected = sorted(current + later, key=lambda r: (r["as_of"], r["partition"]))
    key = ("as_of", "partition")

    # deltalake (through read_table) and a plain DeltaTable count
    assert rows_of(read_table(str(tmp_path), "findings"), key) == expected
    assert DeltaTable(uri).count() == 3

    # polars
    frame = pl.read_delta(uri).sort("as_of", "partition")
    assert frame.schema["as_of"] == pl.Datetime("us", "UTC")
    assert frame.to_dicts() == expected

    # duckdb with the delta extension, loaded from the wheel (no download)
    con = _duckdb_with_delta()
    got = con.sql(
        f'SELECT cluster, as_of, "partition", verdict, first_timestamp, replicas, transactional_id '
        f"FROM delta_scan('{uri}') ORDER BY as_of, \"partition\""
    ).fetchall()
    assert [tuple(r) for r in got] == [
        (
            r["cluster"],
            r["as_of"],
            r["partition"],
            r["verdict"],
            r["first_timestamp"],
            r["replicas"],
            r["transactional_id"],
        )
        for r in expected
    ]
    assert got[0][1] == datetime(2026, 11, 2, tzinfo=UTC) and got[0][1].utcoffset() == timedelta(0)
    assert con.sql(
        f"SELECT count(*) FROM delta_scan('{uri}') WHERE as_of = TIMESTAMPTZ '2026-11-02 00:00:00+00'"
    ).fetchone() == (2,)


# --- writer selection ---------------------------------------------------------------------------


def test_deltalake_writer_is_used_without_delta_jars(spark, tmp_path):
    assert delta_spark_available(spark) is False
    assert resolve_writer(spark, "auto") == "deltalake"
    write_tables(spark, str(tmp_path), {"findings": findings_df(spark, [finding(1)])}, cluster="c1", as_of=A1)
    commit = DeltaTable(str(tmp_path / "findings")).history(1)[0]
    assert commit["txnlog.writer"] == "deltalake"
    assert commit["clientVersion"].startswith("delta-rs")


def test_delta_spark_probe_sees_a_class_that_is_there(spark):
    # The probe itself works: a class that is on the classpath is found.
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    assert jvm.java.lang.Class.forName("org.apache.spark.sql.SparkSession", False, loader) is not None


def test_spark_writer_without_jars_is_a_one_line_usage_error(spark, tmp_path):
    with pytest.raises(UsageError) as caught:
        write_tables(
            spark, str(tmp_path), {"findings": findings_df(spark, [finding(1)])}, cluster="c1", as_of=A1, writer="spark"
        )
    message = str(caught.value)
    assert "\n" not in message
    assert "delta_writer" in message and "--jars" in message and "auto or deltalake" in message
    assert caught.value.exit_code == 2
    assert not (tmp_path / "findings").exists()


# --- tables written by an older txnlog or by someone else -----------------------------------------


def test_new_contract_columns_are_added_to_an_older_table(tmp_path):
    from deltalake import write_deltalake

    # a runs table written before status, config, as_of_source, error and the integrity audit's counts
    older = pa.schema(list(tables.RUNS)[: tables.RUNS.names.index("status")])
    old_row = {k: v for k, v in run_row(as_of=A2).items() if k in older.names}
    write_deltalake(str(tmp_path / "runs"), pa.Table.from_pylist([old_row], schema=older))

    write_tables(
        None, str(tmp_path), {"runs": pa.Table.from_pylist([run_row()], schema=tables.RUNS)}, cluster="c1", as_of=A1
    )

    assert pa.schema(DeltaTable(str(tmp_path / "runs")).schema().to_arrow()).names == tables.RUNS.names
    got = rows_of(read_table(str(tmp_path), "runs"), ("as_of",))
    assert got == [run_row(), {**old_row, **{n: None for n in tables.RUNS.names if n not in older.names}}]


def test_table_with_a_contradicting_column_type_is_refused(tmp_path):
    from deltalake import write_deltalake

    wrong = pa.schema([pa.field("partition", pa.string()) if f.name == "partition" else f for f in tables.QUARANTINE])
    write_deltalake(str(tmp_path / "quarantine"), wrong.empty_table())
    quarantine = pa.Table.from_pylist([], schema=tables.QUARANTINE)
    with pytest.raises(UsageError, match="column partition is string in the table but integer in txnlog's contract"):
        write_tables(None, str(tmp_path), {"quarantine": quarantine}, cluster="c1", as_of=A1)


def test_read_table_without_a_table_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no Delta table there"):
        read_table(str(tmp_path), "findings")


def test_timestamps_past_the_year_9999_are_written_and_read_back(tmp_path):
    """A client clock in µs (CreateTime ≈ year 56 000) written by any tool must not crash
    the writer's file statistics (no bounds for such a column) nor the txnlog CLI's reader (null there)."""
    import argparse

    from txnlog.ops.commands import shown_run

    year_56k = pa.scalar(1_717_402_810_030_000 * 1000, pa.timestamp("us", tz="UTC"))  # a µs CreateTime read as ms
    row = {f.name: None for f in tables.QUARANTINE}
    rows = [dict(row, file="a.log", position=0, reason="x"), dict(row, file="b.log", position=1, reason="y")]
    data = pa.Table.from_pylist(rows, schema=tables.QUARANTINE)
    data = data.set_column(
        data.schema.get_field_index("as_of"), "as_of", pa.array([A1, A1], pa.timestamp("us", tz="UTC"))
    )
    table = pa.Table.from_pylist([dict(run_row(), started_at=None)], schema=tables.RUNS)
    table = table.set_column(
        table.schema.get_field_index("started_at"),
        tables.RUNS.field("started_at"),
        pa.array([year_56k.value], pa.timestamp("us", tz="UTC")),
    )
    assert write_tables(None, str(tmp_path), {"runs": table, "quarantine": data}, cluster="c1", as_of=A1) == {
        "runs": 1,
        "quarantine": 2,
    }
    stats = DeltaTable(str(tmp_path / "runs")).get_add_actions(flatten=True)
    assert (
        "min.started_at" not in pa.table(stats).column_names
        or pa.table(stats).column("min.started_at")[0].as_py() is None
    )
    assert read_table(str(tmp_path), "runs").column("started_at")[0].value == year_56k.value  # kept as written
    (run,) = shown_run(argparse.Namespace(output=str(tmp_path), cluster=None, as_of=None)).rows("runs")
    assert run["started_at"] is None and run["as_of"] == A1
    con = _duckdb_with_delta()
    assert (
        con.execute(f"SELECT epoch_ms(started_at) FROM delta_scan('{tmp_path / 'runs'}')").fetchone()[0]
        == year_56k.value // 1000
    )
