"""The cluster's topics and partitions as of a copied KRaft metadata log: its records replayed.

A KRaft broker keeps the image of the cluster it serves by replaying ``__cluster_metadata`` in offset order
(``MetadataLoader``, ``TopicsDelta.replay``); this module replays the rows of
:mod:`txnlog.kafka.cluster_metadata` the same way, for the four record types that shape the topics:

* TopicRecord: a topic is created, under a new topic id;
* PartitionRecord: a partition is registered whole (replicas, ISR, leader, leader and partition epochs);
* PartitionChangeRecord: a partition changes (``PartitionRegistration.merge``): each field the record carries
  replaces the registered one; a Leader other than -2 (unchanged) is a new leader and bumps the leader epoch
  by one; every change bumps the partition epoch;
* RemoveTopicRecord: the topic and its partitions are deleted (``TopicsDelta.replay``).

The image is trusted only whole: a record of these four types that could not be read, a change to a partition
or a removal of a topic that was never registered (the log does not start at the cluster's beginning and no
snapshot covers what is missing), or a damaged batch, and :attr:`ClusterImage.problem` says why, and the
caller keeps its defaults. Pure: an Arrow table in, Arrow tables out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from txnlog.kafka.cluster_metadata import NO_LEADER_CHANGE, RECORD_TYPES
from txnlog.kafka.wire import TRANSACTION_STATE_TOPIC

__all__ = [
    "DELETED_COLUMNS",
    "PARTITION_COLUMNS",
    "ROLE_COLUMNS",
    "ClusterImage",
    "MetadataSays",
    "coordinator_partitions",
    "deleted_topics",
    "furthest",
    "replay",
    "replica_roles",
    "says",
]

_TOPIC, _PARTITION, _CHANGE, _REMOVE = (
    RECORD_TYPES[k] for k in (2, 3, 5, 9)
)  # TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord

#: one row per partition of a topic that exists as of the log's end
PARTITION_COLUMNS = pa.schema(
    [
        ("topic", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("leader", pa.int32()),  # -1: no leader
        ("leader_epoch", pa.int32()),
        ("partition_epoch", pa.int32()),
        ("replicas", pa.list_(pa.int32())),
        ("isr", pa.list_(pa.int32())),
        ("offset", pa.int64()),  # the metadata record that last changed the partition
    ]
)
#: one row per topic deleted (RemoveTopicRecord) in the records replayed
DELETED_COLUMNS = pa.schema(
    [("topic", pa.string()), ("topic_id", pa.string()), ("partitions", pa.int32()), ("offset", pa.int64())]
)


@dataclass(frozen=True)
class ClusterImage:
    """The topics as of the last record replayed (``end_offset``), and what was deleted on the way."""

    partitions: pa.Table
    deleted: pa.Table
    end_offset: int = -1
    #: why the image is not to be trusted ("" when it is): the first problem met
    problem: str = ""
    #: records per MetadataRecordType name, the types not replayed included
    counts: dict[str, int] = field(default_factory=dict)

    def partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` has (None: the topic is not in the image, or the image is not trusted)."""
        if self.problem:
            return None
        n = sum(1 for t in self.partitions.column("topic").to_pylist() if t == topic)
        return n or None


