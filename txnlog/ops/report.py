"""Plots and tables for people: the notebooks call these, so they define no logic.

matplotlib is imported lazily (``pip install txnlog[notebook]``); inputs are the output tables as pandas
DataFrames (``txnlog.output.delta.read_table(...).to_pandas()``), outputs are DataFrames and matplotlib axes.

* ``notebooks/forensics.ipynb`` (one run): :func:`newest_run`, :func:`plot_lso_lag`, :func:`plot_timeline`,
  :func:`impact_plan`, :func:`plot_impact_plan`.
* ``notebooks/cluster_overview.ipynb`` (the history of many runs): :func:`findings_over_time`,
  :func:`lso_lag_over_runs`, :func:`time_to_resolution`, :func:`duration_distribution`,
  :func:`coordinator_states` and their ``plot_*``.

A finding's identity across runs (:func:`finding_identity`, README "What it writes"): (cluster, topic,
partition, producer_id, start_offset) for a partition finding, (cluster, transactional_id, producer_id,
producer_epoch) for a coordinator-only one (no topic). ``dashboards/*.sql`` use the same definitions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from txnlog.model.words import count
from txnlog.rules.plan import fence_steps, plan_steps

OUTCOME_COLORS = {"COMMIT": "#4c9a2a", "ABORT": "#c0504d", "OPEN": "#f0a30a", "UNKNOWN": "#7f7f7f"}
#: reasons of HANGING findings in reds, LATE ones in blues (the same reason keeps its colour in every plot)
REASON_COLORS = {
    "NO_TRANSACTIONAL_ID": "#67000d",
    "TRANSACTIONAL_ID_EXPIRED": "#a50f15",
    "COORDINATOR_COMPLETED": "#ef3b2c",
    "PARTITION_NOT_IN_TRANSACTION": "#fc9272",
    "MARKERS_PENDING": "#08306b",
    "COORDINATOR_TIMEOUT_OVERDUE": "#2171b5",
    "TWO_PHASE_IN_DOUBT": "#6baed6",
    "COORDINATOR_STUCK": "#9ecae1",
}
STATE_COLORS = {
    "Empty": "#d9d9d9",
    "Ongoing": "#f0a30a",
    "PrepareCommit": "#74c476",
    "PrepareAbort": "#fb6a4a",
    "CompleteCommit": "#238b45",
    "CompleteAbort": "#cb181d",
    "PrepareEpochFence": "#6a51a3",
    "Dead": "#525252",
}


def _pd() -> Any:
    # Lazy in this module: matplotlib and pandas are the notebook extra (pip install txnlog[notebook]).
    import pandas as pd

    return pd


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    import matplotlib.pyplot as plt

    return ax if ax is not None else plt.subplots(figsize=figsize)[1]


def _run_label(ts: Any) -> str:
    return _pd().Timestamp(ts).strftime("%m-%d %H:%M")


def _partition_name(df: Any) -> Any:
    return df["topic"].astype(str) + "-" + df["partition"].astype("Int64").astype(str)


# --- one run ---------------------------------------------------------------------------------------------


def complete_runs(runs: Any, cluster: str | None = None) -> Any:
    """The ``runs`` rows that are complete (status ``SUCCEEDED``), of ``cluster`` if given, oldest first."""
    done = runs[runs["status"] == "SUCCEEDED"]
    if cluster is not None:
        done = done[done["cluster"] == cluster]
    return done.sort_values(["cluster", "as_of"]).reset_index(drop=True)


def newest_run(runs: Any, cluster: str | None = None, as_of: Any = None) -> dict[str, Any]:
    """``{"cluster", "as_of"}`` of the run to show: the newest complete one (as ``txnlog`` picks it), or the
    complete run at ``as_of``. Raises ``LookupError`` when there is none."""
    pd = _pd()
    done = complete_runs(runs, cluster)
    if as_of is not None:
        done = done[done["as_of"] == pd.Timestamp(as_of)]
    if done.empty:
        raise LookupError(f"no complete run{f' of {cluster}' if cluster else ''}{f' at {as_of}' if as_of else ''}")
    row = done.sort_values("as_of").iloc[-1]
    return {"cluster": row["cluster"], "as_of": row["as_of"].to_pydatetime()}


def plot_lso_lag(health: Any, *, top: int = 15, ax: Any = None) -> Any:
    """Horizontal bars of the partitions with the largest LSO lag; late ones in red."""
    worst = health[health["lso_lag"] > 0].sort_values("lso_lag", ascending=True).tail(top)
    ax = _axes(ax, (8, 0.35 * max(len(worst), 1) + 1.2))
    colors = ["#c0504d" if late else "#f0a30a" for late in worst["has_late_transaction"]]
    ax.barh(_partition_name(worst), worst["lso_lag"], color=colors)
    ax.set_xlabel("LSO lag (offsets read_committed consumers cannot reach)")
    ax.set_title("Partitions pinned by open transactions (red: late per the broker metric)")
    return ax


def timeline_producers(transactions: Any, *, max_producers: int = 30) -> list[int]:
    """The producers :func:`plot_timeline` shows, top to bottom: every producer with an open transaction,
    then the busiest others (most transactions) up to ``max_producers`` in all (more if more are open)."""
    counts = transactions.groupby("producer_id").size()
    open_ids = set(transactions.loc[transactions["outcome"] == "OPEN", "producer_id"])
    busiest = [int(p) for p in counts.sort_values(ascending=False, kind="stable").index if p not in open_ids]
    keep = sorted(int(p) for p in open_ids) + busiest[: max(0, max_producers - len(open_ids))]
    return keep


def plot_timeline(
    transactions: Any,
    topic: str,
    partition: int,
    *,
    as_of: datetime,
    max_producers: int = 30,
    window: Any = "auto",
    ax: Any = None,
) -> Any:
    """A partition's transactions over time, one row per producer (its id as the label).

    Each finished transaction is a thin segment from its first batch to its marker, ending in a tick at the
    marker (green COMMIT, red ABORT); an open one is a thick orange bar from its first batch to ``as_of``
    (dashed grey line), labelled with its start offset. With more than ``max_producers`` producers only
    those with an open transaction and the busiest others are drawn, and the title says so. ``window``: how
    much time before ``as_of`` to show (a ``pandas.Timedelta``; ``None``: all; ``"auto"``: from half the
    oldest open transaction's age before its start, or all when none is open)."""
    import matplotlib.dates as mdates  # optional: matplotlib (notebooks only)

    pd = _pd()
    rows = transactions[(transactions["topic"] == topic) & (transactions["partition"] == partition)]
    shown = timeline_producers(rows, max_producers=max_producers)
    n_all, n_txns = rows["producer_id"].nunique(), len(rows)
    rows = rows[rows["producer_id"].isin(shown)]
    ax = _axes(ax, (11, 0.32 * len(shown) + 1.8))
    as_of_ts = pd.Timestamp(as_of)
    y = {pid: i for i, pid in enumerate(reversed(shown))}  # the first shown on top
    start = rows["first_timestamp"].fillna(rows["last_timestamp"])
    end = rows["marker_timestamp"].where(rows["outcome"] != "OPEN", as_of_ts).fillna(rows["last_timestamp"])
    ys = rows["producer_id"].map(y)
    done = rows["outcome"] != "OPEN"
    for outcome, tick in (("COMMIT", "|"), ("ABORT", "x"), ("UNKNOWN", ".")):
        sel = done & (rows["outcome"] == outcome)
        if not sel.any():
            continue
        ax.hlines(ys[sel], start[sel], end[sel], color=OUTCOME_COLORS[outcome], linewidth=1.2, alpha=0.8)
        ax.plot(end[sel], ys[sel], linestyle="none", marker=tick, markersize=7, color=OUTCOME_COLORS[outcome])
    for i in rows.index[~done]:
        ax.hlines(ys[i], start[i], end[i], color=OUTCOME_COLORS["OPEN"], linewidth=9, zorder=3)
        ax.annotate(
            f"open since offset {rows.at[i, 'first_offset']}",
            (start[i], ys[i]),
            xytext=(0, 7),
            textcoords="offset points",
            fontsize=8,
            color="#a05a00",
        )
    ax.axvline(as_of_ts, color="grey", linestyle="--", linewidth=1)
    ax.set_yticks(list(y.values()), [str(p) for p in y])
    ax.set_ylim(-0.8, len(shown) - 0.2)
    ax.set_ylabel("producer id")
    if isinstance(window, str) and window == "auto":
        oldest = start[~done].min() if (~done).any() else pd.NaT
        window = None if pd.isna(oldest) else (as_of_ts - oldest) * 1.5
    if window is not None:
        span = pd.Timedelta(window)
        ax.set_xlim(as_of_ts - span, as_of_ts + span * 0.03)
        in_view = int(((end >= as_of_ts - span) & (start <= as_of_ts)).sum())
        view = f", {in_view} in the last {_duration(span)} before as_of"
    else:
        view = ""
    n_open = int((~done).sum())
    cap = f"\nshowing {len(shown)} of {n_all} producers: every one with an open transaction + the busiest"
    ax.set_title(
        f"{topic}-{partition}: {n_txns} transactions, {n_open} open{view}" + (cap if len(shown) < n_all else "")
    )
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    _timeline_legend(ax)
    return ax


def _timeline_legend(ax: Any) -> None:
    """:func:`plot_timeline`'s legend, beside the axes."""
    from matplotlib.lines import Line2D  # optional: matplotlib (notebooks only)

    ax.legend(
        handles=[
            Line2D([], [], color=OUTCOME_COLORS["COMMIT"], marker="|", label="committed (tick: marker)"),
            Line2D([], [], color=OUTCOME_COLORS["ABORT"], marker="x", label="aborted (x: marker)"),
            Line2D([], [], color=OUTCOME_COLORS["OPEN"], linewidth=6, label="open until as_of"),
            Line2D([], [], color="grey", linestyle="--", label="as_of"),
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
    )


def impact_plan(recommendations: Any, health: Any, findings: Any = None, transactions: Any = None) -> Any:
    """``txnlog plan``'s rows as a DataFrame: per partition the aborts and (given ``findings``) the fences in
    order, the LSO before and after each and the offsets it releases, partitions that release the most first
    (``txnlog.rules.plan.plan_steps``; ``transactions``' open ones are what a fence's release stops at)."""

    pd = _pd()

    def records(df: Any) -> list[dict[str, Any]]:
        return [] if df is None else df.astype(object).where(df.notna(), None).to_dict("records")

    fences = fence_steps(records(findings))
    fenced = {(f["topic"], f["partition"]) for f in fences}
    open_txns = [
        t
        for t in records(transactions)
        if t["outcome"] == "OPEN"
        and t.get("open_replicas") is not None
        and len(t["open_replicas"])
        and (t["topic"], t["partition"]) in fenced
    ]
    columns = [
        "topic",
        "partition",
        "step",
        "remedy",
        "start_offset",
        "producer_id",
        "producer_epoch",
        "transactional_id",
        "reason",
        "safety",
        "lso_before",
        "lso_after_abort",
        "offsets_released",
        "command",
    ]
    steps = plan_steps(records(recommendations), records(health), fences, open_txns)
    return pd.DataFrame(steps, columns=columns).astype(
        dict.fromkeys(("partition", "step", "start_offset", "producer_id", "lso_before", "lso_after_abort"), "Int64")
        | {"offsets_released": "Int64", "producer_epoch": "Int64"}
    )


def plot_impact_plan(plan: Any, *, ax: Any = None) -> Any:
    """Offsets each abort or fence releases to read_committed consumers, in the plan's order (SAFE green,
    VERIFY_FIRST grey)."""
    ax = _axes(ax, (8, 0.4 * max(len(plan), 1) + 1.2))
    labels = [
        f"{r.topic}-{r.partition} #{r.step} (producer {r.producer_id} @ {r.start_offset})"
        for r in plan.itertuples(index=False)
    ]
    colors = ["#4c9a2a" if s == "SAFE" else "#9e9e9e" for s in plan["safety"]]
    released = plan["offsets_released"].fillna(0).astype(int)
    ax.barh(labels[::-1], released.to_list()[::-1], color=colors[::-1])
    for i, (v, r) in enumerate(zip(released.to_list()[::-1], plan.iloc[::-1].itertuples(index=False))):
        ax.annotate(f" LSO {r.lso_before} -> {r.lso_after_abort}", (v, i), va="center", fontsize=8)
    safe = plan[plan["safety"] == "SAFE"]["offsets_released"].fillna(0).sum()
    ax.set_xlabel("offsets released to read_committed consumers")
    fences = plan[plan["remedy"] == "FENCE"] if "remedy" in plan.columns else plan.iloc[:0]
    what = count(len(plan) - len(fences), "abort") + (
        f" and {count(fences['transactional_id'].nunique(), 'fence')}" if len(fences) else ""
    )
    title = "Plan" if len(fences) else "Abort plan"
    ax.set_title(f"{title}: {what}, the SAFE ones release {count(int(safe), 'offset')} (grey: VERIFY_FIRST)")
    return ax


# --- many runs ---------------------------------------------------------------------------------------------


def _in_complete_runs(table: Any, runs: Any) -> Any:
    keys = complete_runs(runs)[["cluster", "as_of"]]
    return table.merge(keys, on=["cluster", "as_of"], how="inner")


def finding_identity(findings: Any) -> Any:
    """A finding's identity across runs, as one string per row: ``cluster/topic-partition/pid/start_offset``
    for a partition finding, ``cluster/transactional_id/pid/epoch`` for a coordinator-only one."""
    partition = (
        findings["cluster"]
        + "/"
        + _partition_name(findings)
        + "/pid "
        + findings["producer_id"].astype("Int64").astype(str)
        + "/offset "
        + findings["start_offset"].astype("Int64").astype(str)
    )
    coordinator = (
        findings["cluster"]
        + "/"
        + findings["transactional_id"].astype(str)
        + "/pid "
        + findings["producer_id"].astype("Int64").astype(str)
        + "/epoch "
        + findings["producer_epoch"].astype("Int64").astype(str)
    )
    return partition.where(findings["topic"].notna(), coordinator)


def findings_over_time(findings: Any, runs: Any) -> Any:
    """Findings per complete run and (verdict, reason): index ``as_of``, one column per ``"VERDICT REASON"``
    (HANGING first), 0 where a run has none (every complete run is a row)."""
    pd = _pd()
    f = _in_complete_runs(findings, runs)
    labels = f["verdict"] + " " + f["reason"]
    counts = f.assign(kind=labels).groupby(["as_of", "kind"]).size().unstack("kind", fill_value=0)
    counts = counts.reindex(pd.Index(complete_runs(runs)["as_of"].unique(), name="as_of"), fill_value=0)
    order = sorted(counts.columns, key=lambda k: (not k.startswith("HANGING"), k))
    return counts[order].astype(int)


def plot_findings_over_time(counts: Any, *, ax: Any = None) -> Any:
    """Stacked bars per run: HANGING reasons in reds, LATE reasons in blues."""
    ax = _axes(ax, (10, 4.5))
    bottom = [0] * len(counts)
    x = [_run_label(t) for t in counts.index]
    for kind in counts.columns:
        values = counts[kind].to_list()
        ax.bar(x, values, bottom=bottom, label=kind, color=REASON_COLORS.get(kind.split(" ", 1)[-1]))
        bottom = [b + v for b, v in zip(bottom, values)]
    for i, total in enumerate(bottom):
        ax.annotate(str(total), (i, total), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("findings")
    ax.set_xlabel("run (as_of, UTC)")
    ax.set_title("Findings per run by verdict and reason (reds: HANGING, blues: LATE)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


def lso_lag_over_runs(health: Any, runs: Any, *, top: int = 8) -> Any:
    """LSO lag per run (index ``as_of``) of the ``top`` partitions with the largest lag in any run (columns
    ``topic-partition``, worst first); offline rows only (``source`` not ``live``); NaN where a run did not
    see the partition."""
    h = _in_complete_runs(health, runs)
    h = h[h["source"].fillna("") != "live"].assign(name=lambda d: _partition_name(d))
    worst = h[h["lso_lag"] > 0].groupby("name")["lso_lag"].max().sort_values(ascending=False, kind="stable")
    wide = h[h["name"].isin(worst.index[:top])].pivot_table(index="as_of", columns="name", values="lso_lag")
    return wide.reindex(columns=list(worst.index[:top]))


def plot_lso_lag_over_runs(wide: Any, *, ax: Any = None) -> Any:
    """One line per partition: its LSO lag in each run."""
    ax = _axes(ax, (10, 4.5))
    x = [_run_label(t) for t in wide.index]
    for name in wide.columns:
        ax.plot(x, wide[name].to_list(), marker="o", label=name)
    ax.set_ylabel("LSO lag (offsets)")
    ax.set_xlabel("run (as_of, UTC)")
    ax.set_title(f"LSO lag over runs: the {len(wide.columns)} most pinned partitions")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


def time_to_resolution(findings: Any, runs: Any) -> Any:
    """One row per finding identity (:func:`finding_identity`) over the complete runs of its cluster:
    ``first_seen`` (the first run that shows it), ``last_seen``, ``resolved_at`` (the first complete run
    after ``last_seen``: the finding was in run N and is gone in run N+1; NaT while the newest run still
    shows it), ``time_to_resolution`` (``resolved_at - first_seen``), ``runs_seen``, and the verdict,
    reason and names as last seen. Sorted by ``first_seen``."""
    pd = _pd()
    f = _in_complete_runs(findings, runs).assign(finding=lambda d: finding_identity(d)).sort_values("as_of")
    columns = ["finding", "cluster", "topic", "partition", "transactional_id", "producer_id", "verdict", "reason"]
    last = f.groupby("finding").tail(1).set_index("finding")
    out = f.groupby("finding").agg(
        first_seen=("as_of", "min"), last_seen=("as_of", "max"), runs_seen=("as_of", "nunique")
    )
    out = out.join(last[columns[1:]])
    done = complete_runs(runs)

    def resolved(row: Any) -> Any:
        later = done[(done["cluster"] == row["cluster"]) & (done["as_of"] > row["last_seen"])]["as_of"]
        return later.min() if len(later) else pd.NaT

    out["resolved_at"] = out.apply(resolved, axis=1) if len(out) else pd.Series(dtype="datetime64[ns, UTC]")
    out["resolved_at"] = pd.to_datetime(out["resolved_at"], utc=True)
    out["time_to_resolution"] = out["resolved_at"] - out["first_seen"]
    out = out.reset_index().sort_values(["first_seen", "finding"], kind="stable").reset_index(drop=True)
    return out[[*columns, "first_seen", "last_seen", "resolved_at", "time_to_resolution", "runs_seen"]]


def plot_time_to_resolution(ttr: Any, *, ax: Any = None) -> Any:
    """A bar per finding from the first run that showed it to the run it was gone in (solid, with the time
    it took) or to the newest run (hatched: still open)."""
    import matplotlib.dates as mdates

    pd = _pd()
    ax = _axes(ax, (11, 0.38 * max(len(ttr), 1) + 1.5))
    newest = ttr["last_seen"].max() if len(ttr) else pd.Timestamp.now(tz="UTC")
    labels = []
    for i, r in enumerate(ttr.itertuples(index=False)):
        open_ = pd.isna(r.resolved_at)
        end = newest if open_ else r.resolved_at
        color = REASON_COLORS.get(r.reason, "#7f7f7f")
        width = max(end - r.first_seen, pd.Timedelta(minutes=1))
        ax.barh(i, width, left=r.first_seen, color=color, hatch="//" if open_ else None, alpha=0.6 if open_ else 1)
        text = "still open" if open_ else f"resolved in {_duration(r.time_to_resolution)}"
        ax.annotate(f" {text}", (end, i), va="center", fontsize=8)
        where = f"{r.topic}-{int(r.partition)}" if pd.notna(r.topic) else f"id {r.transactional_id}"
        labels.append(f"{where} pid {r.producer_id} ({r.verdict} {r.reason})")
    ax.set_yticks(range(len(ttr)), labels, fontsize=8)
    ax.invert_yaxis()
    n_resolved = int(ttr["resolved_at"].notna().sum())
    ax.set_title(f"Time to resolution: {n_resolved} of {len(ttr)} findings resolved (hatched: still open)")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    return ax


def _duration(td: Any) -> str:
    seconds = int(td.total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def unique_transactions(transactions: Any) -> Any:
    """Each transaction once over many runs, as the newest run saw it (key: cluster, topic, partition,
    producer_id, first_offset)."""
    key = ["cluster", "topic", "partition", "producer_id", "first_offset"]
    return transactions.sort_values("as_of").drop_duplicates(key, keep="last").reset_index(drop=True)


def duration_distribution(transactions: Any) -> Any:
    """Per outcome over :func:`unique_transactions`: count and the 50th/90th/99th percentile and maximum of
    ``duration_ms`` (an open transaction's: as long as it has been open)."""
    t = unique_transactions(transactions)
    stats = t.groupby("outcome")["duration_ms"].describe(percentiles=[0.5, 0.9, 0.99])
    stats = stats.rename(columns={"50%": "p50_ms", "90%": "p90_ms", "99%": "p99_ms", "max": "max_ms"})
    stats["count"] = stats["count"].astype(int)
    return stats[["count", "p50_ms", "p90_ms", "p99_ms", "max_ms"]]


def plot_duration_distribution(transactions: Any, *, ax: Any = None) -> Any:
    """Histogram of transaction durations on a log axis, per outcome (durations under 1 ms drawn at 1 ms)."""

    t = unique_transactions(transactions)
    ax = _axes(ax, (10, 4.5))
    durations = t["duration_ms"].fillna(1).clip(lower=1).astype(float)
    bins = np.logspace(0, np.log10(max(float(durations.max()), 10.0)) + 0.1, 40)
    for outcome in [o for o in OUTCOME_COLORS if (t["outcome"] == o).any()]:
        d = durations[t["outcome"] == outcome]
        ax.hist(d, bins=bins, color=OUTCOME_COLORS[outcome], alpha=0.7, label=f"{outcome} ({len(d)})", log=True)
    ax.set_xscale("log")
    ax.set_xlabel("duration (ms, log scale): first batch to marker, or to as_of while open")
    ax.set_ylabel("transactions (log scale)")
    ax.set_title(f"Transaction durations: {len(t)} transactions over all runs")
    ax.legend(fontsize=8)
    return ax


def coordinator_states(coordinator_state: Any, runs: Any) -> Any:
    """transactional.ids per complete run (index ``as_of``) and coordinator state (columns; an expired,
    tombstoned id is ``Dead``), 0 where none."""
    pd = _pd()
    c = _in_complete_runs(coordinator_state, runs)
    state = c["state"].where(~c["is_tombstoned"].fillna(False).astype(bool), "Dead").fillna("Dead")
    counts = c.assign(state=state).groupby(["as_of", "state"]).size().unstack("state", fill_value=0)
    counts = counts.reindex(pd.Index(complete_runs(runs)["as_of"].unique(), name="as_of"), fill_value=0)
    order = [s for s in STATE_COLORS if s in counts.columns] + sorted(set(counts.columns) - set(STATE_COLORS))
    return counts[order].astype(int)


def plot_coordinator_states(counts: Any, *, ax: Any = None) -> Any:
    """Stacked bars per run: how many transactional.ids the coordinator holds in each state."""
    ax = _axes(ax, (10, 4.5))
    x = [_run_label(t) for t in counts.index]
    bottom = [0] * len(counts)
    for state in counts.columns:
        values = counts[state].to_list()
        ax.bar(x, values, bottom=bottom, label=state, color=STATE_COLORS.get(state))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("transactional.ids")
    ax.set_xlabel("run (as_of, UTC)")
    ax.set_title("Coordinator states per run (__transaction_state, latest record per transactional.id)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax
