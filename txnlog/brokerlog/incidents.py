"""The larger scenarios: several open transactions with their abort plan's truth, a messy incident on three
brokers, and the embedded sample the README's first command runs on."""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import (
    Cluster,
    TopicPartition,
)
from txnlog.brokerlog.ground_truth import HANGING, Intent, ScenarioResult
from txnlog.brokerlog.partition import PartitionLog
from txnlog.brokerlog.situations import (
    failover_mid_late_batch,
    retention_past_open_transaction,
    roll_to,
    situation_coordinator_completed,
    situation_coordinator_stuck,
    situation_damaged_marker,
    situation_lagging_follower,
    situation_markers_pending,
    situation_no_transactional_id,
    situation_ongoing_within_timeout,
    situation_partition_not_in_transaction_finish,
    situation_partition_not_in_transaction_start,
    situation_replica_lost_marker,
    situation_timeout_overdue,
    situation_transactional_id_expired,
    situation_tv2_rollover,
    situation_two_phase_in_doubt,
)
from txnlog.brokerlog.workload import DAY, HOUR, MINUTE, finish_scenario, prepare_out, small_cluster, standard_workload
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression


def _abort_plan_truth(twins: dict[TopicPartition, PartitionLog], result: ScenarioResult) -> list[dict[str, int | str]]:
    """What aborting every HANGING transaction of a partition, in start-offset order, does to its LSO.

    ``twins`` are copies of the leaders' logs taken at ``as_of`` (before close), writing to a scratch
    directory: each abort is the ABORT marker WriteTxnMarkers makes the leader append
    (``append_end_txn_marker``), and ``last_stable_offset`` is read after each one. The marker is one more
    offset at the log end, so with no unstable transaction left the LSO is the log end *including* the
    markers appended so far (``log_end_after``; ``log_end_at_as_of`` is the log end without them)."""
    plan: list[dict[str, int | str]] = []
    for tp, twin in sorted(twins.items()):
        hanging = sorted(
            (f for f in result.findings if f.verdict == HANGING and (f.topic, f.partition) == tp),
            key=lambda f: (f.start_offset or 0, f.producer_id),
        )
        log_end_at_as_of = twin.log_end_offset
        for step, f in enumerate(hanging, start=1):
            txn = twin.open_txns[f.producer_id]
            assert txn.first_offset == f.start_offset, (tp, f)
            lso_before = twin.last_stable_offset
            marker = twin.append_end_txn_marker(
                producer_id=f.producer_id,
                producer_epoch=twin.producers[f.producer_id].producer_epoch,
                control_type=wire.ControlType.ABORT,
                coordinator_epoch=twin.producers[f.producer_id].coordinator_epoch,
                timestamp=result.as_of_ms,
            )
            plan.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "step": step,
                    "producer_id": f.producer_id,
                    "start_offset": txn.first_offset,
                    "marker_offset": marker.base_offset,
                    "lso_before": lso_before,
                    "lso_after": twin.last_stable_offset,
                    "log_end_at_as_of": log_end_at_as_of,
                    "log_end_after": twin.log_end_offset,
                }
            )
    return plan


