"""Both notebooks executed in a real Jupyter kernel over the sample history (tests/reports/history.py),
their values checked against what the Delta tables hold (read here with pyarrow), every figure saved as a
PNG next to the executed notebook (the test prints where)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from tests.reports.history import AFTER_ABORT, CLUSTER, EARLY, STUCK
from tests.reports.kernel import execute
from txnlog.model.contract import ANOMALY_CHECKS
from txnlog.output.delta import read_table

pytestmark = pytest.mark.spark
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _rows(output: str, table: str, **keys) -> list[dict]:
    return read_table(output, table, cluster=CLUSTER, **keys).to_pylist()


def _iso(ts) -> str:
    """A timestamp as pandas' str() of a UTC Timestamp prints it (what json.dumps(default=str) gives)."""
    import pandas as pd

    return str(pd.Timestamp(ts))


def test_forensics_notebook_on_the_newest_run(sample_history, tmp_path):
    h = sample_history
    done = execute(
        NOTEBOOKS / "forensics.ipynb",
        tmp_path / "forensics",
        {"OUTPUT": h.output, "CLUSTER": CLUSTER, "AS_OF": h.natural.isoformat(), "RUN_JOB": False},
        collect="""{
            "as_of": str(AS_OF), "findings": len(findings),
            "plan": plan[["topic", "partition", "step", "remedy", "start_offset", "lso_before", "lso_after_abort",
                          "offsets_released", "safety"]].astype(object).to_dict("records"),
            "worst": f"{worst.topic}-{worst.partition}",
            "timeline_title": timeline_ax.get_title(),
            "timeline_producers": [t.get_text() for t in timeline_ax.get_yticklabels()],
            "titles": [lso_lag_ax.get_title(), plan_ax.get_title()],
            "integrity": integrity_summary(integrity).reset_index().to_dict("records"),
            "integrity_title": integrity_ax.get_title(),
        }""",
    )
    v = done.values
    findings = _rows(h.output, "findings", as_of=h.natural)
    recs = _rows(h.output, "abort_recommendations", as_of=h.natural)
    assert v["findings"] == len(findings) == 11
    # the plan: abort_recommendations' impact columns, one step per recommendation, and one per partition of
    # each LATE finding whose remedy is FENCE (the sample's cart-writer on inventory-1: LSO to the log end)
    fences = [f for f in findings if f["remedy"] == "FENCE"]
    assert [(f["transactional_id"], f["topic"], f["partition"]) for f in fences] == [("cart-writer", "inventory", 1)]
    got = {(p["topic"], p["partition"], p["start_offset"]): p for p in v["plan"] if p["remedy"] == "ABORT"}
    assert set(got) == {(r["topic"], r["partition"], r["start_offset"]) for r in recs}
    (fence,) = [p for p in v["plan"] if p["remedy"] == "FENCE"]
    health_of = {(r["topic"], r["partition"]): r for r in _rows(h.output, "partition_health", as_of=h.natural)}
    inv1 = health_of[("inventory", 1)]
    assert (fence["start_offset"], fence["lso_before"]) == (fences[0]["start_offset"], inv1["last_stable_offset"])
    assert fence["lso_after_abort"] == inv1["log_end_offset"]
    assert fence["offsets_released"] == inv1["log_end_offset"] - inv1["last_stable_offset"] > 0
    for r in recs:
        p = got[(r["topic"], r["partition"], r["start_offset"])]
        assert (p["lso_after_abort"], p["offsets_released"], p["safety"]) == (
            r["lso_after_abort"],
            r["offsets_released"],
            r["safety"],
        )
    assert v["plan"][0]["topic"] == "orders" and v["plan"][0]["partition"] == 5  # releases the most: first
    health = {(r["topic"], r["partition"]): r for r in _rows(h.output, "partition_health", as_of=h.natural)}
    assert v["plan"][0]["lso_before"] == health[STUCK]["last_stable_offset"]
    # the timeline: the worst partition, producers as categories labelled with their ids
    assert v["worst"] == "orders-5"
    txns = [t for t in _rows(h.output, "transactions", as_of=h.natural) if (t["topic"], t["partition"]) == STUCK]
    assert v["timeline_title"].startswith(f"orders-5: {len(txns)} transactions, 1 open")
    assert sorted(map(int, v["timeline_producers"])) == sorted({t["producer_id"] for t in txns})
    printed = done.text()
    for f in findings:
        if f["verdict"] == "LATE":  # every LATE finding's remedy, its commands and when it is safe
            assert f"[LATE {f['reason']} -> {f['remedy']}] {f['transactional_id']}" in printed
            assert f"safe when: {f['remedy_condition']}" in printed
            assert f["remedy_command"] is None or f["remedy_command"] in printed
        if f["remedy"] == "FENCE":
            assert f["remedy_fallback_command"] in printed and "forceTerminateTransaction" in f["remedy_command"]
        if f["verdict"] == "HANGING":
            assert f"[HANGING {f['reason']}] {f['topic']}-{f['partition']}" in printed
            assert f"--start-offset {f['start_offset']}" in printed
    # one figure per plotting cell
    assert done.pngs_of("plot_lso_lag(health)") == 1
    assert done.pngs_of("plot_timeline(") == 1
    assert done.pngs_of("plot_impact_plan(plan)") == 1
    assert done.pngs_of("plot_integrity(integrity)") == 1
    assert done.pngs_of("plot_blocked(who)") == 1
    assert len(done.figures) == 5 and all(p.stat().st_size > 10_000 for p in done.figures)
    # the integrity audit: one summary row per anomaly check, as the table holds (the sample has no fault)
    integrity = [r for r in _rows(h.output, "integrity", as_of=h.natural) if r["severity"] != "NOT_CHECKED"]
    assert [r["check"] for r in v["integrity"]] == list(ANOMALY_CHECKS)
    for r in v["integrity"]:
        assert r["anomalies"] == sum(i["check"] == r["check"] for i in integrity)
    assert integrity == [] and v["integrity_title"] == "Integrity audit: no anomaly"


