"""Decoding: every input read by the Data Sources (in Spark tasks, or in this process for a small input),
merged and reduced per partition, and handed on as Arrow tables (:class:`Decoded`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from txnlog.broker import as_of as as_of_rule
from txnlog.engine.consumer_offsets import SOURCE_SCHEMA as OFFSETS_ROWS
from txnlog.engine.settings import Decode
from txnlog.engine.spark.placement import Placement
from txnlog.engine.tasks import log_dir_jobs, offsets_jobs, run_here
from txnlog.kafka.record_batch import release_output_blocks
from txnlog.live.fetch import FetchSettings
from txnlog.model.contract import InputSource
from txnlog.model.rows import KIND_PIECE, Checkpoint
from txnlog.pipeline.inputs import Inputs
from txnlog.pipeline.offsets import GroupOffsets
from txnlog.pipeline.scope import Cache, job_description
from txnlog.rules.transactions import checkpoints_of
from txnlog.sources.logdirs import Inventory

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.engine.spark.stitch import Stitched
    from txnlog.model.config import Config


@dataclass(frozen=True)
class Decoded:
    """The Data Sources' outputs as Arrow tables, and what the decode found out on the way: everything the
    tables are built from besides the run's ``as_of`` and thresholds (txnlog.pipeline.build)."""

    summary: pa.Table  # segment / quarantine / transaction / producer / snapshot rows (fragments: below)
    records: pa.Table  # __transaction_state records (reduced unless ``records_reduced`` is false)
    #: the newest broker-written time per source (txnlog.broker.as_of)
    times: dict[str, int | None] = field(default_factory=dict)
    fragments: bool = True  # summary may hold fragments still to merge into transactions
    records_reduced: bool = False  # records were reduced where decoded (txnlog.rules.coordinator)
    txn_state_read: frozenset[int] = frozenset()  # the __transaction_state partitions the input holds
    #: the only partitions with fragments to merge (split segments' only: txnlog.sources.splits); None: any
    fragment_partitions: frozenset[tuple[str, int]] | None = None
    checkpoints: tuple[Checkpoint, ...] = ()  # the log dirs' and a live cut's checkpoint files
    history_bounds: pa.Table | None = None  # a live run's bounds of the transactions it writes (LiveCut)
    #: the __consumer_offsets partitions' groups: offsets, members, quarantine
    #: (txnlog.engine.consumer_offsets.SOURCE_SCHEMA), read when a step asks (txnlog.pipeline.offsets); a live
    #: run's answers as a table
    offsets: GroupOffsets | pa.Table | None = None


def decode(
    spark: SparkSession | None,
    inputs: Inputs,
    *,
    check_crc: bool,
    kafka: dict[str, Any],
    scratch: str,
    cache: Cache,
    placement: Placement | None = None,
    live_cut: LiveCut | None = None,
    fetch: FetchSettings | None = None,
    max_decompressed_bytes: int | None = None,
    split_segment_bytes: int = 0,
) -> Decoded:
    """Read every input with the Data Sources (one action decodes and caches them all), in Spark tasks or, for a
    small input, in this process (``placement``); in Spark, merge and reduce per partition in tasks and collect the
    rest as Arrow (txnlog.engine.spark.collect). ``live_cut``: a live run's ranges, read with ``fetch``'s bounds.
    ``max_decompressed_bytes``: what one file's compressed batches may expand to. ``split_segment_bytes``: segments
    above it are read in pieces (txnlog.sources.splits; 0: never) and stitched into what a whole read gives."""

    placement = placement or Placement()
    if placement.driver:
        return decode_here(inputs, check_crc, scratch, max_decompressed_bytes, placement.threads)
    assert spark is not None, "an input read in Spark needs a SparkSession"
    shared = bool(inputs.offline.dump_files or inputs.live)  # other inputs may hold the same partitions
    offline = inputs.offline
    summary, records = log_dir_sources(
        spark, offline.inventory, check_crc, scratch, shared, bool(offline.dump_files), max_decompressed_bytes,
        split_segment_bytes,
    )  # fmt: skip
    summary, records = _other_inputs(spark, inputs, summary, records, kafka)
    if inputs.live and live_cut is not None:
        summary = summary.unionByName(
            _live_batches(spark, inputs.live, kafka, live_cut, check_crc, fetch, max_decompressed_bytes)
        )
    from txnlog.engine.spark import collect

    splittable = split_segment_bytes > 0 and any(f.size > split_segment_bytes for f in offline.inventory.segments)
    summary, records, times, stitched = _decoded_and_stitched(spark, summary, records, cache, splittable)
    whole = bool(inputs.offline.dump_files or live_cut is not None)  # every partition may hold fragments
    with job_description(spark, "txnlog: merge and reduce per partition"):
        checkpoints = [*inputs.offline.inventory.checkpoints, *(live_cut.checkpoints() if live_cut else ())]
        summary_table, records_table = collect.merged_and_collected(
            summary, records, checkpoints_of(checkpoints), scratch=scratch, merge=whole or stitched is not None,
            fragment_partitions=None if whole or stitched is None else stitched.partitions, reduce=shared,
            dead=None if stitched is None else stitched.dead,
        )  # fmt: skip
    offsets = _group_offsets(spark, inputs, live_cut, check_crc, scratch, max_decompressed_bytes)
    return Decoded(
        summary_table, records_table, times, fragments=False, records_reduced=True,
        txn_state_read=_txn_state_read(inputs, records_table), checkpoints=tuple(checkpoints),
        history_bounds=live_cut.history_bounds() if live_cut else None, offsets=offsets,
    )  # fmt: skip


