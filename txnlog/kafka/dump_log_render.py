"""A renderer of ``kafka-dump-log.sh`` text: :func:`render_dump` prints a segment or snapshot file the way
each Kafka version's ``DumpLogSegments`` does, so tests can check that the text path and the binary path give
the same rows. A test helper: a plain Python loop per record is fine here (never on the reading path).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterable
from typing import Literal

import numpy as np

from txnlog.kafka.compression import decompress
from txnlog.kafka.crc import crc32c
from txnlog.kafka.dump_log_text import STATE_NAMES
from txnlog.kafka.producer_snapshot import decode_producer_snapshot
from txnlog.kafka.records import RECORD_OK, read_header, read_record
from txnlog.kafka.txn_state import decode_transaction_log_key, decode_transaction_log_value

__all__ = ["JAVA_VERSIONS", "JSON_DECODER_VERSIONS", "KAFKA_CHECKED_VERSIONS", "Version", "render_dump"]

Version = Literal["2.7", "2.8", "3.0", "3.x", "4.0", "4.x", "trunk"]
#: versions whose --transaction-log-decoder prints JSON (TransactionCoordinatorRecordSerde and the
#: generated converters: KAFKA-18207 in the Scala tool of 4.0, kept by the Java port)
JSON_DECODER_VERSIONS = ("4.0", "4.x", "trunk")
#: versions printed by the Java port (tools/src/main/java/org/apache/kafka/tools/DumpLogSegments.java,
#: KAFKA-14579): snapshot lines without the Scala trailing space, legacy "crc: N" without the stray "}"
JAVA_VERSIONS = ("4.x", "trunk")
#: versions checked byte for byte against Kafka's own DumpLogSegments (tests/oracle/test_dump_log.py): deep
#: iteration stops the tool at a record it cannot read (the exception ends the run), and a legacy (magic 0/1)
#: entry prints its records with their key and value sizes, a compressed one each inner message
KAFKA_CHECKED_VERSIONS = ("4.0",)
#: ControlRecordType names (``controlType: NAME(id)`` for control records other than ABORT/COMMIT)
_CONTROL_NAMES = {2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_TS_NAMES = {0: "CreateTime", 1: "LogAppendTime"}
_CODEC_NAMES = ["none", "gzip", "snappy", "lz4", "zstd"]


def _iter_v2_records(payload: bytes, count: int):
    """(ts_delta, offset_delta, key, value, header_keys) of each record of a v2 batch's (uncompressed) records.

    Stops at the first record whose frame is broken, as the real tool's iteration stops at
    DefaultRecord.readFrom's exception: the records before it stand.
    """
    # Lazy in this module: the numba decoders load only when a dump is rendered, not when its text is parsed.
    buf = np.frombuffer(payload, np.uint8)
    n = buf.size
    p = 0
    for _ in range(count):
        if p >= n:
            return
        frame, p, ts_delta, od, key_start, klen, value_start, vlen, q, header_count = read_record(buf, p, n)
        if frame != RECORD_OK:
            return
        key = None if klen < 0 else payload[key_start : key_start + klen]
        value = None if vlen < 0 else payload[value_start : value_start + vlen]
        hkeys = []
        for _h in range(header_count):
            q, hk_start, hk_len, _hv_start, _hv_len = read_header(buf, q, n)
            hkeys.append(payload[hk_start : hk_start + hk_len].decode("utf-8", "replace"))
        yield ts_delta, od, key, value, hkeys


def _opt_long(value: int | None, version: Version) -> str:
    if version in ("2.7", "2.8", "3.0"):
        return "None" if value is None else f"Some({value})"
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _java_int(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()`` (Java ``String.hashCode``
    over UTF-16 code units), in 32-bit arithmetic."""
    h = 0
    units = topic.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return _java_int(31 * (31 + partition) + h)


