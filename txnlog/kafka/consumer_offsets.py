"""``__consumer_offsets`` records decoded as the group coordinator decodes them (``GroupCoordinatorRecordSerde``).

:func:`decode_records` takes the records of a partition (:data:`txnlog.kafka.consumer_offsets_scan.RECORDS_SCHEMA`)
and returns one row per record (:data:`DECODED_SCHEMA`): the record type (the key's version), the group (its
bytes kept as stored), the OffsetCommit key and value (v0-v4), the GroupMetadata value (v0-v4, with its
members) and the consumer-protocol (KIP-848) records' group, member and epoch; share-group records
(KIP-932) by key. A null value (a tombstone) is a row with ``is_tombstone``. A key or value that does not
read is a quarantine entry instead, as DumpLogSegments' ``OffsetsMessageParser`` skips it ("Error at offset N").
:func:`kafka_json` renders a decoded key or value as Kafka's generated JsonConverters do (what
``kafka-dump-log.sh --offsets-decoder`` prints). OffsetCommit records, the bulk, are read in
compiled code (:mod:`txnlog.kafka.consumer_offsets_commits`), the others one at a time.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.kafka import errors
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from txnlog.kafka.consumer_offsets_commits import commit_columns, decode_offset_commits, joined
from txnlog.kafka.consumer_offsets_scan import Walked, walk_commits
from txnlog.kafka.consumer_offsets_schema import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    RECORD_TYPES,
    Field,
    Schema,
    SchemaError,
    read_message,
    uuid_text,
)
from txnlog.kafka.errors import QuarantineEntry
from txnlog.kafka.record_batch import Buffer

#: Record types (the key's version; ``GroupCoordinatorRecordSerde.apiMessageKeyFor``).
OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2

_MEMBER = pa.struct(
    [
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("rebalance_timeout_ms", pa.int32()),
        ("session_timeout_ms", pa.int32()),
        ("subscription", pa.large_binary()),
        ("assignment", pa.large_binary()),
    ]
)
#: One row per decoded record, in log order; columns that do not apply to a record type are null.
DECODED_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("is_transactional", pa.bool_()),
        ("record_type", pa.int16()),
        ("group", pa.string()),  # as Kafka reads it (UTF-8, malformed bytes replaced)
        ("group_bytes", pa.large_binary()),  # exactly as stored
        ("member_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("is_tombstone", pa.bool_()),
        ("value_version", pa.int16()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
        ("protocol_type", pa.string()),
        ("generation", pa.int32()),
        ("protocol", pa.string()),
        ("leader", pa.string()),
        ("current_state_timestamp", pa.int64()),
        ("members", pa.list_(_MEMBER)),
        ("epoch", pa.int32()),  # group epoch (3), assignment epoch (6), member epoch (8)
        ("key_json", pa.string()),  # kafka_json of the key and value, when asked for
        ("value_json", pa.string()),
    ]
)
_EPOCH_FIELD = {3: "Epoch", 6: "AssignmentEpoch", 8: "MemberEpoch"}
_MEMBER_FIELDS = (
    ("member_id", "memberId"),
    ("group_instance_id", "groupInstanceId"),
    ("client_id", "clientId"),
    ("client_host", "clientHost"),
    ("rebalance_timeout_ms", "rebalanceTimeout"),
    ("session_timeout_ms", "sessionTimeout"),
    ("subscription", "subscription"),
    ("assignment", "assignment"),
)
_CARRIED = ("position", "offset", "timestamp", "producer_id", "producer_epoch", "is_transactional")


class _Bad(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail


def _version(data: bytes, what: str, reason: str) -> int:
    if len(data) < 2:
        raise _Bad(reason, f"Could not read version from {what}'s buffer.")
    return int.from_bytes(data[:2], "big", signed=True)


def _decode(key: bytes | None, value: bytes | None) -> tuple[int, dict[str, Any], int | None, dict[str, Any] | None]:
    """(record type, key fields, value version, value fields) as ``CoordinatorRecordSerde.deserialize``."""
    if key is None:
        raise _Bad(errors.BAD_OFFSETS_KEY, "message had a missing key")
    record_type = _version(key, "key", errors.BAD_OFFSETS_KEY)
    schemas = RECORD_TYPES.get(record_type)
    if schemas is None:
        raise _Bad(errors.UNKNOWN_RECORD_TYPE, f"Unknown record type {record_type}")
    key_schema, value_schema = schemas
    try:
        key_fields = read_message(key_schema, key, 2, len(key), record_type)
    except SchemaError as e:
        raise _Bad(errors.BAD_OFFSETS_KEY, f"{key_schema.name}.{e}") from None
    if value is None:
        return record_type, key_fields, None, None
    version = _version(value, "value", errors.BAD_OFFSETS_VALUE)
    if value_schema is None:
        return record_type, key_fields, version, {}
    try:
        value_fields = read_message(value_schema, value, 2, len(value), version)
    except SchemaError as e:
        raise _Bad(errors.BAD_OFFSETS_VALUE, f"{value_schema.name}.{e}") from None
    return record_type, key_fields, version, value_fields


def _row(record_type: int, key: bytes, k: dict[str, Any], version: int | None, v: dict[str, Any] | None) -> dict:
    glen = int.from_bytes(key[2:4], "big")  # every key's first field is the group, an int16-length string
    row: dict[str, Any] = {
        "record_type": record_type,
        "group": k.get("group", k.get("GroupId")),
        "group_bytes": key[4 : 4 + glen],
        "member_id": k.get("MemberId"),
        "topic": k.get("topic"),
        "partition": k.get("partition"),
        "is_tombstone": v is None,
        "value_version": version,
    }
    if v is None:
        return row
    if record_type in OFFSET_COMMIT_TYPES:
        row["committed_offset"] = v["offset"]
        row["leader_epoch"] = v.get("leaderEpoch", -1)
        row["metadata"] = v["metadata"]
        row["commit_timestamp"] = v["commitTimestamp"]
        row["expire_timestamp"] = v.get("expireTimestamp", -1)
    elif record_type == GROUP_METADATA_TYPE:
        row["protocol_type"] = v["protocolType"]
        row["generation"] = v["generation"]
        row["protocol"] = v["protocol"]
        row["leader"] = v["leader"]
        row["current_state_timestamp"] = v.get("currentStateTimestamp", -1)
        row["members"] = [
            {ours: m.get(theirs, -1 if ours == "rebalance_timeout_ms" else None) for ours, theirs in _MEMBER_FIELDS}
            for m in v["members"]
        ]
    elif record_type in _EPOCH_FIELD:
        row["epoch"] = v[_EPOCH_FIELD[record_type]]
    return row


def decode_records(
    records: pa.Table, *, file: str = "", with_json: bool = False
) -> tuple[pa.Table, list[QuarantineEntry]]:
    """Decode every record of ``records`` (:data:`~txnlog.kafka.consumer_offsets_scan.RECORDS_SCHEMA`): the
    decoded rows (:data:`DECODED_SCHEMA`) and a quarantine entry per record that does not decode (its batch's
    bytes, the offset in the detail). ``with_json`` fills ``key_json``/``value_json`` (:func:`kafka_json`).

    Well-formed OffsetCommit records, the bulk, are read in compiled code
    (:func:`txnlog.kafka.consumer_offsets_commits.decode_offset_commits`); the rest one at a time."""
    if with_json or records.num_rows == 0:
        return _decode_each(records, file, with_json)
    ok, cols = decode_offset_commits(records)
    return _merged(records, ok, cols, file)


def decode_segment(
    buf: Buffer, *, file: str = "", check_crc: bool = True, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> tuple[pa.Table, pa.Table, list[QuarantineEntry]]:
    """(decoded rows, markers, quarantine) of one ``__consumer_offsets`` segment: what
    :func:`~txnlog.kafka.consumer_offsets_scan.scan_consumer_offsets` and :func:`decode_records` give, the
    OffsetCommit records read in compiled code (:func:`~txnlog.kafka.consumer_offsets_scan.walk_commits` reads
    them in its walk; only the others' bytes are copied, and decoded one at a time)."""
    walked = walk_commits(buf, file=file, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes)
    kept, quarantine = kept_of(walked, file=file)
    return decode_kept([kept])[0], walked.markers, quarantine


@dataclass(frozen=True)
class Kept:
    """A walked segment's rows (:func:`kept_of`), no longer pointing into its bytes: the commits the walk read and
    the other records decoded one at a time, each with its row in the walk (log order)."""

    commits: np.ndarray  # the walk's rows of its well-formed OffsetCommits (consumer_offsets_commits.keep_commit)
    strings: np.ndarray  # their strings
    carried: dict[str, np.ndarray]  # per commit, the columns of _CARRIED
    rows: np.ndarray  # per commit, its row in the walk
    others: pa.Table | None  # the other records decoded (DECODED_SCHEMA and their row in ``_index``), None: none


def kept_of(walked: Walked, *, file: str = "") -> tuple[Kept, list[QuarantineEntry]]:
    """The rows of a walked segment apart from its bytes (call it while they are mapped), and its quarantine:
    the walk's, and the records that are not well-formed OffsetCommits and do not decode either."""
    ok = walked.ok
    rows = np.flatnonzero(ok)
    recs = walked.recs[rows]
    batch = recs[:, 0]
    carried = {"offset": recs[:, 1], "timestamp": recs[:, 2]}
    carried |= {name: walked.batches[name][batch] for name in _CARRIED if name not in carried}
    others: pa.Table | None = None
    undecoded: list[QuarantineEntry] = []
    if len(rows) < len(ok):
        rest = np.flatnonzero(~ok)
        others, undecoded = _decode_each(walked.raw_records(rest), file, False, rest)
    commits = walked.commits if others is None else walked.commits[rows]
    return Kept(commits, walked.strings, carried, rows, others), [*walked.quarantine, *undecoded]


def decode_kept(kept: list[Kept]) -> tuple[pa.Table, np.ndarray]:
    """The decoded rows (:data:`DECODED_SCHEMA`) of walked segments' rows (:func:`kept_of`), the segments' in
    their order, each one's in log order, and per row the index in ``kept`` of its segment: the commits' columns
    built at once for all."""
    m, strings = joined([k.commits for k in kept], [k.strings for k in kept])
    none = np.zeros(len(m), np.int64)
    cols = commit_columns(m, strings, strings, none, none)
    n = len(m)
    given = {**{name: np.concatenate([k.carried[name] for k in kept]) for name in _CARRIED}, **cols}
    columns = {
        name: given[name] if name in given else pa.nulls(n, typ)
        for name, typ in zip(DECODED_SCHEMA.names, DECODED_SCHEMA.types)
    }
    table = pa.table(columns, schema=DECODED_SCHEMA)
    of_kept = np.repeat(np.arange(len(kept), dtype=np.int64), [len(k.commits) for k in kept])
    others = [(i, k.others) for i, k in enumerate(kept) if k.others is not None and k.others.num_rows]
    if not others:
        return table, of_kept
    of_others = np.concatenate([np.full(t.num_rows, i, np.int64) for i, t in others])
    commits_at = (of_kept << 32) | np.concatenate([k.rows for k in kept])
    at = np.concatenate([commits_at, *((i << 32) | t["_index"].to_numpy() for i, t in others)])
    order = np.argsort(at, kind="stable")
    merged = pa.concat_tables([table, *(t.drop_columns(["_index"]) for _, t in others)])
    return merged.take(pa.array(order)), np.concatenate([of_kept, of_others])[order]


def _merged(
    records: pa.Table, ok: np.ndarray, cols: dict[str, pa.Array], file: str
) -> tuple[pa.Table, list[QuarantineEntry]]:
    """The decoded rows of ``records``: the columns ``cols`` of those read in compiled code (``ok``), the others
    decoded one at a time, in the records' order."""
    everyone = bool(ok.all())
    fast = records if everyone else records.filter(pa.array(ok))
    n = fast.num_rows
    columns = {
        name: cols[name] if name in cols else fast.column(name) if name in _CARRIED else pa.nulls(n, typ)
        for name, typ in zip(DECODED_SCHEMA.names, DECODED_SCHEMA.types)
    }
    table = pa.table(columns, schema=DECODED_SCHEMA)
    if everyone:
        return table, []
    rest = np.flatnonzero(~ok)
    slow, quarantine = _decode_each(records.take(pa.array(rest)), file, False, rest)
    order = np.concatenate([np.flatnonzero(ok), slow.column("_index").to_numpy()])
    merged = pa.concat_tables([table, slow.drop_columns(["_index"])])
    return merged.take(pa.array(np.argsort(order, kind="stable"))), quarantine


def _decode_each(
    records: pa.Table, file: str, with_json: bool, index: np.ndarray | None = None
) -> tuple[pa.Table, list[QuarantineEntry]]:
    """:func:`decode_records` one record at a time; with ``index``, each row's index in an ``_index`` column."""
    cols = {name: records.column(name).to_pylist() for name in (*_CARRIED, "batch_length", "key", "value")}
    rows: list[dict[str, Any]] = []
    quarantine: list[QuarantineEntry] = []
    for i, (key, value) in enumerate(zip(cols["key"], cols["value"])):
        try:
            record_type, k, version, v = _decode(key, value)
        except _Bad as bad:
            offset = cols["offset"][i]
            position = cols["position"][i]
            quarantine.append(
                QuarantineEntry(file, position, cols["batch_length"][i], bad.reason, f"offset {offset}: {bad.detail}")
            )
            continue
        assert key is not None
        row = _row(record_type, key, k, version, v)
        for name in _CARRIED:
            row[name] = cols[name][i]
        if index is not None:
            row["_index"] = int(index[i])
        if with_json:
            row["key_json"] = json.dumps(
                {"type": str(record_type), "data": kafka_json(RECORD_TYPES[record_type][0], k)}
            )
            value_schema = RECORD_TYPES[record_type][1]
            if v is not None and value_schema is not None:
                data = kafka_json(value_schema, v, consumer_protocol=record_type == GROUP_METADATA_TYPE)
                row["value_json"] = json.dumps({"version": str(version), "data": data})
        rows.append(row)
    schema = DECODED_SCHEMA if index is None else DECODED_SCHEMA.append(pa.field("_index", pa.int64()))
    return pa.Table.from_pylist(rows, schema=schema), quarantine


def _camel(name: str) -> str:
    """``FieldSpec.camelCaseName``: the JSON name of a field."""
    return name[:1].lower() + name[1:]


def _json_value(f: Field, value: Any) -> Any:
    if value is None:
        return None
    if f.kind == "bytes":
        return base64.b64encode(value).decode()
    if f.kind == "uuid":
        return uuid_text(value)
    if f.kind == "[]uuid":
        return [uuid_text(x) for x in value]
    if f.kind == "[]" or f.kind == "struct":
        items = value if f.kind == "[]" else [value]
        out = [_json_struct(f.fields, item) for item in items]
        return out if f.kind == "[]" else out[0]
    return value


def _json_struct(fields: tuple[Field, ...], message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.name not in message:
            continue  # not in this version
        value = message[f.name]
        if f.tag is not None and value == f.default:
            continue  # a tagged field is written only when it is not its default
        out[_camel(f.name)] = _json_value(f, value)
    return out


def _embedded(schema: Schema, raw: bytes) -> Any:
    """A member's subscription/assignment read as ``ConsumerProtocol`` (version-prefixed), as
    ``OffsetsMessageParser.prepareGroupMetadataValue`` does; the bytes (base64) where they do not read."""
    try:
        version = int.from_bytes(raw[:2], "big", signed=True)
        if len(raw) < 2:
            raise SchemaError(schema.name, "no version")
        return _json_struct(schema.fields, read_message(schema, raw, 2, len(raw), version))
    except SchemaError:
        return base64.b64encode(raw).decode()


def kafka_json(schema: Schema, message: dict[str, Any], *, consumer_protocol: bool = False) -> dict[str, Any]:
    """``message`` (a key's or value's fields) as Kafka's JsonConverter for ``schema`` writes it. With
    ``consumer_protocol``, a GroupMetadataValue of protocol type "consumer" has its members' subscription and
    assignment decoded as DumpLogSegments shows them."""
    out = _json_struct(schema.fields, message)
    if consumer_protocol and message.get("protocolType") == "consumer":
        for member, raw in zip(out["members"], message["members"]):
            member["subscription"] = _embedded(CONSUMER_PROTOCOL_SUBSCRIPTION, raw["subscription"])
            member["assignment"] = _embedded(CONSUMER_PROTOCOL_ASSIGNMENT, raw["assignment"])
    return out
