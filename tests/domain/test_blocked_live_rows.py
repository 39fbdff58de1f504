"""A live cluster's consumer groups (txnlog.live.groups' rows, as ListConsumerGroupOffsets and
DescribeConsumerGroups answer) through the job's "who is blocked" step (txnlog.pipeline.blocked.with_blocked): the same
rule as the copy's ``__consumer_offsets``, ``source`` live, and the producer of a pending offset named only where the
tables leave no doubt. Each expectation is written out from the case."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from txnlog.engine.decoded import live_offsets
from txnlog.live.groups import GROUPS_SCHEMA, pending_holders
from txnlog.model import contract

T0 = datetime(2026, 11, 1, tzinfo=UTC)
OFFSETS = "__consumer_offsets"


def _schema(name: str) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in contract.TABLES[name] if f.name not in ("cluster", "as_of")])


def _live(rows: list[dict]) -> pa.Table:
    full = [{"broker": "live", "coordinator_partition": 0, "group_bytes": r["group"].encode(), **r} for r in rows]
    return pa.Table.from_pylist(full, schema=GROUPS_SCHEMA)


def _tables(health: list[dict], findings: list[dict]) -> dict:
    base = {"first_timestamp": T0, "evidence": "Some evidence.", "verdict": "LATE"}
    return {
        "partition_health": pa.Table.from_pylist(health, schema=_schema("partition_health")),
        "findings": pa.Table.from_pylist([{**base, **f} for f in findings], schema=_schema("findings")),
        "abort_recommendations": _schema("abort_recommendations").empty_table(),
        "quarantine": _schema("quarantine").empty_table(),
    }


MEMBER = {"member_id": "m-1", "client_id": "reader", "client_host": "/10.0.0.1"}
GROUPS = [
    {"kind": "offset", "group": "readers", "topic": "t", "partition": 0, "state": "committed", "committed_offset": 100},
    {"kind": "group", "group": "readers", "members": [MEMBER]},
    {"kind": "offset", "group": "etl", "topic": "t", "partition": 1, "state": "committed", "committed_offset": 5},
    {"kind": "offset", "group": "etl", "topic": "t", "partition": 1, "state": "pending"},
    {"kind": "quarantine", "group": "secret", "file": "kafka://__consumer_offsets-0", "reason": "group_unreadable",
     "detail": "group 'secret': GROUP_AUTHORIZATION_FAILED"},
]  # fmt: skip
HEALTH = [
    {"topic": "t", "partition": 0, "last_stable_offset": 100, "high_watermark": 130, "open_transactions": 1},
    {"topic": "t", "partition": 1, "last_stable_offset": 9, "high_watermark": 9, "open_transactions": 0},
]


def _with_blocked(groups: list[dict], health: list[dict], findings: list[dict]) -> dict:
    from txnlog.pipeline.blocked import with_blocked

    return with_blocked(_tables(health, findings), live_offsets(_live(groups)))


def test_live_rows_go_through_the_same_rule_with_source_live():
    findings = [{"topic": "t", "partition": 0, "producer_id": 7, "start_offset": 100}]
    out = _with_blocked(GROUPS, HEALTH, findings)
    rows = {(r["group"], r["partition"]): r for r in out["blocked_consumers"].to_pylist()}
    assert set(rows) == {("readers", 0), ("etl", 1)}
    readers, etl = rows[("readers", 0)], rows[("etl", 1)]
    assert (readers["status"], readers["committed_offset"], readers["offsets_to_high_watermark"]) == (
        "BLOCKED",
        100,
        30,
    )
    assert readers["blocked_since"] == T0  # no commit timestamp live: the holding transaction's first timestamp
    assert readers["members"] == [MEMBER] and readers["holding_producer_id"] == 7
    assert (etl["status"], etl["committed_offset"], etl["pending_transactional_offsets"]) == (
        "UNSTABLE_OFFSET_COMMIT", 5, ["t-1"]
    )  # fmt: skip
    assert etl["holding_producer_id"] is None  # no transaction of __consumer_offsets-0 in the tables
    assert {r["source"] for r in rows.values()} == {"live"}
    assert out["findings"]["blocked_groups"].to_pylist() == [["readers"]]
    # the finding's evidence names the group blocked behind it on its data partition, at the LSO
    (evidence,) = out["findings"]["evidence"].to_pylist()
    assert evidence == (
        "Some evidence; consumer group readers waits behind it: its committed offset is this LSO (100), where a "
        "read_committed fetch stops (UnifiedLog.read; read_committed is inferred), so ending the transaction "
        "unblocks it."
    )
    (bad,) = out["quarantine"].to_pylist()
    assert (bad["reason"], bad["topic"], bad["partition"], bad["replica"]) == (
        "group_unreadable", OFFSETS, 0, "live"
    )  # fmt: skip


def test_the_pending_offsets_holder_is_named_only_without_doubt():
    finding = {"topic": OFFSETS, "partition": 0, "producer_id": 42, "start_offset": 3, "evidence": "Held."}
    one = [
        *HEALTH,
        {"topic": OFFSETS, "partition": 0, "last_stable_offset": 3, "high_watermark": 8, "open_transactions": 1},
    ]
    out = _with_blocked(GROUPS, one, [finding])
    (etl,) = [r for r in out["blocked_consumers"].to_pylist() if r["group"] == "etl"]
    assert (etl["holding_producer_id"], etl["holding_start_offset"]) == (42, 3)
    (named,) = out["findings"].to_pylist()
    assert named["blocked_groups"] == ["etl"]
    assert named["evidence"].startswith("Held; it holds the transactional offset commits of group etl (t-1) pending")
    # two transactions open in __consumer_offsets-0: either may hold etl's offset, none is named
    two = [
        *HEALTH,
        {"topic": OFFSETS, "partition": 0, "last_stable_offset": 3, "high_watermark": 8, "open_transactions": 2},
    ]
    out = _with_blocked(GROUPS, two, [finding])
    (etl,) = [r for r in out["blocked_consumers"].to_pylist() if r["group"] == "etl"]
    assert etl["holding_producer_id"] is None
    assert out["findings"].to_pylist()[0]["evidence"] == "Held."
    # a pending row that already names its producer keeps it
    named_rows = pending_holders(
        live_offsets(_live([{**GROUPS[3], "producer_id": 5}])),
        pa.table({"topic": [OFFSETS], "partition": pa.array([0], pa.int32()), "open_transactions": [1]}),
        out["findings"],
    )
    assert named_rows["producer_id"].to_pylist() == [5]