def _table_size_for(capacity: int) -> int:
    """Scala 2.13 ``mutable.HashSet.tableSizeFor``."""
    return min(1 << (max(capacity - 1, 4).bit_length()), 1 << 30)


def _scala_hash_set_order(partitions: Iterable[tuple[str, Iterable[int]]]) -> list[str]:
    """The ``topic-partition`` strings in the order ``TransactionLog.formatRecordKeyAndValue`` prints them:
    ``readTxnRecordValue`` adds each topic's partitions (an immutable ``Set``) to a Scala 2.13
    ``mutable.HashSet`` (16 buckets, load factor 0.75), whose iterator walks the buckets in index order,
    each bucket's nodes in ascending improved hash (``h ^ (h >>> 16)``), insertion order on a tie.
    Kafka's 2.13 build (the oracle's; the 2.12 builds of 3.x iterate another way)."""
    length = 16
    entries: list[tuple[int, str]] = []
    seen: set[tuple[str, int]] = set()
    for topic, ids in partitions:
        members = list(dict.fromkeys(ids))
        # addAll: sizeHint(size + n), then add one by one (Set1..Set4) or without a threshold check (a HashSet)
        length = max(length, _table_size_for(int((len(seen) + len(members) + 1) / 0.75)))
        for pid in members:
            if (topic, pid) in seen:
                continue
            if len(members) <= 4 and len(seen) + 1 >= int(length * 0.75):
                length *= 2
            seen.add((topic, pid))
            h = _topic_partition_hash(topic, pid)
            entries.append((_java_int(h ^ ((h & 0xFFFFFFFF) >> 16)), f"{topic}-{pid}"))
    order = sorted(range(len(entries)), key=lambda i: (entries[i][0] & (length - 1), entries[i][0], i))
    return [entries[i][1] for i in order]


def _txn_scala(key: bytes | None, value: bytes | None, set_order: bool = False) -> str:
    tid = decode_transaction_log_key(key)
    v = decode_transaction_log_value(value)
    if v is None:
        return f" key: transaction_metadata::transactionalId={tid} payload: <DELETE>"
    parts = ",".join(_scala_hash_set_order(v.effective_partitions) if set_order else v.topic_partitions())
    return (
        f" key: transaction_metadata::transactionalId={tid} payload: producerId:{v.producer_id},"
        f"producerEpoch:{v.producer_epoch},state={STATE_NAMES[int(v.state)]},partitions=[{parts}],"
        f"txnLastUpdateTimestamp={v.last_update_timestamp_ms},txnTimeoutMs={v.transaction_timeout_ms}"
    )


def _txn_json(key: bytes | None, value: bytes | None, status_names: bool = False) -> str:
    """The JSON form: ``{"type":"<key type>","data":{..}}`` / ``{"version":"<v>","data":{..}}``.

    Fields in TransactionLogValue.json's order, tagged fields only when not at their default
    (the generated JsonConverter). ``status_names``: KAFKA-20712 prints ``transactionStatus`` as the
    state's name (``"CompleteCommit"``) instead of its id.
    """
    tid = decode_transaction_log_key(key)
    k = json.dumps({"type": "0", "data": {"transactionalId": tid}}, separators=(",", ":"))
    v = decode_transaction_log_value(value)
    if v is None:
        return f" key: {k} payload: <DELETE>"
    d: dict[str, object] = {"producerId": v.producer_id}
    if v.version >= 1 and v.previous_producer_id != -1:
        d["previousProducerId"] = v.previous_producer_id
    if v.version >= 1 and v.next_producer_id != -1:
        d["nextProducerId"] = v.next_producer_id
    d["producerEpoch"] = v.producer_epoch
    if v.version >= 1 and v.next_producer_epoch != -1:
        d["nextProducerEpoch"] = v.next_producer_epoch
    d["transactionTimeoutMs"] = v.transaction_timeout_ms
    d["transactionStatus"] = STATE_NAMES[int(v.state)] if status_names else int(v.state)
    d["transactionPartitions"] = (
        None if v.partitions is None else [{"topic": t, "partitionIds": list(ps)} for t, ps in v.partitions]
    )
    d["transactionLastUpdateTimestampMs"] = v.last_update_timestamp_ms
    d["transactionStartTimestampMs"] = v.start_timestamp_ms
    if v.version >= 1 and v.client_transaction_version != 0:
        d["clientTransactionVersion"] = v.client_transaction_version
    payload = json.dumps({"version": str(v.version), "data": d}, separators=(",", ":"))
    return f" key: {k} payload: {payload}"


