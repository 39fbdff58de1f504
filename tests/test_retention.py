"""The history's retention: which runs go (txnlog.output.retention), and
their rows deleted from real Delta tables (txnlog.output.delta_retention.drop_runs_before), including from files that hold
several runs after a compaction, then vacuumed; `txnlog retain`; the job's retain_runs."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from txnlog.model import contract as tables
from txnlog.ops.cli import main
from txnlog.output.delta import read_table, write_tables
from txnlog.output.delta_retention import drop_runs_before, vacuum
from txnlog.output.retention import plan

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


def _run(day: int, cluster: str = "c", status: str = "SUCCEEDED") -> dict:
    return {"cluster": cluster, "as_of": DAY0 + timedelta(days=day), "status": status}


def test_keep_runs_keeps_the_newest_complete_runs_and_drops_older_incomplete_ones():
    runs = [_run(d) for d in range(10)] + [_run(3, status="RUNNING"), _run(11, status="FAILED")]
    p = plan(runs, keep_runs=3)
    assert p.cutoffs == {"c": DAY0 + timedelta(days=7)}
    assert p.dropped["c"] == sorted([DAY0 + timedelta(days=d) for d in range(7)] + [DAY0 + timedelta(days=3)])
    assert p.kept == {"c": 4}  # days 7, 8, 9 and the newer FAILED run (it may be a rerun in progress)


def test_keep_days_counts_back_from_the_newest_complete_run_not_the_clock():
    p = plan([_run(d) for d in range(0, 100, 10)], keep_days=25)
    assert p.cutoffs["c"] == DAY0 + timedelta(days=65) and len(p.dropped["c"]) == 7


def test_either_rule_keeps_a_run():
    runs = [_run(d) for d in range(30)]
    assert plan(runs, keep_runs=5, keep_days=10).cutoffs["c"] == DAY0 + timedelta(days=19)  # 10 days > 5 runs
    assert plan(runs, keep_runs=20, keep_days=2).cutoffs["c"] == DAY0 + timedelta(days=10)  # 20 runs > 2 days


def test_clusters_are_apart_and_one_without_a_complete_run_keeps_everything():
    runs = [_run(d, "a") for d in range(5)] + [_run(d, "b") for d in range(2)] + [_run(1, "z", "RUNNING")]
    p = plan(runs, keep_runs=1)
    assert p.cutoffs == {"a": DAY0 + timedelta(days=4), "b": DAY0 + timedelta(days=1)}
    assert "z" not in p.dropped
    assert plan(runs, keep_runs=1, clusters=["b"]).cutoffs == {"b": DAY0 + timedelta(days=1)}


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        plan([_run(0)], keep_runs=0)
    with pytest.raises(ValueError, match="keep_runs, keep_days"):
        plan([_run(0)])


def _history(out: Path, days: int = 6) -> None:
    """``days`` nightly runs of clusters a and b: 3 findings rows each, one runs row."""
    for day in range(days):
        as_of = DAY0 + timedelta(days=day)
        for cluster in ("a", "b"):
            findings = pa.Table.from_pylist(
                [{**{f.name: None for f in tables.FINDINGS}, "cluster": cluster, "as_of": as_of, "topic": "t",
                  "partition": p, "producer_id": 100 + day, "start_offset": p, "verdict": "HANGING",
                  "reason": "NO_TRANSACTIONAL_ID"} for p in range(3)],
                schema=tables.FINDINGS,
            )  # fmt: skip
            runs = pa.Table.from_pylist(
                [{**{f.name: None for f in tables.RUNS}, "cluster": cluster, "as_of": as_of, "run_id": f"r{day}",
                  "status": "SUCCEEDED", "started_at": as_of, "finished_at": as_of}],
                schema=tables.RUNS,
            )  # fmt: skip
            write_tables(None, str(out), {"findings": findings, "runs": runs}, cluster=cluster, as_of=as_of)


def _keys(out: Path, table: str) -> list[tuple[str, int]]:
    return sorted((r["cluster"], (r["as_of"] - DAY0).days) for r in read_table(str(out), table).to_pylist())


def test_drop_runs_before_deletes_exactly_the_older_rows_even_from_compacted_files(tmp_path):
    out = tmp_path / "out"
    _history(out)
    DeltaTable(str(out / "findings")).optimize.compact()  # one file holding every run: the rewrite path
    assert len(DeltaTable(str(out / "findings")).file_uris()) == 1
    deleted = drop_runs_before(str(out), {"a": DAY0 + timedelta(days=4)})
    assert deleted == {"runs": 4, "findings": 12}
    want = sorted([("a", d) for d in (4, 5)] + [("b", d) for d in range(6)])
    assert sorted(set(_keys(out, "findings"))) == want and len(_keys(out, "findings")) == 3 * len(want)
    assert _keys(out, "runs") == want
    assert drop_runs_before(str(out), {"a": DAY0 + timedelta(days=4)}) == {"runs": 0, "findings": 0}  # idempotent
    before = sum(1 for _ in (out / "findings").rglob("*.parquet"))
    removed = vacuum(str(out), retention_hours=0)
    assert removed["findings"] >= 1 and sum(1 for _ in (out / "findings").rglob("*.parquet")) < before
    assert sorted(set(_keys(out, "findings"))) == want  # still readable after the vacuum


def test_txnlog_retain_lists_then_deletes(tmp_path, capsys):
    out = tmp_path / "out"
    _history(out)
    printed = io.StringIO()
    assert main(["retain", "--output", str(out), "--keep-runs", "2", "--format", "csv"], out=printed) == 0
    lines = printed.getvalue().splitlines()
    assert lines[0] == "Cluster,KeepFrom,RunsDropped,RunsKept,OldestDropped,NewestDropped"
    assert lines[1:] == [
        "a,2026-01-05T00:00:00Z,4,2,2026-01-01T00:00:00Z,2026-01-04T00:00:00Z",
        "b,2026-01-05T00:00:00Z,4,2,2026-01-01T00:00:00Z,2026-01-04T00:00:00Z",
    ]
    assert len(_keys(out, "runs")) == 12, "a dry run deletes nothing"
    assert "--execute" in capsys.readouterr().err
    args = ["retain", "--output", str(out), "--keep-runs", "2", "--cluster", "b", "--vacuum-hours", "0", "--execute"]
    assert main(args, out=io.StringIO()) == 0
    assert _keys(out, "runs") == sorted([("a", d) for d in range(6)] + [("b", 4), ("b", 5)])
    assert "deleted 16 rows of 4 runs; vacuum removed" in capsys.readouterr().err
    assert main(["retain", "--output", str(out)], out=io.StringIO()) == 2
    assert main(["retain", "--output", str(out), "--keep-runs", "1", "--cluster", "nope"], out=io.StringIO()) == 2


def test_the_job_applies_retain_runs_to_its_cluster(tmp_path):
    from txnlog.model.config import load_config
    from txnlog.pipeline import retain

    out = tmp_path / "out"
    _history(out)
    messages: list[str] = []
    retain(load_config(None, {"output": str(out), "cluster": "a", "retain_runs": 3}), "a", messages.append)
    assert _keys(out, "runs") == sorted([("a", d) for d in (3, 4, 5)] + [("b", d) for d in range(6)])
    assert messages == [
        "retention: deleted 3 runs older than 2026-01-04T00:00:00+00:00 (12 rows; 'txnlog retain --vacuum-hours' "
        "frees their files)"
    ]
