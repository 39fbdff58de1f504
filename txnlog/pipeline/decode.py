"""Decoding: the run's settings resolved once from its config, a live run's cut captured, and the placement chosen
(txnlog.engine.spark.placement) called once; it reads every input, merges and reduces per partition, and hands on
Arrow tables (txnlog.engine.decoded.Decoded): in this process for a small input (txnlog.engine.tasks.decode_here),
else in Spark's tasks (txnlog.engine.spark.decode)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from txnlog.engine.decoded import Decoded
from txnlog.engine.settings import Decode, ReadSettings
from txnlog.engine.spark.placement import Placement
from txnlog.engine.tasks import decode_here
from txnlog.live.fetch import FetchSettings
from txnlog.model.words import count
from txnlog.pipeline.inputs import Inputs, file_count
from txnlog.pipeline.scope import Cache, Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.model.config import Config

__all__ = ["Decoded", "capture_live", "decode", "read_settings"]


def decode(
    spark: SparkSession | None,
    config: Config,
    inputs: Inputs,
    placement: Placement,
    *,
    scratch: str,
    cache: Cache,
    progress: Progress,
) -> tuple[Decoded, LiveCut | None]:
    """Read every input with the config's settings where ``placement`` says: in this process for a small input
    (every segment read whole), else in Spark's tasks, a live run's ranges as its cut, captured first, says
    (returned beside the rows: the run's ``as_of`` and what it supersedes)."""
    settings = read_settings(config)
    live_cut = capture_live(config, inputs, config.cluster or "", progress)
    threads = f"{placement.threads} thread{'s' if placement.threads != 1 else ''}"
    where = f"here (a small input), {threads}" if placement.driver else "in Spark"
    progress(f"decoding {file_count(inputs)} files {where}")
    if placement.driver:
        return decode_here(inputs.offline, settings.decode, scratch, placement.threads), live_cut
    assert spark is not None, "an input read in Spark needs a SparkSession"
    # Lazy: pyspark loads only where a run uses Spark.
    from txnlog.engine.spark.decode import decode_in_spark

    decoded = decode_in_spark(
        spark, inputs.offline, inputs.live, settings, scratch=scratch, cache=cache, live_cut=live_cut
    )
    return decoded, live_cut


def read_settings(config: Config) -> ReadSettings:
    """What the decode takes from the run's config, in one value."""
    return ReadSettings(
        Decode(config.check_crc, config.max_decompressed_bytes),
        config.split_segment_bytes,
        dict(config.kafka),
        FetchSettings(max_bytes=config.live_fetch_max_bytes, partition_max_bytes=config.live_fetch_partition_max_bytes),
    )


def capture_live(config: Config, inputs: Inputs, cluster: str, progress: Progress | None = None) -> LiveCut | None:
    """A live run's consistent cut: every data partition's range, captured once before Spark reads (``cluster``:
    the run's cluster, whose previous run a since-last-run read continues)."""
    if not inputs.live:
        return None
    # Lazy: the live cut's module defines Spark's Data Source too (pyspark), and loads only for a live run.
    from txnlog.engine.spark.live_batches import RANGE_SINCE_LAST_RUN, capture_cut

    # who is blocked: the groups' offsets asked right after the cut (a blocked group's committed offset does not move)
    cut = capture_cut(
        inputs.live, dict(config.kafka), config.topics or None, mode=config.live_range,
        lookback_bytes=config.live_lookback_bytes, output=config.output, cluster=cluster,
        groups=True,
    )  # fmt: skip
    if config.live_range == RANGE_SINCE_LAST_RUN and progress:
        progress(
            f"since-last-run: continuing the run of {cut.previous.as_of.isoformat()}"
            if cut.previous is not None
            else f"since-last-run: no earlier live run of cluster {cluster} in {config.output}: reading as 'unstable'"
        )
    if progress:
        moment = datetime.fromtimestamp(cut.as_of_ms / 1000, tz=UTC).isoformat()
        topics = len({r.topic for r in cut.ranges})
        named = 0 if cut.groups is None else len(set(cut.groups["group"].to_pylist()) - {None})
        progress(
            f"live cut at {moment}: {cut.partitions} partitions of {topics} topics, {cut.unstable} with open "
            f"transactions (LSO behind the high watermark); reading range '{config.live_range}'; "
            f"{count(named, 'consumer group')} asked for their offsets"
        )
    return cut