def _batch_line(version: Version, h: dict[str, int], crc_valid: bool) -> str:
    codec = _CODEC_NAMES[h["codec"]] if h["codec"] < len(_CODEC_NAMES) else str(h["codec"])
    if version in ("2.7", "2.8"):
        codec = codec.upper()
    dh = ""
    if version in ("3.x", "4.0", "4.x", "trunk"):
        dh = f" deleteHorizonMs: {_opt_long(h['base_timestamp'] if h['attrs'] & 0x40 else None, version)}"
    last_seq = -1 if h["base_sequence"] < 0 else (h["base_sequence"] + h["last_offset_delta"]) & 0x7FFFFFFF
    magic = h["magic"]  # the byte as read, a damaged one too (DumpLogSegments prints batch.magic in every version)
    return (
        f"baseOffset: {h['base_offset']} lastOffset: {h['base_offset'] + h['last_offset_delta']} "
        f"count: {h['count']} baseSequence: {h['base_sequence']} lastSequence: {last_seq} "
        f"producerId: {h['producer_id']} producerEpoch: {h['producer_epoch']} "
        f"partitionLeaderEpoch: {h['ple']} isTransactional: {str(bool(h['attrs'] & 0x10)).lower()} "
        f"isControl: {str(bool(h['attrs'] & 0x20)).lower()}{dh} position: {h['position']} "
        f"{_TS_NAMES[(h['attrs'] >> 3) & 1]}: {h['max_timestamp']} size: {h['size']} magic: {magic} "
        f"compresscodec: {codec} crc: {h['crc']} isvalid: {str(crc_valid).lower()}"
    )


_V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def _render_log(
    buf: bytes,
    version: Version,
    deep: bool,
    txn_decoder: bool,
    print_data: bool,
    is_txn_state: bool,
    name: str,
    set_order: bool = False,
) -> list[str]:
    out: list[str] = []
    pos = 0
    n = len(buf)
    while pos + 17 <= n:
        base_offset, size_field = struct.unpack_from(">qi", buf, pos)
        if size_field < 14 and version in KAFKA_CHECKED_VERSIONS:
            return out  # FileLogInputStream.nextBatch: CorruptRecordException, the tool stops
        if size_field < 14 or pos + 12 + size_field > n:
            break
        magic = buf[pos + 16]
        total = 12 + size_field
        if magic >= 2:
            (bo, blen, ple, _m, crc, attrs, lod, base_ts, max_ts, pid, pe, bseq, count) = _V2_HEADER.unpack_from(
                buf, pos
            )
            h = {
                "base_offset": bo,
                "ple": ple,
                "crc": crc,
                "attrs": attrs,
                "last_offset_delta": lod,
                "base_timestamp": base_ts,
                "max_timestamp": max_ts,
                "producer_id": pid,
                "producer_epoch": pe,
                "base_sequence": bseq,
                "count": count,
                "position": pos,
                "size": total,
                "codec": attrs & 0x07,
                "magic": magic,
            }
            valid = crc32c(buf[pos + 21 : pos + total]) == crc
            out.append(_batch_line(version, h, valid))
            if deep:
                lines, complete = _record_lines(
                    buf, h, version, txn_decoder and is_txn_state, print_data, decompress, set_order
                )
                out.extend(lines)
                if not complete and version in KAFKA_CHECKED_VERSIONS:
                    return out  # DumpLogSegments stops on the exception: nothing after it is printed
        else:
            # legacy entry: offset size crc magic attrs [timestamp] key value
            attrs = buf[pos + 17]
            ts = struct.unpack_from(">q", buf, pos + 18)[0] if magic == 1 else -1
            ts_name = "NoTimestampType" if magic == 0 else _TS_NAMES[(attrs >> 3) & 1]
            crc = struct.unpack_from(">I", buf, pos + 12)[0]
            codec = _CODEC_NAMES[attrs & 0x07]
            if version in ("2.7", "2.8"):
                codec = codec.upper()
            out.append(
                f"offset: {base_offset} position: {pos} {ts_name}: {ts} size: {total} magic: {magic} "
                f"compresscodec: {codec} crc: {crc} isvalid: true"
            )
            if deep and version in KAFKA_CHECKED_VERSIONS:
                lines, complete = _legacy_record_lines(buf[pos : pos + total], ts_name, decompress)
                out.extend(lines)
                if not complete:
                    return out
            elif deep:
                brace = "" if version in JAVA_VERSIONS else "}"  # the Scala tool's stray "}" (DumpLogSegments.scala)
                out.append(
                    f"| offset: {base_offset} {ts_name}: {ts} keySize: -1 valueSize: -1 isValid: true crc: {crc}{brace}"
                )
        pos += total
    if pos < n and (any(buf[pos:]) or version in KAFKA_CHECKED_VERSIONS):
        out.append(f"Found {n - pos} invalid bytes at the end of {name}")
    return out


