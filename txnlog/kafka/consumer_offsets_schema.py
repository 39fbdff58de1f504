"""The ``__consumer_offsets`` record schemas, as Kafka's group coordinator declares them, and one reader for them.

Each record's key starts with an int16 that is the *record type* (``GroupCoordinatorRecordSerde``: 0/1
OffsetCommit, 2 GroupMetadata, 3-8 the consumer-protocol group records of KIP-848, 9-15 share groups); the key
is read at that version. The value starts with its own int16 version. The field lists below transcribe
Kafka's message specs (group-coordinator/src/main/resources/common/message/*.json, and the clients'
ConsumerProtocolSubscription/Assignment.json for the embedded consumer protocol); :func:`read_message` reads
them the way the generated ``Message.read`` does (``MessageDataGenerator``): int16/int32-length strings,
arrays and bytes below the flexible versions, compact ones with tagged fields from them on. Trailing bytes
after a message are not an error (``CoordinatorRecordSerde.deserialize`` does not check them).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any

_ALL = (0, 32767)


@dataclass(frozen=True, slots=True)
class Field:
    """One field: ``kind`` is a primitive (int8, int16, int32, int64, string, bytes, uuid), ``[]`` + a primitive,
    ``[]`` (an array of the struct ``fields``) or ``struct`` (a nested struct, only as a tagged field here)."""

    name: str
    kind: str
    versions: tuple[int, int] = _ALL
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    fields: tuple[Field, ...] = ()
    default: Any = None


@dataclass(frozen=True, slots=True)
class Schema:
    name: str
    valid: tuple[int, int]
    flexible_from: int | None  # None: never flexible
    fields: tuple[Field, ...]


def _v(spec: str) -> tuple[int, int]:
    if spec.endswith("+"):
        return int(spec[:-1]), _ALL[1]
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


def F(name: str, kind: str, versions: str = "0+", *, nullable: str | None = None, **kw: Any) -> Field:  # noqa: N802
    return Field(name, kind, _v(versions), _v(nullable) if nullable else None, **kw)


def _group_key(name: str, record_type: int, member: bool = False) -> Schema:
    v = str(record_type)
    fields = (F("GroupId", "string", v),) + ((F("MemberId", "string", v),) if member else ())
    return Schema(name, (record_type, record_type), None, fields)


_TOPIC_PARTITIONS = (F("TopicId", "uuid"), F("Partitions", "[]int32"))

#: record type -> (key schema, value schema or None where only the key is decoded)
RECORD_TYPES: dict[int, tuple[Schema, Schema | None]] = {}
_OFFSET_COMMIT_KEY = Schema(
    "OffsetCommitKey", (0, 1), None, (F("group", "string"), F("topic", "string"), F("partition", "int32"))
)
_OFFSET_COMMIT_VALUE = Schema(
    "OffsetCommitValue",
    (0, 4),
    4,
    (
        F("offset", "int64"),
        F("leaderEpoch", "int32", "3+", default=-1),
        F("metadata", "string"),
        F("commitTimestamp", "int64"),
        F("expireTimestamp", "int64", "1", default=-1),
    ),
)
_MEMBER_METADATA = (
    F("memberId", "string"),
    F("groupInstanceId", "string", "3+", nullable="3+"),
    F("clientId", "string"),
    F("clientHost", "string"),
    F("rebalanceTimeout", "int32", "1+", default=-1),
    F("sessionTimeout", "int32"),
    F("subscription", "bytes"),
    F("assignment", "bytes"),
)
_GROUP_METADATA_VALUE = Schema(
    "GroupMetadataValue",
    (0, 4),
    4,
    (
        F("protocolType", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("currentStateTimestamp", "int64", "2+", default=-1),
        F("members", "[]", fields=_MEMBER_METADATA),
    ),
)
_CLASSIC_MEMBER_METADATA = (
    F("SessionTimeoutMs", "int32"),
    F("SupportedProtocols", "[]", fields=(F("Name", "string"), F("Metadata", "bytes"))),
)
RECORD_TYPES[0] = RECORD_TYPES[1] = (_OFFSET_COMMIT_KEY, _OFFSET_COMMIT_VALUE)
RECORD_TYPES[2] = (Schema("GroupMetadataKey", (2, 2), None, (F("group", "string", "2"),)), _GROUP_METADATA_VALUE)
RECORD_TYPES[3] = (
    _group_key("ConsumerGroupMetadataKey", 3),
    Schema("ConsumerGroupMetadataValue", (0, 0), 0, (F("Epoch", "int32"),)),
)
RECORD_TYPES[4] = (
    _group_key("ConsumerGroupPartitionMetadataKey", 4),
    Schema(
        "ConsumerGroupPartitionMetadataValue",
        (0, 0),
        0,
        (
            F(
                "Topics",
                "[]",
                fields=(
                    F("TopicId", "uuid"),
                    F("TopicName", "string"),
                    F("NumPartitions", "int32"),
                    F("PartitionMetadata", "[]", fields=(F("Partition", "int32"), F("Racks", "[]string"))),
                ),
            ),
        ),
    ),
)
RECORD_TYPES[5] = (
    _group_key("ConsumerGroupMemberMetadataKey", 5, member=True),
    Schema(
        "ConsumerGroupMemberMetadataValue",
        (0, 0),
        0,
        (
            F("InstanceId", "string", nullable="0+"),
            F("RackId", "string", nullable="0+"),
            F("ClientId", "string"),
            F("ClientHost", "string"),
            F("SubscribedTopicNames", "[]string"),
            F("SubscribedTopicRegex", "string", nullable="0+"),
            F("RebalanceTimeoutMs", "int32", default=-1),
            F("ServerAssignor", "string", nullable="0+"),
            F("ClassicMemberMetadata", "struct", nullable="0+", tag=0, fields=_CLASSIC_MEMBER_METADATA),
        ),
    ),
)
RECORD_TYPES[6] = (
    _group_key("ConsumerGroupTargetAssignmentMetadataKey", 6),
    Schema("ConsumerGroupTargetAssignmentMetadataValue", (0, 0), 0, (F("AssignmentEpoch", "int32"),)),
)
RECORD_TYPES[7] = (
    _group_key("ConsumerGroupTargetAssignmentMemberKey", 7, member=True),
    Schema(
        "ConsumerGroupTargetAssignmentMemberValue", (0, 0), 0, (F("TopicPartitions", "[]", fields=_TOPIC_PARTITIONS),)
    ),
)
RECORD_TYPES[8] = (
    _group_key("ConsumerGroupCurrentMemberAssignmentKey", 8, member=True),
    Schema(
        "ConsumerGroupCurrentMemberAssignmentValue",
        (0, 0),
        0,
        (
            F("MemberEpoch", "int32"),
            F("PreviousMemberEpoch", "int32"),
            F("State", "int8"),
            F("AssignedPartitions", "[]", fields=_TOPIC_PARTITIONS),
            F("PartitionsPendingRevocation", "[]", fields=_TOPIC_PARTITIONS),
        ),
    ),
)
# Share groups (KIP-932): the key (group, member) is decoded, the value's version only.
for _type, _name, _member in (
    (9, "ShareGroupPartitionMetadataKey", False),
    (10, "ShareGroupMemberMetadataKey", True),
    (11, "ShareGroupMetadataKey", False),
    (12, "ShareGroupTargetAssignmentMetadataKey", False),
    (13, "ShareGroupTargetAssignmentMemberKey", True),
    (14, "ShareGroupCurrentMemberAssignmentKey", True),
    (15, "ShareGroupStatePartitionMetadataKey", False),
):
    RECORD_TYPES[_type] = (_group_key(_name, _type, _member), None)

#: The embedded consumer protocol (``ConsumerProtocol``) of a classic group's member subscription/assignment.
_TOPIC_PARTITION_NAMES = (F("Topic", "string"), F("Partitions", "[]int32"))
CONSUMER_PROTOCOL_SUBSCRIPTION = Schema(
    "ConsumerProtocolSubscription",
    (0, 3),
    None,
    (
        F("Topics", "[]string"),
        F("UserData", "bytes", nullable="0+"),
        F("OwnedPartitions", "[]", "1+", fields=_TOPIC_PARTITION_NAMES),
        F("GenerationId", "int32", "2+", default=-1),
        F("RackId", "string", "3+", nullable="3+"),
    ),
)
CONSUMER_PROTOCOL_ASSIGNMENT = Schema(
    "ConsumerProtocolAssignment",
    (0, 3),
    None,
    (F("AssignedPartitions", "[]", fields=_TOPIC_PARTITION_NAMES), F("UserData", "bytes", nullable="0+")),
)


class SchemaError(ValueError):
    """The bytes do not read as the schema at that version: ``field`` names where."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _in(version: int, span: tuple[int, int] | None) -> bool:
    """Whether ``span`` holds ``version``, as the generated code tests it: a span from the message's lowest
    version on is no test at all (so a version below it or above the highest reads every such field)."""
    if span is None:
        return False
    return (span[0] <= 0 or span[0] <= version) and version <= span[1]


