"""``__consumer_offsets`` keys and values as Kafka's group coordinator serializes them.

Writer side only, written from Kafka's message specs (group-coordinator/src/main/resources/common/message/,
``MessageUtil.toVersionPrefixedBytes``), not from our decoders: the key's int16 prefix is the record type
(``GroupCoordinatorRecordSerde``), the value's its version; non-flexible versions use int16-length strings and
int32-length arrays and bytes, flexible ones compact lengths and a tagged-field section.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from txnlog.brokerlog.encode_batches import _uvarint


def _string(s: str | None, flexible: bool = False) -> bytes:
    if s is None:
        return _uvarint(0) if flexible else struct.pack(">h", -1)
    data = s.encode("utf-8")
    return (_uvarint(len(data) + 1) if flexible else struct.pack(">h", len(data))) + data


def _bytes(b: bytes | None, flexible: bool = False) -> bytes:
    if b is None:
        return _uvarint(0) if flexible else struct.pack(">i", -1)
    return (_uvarint(len(b) + 1) if flexible else struct.pack(">i", len(b))) + b


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else struct.pack(">i", n)


def _tags(tags: dict[int, bytes] | None = None) -> bytes:
    tags = tags or {}
    out = _uvarint(len(tags))
    for tag in sorted(tags):
        out += _uvarint(tag) + _uvarint(len(tags[tag])) + tags[tag]
    return out


# ---------------------------------------------------------------- OffsetCommit (record types 0 and 1)


def offset_commit_key(group: str, topic: str, partition: int, record_type: int = 1) -> bytes:
    """OffsetCommitKey v0/v1 (the same fields; the coordinator writes type 1)."""
    return struct.pack(">h", record_type) + _string(group) + _string(topic) + struct.pack(">i", partition)


def offset_commit_value(
    offset: int,
    *,
    version: int = 3,
    leader_epoch: int = -1,
    metadata: str = "",
    commit_timestamp: int = 0,
    expire_timestamp: int = -1,
    unknown_tags: dict[int, bytes] | None = None,
) -> bytes:
    """OffsetCommitValue v0-v4: leaderEpoch from v3, expireTimestamp in v1 only, flexible (tagged fields) in v4."""
    flexible = version >= 4
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", leader_epoch)
    out += _string(metadata, flexible) + struct.pack(">q", commit_timestamp)
    if version == 1:
        out += struct.pack(">q", expire_timestamp)
    return out + (_tags(unknown_tags) if flexible else b"")


# ---------------------------------------------------------------- GroupMetadata (record type 2)


def group_metadata_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None
    rebalance_timeout: int = -1


def group_metadata_value(
    *,
    version: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int = -1,
    members: Sequence[Member] = (),
) -> bytes:
    """GroupMetadataValue v0-v4: currentStateTimestamp from v2, groupInstanceId from v3, flexible in v4."""
    flex = version >= 4
    out = struct.pack(">h", version) + _string(protocol_type, flex) + struct.pack(">i", generation)
    out += _string(protocol, flex) + _string(leader, flex)
    if version >= 2:
        out += struct.pack(">q", current_state_timestamp)
    out += _array_len(len(members), flex)
    for m in members:
        out += _string(m.member_id, flex)
        if version >= 3:
            out += _string(m.group_instance_id, flex)
        out += _string(m.client_id, flex) + _string(m.client_host, flex)
        if version >= 1:
            out += struct.pack(">i", m.rebalance_timeout)
        out += struct.pack(">i", m.session_timeout) + _bytes(m.subscription, flex) + _bytes(m.assignment, flex)
        out += _tags() if flex else b""
    return out + (_tags() if flex else b"")


def _topic_partitions_by_name(tps: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    out = struct.pack(">i", len(tps))
    for topic, parts in tps:
        out += _string(topic) + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out


def consumer_subscription(
    topics: Sequence[str],
    *,
    version: int = 3,
    owned: Sequence[tuple[str, Sequence[int]]] = (),
    generation_id: int = -1,
    rack_id: str | None = None,
    user_data: bytes | None = None,
) -> bytes:
    """ConsumerProtocolSubscription v0-v3 (version-prefixed, never flexible): a classic consumer's metadata."""
    out = struct.pack(">hi", version, len(topics)) + b"".join(_string(t) for t in topics) + _bytes(user_data)
    if version >= 1:
        out += _topic_partitions_by_name(owned)
    if version >= 2:
        out += struct.pack(">i", generation_id)
    if version >= 3:
        out += _string(rack_id)
    return out


