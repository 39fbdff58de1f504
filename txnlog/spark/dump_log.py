"""``--dump-log``: read ``kafka-dump-log.sh`` text into the same rows as the binary sources.

Three steps, all in Spark:

1. **Lines** (``txnlog_dump_lines``, a Python Data Source): one input partition per
   dump file, read in chunks and split on ``\\n`` with numpy (no loop per line).
   Each row is ``(file, line_no, line)`` with the true 1-based line number, plus two
   pieces of *context* that only a sequential reader can give cheaply: the
   ``Dumping <path>`` line that governs it (``section``/``section_header``) and
   whether the previous line is a batch line (``after_batch``). Detecting those
   is a fixed-prefix byte compare, vectorized; no field is parsed here.
2. **Parse** with Spark column expressions only (``rlike``, ``split``,
   ``regexp_extract``, ``from_json``): patterns from ``txnlog.kafka.dump_log_text``.
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
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.kafka import dump_log_text as D
from txnlog.logdirs import IGNORED_TOPICS
from txnlog.spark.placement import Placement
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
)
from txnlog.spark.txn_state_source import TXN_STATE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DUMP_LINES_SOURCE = "txnlog_dump_lines"
DEFAULT_CHUNK_BYTES = 16 * 2**20

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
    if "=" in arg and not os.path.exists(arg):
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
        if os.path.isdir(p):
            root = os.path.abspath(p)
            own = os.path.basename(root.rstrip(os.sep)) or None
            for dirpath, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.startswith("."):
                        continue
                    f = os.path.join(dirpath, n)
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


def _open(path: str):
    if "://" in path and not path.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        return filesystem.open_input_stream(inner)
    return open(path[len("file://") :] if path.startswith("file://") else path, "rb")


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
    with _open(path) as f:
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
        for path in partition.value:
            loc, named = self.locations.get(path, (None, False))
            yield from iter_line_batches(path, self.chunk_bytes, loc, bool(named))


class DumpLinesSource(DataSource):
    """``spark.read.format("txnlog_dump_lines").option("paths", json.dumps([...])).load()``"""

    @classmethod
    def name(cls) -> str:
        return DUMP_LINES_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(DUMP_LINES_SCHEMA)

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


def line_kind(line: Any) -> Any:
    """The kind of each dump line (a Spark column expression over the line text)."""
    from pyspark.sql import functions as F

    return (
        F.when(line.startswith("Dumping "), K_DUMPING)
        .when(
            line.startswith("| "),
            F.when(line.rlike(D.RECORD_LINE), K_RECORD)
            .when(line.rlike(D.MALFORMED_2_8), K_MALFORMED_28)
            .when(line.rlike(D.RECORD_NO_METADATA_LINE), K_RECORD_NO_META)
            .when(line.rlike(D.ELISION_LINE), K_ELIDED)
            .otherwise(K_UNPARSED),
        )
        .when(line.rlike(D.BATCH_LINE), K_BATCH)
        .when(line.rlike(D.START_OFFSET_LINE), K_START)
        .when(line.rlike(D.SNAPSHOT_LINE), K_SNAPSHOT)
        .when(line.rlike(D.LEGACY_LINE), K_LEGACY)
        .when(line.rlike(D.INVALID_BYTES_LINE), K_INVALID_BYTES)
        .when(line.rlike(D.IGNORED_LINES), K_IGNORED)
        .when(line.rlike(D.SNAPSHOT_CORRUPT_LINE), K_SNAPSHOT_CORRUPT)
        .when(line.rlike(D.TOOL_ERROR_LINE), K_TOOL_ERROR)
        .when(line.rlike(D.ELISION_LINE), K_ELIDED)
        .otherwise(K_UNPARSED)
    )


def _parsed_lines(spark: Any, inputs: list[tuple[str, str | None, bool]], placement: Placement) -> Any:
    from pyspark.sql import functions as F

    options = {
        "paths": json.dumps([f for f, _, _ in inputs]),
        "locations": json.dumps({f: [loc, named] for f, loc, named in inputs}),
    }
    df = placement.read(spark, DumpLinesSource, options)
    line = F.col("line")
    kind = line_kind(line)
    dpath = F.regexp_extract("section_header", D.DUMPING_LINE, 1)
    df = df.withColumn("kind_code", kind).withColumn("dpath", F.when(F.col("section") > 0, dpath))

    def pp(i: int) -> Any:
        return F.nullif(F.regexp_extract("dpath", D.PARTITION_PATH, i), F.lit(""))

    parent = pp(1)
    return (
        df.withColumn("topic", pp(2))
        .withColumn("partition", pp(3).try_cast("int"))
        .withColumn(
            "broker",
            F.when(F.col("topic").isNotNull() & parent.rlike(D.BROKER_DIR), parent).otherwise(F.lit(D.UNKNOWN_BROKER)),
        )
        .withColumn("file_offset", F.nullif(F.regexp_extract("dpath", D.FILE_NAME, 1), F.lit("")).try_cast("long"))
        .withColumn("suffix", F.nullif(F.regexp_extract("dpath", D.FILE_NAME, 2), F.lit("")))
        .withColumn("is_txn_state", F.coalesce(F.col("topic") == "__transaction_state", F.lit(False)))
    )


def _tok(tokens: Any, i: int, shift: Any = None) -> Any:
    from pyspark.sql import functions as F

    idx = F.lit(i) if shift is None else F.lit(i) + shift
    return F.element_at(tokens, idx)


def _batch_columns(df: Any) -> Any:
    """Typed batch/legacy/record fields (null where they do not apply). Column expressions only."""
    from pyspark.sql import functions as F

    tokens = F.split("line", " ")
    k = F.col("kind_code")
    is_batch = k == K_BATCH
    is_legacy = k == K_LEGACY
    is_record = k == K_RECORD
    has_dh = F.col("line").contains(" deleteHorizonMs: ")
    shift = F.when(has_dh, 2).otherwise(0)

    def b(name: str, typ: str) -> Any:
        i = D.BATCH_TOKENS[name]
        t = _tok(tokens, i, shift) if name in D.BATCH_TOKENS_AFTER_CONTROL else _tok(tokens, i)
        return F.when(is_batch, t.try_cast(typ) if typ != "string" else t)

    codec = F.lower(
        F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["compresscodec"], shift)).when(is_legacy, _tok(tokens, 12))
    )
    codec_id = F.create_map(*[x for kv in D.CODEC_IDS.items() for x in (F.lit(kv[0]), F.lit(kv[1]))])[codec]
    marker = F.col("line").contains(" endTxnMarker: ")
    damage = k.isin(*DAMAGE_KINDS) | (is_batch & F.col("line").rlike(r" isvalid: false\s*$"))
    return df.select(
        "file",
        "line_no",
        "section",
        "kind_code",
        "after_batch",
        "dpath",
        "broker",
        "topic",
        "partition",
        "file_offset",
        "is_txn_state",
        "loc",
        "loc_named",
        F.when(damage, F.substring("line", 1, D.DETAIL_CHARS)).alias("damage_text"),
        F.when(k == K_INVALID_BYTES, F.regexp_extract("line", D.INVALID_BYTES_LINE, 1).try_cast("long")).alias(
            "invalid_bytes"
        ),
        b("base_offset", "long").alias("base_offset"),
        b("last_offset", "long").alias("last_offset"),
        b("count", "int").alias("record_count"),
        b("base_sequence", "int").alias("base_sequence"),
        b("producer_id", "long").alias("producer_id"),
        b("producer_epoch", "int").alias("producer_epoch"),
        b("partition_leader_epoch", "int").alias("partition_leader_epoch"),
        (b("is_transactional", "string") == "true").alias("is_transactional"),
        (b("is_control", "string") == "true").alias("is_control"),
        F.when(is_batch, F.nullif(F.regexp_extract("line", D.DELETE_HORIZON, 1), F.lit("")).try_cast("long")).alias(
            "delete_horizon"
        ),
        F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["position"], shift))
        .when(is_legacy, _tok(tokens, 4))
        .try_cast("long")
        .alias("position"),
        F.when(is_batch, (b("timestamp_type", "string") == "LogAppendTime:").cast("int")).alias("timestamp_type"),
        b("max_timestamp", "long").alias("max_timestamp"),
        F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["size"], shift))
        .when(is_legacy, _tok(tokens, 8))
        .try_cast("long")
        .alias("size"),
        b("magic", "int").alias("magic"),
        codec_id.alias("compression"),
        b("crc", "long").alias("crc"),
        (b("isvalid", "string") == "true").alias("crc_valid"),
        F.when(is_record, _tok(tokens, 3).try_cast("long")).alias("rec_offset"),
        F.when(is_record, _tok(tokens, 5).try_cast("long")).alias("rec_timestamp"),
        F.when(is_record & marker, F.regexp_extract("line", D.END_TXN_MARKER, 1)).alias("marker_type"),
        F.when(is_record & marker, F.regexp_extract("line", D.END_TXN_MARKER, 2).try_cast("int")).alias("marker_epoch"),
    )


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


def _state_id(name: Any) -> Any:
    from pyspark.sql import functions as F

    return F.create_map(*[x for kv in D.STATE_IDS.items() for x in (F.lit(kv[0]), F.lit(kv[1]))])[name]


_KEY_JSON = "struct<type:string,data:struct<transactionalId:string>>"
_VALUE_JSON = (
    "struct<version:string,type:string,data:struct<producerId:bigint,previousProducerId:bigint,nextProducerId:bigint,"
    "producerEpoch:int,nextProducerEpoch:int,transactionTimeoutMs:bigint,transactionStatus:string,"
    "transactionPartitions:array<struct<topic:string,partitionIds:array<int>>>,"
    "transactionLastUpdateTimestampMs:bigint,transactionStartTimestampMs:bigint,clientTransactionVersion:int>>"
)


def _records(lines: Any, batches: Any, placement: Placement) -> Any:
    """TXN_STATE rows from ``--transaction-log-decoder`` record lines (3.x Scala and trunk JSON)."""
    from pyspark.sql import functions as F

    line = F.col("line")
    recs = lines.filter(F.col("is_txn_state") & (F.col("kind_code") == K_RECORD))
    scala_key = F.regexp_extract(line, D.TXN_SCALA, 1)
    scala_val = F.regexp_extract(line, D.TXN_SCALA, 2)
    is_scala = line.rlike(D.TXN_SCALA)
    is_json = ~is_scala & line.rlike(D.TXN_JSON)
    jkey = F.from_json(F.regexp_extract(line, D.TXN_JSON, 1), _KEY_JSON)
    jval_str = F.regexp_extract(line, D.TXN_JSON, 2)
    jval = F.from_json(F.when(jval_str != "<DELETE>", jval_str), _VALUE_JSON)
    tomb = F.when(is_scala, scala_val == "<DELETE>").otherwise(jval_str == "<DELETE>")

    def sv(i: int, typ: str) -> Any:
        return F.when(is_scala & ~tomb, F.regexp_extract(scala_val, D.TXN_SCALA_VALUE, i).try_cast(typ))

    def jv(field: str) -> Any:
        return F.when(is_json & ~tomb, jval["data"][field])

    def tagged(field: str, default: int) -> Any:
        return F.when(is_json & ~tomb, F.coalesce(jval["data"][field], F.lit(default)))

    scala_parts = F.regexp_extract(scala_val, D.TXN_SCALA_VALUE, 4)
    json_parts = F.flatten(
        F.transform(
            jval["data"]["transactionPartitions"],
            lambda x: F.transform(x["partitionIds"], lambda p: F.concat(x["topic"], F.lit("-"), p.cast("string"))),
        )
    )
    decoded = recs.filter(is_scala | is_json).select(
        F.lit("record").alias("kind"),
        "broker",
        F.col("partition").alias("coordinator_partition"),
        F.col("dpath").alias("file"),
        F.split(line, " ").getItem(2).try_cast("long").alias("record_offset"),
        F.split(line, " ").getItem(4).try_cast("long").alias("record_timestamp"),
        F.lit(None).cast("int").alias("coordinator_epoch"),
        F.when(is_scala, scala_key).otherwise(jkey["data"]["transactionalId"]).alias("transactional_id"),
        tomb.alias("is_tombstone"),
        F.when(is_scala, F.lit(0)).otherwise(jkey["type"].try_cast("int")).alias("key_version"),
        # "version" (a Dec 2024 trunk build printed it as "type": MINOR #18505)
        F.when(is_json & ~tomb, F.coalesce(jval["version"], jval["type"]).try_cast("int")).alias("value_version"),
        F.coalesce(sv(1, "long"), jv("producerId")).alias("producer_id"),
        F.coalesce(sv(2, "int"), jv("producerEpoch")).alias("producer_epoch"),
        F.coalesce(sv(6, "long"), jv("transactionTimeoutMs")).alias("timeout_ms"),
        # the 4.x JSON prints the status id (4.0-); KAFKA-20712 prints its name ("CompleteCommit")
        F.coalesce(
            F.when(is_scala & ~tomb, _state_id(F.regexp_extract(scala_val, D.TXN_SCALA_VALUE, 3))),
            jv("transactionStatus").try_cast("int"),
            _state_id(jv("transactionStatus")),
        ).alias("state"),
        F.when(
            is_scala & ~tomb,
            F.when(scala_parts == "", F.array().cast("array<string>")).otherwise(F.split(scala_parts, ",")),
        )
        .when(is_json & ~tomb, json_parts)
        .alias("partitions"),
        F.coalesce(sv(5, "long"), jv("transactionLastUpdateTimestampMs")).alias("last_update_timestamp"),
        jv("transactionStartTimestampMs").alias("txn_start_timestamp"),
        tagged("previousProducerId", -1).alias("previous_producer_id"),
        tagged("nextProducerId", -1).alias("next_producer_id"),
        tagged("nextProducerEpoch", -1).cast("int").alias("next_producer_epoch"),
        tagged("clientTransactionVersion", 0).alias("client_transaction_version"),
        F.lit(None).cast("long").alias("position"),
        F.lit(None).cast("long").alias("length"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("detail"),
        "line_no",
        "section",
        F.col("file").alias("dump_file"),
        "kind_code",
        "dpath",
        F.lit(None).cast("int").alias("partition_leader_epoch"),
        F.lit(None).cast("long").alias("record_count"),
        F.col("partition"),
        F.lit(None).cast("boolean").alias("crc_valid"),
        F.lit(None).cast("long").alias("batch_position"),
        F.lit(None).cast("long").alias("batch_size"),
        F.lit(None).cast("string").alias("damage_text"),
        F.lit(None).cast("long").alias("invalid_bytes"),
    )
    txn_batches = batches.filter(F.col("kind_code").isin(K_BATCH, K_LEGACY, *DAMAGE_KINDS)).selectExpr(
        *[
            f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
            for f in arrow_to_spark_schema(TXN_STATE_SCHEMA).fields
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
    return placement.apply_in_arrow(both, ("dump_file", "section"), assemble_txn_state, out_schema)


def _replica_names(lines: Any) -> Any:
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
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    d = (
        lines.filter(F.col("kind_code") == K_DUMPING)
        .select(
            F.col("file").alias("dump_file"),
            "loc",
            F.coalesce("loc_named", F.lit(False)).alias("named"),
            F.col("broker").alias("pbroker"),
            "dpath",
        )
        .distinct()
    )
    clash = F.size(F.collect_set("dump_file").over(Window.partitionBy("pbroker", "dpath"))) > 1
    d = d.withColumn("clash", clash.cast("int"))
    loc_clash = F.max("clash").over(Window.partitionBy("loc", "pbroker")) > 0
    use_loc = F.col("loc").isNotNull() & (F.col("named") | loc_clash | (F.col("pbroker") == D.UNKNOWN_BROKER))
    d = d.withColumn("base", F.when(use_loc, F.col("loc")).otherwise(F.col("pbroker")))
    clash2 = F.size(F.collect_set("dump_file").over(Window.partitionBy("base", "dpath"))) > 1
    d = d.withColumn("clash2", (clash2 & ~F.col("named")).cast("int"))
    file_clash = F.max("clash2").over(Window.partitionBy("dump_file", "base")) > 0
    stem = F.regexp_extract("dump_file", r"([^/\\]+?)(?:\.[^./\\]*)?$", 1)
    name = F.when(file_clash, F.when(use_loc, F.concat_ws("/", "base", stem)).otherwise(stem)).otherwise(F.col("base"))
    return d.select("dump_file", "pbroker", name.alias("replica")).distinct()


def _named(df: Any, names: Any, dump_col: str = "dump_file") -> Any:
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


def read_dump_logs(spark: SparkSession, paths: list[str], placement: Placement | None = None) -> DumpLogFrames:
    """``kafka-dump-log.sh`` outputs under ``paths`` → the rows of the segment and txn-state sources.

    ``paths`` are ``--dump-log`` values (``PATH`` or ``NAME=PATH``). ``summary`` has
    SEGMENT_SUMMARY_SCHEMA (run/marker/segment/snapshot/quarantine), ``records`` has
    TXN_STATE_SCHEMA (record/quarantine, plus one ``segment`` row per dumped
    ``__transaction_state`` segment: the coordinator partitions the dumps hold). ``file`` of a
    fragment is the dumped segment's path as printed. Damage the dump shows in a segment
    (``isvalid: false``, invalid bytes at the end, ``...`` elisions, the tool's exceptions) is
    quarantined by that segment's path and byte position, the dump file and line in ``detail``;
    a line no format knows is quarantined by the dump file and its line number (``length`` 1).
    ``broker`` is the replica name (:func:`_replica_names`). ``placement``: Python steps in Spark tasks
    (the default) or in this process (txnlog.spark.placement).
    """
    from pyspark.sql import functions as F

    placement = placement or Placement()
    inputs = list_dump_inputs(paths)
    files = [f for f, _, _ in inputs]
    # held once in the driver placement: every branch below starts from the parsed lines, not the parse
    lines = placement.localize(_parsed_lines(spark, inputs, placement))
    batches = placement.localize(_batch_columns(lines))
    names = _replica_names(lines)
    k = F.col("kind_code")

    # --- segments: groups of the lines needed to rebuild each dumped data segment
    # the KRaft metadata log is no data partition: skipped as the log-dir reader skips it, and so
    # are KRaft snapshots (.checkpoint: "Snapshot end offset: ..")
    ignored = F.col("topic").isin(*sorted(IGNORED_TOPICS)) | F.coalesce(
        F.col("dpath").rlike(r"\.checkpoint$"), F.lit(False)
    )
    data_section = (
        (F.col("section") > 0)
        & (F.col("topic").isNull() | ((F.col("topic") != "__transaction_state") & ~ignored))
        & (F.col("dpath").rlike(r"\.log$") | ~F.col("dpath").rlike(D.FILE_NAME))
        & ~F.coalesce(F.col("dpath").rlike(r"\.checkpoint$"), F.lit(False))
    )
    seg_lines = batches.filter(
        data_section
        & (
            k.isin(K_DUMPING, K_START, K_BATCH, K_LEGACY, *DAMAGE_KINDS)
            | ((k == K_RECORD) & (F.col("after_batch") | F.col("marker_type").isNotNull()))
        )
    )
    seg_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA.append(pa.field("dump_file", pa.string())))
    segments = placement.apply_in_arrow(seg_lines, ("file", "section"), assemble_segment, seg_schema)

    # --- producer snapshots
    line = F.col("line")

    def sn(i: int, typ: str) -> Any:
        return F.nullif(F.regexp_extract(line, D.SNAPSHOT_LINE, i), F.lit("")).try_cast(typ)

    snapshots = lines.filter(
        (k == K_SNAPSHOT) & (F.col("section") > 0) & ~F.col("is_txn_state") & ~F.coalesce(ignored, F.lit(False))
    ).select(
        F.lit(KIND_SNAPSHOT).alias("kind"),
        "broker",
        "topic",
        "partition",
        F.col("dpath").alias("file"),
        "file_offset",
        sn(1, "long").alias("producer_id"),
        sn(2, "int").alias("producer_epoch"),
        F.coalesce(sn(5, "long"), sn(6, "long"), F.lit(-1).cast("long")).alias("first_offset"),
        F.coalesce(sn(10, "long"), F.lit(-1).cast("long")).alias("last_offset"),
        F.coalesce(sn(7, "long"), sn(12, "long")).alias("last_timestamp"),
        sn(3, "int").alias("coordinator_epoch"),
        F.col("file").alias("dump_file"),
    )
    # a corrupt producer snapshot: its entries are not printed (dumpProducerIdSnapshot prints the
    # CorruptSnapshotException message instead); quarantined as the segment reader does, whole file
    bad_snapshot = lines.filter((k == K_SNAPSHOT_CORRUPT) & (F.col("section") > 0)).select(
        F.lit(KIND_QUARANTINE).alias("kind"),
        "broker",
        "topic",
        "partition",
        F.col("dpath").alias("file"),
        "file_offset",
        F.lit(0).cast("long").alias("position"),
        F.lit(None).cast("long").alias("length"),
        F.when(F.regexp_extract(line, D.SNAPSHOT_CORRUPT_LINE, 1) != "", F.lit(D.REASON_SNAPSHOT_CRC))
        .otherwise(F.lit(D.REASON_BAD_SNAPSHOT))
        .alias("reason"),
        F.concat(
            F.col("file"),
            F.lit(":"),
            F.col("line_no").cast("string"),
            F.lit(": entries ignored: "),
            F.substring(line, 1, D.DETAIL_CHARS),
        ).alias("detail"),
        F.col("file").alias("dump_file"),
    )

    # --- quarantine: lines we cannot or must not read, with the dump file and line number
    # (damage inside a dumped segment is quarantined above, by the segment's own byte positions)
    in_segment = data_section | (F.col("is_txn_state") & (F.col("section") > 0))
    bad_batch = (k == K_BATCH) & line.rlike(r" isvalid: false\s*$")
    unknown_key = (k == K_RECORD) & F.col("is_txn_state") & line.rlike(D.TXN_UNKNOWN_KEY)
    no_partition = (k == K_DUMPING) & F.col("topic").isNull() & ~F.coalesce(ignored, F.lit(False))
    orphan = (F.col("section") == 0) & k.isin(K_BATCH, K_LEGACY, K_RECORD, K_SNAPSHOT, K_START)
    outside = ~F.coalesce(in_segment, F.lit(False)) & ~F.coalesce(ignored, F.lit(False))
    reason = (
        F.when(k == K_UNPARSED, D.REASON_UNPARSED)
        .when(k == K_MALFORMED_28, D.REASON_MALFORMED_2_8)
        .when(orphan, F.lit("dump_log_no_dumping_line"))
        .when(outside & (k == K_INVALID_BYTES), D.REASON_INVALID_BYTES)
        .when(outside & (k == K_ELIDED), D.REASON_ELIDED)
        .when(outside & (k == K_TOOL_ERROR), D.REASON_TOOL_ERROR)
        .when(outside & bad_batch, D.REASON_CRC)
        .when(unknown_key, D.REASON_TXN_UNKNOWN_KEY)
        .when(no_partition, D.REASON_NO_PARTITION)
    )
    quarantine = (
        lines.withColumn("reason", reason)
        .filter(F.col("reason").isNotNull())
        .select(
            F.lit(KIND_QUARANTINE).alias("kind"),
            "broker",
            "topic",
            "partition",
            "file",
            "file_offset",
            F.col("line_no").alias("position"),
            F.lit(1).cast("long").alias("length"),
            "reason",
            F.substring(line, 1, D.DETAIL_CHARS).alias("detail"),
            F.col("file").alias("dump_file"),
        )
    )

    cols = [f.name for f in SEGMENT_SUMMARY_SCHEMA]
    summary_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)
    summary = (
        shaped(segments, summary_schema, "dump_file")
        .unionByName(shaped(snapshots, summary_schema, "dump_file"))
        .unionByName(shaped(bad_snapshot, summary_schema, "dump_file"))
        .unionByName(shaped(quarantine, summary_schema, "dump_file"))
    )
    summary = _named(summary, names).select(*cols)

    txn_lines = batches.filter(F.col("is_txn_state") & k.isin(K_BATCH, K_LEGACY, *DAMAGE_KINDS))
    records = _records(lines.filter(F.col("is_txn_state")), txn_lines, placement)
    # one row per dumped __transaction_state segment, records or not: which coordinator partitions
    # the dumps hold (an empty one too, as a copied empty __transaction_state-<n>/ directory counts)
    txn_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA)
    dumped = lines.filter(F.col("is_txn_state") & (k == K_DUMPING)).select(
        F.lit(KIND_SEGMENT).alias("kind"),
        "broker",
        F.col("partition").alias("coordinator_partition"),
        F.col("dpath").alias("file"),
        F.col("file").alias("dump_file"),
    )
    records = records.unionByName(shaped(dumped, txn_schema, "dump_file"))
    records = _named(records, names).select(*txn_schema.fieldNames())
    return DumpLogFrames(summary=summary, records=records, files=files)
