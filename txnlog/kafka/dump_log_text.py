"""``kafka-dump-log.sh`` text output: the formats (DumpLogSegments; docs/formats.md §10) and a renderer.

Two halves, both pure (stdlib + numpy, no pyspark):

* **Format knowledge** used by ``txnlog.engine.spark.dump_log``: regular expressions in
  Java syntax (the form Spark ran; ``pyarrow.compute`` runs them as :func:`re2`
  translates them, with Java's meaning), token positions of the batch line,
  quarantine reasons and the path rule that turns ``Dumping <path>`` into
  (broker, topic, partition, file offset).
* **A renderer**, :func:`render_dump`, that prints a segment / snapshot file the
  way each Kafka version's ``DumpLogSegments`` does, so tests can check that the
  text path and the binary path give the same rows. It is a test helper: a
  plain Python loop per record is fine here (never on the reading path).

Formats (checked against real kafka-dump-log.sh output of Kafka 2.x and 3.x)::

    Dumping <path>
    Starting offset: <base>                      (2.x - 3.2)
    Log starting offset: <base>                  (3.3+)
    baseOffset: .. lastOffset: .. count: .. baseSequence: .. lastSequence: .. producerId: ..
      producerEpoch: .. partitionLeaderEpoch: .. isTransactional: .. isControl: ..
      [deleteHorizonMs: OptionalLong.empty|OptionalLong[n]]   (3.2+)
      position: .. CreateTime|LogAppendTime: <maxTimestamp> size: <12+batchLength> magic: 2
      compresscodec: NONE|none|.. crc: .. isvalid: ..
    offset: .. position: .. CreateTime|LogAppendTime|NoTimestampType: .. size: .. magic: 0|1 ...
    | offset: .. CreateTime: .. keySize|keysize: .. valueSize|valuesize: .. sequence: ..
      headerKeys: [..] [endTxnMarker: ABORT|COMMIT coordinatorEpoch: n] [key: ..] [payload: ..]
    producerId: .. producerEpoch: .. coordinatorEpoch: .. currentTxnFirstOffset: None|Some(n)|
      OptionalLong.empty|OptionalLong[n] [lastTimestamp: ..] [firstSequence: .. lastSequence: ..
      lastOffset: .. offsetDelta: .. timestamp: ..]          (.snapshot)

Kafka 2.8 leaked the batch fields into every record line (``| offset: N isValid: ..
crc: .. keySize: .. baseOffset: ..``); such lines are recognised and quarantined
(:data:`REASON_MALFORMED_2_8`), never read as records.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Iterable
from typing import Literal

import numpy as np

from txnlog.kafka.compression import decompress
from txnlog.kafka.wire import ControlType, TransactionState

__all__ = [
    "BATCH_LINE",
    "LEGACY_LINE",
    "RECORD_LINE",
    "SNAPSHOT_LINE",
    "render_dump",
    "split_dump_path",
]

# --- quarantine reasons (rows of kind "quarantine"; position = line number, length = 1) ---------
REASON_UNPARSED = "dump_log_unparsed_line"
REASON_MALFORMED_2_8 = "dump_log_malformed_2_8"
REASON_CRC = "crc_mismatch"  # a batch line with isvalid: false (the binary path quarantines it too)
REASON_INVALID_BYTES = "truncated_tail"  # "Found N invalid bytes at the end of <file>": what the segment reader says
REASON_ELIDED = "dump_log_elided"  # "..." pasted where lines were cut: whatever was there is unknown
REASON_TOOL_ERROR = "dump_log_tool_error"  # the tool stopped on an exception: the rest of that file is not dumped
REASON_SNAPSHOT_CRC = "snapshot_crc_mismatch"  # "Snapshot is corrupt (CRC is no longer valid)..."
REASON_BAD_SNAPSHOT = "bad_snapshot"  # the other CorruptSnapshotException messages
REASON_NO_PARTITION = "dump_log_unknown_partition"  # "Dumping ./000.log": topic/partition unknown
REASON_TXN_UNKNOWN_KEY = "dump_log_txn_state_unknown_key"  # key: unknown::version=N / Unknown record type
REASON_TXN_UNDECODED = "dump_log_txn_state_not_decoded"  # __transaction_state dumped without the decoder
DETAIL_CHARS = 200  # detail = the start of the offending line

_I = r"(-?\d+)"

# --- line patterns (Java regex syntax; also valid for Python ``re``; :func:`re2` gives the RE2 form
# ``pyarrow.compute`` runs with Java's meaning: none uses lookarounds or backreferences) -----------
DUMPING_LINE = r"^Dumping (.+)$"
START_OFFSET_LINE = r"^(?:Log starting offset|Starting offset): (-?\d+)\s*$"
#: magic >= 2. Fields are space separated ``name: value`` (docs/formats.md §10); codec case-insensitive
#: (NONE before 3.1), deleteHorizonMs optional (3.2+).
BATCH_LINE = (
    r"^baseOffset: -?\d+ lastOffset: -?\d+ count: -?\d+ baseSequence: -?\d+ lastSequence: -?\d+ "
    r"producerId: -?\d+ producerEpoch: -?\d+ partitionLeaderEpoch: -?\d+ isTransactional: (?:true|false) "
    r"isControl: (?:true|false)(?: deleteHorizonMs: OptionalLong(?:\.empty|\[-?\d+\]))? position: \d+ "
    r"(?:CreateTime|LogAppendTime|NoTimestampType): -?\d+ size: \d+ magic: \d+ compresscodec: [A-Za-z0-9]+ "
    r"crc: -?\d+ isvalid: (?:true|false)\s*$"
)
#: 1-based ``split(line, " ")`` positions of the batch line's values without deleteHorizonMs;
#: fields after isControl move by 2 when it is present (``BATCH_TOKENS_AFTER_CONTROL``).
BATCH_TOKENS = {
    "base_offset": 2,
    "last_offset": 4,
    "count": 6,
    "base_sequence": 8,
    "last_sequence": 10,
    "producer_id": 12,
    "producer_epoch": 14,
    "partition_leader_epoch": 16,
    "is_transactional": 18,
    "is_control": 20,
    "position": 22,
    "timestamp_type": 23,
    "max_timestamp": 24,
    "size": 26,
    "magic": 28,
    "compresscodec": 30,
    "crc": 32,
    "isvalid": 34,
}
BATCH_TOKENS_AFTER_CONTROL = (
    "position",
    "timestamp_type",
    "max_timestamp",
    "size",
    "magic",
    "compresscodec",
    "crc",
    "isvalid",
)
DELETE_HORIZON = r" deleteHorizonMs: OptionalLong\[(-?\d+)\]"
#: magic 0/1 entry ("offset" is the entry's last offset).
LEGACY_LINE = (
    r"^offset: -?\d+ position: \d+ (?:CreateTime|LogAppendTime|NoTimestampType): -?\d+ size: \d+ "
    r"magic: [01] compresscodec: [A-Za-z0-9]+ crc: -?\d+ isvalid: (?:true|false)\s*$"
)
#: record line with metadata (2.7 lower-case keysize/valuesize, 3.x+ camelCase); group 1 offset,
#: group 2 timestamp.
RECORD_LINE = (
    r"^\| offset: (-?\d+) (?:CreateTime|LogAppendTime|NoTimestampType): (-?\d+) "
    r"(?:keySize|keysize): -?\d+ (?:valueSize|valuesize): -?\d+(?: |$)"
)
#: ``--skip-record-metadata`` record lines
RECORD_NO_METADATA_LINE = r"^\| (?:key|payload): "
END_TXN_MARKER = r" endTxnMarker: (ABORT|COMMIT) coordinatorEpoch: (-?\d+)\s*$"
OTHER_CONTROL = r" (?:controlType: \S+|SnapshotHeader |SnapshotFooter |KRaftVersion |KRaftVoters |LeaderChange: )"
#: the 2.8 regression: batch fields inside record lines
MALFORMED_2_8 = r"^\| offset: -?\d+ isValid: (?:true|false) crc: \S+ keySize: .* baseOffset: -?\d+ .*batchSize: "
#: --transaction-log-decoder, 3.x Scala (TransactionLog.formatRecordKeyAndValue; 2.7 identical).
#: The key is greedy: a topic name cannot hold " payload: " (legal chars [a-zA-Z0-9._-]).
TXN_SCALA = r" key: transaction_metadata::transactionalId=(.*) payload: (<DELETE>|producerId:.*)$"
TXN_SCALA_VALUE = (
    r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
    r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)\s*$"
)
#: trunk Java: JSON key and payload (parsed with a JSON parser, not by position).
TXN_JSON = r" key: (\{.*\}) payload: (<DELETE>|\{.*\})\s*$"
TXN_UNKNOWN_KEY = r" key: (?:unknown::version=-?\d+|Unknown record type .*|Error at offset .*)$"
SNAPSHOT_LINE = (
    r"^producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) "
    r"currentTxnFirstOffset: (None|Some\((-?\d+)\)|OptionalLong\.empty|OptionalLong\[(-?\d+)\])"
    r"(?: lastTimestamp: (-?\d+))? ?"
    r"(?: ?firstSequence: (-?\d+) lastSequence: (-?\d+) lastOffset: (-?\d+) offsetDelta: (-?\d+) "
    r"timestamp: (-?\d+))?\s*$"
)
#: Lines kafka-dump-log prints that carry nothing we need. Texts from DumpLogSegments.scala (2.x-4.x)
#: and tools/.../DumpLogSegments.java (the 4.x port), and the storage exceptions it lets through:
#: index / time-index / txn-index entries (dumpIndex, dumpTimeIndex, dumpTxnIndex), "<file> is empty."
#: and "<file> passed sanity check." (dumpIndex/dumpTimeIndex), the verification reports printed to
#: stderr at the end (misMatchesForIndexFilesMap, TimeIndexDumpErrors.printErrors, the
#: non-consecutive-offsets report), the KRaft snapshot headers, "Ignoring unknown file", index
#: sanity failures (OffsetIndex/TimeIndex/TransactionIndex.sanityCheck: CorruptIndexException - the
#: broker rebuilds an index, so it never matters here) and stack-trace lines.
IGNORED_LINES = (
    r"^(?:\s*$"
    r"|offset: -?\d+ position: -?\d+\s*$"  # .index
    r"|timestamp: -?\d+ offset: -?\d+\s*$"  # .timeindex
    r"|version: -?\d+ producerId: -?\d+ firstOffset: -?\d+ lastOffset: -?\d+ lastStableOffset: -?\d+\s*$"  # .txnindex
    r"|.+ is empty\.\s*$"  # dumpIndex: an index with no entries
    r"|.+ passed sanity check\.\s*$"  # --index-sanity-check
    r"|Snapshot end offset: -?\d+, epoch: -?\d+\s*$"  # KRaft .checkpoint
    r"|KRaft bootstrap snapshot\s*$"  # bootstrap.checkpoint
    r"|Ignoring unknown file "
    r"|Mismatches in :|  Index offset: -?\d+, log offset: -?\d+\s*$"
    r"|Non-consecutive offsets in |\s+-?\d+ is followed by -?\d+\s*$"
    r"|Found timestamp mismatch in :|Found out of order timestamp in :"
    r"|  Index timestamp: -?\d+, (?:log timestamp|Previously indexed timestamp): -?\d+\s*$"
    r"|The following indexed offsets are not found in the log\.?\s*$"
    r"|Indexed offset: -?\d+, found log offset: -?\d+\s*$"
    r"|(?:" + r"(?:Exception in thread \"[^\"]*\" )?(?:[\w.$]+CorruptIndexException: )?"
    r"(?:Corrupt (?:time )?index found, |(?:Time index|Index) file .* is corrupt, found "
    r"|Last offset of aborted transaction .* is less than start offset ))"
    r"|\s+at [\w.$<>]+\(.*\)\s*$|\s+\.\.\. \d+ (?:more|common frames omitted)\s*$|Caused by: "
    r")"
)
INVALID_BYTES_LINE = r"^Found (\d+) invalid bytes at the end of (.*?)\s*$"
#: ProducerStateManager.readSnapshot's CorruptSnapshotException messages (printed to stderr by
#: dumpProducerIdSnapshot): group 1 is the CRC form (the segment reader's snapshot_crc_mismatch)
SNAPSHOT_CORRUPT_LINE = (
    r"^(?:[\w.$]+CorruptSnapshotException: )?(?:(Snapshot is corrupt \(CRC is no longer valid\))"
    r"|Snapshot contained an unknown file version |Snapshot failed schema validation: )"
)
#: the tool stopped on an exception (a batch it could not frame, a decoder failure): the rest of
#: the dumped file is not in the text. Scala: 'Exception in thread "main" <class>: <msg>'; the
#: 4.x Java port prints the message, then the stack trace starting with '<class>: <msg>'.
TOOL_ERROR_LINE = (
    r"^(?:(?:Exception in thread \"[^\"]*\" )?(?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)(?:: .*)?\s*$"
    # FileLogInputStream.nextBatch / FileChannelRecordBatch.loadBatch messages (the Java port prints the bare message)
    r"|Found record size -?\d+ smaller than minimum record overhead |Failed to (?:read|load) record batch at position )"
)
#: "..." / "…" a user put where lines were cut out of a paste (never Kafka output); a record line too.
#: The ellipsis is the character itself: RE2 has no ``\u2026`` escape (Java and Python read both).
ELISION_LINE = "^\\s*(?:\\|\\s*)?(?:\\.{3,}|\u2026|\\[\\.{3,}\\]|\\[\u2026\\])"
#: Dumping path → parts. Group 1: the directory above the partition dir (may be empty),
#: 2: topic, 3: partition, 4: the file's offset (segment base / snapshot offset), 5: suffix.
PARTITION_PATH = r"^(?:(?:.*/)?([^/]+)/)?([^/]+)-(\d+)/(\d+)\.(log|snapshot|index|timeindex|txnindex)$"
FILE_NAME = r"(?:^|/)(\d+)\.(log|snapshot|index|timeindex|txnindex)$"
#: a directory name that looks like a broker log dir (kafka-logs, broker-1, kafka-0-logs, data, 3)
BROKER_DIR = r"(?i)(broker|kafka|log|data|node|^\d+$)"
UNKNOWN_BROKER = "dump"

#: what Java's ``.`` does not match (Pattern: the line terminators) and what its ``\\s`` matches;
#: RE2's ``.`` only stops at ``\\n`` and its ``\\s`` lacks ``\\x0B``
_JAVA_TERMINATORS = r"\n\r\x{85}\x{2028}\x{2029}"
_JAVA_SPACE = r"\t\n\x0B\f\r "


def re2(pattern: str, named: bool = False) -> str:
    r"""``pattern`` (Java syntax, as Spark ran it) in RE2 syntax with Java's meaning, for ``pyarrow.compute``.

    Java's ``.`` stops at any line terminator and its ``$`` (no MULTILINE) also matches before one
    final terminator; its ``\s``/``\S`` include ``\x0B``. RE2 differs on all three, so they are
    spelled out; ``named`` names the capturing groups ``g1``, ``g2``, .. (``extract_regex`` needs names).

    >>> re2(r"^(\d+)\s(.*)$", named=True).replace(_JAVA_TERMINATORS, "T").replace(_JAVA_SPACE, "S")
    '^(?P<g1>\\d+)[S](?P<g2>[^T]*)(?:\\r\\n|[T])?$'
    """
    out: list[str] = []
    group = 0
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            e = pattern[i : i + 2]
            if e in (r"\s", r"\S"):
                if in_class:
                    if e == r"\S":
                        raise ValueError(f"\\S in a character class: {pattern!r}")
                    out.append(_JAVA_SPACE)
                else:
                    out.append(("[" if e == r"\s" else "[^") + _JAVA_SPACE + "]")
            else:
                out.append(e)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                out.append("[^")
                i += 2
                continue
        elif c == ".":
            c = "[^" + _JAVA_TERMINATORS + "]"
        elif c == "$":
            c = r"(?:\r\n|[" + _JAVA_TERMINATORS + "])?$"
        elif c == "(" and pattern[i + 1 : i + 2] != "?":
            group += 1
            c = f"(?P<g{group}>" if named else "("
        out.append(c)
        i += 1
    return "".join(out)


#: The state names the dump prints → TransactionStatus ids (plain ints: they go into numpy and Spark).
STATE_IDS = {s.kafka_name: int(s) for s in TransactionState}
STATE_NAMES = {v: k for k, v in STATE_IDS.items()}
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: ``endTxnMarker: ABORT`` / ``COMMIT`` → the control record type.
CONTROL_TYPE_IDS = {t.name: int(t) for t in (ControlType.ABORT, ControlType.COMMIT)}


def split_dump_path(path: str) -> tuple[str, str | None, int | None, int | None, str | None]:
    """(broker, topic, partition, file offset, suffix) of a ``Dumping <path>`` path.

    Reference implementation of the Arrow parse in ``txnlog.engine.spark.dump_log``.

    >>> split_dump_path("/tmp/kafka-logs/foo-0/00000000000000000000.log")
    ('kafka-logs', 'foo', 0, 0, 'log')
    >>> split_dump_path("./00000000000000000000.log")
    ('dump', None, None, 0, 'log')
    """
    m = re.match(PARTITION_PATH, path)
    if m:
        parent = m.group(1) or ""
        broker = parent if parent and re.search(BROKER_DIR, parent) else UNKNOWN_BROKER
        return broker, m.group(2), int(m.group(3)), int(m.group(4)), m.group(5)
    f = re.search(FILE_NAME, path)
    return UNKNOWN_BROKER, None, None, (int(f.group(1)) if f else None), (f.group(2) if f else None)


# =====================================================================================
# Renderer (test helper): print a file as kafka-dump-log.sh of a given version would.
# =====================================================================================

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
    from txnlog.kafka.records import RECORD_OK, read_header, read_record

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
    from txnlog.kafka.txn_state import decode_transaction_log_key, decode_transaction_log_value

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
    from txnlog.kafka.txn_state import decode_transaction_log_key, decode_transaction_log_value

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
    from txnlog.kafka.crc import crc32c

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
    from txnlog.kafka.producer_snapshot import decode_producer_snapshot

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
