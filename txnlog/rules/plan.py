"""The remediation plan: the run's aborts and fences in the order that unblocks consumers, with the LSO
before and after each step and the offsets it releases (``txnlog plan`` and the notebooks' ``impact_plan``
both build it here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def plan_steps(
    recommendations: Sequence[dict[str, Any]],
    health: Sequence[dict[str, Any]],
    fences: Sequence[dict[str, Any]] = (),
    open_transactions: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The run's aborts and fences in the order that unblocks consumers: per partition, the HANGING transactions
    (``abort_recommendations``) and the transactions a fence ends (``fences``: one row per partition of each
    FENCE finding) by start offset (only the earliest open transaction pins the LSO), each with the LSO before
    and after it and the offsets it releases; partitions that release the most first.

    On a partition with no fence step the numbers are the job's (``abort_recommendations.lso_after_abort``/
    ``offsets_released``, txnlog.rules.verdicts.abort_impact). On one with a fence step they are computed here by
    the same rule (:func:`lso_after_steps`) over the steps planned there. Fences whose transaction lists no
    partition of the input come last."""
    bounds = {(h["topic"], h["partition"]): h for h in health if h.get("source") != "live"}
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in recommendations:
        by_partition.setdefault((r["topic"], r["partition"]), []).append({**r, "remedy": "ABORT"})
    elsewhere = []
    for r in fences:
        if r.get("topic") is None or r.get("partition") is None:
            elsewhere.append({**r, "remedy": "FENCE", "step": 1, "lso_before": None})
        else:
            by_partition.setdefault((r["topic"], r["partition"]), []).append({**r, "remedy": "FENCE"})
    for key, rows in by_partition.items():
        rows.sort(key=lambda r: (r["start_offset"], r["producer_id"]))
        if any(r["remedy"] == "FENCE" for r in rows):
            _release(rows, bounds.get(key, {}), [o for o in open_transactions if (o["topic"], o["partition"]) == key])
    steps: list[dict[str, Any]] = []
    order = sorted(by_partition.items(), key=lambda kv: (-sum(r.get("offsets_released") or 0 for r in kv[1]), kv[0]))
    for key, rows in order:
        before = bounds.get(key, {}).get("last_stable_offset")
        for i, r in enumerate(rows, start=1):
            r["step"], r["lso_before"] = i, before
            steps.append(r)
            before = r.get("lso_after_abort", before)
    return steps + sorted(elsewhere, key=lambda r: r.get("transactional_id") or "")


def lso_after_steps(
    nexts: Sequence[int | None],
    *,
    blocker: int | None,
    lso: int | None,
    log_start: int | None,
    log_end: int | None,
) -> list[tuple[int | None, int]]:
    """(LSO after, offsets released) of each of a partition's steps, ended one after another in start-offset
    order: after a step the LSO is the first offset of the earliest transaction still open on the leader —
    the next step's (``nexts``: its start offset, None for the last) or ``blocker``, the earliest the steps
    do not end — else the log end, never below the log start (``UnifiedLog.lastStableOffset``; a completed
    transaction whose marker the high watermark has not passed no longer holds it once the step's own marker,
    written after it, is replicated: ``ProducerStateManager.removeUnreplicatedTransactions``). Released: the
    LSO after minus the LSO before (the partition's ``lso`` for the first step), never negative."""
    out: list[tuple[int | None, int]] = []
    before = lso
    for nxt in nexts:
        lowest = min((v for v in (blocker, nxt, log_end) if v is not None), default=None)
        after = max((v for v in (lowest, log_start) if v is not None), default=None)
        out.append((after, max(after - before, 0) if after is not None and before is not None else 0))
        before = after
    return out


def _release(rows: list[dict[str, Any]], bounds: Mapping[str, Any], open_txns: Sequence[dict[str, Any]]) -> None:
    """``lso_after_abort``/``offsets_released`` of one partition's planned steps (in start-offset order)."""
    planned = {(r["producer_id"], r["start_offset"]) for r in rows}
    others = [o["first_offset"] for o in open_txns if (o["producer_id"], o["first_offset"]) not in planned]
    nexts = [rows[i + 1]["start_offset"] if i + 1 < len(rows) else None for i in range(len(rows))]
    steps = lso_after_steps(
        nexts,
        blocker=min(others, default=None),
        lso=bounds.get("last_stable_offset"),
        log_start=bounds.get("log_start_offset"),
        log_end=bounds.get("log_end_offset"),
    )
    for r, (after, released) in zip(rows, steps, strict=True):
        r["lso_after_abort"], r["offsets_released"] = after, released


def fence_steps(findings: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's fence rows: one per partition of each FENCE finding (txnlog.rules.remedy), the command the
    finding names for the newest brokers, and the re-validated ``txnlog fence`` call the script runs."""
    return [
        {
            "topic": f.get("topic"),
            "partition": f.get("partition"),
            "start_offset": f.get("start_offset"),
            "producer_id": f["producer_id"],
            "producer_epoch": f["producer_epoch"],
            "transactional_id": f["transactional_id"],
            "reason": f["reason"],
            "safety": "SAFE",  # 'txnlog fence' re-validates it live; findings.remedy_condition says when
            "command": f.get("remedy_command"),
            "fence_command": f.get("remedy_fallback_command"),
        }
        for f in findings
        if f.get("remedy") == "FENCE" and f.get("source") != "live"
    ]
