"""A live cluster with no ``__transaction_state``: the job runs without coordinator state, as offline.

A broker creates ``__transaction_state`` on the first FindCoordinator for a transactional.id
(``AutoTopicCreationManager``); until then the topic does not exist, yet a transaction can pin a partition's
LSO: a producer id from InitProducerId without a transactional.id writing a transactional batch
(tests/live/orphan.py). A fresh broker of this module's own (the session broker's other tests create the topic;
``auto.create.topics.enable=true`` here, so that a Metadata request allowed to create topics would create it)
gets one such hanging transaction on ``fresh-0``. Then:

* the live run (``bootstrap_servers``) goes through with no coordinator state: its findings are
  find-hanging's on the live broker, NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort, the evidence saying
  ``__transaction_state`` was not read, the input note that the cluster has none;
* the broker's own log dir, copied after a clean stop (no ``__transaction_state-<n>/`` in it), gives the
  offline run the same findings;
* and the cluster still has no ``__transaction_state`` afterwards: asking about it did not create it.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from tests.live.broker import SESSION_CONFIGS, KafkaBroker, start_or_skip
from tests.live.capture import _create_topic
from tests.live.orphan import init_producer_id, produce_transactional
from txnlog.live import admin as live

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

TOPIC = "fresh"
CLUSTER = "no-coordinator"
AHEAD_MS = 3_600_000  # find-hanging's and the job's as_of: an hour ahead, past every timeout


def _findings(out: Any) -> dict[tuple[int, int], tuple[str, str]]:
    from tests.e2e.truth import rows

    return {
        (f["partition"], f["start_offset"]): (f["verdict"], f["reason"])
        for f in rows(str(out), "findings", cluster=CLUSTER)
        if f["topic"] == TOPIC
    }


@pytest.fixture(scope="module")
def fresh(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.oracle.test_coordinator import run_txnlog
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs

    work = tmp_path_factory.mktemp("no-coordinator")
    configs = [*SESSION_CONFIGS, "auto.create.topics.enable=true"]
    broker = start_or_skip(KafkaBroker(work / "broker", configs=configs))
    try:
        b = broker.bootstrap
        _create_topic(b, TOPIC, 2)
        orphan = init_producer_id(b)
        start = produce_transactional(b, orphan, TOPIC, 0, [b"o-1", b"o-2"])
        partitions_before = live.check_cluster(b)
        as_of = int(time.time() * 1000) + AHEAD_MS
        admin = live.admin_client(b)
        try:
            found = live.find_hanging_live(admin, [(TOPIC, 0), (TOPIC, 1)], bootstrap=b, now_ms=as_of)
        finally:
            admin.close()
        (lso,) = [o["last_stable_offset"] for o in live.partition_offsets(b, {}, [(TOPIC, 0)])]
        note = plan_inputs(load_config(None, {"bootstrap_servers": b, "progress": False})).note
        run_txnlog(spark, work / "out-live", as_of=as_of, cluster=CLUSTER, bootstrap_servers=b, topics=[TOPIC])
        partitions_after = live.check_cluster(b)
    finally:
        assert broker.stop() == 0, broker.report()
    logs = work / "logs"
    shutil.copytree(broker.log_dir, logs / "broker-1")
    run_txnlog(spark, work / "out-offline", as_of=as_of, cluster=CLUSTER, logs=[str(logs)])
    return {
        "start": start,
        "lso": lso,
        "found": found,
        "note": note,
        "before": partitions_before,
        "after": partitions_after,
        "out": {"live": work / "out-live", "offline": work / "out-offline"},
        "logs": logs,
    }


def test_the_cluster_has_no_coordinator_state_and_a_pinned_lso(fresh) -> None:
    assert fresh["before"] == 0 and fresh["after"] == 0  # asking (and the live run) did not create the topic
    assert not list((fresh["logs"] / "broker-1").glob("__transaction_state-*"))
    assert fresh["lso"] == fresh["start"]  # the hanging transaction pins fresh-0's LSO
    assert {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in fresh["found"]} == {
        (0, fresh["start"]): ("HANGING", "NO_TRANSACTIONAL_ID")
    }
    assert "has no __transaction_state topic" in fresh["note"] and "coordinator state is absent" in fresh["note"]


@pytest.mark.parametrize("run", ["live", "offline"])
def test_findings_without_coordinator_state(fresh, run: str) -> None:
    """Live (no such topic) and offline (no such directory) alike: find-hanging's finding, an abort to verify
    first, the evidence saying ``__transaction_state`` was not read."""
    from tests.e2e.truth import rows

    live_found = {(f["partition"], f["start_offset"]): (f["verdict"], f["reason"]) for f in fresh["found"]}
    assert _findings(fresh["out"][run]) == live_found
    (finding,) = [f for f in rows(str(fresh["out"][run]), "findings", cluster=CLUSTER) if f["topic"] == TOPIC]
    assert "__transaction_state was not read" in finding["evidence"], finding["evidence"]
    (rec,) = [r for r in rows(str(fresh["out"][run]), "abort_recommendations", cluster=CLUSTER) if r["topic"] == TOPIC]
    assert rec["safety"] == "VERIFY_FIRST"
    health = {r["partition"]: r for r in rows(str(fresh["out"][run]), "partition_health", cluster=CLUSTER)}
    assert health[0]["last_stable_offset"] == fresh["lso"]