def replay(records: pa.Table, *, damaged: str = "") -> ClusterImage:
    """The image of ``records`` (rows of :data:`txnlog.kafka.cluster_metadata.METADATA_COLUMNS` in offset
    order); ``damaged``: a problem the caller already knows of (a quarantined batch), which the image keeps."""
    topics: dict[str, str] = {}  # topic id -> name
    parts: dict[tuple[str, int], dict[str, Any]] = {}
    deleted: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    problem = damaged
    end = -1
    for r in records.to_pylist():
        kind = r["record_type"] or f"api key {r['api_key']}"
        counts[kind] = counts.get(kind, 0) + 1
        end = max(end, r["offset"])
        if kind not in (_TOPIC, _PARTITION, _CHANGE, _REMOVE):
            continue
        if r["problem"]:
            problem = problem or f"the {kind} at offset {r['offset']} is unreadable: {r['problem']}"
            continue
        tid = r["topic_id"]
        if kind == _TOPIC:
            topics[tid] = r["topic"]
        elif kind == _PARTITION:
            parts[(tid, r["partition"])] = {
                k: r[k] for k in ("partition", "leader", "leader_epoch", "partition_epoch", "replicas", "isr", "offset")
            }
        elif kind == _CHANGE:
            p = parts.get((tid, r["partition"]))
            if p is None:
                problem = problem or f"the {kind} at offset {r['offset']} changes a partition never registered"
                continue
            _merge(p, r)
        else:
            name = topics.pop(tid, None)
            if name is None:
                problem = problem or f"the {kind} at offset {r['offset']} removes a topic never created"
                continue
            gone = [k for k in parts if k[0] == tid]
            for k in gone:
                del parts[k]
            deleted.append({"topic": name, "topic_id": tid, "partitions": len(gone), "offset": r["offset"]})
    rows = [
        {"topic": topics[tid], "topic_id": tid, **p}
        for (tid, _), p in sorted(parts.items(), key=lambda kv: (topics.get(kv[0][0], ""), kv[0][1]))
        if tid in topics
    ]
    if len(rows) != len(parts) and not problem:
        problem = "a PartitionRecord names a topic id no TopicRecord created"
    return ClusterImage(
        pa.Table.from_pylist(rows, schema=PARTITION_COLUMNS),
        pa.Table.from_pylist(deleted, schema=DELETED_COLUMNS),
        end,
        problem,
        counts,
    )


def furthest(logs: Sequence[tuple[str, pa.Table, str]]) -> tuple[ClusterImage, str] | None:
    """The image of the metadata log that reaches furthest among several nodes' copies ((node, records, known
    problem) each), and its node; None when there is none. Every node holds the same log, some further along."""
    best: tuple[ClusterImage, str] | None = None
    for node, records, problem in logs:
        image = replay(records, damaged=problem)
        if best is None or image.end_offset > best[0].end_offset:
            best = (image, node)
    return best


def metadata_count(found: tuple[ClusterImage, str] | None) -> int | None:
    """The ``__transaction_state`` partition count the metadata log gives (``found``: :func:`furthest`), or None
    where there is no usable log or it holds no such topic (then the configured count decides)."""
    return None if found is None else found[0].partition_count(TRANSACTION_STATE_TOPIC)


def coordinator_partitions(found: tuple[ClusterImage, str] | None, configured: int) -> tuple[int, str]:
    """How many ``__transaction_state`` partitions the cluster has, and what decided it ("" for the configured
    value alone). As a broker gives its TransactionCoordinator the count (``BrokerServer``:
    ``metadataCache.numPartitions(TRANSACTION_STATE_TOPIC_NAME).getOrElse(config.transactionTopicPartitions)``):
    the topic's count in the metadata (``found``: :func:`furthest`), else ``configured``
    (``transaction.state.log.num.partitions``, which only shapes the topic when it is created)."""
    if found is None:
        return configured, ""
    image, node = found
    n = metadata_count(found)
    if n is None:
        why = image.problem or f"it holds no {TRANSACTION_STATE_TOPIC} topic"
        return configured, f"the configured count, {configured} (the KRaft metadata log of {node} was not used: {why})"
    said = f"{n} as the KRaft metadata log of {node} counts them (as of its offset {image.end_offset})"
    if n != configured:
        said += f", not the configured {configured}: a broker takes the topic's count too (BrokerServer)"
    return n, said


def _merge(p: dict[str, Any], change: dict[str, Any]) -> None:
    """``PartitionRegistration.merge``: the fields the change carries replace the registered ones."""
    for k in ("replicas", "isr"):
        if change[k] is not None:
            p[k] = change[k]
    if change["leader"] != NO_LEADER_CHANGE:
        p["leader"] = change["leader"]
        p["leader_epoch"] += 1
    p["partition_epoch"] += 1
    p["offset"] = change["offset"]


