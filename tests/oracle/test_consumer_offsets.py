"""``__consumer_offsets`` decoded as Kafka decodes it: record for record against ``kafka-dump-log.sh
--offsets-decoder`` (the oracle's DumpLogSegments with the group coordinator's serde and JsonConverters), on a
partition of every key and value version our writer produces, compressed batches included, and on bad
records, which Kafka skips ("Error at offset N", "Unknown record type") and we quarantine."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from txnlog.brokerlog.consumer_offsets import ODD_GROUPS, OffsetsPartitionWriter, write_every_kind
from txnlog.brokerlog.consumer_offsets_encode import (
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from txnlog.kafka import errors
from txnlog.kafka.consumer_offsets import decode_records, decode_segment
from txnlog.kafka.consumer_offsets_scan import scan_consumer_offsets_file
from txnlog.kafka.wire import Compression

_RECORD = re.compile(
    r"^\| offset: (\d+) .*? headerKeys: \[[^\]]*\] (?:key: (.*?)(?: payload: (.*))?|endTxnMarker: .*)$"
)


def kafka_records(oracle, segment: Path) -> dict[int, tuple[str, str | None]]:
    """offset -> (key text, payload text or None) of every data record the oracle's dump prints."""
    out = {}
    for line in oracle.dump(segment, options=("--offsets-decoder", "--deep-iteration")).splitlines():
        m = _RECORD.match(line)
        if m and m[2] is not None:
            out[int(m[1])] = (m[2], m[3])
    return out


def compare(oracle, segment: Path) -> tuple[list[str], dict[str, Any]]:
    """The differences between Kafka's dump and ours, record by record, and what was compared."""
    records, markers, damage = scan_consumer_offsets_file(segment)
    decoded, quarantine = decode_records(records, file=str(segment), with_json=True)
    ours = {r["offset"]: r for r in decoded.to_pylist()}
    quarantined = {int(e.detail.split(":")[0].split()[1]): e for e in quarantine}
    kafka = kafka_records(oracle, segment)
    diffs = [f"segment damage: {damage}"] if damage else []
    for offset, (key, payload) in sorted(kafka.items()):
        if not key.startswith("{"):  # Kafka skipped it: "Error at offset N ..." / "Unknown record type N ..."
            if offset not in quarantined:
                diffs.append(f"{offset}: Kafka skipped it ({key}), we decoded it")
            continue
        row = ours.get(offset)
        if row is None:
            diffs.append(f"{offset}: Kafka decoded {key}, we quarantined {quarantined.get(offset)}")
            continue
        if json.loads(key) != json.loads(row["key_json"]):
            diffs.append(f"{offset}: key {key} != ours {row['key_json']}")
        theirs = None if payload == "<DELETE>" else json.loads(payload)
        mine = None if row["value_json"] is None else json.loads(row["value_json"])
        if theirs != mine or (payload == "<DELETE>") != row["is_tombstone"]:
            diffs.append(f"{offset}: value {payload} != ours {row['value_json']}")
    # the compiled OffsetCommit reader and the general one give the same rows and quarantine
    fast, fast_quarantine = decode_records(records, file=str(segment))
    without_json = ["key_json", "value_json"]
    if not fast.drop_columns(without_json).equals(decoded.drop_columns(without_json)) or fast_quarantine != quarantine:
        diffs.append("the compiled reader's rows differ from the general reader's")
    # the job's read (each record parsed once in the segment's walk) gives them too, with the segment's markers
    one, one_markers, one_quarantine = decode_segment(segment.read_bytes(), file=str(segment))
    if not one.drop_columns(without_json).equals(decoded.drop_columns(without_json)):
        diffs.append("the one-pass read's rows differ from the general reader's")
    if one_quarantine != [*damage, *quarantine] or not one_markers.equals(markers):
        diffs.append("the one-pass read's quarantine or markers differ")
    extra = (set(ours) | set(quarantined)) - set(kafka)
    if extra:
        diffs.append(f"records Kafka does not print: {sorted(extra)}")
    seen = {"rows": decoded, "quarantine": quarantine, "markers": markers, "kafka": kafka}
    return diffs, seen


