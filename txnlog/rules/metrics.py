"""The run's metrics, from its tables: what an operator's Prometheus scrapes (a node_exporter textfile, a Pushgateway)
so that alerts ring where they already look.

Pure: the run's Arrow tables in (its ``runs`` row among them), Prometheus metric families out; nothing is written
here (txnlog.output.prometheus writes the file and pushes). Every family is a gauge, each carrying the run's
``cluster``: a run is a snapshot as of ``as_of``, so nothing here only ever goes up (no ``_total``). Names follow
Prometheus' conventions: the ``txnlog_`` prefix and the unit last (``_seconds``, ``_offsets``).

What the families say, and the table each one counts:

* ``txnlog_findings{verdict, reason, source}``: ``findings`` rows. HANGING (nothing will end it) and LATE (the
  coordinator still should) apart, which the broker's ``PartitionsWithLateTransactionsCount`` gauge cannot tell
  (``txnlog_partitions_with_late_transactions`` is that gauge's count, from ``partition_health``);
* ``txnlog_lso_lag_offsets`` / ``txnlog_lso_lag_seconds{topic, partition, source}``: per partition with a finding,
  ``partition_health.lso_lag`` and the age of its oldest open transaction (``max_open_ms``);
* ``txnlog_blocked_consumer_groups{status}``: ``blocked_consumers``' groups per status; per group and partition
  stalled (BLOCKED, UNSTABLE_OFFSET_COMMIT), ``txnlog_blocked_consumer_seconds`` (since ``blocked_since``) and
  ``txnlog_blocked_consumer_offsets`` (``offsets_to_high_watermark``), labelled with the holding producer id;
* ``txnlog_integrity_anomalies{check}``: the integrity audit's ERROR and WARNING rows per check;
* the run: ``txnlog_run_as_of_timestamp_seconds``, ``txnlog_run_finished_timestamp_seconds`` (alerts compute the
  run's age from them), ``txnlog_run_duration_seconds``, ``txnlog_run_info``, ``txnlog_table_rows{table}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC
from txnlog.model.contract import ANOMALY_CHECKS, RUNS, TABLES, check_count_column
from txnlog.rules.blocked import BEHIND_LSO, BLOCKED, NOT_BLOCKED_INFERRED, UNSTABLE_OFFSET_COMMIT

__all__ = ["STALLED", "STATUSES", "metric_families", "registry"]

#: ``blocked_consumers.status`` values, each counted even when no group has it
STATUSES = (BLOCKED, UNSTABLE_OFFSET_COMMIT, BEHIND_LSO, NOT_BLOCKED_INFERRED)
#: the statuses whose rows get a series of their own: the group waits (BLOCKED) or stalls at every start-up
#: and rebalance (UNSTABLE_OFFSET_COMMIT)
STALLED = (BLOCKED, UNSTABLE_OFFSET_COMMIT)
#: the tables whose rows the ``runs`` row counts (``<table>_count``)
COUNTED = tuple(t for t in TABLES if f"{t}_count" in RUNS.names)

Samples = Iterable[tuple[tuple[str, ...], float]]


class _Gauges:
    """Gauge families of one cluster: every series starts with the ``cluster`` label, and series that would repeat
    a label set (two groups' names decoded to one string) are merged by ``merge``."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.families: list[Metric] = []

    def add(
        self,
        name: str,
        doc: str,
        labels: Sequence[str],
        samples: Samples,
        *,
        unit: str = "",
        merge: Callable[[float, float], float] = max,
    ) -> None:
        merged: dict[tuple[str, ...], float] = {}
        for key, value in samples:
            merged[key] = merge(merged[key], value) if key in merged else value
        family = GaugeMetricFamily(name, doc, labels=["cluster", *labels], unit=unit)
        for key in sorted(merged):
            family.add_metric([self.cluster, *key], merged[key])
        self.families.append(family)


def metric_families(tables: Mapping[str, Any]) -> list[Metric]:
    """The run's metric families from its tables: ``runs`` (the run's one row, as written), ``findings``,
    ``partition_health``, and ``blocked_consumers`` and ``integrity`` where the run has them."""
    runs = tables["runs"]
    if runs.num_rows != 1:
        raise ValueError(f"metric_families: expected the run's one runs row, got {runs.num_rows}")
    run = runs.to_pylist()[0]
    gauges = _Gauges(run["cluster"])
    _run(gauges, run)
    _findings(gauges, tables["findings"], tables["partition_health"])
    blocked = tables.get("blocked_consumers")
    if blocked is not None:
        _blocked(gauges, blocked, tables["partition_health"], tables["findings"], run["as_of"])
    if tables.get("integrity") is not None:
        _integrity(gauges, run)
    return gauges.families


def registry(tables: Mapping[str, Any]) -> CollectorRegistry:
    """A registry of its own holding :func:`metric_families` (never the process's global one: a run's metrics are
    the run's alone)."""
    out = CollectorRegistry(auto_describe=False)
    out.register(_Fixed(metric_families(tables)))
    return out


class _Fixed:
    """A collector answering the same families at every collection."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def _seconds(t: datetime) -> float:
    return t.timestamp()


def _run(g: _Gauges, run: dict[str, Any]) -> None:
    as_of, finished, started = run["as_of"], run["finished_at"], run["started_at"]
    g.add(
        "txnlog_run_as_of_timestamp_seconds",
        "The run's as_of: the time its ages are counted at, UNIX seconds",
        [],
        [((), _seconds(as_of))],
        unit="seconds",
    )
    if finished is not None:
        g.add(
            "txnlog_run_finished_timestamp_seconds",
            "When the run finished writing its tables, UNIX seconds",
            [],
            [((), _seconds(finished))],
            unit="seconds",
        )
        g.add(
            "txnlog_run_duration_seconds",
            "The run's duration: from its start to its runs row's finished_at",
            [],
            [((), (finished - started).total_seconds())],
            unit="seconds",
        )
    info = (run["run_id"] or "", run["txnlog_version"] or "", run["as_of_source"] or "", run["status"] or "")
    g.add(
        "txnlog_run_info",
        "The run: its id, txnlog's version, where as_of came from, its status (always 1)",
        ["run_id", "version", "as_of_source", "status"],
        [(info, 1.0)],
    )
    counted = [((t,), float(run[f"{t}_count"])) for t in COUNTED if run.get(f"{t}_count") is not None]
    g.add("txnlog_table_rows", "Rows the run wrote to each table (its runs row's <table>_count)", ["table"], counted)
    late = run["partitions_with_late_transactions"] or 0
    g.add(
        "txnlog_partitions_with_late_transactions",
        "Partitions whose oldest open transaction is idle past the timeout: the broker's "
        "PartitionsWithLateTransactionsCount, which does not tell HANGING from LATE",
        [],
        [((), float(late))],
    )


def _findings(g: _Gauges, findings: pa.Table, health: pa.Table) -> None:
    counts = findings.group_by(["verdict", "reason", "source"], use_threads=False).aggregate([([], "count_all")])
    g.add(
        "txnlog_findings",
        "Late and hanging transactions (findings rows) by verdict (HANGING: nothing will end it, abort; LATE: the "
        "coordinator still should) and reason",
        ["verdict", "reason", "source"],
        (
            ((r["verdict"] or "", r["reason"] or "", r["source"] or ""), float(r["count_all"]))
            for r in counts.to_pylist()
        ),
        merge=lambda a, b: a + b,
    )
    found = findings.select(["topic", "partition"]).drop_null()
    keys = pa.table({"topic": found["topic"], "partition": found["partition"]}).group_by(["topic", "partition"])
    lags = health.select(["topic", "partition", "source", "lso_lag", "max_open_ms"])
    rows = lags.join(keys.aggregate([]), ["topic", "partition"], join_type="left semi").to_pylist()
    labels = ["topic", "partition", "source"]

    def key(r: dict[str, Any]) -> tuple[str, ...]:
        return (r["topic"], str(r["partition"]), r["source"] or "")

    g.add(
        "txnlog_lso_lag_offsets",
        "Per partition with a finding: offsets between its last stable offset and its log end (partition_health)",
        labels,
        ((key(r), float(r["lso_lag"])) for r in rows if r["lso_lag"] is not None),
        unit="offsets",
    )
    g.add(
        "txnlog_lso_lag_seconds",
        "Per partition with a finding: how long its oldest open transaction, which holds the last stable offset "
        "back, has been open at as_of (partition_health.max_open_ms)",
        labels,
        ((key(r), r["max_open_ms"] / 1000) for r in rows if r["max_open_ms"] is not None),
        unit="seconds",
    )


def _groups_known(blocked: pa.Table, health: pa.Table, findings: pa.Table) -> bool:
    """Whether the run read consumer groups: it has ``blocked_consumers`` rows, a finding naming the groups its
    remedy unblocks (null when no group was read), or a ``__consumer_offsets`` partition (the job reads groups from
    those); without any, no count rather than a count of 0."""
    named = findings.num_rows > 0 and bool(pc.any(pc.is_valid(findings["blocked_groups"])).as_py())
    offsets = bool(pc.any(pc.equal(health["topic"], CONSUMER_OFFSETS_TOPIC)).as_py())
    return blocked.num_rows > 0 or named or offsets


def _blocked(g: _Gauges, blocked: pa.Table, health: pa.Table, findings: pa.Table, as_of: datetime) -> None:
    if not _groups_known(blocked, health, findings):
        return
    per_status = blocked.group_by(["status"], use_threads=False).aggregate([("group", "count_distinct")])
    counts = {r["status"]: r["group_count_distinct"] for r in per_status.to_pylist()}
    g.add(
        "txnlog_blocked_consumer_groups",
        "Consumer groups per blocked_consumers status: BLOCKED (read_committed, at a last stable offset an open "
        "transaction holds, inferred), UNSTABLE_OFFSET_COMMIT (a pending transactional offset: every member "
        "stalls at start-up and rebalance), BEHIND_LSO, NOT_BLOCKED_INFERRED",
        ["status"],
        (((s,), float(counts.get(s, 0))) for s in sorted({*STATUSES, *counts} - {None})),
    )
    stalled = blocked.filter(pc.is_in(blocked["status"], pa.array(STALLED)))
    columns = [
        "group",
        "topic",
        "partition",
        "status",
        "holding_producer_id",
        "source",
        "blocked_since",
        "offsets_to_high_watermark",
    ]
    rows = stalled.select(columns).to_pylist()
    labels = ["group", "topic", "partition", "status", "holding_producer_id", "source"]

    def key(r: dict[str, Any]) -> tuple[str, ...]:
        pid = r["holding_producer_id"]
        return (
            r["group"],
            r["topic"],
            str(r["partition"]),
            r["status"],
            "" if pid is None else str(pid),
            r["source"] or "",
        )

    g.add(
        "txnlog_blocked_consumer_seconds",
        "Per consumer group and partition stalled (BLOCKED, UNSTABLE_OFFSET_COMMIT): seconds from blocked_since "
        "to as_of; holding_producer_id is the open transaction to end",
        labels,
        ((key(r), (as_of - r["blocked_since"]).total_seconds()) for r in rows if r["blocked_since"] is not None),
        unit="seconds",
    )
    g.add(
        "txnlog_blocked_consumer_offsets",
        "Per consumer group and partition stalled: offsets from its committed offset to the high watermark "
        "(markers and aborted records included: offsets, not records it will receive)",
        labels,
        ((key(r), float(r["offsets_to_high_watermark"])) for r in rows if r["offsets_to_high_watermark"] is not None),
        unit="offsets",
    )


def _integrity(g: _Gauges, run: dict[str, Any]) -> None:
    """The audit's anomalies per check and its partitions not checked, as the ``runs`` row counts them."""
    g.add(
        "txnlog_integrity_anomalies",
        "Integrity audit anomalies (ERROR and WARNING rows) per check: read_committed consumers got aborted data "
        "or missed committed data",
        ["check"],
        (((c.value,), float(run.get(check_count_column(c)) or 0)) for c in ANOMALY_CHECKS),
    )
    g.add(
        "txnlog_integrity_not_checked_partitions",
        "Partitions where an integrity check could not run (NOT_CHECKED rows: the copy lacks what it needs)",
        [],
        [((), float(run.get("integrity_not_checked_count") or 0))],
    )
