"""The integrity audit for people (``notebooks/forensics.ipynb``): the ``integrity`` rows of one run (a pandas
DataFrame of ``txnlog.output.delta.read_table(..., "integrity", ...)``) summed per check, and a plot of them. What
each check means: docs/integrity.md; ``txnlog audit`` lists the rows."""

from __future__ import annotations

from typing import Any

from txnlog.model.contract import ANOMALY_CHECKS, IntegritySeverity
from txnlog.model.words import count

#: one colour per check, the same in every plot: consumers' data in reds, the coordinator's in blues, the
#: producer's invariants in greys
CHECK_COLORS = {
    "ABORTED_DATA_VISIBLE": "#c0504d",
    "COMMITTED_DATA_HIDDEN": "#f0a30a",
    "SPLIT_OUTCOME": "#2171b5",
    "MARKER_MISSING": "#6baed6",
    "EPOCH_REGRESSION": "#525252",
    "SEQUENCE_GAP": "#969696",
}


def integrity_summary(integrity: Any) -> Any:
    """Per check (every anomaly check, then any other the rows name): its anomalies (ERROR and WARNING rows), the
    ERROR ones, the records they affect and the partitions they are on. NOT_CHECKED rows are not anomalies: see
    :func:`not_checked`."""
    import pandas as pd  # the notebook extra (pip install txnlog[notebook])

    bad = integrity[integrity["severity"] != IntegritySeverity.NOT_CHECKED]
    checks = list(ANOMALY_CHECKS) + sorted(set(bad["check"]) - set(ANOMALY_CHECKS))
    rows = []
    for check in checks:
        mine = bad[bad["check"] == check]
        rows.append(
            {
                "check": str(check),
                "anomalies": len(mine),
                "errors": int((mine["severity"] == IntegritySeverity.ERROR).sum()),
                "records_affected": int(mine["records_affected"].fillna(0).sum()),
                "partitions": len(set(zip(mine["topic"], mine["partition"], strict=True))),
            }
        )
    return pd.DataFrame(rows).set_index("check")


def not_checked(integrity: Any) -> Any:
    """The NOT_CHECKED rows: the partitions a check could not run on, and why."""
    rows = integrity[integrity["severity"] == IntegritySeverity.NOT_CHECKED]
    return rows[["check", "topic", "partition", "replica", "evidence"]].reset_index(drop=True)


def plot_integrity(integrity: Any, *, ax: Any = None) -> Any:
    """Horizontal bars: per check, the records its anomalies affect (each bar labelled with its anomaly count);
    the title says how many anomalies, and how many partitions were not checked."""
    import matplotlib.pyplot as plt  # the notebook extra

    summary = integrity_summary(integrity)
    own = ax is None
    ax = ax if ax is not None else plt.subplots(figsize=(8, 0.4 * len(summary) + 1.4))[1]
    names = list(summary.index)[::-1]
    records = [summary.loc[c, "records_affected"] for c in names]
    ax.barh(names, records, color=[CHECK_COLORS.get(c, "#7f7f7f") for c in names])
    for y, c in enumerate(names):
        ax.annotate(
            count(int(summary.loc[c, "anomalies"]), "anomaly", "anomalies"),
            (records[y], y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, max([*records, 1]) * 1.25)
    ax.set_xlabel("records affected (a WARNING row's count depends on how fetches split)")
    skipped = int((integrity["severity"] == IntegritySeverity.NOT_CHECKED).sum())
    total = int(summary["anomalies"].sum())
    verdict = "no anomaly" if total == 0 else count(total, "anomaly", "anomalies")
    ax.set_title(f"Integrity audit: {verdict}" + (f"; {count(skipped, 'partition')} not checked" if skipped else ""))
    if own:
        ax.figure.tight_layout()  # the checks' names in full
    return ax
