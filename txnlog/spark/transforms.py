"""DataFrame → DataFrame steps of the nightly job.

Inputs are the small outputs of the Data Sources (transaction fragments,
segment summaries, snapshot entries, ``__transaction_state`` records); every
step is Spark SQL on those, so nothing grows on the driver. Timestamps stay
epoch milliseconds (``*_ms``) until the output tables are shaped.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import partial

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from txnlog import classify
from txnlog.kafka.wire import TransactionState
from txnlog.spark.arrow_tables import (
    CANDIDATE_SCHEMA_EXTRA,
    STATE_COLUMNS,
    STUCK_SCHEMA_EXTRA,
    classify_batches,
    stuck_batches,
)
from txnlog.spark.schemas import quoted
from txnlog.spark.staged import RAW_COLUMNS
from txnlog.spark.transactions import KIND_TRANSACTION, Checkpoints, transactions_of_summary

REPLICA = ["broker", "topic", "partition"]


def state_name(col: str) -> Column:
    """TransactionState id → the name Kafka prints (Empty, Ongoing, PrepareCommit ...)."""
    pairs = [x for s in TransactionState for x in (F.lit(int(s)), F.lit(s.kafka_name))]
    return F.create_map(*pairs)[F.col(col)]


def ts(col: str | Column) -> Column:
    """Epoch ms → Spark timestamp (UTC); null stays null, negative (unknown) becomes null, and so does
    a time past the year 9999 (a client clock in µs or ns: no reader's datetime holds it, and ns
    overflow a µs timestamp; txnlog.as_of reports such segments as ``timestamp_in_future``)."""
    from txnlog.as_of import MAX_MS

    c = F.col(col) if isinstance(col, str) else col
    return F.when((c >= 0) & (c <= MAX_MS), F.timestamp_millis(c))


# ---------------------------------------------------------------------------
# data partitions
# ---------------------------------------------------------------------------


def replica_stats(summary: DataFrame) -> DataFrame:
    """Per replica of a partition: log start/end offsets, batch count, newest timestamp."""
    seg = summary.filter(F.col("kind") == "segment")
    return seg.groupBy(*REPLICA).agg(
        F.min("file_offset").alias("log_start_offset"),
        F.coalesce(F.max("last_offset") + 1, F.max("file_offset")).alias("log_end_offset"),
        F.sum("batch_count").alias("batch_count"),
        F.max("last_timestamp").alias("max_timestamp_ms"),
        F.sum("legacy_entries").alias("legacy_entries"),
        F.max("input").alias("input"),
    )


def partition_transactions(
    summary: DataFrame,
    checkpoints: Checkpoints,
    *,
    fragments: bool,
    stage: str | None = None,
    fragment_partitions: Collection[tuple[str, int]] | None = None,
) -> DataFrame:
    """One row per transaction of a partition, every replica merged (``txnlog.reconstruct``).

    Rows of kind ``transaction`` were finished by the decode tasks (``txnlog_segments`` with
    ``transactions`` = true holds whole partitions per task). With ``fragments``, the fragment,
    segment and snapshot rows of the other inputs (kafka-dump-log.sh output, a source that yields
    fragments) are grouped by partition and merged by the same code (one shuffle of fragments).
    With ``stage`` those merges stage every transaction for the ``transactions`` table and keep only
    the ones the verdicts need, as the decode tasks do (txnlog.spark.staged). ``fragment_partitions``: the
    only (topic, partition)s whose rows may still need the merge (split segments' partitions, txnlog.splits),
    so that the other partitions' segment rows are not shuffled for nothing; None: any.
    """
    from txnlog.spark.sources import SEGMENT_SUMMARY_SCHEMA, arrow_to_spark_schema

    names = SEGMENT_SUMMARY_SCHEMA.names  # (the merge's rows are all nullable: no column added by the caller)
    done = summary.filter(F.col("kind") == KIND_TRANSACTION).select(*names)
    if fragments:
        pieces = summary.filter(
            F.col("kind").isin("run", "marker", "segment", "snapshot")
            & F.col("topic").isNotNull()
            & F.col("partition").isNotNull()
        )
        if fragment_partitions is not None:
            split = sorted({f"{t}-{p}" for t, p in fragment_partitions})
            pieces = pieces.filter(F.concat_ws("-", "topic", F.col("partition").cast("string")).isin(split))
        known = dict(checkpoints)
        # The merge reads no list column (replicas, open_replicas, behind_replicas: transaction rows' own), and
        # Spark's rows → Arrow conversion of a list column costs ~0.1 ms per row even when it is null: with them,
        # a hot partition's ~560,000 fragment rows took 82 s to reach the merge (benchmarks/RESULTS.md, "A hot
        # partition: index splits vs the same bytes read whole").
        sent = [f.name for f in SEGMENT_SUMMARY_SCHEMA if not pa.types.is_list(f.type)]

        def merge_group(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
            return transactions_of_summary(table, known, stage, SEGMENT_SUMMARY_SCHEMA)

        merged = (
            pieces.select(*sent)
            .groupBy("topic", "partition")
            .applyInArrow(merge_group, arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA))
        )
        done = done.unionByName(merged)
    ms = {"first_timestamp", "last_timestamp", "marker_timestamp"}
    # SQL text: one call into the JVM for the projection (txnlog.spark.schemas.shaped)
    return done.selectExpr(*[f"{quoted(c)} AS {quoted(f'{c}_ms' if c in ms else c)}" for c in RAW_COLUMNS])


CHECKPOINT_SCHEMA = (
    "broker string, topic string, partition int, high_watermark long, checkpoint_log_start long, "
    "recovery_point long, clean_shutdown boolean"
)


def _at_least(col: str, bound: Column) -> Column:
    """``col`` raised to ``bound`` where ``bound`` is known; checkpoint columns are null when absent."""
    return F.when(F.col("checkpoint_log_start").isNotNull(), F.greatest(F.col(col), bound)).otherwise(F.col(col))


def with_checkpoints(stats: DataFrame, checkpoints: DataFrame | None) -> DataFrame:
    """Replica stats plus the broker's checkpointed offsets and which replica is the most advanced.

    The checkpointed log start (``log-start-offset-checkpoint``) is the real log start once
    DeleteRecords moved it inside a segment (``UnifiedLog.maybeIncrementLogStartOffset``); the
    segments alone only say where the oldest retained segment begins. ``is_lead``: the replica
    with the largest log end offset (ties: the first broker name), whose offsets the leader reports.
    """
    if checkpoints is not None:
        stats = stats.join(checkpoints, REPLICA, "left")
    else:
        for name, kind in (
            ("high_watermark", "long"),
            ("checkpoint_log_start", "long"),
            ("recovery_point", "long"),
            ("clean_shutdown", "boolean"),
        ):
            stats = stats.withColumn(name, F.lit(None).cast(kind))
    stats = stats.withColumn("segment_log_start", F.col("log_start_offset")).withColumn(
        "log_start_offset", _at_least("log_start_offset", F.least("checkpoint_log_start", "log_end_offset"))
    )
    lead = Window.partitionBy("topic", "partition").orderBy(F.desc("log_end_offset"), "broker")
    return stats.withColumn("is_lead", F.row_number().over(lead) == 1)


def partition_stats(stats: DataFrame) -> DataFrame:
    """Replica stats merged per topic-partition: offsets of the most advanced replica.

    ``high_watermark``/log start: the most advanced of the brokers' checkpoints (each is written
    every few seconds, so they may disagree; ``checkpoint_note`` says so for the evidence).
    """
    lead = F.col("is_lead")
    hw_pairs = F.sort_array(
        F.collect_set(
            F.when(
                F.col("high_watermark").isNotNull(), F.concat_ws(": ", "broker", F.col("high_watermark").cast("string"))
            )
        )
    )
    ls_pairs = F.sort_array(
        F.collect_set(
            F.when(
                F.col("checkpoint_log_start").isNotNull(),
                F.concat_ws(": ", "broker", F.col("checkpoint_log_start").cast("string")),
            )
        )
    )
    merged = stats.groupBy("topic", "partition").agg(
        F.max(F.when(lead, F.col("log_end_offset"))).alias("log_end_offset"),
        F.max(F.when(lead, F.col("segment_log_start"))).alias("segment_log_start"),
        F.max("checkpoint_log_start").alias("checkpoint_log_start"),
        F.max("high_watermark").alias("high_watermark"),
        F.countDistinct("high_watermark").alias("_hw_values"),
        F.countDistinct("checkpoint_log_start").alias("_ls_values"),
        hw_pairs.alias("_hw_pairs"),
        ls_pairs.alias("_ls_pairs"),
        F.max(F.when(lead, F.col("broker"))).alias("lead_replica"),
        F.coalesce(F.max(F.when(lead, F.col("clean_shutdown"))), F.lit(False)).alias("lead_clean_shutdown"),
        F.max("batch_count").alias("batch_count"),
        F.max("max_timestamp_ms").alias("max_timestamp_ms"),
        F.sort_array(F.collect_set("broker")).alias("replicas"),
        F.array_join(F.sort_array(F.collect_set("input")), "+").alias("source"),
    )
    # (least/greatest skip nulls: an unknown checkpoint must stay unknown, not become the log end)
    merged = merged.withColumn(
        "log_start_offset", _at_least("segment_log_start", F.least("checkpoint_log_start", "log_end_offset"))
    ).withColumn(
        "high_watermark", F.when(F.col("high_watermark").isNotNull(), F.least("high_watermark", "log_end_offset"))
    )
    note_hw = F.when(
        F.col("_hw_values") > 1,
        F.format_string(
            "the brokers' high-watermark checkpoints disagree (%s; the most advanced is used)",
            F.array_join("_hw_pairs", ", "),
        ),
    )
    note_ls = F.when(
        F.col("_ls_values") > 1,
        F.format_string(
            "the brokers' log-start checkpoints disagree (%s; the most advanced is used)",
            F.array_join("_ls_pairs", ", "),
        ),
    )
    merged = merged.withColumn("checkpoint_note", F.concat_ws("; ", note_hw, note_ls))
    merged = merged.withColumn("checkpoint_note", F.when(F.col("checkpoint_note") != "", F.col("checkpoint_note")))
    return merged.drop(
        "_hw_values", "_ls_values", "_hw_pairs", "_ls_pairs", "segment_log_start", "checkpoint_log_start"
    )


def with_lso(txns: DataFrame, pstats: DataFrame, as_of_ms: int) -> tuple[DataFrame, DataFrame]:
    """(transactions with lso_lag, partition_health rows in ms), as the leader computes them.

    ``UnifiedLog.lastStableOffset``: the first unstable offset if it is below the high watermark,
    else the high watermark; the first unstable offset is the smallest first offset of the ongoing
    transactions and of the completed ones whose marker is not yet below the high watermark
    (``ProducerStateManager.firstUnstableOffset``, ``unreplicatedTxns``: a running broker's copy; a
    cleanly shut-down broker restarted on its copy loads the snapshot at the log end, which holds no
    completed transaction, ``LogLoader``), never below the log start
    (``UnifiedLog.updateFirstUnstableOffset``). Ongoing = open on the most advanced replica (so are
    ``open_transactions``, ``max_open_ms`` and the late-transaction flag: what the leader reports; a
    transaction open only on a diverged follower is a finding, not part of the leader's numbers);
    with no checkpoint the high watermark is taken to be the log end.
    """
    oldest = Window.partitionBy("topic", "partition").orderBy("first_offset")
    open_txns = txns.filter(F.col("open_on_lead")).withColumn("rank", F.row_number().over(oldest))
    agg = open_txns.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("open_transactions"),
        F.max(F.lit(as_of_ms) - F.coalesce("first_timestamp_ms", "last_timestamp_ms")).alias("max_open_ms"),
        F.max(F.when(F.col("rank") == 1, F.lit(as_of_ms) - F.col("last_timestamp_ms"))).alias("oldest_idle_ms"),
        F.max(F.when(F.col("rank") == 1, F.coalesce("first_timestamp_ms", "last_timestamp_ms"))).alias(
            "oldest_first_ms"
        ),
    )
    hw = pstats.select("topic", "partition", "high_watermark", "lead_clean_shutdown")
    # a clean copy speaks for its broker restarted on it: the snapshot at the log end holds no completed txn
    late_marker = (
        F.col("marker_offset").isNotNull()
        & (F.col("marker_offset") >= F.col("high_watermark"))
        & ~F.coalesce(F.col("lead_clean_shutdown"), F.lit(False))
    )
    unstable = (
        txns.join(hw, ["topic", "partition"], "left")
        .filter(F.col("open_on_lead") | late_marker)
        .groupBy("topic", "partition")
        .agg(F.min("first_offset").alias("first_unstable_offset"))
    )
    health = pstats.join(agg, ["topic", "partition"], "left").join(unstable, ["topic", "partition"], "left")
    stable_bound = F.coalesce("high_watermark", "log_end_offset")
    lso = F.greatest(F.least("first_unstable_offset", stable_bound), F.col("log_start_offset"))
    health = health.withColumn("last_stable_offset", F.coalesce(lso, stable_bound))
    health = health.withColumn("lso_lag", F.col("log_end_offset") - F.col("last_stable_offset")).withColumn(
        "open_transactions", F.coalesce("open_transactions", F.lit(0)).cast("long")
    )
    txns = txns.join(
        health.select(
            "topic",
            "partition",
            "lso_lag",
            "log_start_offset",
            "log_end_offset",
            "high_watermark",
            "checkpoint_note",
            "source",
        ),
        ["topic", "partition"],
        "left",
    )
    return txns, health


def damage_map(summary: DataFrame, records: DataFrame) -> classify.Damage:
    """The quarantined regions of the input, on the driver (txnlog.rules.damage.ranges): the regions and the
    segments of the replicas that hold one, so bounded by the damaged files and not by the data, plus the
    damaged ``__transaction_state`` partitions. Applied to the few candidates inside
    :func:`classify_candidates`, which keeps the plans free of self-joins."""
    from txnlog.rules import damage

    quarantined = summary.filter(F.col("kind") == "quarantine").select(
        *REPLICA, "file_offset", "file", "first_offset", "last_offset"
    )
    damaged = quarantined.select(*REPLICA).distinct()
    segments = summary.filter(F.col("kind") == "segment").select(*REPLICA, "file_offset").join(damaged, REPLICA)
    bad = (
        records.filter((F.col("kind") == "quarantine") & F.col("coordinator_partition").isNotNull())
        .select(F.col("coordinator_partition").cast("int").alias("partition"))
        .distinct()
    )
    return classify.Damage(
        ranges=damage.ranges(segments.toArrow(), quarantined.toArrow()),
        txn_state_partitions=frozenset(int(r["partition"]) for r in bad.collect()),
    )


# ---------------------------------------------------------------------------
# __transaction_state
# ---------------------------------------------------------------------------


def coordinator_history(records: DataFrame) -> DataFrame:
    """Every decoded __transaction_state record once (replicas of a partition deduplicated)."""
    recs = records.filter(F.col("kind") == "record").dropDuplicates(["coordinator_partition", "record_offset"])
    return recs.withColumn("state_name", state_name("state"))


def coordinator_state(history: DataFrame) -> DataFrame:
    """Latest record per transactional.id, replayed in offset order, as the coordinator loads it.

    ``TransactionStateManager.loadTransactionMetadata`` reads a ``__transaction_state`` partition
    in offset order and *replaces* the id's metadata with each value record, or removes the id on
    a tombstone. So the newest record by offset is the state, whole: a field it lacks (a v0 value
    has no tagged fields) is absent, never inherited from an older record. Record timestamps are
    not an order (after a failover another broker's clock writes them). A tombstoned id keeps the
    fields of its last value (which producer id it owned) with ``is_tombstoned`` = true: that is
    what TRANSACTIONAL_ID_EXPIRED needs.
    """
    cols = list(STATE_COLUMNS)
    order = F.struct("coordinator_partition", "record_offset")
    value = ~F.col("is_tombstone")
    latest = history.groupBy("transactional_id").agg(
        F.max_by(F.struct(*cols), F.when(value, order)).alias("v"),
        F.max_by("is_tombstone", order).alias("is_tombstoned"),
        F.max_by("coordinator_partition", order).alias("coordinator_partition"),
        F.max_by("record_offset", order).alias("record_offset"),
        F.max_by("input", order).alias("source"),
        # records reduced where they were decoded carry their id's count (txnlog.spark.coordinator)
        F.sum(F.coalesce(F.col("transitions"), F.lit(1))).alias("transitions"),
    )
    latest = latest.selectExpr(
        "transactional_id",
        *[f"v.{quoted(c)} AS {quoted(c)}" for c in cols],
        "is_tombstoned",
        "coordinator_partition",
        "record_offset",
        "source",
        "transitions",
    )
    # a tombstoned id has no state any more; its other fields say what it last owned
    latest = latest.withColumn("state_name", F.when(~F.col("is_tombstoned"), F.col("state_name")))
    return latest.withColumnRenamed("state_name", "state")


def producer_owners(state: DataFrame) -> DataFrame:
    """producer_id → the transactional.id that owns it, best match first (see classify.Owner)."""
    live = ~F.col("is_tombstoned") & F.coalesce(F.col("state") != TransactionState.DEAD.kafka_name, F.lit(True))
    owner_cols = [
        F.col("transactional_id"),
        F.col("state").alias("owner_state"),
        F.col("partitions").alias("owner_partitions"),
        F.col("timeout_ms").alias("owner_timeout_ms"),
        F.col("txn_start_timestamp").alias("owner_txn_start_ms"),
        F.col("last_update_timestamp").alias("owner_last_update_ms"),
        F.col("coordinator_partition").alias("owner_coordinator_partition"),
        F.col("coordinator_epoch").alias("owner_coordinator_epoch"),
        F.col("producer_id").alias("owner_producer_id"),
        F.col("record_offset").alias("owner_record_offset"),
    ]
    current = state.filter(live).select(
        F.col("producer_id").alias("pid"),
        F.lit(0).alias("rank"),
        F.lit(classify.Owner.CURRENT).alias("owner_match"),
        *owner_cols,
    )
    rolled = (
        state.filter(live)
        .select(
            F.explode(F.array_distinct(F.array("previous_producer_id", "next_producer_id"))).alias("pid"),
            F.lit(1).alias("rank"),
            F.lit(classify.Owner.ROLLOVER).alias("owner_match"),
            *owner_cols,
        )
        .filter(F.col("pid") >= 0)
    )
    expired = state.filter(~live).select(
        F.col("producer_id").alias("pid"),
        F.lit(2).alias("rank"),
        F.lit(classify.Owner.EXPIRED).alias("owner_match"),
        *owner_cols,
    )
    allm = current.unionByName(rolled).unionByName(expired)
    # a producer id has one owner; should two records claim it, the later record of a partition wins
    # (offset order, never timestamps)
    best = Window.partitionBy("pid").orderBy("rank", F.desc("owner_record_offset"), "owner_coordinator_partition")
    return (
        allm.withColumn("n", F.row_number().over(best)).filter(F.col("n") == 1).drop("n", "rank", "owner_record_offset")
    )


def history_owners(history: DataFrame) -> DataFrame:
    """producer_id → the last transactional.id it was seen under in the history (for evidence):
    the newest record naming it by (offset, partition)."""
    return (
        history.filter(F.col("producer_id").isNotNull())
        .groupBy(F.col("producer_id").alias("pid"))
        .agg(
            F.max_by("transactional_id", F.struct("record_offset", "coordinator_partition")).alias(
                "history_transactional_id"
            )
        )
    )


def reduced_records(records: DataFrame, stage: str) -> DataFrame:
    """``records`` whose ``record`` rows were not reduced where they were decoded (kafka-dump-log.sh
    output, the live cluster), reduced per coordinator partition by the same code
    (txnlog.spark.coordinator), every record staged for ``coordinator_history``; other rows as they are."""
    from pyspark.sql.types import LongType, StructField, StructType

    from txnlog.spark.coordinator import reduce_records

    columns = [c for c in records.columns if c != "transitions"]

    def reduce_group(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        key = f"{table.column('coordinator_partition')[0]}"
        return reduce_records(table, stage, key)

    recs = records.filter(F.col("kind") == "record").select(*columns)
    # every column nullable: the reduced rows are a subset, but a caller's F.lit column is declared non-null
    out = StructType([StructField(f.name, f.dataType, True) for f in recs.schema.fields])
    out = out.add(StructField("transitions", LongType(), True))
    reduced = recs.groupBy("coordinator_partition").applyInArrow(reduce_group, out)
    others = records.filter(F.col("kind") != "record").select(*columns, F.lit(None).cast("long").alias("transitions"))
    return reduced.unionByName(others)


# ---------------------------------------------------------------------------
# classification
# ---------------------------------------------------------------------------


def classify_candidates(
    candidates: DataFrame,
    thresholds: classify.Thresholds,
    damage: classify.Damage | None = None,
) -> DataFrame:
    """Apply classify.verdicts + evidence to the candidate rows (vectorized per Arrow batch)."""
    damage = damage or classify.Damage()
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    in_schema = to_arrow_schema(candidates.schema, timezone="UTC")
    out_schema = pa.schema(list(in_schema) + [pa.field(n, t) for n, t in CANDIDATE_SCHEMA_EXTRA])
    return candidates.mapInArrow(
        partial(classify_batches, thresholds=thresholds, damage=damage, out_schema=out_schema),
        from_arrow_schema(out_schema),
    )


def stuck_coordinator_records(
    state: DataFrame, input_partitions: DataFrame, thresholds: classify.Thresholds
) -> DataFrame:
    """COORDINATOR_STUCK rows: records stuck far past their timeout whose partitions are not in the input."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    listed = state.select("transactional_id", F.explode_outer("partitions").alias("tp"))
    present = (
        listed.join(input_partitions, listed.tp == input_partitions.tp_name, "left")
        .groupBy("transactional_id")
        .agg(F.max(F.col("tp_name").isNotNull().cast("int")).cast("boolean").alias("any_partition_in_input"))
    )
    cand = state.join(present, "transactional_id", "left").select(
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "state",
        "timeout_ms",
        "partitions",
        F.col("txn_start_timestamp").alias("txn_start_ms"),
        F.col("last_update_timestamp").alias("last_update_ms"),
        F.col("txn_start_timestamp"),
        F.col("last_update_timestamp"),
        "coordinator_partition",
        "coordinator_epoch",
        "is_tombstoned",
        "source",
        F.coalesce("any_partition_in_input", F.lit(False)).alias("any_partition_in_input"),
    )
    in_schema = to_arrow_schema(cand.schema, timezone="UTC")
    out_schema = pa.schema(list(in_schema) + [pa.field(n, t) for n, t in STUCK_SCHEMA_EXTRA])
    return cand.mapInArrow(
        partial(stuck_batches, thresholds=thresholds, out_schema=out_schema), from_arrow_schema(out_schema)
    )
