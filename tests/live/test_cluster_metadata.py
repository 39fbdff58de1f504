"""The KRaft metadata log of a real broker, read by txnlog (txnlog.kafka.cluster_metadata) and by Kafka's own
decoder (``kafka-dump-log.sh --cluster-metadata-decoder``, ``DumpLogSegments.ClusterMetadataLogMessageParser``),
record for record; and the image replayed from it (txnlog.broker.cluster_image) = what the broker served.

The broker of tests/live/logdir_scenario.py (one ``__transaction_state`` partition, a metadata snapshot every
2 KiB of records) gets, among the other modules' topics: ``md-orders`` with 3 partitions, raised to 5;
``md-gone`` with 2 partitions, then deleted; transactional producers' commits (so ``__transaction_state`` exists).
Its topics as the broker's Metadata answer lists them are taken before a clean stop; then every segment and
snapshot of the clean copy's ``__cluster_metadata-0`` is dumped by Kafka and decoded by txnlog.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.live.logdir_scenario import MD_GONE as GONE
from tests.live.logdir_scenario import MD_ORDERS as ORDERS
from tests.oracle import kafka as oracle
from txnlog.broker.cluster_image import furthest
from txnlog.kafka.cluster_metadata import scan_metadata_log
from txnlog.sources.cluster_metadata import read_metadata_logs
from txnlog.sources.logdirs import discover

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

#: our column -> the field's name in Kafka's JSON (MetadataJsonConverters), for the four types decoded whole
_JSON = {
    "topic": "name",
    "topic_id": "topicId",
    "partition": "partitionId",
    "replicas": "replicas",
    "isr": "isr",
    "removing_replicas": "removingReplicas",
    "adding_replicas": "addingReplicas",
    "leader": "leader",
    "leader_epoch": "leaderEpoch",
    "partition_epoch": "partitionEpoch",
    "leader_recovery_state": "leaderRecoveryState",
    "directories": "directories",
    "eligible_leader_replicas": "eligibleLeaderReplicas",
    "last_known_elr": "lastKnownElr",
}
#: values Kafka's JSON leaves out (a tagged field at its default)
_DEFAULTS = {
    "PARTITION_RECORD": {"leader_recovery_state": 0, "eligible_leader_replicas": None, "last_known_elr": None},
    "PARTITION_CHANGE_RECORD": {
        "leader": -2,
        "leader_recovery_state": -1,
        **dict.fromkeys(
            ("isr", "replicas", "removing_replicas", "adding_replicas", "directories", "eligible_leader_replicas"),
            None,
        ),
        "last_known_elr": None,
    },
}
_LINE = re.compile(r"^\| offset: (\d+) .*? payload: (.*)$")


@pytest.fixture(scope="module")
def metadata(broker_logdir: dict[str, Any]) -> dict[str, Any]:
    """The clean copy's metadata log files, the log dir, and the topics as the broker served them before the stop."""
    log_dir = broker_logdir["metadata"]["log_dir"]
    part = log_dir / "__cluster_metadata-0"
    files = sorted([*part.glob("*.log"), *part.glob("*.checkpoint")])
    return {"files": files, "served": broker_logdir["metadata"]["served"], "log_dir": log_dir}


def _dumped(path: Path) -> list[tuple[int, dict[str, Any]]]:
    out = oracle.dump(path, options=("--cluster-metadata-decoder",))
    return [(int(m.group(1)), json.loads(m.group(2))) for m in map(_LINE.match, out.splitlines()) if m]


def test_every_record_decodes_as_kafka_decodes_it(metadata) -> None:
    compared: dict[str, int] = {}
    for path in metadata["files"]:
        kafka = _dumped(path)
        scan = scan_metadata_log(path.read_bytes(), file=str(path))
        assert scan.quarantine == [], path
        ours = scan.records.to_pylist()
        assert [o for o, _ in kafka] == [r["offset"] for r in ours], path
        for (offset, k), r in zip(kafka, ours):
            assert r["problem"] is None, (path, offset, r["problem"])
            assert (r["record_type"], r["version"]) == (k["type"], k["version"]), (path, offset)
            compared[k["type"]] = compared.get(k["type"], 0) + 1
            if k["type"] not in ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD"):
                continue
            defaults = _DEFAULTS.get(k["type"], {})
            fields = {c: v for c, v in r.items() if c in _JSON and v is not None}
            fields |= {c: r[c] for c in defaults}  # a default present in ours is left out of Kafka's JSON
            expected = {c: k["data"].get(_JSON[c], defaults.get(c)) for c in fields}
            assert fields == expected, (path, offset, k)
            assert set(k["data"]) <= {_JSON[c] for c in fields}, (path, offset, k)
    # the comparison covered each of the four types (and the log was long enough for a snapshot)
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD"} <= set(compared)
    assert any(p.suffix == ".checkpoint" for p in metadata["files"]), metadata["files"]


def test_the_image_is_what_the_broker_served(metadata) -> None:
    """Replayed from its newest snapshot on (as the broker loads it), the copy's metadata gives each topic's
    partition count as the broker's Metadata answer gave it, and the deleted topic."""
    inv = discover([str(metadata["log_dir"])])
    assert inv.cluster_metadata and not [f for f in inv.skipped if "__cluster_metadata" in f]
    found = furthest(read_metadata_logs(inv.cluster_metadata))
    assert found is not None
    image, _broker = found
    assert image.problem == ""
    counts = {t: image.partition_count(t) for t in set(image.partitions.column("topic").to_pylist())}
    assert counts == metadata["served"]
    assert counts["__transaction_state"] == 1 and counts[ORDERS] == 5
    # the deletion is in the image's records unless the newest snapshot already holds its outcome
    snapshot = max((int(p.name[:20]) for p in metadata["files"] if p.suffix == ".checkpoint"), default=0)
    removed = [
        r["offset"]
        for p in metadata["files"]
        for r in scan_metadata_log(p.read_bytes()).records.to_pylist()
        if r["record_type"] == "REMOVE_TOPIC_RECORD"
    ]
    assert len(set(removed)) == 1
    expected = [GONE] if removed[0] >= snapshot else []
    assert [d["topic"] for d in image.deleted.to_pylist()] == expected
    # a clean stop leaves every partition of a single broker leaderless, its ISR still the broker
    assert set(image.partitions.column("leader").to_pylist()) == {-1}
    assert all(isr == [1] for isr in image.partitions.column("isr").to_pylist())
