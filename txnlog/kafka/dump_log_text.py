"""What txnlog knows of ``kafka-dump-log.sh`` text (DumpLogSegments; the formats per Kafka version are in
docs/formats.md §10): line patterns in Java regex syntax (``pyarrow.compute`` runs them as :func:`re2`
translates them), token positions of the batch line, quarantine reasons, and the rule that turns
``Dumping <path>`` into (broker, topic, partition, file offset). Kafka 2.8's record lines that repeat the
batch fields are recognised and quarantined (:data:`REASON_MALFORMED_2_8`). The renderer tests use is
:mod:`txnlog.kafka.dump_log_render`. Pure: stdlib + numpy, no pyspark.
"""

from __future__ import annotations

import re

from txnlog.kafka.wire import ControlType, TransactionState

__all__ = [
    "BATCH_LINE",
    "LEGACY_LINE",
    "RECORD_LINE",
    "SNAPSHOT_LINE",
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
