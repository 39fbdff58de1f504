"""Compare the job's Delta tables with a scenario's ground truth (what the writer wrote).

The expectations come from ``txnlog.brokerlog`` — the writer knows which
transactions it left open and why — never from the job's own output.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from txnlog.output.delta import read_table


def ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // __import__("datetime").timedelta(milliseconds=1)


def broker_name(broker_id: int) -> str:
    return f"broker-{broker_id}"


def rows(output: str, table: str, **filters: Any) -> list[dict[str, Any]]:
    data: pa.Table = read_table(output, table, **filters)
    return data.to_pylist()


def finding_key(f: dict[str, Any]) -> tuple:
    return (f["topic"], f["partition"], f["producer_id"], f["start_offset"])


def expected_findings(truth: Any) -> dict[tuple, dict[str, Any]]:
    return {
        (f.topic, f.partition, f.producer_id, f.start_offset): {
            "producer_epoch": f.producer_epoch,
            "verdict": f.verdict,
            "reason": f.reason,
            "transactional_id": f.transactional_id,
            "coordinator_state": f.coordinator_state,
            "coordinator_partition": f.coordinator_partition,
            "safety": f.safety,
        }
        for f in truth.findings
    }


def actual_findings(
    output: str, recommendations: dict[tuple, dict[str, Any]], **filters: Any
) -> dict[tuple, dict[str, Any]]:
    out = {}
    for f in rows(output, "findings", **filters):
        rec = recommendations.get(finding_key(f))
        out[finding_key(f)] = {
            "producer_epoch": f["producer_epoch"],
            "verdict": f["verdict"],
            "reason": f["reason"],
            "transactional_id": f["transactional_id"],
            "coordinator_state": f["coordinator_state"],
            "coordinator_partition": f["coordinator_partition"],
            "safety": rec["safety"] if rec else None,
        }
    return out


def recommendations_by_key(output: str, **filters: Any) -> dict[tuple, dict[str, Any]]:
    return {
        (r["topic"], r["partition"], r["producer_id"], r["start_offset"]): r
        for r in rows(output, "abort_recommendations", **filters)
    }


def transaction_key(t: dict[str, Any]) -> tuple:
    return (t["topic"], t["partition"], t["producer_id"], t["first_offset"])


TRANSACTION_FIELDS = (
    "producer_epoch",
    "last_offset",
    "marker_offset",
    "outcome",
    "marker_epoch",
    "coordinator_epoch",
    "first_timestamp",
    "last_timestamp",
    "marker_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
)


def expected_transactions(truth: Any) -> dict[tuple, dict[str, Any]]:
    out = {}
    for t in truth.transactions:
        out[(t.topic, t.partition, t.producer_id, t.first_offset)] = {k: getattr(t, k) for k in TRANSACTION_FIELDS}
    return out


def actual_transactions(output: str, **filters: Any) -> dict[tuple, dict[str, Any]]:
    out = {}
    for t in rows(output, "transactions", **filters):
        values = {k: t[k] for k in TRANSACTION_FIELDS}
        for k in ("first_timestamp", "last_timestamp", "marker_timestamp"):
            values[k] = ms(values[k])
        out[transaction_key(t)] = values
    return out
