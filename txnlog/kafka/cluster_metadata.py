"""The KRaft metadata log (``__cluster_metadata-0``): its records, one Arrow row each.

A KRaft broker keeps the cluster's metadata as a log of its own, in ordinary v2 record batches (segments
``<offset>.log``, snapshots ``<offset>-<epoch>.checkpoint`` of the same format). Each data record's value is
framed by ``AbstractApiMessageSerde`` (``MetadataRecordSerde``)::

    value => frameVersion:uvarint(=1) apiKey:uvarint version:uvarint <the record, flexible encoding>

and the record is the message of ``metadata/src/main/resources/common/metadata/<Name>.json`` for that api key,
in the flexible encoding of ``MessageDataGenerator``: int32 big-endian, a uuid as 16 bytes, a string as
uvarint length+1 and UTF-8, an array as uvarint count+1 (0: null), and a tagged-field section at the end
(uvarint count, then uvarint tag, uvarint size, data). Four record types are decoded whole, the ones that say
which topics and partitions exist and who leads them:

* TopicRecord (2) v0: Name, TopicId;
* PartitionRecord (3) v0-2: PartitionId, TopicId, Replicas, Isr, RemovingReplicas, AddingReplicas, Leader,
  LeaderEpoch, PartitionEpoch, Directories (v1+); tags 0 LeaderRecoveryState, 1 EligibleLeaderReplicas,
  2 LastKnownElr (v2+);
* PartitionChangeRecord (5) v0-2: PartitionId, TopicId; tags 0 Isr, 1 Leader (-2: unchanged), 2 Replicas,
  3 RemovingReplicas, 4 AddingReplicas, 5 LeaderRecoveryState, 8 Directories (v1+), 6/7 the ELRs (v2+);
* RemoveTopicRecord (9) v0: TopicId.

Every other record is a row with its type and version only. A record Kafka's reader would refuse (frame
version other than 1, a version outside the schema's, a field running past the value, bytes after it) is a
row with ``problem`` set and no fields; a damaged batch is a quarantine entry of the batch walk
(:func:`txnlog.kafka.record_batch.scan_segment`). Topic ids are written as Kafka's ``Uuid.toString``
(URL-safe base64, no padding), as ``kafka-dump-log.sh --cluster-metadata-decoder`` prints them.

Pure: bytes in, an Arrow table and quarantine entries out; the replay into the cluster's state is
:mod:`txnlog.broker.cluster_image`.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, budget_detail, decompress
from txnlog.kafka.errors import BAD_RECORD, DecodeError, QuarantineEntry
from txnlog.kafka.record_batch import Buffer, as_uint8, scan_segment
from txnlog.kafka.records import RECORD_OK, read_record
from txnlog.kafka.wire import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, Compression

__all__ = [
    "METADATA_COLUMNS",
    "RECORD_TYPES",
    "MetadataScan",
    "decode_metadata_value",
    "scan_metadata_log",
]

_NAMES = (
    "RegisterBroker UnregisterBroker Topic Partition Config PartitionChange - FenceBroker UnfenceBroker RemoveTopic "
    "DelegationToken UserScramCredential FeatureLevel - ClientQuota ProducerIds - BrokerRegistrationChange "
    "AccessControlEntry RemoveAccessControlEntry NoOp ZkMigrationState RemoveUserScramCredential BeginTransaction "
    "EndTransaction AbortTransaction RemoveDelegationToken RegisterController"
).split()
#: api key -> ``MetadataRecordType`` name (``TopicRecord`` -> ``TOPIC_RECORD``), as the dump prints it
RECORD_TYPES: dict[int, str] = {
    key: re.sub(r"(?<!^)(?=[A-Z])", "_", name + "Record").upper() for key, name in enumerate(_NAMES) if name != "-"
}
TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD = 2, 3, 5, 9
#: the versions of each fully decoded type (their schemas' ``validVersions``)
_VERSIONS = {TOPIC_RECORD: 0, PARTITION_RECORD: 2, PARTITION_CHANGE_RECORD: 2, REMOVE_TOPIC_RECORD: 0}
#: ``PartitionChangeRecord.Leader``'s default: the leader did not change
NO_LEADER_CHANGE = -2

_INTS = pa.list_(pa.int32())
#: one row per metadata record, in log order; the fields of the types decoded whole, null elsewhere
METADATA_COLUMNS = pa.schema(
    [
        ("file", pa.string()),
        ("batch_position", pa.int64()),
        ("offset", pa.int64()),
        ("record_type", pa.string()),  # MetadataRecordType's name; null when the frame is unreadable
        ("api_key", pa.int16()),
        ("version", pa.int16()),
        ("topic", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("replicas", _INTS),
        ("isr", _INTS),
        ("removing_replicas", _INTS),
        ("adding_replicas", _INTS),
        ("leader", pa.int32()),  # PartitionChangeRecord: -2 when unchanged, as stored
        ("leader_epoch", pa.int32()),
        ("partition_epoch", pa.int32()),
        ("leader_recovery_state", pa.int8()),
        ("directories", pa.list_(pa.string())),
        ("eligible_leader_replicas", _INTS),
        ("last_known_elr", _INTS),
        ("problem", pa.string()),  # why the record was not read, as Kafka's reader would refuse it
    ]
)


class _Bad(Exception):
    """A value Kafka's reader refuses (MetadataParseException)."""


