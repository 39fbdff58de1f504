"""The output tables, one function each, projected by the contract in ``txnlog.tables``.

Each function derives the columns whose names or values differ from its inputs (timestamps from
epoch ms, renamed owner fields, verdict commands) and lets :func:`project` take the contract's
columns, in the contract's order, from what it has: no column list here repeats the contract. The
run key (``cluster``, ``as_of``) is set by the Delta writer (``txnlog.delta``). Inputs are the
intermediates of :class:`Intermediates`, computed once per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from txnlog import classify
from txnlog import tables as contract
from txnlog.spark import transforms as T
from txnlog.spark.arrow_tables import CANDIDATE_COLUMNS

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    import pyarrow as pa
    from pyspark.sql import SparkSession

    from txnlog.logdirs import Checkpoint
    from txnlog.spark.staged import StagedTable


def project(df: DataFrame, table: str) -> DataFrame:
    """The contract's columns of ``table`` (but the run key), in its order, from ``df``."""
    schema = contract.TABLES[table]
    return df.select(*[f.name for f in schema if f.name not in ("cluster", "as_of")])


@dataclass(frozen=True)
class Intermediates:
    """What several tables read, computed (and cached) once per run."""

    txns: DataFrame  # the transactions the verdicts need, with LSO lag and owners
    health: DataFrame  # partition health, ms
    input_partitions: DataFrame  # the data partitions read ("topic-n")
    history: DataFrame  # __transaction_state records the verdicts need (txnlog.spark.coordinator)
    state: DataFrame  # coordinator state per transactional.id
    owner_ids: DataFrame  # producer_id → transactional.id (current owner, else the history's)
    producers: DataFrame  # each partition's leader's producer state, before expiry (txnlog.spark.producers)


def intermediates(
    spark: SparkSession,
    summary: DataFrame,
    records: DataFrame,
    *,
    as_of_ms: int,
    checkpoints: Sequence[Checkpoint],
    fragments: bool,
    records_reduced: bool,
    scratch: str,
    cached: Callable[[DataFrame], DataFrame],
    fragment_partitions: Collection[tuple[str, int]] | None = None,
) -> Intermediates:
    from txnlog.spark.producers import leader_producer_state
    from txnlog.spark.transactions import checkpoints_of

    checkpoint_rows = None
    if checkpoints:  # a few rows per partition, read on the driver by discover()
        checkpoint_rows = spark.createDataFrame(
            [
                (
                    c.broker,
                    c.topic,
                    c.partition,
                    c.high_watermark,
                    c.log_start_offset,
                    c.recovery_point,
                    c.clean_shutdown,
                )
                for c in checkpoints
            ],
            schema=T.CHECKPOINT_SCHEMA,
        )
    stats = cached(T.with_checkpoints(T.replica_stats(summary), checkpoint_rows))
    stage = f"{scratch}/transactions"
    txns = cached(
        T.partition_transactions(
            summary,
            checkpoints_of(checkpoints),
            fragments=fragments,
            stage=stage,
            fragment_partitions=fragment_partitions,
        )
    )
    pstats = cached(T.partition_stats(stats))
    txns, health = T.with_lso(txns, pstats, as_of_ms)
    if not records_reduced:
        records = T.reduced_records(records, f"{scratch}/coordinator_history")
    history = cached(T.coordinator_history(records))
    state = cached(T.coordinator_state(history))
    owners = T.producer_owners(state)
    seen_under = T.history_owners(history)
    txns = txns.join(seen_under, txns.producer_id == seen_under.pid, "left").drop("pid")
    txns = txns.join(owners, txns.producer_id == owners.pid, "left").drop("pid")
    owner_ids = (
        owners.select("pid", "transactional_id")
        .join(seen_under, "pid", "full")
        .select(
            F.col("pid").cast("long").alias("producer_id"),
            F.coalesce("transactional_id", "history_transactional_id").alias("transactional_id"),
        )
        .filter(F.col("transactional_id").isNotNull())
    )
    partitions = pstats.select(F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("tp_name"))
    producers = leader_producer_state(summary, checkpoints_of(checkpoints))
    return Intermediates(cached(txns), cached(health), partitions, history, state, owner_ids, producers)


