"""Damage bounded as the bytes bound it: a quarantined region may hold only the offsets between the valid
batches either side of it in its file (txnlog.rules.damage), so it puts in doubt only what it can hide.

The writer's ``damage_around_transactions`` places a batch with a bad CRC before, inside and after a hanging
transaction (one partition each). Before the producer's previous marker it hides nothing of the transaction
(SAFE); between two of its batches, or after its last, it may hold its marker (VERIFY_FIRST). Both builds
of the tables (this process and Spark's tasks) must give the ground truth's safety, and the evidence must
name the region's offsets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import truth as T
from txnlog.brokerlog.scenarios import write_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("damage")
    return write_scenario("damage_around_transactions", work / "logs", seed=3)


def _run(spark, logs: Path, out: Path, as_of_ms: int, *, driver: bool) -> None:
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    config = load_config(
        None,
        {
            "logs": [str(logs)],
            "output": str(out),
            "as_of": str(as_of_ms),
            "cluster": "damage",
            "driver_max_bytes": 64 * 2**20 if driver else 0,
            "progress": False,
        },
    )
    run(config, spark=spark, progress=lambda _m: None)


def test_safety_by_where_the_damage_lies(damaged):
    by_label = {f.transactional_id: f.safety for f in damaged.findings if f.topic == "ledger"}
    assert by_label == {"ledger-before": "SAFE", "ledger-inside": "VERIFY_FIRST", "ledger-after": "VERIFY_FIRST"}


@pytest.mark.parametrize("driver", [True, False], ids=["here", "spark-tasks"])
def test_both_builds_give_the_ground_truth(spark, damaged, tmp_path, driver):
    out = tmp_path / "out"
    _run(spark, damaged.root, out, damaged.as_of_ms, driver=driver)
    recs = T.recommendations_by_key(str(out))
    assert T.actual_findings(str(out), recs) == T.expected_findings(damaged)
    evidence = {f["transactional_id"]: f["evidence"] for f in T.rows(str(out), "findings")}
    assert "quarantined" not in evidence["ledger-before"]
    for txn_id in ("ledger-inside", "ledger-after"):
        assert "a quarantined region after its first batch may hold its marker (offsets " in evidence[txn_id]
    regions = {Path(q["file"]).parent.name: (q["position"], q["length"]) for q in T.rows(str(out), "quarantine")}
    want = {Path(q.file).parent.name: (q.position, q.length) for q in damaged.quarantine}
    assert regions == want
