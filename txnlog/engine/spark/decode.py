"""Spark's placement of a run's decode, one call (:func:`decode_in_spark`): every input read by the Data Sources in
Spark's tasks (one action decodes and caches them all), merged and reduced per partition in tasks, the rest
collected as Arrow (txnlog.engine.spark.collect) and handed on as one :class:`~txnlog.engine.decoded.Decoded`.
The local placement's: txnlog.engine.tasks.decode_here; txnlog.pipeline.decode chooses."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from txnlog.broker import as_of as as_of_rule
from txnlog.engine.decoded import Decoded, GroupOffsets, live_offsets
from txnlog.engine.settings import ReadSettings
from txnlog.engine.spark import collect
from txnlog.engine.spark.dump_log import read_dump_logs
from txnlog.engine.spark.live_batches import LiveCut, read_live_batches
from txnlog.engine.spark.live_source import read_live_records
from txnlog.engine.spark.log_dir_options import ReadOffsets, log_dir_sources
from txnlog.engine.spark.stitch import Stitched, stitch_pieces
from txnlog.model.arrow import distinct
from txnlog.model.contract import InputSource
from txnlog.model.rows import KIND_PIECE
from txnlog.output.spark_base import job_description
from txnlog.rules.transactions import checkpoints_of
from txnlog.sources.offline import Offline

#: persists a DataFrame for the run's duration (txnlog.pipeline.scope.Cache)
Persist = Callable[[DataFrame], DataFrame]


def decode_in_spark(
    spark: SparkSession,
    offline: Offline,
    live: str | None,
    settings: ReadSettings,
    *,
    scratch: str,
    cache: Persist,
    live_cut: LiveCut | None = None,
) -> Decoded:
    """Read the ``offline`` inputs and the ``live`` cluster's (bootstrap servers; ``live_cut``: a live run's ranges of
    the data partitions, read with ``settings.fetch``'s bounds) in Spark's tasks; segments above
    ``settings.split_segment_bytes`` are read in pieces (txnlog.sources.splits; 0: never) and stitched into what a
    whole read gives."""

    shared = bool(offline.dump_files or live)  # other inputs may hold the same partitions
    inv = offline.inventory
    summary, records, read_offsets = log_dir_sources(
        spark, inv, settings.decode, scratch, shared, bool(offline.dump_files), settings.split_segment_bytes
    )
    if offline.dump_files:
        frames = read_dump_logs(spark, offline.dump_inputs)
        summary = summary.unionByName(frames.summary.withColumn("input", F.lit(InputSource.DUMP_LOG)))
        dumped = frames.records.withColumn("input", F.lit(InputSource.DUMP_LOG))
        records = records.unionByName(dumped, allowMissingColumns=True)
    if live:
        records = records.unionByName(read_live_records(spark, live, settings.kafka), allowMissingColumns=True)
        if live_cut is not None:
            summary = summary.unionByName(read_live_batches(spark, live, live_cut, settings))
    split = settings.split_segment_bytes
    splittable = split > 0 and any(f.size > split for f in inv.segments)
    summary, records, times, stitched = _decoded_and_stitched(spark, summary, records, cache, splittable)
    whole = bool(offline.dump_files or live_cut is not None)  # every partition may hold fragments
    with job_description(spark, "txnlog: merge and reduce per partition"):
        checkpoints = [*inv.checkpoints, *(live_cut.checkpoints() if live_cut else ())]
        summary_table, records_table = collect.merged_and_collected(
            summary, records, checkpoints_of(checkpoints), scratch=scratch, merge=whole or stitched is not None,
            fragment_partitions=None if whole or stitched is None else stitched.partitions, reduce=shared,
            dead=None if stitched is None else stitched.dead,
        )  # fmt: skip
    # the __transaction_state partitions the input holds: the log dirs' (listed), and those other inputs gave
    read = set(inv.txn_state_partitions) | distinct(records_table.column("coordinator_partition"))
    return Decoded(
        summary_table, records_table, times, txn_state_read=frozenset(read),
        checkpoints=tuple(checkpoints), history_bounds=live_cut.history_bounds() if live_cut else None,
        offsets=_group_offsets(spark, live_cut, read_offsets),
    )  # fmt: skip


def _decoded_and_stitched(
    spark: SparkSession, summary: DataFrame, records: DataFrame, cache: Persist, splittable: bool
) -> tuple[DataFrame, DataFrame, dict[str, int | None], Stitched | None]:
    """One action decodes (and caches) every input: the __transaction_state tasks fill the cores while the last
    big segments are still being walked. It returns the broker-written times (a split segment's: from its stitched
    segment row, so its ``piece`` rows are left out, and a dead piece's times never count). Split segments' pieces
    are then stitched in tasks, the stitch's few rows cached for their several uses (txnlog.engine.spark.stitch)."""

    with job_description(spark, "txnlog: decode"):
        summary, records = cache(summary), cache(records)
        whole = summary.filter(F.col("kind") != KIND_PIECE) if splittable else summary
        times = collect.broker_times(whole, records)
    if not splittable:
        return summary, records, times, None
    with job_description(spark, "txnlog: stitch split segments"):
        stitched = stitch_pieces(summary, cache)
        times = as_of_rule.newest_times([times, collect.broker_times(stitched.segments, None)])
    return stitched.summary, records, times, stitched


def _group_offsets(
    spark: SparkSession, live_cut: LiveCut | None, read_offsets: ReadOffsets | None
) -> GroupOffsets | pa.Table | None:
    """The consumer groups' committed offsets: a live run's from the admin APIs' answers, else the copy's
    ``__consumer_offsets`` partitions, read in Spark when a step asks (txnlog.engine.decoded.GroupOffsets)."""
    if live_cut is not None and live_cut.groups is not None:
        return live_offsets(live_cut.groups)
    if read_offsets is None:
        return None

    def read(wanted: list[tuple[str, int]]) -> pa.Table:
        with job_description(spark, "txnlog: consumer groups' offsets"):
            return read_offsets(wanted)

    return GroupOffsets(read)