def _legacy_messages(entry: bytes):
    """(offset, magic, attributes, timestamp, key size, value, crc, crc valid) of each message in ``entry``
    (a log entry or a wrapper's decompressed value: offset, size, crc, magic, attributes, [timestamp], key,
    value); stops at the first one that does not fit."""

    p, n = 0, len(entry)
    while p + 26 <= n:
        offset, size, crc, magic, attrs = struct.unpack_from(">qiIbb", entry, p)
        end = p + 12 + size
        q = p + 18 + (8 if magic >= 1 else 0)
        if size < 14 or end > n or q + 4 > end:
            return
        ts = struct.unpack_from(">q", entry, p + 18)[0] if magic >= 1 else -1
        klen = struct.unpack_from(">i", entry, q)[0]
        q += 4 + max(klen, 0)
        if q + 4 > end:
            return
        vlen = struct.unpack_from(">i", entry, q)[0]
        value = None if vlen < 0 else entry[q + 4 : q + 4 + vlen]
        valid = zlib.crc32(entry[p + 16 : end]) == crc
        yield offset, magic, attrs, ts, klen, value, crc, valid
        p = end


def _legacy_record_lines(entry: bytes, ts_name: str, decompress) -> tuple[list[str], bool]:
    """Deep iteration of one legacy entry as DumpLogSegments prints it (AbstractLegacyRecordBatch): the entry
    itself, or a compressed wrapper's inner messages (offsets relative to the wrapper's for magic 1,
    ``LegacyRecord``'s timestamps, the wrapper's when it is LogAppendTime). False: the tool stops here."""
    ((w_offset, w_magic, w_attrs, w_ts, klen, value, crc, valid),) = list(_legacy_messages(entry))[:1] or [
        (0, 0, 0, -1, -1, None, 0, False)
    ]
    if w_attrs & 0x07 == 0:
        vlen = -1 if value is None else len(value)
        line = f"| offset: {w_offset} {ts_name}: {w_ts} keySize: {klen} valueSize: {vlen} "
        return [line + f"isValid: {str(valid).lower()} crc: {crc}}}"], True
    try:
        inner = list(_legacy_messages(decompress(w_attrs & 0x07, value or b"")))
    except Exception:  # noqa: BLE001 - the tool stops on the exception
        return [], False
    if not inner:
        return [], False
    last_relative = inner[-1][0]
    lines = []
    for offset, _magic, _attrs, ts, ik, ivalue, icrc, ivalid in inner:
        if w_magic >= 1:
            offset = w_offset - last_relative + offset
            ts = w_ts if w_attrs & 0x08 else ts
        ivlen = -1 if ivalue is None else len(ivalue)
        lines.append(
            f"| offset: {offset} {ts_name}: {ts} keySize: {ik} valueSize: {ivlen} "
            f"isValid: {str(ivalid).lower()} crc: {icrc}}}"
        )
    return lines, True


