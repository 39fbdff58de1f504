"""Spark's placement of a run's decode, one call (:func:`decode_in_spark`): every input read by the Data Sources in
Spark's tasks (one action decodes and caches them all), merged and reduced per partition in tasks, the rest
collected as Arrow (txnlog.engine.spark.collect) and handed on as one :class:`~txnlog.engine.decoded.Decoded`.
The local placement's: txnlog.engine.tasks.decode_here; txnlog.pipeline.decode chooses."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from txnlog.engine.decoded import Decoded, GroupOffsets, live_offsets
from txnlog.engine.settings import ReadSettings
from txnlog.engine.spark import collect
from txnlog.engine.spark.dump_log import read_dump_logs
from txnlog.engine.spark.live_batches import LiveCut, read_live_batches
from txnlog.engine.spark.live_source import read_live_records
from txnlog.engine.spark.log_dir_options import ReadOffsets, log_dir_sources
from txnlog.model.arrow import distinct
from txnlog.model.contract import InputSource
from txnlog.output.spark_base import job_description, job_phases
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
    checkpoints = [*inv.checkpoints, *(live_cut.checkpoints() if live_cut else ())]
    offsets = _group_offsets(spark, live_cut, read_offsets)  # read when a step asks
    with job_phases(spark) as phase:
        summary_table, records_table, times = collect.decoded_rows(
            summary, records, checkpoints_of(checkpoints), phase=phase, cache=cache, scratch=scratch,
            splittable=splittable, whole=bool(offline.dump_files or live_cut is not None), reduce=shared,
        )  # fmt: skip
    # the __transaction_state partitions the input holds: the log dirs' (listed), and those other inputs gave
    read = set(inv.txn_state_partitions) | distinct(records_table.column("coordinator_partition"))
    return Decoded(
        summary_table, records_table, times, txn_state_read=frozenset(read),
        checkpoints=tuple(checkpoints), history_bounds=live_cut.history_bounds() if live_cut else None,
        offsets=offsets,
    )  # fmt: skip


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
