"""The log dirs' Data Sources for one run (segments, ``__transaction_state``, ``__consumer_offsets``), and their
options: the file lists written as manifests in the run's scratch directory, the shared-storage settings, the plan's
and the tasks' settings (txnlog.engine.plan.Plan, txnlog.engine.settings) as strings. The sources read them back in
txnlog.engine.spark.sources (``FilesReader``)."""

from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from txnlog.engine.consumer_offsets import SOURCE_SCHEMA as OFFSETS_ROWS
from txnlog.engine.consumer_offsets import TOPIC_PARTITIONS
from txnlog.engine.manifest import write_manifest
from txnlog.engine.settings import Decode, log_dir_settings
from txnlog.engine.spark.consumer_offsets_source import ConsumerOffsetsSource
from txnlog.engine.spark.sources import SegmentsSource
from txnlog.engine.spark.txn_state_source import TxnStateSource
from txnlog.model.contract import InputSource
from txnlog.sources import storage
from txnlog.sources.logdirs import Inventory


def _common(decode: Decode, cores: int) -> dict[str, str]:
    return {**decode.options(), "min_partitions": str(max(2, cores * 2)), "storage": storage.settings_option()}


def log_dir_sources(
    spark: SparkSession,
    inv: Inventory,
    decode: Decode,
    scratch: str,
    shared: bool,
    dumps: bool,
    split_segment_bytes: int = 0,
) -> tuple[DataFrame, DataFrame]:
    """The copied log dirs' Data Sources: segment summaries and transactions, coordinator records
    (:func:`log_dir_options` says what ``shared`` and ``dumps`` change)."""
    segments, txn_state = log_dir_options(
        inv, check_crc=decode.check_crc, scratch=scratch, shared=shared, dumps=dumps,
        cores=spark.sparkContext.defaultParallelism, max_decompressed_bytes=decode.max_decompressed_bytes,
        split_segment_bytes=split_segment_bytes,
    )  # fmt: skip
    spark.dataSource.register(SegmentsSource)
    spark.dataSource.register(TxnStateSource)
    summary = spark.read.format(SegmentsSource.name()).options(**segments).load()
    records = spark.read.format(TxnStateSource.name()).options(**txn_state).load()
    return summary.withColumn("input", F.lit(InputSource.SEGMENTS)), records.withColumn(
        "input", F.lit(InputSource.SEGMENTS)
    )


def log_dir_options(
    inv: Inventory,
    *,
    check_crc: bool,
    scratch: str,
    shared: bool,
    dumps: bool,
    cores: int,
    max_decompressed_bytes: int | None,
    split_segment_bytes: int,
) -> tuple[dict[str, str], dict[str, str]]:
    """The options of the segments and ``__transaction_state`` sources for the log dirs ``inv`` lists
    (txnlog.engine.settings.log_dir_settings says what ``shared`` and ``dumps`` change)."""
    decode = Decode(check_crc, max_decompressed_bytes)
    segment_settings, txn_state_settings = log_dir_settings(decode, scratch, shared=shared, dumps=dumps)
    common = {**_common(decode, cores), "cores": str(cores)}  # which segments to split
    # the file lists go to the planning worker as files in the scratch dir, never as options that
    # Spark would ship with every task (txnlog.engine.manifest)
    segments = {
        **write_manifest(f"{scratch}/inputs", "segments", [*inv.segments, *inv.snapshots], inv.checkpoints),
        **segment_settings.options(),
        "split_segment_bytes": str(split_segment_bytes),
    }
    txn_state = {
        **write_manifest(f"{scratch}/inputs", "txn_state", inv.txn_state_segments),
        **txn_state_settings.options(),
    }
    return {**common, **segments}, {**common, **txn_state}


def offsets_options(
    inv: Inventory,
    *,
    check_crc: bool,
    scratch: str,
    cores: int,
    max_decompressed_bytes: int | None,
    wanted: list[tuple[str, int]] | None = None,
) -> dict[str, str]:
    """The options of the ``__consumer_offsets`` source: whole partitions per task (``reduce``), the groups'
    offsets of the ``wanted`` topic partitions only (None: all; txnlog.engine.consumer_offsets.TOPIC_PARTITIONS)."""
    options = {
        **_common(Decode(check_crc, max_decompressed_bytes), cores),
        **write_manifest(f"{scratch}/inputs", "consumer_offsets", inv.consumer_offsets_segments),
        "reduce": "true",
    }
    if wanted is not None:
        options[TOPIC_PARTITIONS] = json.dumps([[topic, partition] for topic, partition in wanted])
    return options


def read_consumer_offsets(
    spark: SparkSession, inv: Inventory, decode: Decode, scratch: str, wanted: list[tuple[str, int]] | None = None
) -> pa.Table:
    """The ``__consumer_offsets`` partitions' rows that ``inv`` lists, read in Spark tasks and collected as Arrow, the
    groups' offsets of the ``wanted`` topic partitions only (None: all; txnlog.engine.decoded.GroupOffsets)."""
    spark.dataSource.register(ConsumerOffsetsSource)
    options = offsets_options(
        inv, check_crc=decode.check_crc, scratch=scratch, cores=spark.sparkContext.defaultParallelism,
        max_decompressed_bytes=decode.max_decompressed_bytes, wanted=wanted,
    )  # fmt: skip
    table = spark.read.format(ConsumerOffsetsSource.name()).options(**options).load().toArrow()
    return table.cast(OFFSETS_ROWS)
