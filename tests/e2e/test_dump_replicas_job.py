"""Two brokers' kafka-dump-log.sh outputs with identical paths, given as a user gives them.

Every broker's log dir is /var/lib/kafka/data, so both brokers print ``Dumping
/var/lib/kafka/data/<topic>-<n>/<file>``. The operator keeps one directory per broker
(``dumps/broker-1/``, ``dumps/broker-2/``, Kafka 4.x Java tool output) and runs
``./spark-submit.sh --dump-log dumps``: every transaction must be on two replicas with the counts of
one copy (never every batch twice). The job script's ``main`` runs in process, on the shared Spark session
(tests/e2e/jobrun.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.kafka.dump_log_render import render_dump

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SCENARIO = "coordinator_completed"  # the KAFKA-14053 seed case: one broker, a hanging transaction


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory) -> dict[str, Any]:
    from txnlog.engine.segments import scan_log_file
    from txnlog.sources.logdirs import discover

    work = tmp_path_factory.mktemp("dump-replicas")
    write_scenario(SCENARIO, work / "logs", 0)
    inv = discover([str(work / "logs")])
    batches = {}
    for broker in ("broker-1", "broker-2"):
        d = work / "dumps" / broker
        d.mkdir(parents=True)
        for f in list(inv.segments) + list(inv.snapshots) + list(inv.txn_state_segments):
            txn = f in inv.txn_state_segments
            shown = "/var/lib/kafka/data/" + "/".join(Path(f.path).parts[-2:])
            with open(d / ("txn-state.txt" if txn else f"{f.topic}-{f.partition}.txt"), "a") as out:
                out.write(
                    render_dump(f.path, "4.x", deep_iteration=not txn, transaction_log_decoder=txn, dumping_path=shown)
                )
    for f in inv.segments:
        if f.path.endswith(".log"):
            batches[(f.topic, f.partition, f.path)] = scan_log_file(f.path, True).batches
    proc = run_in_process(spark, "--dump-log", "dumps", "--cluster", "two-brokers", "--output", "out", cwd=work)
    return {"proc": proc, "out": str(work / "out"), "batches": batches}


def test_two_brokers_same_paths_are_two_replicas(run) -> None:  # type: ignore[no-untyped-def]
    proc = run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    txns = T.rows(run["out"], "transactions")
    assert txns and all(sorted(t["replicas"]) == ["broker-1", "broker-2"] for t in txns)
    for t in txns:
        # the counts of one copy, from the segment bytes themselves
        want = 0
        for (topic, part, _), b in run["batches"].items():
            if (topic, part) != (t["topic"], t["partition"]):
                continue
            sel = (
                (b["producer_id"] == t["producer_id"])
                & ~b["is_control"].astype(bool)
                & (b["base_offset"] >= t["first_offset"])
                & (b["last_offset"] <= t["last_offset"])
            )
            want += int(np.asarray(b["record_count"])[sel].sum())
        assert t["record_count"] == want, t
    assert T.rows(run["out"], "quarantine") == []
    health = T.rows(run["out"], "partition_health")
    assert health and all(os.path.basename(h["topic"]) for h in health)
    assert any(f["verdict"] == "HANGING" for f in T.rows(run["out"], "findings"))