def _decoded_and_stitched(
    spark: SparkSession, summary: DataFrame, records: DataFrame, cache: Cache, splittable: bool
) -> tuple[DataFrame, DataFrame, dict[str, int | None], Stitched | None]:
    """One action decodes (and caches) every input: the __transaction_state tasks fill the cores while the last
    big segments are still being walked. It returns the broker-written times (a split segment's: from its stitched
    segment row). Split segments' pieces are then stitched in tasks, the stitch's few rows cached for their several
    uses (txnlog.engine.spark.stitch)."""
    from txnlog.engine.spark import collect

    with job_description(spark, "txnlog: decode"):
        summary, records = cache(summary), cache(records)
        times = collect.broker_times(_without_pieces(summary) if splittable else summary, records)
    if not splittable:
        return summary, records, times, None
    from txnlog.engine.spark.stitch import stitch_pieces

    with job_description(spark, "txnlog: stitch split segments"):
        stitched = stitch_pieces(summary, cache)
        times = as_of_rule.newest_times([times, collect.broker_times(stitched.segments, None)])
    return stitched.summary, records, times, stitched


def _group_offsets(
    spark: SparkSession,
    inputs: Inputs,
    live_cut: LiveCut | None,
    check_crc: bool,
    scratch: str,
    max_decompressed_bytes: int | None,
) -> GroupOffsets | pa.Table | None:
    """The consumer groups' committed offsets: a live run's from the admin APIs' answers, else the copy's
    ``__consumer_offsets`` partitions, read in Spark when a step asks (txnlog.pipeline.offsets)."""
    if live_cut is not None and live_cut.groups is not None:
        return live_offsets(live_cut.groups)
    inv = inputs.offline.inventory
    if not inv.consumer_offsets_segments:
        return None

    def read(wanted: list[tuple[str, int]]) -> pa.Table:
        with job_description(spark, "txnlog: consumer groups' offsets"):
            table = consumer_offsets(spark, inv, check_crc, scratch, max_decompressed_bytes, wanted)
        assert table is not None  # the input holds __consumer_offsets partitions
        return table

    return GroupOffsets(read)


def live_offsets(groups: pa.Table) -> pa.Table:
    """A live cluster's groups (txnlog.live.groups.GROUPS_SCHEMA) as the ``__consumer_offsets`` source's rows
    (txnlog.engine.consumer_offsets.SOURCE_SCHEMA; what a live answer lacks is null): one rule reads both."""
    n = groups.num_rows
    columns = {f.name: groups[f.name] if f.name in groups.column_names else pa.nulls(n, f.type) for f in OFFSETS_ROWS}
    return pa.table(columns).cast(OFFSETS_ROWS)


