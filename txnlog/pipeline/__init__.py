"""The nightly job as a library call: inputs → Spark → verdicts → Delta tables.

``jobs/find_hanging.py``, the ``txnlog`` CLI and the notebooks all call :func:`run`, or the steps it
is made of, so what a notebook shows is what the nightly job writes::

    plan_inputs(config)         every check that needs no Spark (paths, dump files, the live cluster)
    decode(spark, inputs, ...)  the Data Sources (reduced per partition in tasks), collected as Arrow
    resolve_as_of(...)          "now": never a client's clock (txnlog.broker.as_of)
    build_tables(...)           one function per output table (txnlog.rules.tables)
    verify_live(...)            --verify-live: rows from the live cluster's admin APIs
    write(...)                  the Delta tables, one commit each (txnlog.output.delta)
    summarize(...)              the RunResult and the runs row

Example::

    from txnlog.model.config import load_config
    from txnlog.pipeline import run
    result = run(load_config(None, {"logs": ["/data/kafka-logs"]}))
    print(result.summary_text())
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog import __version__
from txnlog.broker import as_of as as_of_rule
from txnlog.broker import classify
from txnlog.engine import staging
from txnlog.engine.spark.placement import Placement, master_cores, read_all_here
from txnlog.engine.spark.session import get_session
from txnlog.engine.spark.staged_table import StagedTable
from txnlog.kafka import jit
from txnlog.kafka.crc import crc32c
from txnlog.kafka.framing import whole_entries
from txnlog.kafka.record_batch import release_output_blocks
from txnlog.live.admin import check_cluster
from txnlog.live.fetch import FetchSettings
from txnlog.live.verify import live_rows
from txnlog.model.contract import RUNS, InputSource
from txnlog.model.errors import UsageError
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, Checkpoint
from txnlog.model.words import count
from txnlog.output import delta, delta_retention, output_dir, retention
from txnlog.output.delta import Supersede
from txnlog.output.spark_base import temporary_conf
from txnlog.rules import tables
from txnlog.rules.transactions import checkpoints_of
from txnlog.sources import storage
from txnlog.sources.logdirs import LOGS_EXPECTED, NOTHING, Inventory, discover, locate, looks_like_dump_log
from txnlog.sources.sample import sample_logs

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.engine.spark.placement import Placement
    from txnlog.live.fetch import FetchSettings
    from txnlog.model.config import Config

Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(f"[txnlog] {message}", file=sys.stderr, flush=True)


@dataclass
class RunResult:
    run_id: str
    cluster: str
    as_of: datetime
    output: str
    counts: dict[str, int]
    verdicts: list[tuple[str, str, int]] = field(default_factory=list)  # (verdict, reason, count)
    worst_partitions: list[dict[str, Any]] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    inventory_note: str = ""
    as_of_source: str = ""  # --as-of / markers / transaction_state / log_append_time (txnlog.broker.as_of)
    cluster_derived: bool = False  # the name was made from the input (no --cluster)

    def summary_text(self) -> str:
        lines = [
            f"txnlog {__version__}: run {self.run_id} of cluster '{self.cluster}'"
            f"{' (named after the input; --cluster names it)' if self.cluster_derived else ''} as of "
            f"{self.as_of.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            f"{f' (from {self.as_of_source})' if self.as_of_source else ''} ({self.seconds:.1f} s)",
        ]
        if self.inventory_note:
            lines.append(f"  input: {self.inventory_note}")
        lines.append(
            "  transactions: {transactions}   findings: {findings}   abort recommendations: "
            "{abort_recommendations}   quarantined regions: {quarantine}".format(
                **{
                    **dict.fromkeys(("transactions", "findings", "abort_recommendations", "quarantine"), 0),
                    **self.counts,
                }
            )
        )
        if self.verdicts:
            lines.append("  findings by verdict:")
            for verdict, reason, n in self.verdicts:
                lines.append(f"    {verdict:8s} {reason:30s} {n}")
        else:
            lines.append("  no late or hanging transactions")
        if self.worst_partitions:
            lines.append("  worst partitions (by LSO lag):")
            for p in self.worst_partitions:
                lines.append(
                    f"    {p['topic']}-{p['partition']}: lso_lag {p['lso_lag']}, {p['open_transactions']} open, "
                    f"oldest open {classify._duration(p['max_open_ms'])}"
                )
        lines.append(f"  tables: {os.path.abspath(self.output)}/<table> (Delta): " + ", ".join(sorted(self.counts)))
        return "\n".join(lines)


def check_inputs(paths: list[str]) -> Inventory:
    """Discover logs under ``paths`` or raise a one-line UsageError saying what to do: each path is a log
    dir, a directory of them, a partition directory or a segment/snapshot file (txnlog.sources.logdirs.locate);
    kafka-dump-log.sh text is pointed at --dump-log."""

    located = {}
    try:
        for p in paths:
            try:
                found = located[p] = locate(p)
            except OSError as e:  # a symlink loop, a directory without read permission, a vanished file
                raise _unreadable(p, e) from e
            if found.kind != NOTHING:
                continue
            if storage.exists(p) and looks_like_dump_log(p):
                raise UsageError(
                    f"--logs {p}: {'holds ' if storage.isdir(p) else 'is '}kafka-dump-log.sh output, not Kafka's "
                    f"log files; use --dump-log {p}"
                )
            raise UsageError(f"--logs {p}: {found.problem}")
        try:
            inventory = discover(paths, located)
        except OSError as e:
            raise _unreadable(", ".join(paths), e) from e
    except storage.StorageError as e:  # shared storage refused or lacks the path (txnlog.sources.storage)
        raise UsageError(f"--logs {e}") from e
    if not inventory.segments and not inventory.txn_state_segments:
        raise UsageError(
            f"--logs {', '.join(paths)}: no Kafka logs found (expected <topic>-<partition>/ directories holding "
            f"0000….log segments); {LOGS_EXPECTED}"
        )
    return inventory


def _unreadable(given: str, e: OSError) -> UsageError:
    where = e.filename or given
    return UsageError(
        f"--logs {given}: cannot read {where}: {e.strerror or e}; fix that path (a symlink loop, missing read "
        "permission) or give --logs the directories to read without it"
    )


# Spark caches a DataFrame's plan with adaptive execution switched off unless this is true, so every
# shuffle inside the cached intermediates of build_tables would run spark.sql.shuffle.partitions
# tasks and plan its joins without statistics (sort-merge joins) for a few thousand rows. With it,
# adaptive execution coalesces those shuffles and broadcasts the small sides (benchmarks/RESULTS.md E1).
# spark.sql.maxPlanStringLength: adaptive execution renders every re-planned query as a string (for the
# UI/event log); the table queries read several cached intermediates, whose plans are rendered inside
# theirs, and the unbounded string filled a 1 GiB driver heap on kafka-dump-log.sh input. 1 MB keeps
# the event log useful.
RUN_CONF: dict[str, str] = {
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    "spark.sql.maxPlanStringLength": "1000000",
}


# --- 1. plan_inputs: everything that needs no Spark ---------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What a run reads, checked: log dirs (their files), kafka-dump-log.sh files, the live cluster."""

    logs: tuple[str, ...] = ()
    inventory: Inventory = field(default_factory=Inventory)
    dump_log: tuple[str, ...] = ()  # the --dump-log values (NAME=PATH kept)
    dump_files: tuple[str, ...] = ()
    live: str | None = None  # bootstrap servers whose __transaction_state is read (no offline input)
    note: str = ""
    dump_bytes: int = 0  # the kafka-dump-log.sh files' size
    sample: bool = False  # no input was given: the embedded sample cluster

    @property
    def bytes(self) -> int:
        """The offline input's size: log dir files and kafka-dump-log.sh files."""
        return self.inventory.total_bytes + self.dump_bytes

    @property
    def names(self) -> list[str]:
        """The inputs as the runs table lists them."""
        return [*self.logs, *self.dump_log, *([f"kafka://{self.live}"] if self.live else [])]


