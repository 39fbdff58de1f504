"""Consumer groups behind a hanging transaction: a scenario whose ``__consumer_offsets`` says who is blocked.

``groups_behind_hanging_transaction``: a producer dies mid-transaction on ``page-views-0`` (SIGKILLed; its
transactional id long expired and cleaned, so nothing aborts it: HANGING), more records follow; group ``dashboards``
(a classic group with a member) has committed up to the LSO, ``audit-raw`` past it; ``billing-etl`` dies after its
TxnOffsetCommit of group ``billing``, leaving a pending transactional offset (and an open transaction in
``__consumer_offsets``). The expected ``blocked_consumers`` rows are in ``notes["blocked_consumers"]``, from what was
written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import Cluster
from txnlog.brokerlog.consumer_offsets_encode import (
    Member,
    consumer_assignment,
    consumer_subscription,
    group_metadata_key,
    group_metadata_value,
)
from txnlog.brokerlog.encode_batches import RecordSpec
from txnlog.brokerlog.ground_truth import HANGING, LATE, Intent, ScenarioResult
from txnlog.brokerlog.workload import run_situation
from txnlog.kafka import wire

__all__ = ["BLOCKED_SCENARIOS"]

_CLICKS, _INVOICES = ("page-views", 0), ("invoices", 0)
_MEMBER = ("consumer-dash-1-9a7e", "dash-1", "/10.1.2.3")


def _group_partition(c: Cluster, group: str) -> int:
    return wire.transaction_state_partition_for(group, c.consumer_offsets_partitions)


def _plain_commit(c: Cluster, group: str, records: list[tuple[bytes, bytes]]) -> int:
    """A plain batch (no producer: OffsetCommit, GroupMetadata) in ``group``'s partition; its timestamp."""
    c.ensure_consumer_offsets()
    c.tick(1, 5)
    now = c.clock()
    specs = [RecordSpec(i, 0, k, v) for i, (k, v) in enumerate(records)]
    batch = encode.encode_record_batch(
        base_offset=0, records=specs, base_timestamp=now, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        is_transactional=False,
    )  # fmt: skip
    c.partition(wire.CONSUMER_OFFSETS_TOPIC, _group_partition(c, group)).append(batch)
    return now


def _commit(c: Cluster, group: str, tp: tuple[str, int], offset: int) -> int:
    """A plain OffsetCommit of ``group``; its ``commitTimestamp``."""
    now = c.clock()
    key = encode.encode_offset_commit_key(group, *tp)
    _plain_commit(c, group, [(key, encode.encode_offset_commit_value(offset, -1, "", now))])
    return now


