"""Named scenarios: broker log-dir trees with known answers.

Each scenario writes ``<out>/broker-<id>/...`` (one Kafka log dir per broker)
and returns a :class:`~txnlog.brokerlog.ground_truth.ScenarioResult` with the
ground truth: open transactions, expected findings (verdict, reason, safety per
docs/design.md §4), COMMIT/ABORT counts per partition, coordinator state, expected
quarantine rows, and ``as_of_ms`` — the newest broker-written timestamp in the
written input (markers, ``__transaction_state``, LogAppendTime; the last batch goes to a
LogAppendTime topic), which is what the job uses when ``--as-of`` is not given. Healthy
traffic keeps running on other partitions up to ``as_of`` so that the
hanging transactions are old by the input's own clock.

>>> import tempfile
>>> r = write_scenario("coordinator_completed", tempfile.mkdtemp())
>>> [(f.verdict, f.reason) for f in r.findings]
[('HANGING', 'COORDINATOR_COMPLETED')]

Scenario names: see :data:`SCENARIOS`; ``bulk`` takes size parameters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txnlog.brokerlog.blocked_groups import BLOCKED_SCENARIOS
from txnlog.brokerlog.bulk import bulk
from txnlog.brokerlog.cluster import (
    Cluster,
)
from txnlog.brokerlog.cluster import internal_partitions as cluster_internal_partitions
from txnlog.brokerlog.damaged import (
    clean_restart,
    corrupt_and_truncated,
    damage_around_transactions,
    deleted_segment_snapshot,
    replicas_disagree,
)
from txnlog.brokerlog.extreme import DESCRIPTION as EXTREME_VALUES
from txnlog.brokerlog.extreme import PARTITIONS as EXTREME_PARTITIONS
from txnlog.brokerlog.extreme import write_extreme_values  # values at the limits of their types
from txnlog.brokerlog.ground_truth import HANGING, Intent, ScenarioResult
from txnlog.brokerlog.incidents import messy_incident, sample, several_open_transactions
from txnlog.brokerlog.integrity_faults import INTEGRITY_SCENARIOS
from txnlog.brokerlog.situations import (
    situation_coordinator_completed,
    situation_coordinator_stuck,
    situation_markers_pending,
    situation_no_transactional_id,
    situation_ongoing_within_timeout,
    situation_partition_not_in_transaction_finish,
    situation_partition_not_in_transaction_start,
    situation_rolled_over_producer_id,
    situation_timeout_overdue,
    situation_transactional_id_expired,
    situation_tv1_rotation,
    situation_tv2_rollover,
    situation_two_phase_in_doubt,
)
from txnlog.brokerlog.workload import (
    DAY,
    HOUR,
    MINUTE,
    TxnApp,
    empty_control_batch,
    finish_scenario,
    prepare_out,
    run_situation,
    small_cluster,
    standard_workload,
)
from txnlog.kafka import wire
from txnlog.kafka.wire import Compression

__all__ = ["SCENARIOS", "bulk", "scenario_names", "write_scenario"]

# ---------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------


def healthy(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Plain, idempotent and transactional traffic (TV0, then TV1/TV2 after a feature
    upgrade), commits and aborts, every codec, LogAppendTime, legacy entries, an
    offsets-in-transaction app, a crashed producer aborted by the coordinator's
    timeout, a cleaned (empty) control batch, TV2 rollover. No findings."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c = Cluster(out, seed=seed, name="healthy", transaction_version=0)
    w = standard_workload(c, rf=2, tv_apps=(0, 0, 2, 2))
    w.run_until(c.now + 20 * MINUTE)
    c.set_transaction_version_feature(2)
    w.apps.append(TxnApp("inventory-sync", 1, Compression.ZSTD, [("inventory", 0), ("inventory", 1)], abort_rate=0.2))
    w.apps.append(TxnApp("customer-sync", 2, Compression.NONE, [("customers", 0)], abort_rate=0.0))
    w.run_until(c.now + 30 * MINUTE)
    crashed = c.transactional_producer("nightly-export", transaction_version=2).init_transactions()
    crashed.begin_transaction()
    crashed.send("orders", 5)
    crashed.crash()  # aborted by the coordinator after its 60 s timeout, below
    situation_tv2_rollover(c, [("payments", 0), ("orders", 0)])
    situation_tv1_rotation(c, ("payments", 2))
    w.run_until(c.now + 10 * MINUTE)
    sync = c.coordinator.metadata["customer-sync"]
    empty_control_batch(c, ("customers", 0), sync.producer_id, sync.producer_epoch)
    return finish_scenario(
        c,
        w,
        name="healthy",
        started=started,
        intents=[],
        description="busy 3-broker cluster, every producer kind and codec, no late or hanging transaction",
    )


def ongoing_within_timeout(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A transaction opened 4 minutes before as_of (timeout 15 min): OPEN, no finding."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    intents = situation_ongoing_within_timeout(c, [("orders", 1), ("payments", 1)])
    return finish_scenario(
        c,
        w,
        name="ongoing_within_timeout",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        description="an ongoing transaction younger than the max timeout",
    )


def tv2_rollover(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """TV2 markers at epoch+1, producer-id rollover at epoch 32766 (and a TV1 rotation). No findings."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    p = situation_tv2_rollover(c, [("orders", 2), ("payments", 0)], transactions=10)
    seeded = next(r.producer_id for r in c.coordinator.records if r.transactional_id == "fx-rates")
    situation_tv1_rotation(c, ("payments", 2))
    return finish_scenario(
        c,
        w,
        name="tv2_rollover",
        started=started,
        intents=[],
        description="KIP-890 epoch bumps and producer-id rollover",
        notes={"rolled_over_from": seeded, "rolled_over_to": p.producer_id},
    )