def _record_lines(
    buf: bytes,
    h: dict[str, int],
    version: Version,
    txn_decoder: bool,
    print_data: bool,
    decompress,
    set_order: bool = False,
) -> tuple[list[str], bool]:
    """The record lines of one v2 batch, and whether every record was read (else the real tool stopped)."""
    pos = h["position"]
    body = buf[pos + 61 : pos + h["size"]]
    try:
        payload = decompress(h["codec"], body)
    except Exception:  # noqa: BLE001 - the real tool prints the exception; we print nothing
        return [], False
    lines = []
    ts_name = _TS_NAMES[(h["attrs"] >> 3) & 1]
    is_control = bool(h["attrs"] & 0x20)
    log_append = bool(h["attrs"] & 0x08)
    # a corrupt batch (isvalid: false): the real tool stops at the exception; the lines so far stand
    records = list(_iter_v2_records(payload, h["count"]))
    for ts_delta, od, key, value, hkeys in records:
        offset = h["base_offset"] + od
        ts = h["max_timestamp"] if log_append else h["base_timestamp"] + ts_delta
        seq = -1 if h["base_sequence"] < 0 else (h["base_sequence"] + od) & 0x7FFFFFFF
        ks = "keysize" if version == "2.7" else "keySize"
        vs = "valuesize" if version == "2.7" else "valueSize"
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        if version == "2.8":
            line = (
                f"| offset: {offset} isValid: true crc: null keySize: {klen} valueSize: {vlen} {ts_name}: {ts} "
                f"baseOffset: {h['base_offset']} lastOffset: {h['base_offset'] + h['last_offset_delta']} "
                f"baseSequence: {h['base_sequence']} lastSequence: -1 producerEpoch: {h['producer_epoch']} "
                f"partitionLeaderEpoch: {h['ple']} batchSize: {h['size']} magic: 2 "
                f"compressType: {_CODEC_NAMES[h['codec']].upper()} position: {h['position']} sequence: {seq} "
                f"headerKeys: [{','.join(hkeys)}]"
            )
        else:
            line = (
                f"| offset: {offset} {ts_name}: {ts} {ks}: {klen} {vs}: {vlen} sequence: {seq} "
                f"headerKeys: [{','.join(hkeys)}]"
            )
        if is_control:
            if key is not None and len(key) >= 4:
                ctype = struct.unpack_from(">h", key, 2)[0]
                if ctype in (0, 1) and value is not None and len(value) >= 6:
                    epoch = struct.unpack_from(">i", value, 2)[0]
                    line += f" endTxnMarker: {'ABORT' if ctype == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
                else:
                    line += f" controlType: {_CONTROL_NAMES.get(ctype, 'UNKNOWN')}({ctype})"
        elif txn_decoder:
            line += (
                _txn_json(key, value, status_names=version == "4.x")
                if version in JSON_DECODER_VERSIONS
                else _txn_scala(key, value, set_order)
            )
        elif print_data:
            if key is not None:
                line += f" key: {key.decode('utf-8', 'replace')}"
            if value is not None:
                line += f" payload: {value.decode('utf-8', 'replace')}"
        lines.append(line)
    return lines, len(records) == h["count"]


