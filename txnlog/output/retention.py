"""How long the history is kept: which runs a retention drops, per cluster (``txnlog retain``, and the job's
``retain_runs``/``retain_days``).

A nightly job adds one run per night to every table; a year is 365 runs. Retention keeps, per cluster,
the newest ``keep_runs`` complete runs and every run of the last ``keep_days`` days (counted back from the
cluster's newest complete run, not the wall clock: a cluster whose job stopped keeps its last runs),
and drops every run, complete or not, older than both. The newest complete run is always kept. The
drop is a cutoff per cluster (``txnlog.output.delta_retention.drop_runs_before``), so a retention interrupted half way
is finished by the next one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Plan:
    """What a retention drops: per cluster, the cutoff (runs before it go) and the runs it drops."""

    cutoffs: dict[str, datetime]
    dropped: dict[str, list[datetime]]  # cluster -> the as_of of each run dropped (its runs rows)
    kept: dict[str, int]  # cluster -> runs kept


def plan(
    runs: Iterable[Mapping[str, Any]],
    *,
    keep_runs: int | None = None,
    keep_days: float | None = None,
    clusters: Iterable[str] | None = None,
) -> Plan:
    """The cutoffs for ``runs`` (rows of the ``runs`` table) under the rule in the module docstring.

    >>> from datetime import UTC
    >>> nights = [{"cluster": "c", "as_of": datetime(2026, 1, d, tzinfo=UTC), "status": "SUCCEEDED"} for d in (1, 2, 3)]
    >>> p = plan(nights, keep_runs=2)
    >>> p.cutoffs["c"].day, [t.day for t in p.dropped["c"]], p.kept
    (2, [1], {'c': 2})
    """
    if keep_runs is None and keep_days is None:
        raise ValueError("give keep_runs, keep_days or both")
    if keep_runs is not None and keep_runs < 1:
        raise ValueError(f"keep_runs must be at least 1 (the newest complete run is always kept), got {keep_runs}")
    if keep_days is not None and keep_days < 0:
        raise ValueError(f"keep_days must not be negative, got {keep_days}")
    wanted = None if clusters is None else set(clusters)
    by_cluster: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        if wanted is None or r["cluster"] in wanted:
            by_cluster.setdefault(r["cluster"], []).append(r)
    cutoffs: dict[str, datetime] = {}
    dropped: dict[str, list[datetime]] = {}
    kept: dict[str, int] = {}
    for cluster, rows in sorted(by_cluster.items()):
        complete = sorted((r["as_of"] for r in rows if r.get("status") == "SUCCEEDED"), reverse=True)
        if not complete:
            continue  # nothing is known to be good: keep everything
        candidates = [complete[0]]  # the newest complete run is always kept
        if keep_runs is not None:
            candidates.append(complete[min(keep_runs, len(complete)) - 1])
        if keep_days is not None:
            candidates.append(complete[0] - timedelta(days=keep_days))
        # a run is kept when either rule keeps it: the earliest cutoff wins
        cut = min(candidates[1:]) if len(candidates) > 1 else candidates[0]
        cutoffs[cluster] = cut
        dropped[cluster] = sorted(r["as_of"] for r in rows if r["as_of"] < cut)
        kept[cluster] = sum(1 for r in rows if r["as_of"] >= cut)
    return Plan(cutoffs, dropped, kept)