def transactions(
    spark: SparkSession,
    it: Intermediates,
    *,
    as_of_ms: int,
    scratch: str,
    bounds: pa.Table | None = None,
) -> StagedTable:
    """Every transaction: staged by the tasks that rebuilt them, finished in Python tasks with what only
    the whole run knows (as_of, the coordinator's owners, the inputs; txnlog.spark.staged). ``bounds``: a
    live run's per-partition bounds of what it writes (txnlog.spark.live_batches.LiveCut.history_bounds)."""
    from txnlog.spark.staged import OWNERS_SCHEMA, SOURCES_SCHEMA, Finish, StagedTable

    finish = Finish(
        as_of_ms=as_of_ms,
        owners=it.owner_ids.toArrow().cast(OWNERS_SCHEMA),
        sources=it.health.select("topic", "partition", "source").toArrow().cast(SOURCES_SCHEMA),
        bounds=bounds,
    )
    return StagedTable(spark, f"{scratch}/transactions", finish)


def coordinator_history(spark: SparkSession, *, scratch: str) -> StagedTable:
    """Every ``__transaction_state`` record once, staged by the tasks that decoded or reduced them."""
    from txnlog.spark.staged import FinishHistory, StagedTable

    return StagedTable(spark, f"{scratch}/coordinator_history", FinishHistory(), "coordinator_history")


def candidates(it: Intermediates, thresholds: classify.Thresholds) -> DataFrame:
    """Transactions open on some replica and idle past the timeout, with all the evidence ``classify`` reads."""
    as_of = F.lit(thresholds.as_of_ms)
    idle = as_of - F.col("last_timestamp_ms")
    open_idle = it.txns.filter((F.size("open_replicas") > 0) & (idle > thresholds.max_transaction_timeout_ms))
    return open_idle.withColumns(
        {
            "start_offset": F.col("first_offset"),
            "open_ms": as_of - F.coalesce("first_timestamp_ms", "last_timestamp_ms"),
            "idle_ms": idle,
            "started_before_log_start": F.coalesce("started_before_log_start", F.lit(False)),
            # the coordinator epoch of this producer's last marker on the partition, else the snapshot's: what
            # the broker's producer state holds and fences WriteTxnMarkers with (ProducerAppendInfo.appendEndTxnMarker)
            "last_coordinator_epoch": F.coalesce("prev_coordinator_epoch", "snapshot_coordinator_epoch", F.lit(-1)),
            "owner_match": F.coalesce("owner_match", F.lit(classify.Owner.NONE)),
        }
    ).select(*CANDIDATE_COLUMNS)


def _legacy_epoch() -> Column:
    return F.greatest(F.col("last_coordinator_epoch"), F.lit(0))


def findings(classified: DataFrame, stuck: DataFrame, as_of_ms: int) -> DataFrame:
    """HANGING and LATE transactions of the data partitions, and stuck coordinator records whose
    partitions are not in the input."""
    data = classified.withColumns(
        {
            "first_timestamp": T.ts("first_timestamp_ms"),
            "last_timestamp": T.ts("last_timestamp_ms"),
            "coordinator_state": F.col("owner_state"),
            "coordinator_partition": F.col("owner_coordinator_partition"),
            # the same epoch the abort recommendation's legacy command carries
            "coordinator_epoch": _legacy_epoch(),
        }
    )
    coordinator = stuck.withColumns(
        {
            "topic": F.lit(None).cast("string"),
            "partition": F.lit(None).cast("int"),
            "start_offset": F.lit(None).cast("long"),
            "first_timestamp": T.ts("txn_start_ms"),
            "last_timestamp": T.ts("last_update_ms"),
            "open_ms": F.lit(as_of_ms) - F.col("txn_start_ms"),
            "idle_ms": F.lit(as_of_ms) - F.greatest("txn_start_ms", "last_update_ms"),
            "lso_lag": F.lit(None).cast("long"),
            "verdict": F.lit(classify.Verdict.LATE),
            "reason": F.lit(classify.Reason.COORDINATOR_STUCK),
            "coordinator_state": F.col("state"),
            "replicas": F.lit(None).cast("array<string>"),
            "open_replicas": F.lit(None).cast("array<string>"),
            "started_before_log_start": F.lit(False),
        }
    )
    return project(data, "findings").unionByName(project(coordinator, "findings"))