def test_cluster_overview_notebook_over_the_history(sample_history, tmp_path):
    h = sample_history
    done = execute(
        NOTEBOOKS / "cluster_overview.ipynb",
        tmp_path / "overview",
        {"OUTPUT": h.output, "CLUSTER": None},
        collect="""{
            "counts": {str(t): {k: int(n) for k, n in row.items() if n} for t, row in counts.iterrows()},
            "lag": {str(t): {k: float(n) for k, n in row.items() if n == n} for t, row in lag.iterrows()},
            "ttr": ttr[["finding", "first_seen", "resolved_at", "time_to_resolution", "runs_seen"]]
                .astype(str).to_dict("records"),
            "durations": {o: int(n) for o, n in durations["count"].items()},
            "states": {str(t): {k: int(n) for k, n in row.items() if n} for t, row in states.iterrows()},
            "titles": [ax.get_title() for ax in (findings_ax, lag_ax, ttr_ax, durations_ax, states_ax)],
        }""",
    )
    import pandas as pd

    v = done.values
    runs = sorted(r["as_of"] for r in _rows(h.output, "runs") if r["status"] == "SUCCEEDED")
    assert runs == list(h.as_ofs)
    findings = _rows(h.output, "findings")
    # findings over time by verdict and reason
    expected = {
        _iso(t): dict(Counter(f"{f['verdict']} {f['reason']}" for f in findings if f["as_of"] == t)) for t in runs
    }
    assert v["counts"] == expected
    # LSO lag over runs: the 8 partitions with the largest lag in any run, per run
    health = _rows(h.output, "partition_health")
    worst: dict[str, int] = {}
    for r in health:
        if r["lso_lag"] > 0:
            name = f"{r['topic']}-{r['partition']}"
            worst[name] = max(worst.get(name, 0), r["lso_lag"])
    top = sorted(worst, key=lambda n: -worst[n])[:8]
    assert {n for row in v["lag"].values() for n in row} == set(top)
    for r in health:
        name = f"{r['topic']}-{r['partition']}"
        if name in top:
            assert v["lag"][_iso(r["as_of"])][name] == r["lso_lag"]
    assert v["lag"][_iso(AFTER_ABORT)]["orders-5"] == 0 and v["lag"][_iso(h.natural)]["orders-5"] > 0

    # time to resolution: identity per README; resolved = present in run N, gone in N+1
    def identity(f):
        if f["topic"] is None:
            return (f["transactional_id"], f["producer_id"], f["producer_epoch"])
        return (f["topic"], f["partition"], f["producer_id"], f["start_offset"])

    seen: dict[tuple, list] = {}
    for f in findings:
        seen.setdefault(identity(f), []).append(f["as_of"])
    resolved = {k: next((r for r in runs if r > max(ts)), None) for k, ts in seen.items()}
    assert len(v["ttr"]) == len(seen)
    by_first = Counter(row["first_seen"] for row in v["ttr"])
    assert by_first == Counter(_iso(min(ts)) for ts in seen.values())
    gone = [row for row in v["ttr"] if row["resolved_at"] != "NaT"]
    assert [k[:2] for k, r in resolved.items() if r is not None] == [STUCK]
    (orders5,) = gone
    assert orders5["finding"].startswith("sample/orders-5/")
    assert orders5["first_seen"] == _iso(EARLY) and orders5["resolved_at"] == _iso(AFTER_ABORT)
    assert orders5["time_to_resolution"] == str(pd.Timedelta(AFTER_ABORT - EARLY))
    assert AFTER_ABORT - EARLY == timedelta(hours=2, minutes=30)
    # durations: each transaction once over the runs, per outcome
    txns = {}
    for t in sorted(_rows(h.output, "transactions"), key=lambda t: t["as_of"]):
        txns[(t["topic"], t["partition"], t["producer_id"], t["first_offset"])] = t["outcome"]
    assert v["durations"] == dict(Counter(txns.values()))
    # coordinator states per run (a tombstoned id counts as Dead)
    coordinator = _rows(h.output, "coordinator_state")
    expected_states = {
        _iso(t): dict(
            Counter(
                "Dead" if c["is_tombstoned"] or c["state"] is None else c["state"]
                for c in coordinator
                if c["as_of"] == t
            )
        )
        for t in runs
    }
    assert v["states"] == expected_states
    assert v["titles"][2].startswith("Time to resolution: 1 of")
    for cell in ("plot_findings_over_time", "plot_lso_lag_over_runs", "plot_time_to_resolution",
                 "plot_duration_distribution", "plot_coordinator_states"):  # fmt: skip
        assert done.pngs_of(cell) == 1, cell
    assert len(done.figures) == 5
