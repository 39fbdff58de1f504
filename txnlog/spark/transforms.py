"""DataFrame → DataFrame steps of the nightly job.

Inputs are the small outputs of the Data Sources (transaction fragments,
segment summaries, snapshot entries, ``__transaction_state`` records); every
step is Spark SQL on those, so nothing grows on the driver. Timestamps stay
epoch milliseconds (``*_ms``) until the output tables are shaped.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from txnlog import classify
from txnlog.kafka.wire import TransactionState

REPLICA = ["broker", "topic", "partition"]
PRODUCER = REPLICA + ["producer_id"]

def state_name(col: str) -> Column:
    """TransactionState id → the name Kafka prints (Empty, Ongoing, PrepareCommit ...)."""
    pairs = [x for s in TransactionState for x in (F.lit(int(s)), F.lit(s.kafka_name))]
    return F.create_map(*pairs)[F.col(col)]


def ts(col: str | Column) -> Column:
    """Epoch ms → Spark timestamp (UTC); null stays null, negative (unknown) becomes null."""
    c = F.col(col) if isinstance(col, str) else col
    return F.when(c >= 0, F.timestamp_millis(c))


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


def snapshot_fragments(summary: DataFrame, stats: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Open transactions that began before the oldest retained segment, and snapshot coordinator epochs.

    The newest ``.snapshot`` at or below the log start offset is the producer
    state the retained log continues from (spec §4.2): an entry with
    ``currentTxnFirstOffset`` below the log start is a transaction whose first
    batch is gone. Returns (pseudo-fragments of kind ``snapshot_open``,
    (replica, producer_id) → snapshot coordinator_epoch).
    """
    snaps = summary.filter(F.col("kind") == "snapshot").join(
        stats.select(*REPLICA, "log_start_offset"), REPLICA, "inner"
    )
    snaps = snaps.filter(F.col("file_offset") <= F.col("log_start_offset"))
    newest = Window.partitionBy(*REPLICA)
    snaps = snaps.withColumn("newest", F.max("file_offset").over(newest)).filter(F.col("file_offset") == F.col("newest"))
    epochs = snaps.select(*PRODUCER, F.col("coordinator_epoch").alias("snapshot_coordinator_epoch"))
    opened = snaps.filter((F.col("first_offset") >= 0) & (F.col("first_offset") < F.col("log_start_offset"))).select(
        F.lit("snapshot_open").alias("kind"),
        *PRODUCER,
        "producer_epoch",
        F.col("producer_epoch").alias("min_epoch"),
        "first_offset",
        F.greatest("last_offset", "first_offset").alias("last_offset"),
        F.lit(None).cast("long").alias("first_timestamp"),
        "last_timestamp",
        F.lit(0).cast("long").alias("batch_count"),
        F.lit(0).cast("long").alias("record_count"),
        F.lit(0).cast("long").alias("size_bytes"),
        F.lit(None).cast("int").alias("control_type"),
        F.lit(None).cast("int").alias("coordinator_epoch"),
    )
    return opened, epochs


FRAGMENT_COLS = [
    "kind",
    *PRODUCER,
    "producer_epoch",
    "min_epoch",
    "first_offset",
    "last_offset",
    "first_timestamp",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "control_type",
    "coordinator_epoch",
]