def plan_inputs(config: Config, progress: Progress | None = None, *, sample: bool = True) -> Inputs:
    """Every check that needs no Spark, in one place, each failing with one line that says what to do:
    paths and dump files exist and hold Kafka logs, the live cluster answers, --verify-live/--topic have a
    cluster. With no input at all, the embedded sample (written on first use unless ``sample`` is false)."""
    if config.topics and config.verify_live and not config.bootstrap_servers:
        raise UsageError(
            f"--topic {config.topics[0]}: needs --bootstrap-servers (the live cluster to ask about it); "
            "give it or drop --topic"
        )
    if config.verify_live and not config.bootstrap_servers:
        raise UsageError(
            "--verify-live: needs --bootstrap-servers (the live cluster to check); give it or drop --verify-live"
        )

    storage.configure(config.storage)  # shared-storage settings for every later listing and read
    logs = list(config.logs)
    if not logs and not config.dump_log and not config.bootstrap_servers:
        if not sample:
            return Inputs()

        logs = [sample_logs(progress=progress)]
        if progress:
            progress(f"no input given: using the embedded sample cluster at {logs[0]}")
    inventory = check_inputs(logs) if logs else Inventory()
    dump_files = _dump_files(list(config.dump_log))
    live = config.bootstrap_servers if config.bootstrap_servers and not logs and not config.dump_log else None
    if live:
        check_cluster(live, dict(config.kafka))  # before Spark: one line if it cannot be read
    note = _describe(inventory, len(dump_files), live, config.transaction_state_partitions)
    if progress:
        progress(f"found {note}")
    # a remote file's size is not looked up: such an input counts as unbounded (Spark tasks read it)
    dump_bytes = sum(
        sys.maxsize if storage.is_remote(f) else os.path.getsize(storage.local_path(f)) for f in dump_files
    )
    return Inputs(
        tuple(logs), inventory, tuple(config.dump_log), tuple(dump_files), live, note, dump_bytes,
        sample=not config.logs and not config.dump_log and not config.bootstrap_servers,
    )  # fmt: skip


SAMPLE_CLUSTER = "sample"


def _named(config: Config) -> str:
    """The run's cluster name (``run`` names an unnamed one after the input before anything is written)."""
    if not config.cluster:
        raise ValueError("the cluster is named by pipeline.run (cluster_name) before tables are written")
    return config.cluster


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
    paths = sorted(p if "://" in p else os.path.abspath(p) for p in (*inputs.logs, *inputs.dump_log))
    first = (inputs.logs or inputs.dump_log)[0].split("=", 1)[-1].rstrip("/\\")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(first) or "input").strip("-") or "input"
    digest = hashlib.sha1("\n".join(paths).encode()).hexdigest()[:8]
    return f"{stem}-{digest}", True


