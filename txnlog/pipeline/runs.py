"""A run's bookkeeping: its result for the console (:class:`RunResult`) and its row in the ``runs`` table,
which says RUNNING before the first table is written and SUCCEEDED or FAILED after."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog import __version__
from txnlog.broker import classify
from txnlog.model.contract import ANOMALY_CHECKS, RUNS, IntegritySeverity, check_count_column
from txnlog.model.times import duration_text
from txnlog.model.words import count
from txnlog.pipeline.write import write

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.model.config import Config

log = logging.getLogger(__name__)


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
    integrity: dict[str, int] = field(default_factory=dict)  # check -> its anomaly rows (ERROR and WARNING)
    integrity_not_checked: int = 0  # NOT_CHECKED rows: a check that could not run, once per partition

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
        lines.append(self._integrity_line())
        if self.worst_partitions:
            lines.append("  worst partitions (by LSO lag):")
            for p in self.worst_partitions:
                lines.append(
                    f"    {p['topic']}-{p['partition']}: lso_lag {p['lso_lag']}, {p['open_transactions']} open, "
                    f"oldest open {duration_text(p['max_open_ms'])}"
                )
        lines.append(f"  tables: {os.path.abspath(self.output)}/<table> (Delta): " + ", ".join(sorted(self.counts)))
        return "\n".join(lines)

    def _integrity_line(self) -> str:
        anomalies = sum(self.integrity.values())
        skipped = (
            f"; {count(self.integrity_not_checked, 'partition')} not checked (NOT_CHECKED rows)"
            if self.integrity_not_checked
            else ""
        )
        if not anomalies:
            return f"  integrity audit: no anomaly{skipped}"
        checks = ", ".join(f"{check} {n}" for check, n in sorted(self.integrity.items()) if n)
        return (
            f"  integrity audit: {count(anomalies, 'anomaly', 'anomalies')} ({checks}){skipped}: consumers may have "
            "read aborted data or missed committed data; 'txnlog audit -v' lists them"
        )


def summarize(tables: dict[str, Any], counts: dict[str, int], *, run: RunResult) -> tuple[RunResult, int]:
    """The run's result for the console (verdict counts, the worst partitions) and its late partitions."""
    verdicts, worst, late_partitions = _arrow_summary(tables["findings"], tables["partition_health"])
    run.counts = dict(counts)
    run.verdicts, run.worst_partitions = verdicts, worst
    if tables.get("integrity") is not None:
        run.integrity, run.integrity_not_checked = integrity_counts(tables["integrity"])
    return run, late_partitions


def integrity_counts(integrity: Any) -> tuple[dict[str, int], int]:
    """The integrity table's anomaly rows (ERROR and WARNING) per check, and its NOT_CHECKED rows."""
    rows = integrity.select(["check", "severity"]).to_pylist()
    anomalies: dict[str, int] = {}
    for r in rows:
        if r["severity"] != IntegritySeverity.NOT_CHECKED:
            anomalies[r["check"]] = anomalies.get(r["check"], 0) + 1
    return anomalies, sum(r["severity"] == IntegritySeverity.NOT_CHECKED for r in rows)


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


def mark_run(
    spark: SparkSession | None,
    config: Config,
    result: RunResult,
    started_at: datetime,
    status: str,
    *,
    late_partitions: int = 0,
    error: str | None = None,
    best_effort: bool = False,
) -> pa.Table | None:
    """Write the run's ``runs`` row with ``status`` (replacing the row of the same (cluster, as_of)); the row
    written (None: a best-effort mark that failed)."""
    try:
        table = _runs_table(result, started_at, late_partitions, config, status=status, error=error)
        counts = write(spark, {"runs": table}, config, result.cluster, result.as_of)
    except Exception:
        if not best_effort:
            raise
        log.warning("could not mark run %s %s in %s", result.run_id, status, config.output, exc_info=True)
        return None
    if status == "SUCCEEDED":
        result.counts.update(counts)
    return table


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
                "integrity",
            )
        },
        "integrity_anomaly_count": sum(result.integrity.values()),
        "integrity_not_checked_count": result.integrity_not_checked,
        **{check_count_column(check): result.integrity.get(check, 0) for check in ANOMALY_CHECKS},
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