class _Reader:
    """The flexible encoding's primitives over one value."""

    def __init__(self, data: bytes) -> None:
        self.data, self.p = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.data):
            raise _Bad(f"a field runs past the value's end (byte {self.p} of {len(self.data)})")
        out = self.data[self.p : self.p + n]
        self.p += n
        return out

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise _Bad("an unsigned varint longer than 5 bytes")

    def int32(self) -> int:
        return int.from_bytes(self.take(4), "big", signed=True)

    def int8(self) -> int:
        return int.from_bytes(self.take(1), "big", signed=True)

    def uuid(self) -> str:
        return base64.urlsafe_b64encode(self.take(16)).decode().rstrip("=")

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise _Bad("a non-nullable string is null")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Bad("a string is not UTF-8") from e

    def int32s(self, *, nullable: bool = False) -> list[int] | None:
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise _Bad("a non-nullable array is null")
        raw = self.take(4 * n)
        return [int(x) for x in np.frombuffer(raw, ">i4")]

    def uuids(self, *, nullable: bool = False) -> list[str] | None:
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise _Bad("a non-nullable array is null")
        return [self.uuid() for _ in range(n)]

    def tags(self) -> dict[int, _Reader]:
        """The tagged-field section: tag -> a reader over its data."""
        out: dict[int, _Reader] = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = _Reader(self.take(size))
        return out


def _tagged(tags: dict[int, _Reader], tag: int, read: str, **kw: bool) -> object:
    """A known tag's value (None when absent); its data must be exactly the field."""
    r = tags.get(tag)
    if r is None:
        return None
    value = getattr(r, read)(**kw)
    if r.p != len(r.data):
        raise _Bad(f"tag {tag} holds {len(r.data)} bytes, its field {r.p}")
    return value


def _fields(api_key: int, version: int, r: _Reader) -> dict[str, object]:
    """The fields of one of the four types decoded whole (module doc)."""
    if api_key == TOPIC_RECORD:
        out: dict[str, object] = {"topic": r.string(), "topic_id": r.uuid()}
        r.tags()
        return out
    if api_key == REMOVE_TOPIC_RECORD:
        out = {"topic_id": r.uuid()}
        r.tags()
        return out
    out = {"partition": r.int32(), "topic_id": r.uuid()}
    if api_key == PARTITION_RECORD:
        for name in ("replicas", "isr", "removing_replicas", "adding_replicas"):
            out[name] = r.int32s()
        out["leader"], out["leader_epoch"], out["partition_epoch"] = r.int32(), r.int32(), r.int32()
        if version >= 1:
            out["directories"] = r.uuids()
        tags = r.tags()
        out["leader_recovery_state"] = _tagged(tags, 0, "int8") or 0
        if version >= 2:
            out["eligible_leader_replicas"] = _tagged(tags, 1, "int32s", nullable=True)
            out["last_known_elr"] = _tagged(tags, 2, "int32s", nullable=True)
        return out
    tags = r.tags()  # PartitionChangeRecord
    for tag, name in enumerate(("isr", "leader", "replicas", "removing_replicas", "adding_replicas")):
        out[name] = _tagged(tags, tag, "int32") if name == "leader" else _tagged(tags, tag, "int32s", nullable=True)
    if out["leader"] is None:
        out["leader"] = NO_LEADER_CHANGE
    lrs = _tagged(tags, 5, "int8")
    out["leader_recovery_state"] = -1 if lrs is None else lrs
    if version >= 1:
        out["directories"] = _tagged(tags, 8, "uuids", nullable=True)
    if version >= 2:
        out["eligible_leader_replicas"] = _tagged(tags, 6, "int32s", nullable=True)
        out["last_known_elr"] = _tagged(tags, 7, "int32s", nullable=True)
    return out


