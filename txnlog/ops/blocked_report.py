"""Who is blocked, for people: the forensic notebook's first question, and the runbook's first step. From the
``blocked_consumers`` table (txnlog.rules.blocked) the groups that wait (BLOCKED) or stall at every start-up and
rebalance (UNSTABLE_OFFSET_COMMIT), since when, behind which transaction, and the remedy that unblocks each: the
abort (``abort_recommendations.blocked_groups``) or the LATE finding's remedy (``findings.blocked_groups``).

Inputs are the output tables as pandas DataFrames, outputs a DataFrame and a matplotlib axes (the notebook extra).
"""

from __future__ import annotations

from typing import Any

from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC
from txnlog.model.errors import UsageError
from txnlog.model.words import count
from txnlog.ops.report import newest_run
from txnlog.output.delta import read_table
from txnlog.rules.blocked import BLOCKED, UNSTABLE_OFFSET_COMMIT

#: the statuses that stop a group, and their colours in :func:`plot_blocked`
STALLED_COLORS = {BLOCKED: "#c0504d", UNSTABLE_OFFSET_COMMIT: "#f0a30a"}

COLUMNS = [
    "group", "status", "topic", "partition", "blocked_since", "waiting", "committed_offset", "last_stable_offset",
    "high_watermark", "offsets_to_high_watermark", "holding_producer_id", "holding_partition", "holding_start_offset",
    "clients",
    "remedy", "command",
]  # fmt: skip


def _names(groups: Any) -> list[str]:
    return [] if groups is None else list(groups)


def _remedy(row: Any, findings: Any, recommendations: Any) -> tuple[str | None, str | None]:
    """The remedy that unblocks ``row``'s group: the abort of its holding transaction that names the group, else
    the finding of that transaction that names it (a LATE one: FENCE, WAIT, DELIVER_MARKERS)."""
    for _, r in recommendations.iterrows():
        same = (r.topic, r.partition) == (row.topic, row.partition) or row.status == UNSTABLE_OFFSET_COMMIT
        if same and r.producer_id == row.holding_producer_id and row.group in _names(r.blocked_groups):
            return "ABORT", r.command
    for _, f in findings.iterrows():
        if f.producer_id == row.holding_producer_id and row.group in _names(f.blocked_groups):
            return f.remedy, f.remedy_command or f.remedy_fallback_command
    return None, None


def who_is_blocked(blocked: Any, findings: Any, recommendations: Any, *, as_of: Any) -> Any:
    """One row per group and partition that waits or stalls, the longest wait first: since when (``waiting`` at
    ``as_of``), behind which transaction (holding producer id, the partition it is on and its start offset), the
    group's clients where known (classic groups), and the remedy and command that unblock it. ``blocked`` None: an
    output without the table (no row)."""
    import pandas as pd  # the notebook extra

    if blocked is None:  # an output written before the blocked_consumers table
        return pd.DataFrame(columns=COLUMNS)
    stalled = blocked[blocked["status"].isin(list(STALLED_COLORS))].copy()
    if stalled.empty:
        return pd.DataFrame(columns=COLUMNS)
    remedies = [_remedy(row, findings, recommendations) for row in stalled.itertuples()]
    stalled["waiting"] = (pd.Timestamp(as_of) - stalled["blocked_since"]).dt.round("s")
    for column in ("committed_offset", "offsets_to_high_watermark", "holding_producer_id", "holding_start_offset"):
        stalled[column] = stalled[column].astype("Int64")  # null where unknown, not a float NaN
    # a pending offset commit is held by a transaction in the group's __consumer_offsets partition
    stalled["holding_partition"] = [
        f"{CONSUMER_OFFSETS_TOPIC}-{r.coordinator_partition}" if r.status == UNSTABLE_OFFSET_COMMIT
        else f"{r.topic}-{r.partition}"
        for r in stalled.itertuples()
    ]  # fmt: skip
    stalled["clients"] = [
        ", ".join(sorted({m["client_id"] for m in members})) if members is not None and len(members) else None
        for members in stalled["members"]
    ]
    stalled["remedy"] = [r for r, _ in remedies]
    stalled["command"] = [c for _, c in remedies]
    return stalled.sort_values(["waiting", "group"], ascending=[False, True])[COLUMNS].reset_index(drop=True)


def who_is_blocked_in(output: str, cluster: str | None = None, as_of: Any = None) -> Any:
    """:func:`who_is_blocked` for the newest complete run of ``cluster`` under ``output`` (or its run at ``as_of``),
    read from its tables; an output written before the ``blocked_consumers`` table answers no row."""
    run = newest_run(read_table(output, "runs", cluster=cluster).to_pandas(), cluster, as_of)
    key = {"cluster": run["cluster"], "as_of": run["as_of"]}
    try:
        blocked = read_table(output, "blocked_consumers", **key).to_pandas()
    except UsageError:  # no such table
        blocked = None
    findings = read_table(output, "findings", **key).to_pandas()
    recommendations = read_table(output, "abort_recommendations", **key).to_pandas()
    return who_is_blocked(blocked, findings, recommendations, as_of=run["as_of"])


def plot_blocked(who: Any, *, ax: Any = None) -> Any:
    """Horizontal bars: how long each group has waited on each partition (hours at ``as_of``), coloured by status,
    each labelled with the producer whose transaction holds it; the title says how many groups."""
    import matplotlib.pyplot as plt  # the notebook extra

    own = ax is None
    ax = ax if ax is not None else plt.subplots(figsize=(8, 0.45 * max(len(who), 1) + 1.4))[1]
    if who.empty:
        ax.text(0.5, 0.5, "no consumer group waits behind an open transaction", ha="center", va="center")
        ax.set_axis_off()
        ax.set_title("Who is blocked: nobody (or no __consumer_offsets partition in the input)")
        return ax
    rows = who.iloc[::-1]
    names = [f"{r.group} @ {r.topic}-{r.partition}" for r in rows.itertuples()]
    hours = [w.total_seconds() / 3600 if w is not None and w == w else 0.0 for w in rows["waiting"]]
    ax.barh(names, hours, color=[STALLED_COLORS[s] for s in rows["status"]])
    for y, r in enumerate(rows.itertuples()):
        label = f"{r.status}, producer {r.holding_producer_id}"
        ax.annotate(label, (hours[y], y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max([*hours, 0.01]) * 1.6)
    ax.set_xlabel("hours waiting at as_of (since blocked_since)")
    ax.set_title(f"Who is blocked: {count(who['group'].nunique(), 'consumer group')}")
    if own:
        ax.figure.tight_layout()
    return ax