#: per partition of the image that a copied log dir's node holds: who led it and who was in sync, by the copy's
#: broker (log dir) names (each log dir's ``node.id``: txnlog.sources.logdirs), as of the metadata log's end
ROLE_COLUMNS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader", pa.int32()),  # the leader's node id; -1: none
        ("leader_replica", pa.string()),  # its log dir in the copy; null: no leader, or not in the copy
        ("leader_epoch", pa.int32()),
        ("in_sync_replicas", pa.list_(pa.string())),  # the ISR's log dirs in the copy
        ("said_by", pa.string()),  # which metadata log says so, as of which offset
    ]
)


def replica_roles(found: tuple[ClusterImage, str] | None, node_ids: Mapping[str, int]) -> pa.Table:
    """:data:`ROLE_COLUMNS` of every partition of the image (``found``: :func:`furthest`) one of the copy's log
    dirs (``node_ids``: broker name -> its ``node.id``) is a replica of; empty where there is no usable image."""
    if found is None or found[0].problem or not node_ids:
        return ROLE_COLUMNS.empty_table()
    image, node = found
    name_of = {n: b for b, n in node_ids.items()}
    said = f"the KRaft metadata log of {node} (as of its offset {image.end_offset})"
    rows = [
        {
            "topic": p["topic"],
            "partition": p["partition"],
            "leader": p["leader"],
            "leader_replica": name_of.get(p["leader"]),
            "leader_epoch": p["leader_epoch"],
            "in_sync_replicas": [name_of[n] for n in p["isr"] or () if n in name_of],
            "said_by": said,
        }
        for p in image.partitions.to_pylist()
        if any(n in name_of for n in p["replicas"] or ())
    ]
    return pa.Table.from_pylist(rows, schema=ROLE_COLUMNS)


def deleted_topics(found: tuple[ClusterImage, str] | None) -> pa.Table:
    """The topics the metadata log deleted and did not create again (a name can come back under a new topic
    id), with the offset of their RemoveTopicRecord and which log says so: :data:`DELETED_COLUMNS` + said_by."""
    if found is None or found[0].problem:
        return DELETED_COLUMNS.append(pa.field("said_by", pa.string())).empty_table()
    image, node = found
    alive = set(image.partitions.column("topic").to_pylist())
    gone = image.deleted.filter(
        pa.array([t not in alive for t in image.deleted.column("topic").to_pylist()], pa.bool_())
    )
    return gone.append_column("said_by", pa.repeat(pa.scalar(f"the KRaft metadata log of {node}"), gone.num_rows))


@dataclass(frozen=True)
class MetadataSays:
    """Everything a run takes from the copy's KRaft metadata log, worked out once (:func:`says`)."""

    txn_state_partitions: int  # :func:`coordinator_partitions`' count
    decided: str  # and what decided it ("" for the configured value alone)
    counted: bool  # the log itself gave the count (:func:`metadata_count` is not None)
    deleted: pa.Table  # :func:`deleted_topics`
    #: (:func:`replica_roles`, :func:`deleted_topics`) for the tables; None: no metadata log in the copy
    notes: tuple[pa.Table, pa.Table] | None


def says(found: tuple[ClusterImage, str] | None, configured: int, node_ids: Mapping[str, int]) -> MetadataSays:
    """What the metadata log ``found`` (:func:`furthest`; None: there is none) says of the copy, in one value:
    the ``__transaction_state`` partition count against ``configured``, the deleted topics, and the replica
    roles by the copy's log dirs (``node_ids``: broker name -> its ``node.id``)."""
    n, decided = coordinator_partitions(found, configured)
    deleted = deleted_topics(found)
    notes = None if found is None else (replica_roles(found, node_ids), deleted)
    return MetadataSays(n, decided, metadata_count(found) is not None, deleted, notes)