def abort_impact(it: Intermediates, hanging: DataFrame) -> DataFrame:
    """``hanging`` with ``lso_after_abort`` and ``offsets_released``: aborted in offset order on each partition.

    The LSO is the first offset of the earliest unstable transaction (open on the leader, or ended by a
    marker the high watermark has not passed), else the high watermark (``UnifiedLog.lastStableOffset``,
    ``ProducerStateManager.firstUnstableOffset``; txnlog.spark.transforms.with_lso). Aborting a HANGING
    transaction removes it from that set once its ABORT marker is replicated: after the aborts of the
    partition's HANGING transactions up to this one, the LSO moves to the first offset of the earliest
    transaction left open on the leader (a LATE or active one, or the next HANGING one), else to the log end at
    ``as_of`` (the marker itself is one more offset), never below the log start. ``offsets_released``:
    the LSO after this abort minus the LSO before it (the partition's LSO for the first).
    """
    from pyspark.sql import Window

    key = ["topic", "partition", "producer_id", "start_offset"]
    # Open on the leader only: a completed transaction whose marker the high watermark has not passed yet
    # does not hold the LSO after an abort, because the abort's marker lands at the log end, after its
    # marker, and the high watermark passes both at once (ProducerStateManager.removeUnreplicatedTransactions).
    unstable = it.txns.filter(F.col("open_on_lead")).select(
        "topic", "partition", "producer_id", F.col("first_offset").alias("start_offset")
    )
    marked = hanging.select(*key).distinct()
    blockers = (
        unstable.join(marked, key, "left_anti")
        .groupBy("topic", "partition")
        .agg(F.min("start_offset").alias("first_blocker"))
    )
    later = unstable.join(marked, key, "left_semi").select(
        "topic", "partition", F.col("start_offset").alias("later_start")
    )
    nxt = (
        marked.alias("h")
        .join(later.alias("u"), ["topic", "partition"])
        .filter(F.col("u.later_start") > F.col("h.start_offset"))
        .groupBy("topic", "partition", "producer_id", "start_offset")
        .agg(F.min("u.later_start").alias("next_hanging"))
    )
    bounds = it.health.select(
        "topic",
        "partition",
        F.col("last_stable_offset").alias("_lso"),
        F.col("log_start_offset").alias("_log_start"),
        F.col("log_end_offset").alias("_log_end"),
    )
    rows = (
        hanging.join(bounds, ["topic", "partition"], "left")
        .join(blockers, ["topic", "partition"], "left")
        .join(nxt, key, "left")
    )
    after = F.greatest(F.least("first_blocker", "next_hanging", "_log_end"), F.col("_log_start"))
    order = Window.partitionBy("topic", "partition").orderBy("start_offset", "producer_id")
    rows = rows.withColumn("lso_after_abort", after)
    before = F.coalesce(F.lag("lso_after_abort").over(order), F.col("_lso"))
    released = F.greatest(F.col("lso_after_abort") - before, F.lit(0))
    return rows.withColumn("offsets_released", released).drop(
        "_lso", "_log_start", "_log_end", "first_blocker", "next_hanging"
    )


def abort_recommendations(classified: DataFrame, bootstrap: str, it: Intermediates) -> DataFrame:
    """One per HANGING transaction: the kafka-transactions.sh abort commands (KIP-664 and the legacy form)
    and what the abort releases (:func:`abort_impact`)."""
    hanging = abort_impact(it, classified.filter(F.col("verdict") == classify.Verdict.HANGING))
    return project(
        hanging.withColumns(
            {
                "coordinator_epoch": _legacy_epoch(),
                "command": F.format_string(
                    "kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
                    F.lit(bootstrap),
                    "topic",
                    "partition",
                    "start_offset",
                ),
                "legacy_command": F.format_string(
                    "kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --producer-id %d "
                    "--producer-epoch %d --coordinator-epoch %d",
                    F.lit(bootstrap),
                    "topic",
                    "partition",
                    "producer_id",
                    "producer_epoch",
                    _legacy_epoch(),
                ),
            }
        ),
        "abort_recommendations",
    )


def partition_health(it: Intermediates, thresholds: classify.Thresholds) -> DataFrame:
    """Per partition: offsets, the LSO and its lag, open transactions, whether one is late."""
    late_ms = thresholds.max_transaction_timeout_ms + classify.LATE_TRANSACTION_BUFFER_MS
    has_late = F.coalesce(F.col("oldest_idle_ms") > late_ms, F.lit(False))
    return project(
        it.health.withColumns(
            {
                "has_late_transaction": has_late,
                "stuck_since": F.when(has_late, T.ts("oldest_first_ms")),
                "max_timestamp": T.ts("max_timestamp_ms"),
            }
        ),
        "partition_health",
    )


def producer_state(it: Intermediates, thresholds: classify.Thresholds) -> DataFrame:
    """Per partition: what DescribeProducers would have answered at as_of (txnlog.producer_state).

    The leader's producers (the most advanced replica's, as for ``partition_health``), each with the first
    offset of the transaction open on that replica (the ``transactions`` merge's, so the same offset the
    findings and the LSO use), less the producers ``producer.id.expiration.ms`` removed: nothing open and
    ``last_timestamp + producer.id.expiration.ms ≤ as_of`` (``ProducerStateManager.isProducerExpired``; an
    unknown timestamp is Kafka's −1: expired).
    """
    key = ["topic", "partition", "producer_id"]
    open_txn = (
        it.txns.filter(F.col("open_on_lead")).groupBy(*key).agg(F.min("first_offset").alias("current_txn_start_offset"))
    )
    sources = it.health.select("topic", "partition", "source")
    rows = it.producers.join(open_txn, key, "left").join(sources, ["topic", "partition"], "left")
    horizon = thresholds.as_of_ms - thresholds.producer_id_expiration_ms
    expired = F.col("current_txn_start_offset").isNull() & (
        F.coalesce("last_timestamp_ms", F.lit(-1)) <= F.lit(horizon)
    )
    return project(rows.filter(~expired).withColumn("last_timestamp", T.ts("last_timestamp_ms")), "producer_state")


