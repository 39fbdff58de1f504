"""The job's "who is blocked" step: the ``blocked_consumers`` table (txnlog.rules.blocked) from the decoded
``__consumer_offsets`` partitions and the built tables, the groups each remedy unblocks on ``findings`` and
``abort_recommendations``, and the ``__consumer_offsets`` records that did not read as quarantine rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker.evidence import with_blocked_groups, with_pending_groups
from txnlog.engine.decoded import GroupOffsets
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC
from txnlog.live.groups import pending_holders
from txnlog.model.arrow import project
from txnlog.model.contract import LIVE_REPLICA, InputSource
from txnlog.model.rows import KIND_QUARANTINE
from txnlog.rules.blocked import BLOCKED, UNSTABLE_OFFSET_COMMIT, blocked_consumers, held_partitions, unblocked_groups

__all__ = ["with_blocked"]


def with_blocked(tables: dict[str, Any], groups: GroupOffsets | pa.Table | None) -> dict[str, Any]:
    """``tables`` (``pipeline.build_tables``' answer) with ``blocked_consumers``, ``blocked_groups`` named on the
    findings and the plan (left null when the input holds no ``__consumer_offsets`` partition), and the quarantine
    rows of ``groups``' rows (txnlog.engine.consumer_offsets.SOURCE_SCHEMA), read for the partitions
    the findings' transactions hold (txnlog.engine.decoded). Rows of a live cluster's admin APIs (``broker``
    live, txnlog.live.groups) go to the same rule and come out with ``source`` live."""
    out = dict(tables)
    health, findings = tables["partition_health"], tables["findings"]
    offsets = groups.rows(held_partitions(health, findings)) if isinstance(groups, GroupOffsets) else groups
    live = offsets is not None and offsets.num_rows > 0 and pc.all(pc.equal(offsets["broker"], LIVE_REPLICA)).as_py()
    if live:  # a live cluster's answers (txnlog.live.groups): their pending offsets name no producer
        offsets = pending_holders(offsets, health, findings)
    blocked = blocked_consumers(offsets, health, findings)
    if live:
        blocked = blocked.set_column(
            blocked.schema.get_field_index("source"), "source", pa.repeat(InputSource.LIVE.value, blocked.num_rows)
        )
    out["blocked_consumers"] = blocked
    if offsets is None:
        return out
    for name, lso_after in (("findings", None), ("abort_recommendations", "lso_after_abort")):
        table = out[name]
        groups = unblocked_groups(blocked, table, lso_after=lso_after)
        out[name] = table.set_column(table.schema.get_field_index("blocked_groups"), "blocked_groups", groups)
    out["findings"] = _groups_in_evidence(out["findings"], blocked)
    bad = offsets.filter(pc.equal(offsets["kind"], KIND_QUARANTINE))
    if bad.num_rows:
        where = {"topic": CONSUMER_OFFSETS_TOPIC, "partition": bad["coordinator_partition"], "replica": bad["broker"]}
        rows = project(bad, "quarantine", **where)
        quarantine = out["quarantine"]
        out["quarantine"] = pa.concat_tables([quarantine, rows.cast(quarantine.schema)])
    return out


def _groups_in_evidence(findings: pa.Table, blocked: pa.Table) -> pa.Table:
    """``findings`` with the groups their transaction holds named in the evidence: those BLOCKED behind it on its
    partition (txnlog.broker.evidence.with_blocked_groups: the rows whose holding transaction starts at its start
    offset, as txnlog.rules.blocked.unblocked_groups matches them), and, for a transaction in a
    ``__consumer_offsets`` partition, the groups whose offset commits it holds pending, with their partitions
    (txnlog.broker.evidence.with_pending_groups)."""
    pending: dict[tuple[int, int], dict[str, list[str]]] = {}
    behind: dict[tuple[str, int, int], list[str]] = {}
    held = blocked.filter(pc.is_in(blocked["status"], pa.array([BLOCKED, UNSTABLE_OFFSET_COMMIT])))
    columns = ["group", "topic", "partition", "status", "coordinator_partition", "holding_producer_id",
               "holding_start_offset"]  # fmt: skip
    for b in held.select(columns).to_pylist():
        if b["status"] == BLOCKED and b["holding_start_offset"] is not None:
            behind.setdefault((b["topic"], b["partition"], b["holding_start_offset"]), []).append(b["group"])
        elif b["status"] == UNSTABLE_OFFSET_COMMIT and b["holding_producer_id"] is not None:
            at = pending.setdefault((b["coordinator_partition"], b["holding_producer_id"]), {})
            at.setdefault(b["group"], []).append(f"{b['topic']}-{b['partition']}")
    if not pending and not behind:
        return findings
    rows = findings.select(["topic", "partition", "producer_id", "start_offset", "evidence"]).to_pylist()
    evidence = []
    for r in rows:
        text = r["evidence"]
        if text is not None:
            groups = behind.get((r["topic"], r["partition"], r["start_offset"]), [])
            text = with_blocked_groups(text, r["start_offset"], groups)
            if r["topic"] == CONSUMER_OFFSETS_TOPIC:
                text = with_pending_groups(text, pending.get((r["partition"], r["producer_id"]), {}))
        evidence.append(text)
    return findings.set_column(findings.schema.get_field_index("evidence"), "evidence", pa.array(evidence, pa.string()))
