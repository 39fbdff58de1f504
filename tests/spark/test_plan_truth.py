"""``txnlog plan``'s numbers against the broker-log writer's ground truth.

Scenario ``several_open_transactions`` (txnlog.brokerlog.scenarios), one broker:

* ``payments-1``: HANGING (id expired) < LATE (markers pending) < HANGING (no id) < HANGING (KAFKA-14053),
  plus committed traffic: the first abort moves the LSO to the LATE transaction, the other two release 0;
* ``orders-3``: one HANGING transaction: its abort releases everything up to the log end;
* ``orders-5``: HANGING < HANGING < an ongoing transaction within its timeout: the first abort moves the
  LSO to the second HANGING one, the second to the ongoing one.

The truth is the writer's, not txnlog's: ``notes["abort_plan"]`` is what the writer's own
``PartitionLog.last_stable_offset`` says after each ABORT marker appended with
``PartitionLog.append_end_txn_marker`` (what WriteTxnMarkers makes the leader do) on copies of the leaders'
logs taken at ``as_of``, HANGING transactions in start-offset order per partition.

How the writer's numbers correspond to txnlog's (``abort_recommendations``, ``txnlog.rules.verdicts.abort_impact``):

* while an unstable transaction is left, both say the LSO is its first offset;
* with none left, Kafka's LSO is the high watermark once the marker is replicated, i.e. the log end *after*
  the markers: the writer's ``lso_after`` is ``log_end_at_as_of + k`` after the partition's k-th abort
  (``UnifiedLog.lastStableOffset``; ``ProducerStateManager.removeUnreplicatedTransactions`` drops the
  aborted transaction once the high watermark is past its marker). txnlog reports the log end at ``as_of``
  without the markers (its docstring: "the marker itself is one more offset"), so its ``lso_after_abort``
  there is the writer's minus k, and its ``offsets_released`` at that step is one less than the writer's
  (the marker's own offset, a control record no consumer receives).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.brokerlog.scenarios import write_scenario

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

KEY = ("topic", "partition", "producer_id", "start_offset")


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory) -> Iterator[tuple[ScenarioResult, Path]]:
    """The scenario written once and the job run once over it (in-process, the shared session)."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import run as run_job

    root = tmp_path_factory.mktemp("plan-truth")
    truth = write_scenario("several_open_transactions", root / "logs", seed=0)
    config = load_config(None, {"logs": [str(root / "logs")], "output": str(root / "out"), "cluster": "plan-truth"})
    result = run_job(config, spark=spark, progress=lambda _: None)
    assert result.as_of == truth.as_of
    yield truth, root / "out"


def _plan(truth: ScenarioResult) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], truth.notes["abort_plan"])


def _expected(truth: ScenarioResult) -> dict[tuple[Any, ...], dict[str, int]]:
    """The writer's abort plan, in txnlog's convention (module docstring): per HANGING transaction."""
    out: dict[tuple[Any, ...], dict[str, int]] = {}
    before: dict[tuple[str, int], int] = {}
    for s in _plan(truth):
        tp = (s["topic"], s["partition"])
        assert s["log_end_after"] == s["log_end_at_as_of"] + s["step"]  # one marker per abort
        if s["lso_after"] == s["log_end_after"]:  # nothing unstable left: the log end, markers included
            lso_after = s["log_end_at_as_of"]
        else:  # blocked by a transaction still open, below the log end at as_of
            assert s["lso_after"] < s["log_end_at_as_of"]
            lso_after = s["lso_after"]
        lso_before = before.get(tp, s["lso_before"])
        out[tp + (s["producer_id"], s["start_offset"])] = {
            "step": s["step"],
            "lso_before": lso_before,
            "lso_after_abort": lso_after,
            "offsets_released": lso_after - lso_before,
        }
        before[tp] = lso_after
    return out