def _dump_files(args: list[str]) -> list[str]:
    if not args:
        return []
    # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
    from txnlog.engine.spark.dump_log import dump_arg_path, list_dump_files

    try:
        missing = [p for p in args if not storage.exists(dump_arg_path(p))]
        if missing:
            raise UsageError(
                f"--dump-log {missing[0]}: {storage.missing_reason(dump_arg_path(missing[0]))}; "
                "give kafka-dump-log.sh output files or a directory of them"
            )
        files = list_dump_files(args)
    except storage.StorageError as e:
        raise UsageError(f"--dump-log {e}") from e
    if not files:
        raise UsageError(
            f"--dump-log {', '.join(args)}: no files found; give kafka-dump-log.sh output files or a directory of them"
        )
    return files


def _describe(inventory: Inventory, dump_files: int, live: str | None, txn_state_partitions: int) -> str:
    note = (
        f"{count(len(inventory.segments), 'segment')} and {count(len(inventory.snapshots), 'snapshot')} of "
        f"{count(len(inventory.data_partitions), 'partition')}, "
        f"{count(len(inventory.txn_state_segments), '__transaction_state segment')} "
        f"of {len(inventory.txn_state_partitions)}/{txn_state_partitions} partitions "
        f"on {count(len(inventory.brokers), 'broker')}, {inventory.total_bytes / 2**30:.2f} GiB"
    )
    if dump_files:
        note += f"; {count(dump_files, 'kafka-dump-log.sh output file')}"
    if live:
        note += f"; __transaction_state read live from {live}"
    elif not inventory.txn_state_segments and not dump_files:
        note += (
            "; __transaction_state was not read (no __transaction_state-<n>/ in the input): a transaction no "
            "transactional.id is seen to own is NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort"
        )
    return note


# --- 2. decode ------------------------------------------------------------------------------------------


