"""The "who is blocked" rule (txnlog.rules.blocked) on hand-made rows, and the ``__consumer_offsets`` reader's
quarantine (txnlog.engine.spark.consumer_offsets_source) on a partition the writer made with a record of an unknown
type: each expectation written out from the case, not from the code's output."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA, read_partition
from txnlog.model.rows import batch_of
from txnlog.rules.blocked import blocked_consumers

T0 = datetime(2026, 11, 1, tzinfo=UTC)
MS = int(T0.timestamp() * 1000)


def _offsets(rows: list[dict]) -> pa.Table:
    full = [{"kind": "offset", "state": "committed", "coordinator_partition": 3, **r} for r in rows]
    for r in full:
        r.setdefault("group_bytes", r["group"].encode())
    return pa.Table.from_pylist(full, schema=SOURCE_SCHEMA)


def _health(rows: list[tuple[str, int, int | None, int | None]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"topic": t, "partition": p, "last_stable_offset": lso, "high_watermark": hw} for t, p, lso, hw in rows],
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("last_stable_offset", pa.int64()),
                ("high_watermark", pa.int64()),
            ]
        ),  # fmt: skip
    )


def _findings(rows: list[tuple[str, int, int, int]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"topic": t, "partition": p, "producer_id": pid, "start_offset": s, "first_timestamp": T0}
            for t, p, pid, s in rows
        ],
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("producer_id", pa.int64()),
                ("start_offset", pa.int64()),
                ("first_timestamp", pa.timestamp("us", tz="UTC")),
            ]
        ),  # fmt: skip
    )


def test_the_committed_offset_against_the_lso_and_the_high_watermark():
    offsets = _offsets(
        [
            {"group": "at-lso", "topic": "t", "partition": 0, "committed_offset": 100, "commit_timestamp": MS + 5_000},
            {"group": "past-lso", "topic": "t", "partition": 0, "committed_offset": 120, "commit_timestamp": MS},
            {"group": "before-lso", "topic": "t", "partition": 0, "committed_offset": 40, "commit_timestamp": MS},
            {"group": "caught-up", "topic": "u", "partition": 0, "committed_offset": 7, "commit_timestamp": MS},
            {"group": "no-hw", "topic": "v", "partition": 0, "committed_offset": 9, "commit_timestamp": MS},
        ]
    )
    # t-0: LSO 100 held by producer 7 below HW 130; u-0: LSO = HW (nothing waits); v-0: HW unknown
    health = _health([("t", 0, 100, 130), ("u", 0, 7, 7), ("v", 0, 9, None)])
    findings = _findings([("t", 0, 7, 100), ("u", 0, 8, 7), ("v", 0, 9, 9)])
    rows = {r["group"]: r for r in blocked_consumers(offsets, health, findings).to_pylist()}
    assert set(rows) == {"at-lso", "past-lso", "before-lso"}
    assert rows["at-lso"]["status"] == "BLOCKED"
    assert rows["at-lso"]["offsets_to_high_watermark"] == 30
    assert rows["at-lso"]["blocked_since"] == datetime(2026, 11, 1, 0, 0, 5, tzinfo=UTC)  # the commit, after the start
    assert (rows["at-lso"]["holding_producer_id"], rows["at-lso"]["holding_start_offset"]) == (7, 100)
    assert rows["past-lso"]["status"] == "NOT_BLOCKED_INFERRED" and rows["past-lso"]["blocked_since"] is None
    assert rows["before-lso"]["status"] == "BEHIND_LSO"


def test_a_pending_transactional_offset_stalls_its_group():
    offsets = _offsets(
        [
            {"group": "g", "topic": "t", "partition": 1, "committed_offset": 10, "commit_timestamp": MS},
            {
                "group": "g",
                "topic": "t",
                "partition": 1,
                "committed_offset": 15,
                "commit_timestamp": MS + 9_000,
                "state": "pending",
                "producer_id": 42,
            },  # fmt: skip
        ]
    )
    # the pending commit's transaction is open in __consumer_offsets-3 from offset 77
    findings = _findings([("__consumer_offsets", 3, 42, 77)])
    (row,) = blocked_consumers(offsets, _health([("t", 1, 20, 20)]), findings).to_pylist()
    assert row["status"] == "UNSTABLE_OFFSET_COMMIT"
    assert row["committed_offset"] == 10  # the stable one: OffsetFetch with requireStable=false answers it
    assert row["pending_transactional_offsets"] == ["t-1"]
    assert (row["holding_producer_id"], row["holding_start_offset"]) == (42, 77)
    assert row["blocked_since"] == datetime(2026, 11, 1, 0, 0, 9, tzinfo=UTC)


def test_an_unknown_record_type_is_quarantined_and_the_rest_replayed(tmp_path):
    from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
    from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value
    from txnlog.sources.logdirs import discover

    w = OffsetsPartitionWriter(tmp_path / "broker-1", 4)
    w.append([(offset_commit_key("g", "orders", 0), offset_commit_value(33, commit_timestamp=w.now))])
    w.append([(b"\x00\x63unknown", b"\x00\x00")])  # record type 99: CoordinatorRecordSerde knows no such key
    w.close()
    files = list(discover([str(tmp_path / "broker-1")]).consumer_offsets_segments)
    assert len(files) == 1
    table = pa.Table.from_batches(read_partition(files, True, None), schema=SOURCE_SCHEMA)
    kinds = table.column("kind").to_pylist()
    assert kinds.count("offset") == 1 and kinds.count("quarantine") == 1
    offset = table.filter(pa.compute.equal(table["kind"], "offset")).to_pylist()[0]
    assert (offset["group"], offset["topic"], offset["committed_offset"], offset["coordinator_partition"]) == (
        "g", "orders", 33, 4
    )  # fmt: skip
    bad = table.filter(pa.compute.equal(table["kind"], "quarantine")).to_pylist()[0]
    assert bad["file"] == files[0].path and "99" in bad["detail"]


def test_no_consumer_offsets_no_rows():
    empty = batch_of(SOURCE_SCHEMA, 0, {})
    table = blocked_consumers(pa.Table.from_batches([empty]), _health([("t", 0, 1, 5)]), _findings([("t", 0, 1, 1)]))
    assert table.num_rows == 0


def _replica(root, broker: str, commits: list[int]) -> None:
    from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
    from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value

    w = OffsetsPartitionWriter(root / broker, 2)
    for offset in commits:
        w.append([(offset_commit_key("g", "orders", 0), offset_commit_value(offset, commit_timestamp=w.now))])
    w.close()


def _committed_of(root) -> tuple[list[int], set[str]]:
    from txnlog.sources.logdirs import discover

    files = list(discover([str(root)]).consumer_offsets_segments)
    table = pa.Table.from_batches(read_partition(files, True, None), schema=SOURCE_SCHEMA)
    return table.column("committed_offset").to_pylist(), set(table.column("broker").to_pylist())


def test_the_most_advanced_replica_is_read(tmp_path):
    # broker-1, first by name, is a follower behind: it lacks the last commit broker-2 (the leader) holds
    _replica(tmp_path, "broker-1", [10, 20])
    _replica(tmp_path, "broker-2", [10, 20, 30])
    assert _committed_of(tmp_path) == ([30], {"broker-2"})


def test_replicas_as_advanced_as_each_other_read_the_first_broker(tmp_path):
    _replica(tmp_path, "broker-2", [10, 20])
    _replica(tmp_path, "broker-1", [10, 21])
    assert _committed_of(tmp_path) == ([21], {"broker-1"})


def test_a_young_transaction_holds_nobody():
    # t-0's LSO 100 is held below HW 130 by an open transaction that is no finding (still young): the group at the
    # LSO waits as Kafka intends, and the pending offset commit of producer 42 (no finding in __consumer_offsets-3)
    # is an exactly-once application's ordinary commit: neither is a row
    offsets = _offsets(
        [
            {"group": "at-lso", "topic": "t", "partition": 0, "committed_offset": 100, "commit_timestamp": MS},
            {"group": "eos", "topic": "t", "partition": 1, "committed_offset": 10, "commit_timestamp": MS},
            {"group": "eos", "topic": "t", "partition": 1, "committed_offset": 15, "commit_timestamp": MS,
             "state": "pending", "producer_id": 42},
        ]
    )  # fmt: skip
    health = _health([("t", 0, 100, 130), ("t", 1, 20, 20)])
    assert blocked_consumers(offsets, health, _findings([])).num_rows == 0
    # the same transactions once they are findings (LATE or HANGING): both groups are rows
    findings = _findings([("t", 0, 7, 100), ("__consumer_offsets", 3, 42, 77)])
    rows = {r["group"]: r["status"] for r in blocked_consumers(offsets, health, findings).to_pylist()}
    assert rows == {"at-lso": "BLOCKED", "eos": "UNSTABLE_OFFSET_COMMIT"}


def test_group_names_of_any_bytes_reach_the_table_as_stored(tmp_path):
    import struct

    from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
    from txnlog.brokerlog.consumer_offsets_encode import offset_commit_value
    from txnlog.kafka import errors
    from txnlog.sources.logdirs import discover

    names = [b"", b"nul\x00inside", b"\x01\x1b[31mred", b"tab\there", b"bad\xff\xfe", b"bad\xfe\xff", "grüße".encode()]
    w = OffsetsPartitionWriter(tmp_path / "broker-1", 5)
    for name in names:  # OffsetCommitKey v1 with the group's bytes as they are
        key = struct.pack(">hh", 1, len(name)) + name + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
        w.append([(key, offset_commit_value(100, commit_timestamp=w.now))])
    w.append([(struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0), b"\x00\x05")])
    w.close()
    files = list(discover([str(tmp_path / "broker-1")]).consumer_offsets_segments)
    offsets = pa.Table.from_batches(read_partition(files, True, None), schema=SOURCE_SCHEMA)
    rows = blocked_consumers(offsets, _health([("t", 0, 100, 130)]), _findings([("t", 0, 7, 100)])).to_pylist()
    assert sorted(r["group_bytes"] for r in rows) == sorted(names)
    assert all(r["status"] == "BLOCKED" for r in rows)
    # the group as Kafka's serde reads it: new String(bytes, UTF_8), malformed input replaced; the two bad names
    # read alike and stay two rows
    shown = {r["group_bytes"]: r["group"] for r in rows}
    assert shown[b"bad\xff\xfe"] == shown[b"bad\xfe\xff"] == "bad\ufffd\ufffd"
    assert shown[b"nul\x00inside"] == "nul\x00inside" and shown[b""] == ""
    # the OffsetCommitValue of an unknown version (5) does not read: a quarantine row, naming the file
    (bad,) = offsets.filter(pa.compute.equal(offsets["kind"], "quarantine")).to_pylist()
    assert bad["file"] == files[0].path and bad["reason"] == errors.BAD_OFFSETS_VALUE


@pytest.mark.parametrize("codec", ["NONE", "GZIP"])
def test_offsets_read_for_some_partitions_are_those_of_the_whole_read(tmp_path, codec):
    # the job reads the groups' offsets of the partitions a step asks for (txnlog.engine.decoded): on a partition
    # of two segments, with commits of three topic partitions, a transactional commit (producer 7) of one of them
    # whose plain commits lie in the earlier segment, a group's members and a record that does not decode; the
    # commits' batches plain or compressed (the walk hashes a compressed record's key in the decompressed bytes)
    from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
    from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value
    from txnlog.brokerlog.partition import PartitionLog
    from txnlog.kafka.consumer_offsets_commits import hashes_of
    from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, Compression
    from txnlog.sources.logdirs import discover

    w = OffsetsPartitionWriter(tmp_path / "broker-1", 6)
    w.log = PartitionLog(tmp_path / "broker-1", CONSUMER_OFFSETS_TOPIC, 6, segment_bytes=600)
    for n in range(6):
        w.append([(offset_commit_key(f"g{g}", t, p), offset_commit_value(10 * n + g, commit_timestamp=w.now))
                  for g in range(2) for t, p in (("orders", 0), ("orders", 1), ("pay", 0))],
                 compression=Compression[codec])  # fmt: skip
    w.append([(b"\x00\x63unknown", b"\x00\x00")])
    w.append([(offset_commit_key("g0", "pay", 0), offset_commit_value(99, commit_timestamp=w.now))], producer=(7, 0),
             compression=Compression[codec])  # fmt: skip
    w.append([(offset_commit_key("g1", "orders", 1), None)])
    w.close()
    files = list(discover([str(tmp_path / "broker-1")]).consumer_offsets_segments)
    assert len(files) > 2

    def read(wanted):
        return pa.Table.from_batches(read_partition(files, True, None, wanted), schema=SOURCE_SCHEMA).to_pylist()

    whole = read(None)
    assert {(r["topic"], r["partition"]) for r in whole if r["kind"] == "offset"} == {
        ("orders", 0), ("orders", 1), ("pay", 0)
    }  # fmt: skip
    assert sum(r["state"] == "pending" for r in whole) == 1
    for asked, kept in (
        ([("orders", 0)], {("orders", 0), ("pay", 0)}),  # pay-0: a producer's batch commits to it
        ([("orders", 1), ("nothing", 3)], {("orders", 1), ("pay", 0)}),
        ([], {("pay", 0)}),
    ):
        some = read(hashes_of(asked))
        assert [r for r in some if r["kind"] == "offset"] == [
            r for r in whole if r["kind"] == "offset" and (r["topic"], r["partition"]) in kept
        ]
        assert [r for r in some if r["kind"] != "offset"] == [r for r in whole if r["kind"] != "offset"]
    assert any(r["kind"] == "quarantine" for r in whole)
