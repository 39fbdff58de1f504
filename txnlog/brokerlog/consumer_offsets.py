"""``__consumer_offsets`` records as Kafka's group coordinator writes them, and a partition of every kind.

Writer side only, written from Kafka's message specs (group-coordinator/src/main/resources/common/message/,
``MessageUtil.toVersionPrefixedBytes``), not from our decoders: the key's int16 prefix is the record type
(``GroupCoordinatorRecordSerde``), the value's its version; non-flexible versions use int16-length strings and
int32-length arrays and bytes, flexible ones compact lengths and a tagged-field section.
:func:`write_offsets_partition` writes one ``__consumer_offsets-N`` directory holding every key and value
version, tombstones, compressed batches and transactional offset commits ended by COMMIT and ABORT markers
(and one left open), and returns what it wrote in the order it wrote it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from txnlog.brokerlog.encode import encode_record_batch
from txnlog.brokerlog.encode_batches import RecordSpec, _uvarint
from txnlog.brokerlog.partition import PartitionLog
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, Compression, ControlType


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


# ---------------------------------------------------------------- a partition of every kind


@dataclass(slots=True)
class WrittenBatch:
    """One batch the writer appended: its records' (key, value), or the marker it is."""

    base_offset: int
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    producer_id: int = -1
    compression: Compression = Compression.NONE
    marker: ControlType | None = None


class OffsetsPartitionWriter:
    """Appends ``__consumer_offsets`` batches to a :class:`PartitionLog` as the group coordinator does: plain
    batches (no producer), transactional ones (``TxnOffsetCommit``: the producer's id and epoch) and their
    COMMIT/ABORT markers."""

    def __init__(self, log_dir: str | Path, partition: int = 0, *, now: int = 1_700_000_000_000) -> None:
        self.log = PartitionLog(log_dir, CONSUMER_OFFSETS_TOPIC, partition)
        self.now = now
        self.written: list[WrittenBatch] = []

    def append(
        self,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        compression: Compression = Compression.NONE,
        producer: tuple[int, int] | None = None,
    ) -> WrittenBatch:
        self.now += 10
        pid, epoch = producer if producer is not None else (-1, -1)
        specs = [RecordSpec(i, 0, k, v) for i, (k, v) in enumerate(records)]
        batch = encode_record_batch(
            base_offset=0,
            records=specs,
            base_timestamp=self.now,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0 if producer is not None else -1,
            is_transactional=producer is not None,
            compression=compression,
        )
        info = self.log.append(batch)
        written = WrittenBatch(info.base_offset, list(records), pid, compression)
        self.written.append(written)
        return written

    def end_transaction(self, producer: tuple[int, int], commit: bool) -> WrittenBatch:
        self.now += 10
        control = ControlType.COMMIT if commit else ControlType.ABORT
        info = self.log.append_end_txn_marker(
            producer_id=producer[0],
            producer_epoch=producer[1],
            control_type=control,
            coordinator_epoch=0,
            timestamp=self.now,
        )
        written = WrittenBatch(info.base_offset, producer_id=producer[0], marker=control)
        self.written.append(written)
        return written

    def close(self) -> Path:
        self.log.close()
        return self.log.dir


#: Groups with unusual names: every one must come back byte for byte.
ODD_GROUPS = ("grüße-☃", "with space\tand tab", "nul\x00inside", "", "x" * 300)
_TOPIC_ID = bytes(range(1, 17))


def _classic_member(n: int, version: int) -> Member:
    return Member(
        member_id=f"consumer-{n}-5f1c",
        group_instance_id=f"instance-{n}" if n % 2 else None,
        client_id=f"client-{n}",
        client_host=f"/10.0.0.{n}",
        session_timeout=45_000,
        rebalance_timeout=300_000,
        subscription=consumer_subscription(["orders", "payments"], version=version % 4, owned=[("orders", [n])]),
        assignment=consumer_assignment([("orders", [n, n + 2])], version=version % 4, user_data=b"\x01" * n),
    )


def _every_offset_commit_version(w: OffsetsPartitionWriter) -> None:
    """A plain commit per OffsetCommitValue version, with key types 0 and 1."""
    for version in range(5):  # a plain commit per value version, key v0 and v1
        w.append(
            [
                (
                    offset_commit_key("plain", "orders", version, record_type=version % 2),
                    offset_commit_value(
                        100 + version,
                        version=version,
                        leader_epoch=7,
                        metadata=f"m{version}",
                        commit_timestamp=w.now,
                        expire_timestamp=w.now + 86_400_000,
                        unknown_tags={5: b"\xab\xcd"} if version == 4 else None,
                    ),
                )
            ]
        )