def consumer_offsets(
    spark: SparkSession,
    inv: Inventory,
    check_crc: bool,
    scratch: str,
    max_decompressed_bytes: int | None,
    wanted: list[tuple[str, int]] | None = None,
) -> pa.Table | None:
    """The ``__consumer_offsets`` partitions' rows, read in Spark tasks and collected as Arrow, the groups'
    offsets of the ``wanted`` topic partitions only (None: all; txnlog.pipeline.offsets); None when the input
    holds none of these partitions."""
    from txnlog.engine.spark.consumer_offsets_source import ConsumerOffsetsSource
    from txnlog.engine.spark.log_dir_options import offsets_options

    if not inv.consumer_offsets_segments:
        return None
    spark.dataSource.register(ConsumerOffsetsSource)
    options = offsets_options(
        inv, check_crc=check_crc, scratch=scratch, cores=spark.sparkContext.defaultParallelism,
        max_decompressed_bytes=max_decompressed_bytes, wanted=wanted,
    )  # fmt: skip
    table = spark.read.format(ConsumerOffsetsSource.name()).options(**options).load().toArrow()
    return table.cast(OFFSETS_ROWS)


def _txn_state_read(inputs: Inputs, records: pa.Table) -> frozenset[int]:
    """The ``__transaction_state`` partitions the input holds: the log dirs' (listed), and those of the
    records other inputs gave."""
    read = set(inputs.offline.inventory.txn_state_partitions)
    read |= set(records.column("coordinator_partition").drop_null().to_pylist())
    return frozenset(read)


def _without_pieces(summary: DataFrame) -> DataFrame:
    """``summary`` less its split segments' ``piece`` rows (their times count once stitched: a dead piece's not)."""
    from pyspark.sql import functions as F

    return summary.filter(F.col("kind") != KIND_PIECE)


def log_dir_sources(
    spark: SparkSession,
    inv: Inventory,
    check_crc: bool,
    scratch: str,
    shared: bool,
    dumps: bool,
    max_decompressed_bytes: int | None = None,
    split_segment_bytes: int = 0,
) -> tuple[DataFrame, DataFrame]:
    """The copied log dirs' Data Sources: segment summaries and transactions, coordinator records."""
    from pyspark.sql import functions as F

    from txnlog.engine.spark.log_dir_options import log_dir_options
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import TxnStateSource

    segments, txn_state = log_dir_options(
        inv, check_crc=check_crc, scratch=scratch, shared=shared, dumps=dumps,
        cores=spark.sparkContext.defaultParallelism, max_decompressed_bytes=max_decompressed_bytes,
        split_segment_bytes=split_segment_bytes,
    )  # fmt: skip
    spark.dataSource.register(SegmentsSource)
    spark.dataSource.register(TxnStateSource)
    summary = spark.read.format(SegmentsSource.name()).options(**segments).load()
    records = spark.read.format(TxnStateSource.name()).options(**txn_state).load()
    return summary.withColumn("input", F.lit(InputSource.SEGMENTS)), records.withColumn(
        "input", F.lit(InputSource.SEGMENTS)
    )


def decode_here(
    inputs: Inputs, check_crc: bool, scratch: str, max_decompressed_bytes: int | None, threads: int = 1
) -> Decoded:
    """:func:`decode` of a small input in this process, no Spark query: the per-partition task functions the
    Data Sources call (txnlog.engine.tasks) run here by ``threads`` threads (txnlog.engine.tasks.run_here), the
    dumps read by txnlog.engine.spark.dump_log.read_dump_logs_here on as many threads, Arrow tables returned.
    Every segment is read whole (split segments are for Spark's tasks)."""

    shared = bool(inputs.offline.dump_files)  # a live input is never read here (Placement.for_input)
    decode = Decode(check_crc, max_decompressed_bytes)
    jobs = log_dir_jobs(inputs.offline.inventory, decode, scratch, shared=shared, dumps=shared, threads=threads)
    summary, records = run_here(jobs, threads)
    summary, records = _labelled(summary, InputSource.SEGMENTS), _labelled(records, InputSource.SEGMENTS)
    release_output_blocks(trim=True)  # the tables' build and writes come next in this process
    read = set(inputs.offline.inventory.txn_state_partitions)
    if inputs.offline.dump_files:
        from txnlog.engine.spark.dump_log import read_dump_logs_here

        dumped, dumped_records = read_dump_logs_here(list(inputs.offline.dump_log), threads)
        summary = pa.concat_tables([summary, _labelled(dumped, InputSource.DUMP_LOG)], promote_options="default")
        dumped_records = _labelled(dumped_records, InputSource.DUMP_LOG)
        records = pa.concat_tables([records, dumped_records], promote_options="default")
        read |= set(records.column("coordinator_partition").drop_null().to_pylist())
    return Decoded(
        summary, records, as_of_rule.broker_times_of(summary, records), fragments=shared,
        fragment_partitions=None, records_reduced=not shared, txn_state_read=frozenset(read),
        checkpoints=tuple(inputs.offline.inventory.checkpoints),
        offsets=_offsets_here(inputs.offline.inventory, decode, threads),
    )  # fmt: skip


