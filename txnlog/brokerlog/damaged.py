"""Scenarios of damaged or unusual copies: corrupt and truncated segments, damage next to transactions, a clean
restart, replicas that disagree, a deleted segment's snapshot."""

from __future__ import annotations

import time
from pathlib import Path

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import (
    TopicPartition,
)
from txnlog.brokerlog.ground_truth import HANGING, Intent, ScenarioResult
from txnlog.brokerlog.situations import commit_elsewhere, situation_coordinator_completed, situation_replica_lost_marker
from txnlog.brokerlog.workload import MINUTE, finish_scenario, prepare_out, small_cluster
from txnlog.kafka.wire import Compression


def corrupt_and_truncated(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A corrupt batch (bad CRC) mid-segment with a hanging transaction after it; bad magic
    and bad length in another partition; a truncated tail in a copied active segment."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    c.create_topic("events", 2, segment_bytes=256 * 1024)
    plain = c.plain_producer(compression=Compression.NONE, value_bytes=150)
    for _ in range(40):
        plain.send("events", 0)
        plain.send("events", 1)
        c.advance(200)
    log0 = c.partition("events", 0).leader_log
    log1 = c.partition("events", 1).leader_log
    log0.corrupt_batch(plain.send("events", 0), "crc_mismatch")
    for _ in range(5):
        plain.send("events", 0)
    intents = situation_coordinator_completed(c, ("events", 0), ("events", 1), txn_id="event-relay")
    for _ in range(20):
        plain.send("events", 0)
        plain.send("events", 1)
        c.advance(300)
    log1.corrupt_batch(plain.send("events", 1), "bad_magic")
    plain.send("events", 1)
    log1.corrupt_batch(plain.send("events", 1), "bad_length")
    for _ in range(10):
        plain.send("events", 1)
    w.run_until(c.now + 30 * MINUTE)

    def tail() -> None:
        records, ts = c.records.batch(end_ts=c.now - 5, n_records=4, value_bytes=150, key_prefix="events")
        batch = encode.encode_record_batch(base_offset=0, records=records, base_timestamp=ts)
        log0.append_truncated_tail(batch, len(batch) // 2)

    return finish_scenario(
        c,
        w,
        name="corrupt_and_truncated",
        started=started,
        intents=intents,
        before_close=tail,
        preallocate=(("events", 0),),
        description=(
            "segment damage: crc_mismatch, bad_magic, bad_length, truncated_tail; a hanging txn after the damage"
        ),
    )


def damage_around_transactions(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A damaged batch (bad CRC) before, inside and after a hanging transaction, one partition each (each the
    KAFKA-14053 late batch after an ABORT marker, owner CompleteAbort). Before the producer's ABORT marker
    the damage hides nothing of the transaction after it: SAFE. Between two of its batches it may hold its
    marker (the batches after it would then be a transaction of their own): VERIFY_FIRST. After its last
    batch it may hold its marker: VERIFY_FIRST."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    c.create_topic("ledger", 4, segment_bytes=256 * 1024)
    plain = c.plain_producer(compression=Compression.NONE, value_bytes=150)
    other = ("ledger", 3)

    def filler(tp: TopicPartition, n: int = 5) -> None:
        for _ in range(n):
            plain.send(*tp)
            c.advance(200)

    def damage(tp: TopicPartition) -> None:
        c.partition(*tp).leader_log.corrupt_batch(plain.send(*tp), "crc_mismatch")

    intents: list[Intent] = []
    for tp, txn_id in (
        (("ledger", 0), "ledger-before"),
        (("ledger", 1), "ledger-inside"),
        (("ledger", 2), "ledger-after"),
    ):
        filler(tp)
        if tp[1] == 0:
            damage(tp)
            filler(tp)
        p = c.transactional_producer(txn_id, transaction_version=1, compression=Compression.NONE).init_transactions()
        p.begin_transaction()
        p.send(*other)
        stuck = [p.send_deferred(*tp) for _ in range(2 if tp[1] == 1 else 1)]
        c.advance(c.rng.randint(2_000, 8_000))
        p.abort_transaction()
        c.advance(c.rng.randint(50, 400))
        stuck[0].deliver()
        if tp[1] == 1:
            damage(tp)
            stuck[1].deliver()
        if tp[1] == 2:
            damage(tp)
        filler(tp)
        commit_elsewhere(c, p, other)
        intents.append(Intent(HANGING, "COORDINATOR_COMPLETED", *tp, transactional_id=txn_id, label=txn_id))
    w.run_until(c.now + 30 * MINUTE)
    return finish_scenario(
        c,
        w,
        name="damage_around_transactions",
        started=started,
        intents=intents,
        description="a damaged batch before (SAFE), inside and after (VERIFY_FIRST) a hanging transaction",
    )


def clean_restart(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Two brokers' copies, the same moment on each: a transaction has just committed on ``positions-N`` (its
    COMMIT marker the last entry, the log end one past it) and the checkpointed high watermark sits on the
    marker (the follower has not fetched it yet). Broker 1 was shut down cleanly (``.kafka_cleanshutdown``):
    restarted on its copy it loads the snapshot at the log end, holds nothing back and serves LSO = HW.
    Broker 2's copy is a running broker's: its leader still holds the LSO at the transaction's first offset
    until the marker is below the high watermark (``ProducerStateManager.unreplicatedTxns``)."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed, brokers=(1, 2))
    c.create_topic("positions", 2, assignment=[[1], [2]])
    for partition in (0, 1):
        tp = ("positions", partition)
        p = c.transactional_producer(f"position-keeper-{partition}", transaction_version=2).init_transactions()
        for _ in range(3):
            p.begin_transaction()
            p.send(*tp)
            p.send(*tp)
            p.commit_transaction()
            c.advance(c.rng.randint(500, 3_000))
        log = c.partition(*tp).leader_log
        c.high_watermarks[(partition + 1, *tp)] = log.markers[-1].offset
    c.clean_shutdown_brokers.add(1)
    w.run_until(c.now + 10 * MINUTE)
    return finish_scenario(
        c,
        w,
        name="clean_restart",
        started=started,
        intents=[],
        description="a clean and a running broker's copy, the HW on a COMMIT marker: LSO by restart and live rules",
    )


def replicas_disagree(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Two replicas of orders-0; the COMMIT marker reached the leader only."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed, brokers=(1, 2))
    leader = c.partition("orders", 0).leader
    follower = next(b for b in c.partition("orders", 0).replicas if b != leader)
    intents = situation_replica_lost_marker(c, ("orders", 0), follower, ("orders", 3))
    w.run_until(c.now + 30 * MINUTE)
    return finish_scenario(
        c,
        w,
        name="replicas_disagree",
        started=started,
        intents=intents,
        description=f"two replicas of orders-0; the COMMIT marker is missing on broker {follower}",
    )


def deleted_segment_snapshot(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """The hanging transaction's first batch is in a segment deleted by retention;
    only the producer snapshot at the new log start still knows it."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    c.create_topic("metrics", 1, segment_bytes=64 * 1024)
    c.create_topic("metrics-side", 1)
    metrics = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(30):
        metrics.send("metrics", 0)
        c.advance(500)
    intents = situation_coordinator_completed(c, ("metrics", 0), ("metrics-side", 0), txn_id="metrics-rollup")
    log = c.partition("metrics", 0).leader_log
    first_open = log.open_txns[next(iter(log.open_txns))].first_offset
    while len(log.segments) < 5:
        metrics.send("metrics", 0)
        c.advance(200)
    cut = next(s.base_offset for s in log.segments if s.base_offset > first_open)
    deleted = log.delete_segments_before(cut)
    w.run_until(c.now + 30 * MINUTE)
    for _ in range(20):
        metrics.send("metrics", 0)
        c.advance(100)
    result = finish_scenario(
        c,
        w,
        name="deleted_segment_snapshot",
        started=started,
        intents=intents,
        description="retention deleted the segment holding a hanging transaction's first batch",
        notes={"deleted_segments": deleted, "log_start_offset": log.log_start_offset},
    )
    assert [t.source for t in result.open_transactions if t.topic == "metrics"] == ["snapshot"]
    return result