def decode_metadata_value(value: bytes) -> dict[str, object]:
    """One record's value -> its row's columns (``record_type``, ``api_key``, ``version``, the fields of the
    types decoded whole, or ``problem``), as ``MetadataRecordSerde.read`` reads it."""
    r = _Reader(value)
    row: dict[str, object] = {}
    try:
        frame = r.uvarint()
        if frame != 1:
            raise _Bad(f"frame version {frame} (only frame version 1 is read, as AbstractApiMessageSerde reads)")
        api_key, version = r.uvarint(), r.uvarint()
        row.update(api_key=api_key, version=version, record_type=RECORD_TYPES.get(api_key))
        if api_key not in RECORD_TYPES:
            raise _Bad(f"unknown metadata record type {api_key}")
        if api_key in _VERSIONS:
            if version > _VERSIONS[api_key]:
                raise _Bad(f"{RECORD_TYPES[api_key]} version {version} (this reader knows 0-{_VERSIONS[api_key]})")
            row.update(_fields(api_key, version, r))
            if r.p != len(value):
                raise _Bad(f"{len(value) - r.p} byte(s) after the {RECORD_TYPES[api_key]}")
    except _Bad as e:
        return {k: row[k] for k in ("api_key", "version", "record_type") if k in row} | {"problem": str(e)}
    return row


@dataclass(frozen=True)
class MetadataScan:
    """What :func:`scan_metadata_log` read from one file: one row per record, and the unreadable byte ranges."""

    records: pa.Table
    quarantine: list[QuarantineEntry]


def scan_metadata_log(
    buf: Buffer,
    *,
    file: str = "",
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> MetadataScan:
    """Every data record of a metadata log segment or snapshot held in memory (module doc). Never raises on
    bad input: a damaged batch is quarantined by the batch walk, a record whose frame is broken is quarantined
    here, a value Kafka would refuse is a row with ``problem``."""
    arr = as_uint8(buf)
    seg = scan_segment(arr, file=file, check_crc=check_crc, blocks=False)
    b = seg.batches
    quarantine = list(seg.quarantine)
    rows: list[dict[str, object]] = []
    budget = max_decompressed_bytes
    for i in np.flatnonzero(~b["is_control"]):
        position, base = int(b["position"][i]), int(b["base_offset"][i])
        end = position + LOG_OVERHEAD + int(b["batch_length"][i])
        body = arr[position + RECORD_BATCH_OVERHEAD : end]
        codec = int(b["compression"][i])
        if codec != Compression.NONE:
            try:
                plain = decompress(codec, body, file=file, position=position, limit=budget)
            except DecodeError as e:
                quarantine.append(
                    QuarantineEntry(file, position, end - position, e.reason, budget_detail(e, max_decompressed_bytes))
                )
                continue
            budget -= len(plain)
            body = as_uint8(plain)
        p = 0
        for _ in range(int(b["record_count"][i])):
            status, q, _ts, delta, _ks, _kl, vs, vl, _hs, _hc = read_record(body, p, body.size)
            if status != RECORD_OK:
                quarantine.append(
                    QuarantineEntry(file, position, end - position, BAD_RECORD, f"a record after offset {base}")
                )
                break
            value = bytes(body[vs : vs + vl]) if vl >= 0 else b""
            rows.append({"file": file, "batch_position": position, "offset": base + delta} | _value_row(value, vl))
            p = q
    return MetadataScan(pa.Table.from_pylist(rows, schema=METADATA_COLUMNS), quarantine)


def _value_row(value: bytes, length: int) -> dict[str, object]:
    if length < 0:
        return {"problem": "a null value (a metadata record always has one)"}
    return decode_metadata_value(value)
