"""The simulated coordinator and producers, checked from the bytes they leave behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.brokerlog.kafka_python import Replay, read_log, read_txn_state
from txnlog.brokerlog.cluster import Cluster, ProducerFencedError, internal_partitions
from txnlog.kafka.wire import TWO_PHASE_COMMIT_TIMEOUT_MS

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = range(6)
ABORT, COMMIT = 0, 1


def _history(c: Cluster, txn_id: str) -> list[dict | None]:
    return [v for _, _, key, v in read_txn_state(b.log_dir for b in c.brokers.values()) if key == txn_id]


def _batches(c: Cluster, topic: str, partition: int, broker: int | None = None):
    rp = c.partition(topic, partition)
    log = rp.logs[broker if broker is not None else rp.leader]
    out = []
    for seg in sorted(log.dir.glob("*.log")):
        out += [b for _, b in read_log(seg)]
    return out


def _markers(batches) -> list[tuple[int, int, int, int, int]]:
    """(offset, producer id, epoch, type, coordinator epoch) of every marker."""
    out = []
    for b in batches:
        if b.is_control_batch:
            (r,) = list(b)
            out.append(
                (
                    b.base_offset,
                    b.producer_id,
                    b.producer_epoch,
                    r.type,
                    int.from_bytes(r.value[2:6], "big", signed=True),
                )
            )
    return out


@pytest.fixture()
def cluster(tmp_path: Path) -> Cluster:
    c = Cluster(tmp_path, seed=7, broker_ids=(1, 2, 3))
    c.create_topic("orders", 3, replication_factor=2)
    return c


def test_partition_for_matches_java_string_hashcode(cluster: Cluster) -> None:
    # "hello".hashCode() == 99162322 in Java; 99162322 % 50 == 22.
    assert cluster.coordinator.partition_for("hello") == 22
    p = cluster.transactional_producer("hello").init_transactions()
    cluster.close()
    assert p.producer_id >= 0
    parts = {part for part, _, key, _ in read_txn_state(b.log_dir for b in cluster.brokers.values()) if key == "hello"}
    assert parts == {22}


def test_fewer_internal_partitions_move_only_the_coordinator(tmp_path: Path) -> None:
    """Under ``internal_partitions(4)`` both internal topics have 4 partitions, a transactional.id's records go to
    abs(hashCode) % 4 (99162322 % 4 == 2 for "hello") and a group's offsets likewise; the data partitions are
    placed as with 50, and an explicit count is kept."""

    def build(root: Path) -> Cluster:
        c = Cluster(root, seed=7, broker_ids=(1, 2, 3))
        c.create_topic("orders", 3, replication_factor=2)
        p = c.transactional_producer("hello").init_transactions()
        p.begin_transaction()
        p.send("orders", 1)
        p.commit_transaction()
        c.close()
        return c

    default = build(tmp_path / "default")
    with internal_partitions(4):
        fewer = build(tmp_path / "fewer")
        assert Cluster(tmp_path / "explicit", txn_state_partitions=50).txn_state_partitions == 50
    assert (fewer.txn_state_partitions, fewer.consumer_offsets_partitions) == (4, 4)
    assert fewer.coordinator.partition_for("hello") == 2
    parts = {part for part, _, key, _ in read_txn_state(b.log_dir for b in fewer.brokers.values()) if key == "hello"}
    assert parts == {2}
    assert {p for t, p in fewer.partitions if t == "__transaction_state"} == set(range(4))
    assert [default.partition("orders", p).replicas for p in range(3)] == [
        fewer.partition("orders", p).replicas for p in range(3)
    ]
    assert Cluster(tmp_path / "after", seed=7).txn_state_partitions == 50  # the block's count ends with it


def test_tv0_commit_and_abort_sequence(tmp_path: Path) -> None:
    c = Cluster(tmp_path, seed=1, transaction_version=0)
    c.create_topic("orders", 2)
    p = c.transactional_producer("app", transaction_version=2).init_transactions()  # capped at TV0 by the feature
    assert p.transaction_version == 0
    for commit in (True, False):
        p.begin_transaction()
        p.send("orders", 0)
        p.send("orders", 1)
        p.commit_transaction() if commit else p.abort_transaction()
    c.close()
    history = _history(c, "app")
    assert all(v["version"] == 0 for v in history)
    assert [v["state"] for v in history] == [
        EMPTY,
        ONGOING,
        ONGOING,
        PREPARE_COMMIT,
        COMPLETE_COMMIT,
        ONGOING,
        ONGOING,
        PREPARE_ABORT,
        COMPLETE_ABORT,
    ]
    assert {v["producer_epoch"] for v in history} == {0}
    assert history[0]["partitions"] is None and history[4]["partitions"] == []
    assert sorted(history[3]["partitions"]) == [("orders", 0), ("orders", 1)]
    assert history[1]["start_timestamp"] == history[3]["start_timestamp"] > 0
    # Markers: same epoch as the data (TV0), coordinator epoch = the txn-state partition's leader epoch.
    txn_partition = c.coordinator.partition_for("app")
    txn_batches = _batches(c, "__transaction_state", txn_partition)
    leader_epoch = {b.leader_epoch for b in txn_batches}
    for part in (0, 1):
        marks = _markers(_batches(c, "orders", part))
        assert [(m[1], m[2], m[3]) for m in marks] == [(p.producer_id, 0, COMMIT), (p.producer_id, 0, ABORT)]
        assert {m[4] for m in marks} == leader_epoch


def test_tv2_bumps_epoch_on_every_end(cluster: Cluster) -> None:
    p = cluster.transactional_producer("app2", transaction_version=2).init_transactions()
    epochs = []
    for _ in range(3):
        p.begin_transaction()
        epochs.append(p.producer_epoch)
        p.send("orders", 1)
        p.commit_transaction()
    cluster.close()
    assert epochs == [0, 1, 2]
    batches = _batches(cluster, "orders", 1)
    data = [(b.producer_epoch) for b in batches if not b.is_control_batch]
    assert data == [0, 1, 2]
    assert [m[2] for m in _markers(batches)] == [1, 2, 3]  # markers carry data epoch + 1
    history = _history(cluster, "app2")
    assert all(v["version"] == 1 for v in history)
    prepares = [v for v in history if v["state"] == PREPARE_COMMIT]
    assert [v["producer_epoch"] for v in prepares] == [1, 2, 3]
    assert {v["client_transaction_version"] for v in history if v["state"] != EMPTY} == {2}
    assert {v["previous_producer_id"] for v in history} == {p.producer_id}


def test_tv2_rollover_at_epoch_exhaustion(cluster: Cluster) -> None:
    old_pid, _ = cluster.coordinator.seed_transactional_id(
        "fx", producer_epoch=32763, timeout_ms=60_000, client_transaction_version=2
    )
    p = cluster.transactional_producer("fx", transaction_version=2)
    p.producer_id, p.producer_epoch = cluster.coordinator.init_producer_id("fx", timeout_ms=60_000)
    assert p.producer_epoch == 32764
    for _ in range(4):
        p.begin_transaction()
        p.send("orders", 2)
        p.commit_transaction()
    cluster.close()
    new_pid = p.producer_id
    assert new_pid != old_pid and p.producer_epoch == 1
    marks = _markers(_batches(cluster, "orders", 2))
    assert [(m[1], m[2]) for m in marks] == [(old_pid, 32765), (old_pid, 32766), (old_pid, 32767), (new_pid, 1)]
    history = _history(cluster, "fx")
    rollover_prepare = next(v for v in history if v["state"] == PREPARE_COMMIT and v["next_producer_id"] != -1)
    assert (
        rollover_prepare["producer_id"],
        rollover_prepare["producer_epoch"],
        rollover_prepare["next_producer_id"],
    ) == (old_pid, 32767, new_pid)
    complete = history[history.index(rollover_prepare) + 1]
    assert complete["state"] == COMPLETE_COMMIT
    assert (
        complete["producer_id"],
        complete["producer_epoch"],
        complete["previous_producer_id"],
        complete["next_producer_id"],
    ) == (new_pid, 0, old_pid, -1)


def test_init_fences_an_ongoing_transaction(cluster: Cluster) -> None:
    p = cluster.transactional_producer("svc", transaction_version=1).init_transactions()
    p.begin_transaction()
    p.send("orders", 0)
    q = cluster.transactional_producer("svc", transaction_version=1).init_transactions()
    with pytest.raises(ProducerFencedError):
        p.send("orders", 0)
    cluster.close()
    history = _history(cluster, "svc")
    assert [(v["state"], v["producer_epoch"]) for v in history] == [
        (EMPTY, 0),
        (ONGOING, 0),
        (PREPARE_ABORT, 1),
        (COMPLETE_ABORT, 1),
        (EMPTY, 2),
    ]
    assert q.producer_epoch == 2
    assert [(m[2], m[3]) for m in _markers(_batches(cluster, "orders", 0))] == [(1, ABORT)]


def test_coordinator_aborts_timed_out_and_expires_idle_ids(cluster: Cluster) -> None:
    p = cluster.transactional_producer(
        "crashy", transaction_version=2, transaction_timeout_ms=30_000
    ).init_transactions()
    p.begin_transaction()
    p.send("orders", 1)
    p.crash()
    start = cluster.now
    cluster.advance(60_000)
    marks = list(_markers_now(cluster, "orders", 1))
    assert [(m[1], m[3]) for m in marks] == [(p.producer_id, ABORT)]
    cluster.advance(8 * 24 * 3600 * 1000)
    cluster.close()
    history = _history(cluster, "crashy")
    assert history[-1] is None  # tombstone
    assert history[-2]["state"] == COMPLETE_ABORT
    abort_time = history[-2]["last_update_timestamp"]
    assert start + 30_000 < abort_time <= start + 50_000


def _markers_now(c: Cluster, topic: str, partition: int):
    log = c.partition(topic, partition).leader_log
    log._flush(log.active_segment)
    return _markers(_batches(c, topic, partition))


def test_two_phase_commit_keep_prepared(cluster: Cluster) -> None:
    p = cluster.transactional_producer("xa", two_phase_commit=True).init_transactions()
    p.begin_transaction()
    p.send("orders", 0)
    p.crash()
    cluster.advance(3_600_000)  # no timeout abort for 2PC
    again = cluster.transactional_producer("xa", two_phase_commit=True).init_transactions(keep_prepared_txn=True)
    cluster.close()
    assert again.in_transaction and again.producer_id == p.producer_id
    last = _history(cluster, "xa")[-1]
    assert last["state"] == ONGOING and last["timeout_ms"] == TWO_PHASE_COMMIT_TIMEOUT_MS
    assert last["next_producer_id"] > p.producer_id and last["next_producer_epoch"] == 0
    assert _markers(_batches(cluster, "orders", 0)) == []


def test_replicas_hold_identical_bytes_and_log_dir_files(cluster: Cluster) -> None:
    p = cluster.transactional_producer("r", transaction_version=2).init_transactions()
    for _ in range(5):
        p.begin_transaction()
        p.send("orders", 0)
        p.send_offsets_to_transaction("group-1", {("in", 0): 42})
        p.commit_transaction()
    cluster.close()
    rp = cluster.partition("orders", 0)
    copies = [log.dir / f"{0:020d}.log" for log in rp.logs.values()]
    assert len(copies) == 2 and copies[0].read_bytes() == copies[1].read_bytes()
    offsets_tp = next(tp for tp in p.partitions if tp[0] == "__consumer_offsets")
    replay = Replay()
    for b in _batches(cluster, *offsets_tp):
        replay.feed(b)
    assert replay.markers["COMMIT"] == 5 and not replay.open
    for broker in cluster.brokers.values():
        for name in ("meta.properties", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
            assert (broker.log_dir / name).exists()
        assert (broker.log_dir / "__cluster_metadata-0" / f"{0:020d}.log").exists()
        assert len(list(broker.log_dir.glob("__transaction_state-*"))) == 50 * 3 // 3


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    def build(root: Path) -> dict[str, bytes]:
        c = Cluster(root, seed=11)
        c.create_topic("t", 2, replication_factor=2)
        p = c.transactional_producer("x").init_transactions()
        for _ in range(3):
            p.begin_transaction()
            p.send("t", 0)
            p.send("t", 1)
            p.commit_transaction()
            c.advance(1000)
        c.plain_producer().send("t", 1)
        c.close()
        return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}

    assert build(tmp_path / "a") == build(tmp_path / "b")