def _every_group_metadata_version(w: OffsetsPartitionWriter) -> None:
    """GroupMetadata per value version: a consumer-protocol group, an empty "connect" one."""
    for version in range(5):  # group metadata per version: consumer protocol, then an empty "connect" group
        members = [_classic_member(n, version) for n in range(1, 3)]
        w.append(
            [
                (
                    group_metadata_key(f"classic-{version}"),
                    group_metadata_value(
                        version=version,
                        protocol_type="consumer",
                        generation=3 + version,
                        protocol="range",
                        leader=members[0].member_id,
                        current_state_timestamp=w.now,
                        members=members,
                    ),
                ),
                (
                    group_metadata_key(f"empty-{version}"),
                    group_metadata_value(
                        version=version, protocol_type="connect", generation=0, protocol=None, leader=None
                    ),
                ),
            ]
        )


def _consumer_protocol_group(w: OffsetsPartitionWriter) -> None:
    """The records of a KIP-848 consumer group (types 3-8)."""
    g = "modern"
    w.append(
        [
            (group_key(3, g), epoch_value(12)),
            (group_key(4, g), partition_metadata_value([(_TOPIC_ID, "orders", 6)])),
            (
                group_key(5, g, "m-1"),
                member_metadata_value(
                    client_id="c1",
                    client_host="/10.0.0.9",
                    subscribed=["orders"],
                    rebalance_timeout_ms=60_000,
                    server_assignor="uniform",
                    instance_id="i-1",
                    rack_id="r1",
                ),
            ),
            (
                group_key(5, g, "m-2"),
                member_metadata_value(
                    client_id="c2",
                    client_host="/10.0.0.8",
                    subscribed=[],
                    regex="ord.*",
                    classic_session_timeout_ms=45_000,
                ),
            ),
            (group_key(6, g), epoch_value(12)),
            (group_key(7, g, "m-1"), target_assignment_member_value([(_TOPIC_ID, [0, 1, 2])])),
            (
                group_key(8, g, "m-1"),
                current_assignment_value(
                    member_epoch=12,
                    previous_member_epoch=11,
                    state=0,
                    assigned=[(_TOPIC_ID, [0, 1])],
                    pending_revocation=[(_TOPIC_ID, [2])],
                ),
            ),
        ]
    )


def _compressed_and_odd_groups(w: OffsetsPartitionWriter) -> None:
    """A batch of commits per codec, and a commit per odd group name."""
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        w.append(
            [
                (
                    offset_commit_key(f"compressed-{codec.name}", "orders", p),
                    offset_commit_value(10 * p + codec, commit_timestamp=w.now),
                )
                for p in range(3)
            ],
            compression=codec,
        )
    for n, group in enumerate(ODD_GROUPS):
        w.append([(offset_commit_key(group, "orders", 0), offset_commit_value(n, commit_timestamp=w.now))])


def _tombstones_and_transactions(w: OffsetsPartitionWriter) -> None:
    """Tombstones, then transactional commits: one committed, one aborted, one left open."""
    # tombstones: an offset, a classic group, a consumer-protocol member
    w.append([(offset_commit_key("plain", "orders", 0), None), (group_metadata_key("empty-0"), None)])
    w.append([(group_key(5, "modern", "m-2"), None)])
    # transactional offset commits (TxnOffsetCommit), over a plain commit of the same partitions
    w.append(
        [(offset_commit_key("txn", "orders", p), offset_commit_value(50, commit_timestamp=w.now)) for p in range(3)]
    )
    committed, aborted, open_ = (4000, 0), (4001, 2), (4002, 0)
    w.append(
        [(offset_commit_key("txn", "orders", 0), offset_commit_value(60, commit_timestamp=w.now))], producer=committed
    )
    w.append(
        [(offset_commit_key("txn", "orders", 1), offset_commit_value(61, commit_timestamp=w.now))], producer=aborted
    )
    w.append(
        [(offset_commit_key("txn", "orders", 2), offset_commit_value(62, commit_timestamp=w.now))],
        producer=open_,
        compression=Compression.SNAPPY,
    )
    w.end_transaction(committed, commit=True)
    w.end_transaction(aborted, commit=False)


def write_every_kind(log_dir: str | Path, partition: int = 0) -> OffsetsPartitionWriter:
    """A ``__consumer_offsets-<partition>`` with every key and value version the group coordinator has written
    (OffsetCommit v0-v4, GroupMetadata v0-v4, the consumer-protocol records), tombstones, a batch per codec,
    and transactional offset commits: one committed, one aborted, one left open. Returns the closed writer
    (``written``: what it appended, in order)."""
    w = OffsetsPartitionWriter(log_dir, partition)
    for part in (
        _every_offset_commit_version,
        _every_group_metadata_version,
        _consumer_protocol_group,
        _compressed_and_odd_groups,
        _tombstones_and_transactions,
    ):
        part(w)
    w.close()
    return w
