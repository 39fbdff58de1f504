"""Logs copied during a real incident: the broker's rules, not intuition.

One run of the writer's ``messy_incident`` scenario (lagging and diverged followers, a restarted
broker, DeleteRecords, a coordinator failover whose records go back in time, a damaged marker) --
the job's main in process, on the shared Spark session -- and one of the same brokers' files as
kafka-dump-log.sh output through ``./spark-submit.sh`` (the session's shared run, tests/e2e/shared.py);
every expectation comes from the writer's ground truth, which applies the broker's rules
(``txnlog.brokerlog.ground_truth``), or from the scenario's own notes (which broker lagged, where
the log start moved to).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process
from tests.e2e.shared import MESSY_AS_OF

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@dataclass
class Messy:
    out: str
    truth: Any
    work: Path
    findings: dict[tuple, dict[str, Any]]
    recs: dict[tuple, dict[str, Any]]
    health: dict[tuple, dict[str, Any]]


@pytest.fixture(scope="module")
def messy(spark, messy_incident, tmp_path_factory) -> Messy:
    work = tmp_path_factory.mktemp("messy")
    truth = messy_incident.truth
    out = str(work / "out")
    proc = run_in_process(spark, "--logs", str(messy_incident.logs), "--output", out, "--cluster", "messy", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Messy(
        out=out,
        truth=truth,
        work=work,
        findings={T.finding_key(f): f for f in T.rows(out, "findings") if f["topic"] is not None},
        recs=T.recommendations_by_key(out),
        health={(p["topic"], p["partition"]): p for p in T.rows(out, "partition_health")},
    )


def _finding(m: Messy, topic: str, partition: int) -> dict[str, Any]:
    (f,) = [f for k, f in m.findings.items() if k[:2] == (topic, partition)]
    return f


def test_findings_equal_the_brokers_view(messy):
    """Every finding, verdict, reason, owner and safety as the ground truth says, nothing else."""
    assert T.actual_findings(messy.out, messy.recs) == T.expected_findings(messy.truth)


def test_lagging_follower_is_behind_not_open(messy):
    """Rule 1: a copy that ends before another replica's marker never makes the transaction open."""
    lagging = T.broker_name(messy.truth.notes["lagging_follower"])
    assert not [k for k in messy.findings if k[:2] == ("orders", 1)]
    txns = [t for t in T.rows(messy.out, "transactions") if (t["topic"], t["partition"]) == ("orders", 1)]
    assert all(t["outcome"] != "OPEN" for t in txns)
    assert any(lagging in t["replicas"] for t in txns)
    p, want = messy.health[("orders", 1)], messy.truth.partitions[("orders", 1)]
    assert (p["log_end_offset"], p["last_stable_offset"], p["lso_lag"], p["open_transactions"]) == (
        want.log_end_offset,
        want.last_stable_offset,
        0,
        0,
    )


def test_diverged_follower_is_verify_first(messy):
    """Rule 1: a follower holding data past the marker it lacks diverged: reported once, VERIFY_FIRST."""
    diverged = T.broker_name(messy.truth.notes["diverged_follower"])
    f = _finding(messy, "orders", 2)
    assert f["open_replicas"] == [diverged]
    assert "the replicas diverged" in f["evidence"]
    assert messy.recs[T.finding_key(f)]["safety"] == "VERIFY_FIRST"
    assert messy.health[("orders", 2)]["open_transactions"] == 0  # the leader has the marker


def test_restarted_broker_snapshot_gives_the_start_offset(messy):
    """Rule 3: snapshots at or below the log start were deleted by the restart; a later snapshot
    still holds the transaction's older currentTxnFirstOffset, below the log start."""
    log_start = messy.truth.notes["metrics_log_start"]
    (want,) = [o for o in messy.truth.open_transactions if (o.topic, o.partition) == ("metrics", 0)]
    assert want.start_offset < log_start and want.source == "snapshot"
    f = _finding(messy, "metrics", 0)
    assert f["start_offset"] == want.start_offset and f["started_before_log_start"]
    assert re.search(r"producer snapshot at offset \d+", f["evidence"])
    rec = messy.recs[T.finding_key(f)]
    assert rec["command"].endswith(f"--start-offset {want.start_offset}")
    p = messy.health[("metrics", 0)]
    assert p["log_start_offset"] == log_start
    assert p["last_stable_offset"] == log_start  # clamped to the log start, never below it


