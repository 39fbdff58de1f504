"""txnlog.kafka.cluster_metadata's refusals (as MetadataRecordSerde refuses) and txnlog.broker.cluster_image's
replay rules. Kafka's own decoder judges the decoding of a real broker's log in tests/live/test_cluster_metadata.py."""

from __future__ import annotations

import pyarrow as pa

from txnlog.broker.cluster_image import replay
from txnlog.kafka.cluster_metadata import METADATA_COLUMNS, decode_metadata_value

TOPIC_ID = bytes(range(16))
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"  # Uuid.toString: URL-safe base64, no padding


def _topic_record(name: bytes = b"orders", version: int = 0, frame: int = 1) -> bytes:
    return bytes([frame, 2, version, len(name) + 1]) + name + TOPIC_ID + b"\x00"


def test_a_topic_record_is_read_and_what_kafka_refuses_is_a_problem() -> None:
    row = decode_metadata_value(_topic_record())
    assert row == {
        "api_key": 2,
        "version": 0,
        "record_type": "TOPIC_RECORD",
        "topic": "orders",
        "topic_id": TOPIC_ID_TEXT,
    }
    assert "frame version 0" in str(decode_metadata_value(_topic_record(frame=0))["problem"])
    unknown = decode_metadata_value(_topic_record(version=1))
    assert unknown["record_type"] == "TOPIC_RECORD" and "version 1" in str(unknown["problem"])
    assert "after the TOPIC_RECORD" in str(decode_metadata_value(_topic_record() + b"\x00")["problem"])
    assert "past the value's end" in str(decode_metadata_value(_topic_record()[:-5])["problem"])
    # a type not decoded whole: its type and version only
    assert decode_metadata_value(bytes([1, 20, 0, 0])) == {"api_key": 20, "version": 0, "record_type": "NO_OP_RECORD"}
    assert "unknown metadata record type 99" in str(decode_metadata_value(bytes([1, 99, 0]))["problem"])


def _rows(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist([{"offset": i, **r} for i, r in enumerate(rows)], schema=METADATA_COLUMNS)


def test_replay_merges_changes_and_distrusts_an_unreadable_partition_record() -> None:
    topic = {"record_type": "TOPIC_RECORD", "topic": "orders", "topic_id": "t"}
    part = {"record_type": "PARTITION_RECORD", "topic_id": "t", "partition": 0, "replicas": [1, 2], "isr": [1, 2]}
    part |= {"leader": 1, "leader_epoch": 4, "partition_epoch": 7}
    change = {"record_type": "PARTITION_CHANGE_RECORD", "topic_id": "t", "partition": 0, "isr": [2], "leader": 2}
    same_leader = {"record_type": "PARTITION_CHANGE_RECORD", "topic_id": "t", "partition": 0, "leader": -2}
    image = replay(_rows(topic, part, change, same_leader))
    (p,) = image.partitions.to_pylist()
    # PartitionRegistration.merge: a new leader bumps the leader epoch; every change the partition epoch
    assert (p["leader"], p["isr"], p["leader_epoch"], p["partition_epoch"]) == (2, [2], 5, 9)
    assert image.partition_count("orders") == 1 and image.problem == ""
    bad = replay(_rows(topic, {"record_type": "PARTITION_RECORD", "problem": "PARTITION_RECORD version 9"}))
    assert bad.partition_count("orders") is None and "unreadable" in bad.problem
    gone = replay(_rows(topic, part, {"record_type": "REMOVE_TOPIC_RECORD", "topic_id": "t"}))
    assert gone.partitions.num_rows == 0 and gone.deleted.to_pylist() == [
        {"topic": "orders", "topic_id": "t", "partitions": 1, "offset": 2}
    ]
