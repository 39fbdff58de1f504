"""The whole job, one pass down the steps: inputs → decode → tables → write."""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from txnlog.engine.spark.session import get_session
from txnlog.output import output_dir
from txnlog.pipeline.audit import audited_in_memory, with_integrity
from txnlog.pipeline.build import build_tables, resolve_as_of, thresholds_of, verify_live
from txnlog.pipeline.decode import decode
from txnlog.pipeline.inputs import Inputs, placement_of, replanned
from txnlog.pipeline.runs import RunResult, mark_run, summarize
from txnlog.pipeline.scope import Progress, collected_young, run_scope, stderr_progress
from txnlog.pipeline.write import publish_metrics, retain, superseded, write

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.model.config import Config


def run(
    config: Config,
    *,
    spark: SparkSession | None = None,
    progress: Progress = stderr_progress,
    without_spark: bool = True,
    planned: Inputs | None = None,
) -> RunResult:
    """Run the whole job for ``config`` and write the Delta tables; without ``spark``, a small input starts no
    Spark (txnlog.pipeline.inputs.Inputs.without_spark; unless ``without_spark`` is false: the job under
    spark-submit). ``planned``: the inputs the caller already planned for ``config`` without the sample
    (txnlog.pipeline.inputs.plan_inputs), so that the log dirs are not listed twice."""

    with collected_young() as keep:
        return _run(config, spark, progress, without_spark, keep, planned)


def _run(
    config: Config,
    spark: SparkSession | None,
    progress: Progress,
    without_spark: bool,
    keep: Callable[[], None],
    planned: Inputs | None,
) -> RunResult:
    """:func:`run`, ``keep`` called on what lives until its end: the inventory, the decoded rows
    (txnlog.pipeline.scope.collected_young)."""
    t0, started_at, run_id = time.monotonic(), datetime.now(UTC), uuid.uuid4().hex[:12]
    inputs = replanned(config, planned, progress, spark=spark)
    keep()
    cluster, derived, placement = inputs.name, inputs.name_derived and not inputs.sample, inputs.placement
    config = dataclasses.replace(config, cluster=cluster)
    if derived:
        progress(f"cluster '{cluster}': named after the input (the same input gives the same name; --cluster names it)")
    if spark is None and not (without_spark and inputs.without_spark):
        spark = _session(config)
        placement = placement_of(config, inputs, spark)  # weighed again: the session's cores
    with run_scope(spark, config.output, run_id) as (scratch, cache), audited_in_memory(scratch, placement.driver):
        decoded, live_cut = decode(spark, config, inputs, placement, scratch=scratch, cache=cache, progress=progress)
        keep()
        as_of, as_of_source = resolve_as_of(config.as_of, decoded.times, live_cut)
        progress(f"decoded in {time.monotonic() - t0:.1f} s; as_of = {as_of.isoformat()} ({as_of_source})")
        thresholds = thresholds_of(config, inputs, decoded, as_of)
        tables = build_tables(
            spark, decoded, thresholds, scratch=scratch, as_of=as_of, as_of_source=as_of_source, placement=placement,
            metadata=inputs.said.notes,
        )  # fmt: skip
        inventory = inputs.offline.inventory
        tables = with_integrity(tables, inventory, inventory.checkpoints, as_of, decoded.offsets)
        if config.verify_live:
            tables = verify_live(tables, config, progress=progress)
        result = RunResult(run_id, cluster, as_of, config.output, {}, inputs=inputs.names)
        result.cluster_derived = derived
        result.inventory_note, result.as_of_source = inputs.note, as_of_source
        with output_dir.output_lock(config.output, run_id, wait_s=config.write_lock_wait_s, progress=progress):
            # The run's `runs` row says RUNNING before its first table and SUCCEEDED after its last: a run
            # killed in between is not complete, and every reader shows the newest complete run.
            mark = functools.partial(mark_run, spark, config, result, started_at)
            mark("RUNNING")
            try:
                counts = write(spark, tables, config, cluster, as_of, supersede=superseded(live_cut))
                result, late_partitions = summarize(tables, counts, run=result)
                result.seconds = time.monotonic() - t0
                row = mark("SUCCEEDED", late_partitions=late_partitions)
            except BaseException as e:
                mark("FAILED", error=" ".join(f"{type(e).__name__}: {e}".split()), best_effort=True)  # one line
                raise
            publish_metrics(config, cluster, {**tables, "runs": row}, progress)
            retain(config, cluster, progress)
        return result


def _session(config: Config) -> SparkSession:

    return get_session("txnlog", conf=dict(config.spark))
