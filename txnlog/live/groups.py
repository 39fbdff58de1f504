"""The consumer groups of a live cluster as the ``blocked_consumers`` rule reads them (txnlog.rules.blocked).

No Spark here. confluent-kafka's AdminClient answers, in the shape the copy's ``__consumer_offsets`` replay gives
(txnlog.rules.consumer_offsets.OFFSETS_SCHEMA plus ``kind``, ``broker``, ``coordinator_partition``, ``members``):
one rule, two inputs.

* ListConsumerGroups: every group;
* ListConsumerGroupOffsets (OffsetFetch), ``requireStable`` false: each group's committed offsets, what
  ``kafka-consumer-groups.sh --describe`` shows (``OffsetMetadataManager.fetchAllOffsets``): ``offset`` rows of
  state ``committed``;
* ListConsumerGroupOffsets again, ``requireStable`` true, for the partitions the group has committed or its members
  are assigned: a partition with a pending transactional offset commit answers UNSTABLE_OFFSET_COMMIT
  (``OffsetMetadataManager.fetchOffsets``, ``hasPendingTransactionalOffsets``), as the Java consumer sees it at
  start-up and rebalance: ``offset`` rows of state ``pending``. The answer names no producer: the one holding it is
  named afterwards where the tables leave no doubt (:func:`pending_holders`);
* DescribeConsumerGroups for classic and consumer (KIP-848) groups: the members, their client ids and hosts (a
  ``group`` row).

A live answer has no commit timestamp (``commit_timestamp`` null) and no record offset. A group the cluster refuses
to answer for is a ``quarantine`` row naming it, its error and what to grant. The group's ``__consumer_offsets``
partition is ``Utils.abs(groupId.hashCode()) % partitions`` (``GroupCoordinatorService.partitionFor``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, transaction_state_partition_for
from txnlog.model.contract import LIVE_REPLICA, MEMBER

__all__ = ["GROUPS_SCHEMA", "consumer_groups", "pending_holders"]

#: the columns of the offline source's rows (txnlog.engine.consumer_offsets.SOURCE_SCHEMA) a live
#: answer fills; the pipeline adds the others as nulls
GROUPS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # offset / group / quarantine
        ("broker", pa.string()),  # "live"
        ("coordinator_partition", pa.int32()),
        ("group", pa.string()),
        ("group_bytes", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("state", pa.string()),  # committed / pending
        ("producer_id", pa.int64()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("members", pa.list_(MEMBER)),
        ("file", pa.string()),  # kind quarantine
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)

#: the groups whose members DescribeConsumerGroups answers for (``ConsumerGroupType``)
_DESCRIBED = ("CLASSIC", "CONSUMER")
#: groups asked at once (one OffsetFetch each: librdkafka's ListConsumerGroupOffsets takes one group per request)
_WINDOW = 64
GROUP_UNREADABLE = "group_unreadable"


def consumer_groups(admin: Any, md: Any, topics: Sequence[str] | None = None, *, timeout_s: float = 30.0) -> pa.Table:
    """Every consumer group's committed and pending offsets and its members (:data:`GROUPS_SCHEMA`), of the
    partitions of ``topics`` (None: every topic), asked with ``admin`` (an ``AdminClient``); ``md``: the cluster's
    metadata, every topic's (a live cut's session: txnlog.live.admin.cut_offsets)."""
    meta = md.topics.get(CONSUMER_OFFSETS_TOPIC)
    partitions = len(meta.partitions) if meta is not None and meta.error is None and meta.partitions else 0
    if not partitions:  # no group has ever committed: the broker creates the topic on first use
        return GROUPS_SCHEMA.empty_table()
    rows: list[dict[str, Any]] = []
    try:
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout_s)
    except Exception as e:  # noqa: BLE001 - refused or timed out: the run goes on, a quarantine row says so
        return pa.Table.from_pylist([_quarantine(None, partitions, f"ListConsumerGroups: {_error(e)}")], GROUPS_SCHEMA)
    groups = {g.group_id: _type_name(g) for g in listed.valid}
    for error in listed.errors:
        rows.append(_quarantine(None, partitions, f"ListConsumerGroups: {error}"))
    wanted = set(topics) if topics else None
    described = _describe(admin, [g for g, t in groups.items() if t in _DESCRIBED], timeout_s)
    committed = _fetch(admin, dict.fromkeys(groups), False, timeout_s)
    ask: dict[str, list[tuple[str, int]] | None] = {}
    for g in groups:
        answer, members = committed[g], described.get(g)
        if isinstance(answer, str):
            rows.append(_quarantine(g, partitions, f"ListConsumerGroupOffsets: {answer}"))
            continue
        tps = {(t, p) for t, p, _o, _e in answer}
        if isinstance(members, tuple):
            tps |= set(members[1])
        tps = {tp for tp in tps if wanted is None or tp[0] in wanted}
        if tps:
            ask[g] = sorted(tps)
    stable = _fetch(admin, ask, True, timeout_s)
    for g in groups:
        rows.extend(_group_rows(g, partitions, committed[g], stable.get(g), described.get(g), wanted))
    return pa.Table.from_pylist(rows, schema=GROUPS_SCHEMA)


def _type_name(listing: Any) -> str:
    kind = getattr(listing, "type", None)
    return getattr(kind, "name", "UNKNOWN") or "UNKNOWN"


Answer = list[tuple[str, int, int, str | None]] | str  # (topic, partition, offset, error name) or the group's error


def _fetch(
    admin: Any, asks: Mapping[str, list[tuple[str, int]] | None], require_stable: bool, timeout_s: float
) -> dict[str, Answer]:
    """ListConsumerGroupOffsets of each group (its given partitions, or all it committed), ``_WINDOW`` at a time."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    out: dict[str, Answer] = {}
    names = list(asks)
    for i in range(0, len(names), _WINDOW):
        futures = {}
        for g in names[i : i + _WINDOW]:
            tps = asks[g]
            request = ConsumerGroupTopicPartitions(g, None if tps is None else [TopicPartition(t, p) for t, p in tps])
            futures[g] = admin.list_consumer_group_offsets(
                [request], require_stable=require_stable, request_timeout=timeout_s
            )[g]
        for g, f in futures.items():
            try:
                result = f.result(timeout_s)
            except Exception as e:  # noqa: BLE001 - the group's error (KafkaException) or a timeout
                out[g] = _error(e)
                continue
            out[g] = [
                (tp.topic, tp.partition, tp.offset, tp.error.name() if tp.error else None)
                for tp in result.topic_partitions
            ]
    return out


