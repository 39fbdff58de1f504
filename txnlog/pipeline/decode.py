"""Decoding: the run's settings resolved once from its config, and the placement chosen (txnlog.engine.spark.placement)
called once; it reads every input, merges and reduces per partition, and hands on Arrow tables
(txnlog.engine.decoded.Decoded): in this process for a small input (txnlog.engine.tasks.decode_here), else in
Spark's tasks (txnlog.engine.spark.decode)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from txnlog.engine.decoded import Decoded
from txnlog.engine.settings import Decode, ReadSettings
from txnlog.engine.spark.placement import Placement
from txnlog.engine.tasks import decode_here
from txnlog.live.fetch import FetchSettings
from txnlog.pipeline.inputs import Inputs
from txnlog.pipeline.scope import Cache

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.model.config import Config

__all__ = ["Decoded", "decode", "read_settings"]


def read_settings(config: Config) -> ReadSettings:
    """What the decode takes from the run's config, in one value."""
    return ReadSettings(
        Decode(config.check_crc, config.max_decompressed_bytes),
        config.split_segment_bytes,
        dict(config.kafka),
        FetchSettings(max_bytes=config.live_fetch_max_bytes, partition_max_bytes=config.live_fetch_partition_max_bytes),
    )


def decode(
    spark: SparkSession | None,
    inputs: Inputs,
    settings: ReadSettings,
    *,
    scratch: str,
    cache: Cache,
    placement: Placement | None = None,
    live_cut: LiveCut | None = None,
) -> Decoded:
    """Read every input with ``settings`` where ``placement`` says: in this process for a small input (every
    segment read whole), else in Spark's tasks (``live_cut``: a live run's ranges)."""
    placement = placement or Placement()
    if placement.driver:
        return decode_here(inputs.offline, settings.decode, scratch, placement.threads)
    assert spark is not None, "an input read in Spark needs a SparkSession"
    # Lazy: pyspark loads only where a run uses Spark.
    from txnlog.engine.spark.decode import decode_in_spark

    return decode_in_spark(
        spark, inputs.offline, inputs.live, settings, scratch=scratch, cache=cache, live_cut=live_cut
    )
