"""A run's inputs, checked before anything is decoded: log dirs, kafka-dump-log.sh files, the live cluster
(and its cut); the run's cluster name; where the run decodes (in Spark, or here for a small input)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.broker.cluster_image import ClusterImage, MetadataSays, furthest, says
from txnlog.engine.spark.placement import Placement, session_cores
from txnlog.live.admin import check_cluster
from txnlog.model.errors import UsageError
from txnlog.model.words import count
from txnlog.pipeline.scope import Progress
from txnlog.sources.cluster_metadata import read_metadata_logs
from txnlog.sources.logdirs import Inventory
from txnlog.sources.offline import Offline, resolve
from txnlog.sources.sample import sample_logs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.model.config import Config


@dataclass(frozen=True)
class Inputs:
    """What a run reads, checked: log dirs (their files), kafka-dump-log.sh files, the live cluster."""

    offline: Offline = field(default_factory=Offline)  # log dirs and kafka-dump-log.sh files
    live: str | None = None  # bootstrap servers whose __transaction_state is read (no offline input)
    live_txn_state: bool = True  # the live cluster has __transaction_state (none before any coordinator was used)
    note: str = ""
    sample: bool = False  # no input was given: the embedded sample cluster
    #: the cluster as the log dirs' KRaft metadata log says it is, and which log dir's (txnlog.broker.cluster_image)
    cluster: tuple[ClusterImage, str] | None = None
    #: what that log says of the copy, worked out once: the ``__transaction_state`` partition count (and what
    #: decided it), the deleted topics, who led and who was in sync (``notes``; None: no metadata log)
    said: MetadataSays = field(default_factory=lambda: MetadataSays(0, "", False, pa.table({}), None))
    #: the run's cluster name, and whether it was made from the input (:func:`cluster_name`)
    name: str = ""
    name_derived: bool = False
    #: where the run decodes (:func:`placement_of`), and whether it then needs no Spark session at all: a small
    #: input in the driver placement whose tables the deltalake writer writes. Spark's part of such a run is only
    #: its start, seconds of JVM for nothing (benchmarks/RESULTS.md, "Startup")
    placement: Placement = Placement()
    without_spark: bool = False

    @property
    def bytes(self) -> int:
        """The offline input's size: log dir files and kafka-dump-log.sh files."""
        return self.offline.inventory.total_bytes + self.offline.dump_bytes

    @property
    def names(self) -> list[str]:
        """The inputs as the runs table lists them."""
        return [*self.offline.logs, *self.offline.dump_log, *([f"kafka://{self.live}"] if self.live else [])]


def plan_inputs(
    config: Config, progress: Progress | None = None, *, sample: bool = True, spark: SparkSession | None = None
) -> Inputs:
    """Every check that needs no Spark, in one place, each failing with one line that says what to do:
    paths and dump files exist and hold Kafka logs, the live cluster answers, --verify-live/--topic have a
    cluster. With no input at all, the embedded sample (written on first use unless ``sample`` is false). The
    inputs come with the run's cluster name and placement (weighed with ``spark``'s cores when given)."""
    if config.topics and config.verify_live and not config.bootstrap_servers:
        raise UsageError(
            f"--topic {config.topics[0]}: needs --bootstrap-servers (the live cluster to ask about it); "
            "give it or drop --topic"
        )
    if config.verify_live and not config.bootstrap_servers:
        raise UsageError(
            "--verify-live: needs --bootstrap-servers (the live cluster to check); give it or drop --verify-live"
        )

    given = bool(config.logs or config.dump_log or config.bootstrap_servers)
    logs = list(config.logs)
    if not given and sample:
        logs = [sample_logs(progress=progress)]
        if progress:
            progress(f"no input given: using the embedded sample cluster at {logs[0]}")
    # with the shared-storage settings, for every later read (a caller's too, where nothing is given)
    offline = resolve(config.storage, logs, list(config.dump_log))
    inventory = offline.inventory
    live = config.bootstrap_servers if config.bootstrap_servers and not logs and not config.dump_log else None
    # before Spark: one line if it cannot be read
    live_txn_state = check_cluster(live, dict(config.kafka)) > 0 if live else True
    metadata_logs = read_metadata_logs(inventory.cluster_metadata) if inventory.cluster_metadata else []
    cluster = furthest(metadata_logs)
    said = says(cluster, config.transaction_state_partitions, dict(inventory.node_ids))
    note = ""
    if given or sample:
        note = describe(
            inventory, len(offline.dump_files), live, (said.txn_state_partitions, said.decided),
            live_txn_state=live_txn_state,
        )  # fmt: skip
        note += _deleted_note(cluster, said.deleted, inventory)
        if progress:
            progress(f"found {note}")
    inputs = Inputs(offline, live, live_txn_state, note, sample=not given and sample, cluster=cluster, said=said)
    return _placed(config, inputs, spark, named=given or sample)


def replanned(
    config: Config, planned: Inputs | None, progress: Progress | None = None, *, spark: SparkSession | None = None
) -> Inputs:
    """The run's inputs: ``planned`` (:func:`plan_inputs` of the same ``config`` without the sample and without
    ``spark``, e.g. the check before a JVM starts) where it names an input and no session weighs the placement, its
    line said now; else planned here. Listing the log dirs again would cost the run a second discovery of every
    file (benchmarks/RESULTS.md §2)."""
    if planned is None or not planned.names or spark is not None:
        return plan_inputs(config, progress, spark=spark)
    if progress:
        progress(f"found {planned.note}")
    return planned