def consumer_assignment(
    partitions: Sequence[tuple[str, Sequence[int]]], *, version: int = 3, user_data: bytes | None = None
) -> bytes:
    """ConsumerProtocolAssignment v0-v3 (the same fields in every version)."""
    return struct.pack(">h", version) + _topic_partitions_by_name(partitions) + _bytes(user_data)


# ---------------------------------------------------------------- consumer-protocol groups (KIP-848, types 3-8)


def group_key(record_type: int, group: str, member: str | None = None) -> bytes:
    """The key of record types 3-15: GroupId, and MemberId for the member records (5, 7, 8, 10, 13, 14)."""
    return struct.pack(">h", record_type) + _string(group) + (b"" if member is None else _string(member))


def epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue (type 3) / ConsumerGroupTargetAssignmentMetadataValue (type 6) v0."""
    return struct.pack(">hi", 0, epoch) + _tags()


def _topic_partitions_by_id(tps: Sequence[tuple[bytes, Sequence[int]]]) -> bytes:
    out = _array_len(len(tps), True)
    for topic_id, parts in tps:
        out += topic_id + _array_len(len(parts), True) + struct.pack(f">{len(parts)}i", *parts) + _tags()
    return out


def member_metadata_value(
    *,
    client_id: str,
    client_host: str,
    subscribed: Sequence[str],
    instance_id: str | None = None,
    rack_id: str | None = None,
    regex: str | None = None,
    rebalance_timeout_ms: int = -1,
    server_assignor: str | None = None,
    classic_session_timeout_ms: int | None = None,
) -> bytes:
    """ConsumerGroupMemberMetadataValue v0 (type 5); ClassicMemberMetadata is tagged field 0 when given."""
    out = struct.pack(">h", 0) + _string(instance_id, True) + _string(rack_id, True)
    out += _string(client_id, True) + _string(client_host, True)
    out += _array_len(len(subscribed), True) + b"".join(_string(t, True) for t in subscribed)
    out += _string(regex, True) + struct.pack(">i", rebalance_timeout_ms) + _string(server_assignor, True)
    tags = {}
    if classic_session_timeout_ms is not None:
        # a non-null struct: int8 1, then its fields (no supported protocols) and its own tag section
        tags[0] = struct.pack(">bi", 1, classic_session_timeout_ms) + _array_len(0, True) + _tags()
    return out + _tags(tags)


def target_assignment_member_value(partitions: Sequence[tuple[bytes, Sequence[int]]]) -> bytes:
    """ConsumerGroupTargetAssignmentMemberValue v0 (type 7)."""
    return struct.pack(">h", 0) + _topic_partitions_by_id(partitions) + _tags()


def current_assignment_value(
    *,
    member_epoch: int,
    previous_member_epoch: int,
    state: int,
    assigned: Sequence[tuple[bytes, Sequence[int]]],
    pending_revocation: Sequence[tuple[bytes, Sequence[int]]] = (),
) -> bytes:
    """ConsumerGroupCurrentMemberAssignmentValue v0 (type 8)."""
    out = struct.pack(">hiib", 0, member_epoch, previous_member_epoch, state)
    return out + _topic_partitions_by_id(assigned) + _topic_partitions_by_id(pending_revocation) + _tags()


def partition_metadata_value(topics: Sequence[tuple[bytes, str, int]]) -> bytes:
    """ConsumerGroupPartitionMetadataValue v0 (type 4): (topic id, name, partition count), no rack metadata."""
    out = struct.pack(">h", 0) + _array_len(len(topics), True)
    for topic_id, name, count in topics:
        out += topic_id + _string(name, True) + struct.pack(">i", count) + _array_len(0, True) + _tags()
    return out + _tags()
