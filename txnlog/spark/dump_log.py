"""``--dump-log``: read ``kafka-dump-log.sh`` text into the same rows as the binary sources.

Three steps:

1. **Lines** (``txnlog_dump_lines``, a Python Data Source): one input partition per
   dump file, read in chunks and split on ``\\n`` with numpy (no loop per line).
   Each line gets its true 1-based line number, plus two pieces of *context* that
   only a sequential reader can give cheaply: the ``Dumping <path>`` line that
   governs it (``section``/``section_header``) and whether the previous line is a
   batch line (``after_batch``). Detecting those is a fixed-prefix byte compare,
   vectorized.
2. **Parse**, in the same reader, chunk by chunk (:func:`parse_lines`): each line's
   kind and typed fields (``PARSED_SCHEMA``: batch, record, snapshot and
   ``__transaction_state`` fields, what the path says, the quarantine reason) with
   ``pyarrow.compute`` - the patterns of ``txnlog.kafka.dump_log_text`` in RE2 form,
   token positions, Spark's ``try_cast`` rules, ``pyarrow.json`` for the 4.x JSON
   decoder output. The reader is the same function in both placements
   (txnlog.spark.placement), so Spark plans no regular expression: it only filters
   the typed lines, unions them and names the replicas (:func:`_replica_names`).
3. **Assemble** per dumped segment with ``groupBy(file, section).applyInArrow``:
   the batch lines of one segment (and the few record lines needed: control
   markers and each batch's first record) become ``BATCH_COLUMNS`` arrays, and
   ``txnlog.reconstruct.segment_fragments`` - the function the segment reader
   uses - turns them into run/marker fragments. ``__transaction_state`` record
   lines get their batch's partitionLeaderEpoch the same way.

What the text cannot give (documented, not guessed):

* without deep iteration a control batch's type and coordinator epoch are not
  printed: it still closes the producer's transaction (on a data partition only
  ABORT/COMMIT exist), with ``control_type`` -1 and ``coordinator_epoch`` -1;
* a batch's *base* timestamp is not printed: it is the first record's timestamp
  with deep iteration (exact for CreateTime), else the batch's max timestamp;
* the 3.x ``--transaction-log-decoder`` form shows no start timestamp, value
  version or tagged fields: those columns are null.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog import storage
from txnlog.kafka import dump_log_text as D
from txnlog.logdirs import IGNORED_TOPICS
from txnlog.spark.schemas import quoted, shaped
from txnlog.spark.sources import (
    KIND_MARKER,
    KIND_QUARANTINE,
    KIND_RUN,
    KIND_SEGMENT,
    KIND_SNAPSHOT,
    SEGMENT_SUMMARY_SCHEMA,
    arrow_to_spark_schema,
    batch_of,
    broker_timestamps,
    producer_rows,
)
from txnlog.spark.txn_state_source import TXN_STATE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DUMP_LINES_SOURCE = "txnlog_dump_lines"
DEFAULT_CHUNK_BYTES = 16 * 2**20

#: the lines as read, before the parse (what :func:`iter_line_batches` yields to :func:`parse_lines`)
DUMP_LINES_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("line_no", pa.int64()),
        ("line", pa.string()),
        ("section", pa.int64()),  # line number of the governing "Dumping" line, 0 before any
        ("section_header", pa.string()),  # that line's text, null before any
        ("after_batch", pa.bool_()),  # the previous line is a batch line ("baseOffset: ...")
        ("loc", pa.string()),  # the replica name the dump file's location gives (list_dump_inputs), null if none
        ("loc_named", pa.bool_()),  # that name was given explicitly (--dump-log NAME=PATH)
    ]
)


@dataclass
class DumpLogFrames:
    """What :func:`read_dump_logs` returns: the segment-source and txn-state-source shaped rows."""

    summary: DataFrame  # SEGMENT_SUMMARY_SCHEMA
    records: DataFrame  # TXN_STATE_SCHEMA
    files: list[str]


# ============================================================================ 1. lines


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def split_dump_arg(arg: str) -> tuple[str | None, str]:
    """``--dump-log`` value → (replica name or None, path).

    ``NAME=PATH`` names the replica every dump under PATH belongs to. An existing path is
    always a path (a file name may hold ``=``), and NAME must be a plain name (letters, digits,
    ``._-``; no ``/``), so ``a/b=c.txt`` is a path.

    >>> split_dump_arg("broker-1=dumps/b1.txt")
    ('broker-1', 'dumps/b1.txt')
    >>> split_dump_arg("dumps/b1.txt")
    (None, 'dumps/b1.txt')
    """
    if "=" in arg and not (storage.is_remote(arg) or os.path.exists(arg)):
        name, path = arg.split("=", 1)
        if _NAME.fullmatch(name) and path:
            return name, path
    return None, arg


def list_dump_inputs(paths: list[str]) -> list[tuple[str, str | None, bool]]:
    """(file, location name, named) of every dump file under ``paths``, in a fixed order.

    The location name is the replica the file's place says it holds (README, kafka-dump-log.sh):
    ``NAME=PATH`` → NAME (``named``); a file under a directory given → the first directory below
    it (``dumps/`` holding ``broker-1/*.txt``), or, lying directly in it, the directory's own name
    (``--dump-log dumps/broker-1/``); a file given directly → None (the printed path decides).
    Hidden files and directories are skipped; a file listed twice is read once.
    """
    found: list[tuple[str, str | None, bool]] = []
    seen: set[str] = set()
    for arg in paths:
        name, p = split_dump_arg(arg)
        if storage.isdir(p):
            root = storage.abspath(p)
            own = storage.basename(root) or None
            for dirpath, dirs, names in storage.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.startswith("."):
                        continue
                    f = storage.join(dirpath, n)
                    if storage.is_remote(f):
                        rel = f[len(root) :].strip("/").split("/")
                    else:
                        rel = os.path.relpath(os.path.abspath(f), root).split(os.sep)
                    loc = name or (rel[0] if len(rel) > 1 else own)
                    if f not in seen:
                        seen.add(f)
                        found.append((f, loc, name is not None))
        elif p not in seen:
            seen.add(p)
            found.append((p, name, name is not None))
    return found


def list_dump_files(paths: list[str]) -> list[str]:
    """Every regular, non-hidden file under ``paths`` (``NAME=PATH`` accepted; files as given)."""
    return [f for f, _loc, _named in list_dump_inputs(paths)]


def dump_arg_path(arg: str) -> str:
    """The path part of a ``--dump-log`` value (``NAME=PATH`` → PATH)."""
    return split_dump_arg(arg)[1]


def _prefix_mask(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray, prefix: bytes) -> np.ndarray:
    """Lines (given by starts/lens into ``arr``) that begin with ``prefix``; vectorized."""
    k = len(prefix)
    ok = lens >= k
    if not ok.any() or arr.size == 0:
        return ok
    idx = np.minimum(starts[:, None] + np.arange(k), arr.size - 1)
    return ok & (arr[idx] == np.frombuffer(prefix, np.uint8)).all(axis=1)


def iter_line_batches(
    path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES, loc: str | None = None, loc_named: bool = False
) -> Iterator[pa.RecordBatch]:
    """``DUMP_LINES_SCHEMA`` batches of one dump file, read ``chunk_bytes`` at a time."""
    line_no = 0
    section = 0
    header: str | None = None
    prev_batch = False
    carry = b""
    with storage.open_input(path) as f:  # local paths with open(); s3a://, hdfs://, ... through pyarrow.fs
        while True:
            data = f.read(chunk_bytes)
            eof = not data
            buf = carry + data if carry else data
            arr = np.frombuffer(buf, np.uint8)
            nl = np.flatnonzero(arr == 10)
            if eof:
                ends = np.append(nl, arr.size) if arr.size and (nl.size == 0 or nl[-1] != arr.size - 1) else nl
                carry = b""
            else:
                if nl.size == 0:
                    carry = buf
                    continue
                ends = nl
                carry = buf[nl[-1] + 1 :]
            n = ends.size
            if n:
                starts = np.empty(n, np.int64)
                starts[0] = 0
                starts[1:] = ends[:-1] + 1
                lens = ends - starts
                # strip one trailing \r (CRLF dumps)
                cr = (lens > 0) & (arr[np.maximum(ends - 1, 0)] == 13)
                lens = lens - cr
                keep = np.zeros(arr.size + 1, np.int32)
                np.add.at(keep, starts, 1)
                np.add.at(keep, starts + lens, -1)
                mask = np.cumsum(keep[:-1]) > 0
                data_buf = arr[mask]
                offsets = np.zeros(n + 1, np.int64)
                np.cumsum(lens, out=offsets[1:])
                lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data_buf)).cast(
                    pa.string()
                )
                numbers = np.arange(line_no + 1, line_no + n + 1, dtype=np.int64)
                dumping = _prefix_mask(arr, starts, lens, b"Dumping ")
                is_batch = _prefix_mask(arr, starts, lens, b"baseOffset: ")
                after = np.empty(n, bool)
                after[0] = prev_batch
                after[1:] = is_batch[:-1]
                prev_batch = bool(is_batch[-1])
                sec = np.maximum.accumulate(np.where(dumping, numbers, section))
                # header text: the latest Dumping line in this chunk, else the one carried in
                hdr_idx = np.maximum.accumulate(np.where(dumping, np.arange(n), -1))
                carried = pa.array([header], pa.string())
                pool = pa.concat_arrays([lines, carried])
                headers = pool.take(pa.array(np.where(hdr_idx >= 0, hdr_idx, n)))
                if dumping.any():
                    header = lines[int(np.flatnonzero(dumping)[-1])].as_py()
                section = int(sec[-1])
                line_no += n
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([path] * n, pa.string()),
                        pa.array(numbers),
                        lines,
                        pa.array(sec),
                        headers,
                        pa.array(after),
                        pa.array([loc] * n, pa.string()),
                        pa.array([loc_named] * n, pa.bool_()),
                    ],
                    schema=DUMP_LINES_SCHEMA,
                )
            if eof:
                return


class _DumpFilePartition(InputPartition):
    """Some dump files read by one task (small files packed together; a file is never split)."""

    def __init__(self, paths: list[str]):
        super().__init__(paths)


class _DumpLinesReader(DataSourceReader):
    def __init__(self, options: dict[str, str]):
        self.paths = json.loads(options.get("paths", "[]"))
        self.locations = json.loads(options.get("locations", "{}"))  # file → [loc, named]
        self.chunk_bytes = int(options.get("chunk_bytes", DEFAULT_CHUNK_BYTES))
        self.options = options

    def partitions(self) -> list[InputPartition]:
        target = int(self.options.get("target_partition_bytes", 64 * 2**20))
        groups: list[list[str]] = []
        size = 0
        for p in self.paths:
            try:
                n = os.path.getsize(p) if "://" not in p else target
            except OSError:
                n = 0
            if not groups or size + n > target:
                groups.append([])
                size = 0
            groups[-1].append(p)
            size += n
        return [_DumpFilePartition(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage.configure_from_options(self.options)
        for path in partition.value:
            loc, named = self.locations.get(path, (None, False))
            for batch in iter_line_batches(path, self.chunk_bytes, loc, bool(named)):
                yield parse_lines(batch)


class DumpLinesSource(DataSource):
    """``spark.read.format("txnlog_dump_lines").option("paths", json.dumps([...])).load()``: the
    parsed lines (``PARSED_SCHEMA``) of the dump files."""

    @classmethod
    def name(cls) -> str:
        return DUMP_LINES_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(PARSED_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _DumpLinesReader(dict(self.options))


# ============================================================================ 2. parse

# line kinds
K_DUMPING, K_START, K_BATCH, K_LEGACY, K_RECORD, K_SNAPSHOT = 0, 1, 2, 3, 4, 5
K_IGNORED, K_UNPARSED, K_MALFORMED_28, K_INVALID_BYTES, K_RECORD_NO_META = 6, 7, 8, 9, 10
K_ELIDED, K_TOOL_ERROR, K_SNAPSHOT_CORRUPT = 11, 12, 13
#: kinds that say a dumped segment is damaged or incomplete: quarantined by byte range of the
#: segment (assemble_segment / assemble_txn_state), as the segment reader would
DAMAGE_KINDS = (K_INVALID_BYTES, K_ELIDED, K_TOOL_ERROR)
#: the kinds in the order they are tried (the first pattern that matches wins): lines starting
#: with "| " are record-ish and only tried against the first list; "Dumping " lines are K_DUMPING
_RECORDISH = (
    (D.RECORD_LINE, K_RECORD),
    (D.MALFORMED_2_8, K_MALFORMED_28),
    (D.RECORD_NO_METADATA_LINE, K_RECORD_NO_META),
    (D.ELISION_LINE, K_ELIDED),
)
_OTHER = (
    (D.BATCH_LINE, K_BATCH),
    (D.START_OFFSET_LINE, K_START),
    (D.SNAPSHOT_LINE, K_SNAPSHOT),
    (D.LEGACY_LINE, K_LEGACY),
    (D.INVALID_BYTES_LINE, K_INVALID_BYTES),
    (D.IGNORED_LINES, K_IGNORED),
    (D.SNAPSHOT_CORRUPT_LINE, K_SNAPSHOT_CORRUPT),
    (D.TOOL_ERROR_LINE, K_TOOL_ERROR),
    (D.ELISION_LINE, K_ELIDED),
)
_BAD_BATCH = r" isvalid: false\s*$"
_CHECKPOINT = r"\.checkpoint$"
_LOG_FILE = r"\.log$"
#: the dump file's name without its extension (names a replica when nothing else does: _replica_names)
_STEM = r"([^/\\]+?)(?:\.[^./\\]*)?$"
_KEY_JSON = pa.struct([("type", pa.string()), ("data", pa.struct([("transactionalId", pa.string())]))])
_PARTITIONS_JSON = pa.list_(pa.struct([("topic", pa.string()), ("partitionIds", pa.list_(pa.int32()))]))
_VALUE_JSON = pa.struct(
    [
        ("version", pa.string()),
        ("type", pa.string()),
        (
            "data",
            pa.struct(
                [
                    ("producerId", pa.int64()),
                    ("previousProducerId", pa.int64()),
                    ("nextProducerId", pa.int64()),
                    ("producerEpoch", pa.int32()),
                    ("nextProducerEpoch", pa.int32()),
                    ("transactionTimeoutMs", pa.int64()),
                    ("transactionStatus", pa.string()),
                    ("transactionPartitions", _PARTITIONS_JSON),
                    ("transactionLastUpdateTimestampMs", pa.int64()),
                    ("transactionStartTimestampMs", pa.int64()),
                    ("clientTransactionVersion", pa.int32()),
                ]
            ),
        ),
    ]
)
#: string fields a Kafka version may print as a JSON number (a string field reads a number as its text)
_NUMBER_AS_TEXT = (r'"(version|type|transactionStatus)":(-?[0-9]+)([,}])', r'"\1":"\2"\3')

#: what the reader yields: every line's kind and typed fields (null where they do not apply)
PARSED_SCHEMA = pa.schema(
    [
        ("file", pa.string()),  # the dump file
        ("line_no", pa.int64()),
        ("section", pa.int64()),  # line number of the governing "Dumping" line, 0 before any
        ("kind_code", pa.int32()),  # K_*
        ("after_batch", pa.bool_()),  # the previous line is a batch line
        ("loc", pa.string()),  # the replica name the dump file's location gives (list_dump_inputs)
        ("loc_named", pa.bool_()),  # that name was given explicitly (--dump-log NAME=PATH)
        ("stem", pa.string()),  # Dumping lines: the dump file's name without extension
        # the governing "Dumping <path>" line: the path printed and what it says (section > 0)
        ("dpath", pa.string()),
        ("broker", pa.string()),  # the broker directory in the path, else "dump" (D.UNKNOWN_BROKER)
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("file_offset", pa.int64()),
        ("is_txn_state", pa.bool_()),
        ("data_section", pa.bool_()),  # a dumped data-partition segment (its lines are assembled)
        ("ignored", pa.bool_()),  # the KRaft metadata log or a KRaft snapshot: skipped
        # damage the dump shows (DAMAGE_KINDS, batch lines with isvalid: false)
        ("damage_text", pa.string()),
        ("invalid_bytes", pa.int64()),
        # batch lines (and legacy entries: position, size, compression)
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),  # also a snapshot entry's lastOffset (-1 when not printed)
        ("record_count", pa.int32()),
        ("base_sequence", pa.int32()),
        ("producer_id", pa.int64()),  # also snapshot entries and __transaction_state records
        ("producer_epoch", pa.int32()),  # also snapshot entries and __transaction_state records
        ("partition_leader_epoch", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("delete_horizon", pa.int64()),
        ("position", pa.int64()),
        ("timestamp_type", pa.int32()),
        ("max_timestamp", pa.int64()),
        ("size", pa.int64()),
        ("magic", pa.int32()),
        ("compression", pa.int32()),
        ("crc", pa.int64()),
        ("crc_valid", pa.bool_()),
        # record lines
        ("rec_offset", pa.int64()),
        ("rec_timestamp", pa.int64()),
        ("marker_type", pa.string()),  # "" when " endTxnMarker: " is printed in no known form
        ("marker_epoch", pa.int32()),
        # producer snapshot entries
        ("first_offset", pa.int64()),
        ("last_timestamp", pa.int64()),
        ("coordinator_epoch", pa.int32()),
        ("last_sequence", pa.int32()),  # a snapshot entry's lastSequence (-1 when not printed)
        # __transaction_state record lines (--transaction-log-decoder: 3.x Scala text or JSON)
        ("txn_decoded", pa.bool_()),
        ("transactional_id", pa.string()),
        ("is_tombstone", pa.bool_()),
        ("key_version", pa.int32()),
        ("value_version", pa.int32()),
        ("timeout_ms", pa.int64()),
        ("state", pa.int32()),
        ("partitions", pa.list_(pa.string())),
        ("last_update_timestamp", pa.int64()),
        ("txn_start_timestamp", pa.int64()),
        ("previous_producer_id", pa.int64()),
        ("next_producer_id", pa.int64()),
        ("next_producer_epoch", pa.int32()),
        ("client_transaction_version", pa.int32()),
        # quarantine: a line no format knows or one outside any readable segment (position = line_no),
        # and a corrupt producer snapshot (kind K_SNAPSHOT_CORRUPT, whole file)
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


def _match(strings: pa.Array, pattern: str) -> np.ndarray:
    """``strings rlike pattern`` (Java meaning: :func:`D.re2`), nulls false."""
    if len(strings) == 0:
        return np.zeros(0, bool)
    m = pc.match_substring_regex(strings, D.re2(pattern))
    return np.asarray(m.fill_null(False).to_numpy(zero_copy_only=False), bool)


def _groups(strings: pa.Array, pattern: str) -> list[pa.Array]:
    """``regexp_extract(strings, pattern, i)`` for every group i: "" where the pattern or the group
    does not match (as Spark's), null where the string is null."""
    if len(strings) == 0:
        return [pa.array([], pa.string())] * D.re2(pattern, named=True).count("(?P<")
    found = pc.extract_regex(strings, D.re2(pattern, named=True))
    fields = found.flatten()  # null where no match
    return [pc.if_else(strings.is_null(), None, f.fill_null("")) for f in fields]


def _nullif_empty(strings: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(strings, ""), None, strings)


def _try_int(strings: pa.Array, typ: pa.DataType) -> pa.Array:
    """Spark's ``try_cast(s AS INT|BIGINT)``: surrounding whitespace and control characters ignored,
    an optional sign, decimal digits only; null on anything else and on overflow."""
    bits = 32 if typ == pa.int32() else 64
    if len(strings) == 0 or strings.null_count == len(strings):
        return pa.nulls(len(strings), typ)
    trimmed = pc.utf8_trim(strings, "".join(map(chr, [*range(0x21), 0x7F])))
    ok = pc.match_substring_regex(trimmed, r"^[+-]?[0-9]+$").fill_null(False)
    neg = pc.starts_with(trimmed, "-")
    digits = pc.utf8_ltrim(pc.utf8_ltrim(trimmed, "+-"), "0")
    limit = {32: ("2147483647", "2147483648"), 64: ("9223372036854775807", "9223372036854775808")}[bits]
    width = pc.utf8_length(digits)
    fits = pc.or_(
        pc.less(width, len(limit[0])),
        pc.and_(pc.equal(width, len(limit[0])), pc.less_equal(digits, pc.if_else(neg, limit[1], limit[0]))),
    )
    valid = pc.and_(ok, fits.fill_null(False))
    text = pc.if_else(valid, pc.binary_join_element_wise(pc.if_else(neg, "-", ""), digits, ""), "0")
    text = pc.if_else(pc.equal(text, "-"), "0", pc.if_else(pc.equal(text, ""), "0", text))
    return pc.if_else(valid, pc.cast(text, typ), pa.scalar(None, typ))


def _spread(values: pa.Array, idx: np.ndarray, n: int) -> pa.Array:
    """``values`` (one per row ``idx``) placed in an array of ``n`` rows, null elsewhere."""
    pos = np.full(n, len(values), np.int64)
    pos[idx] = np.arange(idx.size)
    return pa.concat_arrays([values, pa.nulls(1, values.type)]).take(pa.array(pos))


def _pick(n: int, typ: pa.DataType, *choices: tuple[np.ndarray, pa.Array]) -> pa.Array:
    """Row i from the first (mask, values) whose mask is true at i (``CASE WHEN``), else null."""
    pos = np.full(n, -1, np.int64)
    base = 0
    arrays = []
    for mask, values in choices:
        take = mask & (pos < 0)
        pos[take] = base + np.flatnonzero(take)
        base += len(values)
        arrays.append(values.cast(typ))
    pos[pos < 0] = base
    return pa.concat_arrays([*arrays, pa.nulls(1, typ)]).take(pa.array(pos))


def _np_bool(values: pa.Array) -> np.ndarray:
    return np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), bool)


def _kinds(lines: pa.Array) -> np.ndarray:
    """The kind of each line: the first pattern of the cascade that matches (a prefix first)."""
    n = len(lines)
    kind = np.full(n, K_UNPARSED, np.int32)
    dumping = _np_bool(pc.starts_with(lines, "Dumping "))
    recordish = ~dumping & _np_bool(pc.starts_with(lines, "| "))
    kind[dumping] = K_DUMPING
    for idx, cascade in ((np.flatnonzero(recordish), _RECORDISH), (np.flatnonzero(~dumping & ~recordish), _OTHER)):
        for pattern, k in cascade:
            if idx.size == 0:
                break
            m = _match(lines.take(pa.array(idx)), pattern)
            kind[idx[m]] = k
            idx = idx[~m]
    return kind


def _path_columns(headers: pa.Array, section: np.ndarray) -> dict[str, pa.Array]:
    """What each line's governing ``Dumping <path>`` line says (D.split_dump_path), computed once per
    distinct header (a chunk holds few) and spread to the lines."""
    enc = pc.dictionary_encode(headers)
    hdr = enc.dictionary
    idx = enc.indices
    dpath = _groups(hdr, D.DUMPING_LINE)[0]
    parent, topic, pnum, _, _ = (_nullif_empty(g) for g in _groups(dpath, D.PARTITION_PATH))
    offset = _nullif_empty(_groups(dpath, D.FILE_NAME)[0])
    has_topic = _np_bool(topic.is_valid())
    broker_dir = has_topic & _match(parent, D.BROKER_DIR)
    broker = pc.if_else(pa.array(broker_dir), parent, D.UNKNOWN_BROKER)
    is_txn = _np_bool(pc.equal(topic, "__transaction_state"))
    checkpoint = _match(dpath, _CHECKPOINT)
    ignored = (has_topic & _np_bool(pc.is_in(topic, pa.array(sorted(IGNORED_TOPICS), pa.string())))) | checkpoint
    data_section = (
        (~has_topic | ~is_txn & ~ignored) & (_match(dpath, _LOG_FILE) | ~_match(dpath, D.FILE_NAME)) & ~checkpoint
    )
    governed = pa.array(section > 0)

    def spread(values: pa.Array, default: Any = None) -> pa.Array:
        out = values.take(idx)
        return pc.if_else(governed, out, pa.scalar(default, values.type))

    return {
        "dpath": spread(dpath),
        "broker": spread(broker, D.UNKNOWN_BROKER),
        "topic": spread(topic),
        "partition": spread(_try_int(pnum, pa.int32())),
        "file_offset": spread(_try_int(offset, pa.int64())),
        "is_txn_state": spread(pa.array(is_txn), False),
        "data_section": spread(pa.array(data_section), False),
        "ignored": spread(pa.array(ignored), False),
    }


def _tokens(lines: pa.Array, positions: list[np.ndarray]) -> list[pa.Array]:
    """The ``split(line, " ")`` token at 1-based ``positions`` (one number per line) of every line."""
    tokens = pc.split_pattern(lines, " ")
    starts = tokens.offsets.to_numpy()[:-1]
    values = tokens.values
    return [values.take(pa.array(starts + p - 1)) for p in positions]


def _batch_fields(lines: pa.Array) -> dict[str, pa.Array]:
    """Batch line fields by token position (BATCH_LINE has matched: every token is where it should be)."""
    n = len(lines)
    shift = np.where(_np_bool(pc.match_substring(lines, " deleteHorizonMs: ")), 2, 0)
    names = list(D.BATCH_TOKENS)
    at = [np.full(n, D.BATCH_TOKENS[k]) + (shift if k in D.BATCH_TOKENS_AFTER_CONTROL else 0) for k in names]
    tok = dict(zip(names, _tokens(lines, at), strict=True))
    out = {
        "base_offset": _try_int(tok["base_offset"], pa.int64()),
        "last_offset": _try_int(tok["last_offset"], pa.int64()),
        "record_count": _try_int(tok["count"], pa.int32()),
        "base_sequence": _try_int(tok["base_sequence"], pa.int32()),
        "producer_id": _try_int(tok["producer_id"], pa.int64()),
        "producer_epoch": _try_int(tok["producer_epoch"], pa.int32()),
        "partition_leader_epoch": _try_int(tok["partition_leader_epoch"], pa.int32()),
        "is_transactional": pc.equal(tok["is_transactional"], "true"),
        "is_control": pc.equal(tok["is_control"], "true"),
        "delete_horizon": _try_int(_groups(lines, D.DELETE_HORIZON)[0], pa.int64()),
        "position": _try_int(tok["position"], pa.int64()),
        "timestamp_type": pc.cast(pc.equal(tok["timestamp_type"], "LogAppendTime:"), pa.int32()),
        "max_timestamp": _try_int(tok["max_timestamp"], pa.int64()),
        "size": _try_int(tok["size"], pa.int64()),
        "magic": _try_int(tok["magic"], pa.int32()),
        "compression": _codec(tok["compresscodec"]),
        "crc": _try_int(tok["crc"], pa.int64()),
        "crc_valid": pc.equal(tok["isvalid"], "true"),
    }
    return out


def _codec(names: pa.Array) -> pa.Array:
    lower = pc.utf8_lower(names)
    found = pc.index_in(lower, pa.array(list(D.CODEC_IDS), pa.string()))
    return pa.array(list(D.CODEC_IDS.values()), pa.int32()).take(found)


def _state_ids(names: pa.Array) -> pa.Array:
    """The TransactionStatus id of each state name (null for any other text)."""
    found = pc.index_in(names, pa.array(list(D.STATE_IDS), pa.string()))
    return pa.array(list(D.STATE_IDS.values()), pa.int32()).take(found)


def _spark_json(value: Any, typ: pa.DataType) -> Any:
    """One JSON value as Spark's ``from_json`` converts it to ``typ`` (a value it cannot convert makes
    the innermost struct field holding it null; a number or object read as a string is its text)."""
    if value is None:
        return None
    if pa.types.is_struct(typ):
        if not isinstance(value, dict):
            raise ValueError(value)
        out = {}
        for f in typ:
            try:
                out[f.name] = _spark_json(value.get(f.name), f.type)
            except ValueError:
                out[f.name] = None
        return out
    if pa.types.is_list(typ):
        if not isinstance(value, list):
            raise ValueError(value)
        return [_spark_json(v, typ.value_type) for v in value]
    if pa.types.is_string(typ):
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, separators=(",", ":"))
    bits = typ.bit_width - 1
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**bits) <= value < 2**bits:
        raise ValueError(value)
    return value


def _double_quoted(text: str) -> str:
    """``text`` with its 'single-quoted' strings double-quoted (Spark's JSON reader allows them)."""
    if "'" not in text:
        return text
    out: list[str] = []
    quote = ""  # the quote of the string we are in
    i = 0
    while i < len(text):
        c = text[i]
        if quote and c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("'" if quote == "'" and nxt == "'" else c + nxt)
            i += 2
            continue
        if not quote and c in "\"'":
            quote = c
            c = '"'
        elif quote and c == quote:
            quote = ""
            c = '"'
        elif quote == "'" and c == '"':
            c = '\\"'
        out.append(c)
        i += 1
    return "".join(out)


def _from_json(strings: pa.Array, typ: pa.StructType) -> pa.StructArray:
    """Spark's ``from_json(s, typ)`` over JSON objects, with ``pyarrow.json``; a batch it rejects (a
    value of another JSON type than ``typ`` says, a duplicate key, broken JSON: never in the tool's
    output) is converted line by line as Spark would."""
    if len(strings) == 0:
        return pa.array([], typ)
    import io

    import pyarrow.json as pj

    text = pc.replace_substring_regex(strings, *_NUMBER_AS_TEXT)
    data = ("\n".join(text.to_pylist()) + "\n").encode()
    try:
        table = pj.read_json(
            io.BytesIO(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(typ)), unexpected_field_behavior="ignore"),
        )
        if table.num_rows == len(strings):
            return pa.StructArray.from_arrays(
                [table.column(f.name).combine_chunks().cast(f.type) for f in typ], fields=list(typ)
            )
    except (pa.ArrowInvalid, ValueError):
        pass
    rows = []
    decoder = json.JSONDecoder()
    for s in strings.to_pylist():
        try:  # the first JSON value: Spark ignores what follows it
            rows.append(_spark_json(decoder.raw_decode(_double_quoted(s))[0], typ))
        except ValueError:  # not JSON (json.JSONDecodeError), or not an object
            rows.append(None)
    return pa.array(rows, typ)


def _json_partitions(parts: pa.Array) -> pa.Array:
    """``transactionPartitions`` → ``["topic-p", ..]`` (null when it or any entry's partitionIds is null)."""
    n = len(parts)
    entries = parts.flatten()
    entry_row = np.asarray(pc.list_parent_indices(parts).to_numpy(zero_copy_only=False), np.int64)
    topic, ids = entries.flatten()
    bad = np.zeros(n, bool)
    bad[entry_row[_np_bool(ids.is_null())]] = True
    id_entry = np.asarray(pc.list_parent_indices(ids).to_numpy(zero_copy_only=False), np.int64)
    names = pc.binary_join_element_wise(
        topic.take(pa.array(id_entry, pa.int64())), pc.cast(ids.flatten(), pa.string()), "-"
    )
    counts = np.bincount(entry_row[id_entry], minlength=n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    valid = _np_bool(parts.is_valid()) & ~bad
    return pa.ListArray.from_arrays(pa.array(offsets), names, mask=pa.array(~valid))


def _txn_fields(lines: pa.Array) -> dict[str, pa.Array]:
    """``__transaction_state`` record lines → TXN_STATE fields (the 3.x Scala text or the 4.x JSON)."""
    n = len(lines)
    scala_key, scala_val = _groups(lines, D.TXN_SCALA)
    is_scala = _match(lines, D.TXN_SCALA)
    json_key, json_val = _groups(lines, D.TXN_JSON)
    is_json = ~is_scala & _match(lines, D.TXN_JSON)
    tomb = np.where(is_scala, _np_bool(pc.equal(scala_val, "<DELETE>")), _np_bool(pc.equal(json_val, "<DELETE>")))
    sc = is_scala & ~tomb
    js = is_json & ~tomb
    sv = _groups(scala_val, D.TXN_SCALA_VALUE)
    ji = np.flatnonzero(is_json)
    jv_i = np.flatnonzero(js)
    key_full = _spread(_from_json(json_key.take(pa.array(ji, pa.int64())), _KEY_JSON), ji, n)
    value_full = _spread(_from_json(json_val.take(pa.array(jv_i, pa.int64())), _VALUE_JSON), jv_i, n)
    kf = key_full.flatten()  # type, data
    vf = dict(zip(["version", "type", "data"], value_full.flatten(), strict=True))
    data = dict(zip([f.name for f in _VALUE_JSON["data"].type], vf["data"].flatten(), strict=True))

    def field(name: str, typ: pa.DataType, default: int | None = None) -> pa.Array:
        """The JSON value's ``data.<name>`` (or ``default`` when it is absent: a tagged field)."""
        value = data[name] if default is None else pc.coalesce(data[name], pa.scalar(default, data[name].type))
        return _pick(n, typ, (js, value))

    def coalesce(typ: pa.DataType, *values: pa.Array) -> pa.Array:
        return pc.coalesce(*[v.cast(typ) for v in values])

    status = data["transactionStatus"]
    scala_parts = sv[3]
    scala_list = _pick(
        n,
        pa.list_(pa.string()),
        (_np_bool(pc.equal(scala_parts, "")), pa.array([[]] * n, pa.list_(pa.string()))),
        (np.ones(n, bool), pc.split_pattern(scala_parts, ",")),
    )
    return {
        "txn_decoded": pa.array(is_scala | is_json),
        "transactional_id": _pick(n, pa.string(), (is_scala, scala_key), (is_json, kf[1].flatten()[0])),
        "is_tombstone": pa.array(tomb),
        "key_version": _pick(
            n, pa.int32(), (is_scala, pa.array(np.zeros(n, np.int32))), (is_json, _try_int(kf[0], pa.int32()))
        ),
        "value_version": _pick(n, pa.int32(), (js, _try_int(pc.coalesce(vf["version"], vf["type"]), pa.int32()))),
        "producer_id": coalesce(
            pa.int64(), _pick(n, pa.int64(), (sc, _try_int(sv[0], pa.int64()))), field("producerId", pa.int64())
        ),
        "producer_epoch": coalesce(
            pa.int32(), _pick(n, pa.int32(), (sc, _try_int(sv[1], pa.int32()))), field("producerEpoch", pa.int32())
        ),
        "timeout_ms": coalesce(
            pa.int64(),
            _pick(n, pa.int64(), (sc, _try_int(sv[5], pa.int64()))),
            field("transactionTimeoutMs", pa.int64()),
        ),
        "state": coalesce(
            pa.int32(),
            _pick(n, pa.int32(), (sc, _state_ids(sv[2]))),
            _pick(n, pa.int32(), (js, _try_int(status, pa.int32()))),
            _pick(n, pa.int32(), (js, _state_ids(status))),
        ),
        "partitions": _pick(
            n, pa.list_(pa.string()), (sc, scala_list), (js, _json_partitions(data["transactionPartitions"]))
        ),
        "last_update_timestamp": coalesce(
            pa.int64(),
            _pick(n, pa.int64(), (sc, _try_int(sv[4], pa.int64()))),
            field("transactionLastUpdateTimestampMs", pa.int64()),
        ),
        "txn_start_timestamp": field("transactionStartTimestampMs", pa.int64()),
        "previous_producer_id": field("previousProducerId", pa.int64(), default=-1),
        "next_producer_id": field("nextProducerId", pa.int64(), default=-1),
        "next_producer_epoch": field("nextProducerEpoch", pa.int32(), default=-1),
        "client_transaction_version": field("clientTransactionVersion", pa.int32(), default=0),
    }


def _valid_utf8(lines: pa.Array) -> pa.Array:
    """``lines`` as valid UTF-8 (the tool prints UTF-8; a file in another encoding gets U+FFFD, as a
    decoder would give it, instead of failing the UTF-8 kernels below)."""
    try:
        lines.validate(full=True)
        return lines
    except pa.ArrowInvalid:
        raw = lines.cast(pa.binary()).to_pylist()
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string())


def parse_lines(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``DUMP_LINES_SCHEMA`` → ``PARSED_SCHEMA``: each line's kind and typed fields, with ``pyarrow.compute``.

    Every pattern runs only on the lines it can apply to (a batch line is tried against BATCH_LINE
    first, a record line only against the record forms), so a dump costs about one pattern per line.
    """
    n = batch.num_rows
    lines = _valid_utf8(batch.column("line"))
    section = np.asarray(batch.column("section").to_numpy(zero_copy_only=False), np.int64)
    line_no = batch.column("line_no")
    kind = _kinds(lines)
    path = _path_columns(batch.column("section_header"), section)

    def rows(k: int, also: np.ndarray | None = None) -> np.ndarray:
        return np.flatnonzero((kind == k) & (True if also is None else also))

    def sub(idx: np.ndarray) -> pa.Array:
        return lines.take(pa.array(idx, pa.int64()))

    # the dump file's name without extension, on the Dumping lines (_replica_names)
    dumping = rows(K_DUMPING)
    files = batch.column("file").take(pa.array(dumping, pa.int64()))
    stem = _spread(_groups(files, _STEM)[0], dumping, n)

    # batch lines, legacy entries, record lines
    b = rows(K_BATCH)
    fields = {k: _spread(v, b, n) for k, v in _batch_fields(sub(b)).items()}
    legacy = rows(K_LEGACY)
    lpos, lsize, lcodec = _tokens(sub(legacy), [np.full(legacy.size, i) for i in (4, 8, 12)])
    for name, values in (
        ("position", _try_int(lpos, pa.int64())),
        ("size", _try_int(lsize, pa.int64())),
        ("compression", _codec(lcodec)),
    ):
        fields[name] = pc.coalesce(fields[name], _spread(values, legacy, n))
    r = rows(K_RECORD)
    rec_offset, rec_ts = _tokens(sub(r), [np.full(r.size, 3), np.full(r.size, 5)])
    marker = r[_np_bool(pc.match_substring(sub(r), " endTxnMarker: "))]
    marker_type, marker_epoch = _groups(sub(marker), D.END_TXN_MARKER)

    # damage shown inside a segment (quarantined by its byte range in assemble_*)
    bad_batch = np.zeros(n, bool)
    bad_batch[b[_match(sub(b), _BAD_BATCH)]] = True
    damage = np.isin(kind, DAMAGE_KINDS) | bad_batch
    first_chars = pc.utf8_slice_codeunits(lines, 0, D.DETAIL_CHARS)
    invalid = rows(K_INVALID_BYTES)

    # producer snapshot entries
    s = rows(K_SNAPSHOT)
    sg = _groups(sub(s), D.SNAPSHOT_LINE)

    def sn(i: int, typ: pa.DataType | None = None) -> pa.Array:  # group i (1-based), try_cast
        return _try_int(sg[i - 1], typ or pa.int64())

    minus_one = pa.scalar(-1, pa.int64())
    snap = {
        "producer_id": sn(1),
        "producer_epoch": sn(2, pa.int32()),
        "coordinator_epoch": sn(3, pa.int32()),
        "first_offset": pc.coalesce(sn(5), sn(6), minus_one),
        "last_offset": pc.coalesce(sn(10), minus_one),
        "last_sequence": pc.coalesce(sn(9, pa.int32()), pa.scalar(-1, pa.int32())),
        "last_timestamp": pc.coalesce(sn(7), sn(12)),
    }

    # __transaction_state record lines
    is_txn = _np_bool(path["is_txn_state"])
    t = rows(K_RECORD, is_txn)
    txn = {k: _spread(v, t, n) for k, v in _txn_fields(sub(t)).items()}
    unknown_key = np.zeros(n, bool)
    unknown_key[t[_match(sub(t), D.TXN_UNKNOWN_KEY)]] = True

    # quarantine: lines no format knows, lines outside any readable segment; corrupt snapshots
    governed = section > 0
    ignored = _np_bool(path["ignored"])
    in_segment = _np_bool(path["data_section"]) | (is_txn & governed)
    outside = ~in_segment & ~ignored
    orphan = ~governed & np.isin(kind, (K_BATCH, K_LEGACY, K_RECORD, K_SNAPSHOT, K_START))
    no_partition = (kind == K_DUMPING) & _np_bool(path["topic"].is_null()) & ~ignored
    corrupt = rows(K_SNAPSHOT_CORRUPT, governed)
    snapshot_crc = np.zeros(n, bool)
    snapshot_crc[corrupt[_np_bool(pc.not_equal(_groups(sub(corrupt), D.SNAPSHOT_CORRUPT_LINE)[0], ""))]] = True
    reasons = [
        (kind == K_UNPARSED, D.REASON_UNPARSED),
        (kind == K_MALFORMED_28, D.REASON_MALFORMED_2_8),
        (orphan, "dump_log_no_dumping_line"),
        (outside & (kind == K_INVALID_BYTES), D.REASON_INVALID_BYTES),
        (outside & (kind == K_ELIDED), D.REASON_ELIDED),
        (outside & (kind == K_TOOL_ERROR), D.REASON_TOOL_ERROR),
        (outside & bad_batch, D.REASON_CRC),
        (unknown_key, D.REASON_TXN_UNKNOWN_KEY),
        (no_partition, D.REASON_NO_PARTITION),
        (snapshot_crc, D.REASON_SNAPSHOT_CRC),
        ((kind == K_SNAPSHOT_CORRUPT) & governed, D.REASON_BAD_SNAPSHOT),
    ]
    code = np.select([m for m, _ in reasons], np.arange(1, len(reasons) + 1), 0)
    reason = pa.array([None, *(r for _, r in reasons)], pa.string()).take(pa.array(code))
    entries_ignored = pc.binary_join_element_wise(
        batch.column("file"), ":", pc.cast(line_no, pa.string()), ": entries ignored: ", first_chars, ""
    )
    is_corrupt = (kind == K_SNAPSHOT_CORRUPT) & governed
    detail = _pick(n, pa.string(), (is_corrupt, entries_ignored), (code > 0, first_chars))

    columns: dict[str, pa.Array] = {
        "file": batch.column("file"),
        "line_no": line_no,
        "section": batch.column("section"),
        "kind_code": pa.array(kind, pa.int32()),
        "after_batch": batch.column("after_batch"),
        "loc": batch.column("loc"),
        "loc_named": batch.column("loc_named"),
        "stem": stem,
        **path,
        "damage_text": pc.if_else(pa.array(damage), first_chars, None),
        "invalid_bytes": _spread(_try_int(_groups(sub(invalid), D.INVALID_BYTES_LINE)[0], pa.int64()), invalid, n),
        **fields,
        "rec_offset": _spread(_try_int(rec_offset, pa.int64()), r, n),
        "rec_timestamp": _spread(_try_int(rec_ts, pa.int64()), r, n),
        "marker_type": _spread(marker_type, marker, n),
        "marker_epoch": _spread(_try_int(marker_epoch, pa.int32()), marker, n),
        "first_offset": _spread(snap["first_offset"], s, n),
        "last_timestamp": _spread(snap["last_timestamp"], s, n),
        "coordinator_epoch": _spread(snap["coordinator_epoch"], s, n),
        "last_sequence": _spread(snap["last_sequence"], s, n),
        **txn,
        "reason": reason,
        "detail": detail,
    }
    for name in ("producer_id", "producer_epoch"):
        columns[name] = pc.coalesce(fields[name], _spread(snap[name], s, n), txn[name])
    columns["last_offset"] = pc.coalesce(fields["last_offset"], _spread(snap["last_offset"], s, n))
    return pa.RecordBatch.from_arrays([columns[f.name].cast(f.type) for f in PARSED_SCHEMA], schema=PARSED_SCHEMA)


# ============================================================================ 3. assemble


def _np(table: pa.Table, name: str, dtype: Any, fill: Any) -> np.ndarray:
    col = table.column(name)
    return (
        np.asarray(col.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype) if len(col) else np.empty(0, dtype)
    )


def _first(table: pa.Table, name: str) -> Any:
    col = table.column(name).drop_null()
    return col[0].as_py() if len(col) else None


def damage_rows(
    table: pa.Table, pos_col: str = "position", size_col: str = "size", dump_col: str = "file"
) -> dict[str, Any] | None:
    """What the dump says is damaged in one dumped segment, as the segment reader would say it.

    ``table`` is the segment's lines in line order. Each row names the dumped segment (``file``)
    and a byte range in it, from the positions the dump printed (the dump file and its line go
    into ``detail``):

    * a batch line with ``isvalid: false`` → ``crc_mismatch`` at the batch's position, its size;
    * ``Found N invalid bytes at the end of <file>`` → ``truncated_tail`` after the last batch, N bytes
      (``DumpLogSegments.dumpLog``: the bytes after the last batch ``FileRecords.batches`` framed);
    * a ``...`` elision → ``dump_log_elided`` from the end of the batch above it to the next batch
      shown (length null when none follows: the rest of the segment is unknown);
    * an exception that stopped the tool → ``dump_log_tool_error`` after the last batch shown.
    """
    kind = _np(table, "kind_code", np.int32, -1)
    line_no = _np(table, "line_no", np.int64, 0)
    is_frame = np.isin(kind, (K_BATCH, K_LEGACY))
    text = table.column("damage_text")
    has = np.asarray(text.is_valid().to_numpy(zero_copy_only=False), bool) if len(text) else np.zeros(0, bool)
    idx = np.flatnonzero(has)
    if idx.size == 0:
        return None
    pos = _np(table, pos_col, np.int64, -1)
    size = _np(table, size_col, np.int64, 0)
    frame_idx = np.flatnonzero(is_frame)
    end = pos + size
    # the end of the last frame above each line (0 at the segment start), the position of the next one
    above = np.searchsorted(frame_idx, idx, side="left") - 1
    prev_end = np.where(above >= 0, end[frame_idx[np.maximum(above, 0)]] if frame_idx.size else 0, 0)
    below = np.searchsorted(frame_idx, idx, side="right")
    next_pos = np.where(
        below < frame_idx.size,
        pos[frame_idx[np.minimum(below, max(frame_idx.size - 1, 0))]] if frame_idx.size else -1,
        -1,
    )
    k = kind[idx]
    inv = _np(table, "invalid_bytes", np.int64, -1)[idx]
    is_bad_batch = k == K_BATCH
    position = np.where(is_bad_batch, pos[idx], prev_end)
    length = np.where(
        is_bad_batch,
        size[idx],
        np.where(k == K_INVALID_BYTES, inv, np.where((k == K_ELIDED) & (next_pos >= 0), next_pos - prev_end, -1)),
    )
    reason = np.where(
        is_bad_batch,
        D.REASON_CRC,
        np.where(
            k == K_INVALID_BYTES, D.REASON_INVALID_BYTES, np.where(k == K_ELIDED, D.REASON_ELIDED, D.REASON_TOOL_ERROR)
        ),
    )
    dump_file = _first(table, dump_col)
    texts = text.take(pa.array(idx)).to_pylist()
    return {
        "position": pa.array(position, pa.int64()),
        "length": pa.array(np.where(length >= 0, length, 0), pa.int64(), mask=length < 0),
        "reason": pa.array(reason.tolist(), pa.string()),
        "detail": pa.array([f"{dump_file}:{int(n)}: {t}" for n, t in zip(line_no[idx], texts)], pa.string()),
        "n": int(idx.size),
    }


def assemble_segment(table: pa.Table) -> pa.Table:
    """One dumped segment's parsed lines → SEGMENT_SUMMARY rows (runs, markers, the segment row).

    Runs in executors (``applyInArrow``); vectorized with numpy, then
    ``segment_fragments`` exactly as ``summarize_segment`` does for the bytes.
    """
    from txnlog.kafka.control import ControlStatus
    from txnlog.kafka.record_batch import BATCH_COLUMNS
    from txnlog.producer_state import segment_producers
    from txnlog.reconstruct import SUMMARY_FRAGMENT_COLUMNS, segment_fragments

    table = table.sort_by("line_no")
    kind = _np(table, "kind_code", np.int32, -1)
    line_no = _np(table, "line_no", np.int64, 0)
    broker, topic, partition, dpath = (_first(table, c) for c in ("broker", "topic", "partition", "dpath"))
    file_offset = _first(table, "file_offset")
    if file_offset is None:
        starts = table.filter(pa.compute.equal(table.column("kind_code"), K_START))
        file_offset = _first(starts, "base_offset")

    is_b = kind == K_BATCH
    bl = line_no[is_b]
    valid_all = _np(table, "crc_valid", bool, False)[is_b]
    nb = int(bl.size)

    def col(name: str, dtype: Any, fill: Any) -> np.ndarray:
        return _np(table, name, dtype, fill)[is_b]

    # record lines → their batch (the closest batch line above them)
    is_r = kind == K_RECORD
    r_line = line_no[is_r]
    r_batch = np.searchsorted(bl, r_line, side="right") - 1
    r_ok = r_batch >= 0
    r_ts = _np(table, "rec_timestamp", np.int64, -1)[is_r]
    r_after = _np(table, "after_batch", bool, False)[is_r]
    r_mtype = table.column("marker_type").filter(pa.array(is_r)).to_pylist() if is_r.any() else []
    r_mtype_id = (
        np.array([D.CONTROL_TYPE_IDS.get(t, -1) if t else -1 for t in r_mtype], np.int16)
        if r_mtype
        else np.empty(0, np.int16)
    )
    r_mepoch = _np(table, "marker_epoch", np.int32, -1)[is_r]

    max_ts = col("max_timestamp", np.int64, -1)
    base_ts = max_ts.copy()
    first = r_ok & r_after & (r_batch >= 0)
    base_ts[r_batch[first]] = r_ts[first]
    dh = table.column("delete_horizon").filter(pa.array(is_b))
    dh_np = np.asarray(dh.fill_null(-1).to_numpy(zero_copy_only=False), np.int64) if nb else np.empty(0, np.int64)
    base_ts = np.where(dh_np >= 0, dh_np, base_ts)

    is_control = col("is_control", bool, False)
    count = col("record_count", np.int32, 0)
    status = np.where(
        is_control,
        np.where(count == 0, ControlStatus.ZERO_RECORDS, ControlStatus.END_TXN_MARKER),
        ControlStatus.NOT_CONTROL,
    ).astype(np.int8)
    ctype = np.full(nb, -1, np.int16)
    cepoch = np.full(nb, -1, np.int32)
    marker_ts = np.where(is_control, max_ts, -1)
    # a record line of a control batch says what it is: a marker, or another control type
    ctl_rec = r_ok & (r_after | (r_mtype_id >= 0))
    if ctl_rec.any():
        rb = r_batch[ctl_rec]
        on_ctl = is_control[rb]
        rb, mt, me, ts = rb[on_ctl], r_mtype_id[ctl_rec][on_ctl], r_mepoch[ctl_rec][on_ctl], r_ts[ctl_rec][on_ctl]
        status[rb] = np.where(mt >= 0, ControlStatus.END_TXN_MARKER, ControlStatus.OTHER_TYPE)
        ctype[rb] = mt
        cepoch[rb] = np.where(mt >= 0, me, -1)
        marker_ts[rb] = ts

    size = col("size", np.int64, 12)
    batches = {
        "position": col("position", np.int64, -1),
        "base_offset": col("base_offset", np.int64, -1),
        "last_offset": col("last_offset", np.int64, -1),
        "batch_length": (size - 12).astype(np.int32),
        "partition_leader_epoch": col("partition_leader_epoch", np.int32, -1),
        "magic": col("magic", np.int8, 2),
        "crc": col("crc", np.int64, 0).astype(np.uint32),
        "crc_valid": valid_all,
        "compression": col("compression", np.int8, 0),
        "timestamp_type": col("timestamp_type", np.int8, 0),
        "is_transactional": col("is_transactional", bool, False),
        "is_control": is_control,
        "last_offset_delta": (col("last_offset", np.int64, 0) - col("base_offset", np.int64, 0)).astype(np.int32),
        "base_timestamp": base_ts,
        "max_timestamp": max_ts,
        "producer_id": col("producer_id", np.int64, -1),
        "producer_epoch": col("producer_epoch", np.int16, -1),
        "base_sequence": col("base_sequence", np.int32, -1),
        "record_count": count,
        "control_key_version": np.where(is_control, 0, -1).astype(np.int16),
        "control_type": ctype,
        "control_value_version": np.where(status == ControlStatus.END_TXN_MARKER, 0, -1).astype(np.int16),
        "coordinator_epoch": cepoch,
        "marker_timestamp": marker_ts,
        "control_status": status,
        "has_delete_horizon": dh_np >= 0,
    }
    for name, dtype in BATCH_COLUMNS.items():  # columns added to the binary scan later: neutral values
        if name not in batches:
            batches[name] = np.zeros(nb, dtype)
    # batches with isvalid: false are quarantined (crc_mismatch) and, as in the binary path, not used
    batches = {k: np.asarray(v, BATCH_COLUMNS.get(k))[valid_all] for k, v in batches.items()}
    out: list[pa.RecordBatch] = []
    frags = segment_fragments(batches)
    n = len(frags["kind"])
    base = {"broker": broker, "topic": topic, "file": dpath}
    # the producers' state in this segment, as summarize_segment gives it for the bytes (producer_state)
    out.append(producer_rows(broker, topic, partition, dpath, file_offset, segment_producers(batches)))
    if n:
        out.append(
            batch_of(
                SEGMENT_SUMMARY_SCHEMA,
                n,
                {
                    **base,
                    "kind": pa.array(np.where(frags["kind"] == 1, KIND_MARKER, KIND_RUN).tolist(), pa.string()),
                    "partition": pa.array([partition] * n, pa.int32()),
                    "file_offset": pa.array([file_offset] * n, pa.int64()),
                    **{k: frags[k] for k in SUMMARY_FRAGMENT_COLUMNS},
                    "control_type": frags["control_type"].astype(np.int32),
                },
            )
        )
    is_l = kind == K_LEGACY
    ends = (_np(table, "position", np.int64, 0) + _np(table, "size", np.int64, 0))[is_b | is_l]
    has = batches["base_offset"].size > 0
    out.append(
        batch_of(
            SEGMENT_SUMMARY_SCHEMA,
            1,
            {
                **base,
                "kind": KIND_SEGMENT,
                "partition": pa.array([partition], pa.int32()),
                "file_offset": pa.array([file_offset], pa.int64()),
                "first_offset": pa.array([int(batches["base_offset"].min()) if has else None], pa.int64()),
                "last_offset": pa.array([int(batches["last_offset"].max()) if has else None], pa.int64()),
                "first_timestamp": pa.array([int(batches["base_timestamp"].min()) if has else None], pa.int64()),
                "last_timestamp": pa.array([int(batches["max_timestamp"].max()) if has else None], pa.int64()),
                "batch_count": np.full(1, batches["base_offset"].size, np.int64),
                "record_count": np.full(1, int(batches["record_count"].astype(np.int64).sum()), np.int64),
                "size_bytes": np.full(1, int(ends.max()) if ends.size else 0, np.int64),
                "legacy_entries": np.full(1, int(is_l.sum()), np.int64),
                **broker_timestamps(batches),
            },
        )
    )
    damage = damage_rows(table)
    if damage is not None:
        n = damage.pop("n")
        out.append(
            batch_of(
                SEGMENT_SUMMARY_SCHEMA,
                n,
                {
                    **base,
                    "kind": KIND_QUARANTINE,
                    "partition": pa.array([partition] * n, pa.int32()),
                    "file_offset": pa.array([file_offset] * n, pa.int64()),
                    **damage,
                },
            )
        )
    result = pa.Table.from_batches(out, schema=SEGMENT_SUMMARY_SCHEMA)
    return result.append_column("dump_file", pa.array([_first(table, "file")] * result.num_rows, pa.string()))


def assemble_txn_state(table: pa.Table) -> pa.Table:
    """One dumped ``__transaction_state`` segment: records get their batch's leader epoch.

    Input rows are the segment's batch lines (``kind_code`` batch, with
    ``partition_leader_epoch``) and its decoded record lines (TXN_STATE columns).
    A segment whose batches have no decoded record lines (dumped without
    ``--transaction-log-decoder``) yields one quarantine row saying so.
    """
    table = table.sort_by("line_no")
    kind = _np(table, "kind_code", np.int32, -1)
    line_no = _np(table, "line_no", np.int64, 0)
    is_b = kind == K_BATCH
    bl = line_no[is_b]
    ple = _np(table, "partition_leader_epoch", np.int32, -1)[is_b]
    valid = _np(table, "crc_valid", bool, True)[is_b]
    is_rec = kind == K_RECORD
    r_batch_all = np.searchsorted(bl, line_no, side="right") - 1
    # records of a batch marked isvalid: false are not used (the segment reader quarantines the batch)
    use = is_rec & ~((r_batch_all >= 0) & ~valid[np.maximum(r_batch_all, 0)] if bl.size else np.zeros(len(kind), bool))
    recs = table.filter(pa.array(use))
    r_batch = r_batch_all[use]
    epochs = np.where(r_batch >= 0, ple[np.maximum(r_batch, 0)] if ple.size else -1, -1).astype(np.int32)
    dump_file = _first(table, "dump_file")
    out = [
        recs.set_column(
            recs.schema.get_field_index("coordinator_epoch"), "coordinator_epoch", pa.array(epochs, pa.int32())
        )
        .select(TXN_STATE_SCHEMA.names)
        .cast(TXN_STATE_SCHEMA)
    ]
    damage = damage_rows(table, "batch_position", "batch_size", "dump_file")
    if damage is not None:
        n = damage.pop("n")
        out.append(
            pa.Table.from_batches(
                [
                    batch_of(
                        TXN_STATE_SCHEMA,
                        n,
                        {
                            "kind": KIND_QUARANTINE,
                            "broker": _first(table, "broker"),
                            "coordinator_partition": pa.array([_first(table, "partition")] * n, pa.int32()),
                            "file": _first(table, "dpath"),
                            **damage,
                        },
                    )
                ]
            )
        )
    counts = _np(table, "record_count", np.int64, 0)[is_b]
    decoded = np.zeros(bl.size, bool)
    all_recs = r_batch_all[is_rec]
    decoded[all_recs[all_recs >= 0]] = True
    missing = np.flatnonzero(~decoded & (counts > 0))
    if missing.size:
        n = 1
        out.append(
            pa.Table.from_batches(
                [
                    batch_of(
                        TXN_STATE_SCHEMA,
                        n,
                        {
                            "kind": KIND_QUARANTINE,
                            "broker": _first(table, "broker"),
                            "coordinator_partition": pa.array([_first(table, "partition")], pa.int32()),
                            "file": _first(table, "dump_file"),
                            "position": np.full(1, int(bl[missing[0]]), np.int64),
                            "length": np.full(1, 1, np.int64),
                            "reason": D.REASON_TXN_UNDECODED,
                            "detail": f"{missing.size} of {bl.size} batches of {_first(table, 'dpath')} "
                            "show no decoded record; "
                            "dump __transaction_state with --transaction-log-decoder",
                        },
                    )
                ]
            )
        )
    result = pa.concat_tables(out)
    return result.append_column("dump_file", pa.array([dump_file] * result.num_rows, pa.string()))


# ============================================================================ public API


def register_dump_log_source(spark: SparkSession) -> None:
    spark.dataSource.register(DumpLinesSource)


def _sql(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _in(*kinds: int) -> str:
    return "kind_code IN (" + ", ".join(map(str, kinds)) + ")"


#: the parsed columns assemble_segment reads
SEGMENT_COLUMNS = (
    "file line_no section kind_code after_batch dpath broker topic partition file_offset damage_text invalid_bytes "
    "base_offset last_offset record_count base_sequence producer_id producer_epoch partition_leader_epoch "
    "is_transactional is_control delete_horizon position timestamp_type max_timestamp size magic compression crc "
    "crc_valid rec_offset rec_timestamp marker_type marker_epoch"
).split()
#: TXN_STATE columns a decoded record line carries as parsed (the rest are null or set by assemble_txn_state)
RECORD_COLUMNS = (
    "transactional_id is_tombstone key_version value_version producer_id producer_epoch timeout_ms state partitions "
    "last_update_timestamp txn_start_timestamp previous_producer_id next_producer_id next_producer_epoch "
    "client_transaction_version"
).split()


def _records(lines: DataFrame) -> DataFrame:
    """TXN_STATE rows of the ``__transaction_state`` lines: the decoded record lines (3.x Scala text
    and 4.x JSON, parsed by the reader) with their batch lines, assembled per dumped segment."""
    parsed = {"kind": _sql("record"), "broker": "broker", "coordinator_partition": "partition", "file": "dpath"}
    parsed |= {"record_offset": "rec_offset", "record_timestamp": "rec_timestamp"}
    parsed |= {c: quoted(c) for c in RECORD_COLUMNS}
    txn_fields = arrow_to_spark_schema(TXN_STATE_SCHEMA).fields
    decoded = lines.filter(f"is_txn_state AND kind_code = {K_RECORD} AND txn_decoded").selectExpr(
        *[f"CAST({parsed.get(f.name, 'NULL')} AS {f.dataType.simpleString()}) AS {quoted(f.name)}" for f in txn_fields],
        "line_no",
        "section",
        "file AS dump_file",
        "kind_code",
        "dpath",
        "CAST(NULL AS int) AS partition_leader_epoch",
        "CAST(NULL AS bigint) AS record_count",
        "partition",
        "CAST(NULL AS boolean) AS crc_valid",
        "CAST(NULL AS bigint) AS batch_position",
        "CAST(NULL AS bigint) AS batch_size",
        "CAST(NULL AS string) AS damage_text",
        "CAST(NULL AS bigint) AS invalid_bytes",
    )
    txn_batches = lines.filter(f"is_txn_state AND {_in(K_BATCH, K_LEGACY, *DAMAGE_KINDS)}").selectExpr(
        *[
            f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
            for f in txn_fields
            if f.name not in ("broker", "file")
        ],
        "`broker`",
        "`dpath` AS `file`",
        "`line_no`",
        "`section`",
        "`file` AS `dump_file`",
        "`kind_code`",
        "`dpath`",
        "`partition_leader_epoch`",
        "CAST(`record_count` AS bigint) AS `record_count`",
        "`partition`",
        "`crc_valid`",
        "`position` AS `batch_position`",
        "`size` AS `batch_size`",
        "`damage_text`",
        "`invalid_bytes`",
    )
    both = decoded.unionByName(txn_batches)
    out_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA.append(pa.field("dump_file", pa.string())))
    return both.groupBy("dump_file", "section").applyInArrow(assemble_txn_state, out_schema)


def _replica_names(lines: DataFrame) -> DataFrame:
    """(dump_file, path broker) → replica name, for every dumped file (README, kafka-dump-log.sh).

    Deterministic, from the whole input:

    1. ``NAME=PATH`` names every dump under PATH: NAME, always.
    2. Otherwise the broker directory in the printed path (``.../<broker dir>/<topic>-<n>/``) names
       the replica, as before - unless the printed paths cannot tell replicas apart: the same
       segment path printed by several dump files (every broker's log dir is /var/lib/kafka/data),
       or no broker directory at all. Then every dump of that *location* (the directory below the
       ``--dump-log`` directory, or the directory given) that prints that broker directory takes
       the location's name, so a replica's segments, snapshots and __transaction_state dumps stay
       together.
    3. Dump files that still print the same segment path under the same name (files given one by
       one, or lying side by side in one directory) are told apart by the dump file's name
       (``b1.txt`` → ``b1``; under a location ``dumps/b1``).
    """
    d = (
        lines.filter(f"kind_code = {K_DUMPING}")
        .selectExpr(
            "file AS dump_file", "loc", "coalesce(loc_named, false) AS named", "broker AS pbroker", "dpath", "stem"
        )
        .distinct()
    )
    # the same printed path in several dump files: per printed broker, then per chosen base name
    d = d.selectExpr("*", "CAST(size(collect_set(dump_file) OVER (PARTITION BY pbroker, dpath)) > 1 AS int) AS clash")
    d = d.selectExpr(
        "*",
        "loc IS NOT NULL AND (named OR max(clash) OVER (PARTITION BY loc, pbroker) > 0 "
        f"OR pbroker = {_sql(D.UNKNOWN_BROKER)}) AS use_loc",
    )
    d = d.selectExpr("*", "CASE WHEN use_loc THEN loc ELSE pbroker END AS base")
    d = d.selectExpr(
        "*", "CAST(size(collect_set(dump_file) OVER (PARTITION BY base, dpath)) > 1 AND NOT named AS int) AS clash2"
    )
    return d.selectExpr(
        "dump_file",
        "pbroker",
        "CASE WHEN max(clash2) OVER (PARTITION BY dump_file, base) > 0 "
        "THEN CASE WHEN use_loc THEN concat_ws('/', base, stem) ELSE stem END ELSE base END AS replica",
    ).distinct()


def _named(df: DataFrame, names: DataFrame, dump_col: str = "dump_file") -> DataFrame:
    """``df`` with ``broker`` replaced by the replica name of its (dump file, path broker)."""
    from pyspark.sql import functions as F

    j = df.alias("r").join(
        F.broadcast(names).alias("n"),
        (F.col(f"r.{dump_col}") == F.col("n.dump_file")) & (F.col("r.broker") == F.col("n.pbroker")),
        "left",
    )
    # SQL text: one call into the JVM for the whole projection (txnlog.spark.schemas.shaped)
    return j.selectExpr(
        *[
            "coalesce(n.`replica`, r.`broker`) AS `broker`" if c == "broker" else f"r.{quoted(c)} AS {quoted(c)}"
            for c in df.columns
        ]
    )


def read_dump_logs(spark: SparkSession, paths: list[str]) -> DumpLogFrames:
    """``kafka-dump-log.sh`` outputs under ``paths`` → the rows of the segment and txn-state sources.

    ``paths`` are ``--dump-log`` values (``PATH`` or ``NAME=PATH``). ``summary`` has
    SEGMENT_SUMMARY_SCHEMA (run/marker/segment/snapshot/quarantine), ``records`` has
    TXN_STATE_SCHEMA (record/quarantine, plus one ``segment`` row per dumped
    ``__transaction_state`` segment: the coordinator partitions the dumps hold). ``file`` of a
    fragment is the dumped segment's path as printed. Damage the dump shows in a segment
    (``isvalid: false``, invalid bytes at the end, ``...`` elisions, the tool's exceptions) is
    quarantined by that segment's path and byte position, the dump file and line in ``detail``;
    a line no format knows is quarantined by the dump file and its line number (``length`` 1).
    ``broker`` is the replica name (:func:`_replica_names`). A small input is read in the driver by
    txnlog.spark.dump_log_arrow instead, with the same steps in Arrow.

    Spark only filters the parsed lines on their typed columns, names the replicas and groups the
    lines of each dumped segment for ``assemble_*``; the parse happened in the reader.
    """
    inputs = list_dump_inputs(paths)
    files = [f for f, _, _ in inputs]
    options = {
        "paths": json.dumps(files),
        "storage": storage.settings_option(),
        "locations": json.dumps({f: [loc, named] for f, loc, named in inputs}),
    }
    register_dump_log_source(spark)
    lines = spark.read.format(DUMP_LINES_SOURCE).options(**options).load()
    names = _replica_names(lines)

    # --- segments: the lines needed to rebuild each dumped data segment (the KRaft metadata log
    # and KRaft snapshots are no data partition: skipped as the log-dir reader skips them)
    seg_lines = lines.filter(
        f"data_section AND ({_in(K_DUMPING, K_START, K_BATCH, K_LEGACY, *DAMAGE_KINDS)} "
        f"OR (kind_code = {K_RECORD} AND (after_batch OR marker_type IS NOT NULL)))"
    ).select(*SEGMENT_COLUMNS)
    seg_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA.append(pa.field("dump_file", pa.string())))
    segments = seg_lines.groupBy("file", "section").applyInArrow(assemble_segment, seg_schema)

    # --- producer snapshots
    snapshots = lines.filter(
        f"kind_code = {K_SNAPSHOT} AND section > 0 AND NOT is_txn_state AND NOT ignored"
    ).selectExpr(
        f"{_sql(KIND_SNAPSHOT)} AS kind",
        "broker",
        "topic",
        "partition",
        "dpath AS file",
        "file_offset",
        "producer_id",
        "producer_epoch",
        "first_offset",
        "last_offset",
        "last_timestamp",
        "coordinator_epoch",
        "last_sequence",
        "file AS dump_file",
    )
    # --- quarantine: lines we cannot or must not read, by the dump file and line number (damage
    # inside a dumped segment is quarantined above, by the segment's own byte positions); a corrupt
    # producer snapshot (its entries are not printed: dumpProducerIdSnapshot prints the
    # CorruptSnapshotException message instead) by the whole file, as the segment reader does
    corrupt = f"kind_code = {K_SNAPSHOT_CORRUPT}"
    quarantine = lines.filter("reason IS NOT NULL").selectExpr(
        f"{_sql(KIND_QUARANTINE)} AS kind",
        "broker",
        "topic",
        "partition",
        f"CASE WHEN {corrupt} THEN dpath ELSE file END AS file",
        "file_offset",
        f"CASE WHEN {corrupt} THEN CAST(0 AS bigint) ELSE line_no END AS position",
        f"CASE WHEN {corrupt} THEN CAST(NULL AS bigint) ELSE CAST(1 AS bigint) END AS length",
        "reason",
        "detail",
        "file AS dump_file",
    )

    cols = [f.name for f in SEGMENT_SUMMARY_SCHEMA]
    summary_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)
    summary = (
        shaped(segments, summary_schema, "dump_file")
        .unionByName(shaped(snapshots, summary_schema, "dump_file"))
        .unionByName(shaped(quarantine, summary_schema, "dump_file"))
    )
    summary = _named(summary, names).select(*cols)

    records = _records(lines)
    # one row per dumped __transaction_state segment, records or not: which coordinator partitions
    # the dumps hold (an empty one too, as a copied empty __transaction_state-<n>/ directory counts)
    txn_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA)
    dumped = lines.filter(f"is_txn_state AND kind_code = {K_DUMPING}").selectExpr(
        f"{_sql(KIND_SEGMENT)} AS kind",
        "broker",
        "partition AS coordinator_partition",
        "dpath AS file",
        "file AS dump_file",
    )
    records = records.unionByName(shaped(dumped, txn_schema, "dump_file"))
    records = _named(records, names).select(*txn_schema.fieldNames())
    return DumpLogFrames(summary=summary, records=records, files=files)
