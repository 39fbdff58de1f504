"""Who is blocked, through the job: the ``groups_behind_hanging_transaction`` scenario's copied log dirs run in both
placements (the driver's threads and Spark's tasks), and the ``blocked_consumers`` rows are those the scenario wrote
(txnlog.brokerlog.blocked_groups: its notes, from what was appended, not from the job).

Both runs are the session's (tests/conftest.py): the driver's is the scenario's run the oracle's modules judge
(``scenario_run``, a small input placed in the driver), the tasks' the placement test's (``scenario_tasks_run``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_previous_pipeline import differences, read_delta
from tests.oracle.judge import ScenarioRun

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NAME = "groups_behind_hanging_transaction"
CLUSTER = ScenarioRun.CLUSTER  # that of the session's runs
_COMPARED = (
    "group", "topic", "partition", "committed_offset", "last_stable_offset", "high_watermark",
    "offsets_to_high_watermark", "status", "holding_producer_id", "holding_start_offset",
    "pending_transactional_offsets", "members", "coordinator_partition",
)  # fmt: skip


@pytest.fixture(scope="module")
def scenario(scenario_run):
    run = scenario_run(NAME)
    return run.logs, run.truth


@pytest.fixture(scope="module")
def runs(scenario_run, scenario_tasks_run) -> dict[str, Path]:
    run = scenario_run(NAME)
    assert any("here (a small input)" in line for line in run.progress), "placed in the driver"
    return {"driver": run.out, "tasks": scenario_tasks_run(NAME)}


@pytest.mark.parametrize("placement", ["driver", "tasks"])
def test_the_groups_the_scenario_blocked(runs, scenario, placement):
    _, result = scenario
    table = read_delta(runs[placement], "blocked_consumers", {})
    got = sorted(table.to_pylist(), key=lambda r: r["group"])
    want = result.notes["blocked_consumers"]
    assert [r["group"] for r in got] == [w["group"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert {k: g[k] for k in _COMPARED} == {k: w[k] for k in _COMPARED}, w["group"]
        since = g["blocked_since"]
        assert (None if since is None else int(since.timestamp() * 1000)) == w["blocked_since_ms"], w["group"]
        assert g["source"] == "segments" and g["cluster"] == CLUSTER


def test_findings_and_plan_name_the_groups_each_remedy_unblocks(runs, scenario):
    _, result = scenario
    truth = result.notes["blocked_truth"]
    findings = read_delta(runs["driver"], "findings", {}).to_pylist()
    named = {(r["topic"], r["producer_id"]): r["blocked_groups"] for r in findings}
    assert named[("page-views", truth["hang_pid"])] == ["dashboards"]  # HANGING: its abort unblocks dashboards
    assert named[("__consumer_offsets", truth["etl_pid"])] == ["billing"]  # LATE: its end settles billing's offsets
    assert named[("invoices", truth["etl_pid"])] == []
    plan = read_delta(runs["driver"], "abort_recommendations", {}).to_pylist()
    assert {(r["topic"], r["producer_id"]): r["blocked_groups"] for r in plan} == {
        ("page-views", truth["hang_pid"]): ["dashboards"]
    }


def test_both_placements_write_the_same_tables(runs):
    problems: list[str] = []
    for table in ("blocked_consumers", "findings", "abort_recommendations", "quarantine"):
        problems += differences(table, read_delta(runs["tasks"], table, {}), read_delta(runs["driver"], table, {}))
    assert not problems, "\n".join(problems)


def test_a_transaction_in_consumer_offsets_names_its_groups_and_stops_compaction(runs, scenario):
    """billing-etl's open transaction in billing's ``__consumer_offsets`` partition: its evidence names the group
    whose offset commit it holds pending, with the partition, and says that partition's compaction has stopped
    (the log cleaner compacts only below the LSO, LogCleanerManager.cleanableOffsets)."""
    _, result = scenario
    truth = result.notes["blocked_truth"]
    (billing,) = [w for w in result.notes["blocked_consumers"] if w["group"] == "billing"]
    tp = f"__consumer_offsets-{truth['billing_partition']}"
    for placement in ("driver", "tasks"):
        findings = read_delta(runs[placement], "findings", {}).to_pylist()
        (finding,) = [
            r for r in findings if r["topic"] == "__consumer_offsets" and r["producer_id"] == truth["etl_pid"]
        ]
        evidence = finding["evidence"]
        assert f"compaction of {tp} has stopped for every group placed there" in evidence, evidence
        assert f"group billing ({', '.join(billing['pending_transactional_offsets'])}) pending" in evidence, evidence
        assert "UNSTABLE_OFFSET_COMMIT" in evidence and evidence.endswith("."), evidence
        # the HANGING transaction on page-views names dashboards, blocked behind it at the LSO
        (hang,) = [r for r in findings if r["topic"] == "page-views" and r["producer_id"] == truth["hang_pid"]]
        (dashboards,) = [w for w in result.notes["blocked_consumers"] if w["group"] == "dashboards"]
        assert f"consumer group dashboards waits behind it: its committed offset is this LSO " \
               f"({dashboards['last_stable_offset']})" in hang["evidence"], hang["evidence"]  # fmt: skip
        assert "billing" not in hang["evidence"], hang["evidence"]
        # the data partitions' findings say nothing of compaction
        others = [r["evidence"] for r in findings if r["topic"] != "__consumer_offsets"]
        assert others and not any("compaction" in e for e in others)