def _act(c: Cluster, truth: dict[str, Any]) -> list[Intent]:
    c.create_topic(_CLICKS[0])
    c.create_topic(_INVOICES[0])
    traffic = c.plain_producer(client_id="page-views-web")
    for _ in range(3):
        traffic.send(*_CLICKS)
    # its __transaction_state records long gone (the id expired and was cleaned): HANGING, in the abort plan
    hang = c.transactional_producer("click-enricher", transaction_version=1, coordinator_records=False)
    hang.init_transactions()
    hang.begin_transaction()
    start = hang.send(*_CLICKS).base_offset
    hang.crash()  # SIGKILL: no EndTxn, and its coordinator never runs the timeout abort
    c.coordinator.stall("click-enricher")
    for _ in range(4):
        c.advance(1_000)
        traffic.send(*_CLICKS)
    c.advance(5_000)
    subscription = consumer_subscription([_CLICKS[0]], version=1)
    member = Member(
        member_id=_MEMBER[0], client_id=_MEMBER[1], client_host=_MEMBER[2], session_timeout=45_000,
        subscription=subscription, assignment=consumer_assignment([(_CLICKS[0], [0])]),
    )  # fmt: skip
    meta = group_metadata_value(
        version=3, protocol_type="consumer", generation=1, protocol="range", leader=_MEMBER[0], members=[member]
    )
    _plain_commit(c, "dashboards", [(group_metadata_key("dashboards"), meta)])
    dashboards_at = _commit(c, "dashboards", _CLICKS, start)
    end = c.partition(*_CLICKS).leader_log.log_end_offset
    _commit(c, "audit-raw", _CLICKS, end)
    etl = c.transactional_producer("billing-etl", transaction_version=2, transaction_timeout_ms=60_000)
    etl.init_transactions()
    etl.begin_transaction()
    etl.send(*_INVOICES)
    offsets = etl.send_offsets_to_transaction("billing", {_CLICKS: start - 1})
    etl.crash()
    c.coordinator.stall("billing-etl")
    truth.update(
        start=start, hang_pid=hang.producer_id, etl_pid=etl.producer_id, hw=end, dashboards_at=dashboards_at,
        billing_commit_ms=offsets.max_timestamp, billing_offsets_at=offsets.base_offset,
        billing_partition=_group_partition(c, "billing"), dashboards_partition=_group_partition(c, "dashboards"),
        audit_partition=_group_partition(c, "audit-raw"),
    )  # fmt: skip
    return [
        Intent(HANGING, "NO_TRANSACTIONAL_ID", *_CLICKS, producer_id=hang.producer_id),
        Intent(LATE, "COORDINATOR_TIMEOUT_OVERDUE", *_INVOICES, transactional_id="billing-etl"),
        Intent(
            LATE,
            "COORDINATOR_TIMEOUT_OVERDUE",
            wire.CONSUMER_OFFSETS_TOPIC,
            _group_partition(c, "billing"),
            transactional_id="billing-etl",
        ),
    ]


def _expected(t: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``blocked_consumers`` rows the scenario wrote (time columns as epoch ms)."""
    common = {"topic": _CLICKS[0], "partition": _CLICKS[1], "last_stable_offset": t["start"], "high_watermark": t["hw"]}
    return [
        {
            **common, "group": "audit-raw", "committed_offset": t["hw"], "offsets_to_high_watermark": 0,
            "status": "NOT_BLOCKED_INFERRED", "holding_producer_id": t["hang_pid"], "holding_start_offset": t["start"],
            "blocked_since_ms": None, "pending_transactional_offsets": None, "members": None,
            "coordinator_partition": t["audit_partition"],
        },
        {
            **common, "group": "billing", "committed_offset": None, "offsets_to_high_watermark": None,
            "status": "UNSTABLE_OFFSET_COMMIT", "holding_producer_id": t["etl_pid"],
            "holding_start_offset": t["billing_offsets_at"], "blocked_since_ms": t["billing_commit_ms"],
            "pending_transactional_offsets": ["page-views-0"], "members": None,
            "coordinator_partition": t["billing_partition"],
        },
        {
            **common, "group": "dashboards", "committed_offset": t["start"],
            "offsets_to_high_watermark": t["hw"] - t["start"], "status": "BLOCKED",
            "holding_producer_id": t["hang_pid"], "holding_start_offset": t["start"],
            "blocked_since_ms": t["dashboards_at"], "pending_transactional_offsets": None,
            "members": [dict(zip(("member_id", "client_id", "client_host"), _MEMBER, strict=True))],
            "coordinator_partition": t["dashboards_partition"],
        },
    ]  # fmt: skip


def groups_behind_hanging_transaction(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A group blocked at the LSO of a SIGKILLed producer's transaction, one past it, and one whose transactional
    offset commit is pending (its producer SIGKILLed too)."""

    truth: dict[str, Any] = {}
    result = run_situation(
        out, seed, overwrite, name="groups_behind_hanging_transaction",
        description=groups_behind_hanging_transaction.__doc__ or "", act=lambda c: _act(c, truth),
    )  # fmt: skip
    result.notes["blocked_consumers"] = _expected(truth)
    result.notes["blocked_truth"] = truth
    return result


BLOCKED_SCENARIOS: dict[str, Callable[..., ScenarioResult]] = {
    "groups_behind_hanging_transaction": groups_behind_hanging_transaction,
}
