"""The options of the log dirs' Data Sources for one run (segments, ``__transaction_state``,
``__consumer_offsets``): the file lists written as manifests in the run's scratch directory, the shared-storage
settings, the decode's limits. The sources read them back in txnlog.engine.spark.sources (``FilesReader``)."""

from __future__ import annotations

import json

from txnlog.engine.spark.collect import FRAGMENTS_STAGE
from txnlog.engine.spark.consumer_offsets_source import TOPIC_PARTITIONS
from txnlog.engine.spark.sources import write_manifest
from txnlog.sources import storage
from txnlog.sources.logdirs import Inventory


def _common(check_crc: bool, cores: int, max_decompressed_bytes: int | None) -> dict[str, str]:
    options = {
        "check_crc": str(check_crc).lower(),
        "min_partitions": str(max(2, cores * 2)),
        "storage": storage.settings_option(),
    }
    if max_decompressed_bytes is not None:
        options["max_decompressed_bytes"] = str(max_decompressed_bytes)
    return options


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
    """The options of the segments and ``__transaction_state`` sources for the log dirs ``inv`` lists. ``shared``:
    other inputs may hold the same partitions (the records are reduced later, not where decoded); ``dumps``:
    kafka-dump-log.sh files may hold replicas too (transactions are merged later, not per task)."""
    common = {**_common(check_crc, cores, max_decompressed_bytes), "cores": str(cores)}  # which segments to split
    # the file lists go to the planning worker as files in the scratch dir, never as options that
    # Spark would ship with every task (txnlog.engine.spark.sources module doc)
    segments = {
        **write_manifest(f"{scratch}/inputs", "segments", [*inv.segments, *inv.snapshots], inv.checkpoints),
        # whole partitions per task, merged into transactions there, unless dumps hold replicas too
        "transactions": str(not dumps).lower(),
        "stage": f"{scratch}/transactions",
        "split_segment_bytes": str(split_segment_bytes),
        # a split partition's fragments, staged per partition for its merge (txnlog.engine.spark.collect)
        "fragments_stage": f"{scratch}/{FRAGMENTS_STAGE}",
    }
    txn_state = {
        **write_manifest(f"{scratch}/inputs", "txn_state", inv.txn_state_segments),
        # reduced where decoded (txnlog.rules.coordinator), unless other inputs hold the same partitions
        "reduce": str(not shared).lower(),
        "stage": f"{scratch}/coordinator_history",
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
    offsets of the ``wanted`` topic partitions only (None: all; consumer_offsets_source.TOPIC_PARTITIONS)."""
    options = {
        **_common(check_crc, cores, max_decompressed_bytes),
        **write_manifest(f"{scratch}/inputs", "consumer_offsets", inv.consumer_offsets_segments),
        "reduce": "true",
    }
    if wanted is not None:
        options[TOPIC_PARTITIONS] = json.dumps([[topic, partition] for topic, partition in wanted])
    return options