def test_delete_records_log_start_from_checkpoint(messy):
    """Rule 1/3: after DeleteRecords the checkpointed log start lies inside a segment; the LSO is
    clamped to it while the open transaction keeps its own first offset."""
    log_start = messy.truth.notes["audit_log_start"]
    p = messy.health[("audit-trail", 0)]
    assert p["log_start_offset"] == log_start
    assert p["last_stable_offset"] == log_start == messy.truth.partitions[("audit-trail", 0)].last_stable_offset
    f = _finding(messy, "audit-trail", 0)
    assert f["start_offset"] < log_start


def test_failover_latest_state_is_last_by_offset(messy):
    """Rule 4: after a failover the newest record carries an older timestamp; it is still the state."""
    got = {r["transactional_id"]: r for r in T.rows(messy.out, "coordinator_state")}
    want = messy.truth.coordinator["refund-writer"]
    assert got["refund-writer"]["state"] == want.state == "CompleteAbort"
    history = sorted(
        (r for r in T.rows(messy.out, "coordinator_history") if r["transactional_id"] == "refund-writer"),
        key=lambda r: r["record_offset"],
    )
    stamps = [r["record_timestamp"] for r in history]
    assert stamps != sorted(stamps), "the scenario should hold timestamps that go backwards"
    assert _finding(messy, "fees", 0)["reason"] == "COORDINATOR_COMPLETED"


def test_damaged_marker_is_verify_first(messy):
    """Rule 5: the quarantined marker may be the transaction's end: never SAFE, and said so."""
    f = _finding(messy, "fees", 2)
    assert messy.recs[T.finding_key(f)]["safety"] == "VERIFY_FIRST"
    assert "quarantined region" in f["evidence"]
    q = [r for r in T.rows(messy.out, "quarantine") if (r["topic"], r["partition"]) == ("fees", 2)]
    assert [(Path(r["file"]).name, r["reason"]) for r in q] == [
        (Path(t.file).name, t.reason) for t in messy.truth.quarantine
    ]


def test_one_transaction_one_set_of_numbers(messy):
    """Rule 9: findings, the recommendation and its legacy command agree on start offset, producer
    epoch and coordinator epoch, and that epoch is the producer's last marker's (or snapshot's)."""
    by_key = {(o.topic, o.partition, o.producer_id, o.start_offset): o for o in messy.truth.open_transactions}
    assert messy.recs
    for key, rec in messy.recs.items():
        f = messy.findings[key]
        legacy = dict(re.findall(r"--(producer-id|producer-epoch|coordinator-epoch) (-?\d+)", rec["legacy_command"]))
        assert int(legacy["producer-id"]) == f["producer_id"] == rec["producer_id"]
        assert int(legacy["producer-epoch"]) == f["producer_epoch"] == rec["producer_epoch"]
        assert int(legacy["coordinator-epoch"]) == f["coordinator_epoch"] == rec["coordinator_epoch"]
        assert rec["coordinator_epoch"] == max(by_key[key].coordinator_epoch, 0), key


# --- the same copies as kafka-dump-log.sh output --------------------------------------------------


@pytest.fixture(scope="module")
def messy_dumps(messy_dumps_run) -> Messy:
    """Each broker's dumps (tests/e2e/shared.py render_broker_dumps), ``--dump-log`` per broker directory,
    ``--as-of`` the scenario's as_of (the dumps hold no checkpoint files): the session's shared run."""
    run = messy_dumps_run
    assert str(run.truth.as_of_ms) == MESSY_AS_OF
    out = run.out
    return Messy(
        out=out,
        truth=run.truth,
        work=run.workdir,
        findings={T.finding_key(f): f for f in T.rows(out, "findings") if f["topic"] is not None},
        recs=T.recommendations_by_key(out),
        health={(p["topic"], p["partition"]): p for p in T.rows(out, "partition_health")},
    )


def test_dumps_with_identical_paths_give_the_same_findings(messy_dumps):
    """Rules 1-5 and 9 on kafka-dump-log.sh text: same findings, owners and safety as the segments
    (the dumps hold no checkpoint files, so only the log start after DeleteRecords differs)."""
    m = messy_dumps
    assert T.actual_findings(m.out, m.recs) == T.expected_findings(m.truth)
    assert m.findings[next(k for k in m.findings if k[:2] == ("orders", 2))]["open_replicas"] == [
        T.broker_name(m.truth.notes["diverged_follower"])
    ]
    assert not [k for k in m.findings if k[:2] == ("orders", 1)]  # the lagging follower is behind
    assert m.health[("orders", 1)]["open_transactions"] == 0
    assert {T.broker_name(b) for b in (1, 2, 3)} <= {r for p in m.health.values() for r in p["replicas"]}
    test_one_transaction_one_set_of_numbers(m)
