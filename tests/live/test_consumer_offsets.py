"""A real broker's ``__consumer_offsets``: decoded as Kafka's ``--offsets-decoder`` decodes it, record for record,
and replayed to the offsets the broker itself answers (ListConsumerGroupOffsets).

One broker of this module's own (its group coordinator compresses its batches: ``offsets.topic.compression.codec``
gzip), with groups that exercise each rule of ``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker``:
plain commits (a simple group and a subscribed classic group, whose GroupMetadata names its members), a deleted
group (tombstones), transactional offset commits committed (the consume-transform-produce step of
tests/live/test_broker_logdir.py), aborted and left open, and a plain commit written between a transactional
commit of the same partition and its COMMIT marker (the newer record offset wins).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.live.broker import SESSION_CONFIGS, KafkaBroker, start_or_skip
from tests.live.capture import _create_topic
from tests.live.logdir_scenario import GROUP, TOPIC, _await_markers, _offsets_in_a_transaction
from tests.oracle import kafka as oracle
from tests.oracle.test_consumer_offsets import compare
from txnlog.kafka.consumer_offsets import decode_records
from txnlog.kafka.consumer_offsets_scan import scan_consumer_offsets_file
from txnlog.kafka.record_batch import scan_segment_file
from txnlog.kafka.wire import Compression
from txnlog.rules.consumer_offsets import replay_offsets

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

#: every group the scenario commits for, with the partitions it commits
GROUPS = {GROUP: [0], "simple-g": [0, 1], "classic-g": [0, 1, 2], "txn-g": [0, 1, 2], "mixed-g": [0], "gone-g": [0]}


def _consumer(bootstrap: str, group: str, **conf: Any):  # type: ignore[no-untyped-def]
    import confluent_kafka

    return confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 3, **conf}
    )


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """A plain OffsetCommit of a simple (assign-only) group: generation -1, no GroupMetadata."""
    import confluent_kafka

    c = _consumer(bootstrap, group)
    c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def _txn_producer(bootstrap: str, tid: str):  # type: ignore[no-untyped-def]
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    return p


def _send_offsets(bootstrap: str, p, group: str, offsets: dict[int, int]) -> None:  # type: ignore[no-untyped-def]
    import confluent_kafka

    c = _consumer(bootstrap, group)
    tps = [confluent_kafka.TopicPartition(TOPIC, part, o) for part, o in offsets.items()]
    p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), 30)
    c.close()


def _classic_group(bootstrap: str) -> None:
    """A subscribed member: JoinGroup/SyncGroup write GroupMetadata (protocol type "consumer"), then its commit."""
    import confluent_kafka

    c = _consumer(bootstrap, "classic-g", **{"client.id": "classic-client", "session.timeout.ms": 10_000})
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment within 60 s"
        c.poll(0.2)
    c.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, 20 + p) for p in range(3)], asynchronous=False)
    c.close()


def _scenario(b: str) -> list:  # type: ignore[type-arg]
    """Runs every case; returns the producers left open (kept alive until the broker stops)."""
    import confluent_kafka.admin

    _create_topic(b, TOPIC, 3)
    _offsets_in_a_transaction(b)  # GROUP: orders-0 -> 3, transactional, committed
    _commit(b, "simple-g", {0: 5, 1: 6})
    _commit(b, "simple-g", {0: 7})
    _classic_group(b)
    _commit(b, "gone-g", {0: 1})
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": b, "log_level": 3})
    for fut in admin.delete_consumer_groups(["gone-g"]).values():
        fut.result(30)
    _commit(b, "txn-g", {0: 10, 1: 10, 2: 10})
    committed, aborted, left_open = (_txn_producer(b, f"co-{n}") for n in ("commit", "abort", "open"))
    _send_offsets(b, committed, "txn-g", {0: 11})
    committed.commit_transaction(30)
    _send_offsets(b, aborted, "txn-g", {1: 12})
    aborted.abort_transaction(30)
    _send_offsets(b, left_open, "txn-g", {2: 13})
    mixed = _txn_producer(b, "co-mixed")
    _send_offsets(b, mixed, "mixed-g", {0: 20})
    _commit(b, "mixed-g", {0: 15})  # written after the transactional commit, before its marker
    mixed.commit_transaction(30)
    _await_markers(b)
    return [left_open]


def _listed(bootstrap: str, group: str, require_stable: bool) -> dict[int, Any]:
    """ListConsumerGroupOffsets (OffsetFetch) of ``group``'s partitions of TOPIC: partition -> offset (None: no
    committed offset), or the partition's error."""
    import confluent_kafka
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(TOPIC, p) for p in GROUPS[group]]
    )
    try:
        result = admin.list_consumer_group_offsets([request], require_stable=require_stable)[group].result(30)
    except confluent_kafka.KafkaException as e:
        return {p: e.args[0].name() for p in GROUPS[group]}
    return {
        tp.partition: (tp.error.name() if tp.error else (tp.offset if tp.offset >= 0 else None))
        for tp in result.topic_partitions
    }


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("consumer-offsets")
    configs = [*SESSION_CONFIGS, "offsets.topic.compression.codec=1"]
    broker = start_or_skip(KafkaBroker(work / "broker", configs=configs))
    try:
        open_producers = _scenario(broker.bootstrap)
        listed = {g: _listed(broker.bootstrap, g, require_stable=False) for g in GROUPS}
        stable = {g: _listed(broker.bootstrap, g, require_stable=True) for g in GROUPS}
    finally:
        assert broker.stop() == 0, broker.report()
    del open_producers
    segments = sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log"))
    return {"segments": segments, "listed": listed, "stable": stable}