def _placed(config: Config, inputs: Inputs, spark: SparkSession | None, *, named: bool) -> Inputs:
    """``inputs`` with where the run decodes and, where it has an input (``named``), the run's cluster name."""
    name, derived = cluster_name(config.cluster, inputs) if named else (config.cluster or "", False)
    placement = placement_of(config, inputs, spark)
    return dataclasses.replace(
        inputs, name=name, name_derived=derived, placement=placement,
        without_spark=placement.driver and config.delta_writer != "spark",
    )  # fmt: skip


def _deleted_note(cluster: tuple[ClusterImage, str] | None, deleted: pa.Table, inventory: Inventory) -> str:
    """The input note's word on the topics the KRaft metadata log deleted (RemoveTopicRecord), naming those whose
    partitions the copy still holds (the broker deletes their directories asynchronously, renamed ``*-delete``);
    ``deleted``: those not created again (txnlog.broker.cluster_image.deleted_topics)."""
    if cluster is None or not cluster[0].deleted.num_rows:
        return ""
    gone = ", ".join(f"{d['topic']} ({d['partitions']})" for d in cluster[0].deleted.to_pylist())
    note = f"; topics deleted as the KRaft metadata log of {cluster[1]} says: {gone}"
    held = sorted(set(deleted.column("topic").to_pylist()) & {t for t, _ in inventory.data_partitions})
    if held:
        note += f"; the copy still holds partitions of deleted {', '.join(held)}, which no broker serves"
    return note


SAMPLE_CLUSTER = "sample"


def cluster_name(given: str | None, inputs: Inputs) -> tuple[str, bool]:
    """(the run's cluster name, whether it was derived): ``--cluster`` when given, else a name made from the
    input, the same for the same input so that reruns replace their run and ``since-last-run`` finds the
    previous one: ``sample`` for the embedded sample, ``live-<bootstrap servers>`` for a live cluster, else
    ``<first input's name>-<8 hex digits of a hash of every input's absolute path>``."""

    if given:
        return given, False
    if inputs.sample:
        return SAMPLE_CLUSTER, True
    if inputs.live:
        return "live-" + ",".join(sorted(h.strip() for h in inputs.live.split(",") if h.strip())), True
    paths = sorted(p if "://" in p else os.path.abspath(p) for p in (*inputs.offline.logs, *inputs.offline.dump_log))
    first = (inputs.offline.logs or inputs.offline.dump_log)[0].split("=", 1)[-1].rstrip("/\\")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(first) or "input").strip("-") or "input"
    digest = hashlib.sha1("\n".join(paths).encode()).hexdigest()[:8]
    return f"{stem}-{digest}", True


def describe(
    inventory: Inventory,
    dump_files: int,
    live: str | None,
    coordinator: tuple[int, str],
    *,
    live_txn_state: bool = True,
) -> str:
    txn_state_partitions, decided = coordinator
    note = (
        f"{count(len(inventory.segments), 'segment')} and {count(len(inventory.snapshots), 'snapshot')} of "
        f"{count(len(inventory.data_partitions), 'partition')}, "
        f"{count(len(inventory.txn_state_segments), '__transaction_state segment')} "
        f"of {len(inventory.txn_state_partitions)}/{txn_state_partitions} partitions "
        f"on {count(len(inventory.brokers), 'broker')}, {inventory.total_bytes / 2**30:.2f} GiB"
    )
    if decided:
        note += f"; __transaction_state partitions: {decided}"
    if dump_files:
        note += f"; {count(dump_files, 'kafka-dump-log.sh output file')}"
    if live and live_txn_state:
        note += f"; __transaction_state read live from {live}"
    elif live:
        note += (
            f"; {live} has no __transaction_state topic (no transactional producer has used a coordinator yet): the "
            "coordinator state is absent, so a transaction no transactional.id is seen to own is "
            "NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort"
        )
    elif not inventory.txn_state_segments and not dump_files:
        note += (
            "; __transaction_state was not read (no __transaction_state-<n>/ in the input): a transaction no "
            "transactional.id is seen to own is NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort"
        )
    return note


def placement_of(config: Config, inputs: Inputs, spark: SparkSession | None = None) -> Placement:
    """Where a run of ``inputs`` runs (txnlog.engine.spark.placement): the threshold weighs the cores of ``spark``'s
    session (its default parallelism: a cluster's executors' cores), or without one those of the session the run
    would start (``spark.master`` in the config; ``local[*]``: this machine's)."""

    files, live = _log_dir_files(inputs), bool(inputs.live)
    partitions = len(inputs.offline.inventory.data_partitions)
    cores = session_cores(config.spark.get("spark.master"), spark)
    return Placement.for_input(
        inputs.bytes, config.driver_max_bytes, live=live, cores=cores, files=files, partitions=partitions
    )


def _log_dir_files(inputs: Inputs) -> int:
    inv = inputs.offline.inventory
    return len(inv.segments) + len(inv.snapshots) + len(inv.txn_state_segments)


def file_count(inputs: Inputs) -> int:
    return _log_dir_files(inputs) + len(inputs.offline.dump_files)
