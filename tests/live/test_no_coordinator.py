"""A live cluster with no ``__transaction_state``: the job runs without coordinator state, as offline.

A broker creates ``__transaction_state`` on the first FindCoordinator for a transactional.id
(``AutoTopicCreationManager``); until then the topic does not exist, yet a transaction can pin a partition's
LSO: a producer id from InitProducerId without a transactional.id writing a transactional batch
(tests/live/orphan.py). The broker of tests/live/logdir_scenario.py, fresh (its first phase: the session
broker's other tests create the topic; ``auto.create.topics.enable=true``, so that a Metadata request allowed to
create topics would create it), gets one such hanging transaction on ``fresh-0``. Then:

* the live run (``bootstrap_servers``) goes through with no coordinator state: its findings are
  find-hanging's on the live broker, NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort, the evidence saying
  ``__transaction_state`` was not read, the input note that the cluster has none;
* the broker's own log dir, copied while it runs (no ``__transaction_state-<n>/`` in it), gives the offline
  run the same findings;
* and the cluster still has no ``__transaction_state`` afterwards: asking about it did not create it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.live.logdir_scenario import FRESH as TOPIC
from tests.live.logdir_scenario import FRESH_CLUSTER as CLUSTER

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


def _findings(out: Any) -> dict[tuple[int, int], tuple[str, str]]:
    from tests.e2e.truth import rows

    return {
        (f["partition"], f["start_offset"]): (f["verdict"], f["reason"])
        for f in rows(str(out), "findings", cluster=CLUSTER)
        if f["topic"] == TOPIC
    }


@pytest.fixture(scope="module")
def fresh(broker_logdir: dict[str, Any]) -> dict[str, Any]:
    """Phase 1 of the shared broker (tests/live/logdir_scenario.py), before any transactional.id was used."""
    return broker_logdir["fresh"]


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