def several_open_transactions(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Several open transactions on one partition, HANGING ones around LATE and ongoing ones.

    * ``payments-1`` (committed traffic from a transactional app): a transaction whose id later expired
      (TRANSACTIONAL_ID_EXPIRED), then a PrepareCommit whose marker never arrived (LATE, MARKERS_PENDING),
      then a NO_TRANSACTIONAL_ID one and a KAFKA-14053 late batch (COORDINATOR_COMPLETED): aborting the first
      moves the LSO only to the LATE transaction; the two after it release nothing while it stays open;
    * ``orders-3``: one COORDINATOR_COMPLETED transaction, nothing else open: its abort releases everything;
    * ``orders-5``: two HANGING ones, then an ongoing transaction within its timeout (opened 4 minutes
      before ``as_of``): the first abort moves the LSO to the second, the second to the ongoing one.

    ``notes["abort_plan"]``: the LSO before and after each abort of a HANGING transaction, in start-offset order
    per partition, from the writer's own ABORT markers on copies of the leaders' logs
    (:func:`_abort_plan_truth`)."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    blocked, single, chained = ("payments", 1), ("orders", 3), ("orders", 5)
    intents = situation_transactional_id_expired(c, blocked, ("payments", 2))
    c.advance(7 * DAY + 2 * HOUR)  # the coordinator expires the idle ids (tombstones)
    w.run_until(c.now + 10 * MINUTE)
    intents += situation_markers_pending(c, ("orders", 1), blocked)
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_no_transactional_id(c, blocked)
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, blocked, ("payments", 2))
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, single, ("orders", 4), txn_id="refund-writer")
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_no_transactional_id(c, chained, txn_id="audit-loader")
    w.run_until(c.now + 3 * MINUTE)
    intents += situation_coordinator_completed(c, chained, ("orders", 2), txn_id="metrics-rollup")
    w.run_until(c.now + 30 * MINUTE)
    intents += situation_ongoing_within_timeout(c, [chained])
    scratch = tempfile.TemporaryDirectory(prefix="txnlog-abort-plan-")
    twins: dict[TopicPartition, PartitionLog] = {}

    def copy_leaders() -> None:  # at as_of, before close: the twins write to the scratch directory only
        for tp in (blocked, single, chained):
            twin = copy.deepcopy(c.partition(*tp).leader_log)
            twin.log_dir = Path(scratch.name)
            twin.dir = twin.log_dir / twin.dir.name
            twin.dir.mkdir()
            twins[tp] = twin

    result = finish_scenario(
        c,
        w,
        name="several_open_transactions",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        before_close=copy_leaders,
        description="several HANGING transactions on one partition around a LATE and an ongoing one",
    )
    with scratch:
        result.notes["abort_plan"] = _abort_plan_truth(twins, result)
    return result