def test_the_scenario_has_several_open_transactions_per_partition(run) -> None:
    """Several open transactions on one partition, the writer's plan with each case (a)-(c) in it."""
    truth, _ = run
    plan = {(s["topic"], s["partition"], s["step"]): s for s in _plan(truth)}
    opened: dict[tuple[str, int], list[tuple[str | None, str | None, int]]] = {}
    for t in sorted(truth.open_transactions, key=lambda t: t.start_offset):
        opened.setdefault((t.topic, t.partition), []).append((t.verdict, t.reason, t.start_offset))
    late = [o for v, _, o in opened[("payments", 1)] if v == "LATE"]
    ongoing = [o for v, _, o in opened[("orders", 5)] if v is None]
    assert [v for v, _, _ in opened[("payments", 1)]] == ["HANGING", "LATE", "HANGING", "HANGING"]
    assert [v for v, _, _ in opened[("orders", 3)]] == ["HANGING"]
    assert [v for v, _, _ in opened[("orders", 5)]] == ["HANGING", "HANGING", None]
    # (a) the first abort on payments-1 stops at the LATE transaction; (b) the later ones release nothing
    assert plan[("payments", 1, 1)]["lso_after"] == late[0]
    assert plan[("payments", 1, 2)]["lso_after"] == plan[("payments", 1, 3)]["lso_after"] == late[0]
    # (c) a single HANGING one releases everything up to the log end (the marker included)
    single = plan[("orders", 3, 1)]
    assert single["lso_after"] == single["log_end_after"] == single["log_end_at_as_of"] + 1
    # a HANGING one, then the next HANGING one, then the ongoing one
    assert plan[("orders", 5, 1)]["lso_after"] == plan[("orders", 5, 2)]["start_offset"]
    assert plan[("orders", 5, 2)]["lso_after"] == ongoing[0]
    # every step's LSO before is the partition's LSO the writer reports at as_of, then the previous step's
    for (topic, partition, step), s in plan.items():
        if step == 1:
            assert s["lso_before"] == truth.partitions[(topic, partition)].last_stable_offset
        else:
            assert s["lso_before"] == plan[(topic, partition, step - 1)]["lso_after"]


def test_abort_recommendations_match_the_writer(run) -> None:
    from txnlog.output.delta import read_table

    truth, out = run
    expected = _expected(truth)
    rows = read_table(str(out), "abort_recommendations").to_pylist()
    got = {tuple(r[k] for k in KEY): r for r in rows}
    assert set(got) == set(expected)
    assert {k: (r["lso_after_abort"], r["offsets_released"]) for k, r in got.items()} == {
        k: (e["lso_after_abort"], e["offsets_released"]) for k, e in expected.items()
    }
    health = {(r["topic"], r["partition"]): r for r in read_table(str(out), "partition_health").to_pylist()}
    for k, e in expected.items():
        if e["step"] == 1:
            assert health[k[:2]]["last_stable_offset"] == e["lso_before"], k


def test_plan_json_matches_the_writer(run) -> None:
    from txnlog.ops.cli import main

    truth, out = run
    expected = _expected(truth)
    buf = io.StringIO()
    assert main(["plan", "--output", str(out), "--format", "json"], out=buf) == 0
    steps = [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]
    got = {(s["Topic"], s["Partition"], s["ProducerId"], s["StartOffset"]): s for s in steps}
    assert len(got) == len(steps) == len(expected)
    assert {k: (s["Step"], s["LsoBefore"], s["LsoAfter"], s["OffsetsReleased"]) for k, s in got.items()} == {
        k: (e["step"], e["lso_before"], e["lso_after_abort"], e["offsets_released"]) for k, e in expected.items()
    }
    # partitions that release the most first; within one, the steps in order
    order = [(s["Topic"], s["Partition"]) for s in steps]
    released: dict[tuple[str, int], int] = {}
    for k, e in expected.items():
        released[k[:2]] = released.get(k[:2], 0) + e["offsets_released"]
    assert list(dict.fromkeys(order)) == sorted(released, key=lambda tp: (-released[tp], tp))