def test_every_version_and_codec_equals_kafkas_decoder(oracle, tmp_path: Path) -> None:
    w = write_every_kind(tmp_path)
    diffs, seen = compare(oracle, w.log.dir / "00000000000000000000.log")
    assert diffs == []
    rows = seen["rows"].to_pylist()
    assert len(rows) == len(seen["kafka"]) == sum(len(b.records) for b in w.written)
    assert seen["quarantine"] == []
    # what was compared: every record type the group coordinator writes for classic and consumer groups, every
    # OffsetCommit / GroupMetadata value version, tombstones, every codec, transactional batches and markers
    versions = {(r["record_type"], r["value_version"]) for r in rows}
    assert {(t, v) for t, v in versions if t in (0, 1)} >= {(0, 0), (1, 1), (0, 2), (1, 3), (0, 4), (1, None)}
    assert {v for t, v in versions if t == 2} == {0, 1, 2, 3, 4, None}
    assert {t for t, _ in versions} == set(range(9))
    assert {b.compression for b in w.written} == set(Compression)
    assert sum(r["is_tombstone"] for r in rows) == 3
    assert {r["producer_id"] for r in rows if r["is_transactional"]} == {4000, 4001, 4002}
    assert seen["markers"].column("control_type").to_pylist() == [1, 0]
    # group names with any characters come back byte for byte
    by_group = {r["group_bytes"]: r["group"] for r in rows}
    for group in ODD_GROUPS:
        assert by_group[group.encode()] == group
    members = next(r["members"] for r in rows if r["record_type"] == 2 and r["value_version"] == 3 and r["members"])
    assert [(m["member_id"], m["group_instance_id"], m["client_host"]) for m in members] == [
        ("consumer-1-5f1c", "instance-1", "/10.0.0.1"),
        ("consumer-2-5f1c", None, "/10.0.0.2"),
    ]


def test_bad_records_are_quarantined_where_kafka_skips_them(oracle, tmp_path: Path) -> None:
    w = OffsetsPartitionWriter(tmp_path)
    good = offset_commit_value(7, commit_timestamp=1)
    bad: list[tuple[bytes, bytes | None]] = [
        (struct.pack(">h", 99) + b"\x00\x01g", good),  # a record type the coordinator does not know
        (offset_commit_key("g", "t", 0), struct.pack(">h", 5) + good[2:]),  # v5: read as flexible, so broken
        (offset_commit_key("g", "t", 0), good[:9]),  # the value ends inside its metadata
        (offset_commit_key("g", "t", 0)[:7], good),  # the key ends inside its topic
        (offset_commit_key("g", "t", 0), b"\x00"),  # no room for the value's version
        (group_metadata_key("g"), struct.pack(">hh", 3, -1) + b"\x00" * 30),  # a null non-nullable protocolType
    ]
    w.append([(offset_commit_key("before", "t", 0), good)])
    w.append(bad)
    # group bytes that are not UTF-8: Kafka shows them replaced; the row keeps them as stored
    w.append([(struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0), good)])
    w.append([(offset_commit_key("after", "t", 0), good)], compression=Compression.ZSTD)
    w.append(
        [
            (
                group_metadata_key("g"),
                group_metadata_value(version=9, protocol_type="x", generation=0, protocol=None, leader=None),
            )
        ]
    )
    w.close()
    diffs, seen = compare(oracle, w.log.dir / "00000000000000000000.log")
    assert diffs == []
    reasons = [e.reason for e in seen["quarantine"]]
    assert reasons == [
        errors.UNKNOWN_RECORD_TYPE,
        *[errors.BAD_OFFSETS_VALUE] * 2,
        errors.BAD_OFFSETS_KEY,
        *[errors.BAD_OFFSETS_VALUE] * 2,
    ]
    rows = seen["rows"].to_pylist()
    assert [r["group_bytes"] for r in rows] == [b"before", b"\xff\xfe", b"after", b"g"]
    assert rows[1]["group"] == "\ufffd\ufffd"
    # a value version above the highest known one is read as its fields' versions say, as Kafka reads it
    # (no version check in the generated GroupMetadataValue.read; KIP-915), not quarantined
    assert (rows[3]["value_version"], rows[3]["protocol_type"], rows[3]["current_state_timestamp"]) == (9, "x", -1)


def test_a_null_key_is_quarantined(tmp_path: Path) -> None:
    """Kafka's dump stops on it (``OffsetsMessageParser``: "message had a missing key"); we quarantine it."""
    w = OffsetsPartitionWriter(tmp_path)
    w.append([(None, b"\x00\x03"), (offset_commit_key("g", "t", 0), offset_commit_value(1))])  # type: ignore[list-item]
    w.close()
    records, _, _ = scan_consumer_offsets_file(w.log.dir / "00000000000000000000.log")
    decoded, quarantine = decode_records(records)
    assert [(e.reason, e.detail) for e in quarantine] == [
        (errors.BAD_OFFSETS_KEY, "offset 0: message had a missing key")
    ]
    assert decoded.column("offset").to_pylist() == [1]