def _describe(admin: Any, groups: Sequence[str], timeout_s: float) -> dict[str, tuple[list[dict], list] | str]:
    """DescribeConsumerGroups: group -> (members as MEMBER dicts, the members' assigned (topic, partition)), or the
    group's error."""
    if not groups:
        return {}
    out: dict[str, tuple[list[dict], list] | str] = {}
    for g, f in admin.describe_consumer_groups(list(groups), request_timeout=timeout_s).items():
        try:
            d = f.result(timeout_s)
        except Exception as e:  # noqa: BLE001 - the group's error (KafkaException) or a timeout
            out[g] = _error(e)
            continue
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.host} for m in d.members]
        assigned = [(tp.topic, tp.partition) for m in d.members if m.assignment for tp in m.assignment.topic_partitions]
        out[g] = (members, assigned)
    return out


def _error(e: BaseException) -> str:
    """A client error in one line: Kafka's error name and text, else the exception's."""
    err: Any = e.args[0] if e.args else None
    if hasattr(err, "name") and hasattr(err, "str"):
        return f"{err.name()}: {err.str()}"
    return f"{type(e).__name__}: {e}"


def _group_rows(
    group: str,
    partitions: int,
    committed: Answer,
    stable: Answer | None,
    described: tuple[list[dict], list] | str | None,
    wanted: set[str] | None,
) -> list[dict[str, Any]]:
    """The ``offset`` rows (committed, pending) and the ``group`` row of one group."""
    if isinstance(committed, str):
        return []  # quarantined by the caller
    base = {"broker": LIVE_REPLICA, "coordinator_partition": transaction_state_partition_for(group, partitions),
            "group": group, "group_bytes": group.encode()}  # fmt: skip
    rows = [
        {**base, "kind": "offset", "topic": t, "partition": p, "state": "committed", "committed_offset": o}
        for t, p, o, err in committed
        if err is None and o >= 0 and (wanted is None or t in wanted)
    ]
    if isinstance(stable, str):
        rows.append(_quarantine(group, partitions, f"ListConsumerGroupOffsets (requireStable): {stable}"))
        stable = None
    for t, p, _o, err in stable or []:
        if err == "UNSTABLE_OFFSET_COMMIT":
            rows.append({**base, "kind": "offset", "topic": t, "partition": p, "state": "pending"})
    if isinstance(described, str):
        rows.append(_quarantine(group, partitions, f"DescribeConsumerGroups: {described}"))
    elif described is not None:
        rows.append({**base, "kind": "group", "members": described[0]})
    return rows


def _quarantine(group: str | None, partitions: int, error: str) -> dict[str, Any]:
    """A group the cluster did not answer for: its row names it, the error and what the job needs."""
    part = transaction_state_partition_for(group, partitions) if group is not None else None
    where = f"group {group!r}" if group is not None else "the consumer groups"
    return {
        "kind": "quarantine", "broker": LIVE_REPLICA, "coordinator_partition": part, "group": group,
        "file": f"kafka://{CONSUMER_OFFSETS_TOPIC}" + (f"-{part}" if part is not None else ""),
        "reason": GROUP_UNREADABLE,
        "detail": f"{where}: {error}; to say who is blocked the job needs Describe on the group and its topics",
    }  # fmt: skip


def pending_holders(offsets: pa.Table, health: pa.Table, findings: pa.Table) -> pa.Table:
    """``offsets`` with the producer of each live ``pending`` row named where the tables leave no doubt: the group's
    ``__consumer_offsets`` partition holds exactly one open transaction (``partition_health.open_transactions``),
    and a finding names it. A pending transactional offset lives in the transaction that wrote it to that partition
    (``OffsetMetadataManager.replay``), so that one holds it; with several open there, the producer stays null."""
    pending = pc.and_(pc.equal(offsets["kind"], "offset"), pc.equal(offsets["state"], "pending"))
    if not pc.any(pc.fill_null(pending, False)).as_py():
        return offsets
    one_open = {
        h["partition"]
        for h in health.select(["topic", "partition", "open_transactions"]).to_pylist()
        if h["topic"] == CONSUMER_OFFSETS_TOPIC and h["open_transactions"] == 1
    }
    holder: dict[int, int] = {}
    for f in findings.select(["topic", "partition", "producer_id"]).to_pylist():
        if f["topic"] == CONSUMER_OFFSETS_TOPIC and f["partition"] in one_open:
            holder[f["partition"]] = f["producer_id"]
    named = [
        holder.get(part) if is_pending and producer is None else producer
        for part, producer, is_pending in zip(
            offsets["coordinator_partition"].to_pylist(),
            offsets["producer_id"].to_pylist(),
            pc.fill_null(pending, False).to_pylist(),
            strict=True,
        )
    ]
    index = offsets.schema.get_field_index("producer_id")
    return offsets.set_column(index, "producer_id", pa.array(named, pa.int64()))
