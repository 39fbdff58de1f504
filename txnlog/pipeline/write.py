"""Writing: every table to its Delta table (txnlog.output.delta), and the history's retention after a
complete run."""

from __future__ import annotations

import os
import sys
import time
from contextlib import nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from txnlog.model.words import count
from txnlog.output import delta, delta_retention, prometheus, retention
from txnlog.output.delta import Supersede
from txnlog.output.spark_base import job_description
from txnlog.pipeline.scope import Progress
from txnlog.rules import metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.model.config import Config


def write(
    spark: SparkSession | None,
    tables: dict[str, Any],
    config: Config,
    cluster: str,
    as_of: datetime,
    supersede: dict[str, Any] | None = None,
) -> dict[str, int]:
    """Every table to its Delta table under ``config.output``: the run's rows (``cluster``, ``as_of``) replaced, one
    commit per table, with the configured writer (a small input's Arrow tables with pyarrow, not by a Spark job's
    writers, txnlog.output.delta). ``supersede``: per table, an earlier run's rows the same commit drops
    (txnlog.output.delta.Supersede)."""

    counts: dict[str, int] = {}
    for name, table in tables.items():
        # each table's Spark jobs labelled with it (a run without Spark has none)
        with job_description(spark, f"txnlog: write {name}") if spark is not None else nullcontext():
            counts.update(
                delta.write_tables(
                    spark,
                    config.output,
                    {name: table},
                    cluster=cluster,
                    as_of=as_of,
                    writer=config.delta_writer,
                    supersede=supersede,
                )  # fmt: skip
            )
        _pause_for_fault_tests(name)
    return counts


def _pause_for_fault_tests(table: str) -> None:
    """The fault tests' seam (tests/e2e/test_faults_job.py): with ``TXNLOG_TEST_PAUSE_AFTER`` set to
    ``<table>:<file>[:<seconds>]``, the driver creates ``<file>`` after committing ``<table>`` and waits until
    the file is removed, for at most that long (default 600 s), so a test can kill it between two tables'
    commits, or run another job meanwhile and let it go on."""
    spec = os.environ.get("TXNLOG_TEST_PAUSE_AFTER")
    if not spec or not spec.startswith(table + ":"):
        return
    target, _, seconds = spec[len(table) + 1 :].partition(":")
    with open(target, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + float(seconds or 600)
    while os.path.exists(target) and time.monotonic() < deadline:
        time.sleep(0.05)


def superseded(cut: LiveCut | None) -> dict[str, Any] | None:
    """A since-last-run cut's previous ``OPEN`` rows that its ``transactions`` rows replace."""
    which = cut.supersede() if cut is not None else None
    if which is None:
        return None

    return {"transactions": Supersede(which[0], which[1])}


def retain(config: Config, cluster: str, progress: Progress) -> None:
    """The history's retention after a complete run (``retain_runs``/``retain_days``; 0 = keep): the run's
    ``cluster``'s runs older than both are deleted from every table (txnlog.output.retention, ``txnlog retain``)."""

    if not config.retain_runs and not config.retain_days:
        return
    runs = delta.read_table(config.output, "runs", cluster=cluster, columns=["cluster", "as_of", "status"])
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


def publish_metrics(config: Config, cluster: str, tables: dict[str, Any], progress: Progress) -> None:
    """The run's metrics (txnlog.rules.metrics, from its tables and its ``runs`` row), labelled with its ``cluster``,
    to ``metrics_file`` and the ``pushgateway``, where configured (txnlog.output.prometheus). The tables are written
    by then: a file or a push that fails is a warning line, not a failed run (the stale-run alert notices a run that
    stops reporting)."""

    if not (config.metrics_file or config.pushgateway):
        return
    registry = metrics.registry(tables)
    done, problems = prometheus.publish(
        registry, cluster=cluster, textfile=config.metrics_file, pushgateway=config.pushgateway
    )
    for problem in problems:
        print(f"txnlog: warning: {problem}", file=sys.stderr, flush=True)
    if done:
        progress("metrics: " + "; ".join(done))