def _render_snapshot(buf: bytes, version: Version) -> list[str]:
    snap = decode_producer_snapshot(np.frombuffer(buf, np.uint8))
    e = snap.entries
    out = []
    for i in range(snap.entry_count):
        pid, epoch, ce = int(e["producer_id"][i]), int(e["producer_epoch"][i]), int(e["coordinator_epoch"][i])
        ctfo = int(e["current_txn_first_offset"][i])
        ts = int(e["timestamp"][i])
        last_offset = int(e["last_offset"][i])
        last_seq = int(e["last_sequence"][i])
        delta = int(e["offset_delta"][i])
        line = (
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {ce} "
            f"currentTxnFirstOffset: {_opt_long(ctfo if ctfo >= 0 else None, version)}"
        )
        if version in ("2.7", "2.8"):
            sep = " "
        elif version in JAVA_VERSIONS:
            line += f" lastTimestamp: {ts}"
            sep = " "
        else:
            line += f" lastTimestamp: {ts} "
            sep = ""
        if last_offset >= 0:
            line += (
                f"{sep}firstSequence: {last_seq - delta if last_seq >= 0 else -1} lastSequence: {last_seq} "
                f"lastOffset: {last_offset} offsetDelta: {delta} timestamp: {ts}"
            )
        out.append(line)
    return out


def render_dump(
    path: str,
    version: Version = "3.x",
    deep_iteration: bool = True,
    transaction_log_decoder: bool = False,
    print_data_log: bool = False,
    *,
    dumping_path: str | None = None,
    scala_set_order: bool = False,
) -> str:
    """``kafka-dump-log.sh --files <path>`` output as ``version`` prints it.

    ``version``: "2.7" (``Starting offset``, upper-case codec, ``keysize``), "2.8" (its
    malformed record lines), "3.0" (``Starting offset``, lower-case codec, no deleteHorizonMs;
    snapshots ``None``/``Some``), "3.x" (3.5+: ``Log starting offset``, ``deleteHorizonMs``,
    ``OptionalLong``), "4.0" (the Scala tool of 4.0-4.2: JSON ``--transaction-log-decoder`` with the
    status id, KAFKA-18207), "4.x" (the Java port, KAFKA-14579, with KAFKA-20712's status names:
    ``"transactionStatus":"CompleteCommit"``; snapshot lines without the trailing space) or "trunk"
    (the Java port before KAFKA-20712: status ids).
    ``transaction_log_decoder`` only applies to ``__transaction_state`` segments (as the real
    flag only makes sense there); ``print_data_log``/the decoder imply deep iteration.

    "4.0" data segments and snapshots are Kafka's own output byte for byte (tests/oracle/test_dump_log.py
    holds them to the real DumpLogSegments): a record the tool cannot read ends the file (the real tool stops
    on the exception), legacy entries print their messages. ``scala_set_order``: the text form of the
    transaction-log decoder (2.x/3.x) lists a record's partitions in the order Kafka's Scala 2.13 build
    prints them (a ``mutable.HashSet``'s: :func:`_scala_hash_set_order`), not the record's; off by default,
    where the partitions keep the record's order (what the project's text-vs-binary tests compare).
    """
    with open(path, "rb") as f:
        buf = f.read()
    shown = dumping_path if dumping_path is not None else path
    lines = [f"Dumping {shown}"]
    if path.endswith(".snapshot"):
        lines += _render_snapshot(buf, version)
    else:
        base = int(os.path.basename(path).split(".")[0])
        lines.append(
            ("Log starting offset: " if version in ("3.x", "4.0", "4.x", "trunk") else "Starting offset: ") + str(base)
        )
        is_txn_state = "/__transaction_state-" in path.replace(os.sep, "/")
        deep = deep_iteration or print_data_log or transaction_log_decoder
        lines += _render_log(
            buf,
            version,
            deep,
            transaction_log_decoder,
            print_data_log,
            is_txn_state,
            os.path.basename(path),
            scala_set_order,
        )
    return "\n".join(lines) + "\n"
