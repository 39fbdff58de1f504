"""dashboards/*.sql on the sample history, with duckdb's delta extension (offline, dashboards/duckdb_views.sql)
and with polars (pl.scan_delta + SQLContext): both engines' rows equal what pyarrow reads from the tables.
The queries need no per-engine variant: both run the same text."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.reports.history import AFTER_ABORT, CLUSTER, EARLY, STUCK
from txnlog.output.delta import read_table

pytestmark = pytest.mark.spark
DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
QUERIES = sorted(p.stem for p in DASHBOARDS.glob("*.sql") if p.stem != "duckdb_views")
TABLES = ("runs", "findings", "partition_health", "integrity")


def _duckdb(output: str):
    import duckdb
    import duckdb_extension_delta

    extension = Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"LOAD '{extension / 'delta.duckdb_extension'}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute((DASHBOARDS / "duckdb_views.sql").read_text().replace("'./out/", f"'{output}/"))
    return con


def _query(name: str, engine: str) -> str:
    variant = DASHBOARDS / engine / f"{name}.sql"
    return (variant if variant.exists() else DASHBOARDS / f"{name}.sql").read_text()


def _run(output: str, name: str, engine: str) -> list[tuple]:
    if engine == "duckdb":
        rows = _duckdb(output).sql(_query(name, engine)).fetchall()
    else:
        import polars as pl

        ctx = pl.SQLContext({t: pl.scan_delta(f"{output}/{t}") for t in TABLES})
        rows = ctx.execute(_query(name, engine)).collect().rows()
    return [tuple(v.astimezone(UTC) if isinstance(v, datetime) else v for v in r) for r in rows]


def _expected(output: str, name: str) -> list[tuple]:
    """What each query should return, computed from the tables read with pyarrow (txnlog.output.delta.read_table)."""
    runs = sorted(r["as_of"] for r in read_table(output, "runs").to_pylist() if r["status"] == "SUCCEEDED")
    findings = [f for f in read_table(output, "findings").to_pylist() if f["as_of"] in runs]
    health = [
        h for h in read_table(output, "partition_health").to_pylist() if h["as_of"] in runs and h["source"] != "live"
    ]
    if name == "current_findings":
        cols = ("cluster", "as_of", "verdict", "reason", "topic", "partition", "producer_id", "producer_epoch")
        cols += ("start_offset", "transactional_id", "idle_ms", "lso_lag")
        return [tuple(f[c] for c in cols) for f in findings if f["as_of"] == runs[-1]]
    if name == "lso_lag_by_partition":
        cols = ("cluster", "as_of", "topic", "partition", "lso_lag", "last_stable_offset", "log_end_offset")
        cols += ("open_transactions", "has_late_transaction")
        return [tuple(h[c] for c in cols) for h in health if h["lso_lag"] > 0]
    if name == "integrity_over_time":
        return _integrity_over_time(output, runs)
    if name == "late_partitions_over_time":
        late = Counter(h["as_of"] for h in health if h["has_late_transaction"])
        return [(CLUSTER, t, late[t]) for t in runs]
    assert name == "time_to_resolution"
    seen: dict[str, list[datetime]] = {}
    for f in findings:
        if f["topic"] is None:
            key = f"{f['transactional_id']}/pid {f['producer_id']}/epoch {f['producer_epoch']}"
        else:
            key = f"{f['topic']}-{f['partition']}/pid {f['producer_id']}/offset {f['start_offset']}"
        seen.setdefault(key, []).append(f["as_of"])
    rows = []
    for key, ts in seen.items():
        resolved = next((r for r in runs if r > max(ts)), None)
        seconds = None if resolved is None else (resolved - min(ts)).total_seconds()
        rows.append((CLUSTER, key, min(ts), max(ts), resolved, len(ts), seconds))
    return rows


def _integrity_over_time(output: str, runs: list[datetime]) -> list[tuple]:
    """Per complete run: anomalies, errors, their records, NOT_CHECKED rows, then anomalies per check."""
    from txnlog.model.contract import ANOMALY_CHECKS

    rows = read_table(output, "integrity").to_pylist()
    expected = []
    for t in runs:
        mine = [r for r in rows if r["as_of"] == t]
        bad = [r for r in mine if r["severity"] in ("ERROR", "WARNING")]
        expected.append(
            (CLUSTER, t, len(bad), sum(r["severity"] == "ERROR" for r in bad))
            + (sum(r["records_affected"] or 0 for r in bad), len(mine) - len(bad))
            + tuple(sum(r["check"] == c for r in bad) for c in ANOMALY_CHECKS)
        )
    return expected


def _key(row: tuple) -> tuple:
    return tuple((v is None, "" if v is None else str(v)) for v in row)


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
@pytest.mark.parametrize("name", QUERIES)
def test_dashboard_query(sample_history, name, engine):
    got = _run(sample_history.output, name, engine)
    expected = _expected(sample_history.output, name)
    assert got, f"{name} returned nothing on the sample history"
    assert sorted(got, key=_key) == sorted(expected, key=_key)


def test_dashboards_show_the_abort(sample_history):
    """The history's story in the dashboard rows: orders-5 pinned until its abort, resolved in 2h30m."""
    ttr = {r[1]: r for r in _run(sample_history.output, "time_to_resolution", "duckdb")}
    (resolved,) = [r for r in ttr.values() if r[4] is not None]
    assert resolved[1].startswith(f"{STUCK[0]}-{STUCK[1]}/") and resolved[2] == EARLY and resolved[4] == AFTER_ABORT
    assert resolved[6] == 2.5 * 3600
    lags = _run(sample_history.output, "lso_lag_by_partition", "polars")
    assert {r[1] for r in lags if (r[2], r[3]) == STUCK} == set(sample_history.as_ofs) - {AFTER_ABORT}
    assert {n for _, _, n in _run(sample_history.output, "late_partitions_over_time", "polars")} != {0}
    assert QUERIES == [
        "current_findings",
        "integrity_over_time",
        "late_partitions_over_time",
        "lso_lag_by_partition",
        "time_to_resolution",
    ]
