"""Which replica led and which were in sync, and which topics were deleted, as the copy's KRaft metadata log says
(txnlog.broker.cluster_image.replica_roles / deleted_topics, each log dir's ``node.id`` from its
``meta.properties``), in the findings' evidence and the input note.

The writer's ``replicas_disagree`` scenario (two brokers; the COMMIT marker of a transaction on ``orders-0`` reached
the leader only) is given the metadata log the writer's cluster had: a TopicRecord and a PartitionRecord per
topic-partition with the writer's replicas and leader, the follower that lost the marker out of the ISR, and a
RemoveTopicRecord for ``clicks``, whose partitions the copy still holds. Kafka's own decoder
(``oracle dump --cluster-metadata-decoder``) reads the records as written where the oracle is available.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from txnlog.brokerlog.encode import RecordSpec, encode_record_batch
from txnlog.kafka.cluster_metadata import scan_metadata_log

DELETED = "clicks"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _ints(values: list[int]) -> bytes:  # a compact array of int32
    return _uvarint(len(values) + 1) + b"".join(v.to_bytes(4, "big", signed=True) for v in values)


def _topic_id(topic: str) -> bytes:
    return hashlib.md5(topic.encode()).digest()


def _topic(topic: str) -> bytes:  # TopicRecord v0: frame 1, api key 2, version 0, Name, TopicId, no tags
    return bytes([1, 2, 0]) + _uvarint(len(topic) + 1) + topic.encode() + _topic_id(topic) + b"\x00"


def _partition(topic: str, partition: int, replicas: list[int], isr: list[int], leader: int) -> bytes:
    """PartitionRecord v0: PartitionId, TopicId, Replicas, Isr, RemovingReplicas, AddingReplicas, Leader,
    LeaderEpoch (0), PartitionEpoch (0), no tags."""
    body = partition.to_bytes(4, "big") + _topic_id(topic) + _ints(replicas) + _ints(isr) + _ints([]) + _ints([])
    return bytes([1, 3, 0]) + body + leader.to_bytes(4, "big", signed=True) + bytes(8) + b"\x00"


def _remove(topic: str) -> bytes:  # RemoveTopicRecord v0: TopicId
    return bytes([1, 9, 0]) + _topic_id(topic) + b"\x00"


def _metadata_values(result: Any, out_of_sync: dict[tuple[str, int], int]) -> list[bytes]:
    values: list[bytes] = []
    topics = sorted({t for t, _ in result.partitions if not t.startswith("__")})
    for t in topics:
        values.append(_topic(t))
        for (topic, p), e in sorted(result.partitions.items()):
            if topic == t:
                isr = [b for b in e.brokers if b != out_of_sync.get((t, p))]
                values.append(_partition(t, p, list(e.brokers), isr, e.broker))
    return [*values, _remove(DELETED)]


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    root = tmp_path_factory.mktemp("replica-roles")
    result = write_scenario("replicas_disagree", root / "logs")
    (finding,) = result.findings
    (lost,) = finding.brokers  # the follower whose copy lacks the marker: out of the ISR
    values = _metadata_values(result, {(finding.topic, finding.partition): lost})
    segment = root / "logs" / "broker-1" / "__cluster_metadata-0" / "00000000000000000000.log"
    # after the writer's records (a LeaderChange control record, three opaque FeatureLevelRecords)
    end = max(scan_metadata_log(segment.read_bytes()).records.column("offset").to_pylist()) + 1
    batch = encode_record_batch(
        base_offset=end, records=[RecordSpec(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=0
    )
    segment.write_bytes(segment.read_bytes() + batch)
    config = load_config(None, {"logs": [str(root / "logs")], "output": str(root / "out"), "cluster": "roles"})
    ran = run(config, progress=lambda _m: None)
    return {"root": root, "result": result, "finding": finding, "lost": lost, "segment": segment, "ran": ran}


def _rows(copy: dict[str, Any], table: str) -> list[dict[str, Any]]:
    from tests.e2e.truth import rows

    return rows(str(copy["root"] / "out"), table, cluster="roles")


def test_the_evidence_says_who_led_and_who_was_in_sync(copy) -> None:
    f = copy["finding"]
    leader = copy["result"].partitions[(f.topic, f.partition)].broker
    (row,) = [r for r in _rows(copy, "findings") if (r["topic"], r["partition"]) == (f.topic, f.partition)]
    assert (row["verdict"], row["reason"], row["start_offset"]) == (f.verdict, f.reason, f.start_offset)
    assert "the KRaft metadata log of broker-1 (as of its offset " in row["evidence"], row["evidence"]
    assert f"broker-{leader} (node {leader}) led, leader epoch 0" in row["evidence"], row["evidence"]
    assert f"in sync: broker-{leader}; not in sync: broker-{copy['lost']}" in row["evidence"], row["evidence"]


def test_a_partition_with_one_replica_in_the_copy_gets_no_note(copy) -> None:
    """The roles are said only where the copy holds several replicas: one replica is the only view anyway."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs
    from txnlog.rules.partitions import replica_notes

    inputs = plan_inputs(load_config(None, {"logs": [str(copy["root"] / "logs")], "progress": False}))
    roles, deleted = inputs.said.notes or (None, None)
    assert roles is not None and roles.num_rows > 0
    merged = pa.table(
        {"topic": ["orders", "orders"], "partition": [0, 1], "replicas": [["broker-1", "broker-2"], ["broker-1"]]}
    ).append_column("lead_replica", pa.array(["broker-2", "broker-1"]))
    notes = replica_notes(merged, roles, deleted)
    assert notes[1] is None
    # the metadata's leader (broker-1) is not the replica whose state is shown: the note says so
    assert "the state shown is broker-2's, the most advanced replica in the copy" in str(notes[0])


def test_a_deleted_topic_still_in_the_copy_is_named(copy) -> None:
    from txnlog.model.config import load_config
    from txnlog.pipeline import plan_inputs

    inputs = plan_inputs(load_config(None, {"logs": [str(copy["root"] / "logs")], "progress": False}))
    assert f"topics deleted as the KRaft metadata log of broker-1 says: {DELETED} (" in inputs.note, inputs.note
    assert f"the copy still holds partitions of deleted {DELETED}, which no broker serves" in inputs.note
    _roles, deleted = inputs.said.notes or (None, None)
    assert deleted is not None and deleted.column("topic").to_pylist() == [DELETED]
    held = {(t, p) for (b, t, p) in copy["result"].replica_partitions if t == DELETED}
    assert held  # the copy does hold them


def test_kafka_reads_the_metadata_records_as_written(copy) -> None:
    from tests.oracle import kafka as oracle

    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    out = oracle.dump(Path(copy["segment"]), options=("--cluster-metadata-decoder",))
    # only the records written here: Kafka cannot read the writer's opaque FeatureLevelRecords (random bodies)
    payloads = [json.loads(line.split("payload: ", 1)[1]) for line in out.splitlines() if "payload: {" in line]
    parts = [p["data"] for p in payloads if p["type"] == "PARTITION_RECORD"]
    f = copy["finding"]
    leader = copy["result"].partitions[(f.topic, f.partition)].broker
    tid = base64.urlsafe_b64encode(_topic_id(f.topic)).rstrip(b"=").decode()  # Uuid.toString
    (written,) = [p for p in parts if p["topicId"] == tid and p["partitionId"] == f.partition]
    assert (written["leader"], written["replicas"], written["isr"]) == (leader, [1, 2], [leader])
    assert [p["type"] for p in payloads].count("REMOVE_TOPIC_RECORD") == 1
