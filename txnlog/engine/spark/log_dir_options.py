"""The log dirs' Data Sources for one run (segments, ``__transaction_state``, ``__consumer_offsets``), and their
options: the file lists written as manifests in the run's scratch directory, the shared-storage settings, the plan's
and the tasks' settings (txnlog.engine.plan.Plan, txnlog.engine.settings) as strings. The sources read them back in
txnlog.engine.spark.sources (``FilesReader``)."""

from __future__ import annotations

import json
from collections.abc import Callable

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


#: the ``__consumer_offsets`` partitions' rows read in Spark for the topic partitions given (None: every one)
ReadOffsets = Callable[[list[tuple[str, int]] | None], pa.Table]


def log_dir_sources(
    spark: SparkSession,
    inv: Inventory,
    decode: Decode,
    scratch: str,
    shared: bool,
    dumps: bool,
    split_segment_bytes: int = 0,
) -> tuple[DataFrame, DataFrame, ReadOffsets | None]:
    """The copied log dirs' Data Sources: segment summaries and transactions, coordinator records
    (:func:`log_dir_options` says what ``shared`` and ``dumps`` change), and the ``__consumer_offsets`` partitions'
    rows as a function of the topic partitions whose groups' offsets are wanted, read in Spark when a step asks (None:
    the copy holds no such partition; txnlog.engine.decoded.GroupOffsets). The sources' manifests are written once,
    here."""
    segments, txn_state, offsets = log_dir_options(
        inv, check_crc=decode.check_crc, scratch=scratch, shared=shared, dumps=dumps,
        cores=spark.sparkContext.defaultParallelism, max_decompressed_bytes=decode.max_decompressed_bytes,
        split_segment_bytes=split_segment_bytes,
    )  # fmt: skip
    spark.dataSource.register(SegmentsSource)
    spark.dataSource.register(TxnStateSource)
    summary = spark.read.format(SegmentsSource.name()).options(**segments).load()
    records = spark.read.format(TxnStateSource.name()).options(**txn_state).load()

    def read_offsets(wanted: list[tuple[str, int]] | None) -> pa.Table:
        spark.dataSource.register(ConsumerOffsetsSource)
        options = {**offsets, **({} if wanted is None else {TOPIC_PARTITIONS: _pairs(wanted)})}
        return spark.read.format(ConsumerOffsetsSource.name()).options(**options).load().toArrow().cast(OFFSETS_ROWS)

    summary, records = (frame.withColumn("input", F.lit(InputSource.SEGMENTS)) for frame in (summary, records))
    return summary, records, read_offsets if inv.consumer_offsets_segments else None


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
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The options of the segments, ``__transaction_state`` and ``__consumer_offsets`` sources for the log dirs
    ``inv`` lists (txnlog.engine.settings.log_dir_settings says what ``shared`` and ``dumps`` change); the last reads
    whole partitions (``reduce``) and every group's offsets unless told the topic partitions wanted
    (txnlog.engine.consumer_offsets.TOPIC_PARTITIONS)."""
    decode = Decode(check_crc, max_decompressed_bytes)
    segment_settings, txn_state_settings = log_dir_settings(decode, scratch, shared=shared, dumps=dumps)
    common = {**_common(decode, cores), "cores": str(cores)}  # which segments to split
    # the file lists go to the planning worker as files in the scratch dir, never as options that
    # Spark would ship with every task (txnlog.engine.manifest)
    manifests = f"{scratch}/inputs"
    segments = {
        **write_manifest(manifests, "segments", [*inv.segments, *inv.snapshots], inv.checkpoints),
        **segment_settings.options(),
        "split_segment_bytes": str(split_segment_bytes),
    }
    txn_state = {**write_manifest(manifests, "txn_state", inv.txn_state_segments), **txn_state_settings.options()}
    offsets = {
        **_common(decode, cores),
        **write_manifest(manifests, "consumer_offsets", inv.consumer_offsets_segments),
        "reduce": "true",
    }
    return {**common, **segments}, {**common, **txn_state}, offsets


def _pairs(wanted: list[tuple[str, int]]) -> str:
    return json.dumps([[topic, partition] for topic, partition in wanted])
