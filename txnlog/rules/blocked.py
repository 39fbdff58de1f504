"""Who is blocked: the consumer groups pinned behind each partition's stuck LSO, and the groups with pending
transactional offset commits (the ``blocked_consumers`` table, txnlog.model.contract.BLOCKED_CONSUMERS).

Pure: Arrow tables in (the groups' replayed offsets, ``partition_health``'s LSO and high watermark, the findings
naming the open transactions), the table's rows out (without the run key).

Only the transactions of ``findings`` (LATE or HANGING) hold anyone here. An open transaction still young (no
finding) holds the LSO for as long as a transaction normally lasts, and a transactional offset commit is pending
until its transaction ends in every exactly-once application: the groups behind them wait as Kafka intends, so
they get no row, whatever their committed offset.

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

import numpy as np
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

_TS = pa.timestamp("us", tz="UTC")
_GROUP_KEY = ["group_bytes", "topic", "partition"]
_FINDING = ["producer_id", "start_offset", "first_timestamp"]
_USED = [*_GROUP_KEY, "group", "state", "producer_id", "committed_offset", "commit_timestamp", "coordinator_partition"]


def _last_of(table: pa.Table, keys: list[str], *, first: bool = False) -> pa.Table:
    """The last (or ``first``) row of ``table`` of each distinct ``keys``."""
    index = table.append_column("_i", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    how = "min" if first else "max"
    picked = index.group_by(keys, use_threads=False).aggregate([("_i", how)])[f"_i_{how}"]
    return table.take(picked)


def _held(health: pa.Table, findings: pa.Table) -> pa.Table:
    """The partitions whose LSO an open transaction holds below the high watermark: topic, partition,
    last_stable_offset, high_watermark and the finding whose transaction starts at the LSO (its producer_id,
    start_offset, first_timestamp)."""
    f = findings.select(["topic", "partition", *_FINDING])
    f = _last_of(f.filter(pc.and_(pc.is_valid(f["topic"]), pc.is_valid(f["start_offset"]))),
                 ["topic", "partition", "start_offset"])  # fmt: skip
    h = health.select(["topic", "partition", "last_stable_offset", "high_watermark"])
    joined = h.join(
        f.append_column("_lso", f["start_offset"]),
        ["topic", "partition", "last_stable_offset"],
        right_keys=["topic", "partition", "_lso"],
        join_type="inner",
    )
    joined = joined.filter(pc.less(joined["last_stable_offset"], joined["high_watermark"]))
    held = _last_of(joined, ["topic", "partition"])
    return held.rename_columns({"producer_id": "holding_producer_id", "start_offset": "holding_start_offset"})


def held_partitions(health: pa.Table, findings: pa.Table) -> pa.Table:
    """The topic partitions (``topic``, ``partition``) whose groups' committed offsets :func:`blocked_consumers`
    weighs against the LSO: those an open transaction of ``findings`` holds (:func:`_held`). Beside them it reads
    only the pending transactional offsets and the committed ones of their keys."""
    return _held(health, findings).select(["topic", "partition"])


def _since(first: pa.ChunkedArray, commit_ms: pa.ChunkedArray) -> pa.ChunkedArray:
    """The later of the holding transaction's first timestamp and the commit's timestamp (ms); either where the
    other is unknown."""
    first_us = pc.cast(pc.cast(first, _TS), pa.int64())
    commit_us = pc.multiply_checked(pc.cast(commit_ms, pa.int64()), 1000)
    return pc.cast(pc.max_element_wise(first_us, commit_us, skip_nulls=True), _TS)


def _status(committed: pa.ChunkedArray, lso: pa.ChunkedArray) -> pa.ChunkedArray:
    behind = pc.fill_null(pc.less(committed, lso), True)
    at = pc.fill_null(pc.equal(committed, lso), False)
    return pc.if_else(behind, BEHIND_LSO, pc.if_else(at, BLOCKED, NOT_BLOCKED_INFERRED))


def _blocked_rows(rows: pa.Table) -> pa.Table:
    """The committed offsets of the held partitions (joined with :func:`_held`) against their LSO and HW."""
    status = _status(rows["committed_offset"], rows["last_stable_offset"])
    since = _since(rows["first_timestamp"], rows["commit_timestamp"])
    since = pc.if_else(pc.equal(status, BLOCKED), since, pa.scalar(None, _TS))
    return rows.append_column("status", status).append_column("blocked_since", since)


def _unstable_rows(
    pending: pa.Table, listed: pa.Table, stable: pa.Table, health: pa.Table, findings: pa.Table
) -> pa.Table:
    """A row per partition with a pending transactional offset commit of a group not listed on it already (the
    first producer's) whose transaction is a finding in the group's ``__consumer_offsets`` partition: its stable
    offset, the partition's LSO and HW, and that finding."""
    txn = findings.filter(pc.equal(findings["topic"], CONSUMER_OFFSETS_TOPIC)).select(["partition", *_FINDING])
    txn = _last_of(txn, ["partition", "producer_id"]).rename_columns(
        {"partition": "coordinator_partition", "start_offset": "holding_start_offset"}
    )
    rows = pending.join(listed, _GROUP_KEY, join_type="left anti")
    rows = rows.join(txn, ["coordinator_partition", "producer_id"], join_type="left outer")
    # a known producer without a finding is young: no row; an unknown one (a live read names none) stays
    rows = rows.filter(pc.or_(pc.is_valid(rows["holding_start_offset"]), pc.is_null(rows["producer_id"])))
    rows = rows.sort_by([(k, "ascending") for k in (*_GROUP_KEY, "producer_id")])
    rows = _last_of(rows, _GROUP_KEY, first=True).drop_columns(["committed_offset"])
    rows = rows.join(stable.select([*_GROUP_KEY, "committed_offset"]), _GROUP_KEY, join_type="left outer")
    h = _last_of(health.select(["topic", "partition", "last_stable_offset", "high_watermark"]), ["topic", "partition"])
    rows = rows.join(h, ["topic", "partition"], join_type="left outer")
    since = _since(rows["first_timestamp"], rows["commit_timestamp"])
    status = pa.array([UNSTABLE_OFFSET_COMMIT] * rows.num_rows, pa.string())
    rows = rows.append_column("holding_producer_id", rows["producer_id"])
    return rows.append_column("status", status).append_column("blocked_since", since)


def blocked_consumers(offsets: pa.Table | None, health: pa.Table, findings: pa.Table) -> pa.Table:
    """The ``blocked_consumers`` rows from ``offsets`` (txnlog.engine.consumer_offsets.SOURCE_SCHEMA:
    kinds ``offset`` and ``group``), ``health`` (partition_health) and ``findings``."""
    if offsets is None or offsets.num_rows == 0:
        return SCHEMA.empty_table()
    rows = offsets.select(_USED)  # the rows of kind offset: the others have no state
    pending = rows.filter(pc.equal(rows["state"], "pending"))
    near = rows.join(_held(health, findings), ["topic", "partition"], join_type="inner")  # few: held partitions'
    near = near.filter(pc.equal(near["state"], "committed"))
    blocked = _blocked_rows(near).sort_by([(k, "ascending") for k in _GROUP_KEY])
    unstable = blocked.slice(0, 0)  # no pending offset: no row, and none of _unstable_rows' joins
    if pending.num_rows:
        keys = pending.select(_GROUP_KEY).group_by(_GROUP_KEY, use_threads=False).aggregate([])
        stable = rows.join(keys, _GROUP_KEY, join_type="left semi")  # the stable offsets of those keys
        stable = _last_of(stable.filter(pc.equal(stable["state"], "committed")), _GROUP_KEY)
        unstable = _unstable_rows(pending, blocked.select(_GROUP_KEY), stable, health, findings)
        unstable = unstable.sort_by([(k, "ascending") for k in _GROUP_KEY])
    out = pa.concat_tables([_project(blocked), _project(unstable)])
    return _with_groups(out, offsets, pending)


def _project(rows: pa.Table) -> pa.Table:
    n = rows.num_rows
    return pa.table(
        {
            "group": rows["group"],
            "group_bytes": rows["group_bytes"],
            "topic": rows["topic"],
            "partition": rows["partition"],
            "committed_offset": rows["committed_offset"],
            "last_stable_offset": rows["last_stable_offset"],
            "high_watermark": rows["high_watermark"],
            "offsets_to_high_watermark": pc.subtract(rows["high_watermark"], rows["committed_offset"]),
            "blocked_since": rows["blocked_since"],
            "holding_producer_id": rows["holding_producer_id"],
            "holding_start_offset": rows["holding_start_offset"],
            "status": rows["status"],
            "coordinator_partition": rows["coordinator_partition"],
            "source": pa.array([InputSource.SEGMENTS.value] * n, pa.string()),
        }
    )


def _with_groups(rows: pa.Table, offsets: pa.Table, pending: pa.Table) -> pa.Table:
    """``rows`` with each group's pending transactional offsets ("topic-partition", sorted; null: none) and
    members (its last ``group`` row's; null: unknown), in :data:`SCHEMA`."""
    names = pc.binary_join_element_wise(pending["topic"], pc.cast(pending["partition"], pa.string()), "-")
    listing = pa.table({"group_bytes": pending["group_bytes"], "tp": names}).sort_by(
        [("group_bytes", "ascending"), ("tp", "ascending")]
    )
    lists = listing.group_by(["group_bytes"], use_threads=False).aggregate([("tp", "list")])
    groups = offsets.select(["group_bytes", "members"]).filter(pc.equal(offsets["kind"], "group"))
    groups = _last_of(groups, ["group_bytes"])
    keyed = rows.append_column("_row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    for name, table in (("_pending", lists.select(["group_bytes"])), ("_members", groups.select(["group_bytes"]))):
        ids = table.append_column(name, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        keyed = keyed.join(ids, ["group_bytes"], join_type="left outer")
    keyed = keyed.sort_by("_row")
    columns = {
        "pending_transactional_offsets": lists["tp_list"].take(keyed["_pending"]),
        "members": groups["members"].take(keyed["_members"]),
    }
    return pa.table({f.name: columns[f.name] if f.name in columns else keyed[f.name] for f in SCHEMA}).cast(SCHEMA)


def unblocked_groups(blocked: pa.Table, remedies: pa.Table, *, lso_after: str | None) -> pa.Array:
    """Per row of ``remedies`` (findings or abort_recommendations: topic, partition, producer_id, start_offset), the
    groups its remedy unblocks: those BLOCKED on its partition behind it (behind any offset below ``lso_after``, the
    LSO the abort moves to, when given), and those whose pending transactional offsets its transaction holds."""
    columns = ["topic", "partition", "producer_id", "start_offset", *([lso_after] if lso_after else [])]
    r = remedies.select(columns).append_column("_r", pa.array(np.arange(remedies.num_rows, dtype=np.int64)))
    b = blocked.select(["group", "topic", "partition", "committed_offset", "status", "holding_producer_id",
                        "holding_start_offset", "coordinator_partition"])  # fmt: skip
    behind = b.filter(pc.equal(b["status"], BLOCKED)).join(r, ["topic", "partition"], join_type="inner")
    match = pc.fill_null(pc.equal(behind["holding_start_offset"], behind["start_offset"]), False)
    if lso_after:
        match = pc.or_(match, pc.fill_null(pc.less(behind["committed_offset"], behind[lso_after]), False))
    unstable = b.filter(pc.equal(b["status"], UNSTABLE_OFFSET_COMMIT)).join(
        r.filter(pc.equal(r["topic"], CONSUMER_OFFSETS_TOPIC)).drop_columns(["topic"]),
        ["coordinator_partition", "holding_producer_id"],
        right_keys=["partition", "producer_id"],
        join_type="inner",
    )
    named = pa.concat_tables([behind.filter(match).select(["_r", "group"]), unstable.select(["_r", "group"])]).sort_by(
        [("_r", "ascending"), ("group", "ascending")]
    )
    at, group = named["_r"].to_numpy(), named["group"].combine_chunks()
    new = np.ones(len(at), bool)
    new[1:] = (at[1:] != at[:-1]) | ~pc.equal(group[1:], group[:-1]).to_numpy(zero_copy_only=False)
    offsets = np.zeros(remedies.num_rows + 1, np.int32)
    offsets[1:] = np.cumsum(np.bincount(at[new], minlength=remedies.num_rows))
    return pa.ListArray.from_arrays(pa.array(offsets), group.filter(pa.array(new)))


def groups_past(offsets: pa.Table | None, rows: pa.Table) -> pa.Array:
    """Per row of ``rows`` (topic, partition, first_offset), the consumer groups (sorted) whose last committed offset
    on its partition in ``offsets`` (txnlog.engine.consumer_offsets.SOURCE_SCHEMA) is above
    ``first_offset``: they consumed from there on (a committed offset is the next offset to read,
    ``OffsetAndMetadata``). Null for every row where the input holds no ``__consumer_offsets`` partition."""
    if offsets is None:
        return pa.nulls(rows.num_rows, pa.list_(pa.string()))
    if rows.num_rows == 0:
        return pa.array([], pa.list_(pa.string()))
    r = rows.select(["topic", "partition", "first_offset"])
    r = r.append_column("_r", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    # the offsets table is probed with the rows' partitions (few), never copied or grouped whole: the committed
    # offsets there in the table's order, the last of each key the one that counts
    committed = offsets.select(_USED).append_column("_at", pa.array(np.arange(offsets.num_rows, dtype=np.int64)))
    near = committed.join(r, ["topic", "partition"], join_type="inner")
    near = near.filter(pc.equal(near["state"], "committed")).sort_by("_at")
    read = _last_of(near, [*_GROUP_KEY, "_r"])
    read = read.filter(pc.fill_null(pc.greater(read["committed_offset"], read["first_offset"]), False))
    read = read.sort_by([("_r", "ascending"), ("group", "ascending")])
    at = read["_r"].to_numpy()
    offsets_list = np.zeros(rows.num_rows + 1, np.int32)
    offsets_list[1:] = np.cumsum(np.bincount(at, minlength=rows.num_rows))
    return pa.ListArray.from_arrays(pa.array(offsets_list), read["group"].combine_chunks())