def replica_transactions(summary: DataFrame, stats: DataFrame) -> DataFrame:
    """Transactions per replica: fragments merged across segments (see txnlog.reconstruct).

    A producer's fragments ordered by offset; ``txn_key`` = the number of its
    markers before the fragment. Runs with the same key are one transaction;
    the marker with that key closes it. A marker with no data in its group
    closed nothing and is dropped, as the broker does.
    """
    opened, snap_epochs = snapshot_fragments(summary, stats)
    frags = summary.filter(F.col("kind").isin("run", "marker")).select(*FRAGMENT_COLS).unionByName(opened)
    is_marker = F.col("kind") == "marker"
    by_offset = Window.partitionBy(*PRODUCER).orderBy("first_offset").rowsBetween(Window.unboundedPreceding, -1)
    frags = frags.withColumn("txn_key", F.coalesce(F.sum(is_marker.cast("long")).over(by_offset), F.lit(0)))
    data = ~is_marker
    data_last = F.when(data, F.col("last_offset"))
    data_first = F.when(data, F.col("first_offset"))
    groups = frags.groupBy(*PRODUCER, "txn_key").agg(
        F.max(data.cast("int")).alias("has_data"),
        F.min(data_first).alias("first_offset"),
        F.max(data_last).alias("last_offset"),
        F.min_by("first_timestamp", data_first).alias("first_timestamp_ms"),
        F.max_by("last_timestamp", data_last).alias("last_timestamp_ms"),
        F.max_by("producer_epoch", data_last).alias("producer_epoch"),
        F.min(F.when(data, F.col("min_epoch"))).alias("min_epoch"),
        F.sum(F.when(data, F.col("batch_count"))).alias("batch_count"),
        F.sum(F.when(data, F.col("record_count"))).alias("record_count"),
        F.sum(F.when(data, F.col("size_bytes"))).alias("size_bytes"),
        F.max(F.when(is_marker, F.col("first_offset"))).alias("marker_offset"),
        F.max(F.when(is_marker, F.col("control_type"))).alias("control_type"),
        F.max(F.when(is_marker, F.col("producer_epoch"))).alias("marker_epoch"),
        F.max(F.when(is_marker, F.col("coordinator_epoch"))).alias("coordinator_epoch"),
        F.max(F.when(is_marker, F.col("last_timestamp"))).alias("marker_timestamp_ms"),
        F.max((F.col("kind") == "snapshot_open").cast("int")).alias("from_snapshot"),
    )
    prev = Window.partitionBy(*PRODUCER).orderBy("txn_key")
    groups = (
        groups.withColumn("prev_marker_offset", F.lag("marker_offset").over(prev))
        .withColumn("prev_marker_type", F.lag("control_type").over(prev))
        .withColumn("prev_marker_epoch", F.lag("marker_epoch").over(prev))
        .withColumn("prev_coordinator_epoch", F.lag("coordinator_epoch").over(prev))
        .filter(F.col("has_data") == 1)
        .drop("has_data")
    )
    return groups.join(snap_epochs, PRODUCER, "left").withColumn(
        "started_before_log_start", F.col("from_snapshot") == 1
    )


def merge_replicas(per_replica: DataFrame) -> DataFrame:
    """One row per transaction on a partition, with the replicas holding it and those where it is open."""
    key = ["topic", "partition", "producer_id", "first_offset"]
    closed = F.col("marker_offset").isNotNull()
    return per_replica.groupBy(*key).agg(
        F.sort_array(F.collect_set("broker")).alias("replicas"),
        F.sort_array(F.collect_set(F.when(~closed, F.col("broker")))).alias("open_replicas"),
        F.max("last_offset").alias("last_offset"),
        F.max_by("producer_epoch", "last_offset").alias("producer_epoch"),
        F.min("min_epoch").alias("min_epoch"),
        F.min("first_timestamp_ms").alias("first_timestamp_ms"),
        F.max("last_timestamp_ms").alias("last_timestamp_ms"),
        F.max("batch_count").alias("batch_count"),
        F.max("record_count").alias("record_count"),
        F.max("size_bytes").alias("size_bytes"),
        F.max("marker_offset").alias("marker_offset"),
        F.max_by("control_type", "marker_offset").alias("control_type"),
        F.max_by("marker_epoch", "marker_offset").alias("marker_epoch"),
        F.max_by("coordinator_epoch", "marker_offset").alias("coordinator_epoch"),
        F.max_by("marker_timestamp_ms", "marker_offset").alias("marker_timestamp_ms"),
        F.max("prev_marker_offset").alias("prev_marker_offset"),
        F.max_by("prev_marker_type", "prev_marker_offset").alias("prev_marker_type"),
        F.max_by("prev_marker_epoch", "prev_marker_offset").alias("prev_marker_epoch"),
        F.max_by("prev_coordinator_epoch", "prev_marker_offset").alias("prev_coordinator_epoch"),
        F.max("snapshot_coordinator_epoch").alias("snapshot_coordinator_epoch"),
        F.max(F.col("started_before_log_start").cast("int")).cast("boolean").alias("started_before_log_start"),
    )


def partition_stats(stats: DataFrame) -> DataFrame:
    """Replica stats merged per topic-partition."""
    return stats.groupBy("topic", "partition").agg(
        F.min("log_start_offset").alias("log_start_offset"),
        F.max("log_end_offset").alias("log_end_offset"),
        F.max("batch_count").alias("batch_count"),
        F.max("max_timestamp_ms").alias("max_timestamp_ms"),
        F.sort_array(F.collect_set("broker")).alias("replicas"),
        F.array_join(F.sort_array(F.collect_set("input")), "+").alias("source"),
    )