def coordinator_state(it: Intermediates) -> DataFrame:
    """Per transactional.id: the coordinator's state as it loads it (newest record by offset)."""
    return project(
        it.state.withColumns(
            {
                "txn_start_timestamp": T.ts("txn_start_timestamp"),
                "last_update_timestamp": T.ts("last_update_timestamp"),
            }
        ),
        "coordinator_state",
    )


def quarantine(
    summary: DataFrame, records: DataFrame, as_of: datetime | None = None, as_of_source: str = ""
) -> DataFrame:
    """Regions of the input that could not be read, by file and byte position (or dump file and line), and
    with ``as_of`` warning rows for client clocks far past it (kept as read, never "now": txnlog.as_of)."""
    data = summary.filter(F.col("kind") == "quarantine").withColumn("replica", F.col("broker"))
    coordinator = records.filter(F.col("kind") == "quarantine").withColumns(
        {
            "topic": F.lit("__transaction_state"),
            "partition": F.col("coordinator_partition"),
            "replica": F.col("broker"),
        }
    )
    rows = project(data, "quarantine").unionByName(project(coordinator, "quarantine"))
    if as_of is None:
        return rows
    return rows.unionByName(future_timestamps(summary, as_of, as_of_source))


def future_timestamps(summary: DataFrame, as_of: datetime, as_of_source: str) -> DataFrame:
    """Warning rows for segments whose client timestamps lie far past ``as_of`` (txnlog.as_of)."""
    from txnlog import as_of as as_of_rule

    return project(as_of_rule.future_timestamps(summary, as_of, as_of_source, cluster=""), "quarantine")


def build(
    spark: SparkSession,
    summary: DataFrame,
    records: DataFrame,
    thresholds: classify.Thresholds,
    *,
    scratch: str,
    keep: Callable[[DataFrame], DataFrame],
    checkpoints: Sequence[Checkpoint] = (),
    fragments: bool = True,
    fragment_partitions: Collection[tuple[str, int]] | None = None,
    records_reduced: bool = False,
    as_of: datetime | None = None,
    as_of_source: str = "",
    history_bounds: pa.Table | None = None,
) -> dict[str, DataFrame | StagedTable]:
    """Every output table with Spark (``txnlog.pipeline.build_tables``); ``keep`` persists what several
    tables read. A small input's are built in Arrow instead (txnlog.spark.arrow_tables)."""
    summary, records = _with_input(summary), _with_input(records)
    it = intermediates(
        spark, summary, records, as_of_ms=thresholds.as_of_ms, checkpoints=checkpoints, fragments=fragments,
        fragment_partitions=fragment_partitions, records_reduced=records_reduced, scratch=scratch, cached=keep,
    )  # fmt: skip
    damage = T.damage_map(summary, records)
    verdicts = T.classify_candidates(candidates(it, thresholds), thresholds, damage)
    classified = keep(verdicts.filter(F.col("verdict").isNotNull()))
    stuck = T.stuck_coordinator_records(it.state, it.input_partitions, thresholds)
    return {
        "transactions": transactions(spark, it, as_of_ms=thresholds.as_of_ms, scratch=scratch, bounds=history_bounds),
        "findings": keep(findings(classified, stuck, thresholds.as_of_ms)),
        "abort_recommendations": abort_recommendations(
            classified, thresholds.bootstrap_servers or classify.BOOTSTRAP_PLACEHOLDER, it
        ),
        "partition_health": keep(partition_health(it, thresholds)),
        "producer_state": producer_state(it, thresholds),
        "coordinator_state": coordinator_state(it),
        "coordinator_history": coordinator_history(spark, scratch=scratch),
        "quarantine": quarantine(summary, records, as_of, as_of_source),
    }


def _with_input(df: DataFrame) -> DataFrame:
    """``df`` with its ``input`` column (callers that pass a source's output directly have none: segments)."""
    from txnlog.tables import InputSource

    return df if "input" in df.columns else df.withColumn("input", F.lit(InputSource.SEGMENTS))
