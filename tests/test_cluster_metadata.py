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


def _segment(path, base: int, values: list[bytes], compression: int = 0) -> None:  # type: ignore[no-untyped-def]
    from txnlog.brokerlog.encode import RecordSpec, encode_record_batch

    specs = [RecordSpec(i, 0, None, v) for i, v in enumerate(values)]
    path.write_bytes(encode_record_batch(base_offset=base, records=specs, base_timestamp=0, compression=compression))


def test_the_newest_snapshot_and_the_log_after_it_are_read_and_a_gap_or_damage_is_distrusted(tmp_path) -> None:
    """A node's snapshot then its segments from the snapshot's end offset (MetadataLoader); a log starting past
    offset 0 with no snapshot, or a damaged batch, leaves the image untrusted, the default standing."""
    from txnlog.broker.cluster_image import coordinator_partitions, furthest
    from txnlog.sources.cluster_metadata import read_metadata_logs
    from txnlog.sources.logdirs import discover

    topic = _topic_record(b"__transaction_state")
    part = bytes([1, 3, 0, 0, 0, 0, 0]) + TOPIC_ID + bytes([2, 0, 0, 0, 1, 2, 0, 0, 0, 1, 1, 1])
    part += bytes(4) + bytes(4) + bytes(4) + b"\x00"  # leader 0, epochs 0, no tags
    meta = tmp_path / "b1" / "__cluster_metadata-0"
    meta.mkdir(parents=True)
    (tmp_path / "b1" / "orders-0").mkdir()
    (tmp_path / "b1" / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    _segment(meta / "00000000000000000000-0000000001.checkpoint", 0, [topic, part])
    # the segment repeats offset 1 (before the snapshot's end, 2: not replayed again) and adds a second partition
    part1 = bytes([1, 3, 0, 0, 0, 0, 1]) + part[7:]
    _segment(meta / "00000000000000000001.log", 1, [part, part1], compression=1)
    (meta / "00000000000000000002-0000000001.checkpoint").write_bytes(
        (meta / "00000000000000000000-0000000001.checkpoint").read_bytes()
    )
    inv = discover([str(tmp_path / "b1")])
    assert [(f.base_offset, f.kind) for f in inv.cluster_metadata] == [(0, "checkpoint"), (1, "log"), (2, "checkpoint")]
    found = furthest(read_metadata_logs(inv.cluster_metadata))
    assert found is not None and found[0].problem == ""
    assert coordinator_partitions(found, 50)[0] == 2  # one from the snapshot at 2, one from offset 2 of the log
    # no snapshot, a log starting past 0: the configured count stands, and says why
    for f in meta.glob("*.checkpoint"):
        f.unlink()
    found = furthest(read_metadata_logs(discover([str(tmp_path / "b1")]).cluster_metadata))
    n, said = coordinator_partitions(found, 50)
    assert n == 50 and "starts at offset 1" in said
    # a damaged batch
    _segment(meta / "00000000000000000000.log", 0, [topic])
    data = bytearray((meta / "00000000000000000000.log").read_bytes())
    data[-1] ^= 0xFF
    (meta / "00000000000000000000.log").write_bytes(bytes(data))
    n, said = coordinator_partitions(furthest(read_metadata_logs(discover([str(tmp_path / "b1")]).cluster_metadata)), 7)
    assert n == 7 and "damaged" in said
