"""``kafka-transactions.sh find-hanging`` against live brokers (``TransactionsCommand``, KIP-664) with txnlog's
verdicts (:func:`txnlog.broker.classify.verdicts`): DescribeProducers, then ListTransactions and
DescribeTransactions of the candidates, then ``findings`` and ``abort_recommendations`` rows shaped like the
offline job's."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from txnlog.broker import classify
from txnlog.broker.classify import Owner, Verdict
from txnlog.kafka.wire import DEFAULT_MAX_TRANSACTION_TIMEOUT_MS, TransactionState
from txnlog.live.admin import (
    datetime_of_ms,
    describe_producers,
    describe_transactions,
    list_transactions,
    partition_offsets,
)
from txnlog.model.contract import InputSource
from txnlog.model.times import duration_text, utc_text
from txnlog.rules.remedy import remedy_of


def _owner_columns(
    row: Mapping[str, Any], listing: Mapping[str, Any] | None, description: Mapping[str, Any] | None
) -> dict[str, Any]:
    """classify's owner_* columns for one open transaction, from ListTransactions/DescribeTransactions."""
    if listing is None:
        match = Owner.NONE  # find-hanging's first case (TransactionsCommand): no transactional.id has it
    elif description is None:
        match = Owner.EXPIRED  # (b): described as not found (Dead or gone)
    else:
        match = Owner.CURRENT
    d = description or {}
    dead = TransactionState.DEAD.kafka_name  # listed, but not found when described
    return {
        "topic": row["topic"],
        "partition": row["partition"],
        "owner_match": match,
        "owner_state": d.get("state") if description is not None else (dead if listing is not None else None),
        "owner_partitions": d.get("partitions"),
        "owner_timeout_ms": d.get("timeout_ms"),
        "owner_txn_start_ms": (d.get("txn_start_timestamp") if (d.get("txn_start_timestamp") or -1) >= 0 else None),
    }


def live_verdicts(
    rows: Sequence[Mapping[str, Any]],
    listings: Mapping[int, Mapping[str, Any]],
    descriptions: Mapping[str, Mapping[str, Any] | None],
    thresholds: classify.Thresholds,
) -> list[tuple[str, str, str]]:
    """(verdict, reason, safety) per DescribeProducers row with an open transaction ('' = no finding)."""
    if not rows:
        return []
    cols = []
    for r in rows:
        listing = listings.get(r["producer_id"])
        desc = descriptions.get(listing["transactional_id"]) if listing else None
        cols.append(_owner_columns(r, listing, desc))
    table = pa.table(
        {
            "topic": pa.array([c["topic"] for c in cols], pa.string()),
            "partition": pa.array([c["partition"] for c in cols], pa.int32()),
            "owner_match": pa.array([c["owner_match"] for c in cols], pa.string()),
            "owner_state": pa.array([c["owner_state"] for c in cols], pa.string()),
            "owner_partitions": pa.array([c["owner_partitions"] for c in cols], pa.list_(pa.string())),
            "owner_timeout_ms": pa.array([c["owner_timeout_ms"] for c in cols], pa.int64()),
            "owner_txn_start_ms": pa.array([c["owner_txn_start_ms"] for c in cols], pa.int64()),
        }
    )
    verdict, reason, safety = classify.verdicts(table, thresholds)
    return list(zip(verdict.tolist(), reason.tolist(), safety.tolist(), strict=True))


def evidence_of(
    row: Mapping[str, Any],
    listing: Mapping[str, Any] | None,
    desc: Mapping[str, Any] | None,
    idle_ms: int,
    lso_lag: int | None,
) -> str:
    tp = f"{row['topic']}-{row['partition']}"
    what = (
        f"DescribeProducers on {tp}: producer {row['producer_id']} epoch {row['producer_epoch']} has a "
        f"transaction open since offset {row['current_transaction_start_offset']}, last written "
        f"{utc_text(row['last_timestamp'])} (idle {duration_text(idle_ms)})"
    )
    if lso_lag is not None:
        what += f", holding the LSO {lso_lag} offsets behind the high watermark"
    if listing is None:
        coord = f"ListTransactions shows no transactional.id with producer id {row['producer_id']}"
    elif desc is None:
        coord = f"DescribeTransactions says {listing['transactional_id']} is not found (expired or Dead)"
    else:
        parts = ", ".join(desc["partitions"]) or "no partitions"
        coord = f"DescribeTransactions shows {desc['transactional_id']} {desc['state']} listing {parts}"
    return f"{what}; {coord}."


