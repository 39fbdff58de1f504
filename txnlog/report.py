"""Plots and tables for people: the forensic notebook calls these, so it defines no logic.

matplotlib is imported lazily (``pip install txnlog[notebook]``); inputs are the
output tables as pandas DataFrames (``txnlog.delta.read_table(...).to_pandas()``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

OUTCOME_COLORS = {"COMMIT": "#4c9a2a", "ABORT": "#c0504d", "OPEN": "#f0a30a"}


def plot_lso_lag(health: Any, *, top: int = 15, ax: Any = None) -> Any:
    """Horizontal bars of the partitions with the largest LSO lag; late ones in red."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 0.35 * top + 1))[1]
    worst = health[health["lso_lag"] > 0].sort_values("lso_lag", ascending=True).tail(top)
    labels = worst["topic"] + "-" + worst["partition"].astype(str)
    colors = ["#c0504d" if late else "#f0a30a" for late in worst["has_late_transaction"]]
    ax.barh(labels, worst["lso_lag"], color=colors)
    ax.set_xlabel("LSO lag (offsets read_committed consumers cannot reach)")
    ax.set_title("Partitions pinned by open transactions (red: late per the broker metric)")
    return ax


def plot_timeline(transactions: Any, topic: str, partition: int, *, as_of: datetime, ax: Any = None) -> Any:
    """One bar per transaction of a partition, from its first batch to its marker (or as_of if open)."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = transactions[(transactions["topic"] == topic) & (transactions["partition"] == partition)]
    rows = rows.sort_values("first_offset")
    ax = ax or plt.subplots(figsize=(10, 4))[1]
    as_of_ts = pd.Timestamp(as_of)
    for _, t in rows.iterrows():
        start = t["first_timestamp"] if pd.notna(t["first_timestamp"]) else t["last_timestamp"]
        end = t["marker_timestamp"] if pd.notna(t["marker_timestamp"]) else as_of_ts
        ax.plot(
            [start, end],
            [t["producer_id"], t["producer_id"]],
            color=OUTCOME_COLORS[t["outcome"]],
            linewidth=6 if t["outcome"] == "OPEN" else 3,
            solid_capstyle="butt",
        )
    ax.axvline(as_of_ts, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("producer id")
    ax.set_title(f"{topic}-{partition}: transactions over time (green commit, red abort, orange open)")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    return ax
