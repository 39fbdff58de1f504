"""The nightly job as a library call: inputs → Spark → verdicts → Delta tables.

``jobs/find_hanging.py``, the ``txnlog`` CLI and the notebooks all call
:func:`run` (or the smaller steps below), so what a notebook shows is what
the nightly job writes.

Example::

    from txnlog.config import load_config
    from txnlog.pipeline import run
    result = run(load_config(None, {"logs": ["/data/kafka-logs"]}))
    print(result.summary_text())
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from txnlog import __version__, classify
from txnlog.errors import UsageError
from txnlog.logdirs import Checkpoint, Inventory, discover

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from txnlog.config import Config

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
    as_of_source: str = ""  # --as-of / markers / transaction_state / log_append_time (txnlog.as_of)

    def summary_text(self) -> str:
        lines = [
            f"txnlog {__version__}: run {self.run_id} of cluster '{self.cluster}' as of "
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


def _parse_as_of(value: Any) -> datetime | None:
    from txnlog.config import parse_as_of

    return parse_as_of(value) if value is not None else None


def check_inputs(paths: list[str]) -> Inventory:
    """Discover logs under ``paths`` or raise a one-line UsageError saying what to do."""
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(
                f"--logs {p}: no such file or directory; give a broker log dir (log.dirs) or a dir of them"
            )
        if not os.path.isdir(p):
            raise UsageError(f"--logs {p}: not a directory; give a broker log dir (log.dirs) or a dir of them")
    inventory = discover(paths)
    if not inventory.segments and not inventory.txn_state_segments:
        raise UsageError(
            f"--logs {', '.join(paths)}: no Kafka logs found (expected <topic>-<partition>/ directories holding "
            "0000….log segments); point --logs at a broker's log.dirs or at a directory of broker log dirs"
        )
    return inventory


#: ``source`` of rows that come from copied log dirs, kafka-dump-log.sh output, or the records of the live
#: cluster's ``__transaction_state`` (rows from the admin APIs, --verify-live, say ``live``)
SOURCE_SEGMENTS, SOURCE_DUMP_LOG, SOURCE_LIVE_LOG = "segments", "dump_log", "live_log"

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


def run(config: Config, *, spark: SparkSession | None = None, progress: Progress = stderr_progress) -> RunResult:
    """Run the whole job for ``config`` (a ``txnlog.config.Config``) and write the Delta tables."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from txnlog import as_of as as_of_rule
    from txnlog import delta
    from txnlog.spark.session import get_session, temporary_conf
    from txnlog.spark.sources import (
        SEGMENTS_SOURCE,
        TXN_STATE_SOURCE,
        checkpoints_option,
        files_option,
        register_sources,
    )

    t0 = time.monotonic()
    started_at = datetime.now(UTC)
    run_id = uuid.uuid4().hex[:12]
    logs = list(config.logs)
    if not logs and not config.dump_log and not config.bootstrap_servers:
        from txnlog.sample import sample_logs

        logs = [sample_logs(progress=progress)]
        progress(f"no input given: using the embedded sample cluster at {logs[0]}")
    inventory = check_inputs(logs) if logs else Inventory()
    dump_files: list[str] = []
    if config.dump_log:
        from txnlog.spark.dump_log import dump_arg_path, list_dump_files

        missing = [p for p in config.dump_log if not os.path.exists(dump_arg_path(p))]
        if missing:
            raise UsageError(
                f"--dump-log {missing[0]}: no such file or directory; "
                "give kafka-dump-log.sh output files or a directory of them"
            )
        dump_files = list_dump_files(list(config.dump_log))
        if not dump_files:
            raise UsageError(
                f"--dump-log {', '.join(config.dump_log)}: no files found; "
                "give kafka-dump-log.sh output files or a directory of them"
            )
    live = bool(config.bootstrap_servers) and not logs and not config.dump_log
    bootstrap = config.bootstrap_servers or ""  # the live cluster whenever live is set
    gib = inventory.total_bytes / 2**30
    note = (
        f"{len(inventory.segments)} segments and {len(inventory.snapshots)} snapshots of "
        f"{len(inventory.data_partitions)} partitions, {len(inventory.txn_state_segments)} __transaction_state "
        f"segments of {len(inventory.txn_state_partitions)}/{config.transaction_state_partitions} partitions "
        f"on {len(inventory.brokers)} broker(s), {gib:.2f} GiB"
    )
    if dump_files:
        note += f"; {len(dump_files)} kafka-dump-log.sh output file(s)"
    if live:
        from txnlog.live import check_cluster

        check_cluster(bootstrap, dict(config.kafka))  # before Spark: one line if it cannot be read
        note += f"; __transaction_state read live from {config.bootstrap_servers}"
    progress(f"found {note}")

    spark = spark or get_session("txnlog", conf=dict(config.spark))
    # Settings for this run only (a notebook's session gets its own back afterwards); one the user
    # set explicitly wins.
    run_conf = {k: v for k, v in RUN_CONF.items() if spark.conf.get(k, None) is None}
    # every transaction is staged under the output by the tasks that rebuild it (txnlog.spark.staged)
    with delta.scratch(config.output, run_id) as scratch, temporary_conf(spark, run_conf):
        register_sources(spark)
        check_crc = "true" if config.check_crc else "false"
        parallelism = max(2, spark.sparkContext.defaultParallelism * 2)
        summary = (
            spark.read.format(SEGMENTS_SOURCE)
            .option("files", files_option(list(inventory.segments) + list(inventory.snapshots)))
            .option("check_crc", check_crc)
            .option("min_partitions", str(parallelism))
            # whole partitions per task, merged into transactions there, unless dumps hold replicas too
            .option("transactions", "false" if config.dump_log else "true")
            .option("checkpoints", checkpoints_option(inventory.checkpoints))
            .option("stage", f"{scratch}/transactions")
            .load()
            .withColumn("input", F.lit(SOURCE_SEGMENTS))
        )
        records = (
            spark.read.format(TXN_STATE_SOURCE)
            .option("files", files_option(list(inventory.txn_state_segments)))
            .option("check_crc", check_crc)
            .option("min_partitions", str(parallelism))
            # reduced where decoded (txnlog.spark.coordinator), unless other inputs hold the same partitions
            .option("reduce", "false" if (dump_files or live) else "true")
            .option("stage", f"{scratch}/coordinator_history")
            .load()
            .withColumn("input", F.lit(SOURCE_SEGMENTS))
        )
        if dump_files:
            from txnlog.spark.dump_log import read_dump_logs

            frames = read_dump_logs(spark, list(config.dump_log))
            summary = summary.unionByName(frames.summary.withColumn("input", F.lit(SOURCE_DUMP_LOG)))
            records = records.unionByName(
                frames.records.withColumn("input", F.lit(SOURCE_DUMP_LOG)), allowMissingColumns=True
            )
        if live:
            from txnlog.spark.live_source import LiveTxnStateSource, live_options, register_live_source

            register_live_source(spark)
            live_df = (
                spark.read.format(LiveTxnStateSource.name())
                .options(**live_options(bootstrap, dict(config.kafka)))
                .load()
            )
            records = records.unionByName(live_df.withColumn("input", F.lit(SOURCE_LIVE_LOG)), allowMissingColumns=True)
        summary = summary.persist(StorageLevel.MEMORY_AND_DISK)
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
        cached: list[Any] = [summary, records]
        n_files = (
            len(inventory.segments) + len(inventory.snapshots) + len(inventory.txn_state_segments) + len(dump_files)
        )
        progress(f"decoding {n_files} files in Spark")
        with job_description(spark, "txnlog: decode"):
            # One action decodes (and caches) both inputs: the __transaction_state tasks fill the cores
            # while the last big segments are still being walked. It returns the broker-written times.
            times = as_of_rule.broker_times(summary, records)
        # The decode is done and cached, but it keeps one Spark partition per input partition (a 256 MiB
        # segment alone, small files packed): 30 at 4 GiB. What follows reads a few rows per segment and
        # producer, and every stage that scanned those partitions would cost a task each, a cost that
        # grew with the input (benchmarks/RESULTS.md E2). The cached blocks stay as they are; only the
        # scans after the decode are coalesced, to one partition per core.
        downstream = max(2, spark.sparkContext.defaultParallelism)
        summary, records = summary.coalesce(downstream), records.coalesce(downstream)
        as_of, as_of_source = as_of_rule.choose(config.as_of, times)  # never a client's clock (txnlog.as_of)
        as_of_ms = (as_of - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
        progress(f"decoded in {time.monotonic() - t0:.1f} s; as_of = {as_of.isoformat()} ({as_of_source})")

        txn_state_read = set(inventory.txn_state_partitions)
        if dump_files or live:  # a handful of ids: which __transaction_state partitions the other inputs held
            txn_state_read |= {r[0] for r in records.select("coordinator_partition").distinct().collect()}
        all_partitions_read = live or len(txn_state_read) >= config.transaction_state_partitions
        thresholds = classify.Thresholds(
            as_of_ms=as_of_ms,
            max_transaction_timeout_ms=config.max_transaction_timeout_ms,
            all_txn_state_partitions_read=all_partitions_read,
            bootstrap_servers=config.bootstrap_servers,
        )
        tables = build_tables(
            spark,
            summary,
            records,
            thresholds,
            cluster=config.cluster,
            as_of=as_of,
            cache=cached,
            checkpoints=inventory.checkpoints,
            fragments=bool(dump_files),
            scratch=scratch,
            records_reduced=not (dump_files or live),
        )
        # client timestamps far past as_of: warning rows (kept as read, never "now")
        tables["quarantine"] = tables["quarantine"].unionByName(
            as_of_rule.future_timestamps(summary, as_of, as_of_source, cluster=config.cluster)
        )
        if getattr(config, "verify_live", False):
            tables = add_live_rows(spark, tables, config, as_of=as_of, progress=progress)
        for name in ("findings", "partition_health"):  # read again for the printed summary
            tables[name] = tables[name].persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(tables[name])

        counts: dict[str, int] = {}
        for name, table in tables.items():
            with job_description(spark, f"txnlog: write {name}"):
                counts.update(
                    delta.write_tables(
                        spark,
                        config.output,
                        {name: table},
                        cluster=config.cluster,
                        as_of=as_of,
                        writer=config.delta_writer,
                    )
                )
        with job_description(spark, "txnlog: summary"):
            verdict_rows = (
                tables["findings"].groupBy("verdict", "reason").count().orderBy("verdict", F.desc("count")).collect()
            )
            worst = (
                tables["partition_health"]
                .filter(F.col("open_transactions") > 0)
                .orderBy(F.desc("lso_lag"))
                .limit(5)
                .select("topic", "partition", "lso_lag", "open_transactions", "max_open_ms")
                .collect()
            )
            late_partitions = tables["partition_health"].filter(F.col("has_late_transaction")).count()
        result = RunResult(
            run_id=run_id,
            cluster=config.cluster,
            as_of=as_of,
            output=config.output,
            counts=dict(counts),
            verdicts=[(r["verdict"], r["reason"], r["count"]) for r in verdict_rows],
            worst_partitions=[r.asDict() for r in worst],
            inputs=logs + list(config.dump_log) + ([f"kafka://{config.bootstrap_servers}"] if live else []),
            inventory_note=note,
            as_of_source=as_of_source,
        )
        result.seconds = time.monotonic() - t0
        runs_row = _runs_table(result, started_at, late_partitions, config)
        counts.update(
            delta.write_tables(
                spark,
                config.output,
                {"runs": runs_row},
                cluster=config.cluster,
                as_of=as_of,
                writer=config.delta_writer,
            )
        )
        result.counts = dict(counts)
        for df in cached:
            df.unpersist()
        return result


def warm_decoders(progress: Progress | None = None) -> None:
    """Compile every decoder kernel the Spark readers call, once, into numba's on-disk cache.

    Runs the readers themselves (no Spark) over a small generated cluster (markers,
    ``__transaction_state``, producer snapshots), so exactly the functions and argument types the
    executors use get compiled; afterwards no Spark worker compiles (benchmarks/RESULTS.md E3).
    Idempotent: with a warm cache it only loads it (~3 s). ``scripts/bootstrap.sh`` calls it when
    ``python txnlog/kafka/jit.py --is-warm`` says the cache does not match the sources.
    """
    import shutil
    import tempfile

    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka import jit
    from txnlog.kafka.crc import crc32c
    from txnlog.spark.sources import SegmentsSource, files_option
    from txnlog.spark.txn_state_source import TxnStateSource

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
    finally:
        shutil.rmtree(work, ignore_errors=True)
    jit.mark_warm(fingerprint)
    if progress:
        progress(f"decoders compiled and cached in {jit.cache_dir()}")


# --- verify_live (issue #4): live rows, source = "live", unioned into the offline tables ---------------


def add_live_rows(
    spark: SparkSession,
    tables: dict[str, DataFrame],
    config: Config,
    *,
    as_of: datetime,
    progress: Progress = stderr_progress,
) -> dict[str, DataFrame]:
    """``tables`` plus :func:`txnlog.live_tables.live_rows` for the offline findings' partitions and
    ``config.topics``. Live state is the present, so live ages use the wall clock; the rows carry
    the run's key (cluster, as_of) like every other row."""
    from pyspark.sql import functions as F

    from txnlog.live_tables import live_rows
    from txnlog.spark.schemas import spark_schema

    if not config.bootstrap_servers:
        raise UsageError(
            "--verify-live: needs --bootstrap-servers (the live cluster to check); give it or drop --verify-live"
        )
    findings = tables["findings"].filter(F.col("topic").isNotNull()).select("topic", "partition").distinct().collect()
    partitions = sorted((r["topic"], int(r["partition"])) for r in findings)
    progress(
        f"verify-live: asking {config.bootstrap_servers} about {len(partitions)} finding partition(s)"
        + (f" and topics {', '.join(config.topics)}" if config.topics else "")
    )
    rows = live_rows(config, partitions, as_of_ms=int(time.time() * 1000), cluster=config.cluster, progress=progress)
    out = dict(tables)
    for name, table in rows.items():
        if table.num_rows == 0:
            continue
        df = spark.createDataFrame(table.to_pylist(), schema=spark_schema(name))
        df = df.withColumn("cluster", F.lit(config.cluster)).withColumn("as_of", F.lit(as_of).cast("timestamp"))
        out[name] = out[name].unionByName(df.select(*out[name].columns))
    return out


def _runs_table(result: RunResult, started_at: datetime, late_partitions: int, config: Any):  # -> pa.Table
    import pyarrow as pa

    from txnlog.tables import RUNS

    c = result.counts
    hanging = sum(n for v, _, n in result.verdicts if v == classify.HANGING)
    late = sum(n for v, _, n in result.verdicts if v == classify.LATE)
    row = {
        "cluster": result.cluster,
        "as_of": result.as_of,
        "run_id": result.run_id,
        "started_at": started_at,
        "finished_at": datetime.now(UTC),
        "inputs": [os.path.abspath(p) for p in result.inputs],
        **{
            f"{t}_count": int(c.get(t, 0))
            for t in (
                "transactions",
                "findings",
                "abort_recommendations",
                "partition_health",
                "coordinator_state",
                "coordinator_history",
                "quarantine",
            )
        },
        "hanging_count": hanging,
        "late_count": late,
        "partitions_with_late_transactions": int(late_partitions),
        "txnlog_version": __version__,
        "status": "SUCCEEDED",
        "as_of_source": result.as_of_source,
        "config": json.dumps(config.to_dict(), default=str, sort_keys=True),
    }
    return pa.Table.from_pylist([row], schema=RUNS)


@contextmanager
def job_description(spark: SparkSession, text: str) -> Iterator[None]:
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


def _cached(df: DataFrame, cache: list[DataFrame]) -> DataFrame:
    from pyspark import StorageLevel

    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    cache.append(df)
    return df


def build_tables(
    spark: SparkSession,
    summary: DataFrame,
    records: DataFrame,
    thresholds: classify.Thresholds,
    *,
    cluster: str,
    as_of: datetime,
    cache: list[DataFrame] | None = None,
    checkpoints: Sequence[Checkpoint] = (),
    fragments: bool = True,
    scratch: str,
    records_reduced: bool = False,
) -> dict[str, Any]:
    """All output tables as DataFrames (contract columns), from the sources' outputs.

    ``fragments``: ``summary`` may hold fragment rows (run/marker/snapshot) whose partitions are still
    to be merged into transactions; false when every partition arrived as transaction rows.
    ``records_reduced``: ``records`` were reduced where they were decoded (txnlog.spark.coordinator),
    else they are reduced here. ``scratch``: the run's directory where every transaction and every
    coordinator record is (or was) staged; ``transactions`` and ``coordinator_history`` are returned as
    ``txnlog.spark.staged.StagedTable`` values, the other tables as DataFrames.
    DataFrames persisted on the way are appended to ``cache`` (unpersist them when done).
    """
    cache = [] if cache is None else cache
    from pyspark.sql import functions as F

    from txnlog.spark import transforms as T

    as_of_ms = thresholds.as_of_ms
    keys = [F.lit(cluster).alias("cluster"), F.lit(as_of).cast("timestamp").alias("as_of")]
    # which input each row came from ("source" in the tables); callers that pass a source's output directly
    # get "segments"
    if "input" not in summary.columns:
        summary = summary.withColumn("input", F.lit(SOURCE_SEGMENTS))
    if "input" not in records.columns:
        records = records.withColumn("input", F.lit(SOURCE_SEGMENTS))

    # Small intermediates that several output tables read are cached, so that each table's write
    # plans and runs only its own last steps (every shuffle costs a Spark job of its own).
    checkpoint_rows = None
    if checkpoints:  # a few rows per partition, read on the driver by discover()
        checkpoint_rows = spark.createDataFrame(
            [
                (
                    c.broker,
                    c.topic,
                    c.partition,
                    c.high_watermark,
                    c.log_start_offset,
                    c.recovery_point,
                    c.clean_shutdown,
                )
                for c in checkpoints
            ],
            schema=T.CHECKPOINT_SCHEMA,
        )
    from txnlog.spark.staged import OWNERS_SCHEMA, SOURCES_SCHEMA, Finish, FinishHistory, StagedTable
    from txnlog.spark.transactions import checkpoints_of

    stats = _cached(T.with_checkpoints(T.replica_stats(summary), checkpoint_rows), cache)
    # read twice by with_lso: the open ones, and all of them
    txns = _cached(
        T.partition_transactions(
            summary, checkpoints_of(checkpoints or ()), fragments=fragments, stage=f"{scratch}/transactions"
        ),
        cache,
    )
    pstats = _cached(T.partition_stats(stats), cache)
    txns, health = T.with_lso(txns, pstats, as_of_ms)
    health = _cached(health, cache)

    if not records_reduced:
        records = T.reduced_records(records, f"{scratch}/coordinator_history")
    history = _cached(T.coordinator_history(records), cache)
    state = T.coordinator_state(history)
    owners = T.producer_owners(state)
    seen_under = T.history_owners(history)

    txns = txns.join(seen_under, txns.producer_id == seen_under.pid, "left").drop("pid")
    txns = txns.join(owners, txns.producer_id == owners.pid, "left").drop("pid")
    txns = txns.withColumn(
        "transactional_id_resolved", F.coalesce(F.col("transactional_id"), F.col("history_transactional_id"))
    )
    # small intermediates that several output tables read: compute them once
    txns = _cached(txns, cache)
    state = _cached(state, cache)

    # every transaction, for the transactions table: staged by the tasks that rebuilt them, finished in
    # Python tasks with what only the whole run knows (as_of, the coordinator's owners, the inputs)
    owner_ids = (
        owners.select("pid", "transactional_id")
        .join(seen_under, "pid", "full")
        .select(
            F.col("pid").cast("long").alias("producer_id"),
            F.coalesce("transactional_id", "history_transactional_id").alias("transactional_id"),
        )
        .filter(F.col("transactional_id").isNotNull())
    )
    transactions = StagedTable(
        spark,
        f"{scratch}/transactions",
        Finish(
            as_of_ms=as_of_ms,
            owners=owner_ids.toArrow().cast(OWNERS_SCHEMA),
            sources=health.select("topic", "partition", "source").toArrow().cast(SOURCES_SCHEMA),
        ),
    )
    first_ms = F.coalesce("first_timestamp_ms", "last_timestamp_ms")

    idle = F.lit(as_of_ms) - F.col("last_timestamp_ms")
    candidates = txns.filter((F.size("open_replicas") > 0) & (idle > thresholds.max_transaction_timeout_ms)).select(
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        F.col("first_offset").alias("start_offset"),
        "last_offset",
        "batch_count",
        "first_timestamp_ms",
        "last_timestamp_ms",
        (F.lit(as_of_ms) - first_ms).alias("open_ms"),
        idle.alias("idle_ms"),
        "lso_lag",
        "replicas",
        "open_replicas",
        F.coalesce("started_before_log_start", F.lit(False)).alias("started_before_log_start"),
        "prev_marker_offset",
        "prev_marker_type",
        "prev_marker_epoch",
        # the coordinator epoch of this producer's last marker on the partition, else the snapshot's: what
        # the broker's producer state holds and fences WriteTxnMarkers with (ProducerAppendInfo.appendEndTxnMarker)
        F.coalesce("prev_coordinator_epoch", "snapshot_coordinator_epoch", F.lit(-1)).alias("last_coordinator_epoch"),
        "diverged",
        "behind_replicas",
        "snapshot_offset",
        "log_start_offset",
        "checkpoint_note",
        F.coalesce("owner_match", F.lit(classify.OWNER_NONE)).alias("owner_match"),
        "transactional_id",
        "history_transactional_id",
        "owner_state",
        "owner_partitions",
        "owner_timeout_ms",
        "owner_txn_start_ms",
        "owner_last_update_ms",
        "owner_coordinator_partition",
        "owner_coordinator_epoch",
        "owner_producer_id",
        "source",
    )
    damage = T.damage_map(summary, records)
    classified = _cached(
        T.classify_candidates(candidates, thresholds, damage).filter(F.col("verdict").isNotNull()), cache
    )
    ce = F.greatest(F.col("last_coordinator_epoch"), F.lit(0))

    findings = classified.select(
        *keys,
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "start_offset",
        T.ts("first_timestamp_ms").alias("first_timestamp"),
        T.ts("last_timestamp_ms").alias("last_timestamp"),
        "open_ms",
        "idle_ms",
        "lso_lag",
        "verdict",
        "reason",
        "transactional_id",
        F.col("owner_state").alias("coordinator_state"),
        F.col("owner_coordinator_partition").alias("coordinator_partition"),
        # the same epoch the abort recommendation's legacy command carries (issue 5 rule 9)
        ce.alias("coordinator_epoch"),
        "evidence",
        "advice",
        "replicas",
        "open_replicas",
        "started_before_log_start",
        "source",
    )
    # stuck coordinator records whose partitions are not in the input
    input_tps = pstats.select(F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("tp_name"))
    stuck = T.stuck_coordinator_records(state, input_tps, thresholds)
    since = F.greatest("txn_start_ms", "last_update_ms")
    stuck_findings = stuck.select(
        *keys,
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "producer_id",
        "producer_epoch",
        F.lit(None).cast("long").alias("start_offset"),
        T.ts("txn_start_ms").alias("first_timestamp"),
        T.ts("last_update_ms").alias("last_timestamp"),
        (F.lit(as_of_ms) - F.col("txn_start_ms")).alias("open_ms"),
        (F.lit(as_of_ms) - since).alias("idle_ms"),
        F.lit(None).cast("long").alias("lso_lag"),
        F.lit(classify.LATE).alias("verdict"),
        F.lit(classify.COORDINATOR_STUCK).alias("reason"),
        "transactional_id",
        F.col("state").alias("coordinator_state"),
        "coordinator_partition",
        "coordinator_epoch",
        "evidence",
        "advice",
        F.lit(None).cast("array<string>").alias("replicas"),
        F.lit(None).cast("array<string>").alias("open_replicas"),
        F.lit(False).alias("started_before_log_start"),
        "source",
    )
    findings = findings.unionByName(stuck_findings)

    bootstrap = thresholds.bootstrap_servers or classify.BOOTSTRAP_PLACEHOLDER
    recommendations = classified.filter(F.col("verdict") == classify.HANGING).select(
        *keys,
        "topic",
        "partition",
        "start_offset",
        "producer_id",
        "producer_epoch",
        ce.alias("coordinator_epoch"),
        "transactional_id",
        "reason",
        "safety",
        F.format_string(
            "kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
            F.lit(bootstrap),
            "topic",
            "partition",
            "start_offset",
        ).alias("command"),
        F.format_string(
            "kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --producer-id %d "
            "--producer-epoch %d --coordinator-epoch %d",
            F.lit(bootstrap),
            "topic",
            "partition",
            "producer_id",
            "producer_epoch",
            ce,
        ).alias("legacy_command"),
        "source",
    )

    late_ms = thresholds.max_transaction_timeout_ms + classify.LATE_TRANSACTION_BUFFER_MS
    has_late = F.coalesce(F.col("oldest_idle_ms") > late_ms, F.lit(False))
    partition_health = health.select(
        *keys,
        "topic",
        "partition",
        "log_start_offset",
        "log_end_offset",
        "high_watermark",
        "last_stable_offset",
        "lso_lag",
        "open_transactions",
        F.col("max_open_ms"),
        has_late.alias("has_late_transaction"),
        F.when(has_late, T.ts("oldest_first_ms")).alias("stuck_since"),
        "replicas",
        "batch_count",
        T.ts("max_timestamp_ms").alias("max_timestamp"),
        "source",
    )

    coordinator_state = state.select(
        *keys,
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "state",
        "timeout_ms",
        "partitions",
        T.ts("txn_start_timestamp").alias("txn_start_timestamp"),
        T.ts("last_update_timestamp").alias("last_update_timestamp"),
        "coordinator_partition",
        "coordinator_epoch",
        "previous_producer_id",
        "next_producer_id",
        "client_transaction_version",
        "is_tombstoned",
        "next_producer_epoch",
        "record_offset",
        "transitions",
        "source",
    )
    # every record once, staged by the tasks that decoded (or reduced) them (txnlog.spark.coordinator)
    coordinator_history = StagedTable(spark, f"{scratch}/coordinator_history", FinishHistory(), "coordinator_history")
    q_cols = ["file", "position", "length", "reason", "detail", "topic", "partition"]
    quarantine = (
        summary.filter(F.col("kind") == "quarantine")
        .select(*keys, *q_cols, F.col("broker").alias("replica"))
        .unionByName(
            records.filter(F.col("kind") == "quarantine").select(
                *keys,
                "file",
                "position",
                "length",
                "reason",
                "detail",
                F.lit("__transaction_state").alias("topic"),
                F.col("coordinator_partition").alias("partition"),
                F.col("broker").alias("replica"),
            )
        )
    )
    return {
        "transactions": transactions,
        "findings": findings,
        "abort_recommendations": recommendations,
        "partition_health": partition_health,
        "coordinator_state": coordinator_state,
        "coordinator_history": coordinator_history,
        "quarantine": quarantine,
    }
