"""Who is blocked: the consumer groups pinned behind each partition's stuck LSO, and the groups with pending
transactional offset commits (the ``blocked_consumers`` table, txnlog.model.contract.BLOCKED_CONSUMERS).

Pure: Arrow tables in (the groups' replayed offsets, ``partition_health``'s LSO and high watermark, the findings
naming the open transactions), the table's rows out (without the run key).

What Kafka's code says:

* a read_committed fetch stops at the LSO, a read_uncommitted one at the high watermark (``UnifiedLog.read``,
  ``FetchIsolation.TXN_COMMITTED``). A group whose committed offset equals an LSO below the high watermark has read
  all it can and waits: BLOCKED. ``__consumer_offsets`` does not record the isolation level, so a committed offset
  above the LSO is read as a read_uncommitted group or a reset (NOT_BLOCKED_INFERRED), one below it as a group
  still reading (BEHIND_LSO);
* while a transactional offset commit is pending (``OffsetMetadataManager.replay``, until
  ``replayEndTransactionMarker``), an OffsetFetch with ``requireStable`` answers UNSTABLE_OFFSET_COMMIT for the
  partition; the Java consumer always asks so, so the whole group stalls at start-up and rebalance, whatever its
  isolation level. Each such partition is a row of status UNSTABLE_OFFSET_COMMIT (unless the group is already
  listed on it), and every row of the group names them in ``pending_transactional_offsets``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC
from txnlog.model import contract
from txnlog.model.contract import InputSource

SCHEMA = pa.schema([f.with_nullable(True) for f in contract.BLOCKED_CONSUMERS if f.name not in ("cluster", "as_of")])

BLOCKED = "BLOCKED"
NOT_BLOCKED_INFERRED = "NOT_BLOCKED_INFERRED"
BEHIND_LSO = "BEHIND_LSO"
UNSTABLE_OFFSET_COMMIT = "UNSTABLE_OFFSET_COMMIT"

TP = tuple[str, int]


def _held(health: pa.Table, findings: pa.Table) -> dict[TP, dict[str, Any]]:
    """(topic, partition) -> its LSO, HW and the finding whose transaction starts at the LSO, for the partitions
    whose LSO an open transaction holds below the high watermark."""
    holding: dict[tuple[str, int, int], dict[str, Any]] = {}
    for f in findings.select(["topic", "partition", "start_offset", "producer_id", "first_timestamp"]).to_pylist():
        if f["topic"] is not None and f["start_offset"] is not None:
            holding[(f["topic"], f["partition"], f["start_offset"])] = f
    out: dict[TP, dict[str, Any]] = {}
    for h in health.select(["topic", "partition", "last_stable_offset", "high_watermark"]).to_pylist():
        lso, hw = h["last_stable_offset"], h["high_watermark"]
        finding = holding.get((h["topic"], h["partition"], lso))
        if finding is not None and hw is not None and lso < hw:
            out[(h["topic"], h["partition"])] = {"lso": lso, "hw": hw, "finding": finding}
    return out


def _status(committed: int | None, lso: int) -> str:
    if committed is None or committed < lso:
        return BEHIND_LSO
    return BLOCKED if committed == lso else NOT_BLOCKED_INFERRED


def _since(first: Any, commit_ms: int | None) -> Any:
    """The later of the holding transaction's first timestamp (a datetime) and the commit's timestamp (ms)."""
    commit = None if commit_ms is None else pa.scalar(commit_ms, pa.timestamp("ms", tz="UTC")).as_py()
    if first is None or commit is None:
        return first if commit is None else commit
    return max(first, commit)


def blocked_consumers(offsets: pa.Table | None, health: pa.Table, findings: pa.Table) -> pa.Table:
    """The ``blocked_consumers`` rows from ``offsets`` (txnlog.engine.spark.consumer_offsets_source.SOURCE_SCHEMA:
    kinds ``offset`` and ``group``), ``health`` (partition_health) and ``findings``."""
    if offsets is None or offsets.num_rows == 0:
        return SCHEMA.empty_table()
    held = _held(health, findings)
    rows = offsets.filter(pc.equal(offsets["kind"], "offset")).drop_columns(["members"])  # a group row's
    committed = rows.filter(pc.equal(rows["state"], "committed"))
    pending = rows.filter(pc.equal(rows["state"], "pending")).to_pylist()
    if held:  # only the committed offsets of held partitions are looked at one by one
        keys = pa.table({"topic": [t for t, _ in held], "partition": pa.array([p for _, p in held], pa.int32())})
        committed = committed.join(keys, ["topic", "partition"], join_type="left semi")
    else:
        committed = committed.slice(0, 0)
    members = _members(offsets)
    pending_of: dict[bytes, list[str]] = {}
    for p in pending:
        pending_of.setdefault(p["group_bytes"], []).append(f"{p['topic']}-{p['partition']}")
    txn_in_offsets = {
        (f["partition"], f["producer_id"]): f
        for f in findings.select(["topic", "partition", "producer_id", "start_offset", "first_timestamp"]).to_pylist()
        if f["topic"] == CONSUMER_OFFSETS_TOPIC
    }
    out: list[dict[str, Any]] = []
    listed: set[tuple[bytes, str, int]] = set()
    for c in committed.to_pylist():
        h = held[(c["topic"], c["partition"])]
        finding, status = h["finding"], _status(c["committed_offset"], h["lso"])
        since = _since(finding["first_timestamp"], c["commit_timestamp"]) if status == BLOCKED else None
        out.append(_row(c, h["lso"], h["hw"], since, finding, status, pending_of, members))
        listed.add((c["group_bytes"], c["topic"], c["partition"]))
    health_of = {(h["topic"], h["partition"]): h for h in health.to_pylist()}
    stable = {(c["group_bytes"], c["topic"], c["partition"]): c for c in rows.to_pylist() if c["state"] == "committed"}
    for p in pending:
        key = (p["group_bytes"], p["topic"], p["partition"])
        if key in listed:
            continue
        listed.add(key)
        h = health_of.get((p["topic"], p["partition"]), {})
        txn = txn_in_offsets.get((p["coordinator_partition"], p["producer_id"]))
        base = {**p, "committed_offset": (stable.get(key) or {}).get("committed_offset")}
        since = _since(txn["first_timestamp"] if txn else None, p["commit_timestamp"])
        finding = {"producer_id": p["producer_id"], "start_offset": txn["start_offset"] if txn else None}
        lso, hw = h.get("last_stable_offset"), h.get("high_watermark")
        out.append(_row(base, lso, hw, since, finding, UNSTABLE_OFFSET_COMMIT, pending_of, members))
    return pa.Table.from_pylist(out, schema=SCHEMA)


def _members(offsets: pa.Table) -> dict[bytes, list[dict[str, Any]]]:
    groups = offsets.filter(pc.equal(offsets["kind"], "group")).select(["group_bytes", "members"]).to_pylist()
    return {g["group_bytes"]: g["members"] for g in groups}


def _row(
    c: dict[str, Any],
    lso: int | None,
    hw: int | None,
    since: Any,
    finding: dict[str, Any],
    status: str,
    pending_of: dict[bytes, list[str]],
    members: dict[bytes, list[dict[str, Any]]],
) -> dict[str, Any]:
    committed = c["committed_offset"]
    return {
        "group": c["group"],
        "topic": c["topic"],
        "partition": c["partition"],
        "committed_offset": committed,
        "last_stable_offset": lso,
        "high_watermark": hw,
        "offsets_to_high_watermark": None if hw is None or committed is None else hw - committed,
        "blocked_since": since,
        "holding_producer_id": finding["producer_id"],
        "holding_start_offset": finding["start_offset"],
        "status": status,
        "pending_transactional_offsets": sorted(pending_of.get(c["group_bytes"], [])) or None,
        "members": members.get(c["group_bytes"]),
        "coordinator_partition": c["coordinator_partition"],
        "source": InputSource.SEGMENTS.value,
    }


def unblocked_groups(blocked: pa.Table, remedies: pa.Table, *, lso_after: str | None) -> pa.Array:
    """Per row of ``remedies`` (findings or abort_recommendations: topic, partition, producer_id, start_offset), the
    groups its remedy unblocks: those BLOCKED on its partition behind it (behind any offset below ``lso_after``, the
    LSO the abort moves to, when given), and those whose pending transactional offsets its transaction holds."""
    rows = blocked.select(["group", "topic", "partition", "committed_offset", "status", "holding_producer_id",
                           "holding_start_offset", "coordinator_partition"]).to_pylist()  # fmt: skip
    columns = ["topic", "partition", "producer_id", "start_offset", *([lso_after] if lso_after else [])]
    out: list[list[str] | None] = []
    for r in remedies.select(columns).to_pylist():
        groups: set[str] = set()
        for b in rows:
            if b["status"] == BLOCKED and (b["topic"], b["partition"]) == (r["topic"], r["partition"]):
                after = r.get(lso_after) if lso_after else None
                behind = after is not None and b["committed_offset"] < after
                if b["holding_start_offset"] == r["start_offset"] or behind:
                    groups.add(b["group"])
            elif (
                b["status"] == UNSTABLE_OFFSET_COMMIT
                and r["topic"] == CONSUMER_OFFSETS_TOPIC
                and (b["coordinator_partition"], b["holding_producer_id"]) == (r["partition"], r["producer_id"])
            ):
                groups.add(b["group"])
        out.append(sorted(groups))
    return pa.array(out, pa.list_(pa.string()))
