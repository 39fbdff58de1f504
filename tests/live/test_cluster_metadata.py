"""The KRaft metadata log of a real broker, read by txnlog (txnlog.kafka.cluster_metadata) and by Kafka's own
decoder (``kafka-dump-log.sh --cluster-metadata-decoder``, ``DumpLogSegments.ClusterMetadataLogMessageParser``),
record for record; and the image replayed from it (txnlog.broker.cluster_image) = what the broker served.

A broker of this module's own (``transaction.state.log.num.partitions=1``, a snapshot every few KiB of
metadata) gets: ``orders`` with 3 partitions, raised to 5; ``gone`` with 2 partitions, then deleted; a
transactional producer's commit (so ``__transaction_state`` exists). Its topics as the broker's Metadata
answer lists them are taken before a clean stop; then every segment and snapshot of ``__cluster_metadata-0``
is dumped by Kafka and decoded by txnlog.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.live.broker import SESSION_CONFIGS, KafkaBroker, start_or_skip
from tests.live.capture import _create_topic
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
def metadata(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewPartitions

    work = tmp_path_factory.mktemp("cluster-metadata")
    configs = [
        *SESSION_CONFIGS,
        "transaction.state.log.num.partitions=1",
        "metadata.log.max.record.bytes.between.snapshots=2048",
    ]
    broker = start_or_skip(KafkaBroker(work / "broker", configs=configs))
    try:
        b = broker.bootstrap
        _create_topic(b, "orders", 3)
        _create_topic(b, "gone", 2)
        p = confluent_kafka.Producer({"bootstrap.servers": b, "transactional.id": "md-txn", "log_level": 3})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("orders", b"x", partition=0)
        p.commit_transaction(30)
        admin = AdminClient({"bootstrap.servers": b, "log_level": 3})
        for f in admin.delete_topics(["gone"]).values():
            f.result(30)
        for f in admin.create_partitions([NewPartitions("orders", 5)]).values():
            f.result(30)
        served: dict[str, int] = {}
        for _ in range(100):  # until Metadata shows the deletion and the new partitions
            topics = admin.list_topics(timeout=10).topics
            served = {t: len(m.partitions) for t, m in topics.items()}
            if "gone" not in served and served.get("orders") == 5 and "__transaction_state" in served:
                break
            time.sleep(0.1)
    finally:
        assert broker.stop() == 0, broker.report()
    part = broker.log_dir / "__cluster_metadata-0"
    files = sorted([*part.glob("*.log"), *part.glob("*.checkpoint")])
    return {"files": files, "served": served, "log_dir": broker.log_dir}


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
    assert counts["__transaction_state"] == 1 and counts["orders"] == 5
    # the deletion is in the image's records unless the newest snapshot already holds its outcome
    snapshot = max((int(p.name[:20]) for p in metadata["files"] if p.suffix == ".checkpoint"), default=0)
    removed = [
        r["offset"]
        for p in metadata["files"]
        for r in scan_metadata_log(p.read_bytes()).records.to_pylist()
        if r["record_type"] == "REMOVE_TOPIC_RECORD"
    ]
    assert len(set(removed)) == 1
    expected = ["gone"] if removed[0] >= snapshot else []
    assert [d["topic"] for d in image.deleted.to_pylist()] == expected
    # a clean stop leaves every partition of a single broker leaderless, its ISR still the broker
    assert set(image.partitions.column("leader").to_pylist()) == {-1}
    assert all(isr == [1] for isr in image.partitions.column("isr").to_pylist())