def find_hanging_live(
    admin: Any,
    tps: Iterable[tuple[str, int]],
    *,
    bootstrap: str | None = None,
    kafka_conf: Mapping[str, Any] | None = None,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """``find-hanging`` against live brokers (``TransactionsCommand``, docs/formats.md §11) with txnlog's verdicts.

    DescribeProducers of ``tps``, then :func:`findings_from_producers`. Rows are shaped like
    the ``findings`` table (plus safety/command/legacy_command) with ``source="live"``.
    ``now_ms`` defaults to the wall clock: this is a live check of the present, unlike the
    offline job.
    """
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(int(p))
    producers = [r for t, ps in sorted(by_topic.items()) for r in describe_producers(admin, t, ps)]
    return findings_from_producers(
        admin,
        producers,
        bootstrap=bootstrap,
        kafka_conf=kafka_conf,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        now_ms=now_ms,
    )


def findings_from_producers(
    admin: Any,
    producers: Sequence[Mapping[str, Any]],
    *,
    bootstrap: str | None = None,
    kafka_conf: Mapping[str, Any] | None = None,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """find-hanging's steps after DescribeProducers (docs/formats.md §11), on :func:`describe_producers` rows.

    Candidates: rows with an open transaction idle longer than ``max_transaction_timeout_ms``
    (no 5-minute padding, as the tool). Their producer ids go to ListTransactions, the ids
    found to DescribeTransactions, and :func:`txnlog.broker.classify.verdicts` decides HANGING / LATE;
    ``lso_lag`` comes from ListOffsets when ``bootstrap`` is given. A HANGING row carries
    ``safety``, ``command`` and ``legacy_command`` (:func:`abort_recommendations`).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    candidates = [
        r
        for r in producers
        if r["current_transaction_start_offset"] is not None
        and now_ms - r["last_timestamp"] > max_transaction_timeout_ms
    ]
    if not candidates:
        return []
    listings = list_transactions(admin, {r["producer_id"] for r in candidates})
    descriptions = describe_transactions(admin, {x["transactional_id"] for x in listings.values()})
    thresholds = classify.Thresholds(
        as_of_ms=now_ms,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        all_txn_state_partitions_read=True,
        bootstrap_servers=bootstrap,
    )
    lags = _lso_lags(bootstrap, kafka_conf, candidates)
    out = []
    for r, (verdict, reason, safety) in zip(
        candidates, live_verdicts(candidates, listings, descriptions, thresholds), strict=True
    ):
        if verdict:
            listing = listings.get(r["producer_id"])
            desc = descriptions.get(listing["transactional_id"]) if listing else None
            lag = lags.get((r["topic"], r["partition"]))
            out.append(_live_finding(r, (verdict, reason, safety), listing, desc, lag, thresholds, bootstrap))
    return out


def _lso_lags(
    bootstrap: str | None, kafka_conf: Mapping[str, Any] | None, candidates: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, int], int]:
    """Each candidate partition's ``lso_lag`` from ListOffsets (none without ``bootstrap``)."""
    if not bootstrap:
        return {}
    partitions = {(r["topic"], r["partition"]) for r in candidates}
    return {(o["topic"], o["partition"]): o["lso_lag"] for o in partition_offsets(bootstrap, kafka_conf, partitions)}


def _live_finding(
    r: Mapping[str, Any],
    decided: tuple[Any, Any, Any],
    listing: Mapping[str, Any] | None,
    desc: Mapping[str, Any] | None,
    lag: int | None,
    thresholds: classify.Thresholds,
    bootstrap: str | None,
) -> dict[str, Any]:
    """One findings row for a candidate ``r`` (a DescribeProducers row) with its verdict, reason and safety."""
    verdict, reason, safety = decided
    idle = thresholds.as_of_ms - r["last_timestamp"]
    advice_row = {
        **r,
        "start_offset": r["current_transaction_start_offset"],
        "transactional_id": listing["transactional_id"] if listing else None,
        "owner_state": desc["state"] if desc else None,
        "owner_partitions": desc["partitions"] if desc else None,
        "owner_timeout_ms": desc["timeout_ms"] if desc else None,
    }
    advice = remedy_of({**advice_row, "reason": str(reason)}, thresholds.bootstrap_servers).advice
    remedy = remedy_of({**advice_row, "reason": reason, "safety": safety or None}, bootstrap)
    ce = r["coordinator_epoch"]
    hanging = verdict == Verdict.HANGING
    return {
        "topic": r["topic"],
        "partition": r["partition"],
        "producer_id": r["producer_id"],
        "producer_epoch": r["producer_epoch"],
        "start_offset": r["current_transaction_start_offset"],
        "first_timestamp": None,
        "last_timestamp": datetime_of_ms(r["last_timestamp"]),
        "open_ms": None,
        "idle_ms": idle,
        "lso_lag": lag,
        "verdict": verdict,
        "reason": reason,
        "transactional_id": listing["transactional_id"] if listing else None,
        "coordinator_state": desc["state"] if desc else None,
        "coordinator_partition": None,
        "coordinator_epoch": ce,
        "evidence": evidence_of(r, listing, desc, idle, lag),
        "advice": advice,
        **remedy.columns(),
        "source": InputSource.LIVE,
        "safety": (safety or None) if hanging else None,
        "command": classify.abort_command(bootstrap, r["topic"], r["partition"], r["current_transaction_start_offset"])
        if hanging
        else None,
        "legacy_command": classify.legacy_abort_command(
            bootstrap, r["topic"], r["partition"], r["producer_id"], r["producer_epoch"], ce
        )
        if hanging
        else None,
    }


def abort_recommendations(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``abort_recommendations`` rows (both command forms) for the HANGING rows of
    :func:`findings_from_producers`, as the offline job writes them: the coordinator epoch
    is DescribeProducers' (−1, unknown, becomes 0 as ``kafka-transactions.sh`` sends it)."""
    return [
        {
            "topic": f["topic"],
            "partition": f["partition"],
            "start_offset": f["start_offset"],
            "producer_id": f["producer_id"],
            "producer_epoch": f["producer_epoch"],
            "coordinator_epoch": max(int(f["coordinator_epoch"] if f["coordinator_epoch"] is not None else -1), 0),
            "transactional_id": f["transactional_id"],
            "reason": f["reason"],
            "safety": f["safety"],
            "command": f["command"],
            "legacy_command": f["legacy_command"],
            "source": InputSource.LIVE,
        }
        for f in findings
        if f["verdict"] == Verdict.HANGING
    ]