def rolled_over_producer_id(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """An open transaction of an id's previous producer id on a partition its new producer id's transaction
    lists: HANGING (the new producer id's markers never end it), the new one's LATE."""
    return run_situation(
        out,
        seed,
        overwrite,
        name="rolled_over_producer_id",
        act=lambda c: situation_rolled_over_producer_id(c, ("payments", 1), ("orders", 2)),
        description="an open transaction of a rolled-over producer id on a partition the new producer id's "
        "transaction lists",
    )


def no_transactional_id(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A hanging transaction whose producer id no transactional.id owns (records compacted away)."""
    return run_situation(
        out,
        seed,
        overwrite,
        name="no_transactional_id",
        act=lambda c: situation_no_transactional_id(c, ("payments", 1)),
        description="an open transaction whose producer id no transactional.id owns",
    )


def transactional_id_expired(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A late batch left open; 7 days later the coordinator expired the id (tombstone)."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    intents = situation_transactional_id_expired(c, ("orders", 3), ("orders", 4))
    c.advance(7 * DAY + 2 * HOUR)  # the coordinator expires the idle ids (tombstones)
    w.run_until(c.now + 30 * MINUTE)
    return finish_scenario(
        c,
        w,
        name="transactional_id_expired",
        started=started,
        intents=intents,
        description="a hanging transaction whose transactional.id has since expired (tombstone)",
    )


def coordinator_completed(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """KAFKA-14053: a batch appended after its own ABORT marker; the coordinator shows the id completed."""
    return run_situation(
        out,
        seed,
        overwrite,
        name="coordinator_completed",
        act=lambda c: situation_coordinator_completed(c, ("payments", 0), ("payments", 2)),
        description="KAFKA-14053: data appended after the producer's ABORT marker; coordinator completed",
    )


def partition_not_in_transaction(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A stale open transaction on a partition the owner's current (Ongoing) transaction does not list."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed)
    p = situation_partition_not_in_transaction_start(c, ("inventory", 0), ("inventory", 1))
    w.run_until(c.now + 30 * MINUTE)
    intents = situation_partition_not_in_transaction_finish(c, p, ("inventory", 1))
    return finish_scenario(
        c,
        w,
        name="partition_not_in_transaction",
        started=started,
        intents=intents,
        tail_ms=4 * MINUTE,
        description="a stale open transaction on a partition the owner's current transaction does not list",
    )


def markers_pending(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """PrepareCommit whose COMMIT marker never reached one of its partitions (LATE, never abort)."""
    return run_situation(
        out,
        seed,
        overwrite,
        name="markers_pending",
        act=lambda c: situation_markers_pending(c, ("orders", 1), ("orders", 5)),
        description="PrepareCommit whose COMMIT marker never reached one partition",
    )


def coordinator_timeout_overdue(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Ongoing far past its 60 s timeout: the coordinator never ran the timeout abort."""
    return run_situation(
        out,
        seed,
        overwrite,
        name="coordinator_timeout_overdue",
        act=lambda c: situation_timeout_overdue(c, ("inventory", 1)),
        description="Ongoing far past its 60 s timeout: the coordinator never aborted it",
    )


def two_phase_in_doubt(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """KIP-939 2PC transaction prepared and kept (keepPreparedTxn): the external manager decides."""

    def act(c: Cluster) -> list[Intent]:
        c.create_topic("settlements", 2)
        return situation_two_phase_in_doubt(c, [("settlements", 0), ("settlements", 1)])

    return run_situation(
        out,
        seed,
        overwrite,
        name="two_phase_in_doubt",
        act=act,
        run_ms=40 * MINUTE,
        description="KIP-939 prepared transaction awaiting the external transaction manager",
    )


def coordinator_stuck(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A coordinator record stuck in PrepareAbort for 2 h; its partitions were not copied."""
    cluster: list[Cluster] = []

    def act(c: Cluster) -> list[Intent]:
        cluster.append(c)
        c.create_topic("ledger-archive", 2)
        return situation_coordinator_stuck(c, [("ledger-archive", 0), ("ledger-archive", 1)])

    return run_situation(
        out,
        seed,
        overwrite,
        name="coordinator_stuck",
        act=act,
        run_ms=2 * HOUR,
        remove=lambda: cluster[0].remove_partition_dirs("ledger-archive"),
        description="a coordinator record stuck in PrepareAbort; its partitions were not copied",
    )


def partial_txn_state(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """Only 30 of the 50 __transaction_state partitions copied, the owner's among the missing."""
    started = time.perf_counter()
    out = prepare_out(out, overwrite)
    c, w = small_cluster(out, seed, txn_state_partitions=wire.DEFAULT_TRANSACTION_STATE_PARTITIONS)
    txn_id = "payment-processor"
    situation_coordinator_completed(c, ("payments", 0), ("payments", 2), txn_id=txn_id)
    w.run_until(c.now + 30 * MINUTE)
    owner_partition = c.coordinator.partition_for(txn_id)
    others = [p for p in range(c.txn_state_partitions) if p != owner_partition]
    missing = [owner_partition] + sorted(c.rng.sample(others, 19))
    intents = [Intent(HANGING, "NO_TRANSACTIONAL_ID", "payments", 0, label="owner's partition not copied")]
    result = finish_scenario(
        c,
        w,
        name="partial_txn_state",
        started=started,
        intents=intents,
        remove=lambda: c.remove_partition_dirs(wire.TRANSACTION_STATE_TOPIC, missing),
        description="20 __transaction_state partitions missing (the owner's too): NO_TRANSACTIONAL_ID is VERIFY_FIRST",
        notes={"missing_txn_state_partitions": missing, "owner_partition": owner_partition},
    )
    assert result.findings[0].safety == "VERIFY_FIRST"
    return result


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


def extreme_values(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """µs and ns CreateTime, CreateTime −1 and 0, producer id and offsets at Long.MAX (txnlog.brokerlog.extreme)."""
    started = time.perf_counter()
    c, w = small_cluster(prepare_out(out, overwrite), seed)
    intents = write_extreme_values(c)
    w.run_until(c.now + 20 * MINUTE)
    return finish_scenario(
        c, w, name="extreme_values", started=started, intents=intents, description=EXTREME_VALUES,
        notes={"partitions": {k: f"{t}-{p}" for k, (t, p) in EXTREME_PARTITIONS.items()}},
    )  # fmt: skip


SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "healthy": healthy,
    "ongoing_within_timeout": ongoing_within_timeout,
    "tv2_rollover": tv2_rollover,
    "no_transactional_id": no_transactional_id,
    "rolled_over_producer_id": rolled_over_producer_id,
    "transactional_id_expired": transactional_id_expired,
    "coordinator_completed": coordinator_completed,
    "partition_not_in_transaction": partition_not_in_transaction,
    "markers_pending": markers_pending,
    "coordinator_timeout_overdue": coordinator_timeout_overdue,
    "two_phase_in_doubt": two_phase_in_doubt,
    "coordinator_stuck": coordinator_stuck,
    "partial_txn_state": partial_txn_state,
    "corrupt_and_truncated": corrupt_and_truncated,
    "damage_around_transactions": damage_around_transactions,
    "clean_restart": clean_restart,
    "replicas_disagree": replicas_disagree,
    "deleted_segment_snapshot": deleted_segment_snapshot,
    "messy_incident": messy_incident,
    "several_open_transactions": several_open_transactions,
    "sample": sample,
    "extreme_values": extreme_values,
    "bulk": bulk,
    **INTEGRITY_SCENARIOS,  # what read_committed consumers are served, damaged (txnlog.brokerlog.integrity_faults)
    **BLOCKED_SCENARIOS,  # consumer groups behind hanging transactions (txnlog.brokerlog.blocked_groups)
}


def scenario_names() -> list[str]:
    return list(SCENARIOS)


def write_scenario(
    name: str, out: str | Path, seed: int = 0, *, internal_partitions: int | None = None, **kwargs: Any
) -> ScenarioResult:
    """Write scenario ``name`` under ``out`` (which must be empty unless ``overwrite=True``); with
    ``internal_partitions``, ``__transaction_state`` and ``__consumer_offsets`` get that many partitions
    (:func:`txnlog.brokerlog.cluster.internal_partitions`) unless the scenario names its own count.

    >>> sorted(SCENARIOS)[:3]
    ['bulk', 'clean_restart', 'coordinator_completed']
    """
    try:
        fn = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
    with cluster_internal_partitions(internal_partitions):
        return fn(out, seed, **kwargs)