def with_lso(txns: DataFrame, pstats: DataFrame, as_of_ms: int) -> tuple[DataFrame, DataFrame]:
    """(transactions with lso_lag, partition_health rows in ms) — LSO = first offset of the oldest open txn."""
    is_open = F.size("open_replicas") > 0
    oldest = Window.partitionBy("topic", "partition").orderBy("first_offset")
    open_txns = txns.filter(is_open).withColumn("rank", F.row_number().over(oldest))
    agg = open_txns.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("open_transactions"),
        F.min("first_offset").alias("lso"),
        F.max(F.lit(as_of_ms) - F.coalesce("first_timestamp_ms", "last_timestamp_ms")).alias("max_open_ms"),
        F.max(F.when(F.col("rank") == 1, F.lit(as_of_ms) - F.col("last_timestamp_ms"))).alias("oldest_idle_ms"),
        F.max(F.when(F.col("rank") == 1, F.coalesce("first_timestamp_ms", "last_timestamp_ms"))).alias("oldest_first_ms"),
    )
    health = pstats.join(agg, ["topic", "partition"], "left")
    health = health.withColumn("last_stable_offset", F.coalesce("lso", "log_end_offset"))
    health = health.withColumn("lso_lag", F.col("log_end_offset") - F.col("last_stable_offset")).withColumn(
        "open_transactions", F.coalesce("open_transactions", F.lit(0)).cast("long")
    )
    txns = txns.join(health.select("topic", "partition", "lso_lag", "log_start_offset", "log_end_offset", "source"), ["topic", "partition"], "left")
    return txns, health


# ---------------------------------------------------------------------------
# __transaction_state
# ---------------------------------------------------------------------------


def coordinator_history(records: DataFrame) -> DataFrame:
    """Every decoded __transaction_state record once (replicas of a partition deduplicated)."""
    recs = records.filter(F.col("kind") == "record").dropDuplicates(["coordinator_partition", "record_offset"])
    return recs.withColumn("state_name", state_name("state"))


def coordinator_state(history: DataFrame) -> DataFrame:
    """Latest record per transactional.id with compaction semantics (a tombstone deletes the id).

    A tombstoned id keeps the fields of its last value (which producer id it
    owned) with ``is_tombstoned`` = true: that is what TRANSACTIONAL_ID_EXPIRED needs.
    """
    order = Window.partitionBy("transactional_id").orderBy("record_timestamp", "coordinator_partition", "record_offset")
    full = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    cols = [
        "producer_id",
        "producer_epoch",
        "state_name",
        "timeout_ms",
        "partitions",
        "txn_start_timestamp",
        "last_update_timestamp",
        "previous_producer_id",
        "next_producer_id",
        "next_producer_epoch",
        "client_transaction_version",
        "coordinator_epoch",
    ]
    value = ~F.col("is_tombstone")
    latest = history.select(
        "transactional_id",
        *[F.last(F.when(value, F.col(c)), ignorenulls=True).over(full).alias(c) for c in cols],
        F.last("is_tombstone").over(full).alias("is_tombstoned"),
        F.last("coordinator_partition").over(full).alias("coordinator_partition"),
        F.last("record_offset").over(full).alias("record_offset"),
        F.last("input").over(full).alias("source"),
        F.count(F.lit(1)).over(Window.partitionBy("transactional_id")).alias("transitions"),
        F.row_number().over(order.orderBy(F.desc("record_timestamp"), F.desc("coordinator_partition"), F.desc("record_offset"))).alias("rn"),
    )
    # a tombstoned id has no state any more; its other fields say what it last owned
    latest = latest.withColumn("state_name", F.when(~F.col("is_tombstoned"), F.col("state_name")))
    return latest.filter(F.col("rn") == 1).drop("rn").withColumnRenamed("state_name", "state")


def producer_owners(state: DataFrame) -> DataFrame:
    """producer_id → the transactional.id that owns it, best match first (see classify.OWNER_*)."""
    live = ~F.col("is_tombstoned") & F.coalesce(F.col("state") != "Dead", F.lit(True))
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
    ]
    current = state.filter(live).select(F.col("producer_id").alias("pid"), F.lit(0).alias("rank"), F.lit(classify.OWNER_CURRENT).alias("owner_match"), *owner_cols)
    rolled = state.filter(live).select(
        F.explode(F.array_distinct(F.array("previous_producer_id", "next_producer_id"))).alias("pid"),
        F.lit(1).alias("rank"),
        F.lit(classify.OWNER_ROLLOVER).alias("owner_match"),
        *owner_cols,
    ).filter(F.col("pid") >= 0)
    expired = state.filter(~live).select(F.col("producer_id").alias("pid"), F.lit(2).alias("rank"), F.lit(classify.OWNER_EXPIRED).alias("owner_match"), *owner_cols)
    allm = current.unionByName(rolled).unionByName(expired)
    best = Window.partitionBy("pid").orderBy("rank", F.desc("owner_last_update_ms"))
    return allm.withColumn("n", F.row_number().over(best)).filter(F.col("n") == 1).drop("n", "rank")