def test_real_brokers_records_equal_kafkas_decoder(copied: dict[str, Any]) -> None:
    for segment in copied["segments"]:
        diffs, seen = compare(oracle, segment)
        assert diffs == [], segment
        assert seen["quarantine"] == []
    # what the broker wrote and we compared: plain and transactional commits, classic GroupMetadata with its
    # member, tombstones of the deleted group, gzip batches
    rows = [r for s in copied["segments"] for r in compare(oracle, s)[1]["rows"].to_pylist()]
    assert {r["record_type"] for r in rows} >= {1, 2}
    assert any(r["is_tombstone"] and r["group"] == "gone-g" for r in rows)
    assert any(r["is_transactional"] for r in rows)
    classic = [r for r in rows if r["record_type"] == 2 and r["group"] == "classic-g" and r["members"]]
    assert classic and classic[0]["protocol_type"] == "consumer"
    assert classic[0]["members"][0]["client_id"] == "classic-client"
    codecs = {int(c) for s in copied["segments"] for c in scan_segment_file(s).batches["compression"]}
    assert Compression.GZIP in codecs  # the coordinator's batches, decompressed


def test_replay_equals_the_brokers_committed_offsets(copied: dict[str, Any]) -> None:
    tables = []
    for segment in copied["segments"]:
        records, markers, damage = scan_consumer_offsets_file(segment)
        decoded, quarantine = decode_records(records)
        assert damage == quarantine == []
        tables.append(replay_offsets(decoded, markers))
    rows = [r for t in tables for r in t.to_pylist() if r["topic"] == TOPIC]
    committed = {g: dict.fromkeys(parts) for g, parts in GROUPS.items()}
    pending: dict[str, set[int]] = {}
    for r in rows:
        if r["state"] == "committed":
            committed[r["group"]][r["partition"]] = r["committed_offset"]
        else:
            pending.setdefault(r["group"], set()).add(r["partition"])
    assert committed == copied["listed"]  # ListConsumerGroupOffsets, requireStable=false
    # the cases, as the broker answered them
    assert committed["mixed-g"] == {0: 15}  # the plain commit's record is newer than the transactional one's
    assert committed["txn-g"] == {0: 11, 1: 10, 2: 10}  # committed, aborted, still open
    assert committed["gone-g"] == {0: None}
    # the open transaction's pending offset: requireStable=true answers UNSTABLE_OFFSET_COMMIT for its group
    assert pending == {"txn-g": {2}}
    assert "UNSTABLE_OFFSET_COMMIT" in set(copied["stable"]["txn-g"].values())
    assert all("UNSTABLE_OFFSET_COMMIT" not in v.values() for g, v in copied["stable"].items() if g != "txn-g")