class Cache:
    """The DataFrames a run persisted; :func:`run_scope` unpersists them on every exit path."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def __call__(self, df: DataFrame) -> DataFrame:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(df)
        return df

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()
        self.frames.clear()


@contextmanager
def run_scope(spark: SparkSession | None, output: str, run_id: str) -> Iterator[tuple[str, Cache]]:
    """A run's scratch directory under the output (txnlog.engine.staging) and its cache, both released on
    every exit; the run's Spark settings (RUN_CONF; one the user set explicitly wins) for its duration
    (``spark`` None: a small input's run, which starts no Spark)."""

    cache = Cache()
    settings: AbstractContextManager[None] = nullcontext()
    if spark is not None:
        run_conf = {k: v for k, v in RUN_CONF.items() if spark.conf.get(k, None) is None}
        settings = temporary_conf(spark, run_conf)
    with output_dir.scratch(output, run_id) as scratch, settings:
        try:
            yield scratch, cache
        finally:
            cache.release()


@dataclass(frozen=True)
class Decoded:
    """The Data Sources' outputs as Arrow tables, and what the decode found out on the way."""

    summary: pa.Table  # segment / quarantine / transaction / producer / snapshot rows (fragments: below)
    records: pa.Table  # __transaction_state records (reduced unless ``records_reduced`` is false)
    times: dict[str, int | None]  # the newest broker-written time per source (txnlog.broker.as_of)
    fragments: bool  # summary holds fragments still to merge (a small input's kafka-dump-log.sh files)
    records_reduced: bool
    txn_state_read: frozenset[int]  # the __transaction_state partitions the input holds
    #: the only partitions with fragments to merge (split segments' only: txnlog.sources.splits); None: any
    fragment_partitions: frozenset[tuple[str, int]] | None = None


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
        return _decode_here(inputs, check_crc, scratch, max_decompressed_bytes, placement.threads)
    assert spark is not None, "an input read in Spark needs a SparkSession"
    shared = bool(inputs.dump_files or inputs.live)  # other inputs may hold the same partitions
    summary, records = _log_dir_sources(
        spark, inputs.inventory, check_crc, scratch, shared, bool(inputs.dump_files), max_decompressed_bytes,
        split_segment_bytes,
    )  # fmt: skip
    summary, records = _other_inputs(spark, inputs, summary, records, kafka)
    if inputs.live and live_cut is not None:
        summary = summary.unionByName(
            _live_batches(spark, inputs.live, kafka, live_cut, check_crc, fetch, max_decompressed_bytes)
        )
    from txnlog.engine.spark import collect

    with job_description(spark, "txnlog: decode"):
        summary, records = cache(summary), cache(records)
        # One action decodes (and caches) every input: the __transaction_state tasks fill the cores
        # while the last big segments are still being walked. It returns the broker-written times.
        times = collect.broker_times(summary, records)
    split_partitions: frozenset[tuple[str, int]] = frozenset()
    dead: frozenset[tuple[str, str, int]] = frozenset()  # split pieces the whole walk passes over
    if split_segment_bytes > 0 and any(f.size > split_segment_bytes for f in inputs.inventory.segments):
        summary, split_partitions, dead, times = _stitched(spark, summary, records, times)
    whole = bool(inputs.dump_files or live_cut is not None)  # every partition may hold fragments
    with job_description(spark, "txnlog: merge and reduce per partition"):
        checkpoints = [*inputs.inventory.checkpoints, *(live_cut.checkpoints() if live_cut else ())]
        summary_table, records_table = collect.merged_and_collected(
            summary, records, checkpoints_of(checkpoints), scratch=scratch,
            fragment_partitions=None if whole else split_partitions, reduce=shared, dead=dead,
        )  # fmt: skip
    return Decoded(
        summary_table, records_table, times, fragments=False, records_reduced=True,
        txn_state_read=_txn_state_read(inputs, records_table),
    )  # fmt: skip


def _txn_state_read(inputs: Inputs, records: pa.Table) -> frozenset[int]:
    """The ``__transaction_state`` partitions the input holds: the log dirs' (listed), and those of the
    records other inputs gave."""
    read = set(inputs.inventory.txn_state_partitions)
    read |= set(records.column("coordinator_partition").drop_null().to_pylist())
    return frozenset(read)


def _stitched(
    spark: SparkSession, summary: DataFrame, records: DataFrame, times: dict[str, int | None]
) -> tuple[DataFrame, frozenset[tuple[str, int]], frozenset[tuple[str, str, int]], dict[str, int | None]]:
    """The summary with split segments' pieces stitched (txnlog.engine.spark.stitch), the partitions that were
    split, the dead pieces, and the broker-written times again if a dead piece may have seen other times."""
    from txnlog.engine.spark.collect import broker_times
    from txnlog.engine.spark.stitch import stitch_pieces

    with job_description(spark, "txnlog: stitch split segments"):
        summary, split_partitions, dead = stitch_pieces(summary)
        if dead:  # a piece the whole walk passes over may have seen other times
            times = broker_times(summary, records)
    return summary, split_partitions, dead, times


def _log_dir_sources(
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

    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import TxnStateSource

    segments, txn_state = _log_dir_options(
        inv, check_crc, scratch, shared, dumps, spark.sparkContext.defaultParallelism, max_decompressed_bytes,
        split_segment_bytes,
    )  # fmt: skip
    spark.dataSource.register(SegmentsSource)
    spark.dataSource.register(TxnStateSource)
    summary = spark.read.format(SegmentsSource.name()).options(**segments).load()
    records = spark.read.format(TxnStateSource.name()).options(**txn_state).load()
    return summary.withColumn("input", F.lit(InputSource.SEGMENTS)), records.withColumn(
        "input", F.lit(InputSource.SEGMENTS)
    )


def _log_dir_options(
    inv: Inventory,
    check_crc: bool,
    scratch: str,
    shared: bool,
    dumps: bool,
    cores: int,
    max_decompressed_bytes: int | None,
    split_segment_bytes: int,
) -> tuple[dict[str, str], dict[str, str]]:
    """The options of the segments and ``__transaction_state`` sources for the log dirs ``inv`` lists."""
    from txnlog.engine.spark.collect import FRAGMENTS_STAGE
    from txnlog.engine.spark.sources import write_manifest

    common = {
        "check_crc": str(check_crc).lower(),
        "min_partitions": str(max(2, cores * 2)),
        "cores": str(cores),  # which big segments are worth splitting
        "storage": storage.settings_option(),
    }
    if max_decompressed_bytes is not None:
        common["max_decompressed_bytes"] = str(max_decompressed_bytes)
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


def _decode_here(
    inputs: Inputs, check_crc: bool, scratch: str, max_decompressed_bytes: int | None, threads: int = 1
) -> Decoded:
    """:func:`decode` of a small input in this process, no Spark query: the sources' readers called here by
    ``threads`` threads (txnlog.engine.spark.placement.read_all_here), the dumps read by
    txnlog.engine.spark.dump_log.read_dump_logs_here, Arrow tables returned. Every segment is read whole (split segments
    are for Spark's tasks)."""

    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.engine.spark.txn_state_source import SOURCE_SCHEMA, TxnStateSource

    shared = bool(inputs.dump_files)  # a live input is never read here (Placement.for_input)
    segments, txn_state = _log_dir_options(
        inputs.inventory, check_crc, scratch, shared, shared, threads, max_decompressed_bytes, 0
    )
    reads = [(SegmentsSource, segments, SEGMENT_SUMMARY_SCHEMA), (TxnStateSource, txn_state, SOURCE_SCHEMA)]
    summary, records = (_labelled(t, InputSource.SEGMENTS) for t in read_all_here(reads, threads))
    release_output_blocks(trim=True)  # the tables' build and writes come next in this process
    read = set(inputs.inventory.txn_state_partitions)
    if inputs.dump_files:
        from txnlog.engine.spark.dump_log import read_dump_logs_here

        dumped, dumped_records = read_dump_logs_here(list(inputs.dump_log))
        summary = pa.concat_tables([summary, _labelled(dumped, InputSource.DUMP_LOG)], promote_options="default")
        dumped_records = _labelled(dumped_records, InputSource.DUMP_LOG)
        records = pa.concat_tables([records, dumped_records], promote_options="default")
        read |= set(records.column("coordinator_partition").drop_null().to_pylist())
    return Decoded(
        summary, records, as_of_rule.broker_times_of(summary, records), fragments=shared,
        fragment_partitions=None, records_reduced=not shared, txn_state_read=frozenset(read),
    )  # fmt: skip


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

    if inputs.dump_files:
        from txnlog.engine.spark.dump_log import read_dump_logs

        frames = read_dump_logs(spark, list(inputs.dump_log))
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


def _superseded(cut: LiveCut | None) -> dict[str, Any] | None:
    """A since-last-run cut's previous ``OPEN`` rows that its ``transactions`` rows replace."""
    which = cut.supersede() if cut is not None else None
    if which is None:
        return None

    return {"transactions": Supersede(which[0], which[1])}


def _fetch_settings(config: Config) -> FetchSettings:

    return FetchSettings(
        max_bytes=config.live_fetch_max_bytes, partition_max_bytes=config.live_fetch_partition_max_bytes
    )


def capture_live(config: Config, inputs: Inputs, progress: Progress | None = None) -> LiveCut | None:
    """A live run's consistent cut: every data partition's range, captured once before Spark reads."""
    if not inputs.live:
        return None
    from txnlog.engine.spark.live_batches import RANGE_SINCE_LAST_RUN, capture_cut, previous_cut

    cluster = _named(config)
    previous = previous_cut(config.output, cluster) if config.live_range == RANGE_SINCE_LAST_RUN else None
    if config.live_range == RANGE_SINCE_LAST_RUN and progress:
        progress(
            f"since-last-run: continuing the run of {previous.as_of.isoformat()}"
            if previous is not None
            else f"since-last-run: no earlier live run of cluster {config.cluster} in {config.output}: reading as "
            "'unstable'"
        )
    cut = capture_cut(
        inputs.live, dict(config.kafka), config.topics or None, mode=config.live_range,
        lookback_bytes=config.live_lookback_bytes, previous=previous,
    )  # fmt: skip
    if progress:
        moment = datetime.fromtimestamp(cut.as_of_ms / 1000, tz=UTC).isoformat()
        topics = len({r.topic for r in cut.ranges})
        progress(
            f"live cut at {moment}: {cut.partitions} partitions of {topics} topics, {cut.unstable} with open "
            f"transactions (LSO behind the high watermark); reading range '{config.live_range}'"
        )
    return cut


# --- 3. resolve_as_of ------------------------------------------------------------------------------------


def resolve_as_of(
    option: str | None, times: dict[str, int | None], live_cut: LiveCut | None = None
) -> tuple[datetime, str]:
    """(as_of, where it came from): ``--as-of``, else the moment of a live run's cut (a live run looks at
    the present), else the newest time a broker's clock wrote (txnlog.broker.as_of)."""

    if option is None and live_cut is not None:
        return as_of_rule.from_ms(live_cut.as_of_ms), as_of_rule.LIVE_CUT
    return as_of_rule.choose(option, times)


# --- 4. build_tables -------------------------------------------------------------------------------------


def build_tables(
    spark: SparkSession | None,
    summary: pa.Table,
    records: pa.Table,
    thresholds: classify.Thresholds,
    *,
    scratch: str,
    checkpoints: Sequence[Checkpoint] = (),
    fragments: bool = True,
    fragment_partitions: frozenset[tuple[str, int]] | None = None,
    records_reduced: bool = False,
    as_of: datetime | None = None,
    as_of_source: str = "",
    placement: Placement | None = None,
    history_bounds: Any = None,
) -> dict[str, Any]:
    """Every output table (txnlog.rules.tables): Arrow tables, and ``transactions`` /
    ``coordinator_history`` as ``txnlog.engine.spark.staged_table.StagedTable`` values (staged under ``scratch``,
    finished by the writer: in Spark tasks, or in this process with ``placement.driver``).

    ``fragments``: ``summary`` may hold fragments still to merge into transactions (``fragment_partitions``:
    only those partitions' rows, else any); ``records_reduced``: ``records`` were reduced where decoded
    (txnlog.rules.coordinator), else they are reduced here.
    ``as_of``: adds the quarantine's warning rows for client clocks far past it.
    ``history_bounds``: a live run's bounds of the transactions it writes (a pyarrow Table,
    txnlog.engine.spark.live_batches.LiveCut.history_bounds). The run key (cluster, as_of) is set by the writer."""

    summary, records = staging.merged_here(
        summary, records, checkpoints, scratch, fragments=fragments, records_reduced=records_reduced,
        fragment_partitions=fragment_partitions,
    )  # fmt: skip
    built = tables.build(
        summary, records, thresholds, checkpoints=checkpoints, as_of=as_of, as_of_source=as_of_source,
        history_bounds=history_bounds,
    )  # fmt: skip
    driver = placement is not None and placement.driver
    for name in staging.STAGED:
        threads = placement.threads if placement is not None and driver else 1
        built[name] = StagedTable(spark, f"{scratch}/{name}", built[name], name, driver=driver, threads=threads)
    return built


# --- 5. verify_live ---------------------------------------------------------------------------------------


def verify_live(
    spark: SparkSession | None,
    tables: dict[str, Any],
    config: Config,
    *,
    progress: Progress = stderr_progress,
) -> dict[str, Any]:
    """``tables`` plus :func:`txnlog.live.verify.live_rows` for the offline findings' partitions and
    ``config.topics`` (rows with source = live). Live state is the present, so live ages use the wall clock."""

    found = tables["findings"]
    rows = found.select(["topic", "partition"]).to_pylist()
    partitions = sorted({(r["topic"], int(r["partition"])) for r in rows if r["topic"] is not None})
    progress(
        f"verify-live: asking {config.bootstrap_servers} about {count(len(partitions), 'finding partition')}"
        + (f" and topics {', '.join(config.topics)}" if config.topics else "")
    )
    live = live_rows(config, partitions, as_of_ms=int(time.time() * 1000), cluster=config.cluster, progress=progress)
    out = dict(tables)
    for name, table in live.items():
        if table.num_rows:
            mine = out[name]
            out[name] = pa.concat_tables([mine, table.select(mine.column_names).cast(mine.schema)])
    return out


# --- 6. write, 7. summarize ----------------------------------------------------------------------------------


def write(
    spark: SparkSession | None,
    tables: dict[str, Any],
    config: Config,
    as_of: datetime,
    supersede: dict[str, Any] | None = None,
) -> dict[str, int]:
    """Every table to its Delta table under ``config.output``: the run's rows (``config.cluster``, ``as_of``)
    replaced, one commit per table, with the configured writer (a small input's Arrow tables with pyarrow,
    not by a Spark job's writers, txnlog.output.delta). ``supersede``: per table, an earlier run's rows the same
    commit drops (txnlog.output.delta.Supersede)."""

    counts: dict[str, int] = {}
    for name, table in tables.items():
        with job_description(spark, f"txnlog: write {name}"):
            counts.update(
                delta.write_tables(
                    spark,
                    config.output,
                    {name: table},
                    cluster=_named(config),
                    as_of=as_of,
                    writer=config.delta_writer,
                    supersede=supersede,
                )  # fmt: skip
            )
        _pause_for_fault_tests(name)
    return counts


def _pause_for_fault_tests(table: str) -> None:
    """The fault tests' seam (tests/e2e/test_faults_job.py): with ``TXNLOG_TEST_PAUSE_AFTER`` set to
    ``<table>:<file>[:<seconds>]``, the driver creates ``<file>`` after committing ``<table>`` and sleeps
    (default 600 s), so a test can kill it between two tables' commits or run another job meanwhile."""
    spec = os.environ.get("TXNLOG_TEST_PAUSE_AFTER")
    if not spec or not spec.startswith(table + ":"):
        return
    target, _, seconds = spec[len(table) + 1 :].partition(":")
    with open(target, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(float(seconds or 600))


def summarize(
    spark: SparkSession | None, tables: dict[str, Any], counts: dict[str, int], *, run: RunResult
) -> tuple[RunResult, int]:
    """The run's result for the console (verdict counts, the worst partitions) and its late partitions."""
    verdicts, worst, late_partitions = _arrow_summary(tables["findings"], tables["partition_health"])
    run.counts = dict(counts)
    run.verdicts, run.worst_partitions = verdicts, worst
    return run, late_partitions


#: the summary's worst partitions: the columns it shows
WORST_COLUMNS = ("topic", "partition", "lso_lag", "open_transactions", "max_open_ms")


def _arrow_summary(findings: Any, health: Any) -> tuple[list[tuple[str, str, int]], list[dict[str, Any]], int]:
    """:func:`summarize`'s three answers from Arrow tables: verdict × reason counts (by verdict, most first),
    the five partitions with open transactions and the largest LSO lag, how many have a late transaction."""

    counts = findings.group_by(["verdict", "reason"], use_threads=False).aggregate([([], "count_all")])
    verdicts = sorted(
        ((r["verdict"], r["reason"], r["count_all"]) for r in counts.to_pylist()), key=lambda v: (v[0], -v[2])
    )
    opened = health.filter(pc.fill_null(pc.greater(health.column("open_transactions"), 0), False))
    worst = opened.sort_by([("lso_lag", "descending")]).slice(0, 5).select(list(WORST_COLUMNS)).to_pylist()
    late = int(pc.sum(pc.fill_null(health.column("has_late_transaction"), False).cast(pa.int64())).as_py() or 0)
    return verdicts, worst, late


# --- the job ----------------------------------------------------------------------------------------------


def run(
    config: Config,
    *,
    spark: SparkSession | None = None,
    progress: Progress = stderr_progress,
    without_spark: bool = True,
) -> RunResult:
    """Run the whole job for ``config`` and write the Delta tables; without ``spark``, a small input starts no
    Spark (:func:`runs_without_spark`; unless ``without_spark`` is false: the job under spark-submit)."""

    t0, started_at, run_id = time.monotonic(), datetime.now(UTC), uuid.uuid4().hex[:12]
    inputs = plan_inputs(config, progress)
    cluster, derived = cluster_name(config.cluster, inputs)
    config = dataclasses.replace(config, cluster=cluster)
    if derived and not inputs.sample:
        progress(f"cluster '{cluster}': named after the input (the same input gives the same name; --cluster names it)")
    if spark is None and not (without_spark and runs_without_spark(config, inputs)):
        spark = _session(config)
    placement = placement_of(config, inputs, spark)
    with run_scope(spark, config.output, run_id) as (scratch, cache):
        live_cut = capture_live(config, inputs, progress)
        threads = f"{placement.threads} thread{'s' if placement.threads != 1 else ''}"
        where = f"here (a small input), {threads}" if placement.driver else "in Spark"
        progress(f"decoding {_file_count(inputs)} files {where}")
        decoded = decode(
            spark, inputs, check_crc=config.check_crc, kafka=dict(config.kafka), scratch=scratch, cache=cache,
            placement=placement, live_cut=live_cut, fetch=_fetch_settings(config),
            max_decompressed_bytes=config.max_decompressed_bytes, split_segment_bytes=config.split_segment_bytes,
        )  # fmt: skip
        as_of, as_of_source = resolve_as_of(config.as_of, decoded.times, live_cut)
        progress(f"decoded in {time.monotonic() - t0:.1f} s; as_of = {as_of.isoformat()} ({as_of_source})")
        tables = build_tables(
            spark, decoded.summary, decoded.records, _thresholds(config, inputs, decoded, as_of), scratch=scratch,
            checkpoints=[*inputs.inventory.checkpoints, *(live_cut.checkpoints() if live_cut else ())],
            fragments=decoded.fragments, fragment_partitions=decoded.fragment_partitions,
            records_reduced=decoded.records_reduced, as_of=as_of, as_of_source=as_of_source, placement=placement,
            history_bounds=live_cut.history_bounds() if live_cut else None,
        )  # fmt: skip
        if config.verify_live:
            tables = verify_live(spark, tables, config, progress=progress)
        result = RunResult(run_id, _named(config), as_of, config.output, {}, inputs=inputs.names)
        result.cluster_derived = derived and not inputs.sample
        result.inventory_note, result.as_of_source = inputs.note, as_of_source
        with output_dir.output_lock(config.output, run_id, wait_s=config.write_lock_wait_s, progress=progress):
            # The run's `runs` row says RUNNING before its first table and SUCCEEDED after its last: a run
            # killed in between is not complete, and every reader shows the newest complete run.
            mark = functools.partial(_mark_run, spark, config, result, started_at)
            mark("RUNNING")
            try:
                counts = write(spark, tables, config, as_of, supersede=_superseded(live_cut))
                result, late_partitions = summarize(spark, tables, counts, run=result)
                result.seconds = time.monotonic() - t0
                mark("SUCCEEDED", late_partitions=late_partitions)
            except BaseException as e:
                mark("FAILED", error=" ".join(f"{type(e).__name__}: {e}".split()), best_effort=True)  # one line
                raise
            retain(config, progress)
        return result


def _session(config: Config) -> SparkSession:

    return get_session("txnlog", conf=dict(config.spark))


def placement_of(config: Config, inputs: Inputs, spark: SparkSession | None = None) -> Placement:
    """Where a run of ``inputs`` runs (txnlog.engine.spark.placement): the threshold weighs the cores of ``spark``'s
    session (its default parallelism: a cluster's executors' cores), or without one those of the session the run
    would start (``spark.master`` in the config; ``local[*]``: this machine's)."""

    cores = master_cores(config.spark.get("spark.master"))
    if spark is not None:
        try:
            cores = int(spark.sparkContext.defaultParallelism)
        except Exception:  # a session without a SparkContext here (Spark Connect): the config's master
            pass
    files = len(inputs.inventory.segments) + len(inputs.inventory.snapshots) + len(inputs.inventory.txn_state_segments)
    return Placement.for_input(inputs.bytes, config.driver_max_bytes, live=bool(inputs.live), cores=cores, files=files)


def runs_without_spark(config: Config, inputs: Inputs) -> bool:
    """Whether a run of ``inputs`` needs no Spark session at all: a small input (the driver placement,
    :func:`placement_of`) whose tables the deltalake writer writes. Spark's part of such a run is only its
    start, seconds of JVM for nothing (benchmarks/RESULTS.md, "Startup")."""
    return placement_of(config, inputs).driver and config.delta_writer != "spark"


def _thresholds(config: Config, inputs: Inputs, decoded: Decoded, as_of: datetime) -> classify.Thresholds:
    """What the verdicts of this run weigh: its ``as_of``, the configured limits, and how much of
    ``__transaction_state`` the input holds (a live run reads all of it)."""
    return classify.Thresholds(
        as_of_ms=as_of_rule.to_ms(as_of),
        max_transaction_timeout_ms=config.max_transaction_timeout_ms,
        all_txn_state_partitions_read=bool(inputs.live)
        or len(decoded.txn_state_read) >= config.transaction_state_partitions,
        txn_state_partitions_read=None if inputs.live else len(decoded.txn_state_read),
        txn_state_partitions=config.transaction_state_partitions,
        bootstrap_servers=config.bootstrap_servers,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=config.producer_id_expiration_check_interval_ms,
    )


def retain(config: Config, progress: Progress) -> None:
    """The history's retention after a complete run (``retain_runs``/``retain_days``; 0 = keep): the run's
    cluster's runs older than both are deleted from every table (txnlog.output.retention, ``txnlog retain``)."""

    if not config.retain_runs and not config.retain_days:
        return
    runs = delta.read_table(config.output, "runs", cluster=_named(config), columns=["cluster", "as_of", "status"])
    chosen = retention.plan(
        runs.to_pylist(), keep_runs=config.retain_runs or None, keep_days=config.retain_days or None
    )
    cutoffs = {c: cut for c, cut in chosen.cutoffs.items() if chosen.dropped[c]}
    if cutoffs:
        deleted = delta_retention.drop_runs_before(config.output, cutoffs)
        runs_gone = sum(len(chosen.dropped[c]) for c in cutoffs)
        progress(
            f"retention: deleted {count(runs_gone, 'run')} older than {min(cutoffs.values()).isoformat()} "
            f"({count(sum(deleted.values()), 'row')}; 'txnlog retain --vacuum-hours' frees their files)"
        )


def _mark_run(
    spark: SparkSession | None,
    config: Config,
    result: RunResult,
    started_at: datetime,
    status: str,
    *,
    late_partitions: int = 0,
    error: str | None = None,
    best_effort: bool = False,
) -> None:
    """Write the run's ``runs`` row with ``status`` (replacing the row of the same (cluster, as_of))."""
    try:
        table = _runs_table(result, started_at, late_partitions, config, status=status, error=error)
        counts = write(spark, {"runs": table}, config, result.as_of)
    except Exception:
        if not best_effort:
            raise
        log.warning("could not mark run %s %s in %s", result.run_id, status, config.output, exc_info=True)
        return
    if status == "SUCCEEDED":
        result.counts.update(counts)


def _file_count(inputs: Inputs) -> int:
    inv = inputs.inventory
    return len(inv.segments) + len(inv.snapshots) + len(inv.txn_state_segments) + len(inputs.dump_files)


def warm_decoders(progress: Progress | None = None) -> None:
    """Compile every decoder kernel the Spark readers call, once, into numba's on-disk cache.

    Runs the readers themselves (no Spark) over a small generated cluster (markers,
    ``__transaction_state``, producer snapshots), so exactly the functions and argument types the
    executors use get compiled; afterwards no Spark worker compiles (benchmarks/RESULTS.md E3).
    Idempotent: with a warm cache it only loads it (~3 s). ``scripts/bootstrap.sh`` calls it when
    ``python txnlog/kafka/jit.py --is-warm`` says the cache does not match the sources.
    """

    # Lazy: the broker-log writer serves only this install-time warm-up.
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.spark.sources import SegmentsSource, files_option
    from txnlog.engine.spark.txn_state_source import TxnStateSource

    fingerprint = jit.sources_fingerprint()
    work = tempfile.mkdtemp(prefix="txnlog-warm-")
    try:
        write_scenario("coordinator_completed", os.path.join(work, "logs"), seed=1)
        inventory = discover([os.path.join(work, "logs")])
        for source, files in (
            (SegmentsSource, list(inventory.segments) + list(inventory.snapshots)),
            (TxnStateSource, list(inventory.txn_state_segments)),
        ):
            reader = source({"files": files_option(files), "check_crc": "true"}).reader(None)  # type: ignore[arg-type]  # these sources have a fixed schema; reader() ignores it
            for part in reader.partitions():
                for _ in reader.read(part):
                    pass
        crc32c(bytearray(b"txnlog"))  # the kafka-dump-log.sh reader's CRC on buffers that are not bytes
        whole_entries(np.zeros(12, np.uint8))  # the Kafka source's framing of Fetch responses (txnlog.live.fetch)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    jit.mark_warm(fingerprint)
    if progress:
        progress(f"decoders compiled and cached in {jit.cache_dir()}")


def _runs_table(
    result: RunResult,
    started_at: datetime,
    late_partitions: int,
    config: Any,
    *,
    status: str = "SUCCEEDED",
    error: str | None = None,
):  # -> pa.Table

    c = result.counts
    hanging = sum(n for v, _, n in result.verdicts if v == classify.Verdict.HANGING)
    late = sum(n for v, _, n in result.verdicts if v == classify.Verdict.LATE)
    row = {
        "cluster": result.cluster,
        "as_of": result.as_of,
        "run_id": result.run_id,
        "started_at": started_at,
        "finished_at": None if status == "RUNNING" else datetime.now(UTC),
        "inputs": [p if "://" in p else os.path.abspath(p) for p in result.inputs],
        **{
            f"{t}_count": int(c.get(t, 0))
            for t in (
                "transactions",
                "findings",
                "abort_recommendations",
                "partition_health",
                "producer_state",
                "coordinator_state",
                "coordinator_history",
                "quarantine",
            )
        },
        "hanging_count": hanging,
        "late_count": late,
        "partitions_with_late_transactions": int(late_partitions),
        "txnlog_version": __version__,
        "status": status,
        "error": error,
        "as_of_source": result.as_of_source,
        "config": json.dumps(config.to_dict(), default=str, sort_keys=True),
    }
    return pa.Table.from_pylist([row], schema=RUNS)


@contextmanager
def job_description(spark: SparkSession | None, text: str) -> Iterator[None]:
    """Label the Spark jobs started inside the block (Spark UI, event log) with ``text``."""
    sc = getattr(spark, "sparkContext", None)
    if sc is None:  # Spark Connect: no SparkContext to label
        yield
        return
    previous = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(text)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", previous)