def history_owners(history: DataFrame) -> DataFrame:
    """producer_id → the last transactional.id it was seen under in the history (for evidence)."""
    w = Window.partitionBy("producer_id").orderBy(F.desc("record_timestamp"), F.desc("record_offset"))
    return (
        history.filter(F.col("producer_id").isNotNull())
        .withColumn("n", F.row_number().over(w))
        .filter(F.col("n") == 1)
        .select(F.col("producer_id").alias("pid"), F.col("transactional_id").alias("history_transactional_id"))
    )


# ---------------------------------------------------------------------------
# classification
# ---------------------------------------------------------------------------

CANDIDATE_SCHEMA_EXTRA = [
    ("verdict", pa.string()),
    ("reason", pa.string()),
    ("safety", pa.string()),
    ("evidence", pa.string()),
    ("advice", pa.string()),
]


def _classify_batches(batches: Iterator[pa.RecordBatch], thresholds: classify.Thresholds, out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        table = pa.Table.from_batches([batch])
        verdict, reason, safety = classify.verdicts(table, thresholds)
        rows = table.to_pylist()
        evidence, advice = [], []
        for row, r in zip(rows, reason, strict=True):
            if r:
                e, a = classify.evidence_and_advice(row, r, thresholds)
            else:
                e, a = None, None
            evidence.append(e)
            advice.append(a)
        cols = {name: batch.column(name) for name in batch.schema.names}
        cols.update(
            verdict=pa.array([v or None for v in verdict], pa.string()),
            reason=pa.array([v or None for v in reason], pa.string()),
            safety=pa.array([v or None for v in safety], pa.string()),
            evidence=pa.array(evidence, pa.string()),
            advice=pa.array(advice, pa.string()),
        )
        yield pa.RecordBatch.from_arrays([cols[f.name] for f in out_schema], schema=out_schema)


def classify_candidates(candidates: DataFrame, thresholds: classify.Thresholds) -> DataFrame:
    """Apply classify.verdicts + evidence to the candidate rows (vectorized per Arrow batch)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    in_schema = to_arrow_schema(candidates.schema, timezone="UTC")
    out_schema = pa.schema(list(in_schema) + [pa.field(n, t) for n, t in CANDIDATE_SCHEMA_EXTRA])
    return candidates.mapInArrow(
        partial(_classify_batches, thresholds=thresholds, out_schema=out_schema), from_arrow_schema(out_schema)
    )


def _stuck_batches(batches: Iterator[pa.RecordBatch], thresholds: classify.Thresholds, out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        table = pa.Table.from_batches([batch])
        mask = classify.coordinator_stuck(table, thresholds)
        if not mask.any():
            continue
        batch = batch.filter(pa.array(mask))
        ev, adv = zip(*(classify.coordinator_stuck_evidence(r, thresholds) for r in batch.to_pylist()), strict=True)
        cols = {name: batch.column(name) for name in batch.schema.names}
        cols.update(evidence=pa.array(ev, pa.string()), advice=pa.array(adv, pa.string()))
        yield pa.RecordBatch.from_arrays([cols[f.name] for f in out_schema], schema=out_schema)


def stuck_coordinator_records(state: DataFrame, input_partitions: DataFrame, thresholds: classify.Thresholds) -> DataFrame:
    """COORDINATOR_STUCK rows: records stuck far past their timeout whose partitions are not in the input."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    listed = state.select("transactional_id", F.explode_outer("partitions").alias("tp"))
    present = listed.join(input_partitions, listed.tp == input_partitions.tp_name, "left").groupBy("transactional_id").agg(
        F.max(F.col("tp_name").isNotNull().cast("int")).cast("boolean").alias("any_partition_in_input")
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
    out_schema = pa.schema(list(in_schema) + [pa.field("evidence", pa.string()), pa.field("advice", pa.string())])
    return cand.mapInArrow(partial(_stuck_batches, thresholds=thresholds, out_schema=out_schema), from_arrow_schema(out_schema))
