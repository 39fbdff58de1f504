"""What Spark's tasks hand to the table build: the decode's rows, reduced where they are, collected as Arrow.

The rules that turn decoded rows into the output tables live once, as functions over Arrow tables
(txnlog.rules.tables and the kernels it calls). Spark's part is to run the heavy, per-partition
kernels in its tasks, near the data, so that what reaches the driver is a few rows per segment, producer
and open transaction:

- the decode itself (the Data Sources), where a log dir's partition is read whole and merged into its
  transactions in the same task (txnlog.rules.transactions), and ``__transaction_state`` partitions are
  reduced where they are read (txnlog.rules.coordinator);
- :func:`merged_fragments`: the partitions whose rows were decoded in several tasks (kafka-dump-log.sh files,
  a live cluster's batches, a segment read in pieces) grouped by partition and merged by the same function
  (``groupBy(...).applyInArrow``), every transaction staged for the ``transactions`` table and only those
  the verdicts need kept (txnlog.engine.staging);
- :func:`reduced_records`: ``__transaction_state`` records not reduced where they were read, reduced per
  coordinator partition by the same function;
- :func:`broker_times`: the newest broker-written times (txnlog.broker.as_of), one Arrow function per batch,
  combined with ``max``, in the action that decodes and caches every input.

:func:`collected` then brings the remaining rows to the driver as Arrow tables (list columns only on the
rows that carry them: Spark's row-to-Arrow conversion costs ~0.1 ms per row for each list column, even a
null one), and the tables are built there by the same code as a small input's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from txnlog.broker import as_of
from txnlog.engine.settings import FRAGMENTS_STAGE
from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.engine.spark.stitch import stitch_pieces
from txnlog.engine.staging import merge_partition, reduce_partition
from txnlog.model.rows import KIND_MARKER, KIND_PIECE, KIND_RUN, SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.transactions import KIND_TRANSACTION, Checkpoints
from txnlog.sources import storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: the rows the fragment merge reads (every other kind reaches the driver as it is)
FRAGMENT_KINDS = (KIND_RUN, KIND_MARKER, "segment", "snapshot")
#: the summary's list columns, which only transaction rows fill
LIST_COLUMNS = tuple(f.name for f in SEGMENT_SUMMARY_SCHEMA if pa.types.is_list(f.type))


def merged_fragments(
    summary: DataFrame,
    checkpoints: Checkpoints,
    *,
    stage: str | None,
    fragment_partitions: DataFrame | None = None,
    staged: str | None = None,
    dead: DataFrame | None = None,
) -> DataFrame:
    """The transaction rows of the partitions decoded in fragments, merged per (topic, partition) in tasks by
    :func:`txnlog.engine.staging.merge_partition`: every transaction staged under ``stage`` and
    the ones the verdicts need returned (None: every transaction returned, none staged).
    ``fragment_partitions``: the only (topic, partition)s that may hold fragments (split segments',
    txnlog.sources.splits), so that no other partition's rows are shuffled; None: any. ``staged``: the directory
    the reading tasks staged split partitions' fragments in (the ``fragments_stage`` option,
    txnlog.engine.spark.sources), read here per partition. ``dead``: the ``piece`` rows of the pieces the whole
    walk passes over (txnlog.engine.spark.stitch.stitch_pieces): they go to their partition's merge, which drops
    what those pieces staged (their fragments, and the transactions they finished under ``stage``)."""

    pieces = summary.filter(
        F.col("kind").isin(*FRAGMENT_KINDS) & F.col("topic").isNotNull() & F.col("partition").isNotNull()
    )
    if fragment_partitions is not None:  # a handful of rows: broadcast, the summary is not shuffled for it
        keys = F.broadcast(fragment_partitions.select("topic", "partition"))
        pieces = pieces.join(keys, ["topic", "partition"], "left_semi")
    known = dict(checkpoints)
    # the merge reads no list column (transaction rows' own): see the module doc for their cost
    sent = [f.name for f in SEGMENT_SUMMARY_SCHEMA if not pa.types.is_list(f.type)]
    pieces = pieces.select(*sent)
    if dead is not None:
        pieces = pieces.unionByName(dead.select(*sent))
    settings = {"storage": storage.settings_option()}  # the tasks open the scratch dir as the driver does

    def merge_group(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        storage.configure_from_options(settings)
        return merge_partition(table, known, stage, staged)

    return pieces.groupBy("topic", "partition").applyInArrow(merge_group, arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA))


def reduced_records(records: DataFrame, stage: str) -> DataFrame:
    """``records`` whose ``record`` rows were not reduced where they were read, reduced per coordinator
    partition in tasks by :func:`txnlog.engine.staging.reduce_partition` (every record staged under
    ``stage`` for ``coordinator_history``); other rows as they are."""

    columns = [c for c in records.columns if c != "transitions"]

    settings = {"storage": storage.settings_option()}  # the tasks open the scratch dir as the driver does

    def reduce_group(table: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        storage.configure_from_options(settings)
        return reduce_partition(table, stage)

    recs = records.filter(F.col("kind") == "record").select(*columns)
    # every column nullable: the reduced rows are a subset, but a caller's F.lit column is declared non-null
    out = StructType([StructField(f.name, f.dataType, True) for f in recs.schema.fields])
    out = out.add(StructField("transitions", LongType(), True))
    reduced = recs.groupBy("coordinator_partition").applyInArrow(reduce_group, out)
    others = records.filter(F.col("kind") != "record").select(*columns, F.lit(None).cast("long").alias("transitions"))
    return reduced.unionByName(others)


def broker_times(summary: DataFrame, records: DataFrame | None) -> dict[str, int | None]:
    """The newest broker-written time per source (:func:`txnlog.broker.as_of.broker_times_of`, applied to each Arrow
    batch in tasks and combined by Spark's ``max``), in one action that also decodes and caches both inputs
    when they are persisted (``records`` None: the summary's alone)."""

    schema = ", ".join(f"{s} long" for s in as_of.SOURCES)

    def of_summary(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield _times_batch(as_of.broker_times_of(pa.Table.from_batches([batch]), None))

    def of_records(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield _times_batch(as_of.broker_times_of(None, pa.Table.from_batches([batch])))

    # only the columns the rule reads cross into Python: the rows' other columns (lists above all) would cost
    # far more to convert than the rule does (see the module doc)
    parts = summary.select("kind", "marker_timestamp", "log_append_timestamp").mapInArrow(of_summary, schema)
    if records is not None:
        parts = parts.unionByName(records.select("kind", "record_timestamp").mapInArrow(of_records, schema))
    # one row per batch, combined by Spark's max (nulls skipped, as newest_times does): one row reaches here
    (row,) = parts.agg(*[F.max(s).alias(s) for s in as_of.SOURCES]).collect()
    return as_of.newest_times([row.asDict()])


def _times_batch(times: dict[str, int | None]) -> pa.RecordBatch:
    # in the declared schema's order: mapInArrow matches the batch's columns to it by position, not by name
    return pa.RecordBatch.from_pydict({s: pa.array([times.get(s)], pa.int64()) for s in as_of.SOURCES})


def collected(summary: DataFrame, records: DataFrame) -> tuple[pa.Table, pa.Table]:
    """``summary`` and ``records`` as Arrow tables in this process; the summary's list columns are read
    from its transaction rows only (see the module doc). ``summary`` is computed once (persisted while
    it is read twice: its merge is the expensive part of a split partition)."""

    summary = summary.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        txns = summary.filter(F.col("kind") == KIND_TRANSACTION).toArrow()
        others = summary.filter(F.col("kind") != KIND_TRANSACTION).drop(*LIST_COLUMNS).toArrow()
    finally:
        summary.unpersist()
    others = _with_nulls(others, txns.schema)
    return pa.concat_tables([txns, others.select(txns.column_names)]), records.toArrow()


def decoded_rows(
    summary: DataFrame,
    records: DataFrame,
    checkpoints: Checkpoints,
    *,
    phase: Callable[[str], None],
    cache: Callable[[DataFrame], DataFrame],
    scratch: str,
    splittable: bool,
    whole: bool,
    reduce: bool,
) -> tuple[pa.Table, pa.Table, dict[str, int | None]]:
    """The decode's rows in this process and the broker-written times, each phase's Spark jobs labelled by
    ``phase`` (txnlog.output.spark_base.job_phases). One action decodes every input (caching it with ``cache``): the
    __transaction_state tasks fill the cores while the last big segments are still being walked; it returns the
    times (:func:`broker_times`; a split segment's from its stitched segment row, so its ``piece`` rows are left
    out, and a dead piece's times never count). With ``splittable``, split segments' pieces are then stitched in
    tasks (txnlog.engine.spark.stitch). The fragments are merged (:func:`merged_fragments`) where a partition may
    hold them (``whole``: any partition, else the split ones), with ``reduce`` the coordinator records reduced
    (:func:`reduced_records`), every transaction and record staged under ``scratch``, and the rest collected
    (:func:`collected`)."""

    phase("txnlog: decode")
    summary, records = cache(summary), cache(records)
    times = broker_times(summary.filter(F.col("kind") != KIND_PIECE) if splittable else summary, records)
    stitched = None
    if splittable:
        phase("txnlog: stitch split segments")
        stitched = stitch_pieces(summary, cache)
        times = as_of.newest_times([times, broker_times(stitched.segments, None)])
        summary = stitched.summary
    phase("txnlog: merge and reduce per partition")
    if whole or stitched is not None:
        merged = merged_fragments(
            summary, checkpoints, stage=f"{scratch}/transactions",
            fragment_partitions=None if whole or stitched is None else stitched.partitions,
            staged=f"{scratch}/{FRAGMENTS_STAGE}", dead=None if stitched is None else stitched.dead,
        )  # fmt: skip
        rest = summary.filter(~F.col("kind").isin(KIND_RUN, KIND_MARKER))
        summary = rest.unionByName(merged.withColumn("input", F.lit(None).cast("string")))
    if reduce:  # other inputs may hold the same __transaction_state partitions: reduced together here
        records = reduced_records(records, f"{scratch}/coordinator_history")
    return (*collected(summary, records), times)


def _with_nulls(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` plus ``schema``'s columns it lacks, all null."""
    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table