class _Reader:
    __slots__ = ("data", "p", "end")

    def __init__(self, data: bytes, p: int, end: int) -> None:
        self.data, self.p, self.end = data, p, end

    def take(self, n: int, field: str) -> int:
        p = self.p
        if n < 0 or p + n > self.end:
            raise SchemaError(field, f"needs {n} bytes, {self.end - p} left")
        self.p = p + n
        return p

    def fixed(self, fmt: str, size: int, field: str) -> int:
        return int(struct.unpack_from(fmt, self.data, self.take(size, field))[0])

    def uvarint(self, field: str) -> int:
        value = shift = 0
        while True:
            b = self.data[self.take(1, field)]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise SchemaError(field, "varint is longer than 5 bytes")


_FIXED = {"int8": (">b", 1), "int16": (">h", 2), "int32": (">i", 4), "int64": (">q", 8)}


def _length(r: _Reader, flexible: bool, wide: bool, field: str) -> int:
    """A length prefix: -1 is null. Compact lengths are stored plus one (``readUnsignedVarint() - 1``)."""
    if flexible:
        return r.uvarint(field) - 1
    return r.fixed(">i", 4, field) if wide else r.fixed(">h", 2, field)


def _read_value(r: _Reader, f: Field, version: int, flexible: bool) -> Any:
    kind = f.kind
    if kind in _FIXED:
        fmt, size = _FIXED[kind]
        return r.fixed(fmt, size, f.name)
    if kind == "uuid":
        return bytes(r.data[r.take(16, f.name) : r.p])
    if kind in ("string", "bytes"):
        n = _length(r, flexible, kind == "bytes", f.name)
        if n < 0:
            if _in(version, f.nullable):
                return None
            raise SchemaError(f.name, f"non-nullable field {f.name} was serialized as null")
        raw = bytes(r.data[r.take(n, f.name) : r.p])
        # Java's new String(bytes, UTF_8) replaces malformed input; the raw bytes are kept apart by the caller
        return raw.decode("utf-8", "replace") if kind == "string" else raw
    if kind.startswith("[]"):
        n = _length(r, flexible, True, f.name)
        if n < 0:
            if _in(version, f.nullable):
                return None
            raise SchemaError(f.name, f"non-nullable field {f.name} was serialized as null")
        if n > r.end - r.p:  # every element takes at least a byte
            raise SchemaError(f.name, f"array of {n} elements overruns the message")
        element = Field(f.name, kind[2:]) if kind != "[]" else None
        if element is not None:
            return [_read_value(r, element, version, flexible) for _ in range(n)]
        return [_read_struct(r, f.fields, version, flexible) for _ in range(n)]
    if kind == "struct":
        if flexible and r.fixed(">b", 1, f.name) < 0:  # a nullable struct: int8 -1 is null
            return None
        return _read_struct(r, f.fields, version, flexible)
    raise AssertionError(kind)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in fields:
        if not _in(version, f.versions):
            continue
        if f.tag is not None:
            tagged[f.tag] = f
            out[f.name] = f.default
            continue
        out[f.name] = _read_value(r, f, version, flexible)
    if flexible:
        count = r.uvarint("_tagged_fields")
        for _ in range(count):
            tag = r.uvarint("_tagged_fields")
            size = r.uvarint("_tagged_fields")
            start = r.take(size, "_tagged_fields")
            known = tagged.get(tag)  # unknown tags are skipped, as Kafka keeps them only as raw bytes
            if known is not None:
                sub = _Reader(r.data, start, start + size)
                out[known.name] = _read_value(sub, known, version, flexible)
    return out


def read_message(schema: Schema, data: bytes, start: int, end: int, version: int) -> dict[str, Any]:
    """The fields of ``schema`` at ``version`` from ``data[start:end]`` (after the version prefix), by name;
    absent fields (not in this version) are left out. Raises :class:`SchemaError`.

    Like the generated ``read``, a version above the highest known one is not refused: it reads as the fields'
    version ranges say (KIP-915: newer values add only tagged fields, which are skipped)."""
    flexible = schema.flexible_from is not None and version >= schema.flexible_from
    return _read_struct(_Reader(data, start, end), schema.fields, version, flexible)


def uuid_text(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