def messy_incident(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Logs copied during an incident, each broker rule in one run:

    * a follower copy of ``orders-1`` that lags behind a COMMIT marker (nothing open);
    * a follower of ``orders-2`` that missed a COMMIT marker and holds later data (diverged:
      HANGING, VERIFY_FIRST);
    * broker 1 restarted after retention on ``metrics-0``: the snapshots at or below the log start
      are gone, later ones hold the hanging transaction's older ``currentTxnFirstOffset``;
    * DeleteRecords on ``audit-trail-0`` moved the log start inside a segment past an open transaction's
      first batch (LSO clamped to the log start);
    * the coordinator failed over to a broker whose clock is an hour behind: later records carry
      earlier timestamps (the latest state is the last record by offset, CompleteAbort);
    * a damaged COMMIT marker on ``fees-0`` (VERIFY_FIRST).
    """
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed, brokers=(1, 2, 3))
    c.create_topic("metrics", 1, replication_factor=1, segment_bytes=64 * 1024)
    c.create_topic("audit-trail", 1, replication_factor=1, segment_bytes=64 * 1024)
    c.create_topic("fees", 3, replication_factor=1)
    intents: list[Intent] = []
    # lagging and diverged followers
    rp1 = c.partition("orders", 1)
    lagging = next(b for b in rp1.replicas if b != rp1.leader)
    intents += situation_lagging_follower(c, ("orders", 1), lagging, ("orders", 3))
    rp2 = c.partition("orders", 2)
    diverged = next(b for b in rp2.replicas if b != rp2.leader)
    intents += situation_replica_lost_marker(c, ("orders", 2), diverged, ("orders", 3), txn_id="order-router")
    w.run_until(c.now + 2 * MINUTE)
    # retention, then a restart of metrics-0's broker
    metrics = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(30):
        metrics.send("metrics", 0)
        c.advance(300)
    intents += situation_coordinator_completed(c, ("metrics", 0), ("fees", 1), txn_id="metrics-rollup")
    mlog = retention_past_open_transaction(c, metrics, ("metrics", 0))
    roll_to(c, metrics, ("metrics", 0), 6)  # rolls write snapshots above the new log start
    deleted_snapshots = mlog.restart()
    # DeleteRecords past an open transaction's first batch
    audit = c.idempotent_producer(compression=Compression.NONE, value_bytes=200, records_per_batch=(5, 10))
    for _ in range(10):
        audit.send("audit-trail", 0)
        c.advance(200)
    intents += situation_no_transactional_id(c, ("audit-trail", 0), txn_id="audit-loader")
    alog = c.partition("audit-trail", 0).leader_log
    open_at = min(t.first_offset for t in alog.open_txns.values())
    for _ in range(10):
        audit.send("audit-trail", 0)
        c.advance(200)
    alog.delete_records(open_at + 3)
    intents.append(failover_mid_late_batch(c))
    intents += situation_damaged_marker(c, ("fees", 2), ("fees", 1))
    w.run_until(c.now + 30 * MINUTE)
    return finish_scenario(
        c,
        w,
        name="messy_incident",
        started=started,
        intents=intents,
        description=(
            "lagging and diverged replicas, a restarted broker, DeleteRecords, a coordinator failover, a damaged marker"
        ),
        notes={
            "lagging_follower": lagging,
            "diverged_follower": diverged,
            "deleted_snapshots": deleted_snapshots,
            "audit_log_start": alog.log_start_offset,
            "metrics_log_start": mlog.log_start_offset,
        },
    )


def sample(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """The embedded default: a 3-broker cluster over 8 days with healthy traffic and every verdict."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c = Cluster(out, seed=seed, name="sample", transaction_version=2)
    w = standard_workload(c, rf=2, tv_apps=(0, 1, 2, 2))
    w.mean_gap_ms = 7_000  # a few MB in all
    c.create_topic("invoices", 2, replication_factor=2)
    c.create_topic("ledger", 2, replication_factor=2)
    c.create_topic("ledger-archive", 1, replication_factor=1)
    c.create_topic("settlements", 2, replication_factor=2)
    c.create_topic("metrics", 1, replication_factor=1, segment_bytes=64 * 1024)
    intents: list[Intent] = []
    # Day 0: a normal morning, then an invoicing app leaves a late batch behind and is retired.
    w.run_until(c.now + 40 * MINUTE)
    intents += situation_transactional_id_expired(c, ("invoices", 1), ("invoices", 0))
    w.run_until(c.now + 20 * MINUTE)
    # A quiet week; the coordinator expires idle transactional.ids on the way.
    end = c.now + 7 * DAY + 3 * HOUR
    c.advance_to(end - 2 * HOUR)
    w.finish()
    intents += situation_coordinator_stuck(c, [("ledger-archive", 0)])
    metrics = c.idempotent_producer(value_bytes=200, records_per_batch=(5, 10))
    for _ in range(20):
        metrics.send("metrics", 0)
        c.advance(300)
    intents += situation_coordinator_completed(c, ("metrics", 0), ("ledger", 0), txn_id="metrics-rollup")
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_coordinator_completed(c, ("payments", 1), ("payments", 2))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_no_transactional_id(c, ("orders", 5))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_markers_pending(c, ("ledger", 0), ("ledger", 1))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_timeout_overdue(c, ("inventory", 1))
    w.run_until(c.now + 5 * MINUTE)
    intents += situation_two_phase_in_doubt(c, [("settlements", 0), ("settlements", 1)])
    leader = c.partition("orders", 2).leader
    follower = next(b for b in c.partition("orders", 2).replicas if b != leader)
    intents += situation_replica_lost_marker(c, ("orders", 2), follower, ("orders", 3))
    stock = situation_partition_not_in_transaction_start(c, ("inventory", 0), ("settlements", 1))
    # Retention on metrics: the segment holding metrics-rollup's late batch goes away.
    retention_past_open_transaction(c, metrics, ("metrics", 0))
    situation_tv2_rollover(c, [("payments", 0), ("orders", 0)], transactions=6)
    w.run_until(end - 20 * MINUTE)
    clog = c.partition("clicks", 3).leader_log
    info = c.plain_producer().send("clicks", 3)
    clog.corrupt_batch(info, "crc_mismatch")
    c.plain_producer().send("clicks", 3)  # readable data after the damage: the log end stays knowable
    w.run_until(end - 5 * MINUTE)
    intents += situation_partition_not_in_transaction_finish(c, stock, ("settlements", 1))
    intents += situation_ongoing_within_timeout(c, [("orders", 4)])
    w.run_until(end - 2 * MINUTE)

    def tail() -> None:
        records, ts = c.records.batch(end_ts=c.now - 3, n_records=3, value_bytes=150, key_prefix="clicks")
        batch = encode.encode_record_batch(
            base_offset=0, records=records, base_timestamp=ts, compression=Compression.SNAPPY
        )
        c.partition("clicks", 1).leader_log.append_truncated_tail(batch, len(batch) - 7)

    return finish_scenario(
        c,
        w,
        name="sample",
        started=started,
        intents=intents,
        before_close=tail,
        remove=lambda: c.remove_partition_dirs("ledger-archive"),
        description="embedded sample: 3 brokers, 8 days, healthy traffic and every verdict class",
    )