def _offsets_here(inv: Inventory, decode: Decode, threads: int) -> GroupOffsets | None:
    """The ``__consumer_offsets`` partitions' rows, read in this process by ``threads`` threads when a step asks
    (txnlog.pipeline.offsets); None when the input holds none of these partitions."""
    if not inv.consumer_offsets_segments:
        return None

    def read(wanted: list[tuple[str, int]]) -> pa.Table:
        return run_here(offsets_jobs(inv, decode, threads=threads, wanted=wanted), threads)[0]

    return GroupOffsets(read)


def _labelled(table: Any, source: InputSource) -> Any:
    """``table`` (Arrow) with its ``input`` column: which input its rows came from."""

    return table.append_column("input", pa.repeat(pa.scalar(source.value, pa.string()), table.num_rows))


def _other_inputs(
    spark: SparkSession,
    inputs: Inputs,
    summary: DataFrame,
    records: DataFrame,
    kafka: dict[str, Any],
) -> tuple[DataFrame, DataFrame]:
    """``summary`` and ``records`` plus the kafka-dump-log.sh files' and the live cluster's rows."""
    from pyspark.sql import functions as F

    if inputs.offline.dump_files:
        from txnlog.engine.spark.dump_log import read_dump_logs

        frames = read_dump_logs(spark, list(inputs.offline.dump_log))
        summary = summary.unionByName(frames.summary.withColumn("input", F.lit(InputSource.DUMP_LOG)))
        dumped = frames.records.withColumn("input", F.lit(InputSource.DUMP_LOG))
        records = records.unionByName(dumped, allowMissingColumns=True)
    if inputs.live:
        from txnlog.engine.spark.live_source import LiveTxnStateSource, live_options, register_live_source

        register_live_source(spark)
        live = spark.read.format(LiveTxnStateSource.name()).options(**live_options(inputs.live, kafka)).load()
        records = records.unionByName(live.withColumn("input", F.lit(InputSource.LIVE_LOG)), allowMissingColumns=True)
    return summary, records


def _live_batches(
    spark: SparkSession,
    bootstrap: str,
    kafka: dict[str, Any],
    cut: LiveCut,
    check_crc: bool,
    fetch: FetchSettings | None,
    max_decompressed_bytes: int | None = None,
) -> DataFrame:
    """The live data partitions' batches (the Kafka source), as segment-summary rows."""
    from pyspark.sql import functions as F

    from txnlog.engine.spark.live_batches import LiveBatchesSource, batches_options

    spark.dataSource.register(LiveBatchesSource)
    options = batches_options(
        bootstrap, kafka, cut, settings=fetch, check_crc=check_crc,
        min_partitions=max(2, spark.sparkContext.defaultParallelism), max_decompressed_bytes=max_decompressed_bytes,
    )  # fmt: skip
    df = spark.read.format(LiveBatchesSource.name()).options(**options).load()
    return df.withColumn("input", F.lit(InputSource.LIVE_LOG))


def fetch_settings(config: Config) -> FetchSettings:

    return FetchSettings(
        max_bytes=config.live_fetch_max_bytes, partition_max_bytes=config.live_fetch_partition_max_bytes
    )
