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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.kafka import dump_log_text as D
from txnlog.logdirs import _IGNORED_TOPICS as IGNORED_TOPICS
from txnlog.spark.sources import (
    KIND_MARKER,
    KIND_QUARANTINE,
    KIND_RUN,
    KIND_SEGMENT,
    KIND_SNAPSHOT,
    SEGMENT_SUMMARY_SCHEMA,
    _table,
    arrow_to_spark_schema,
)
from txnlog.spark.txn_state_source import TXN_STATE_SCHEMA

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
    ]
)


@dataclass
class DumpLogFrames:
    """What :func:`read_dump_logs` returns: the segment-source and txn-state-source shaped rows."""

    summary: Any  # DataFrame, SEGMENT_SUMMARY_SCHEMA
    records: Any  # DataFrame, TXN_STATE_SCHEMA
    files: list[str]


# ============================================================================ 1. lines


def list_dump_files(paths: list[str]) -> list[str]:
    """Every regular, non-hidden file under ``paths`` (files as given), sorted per directory."""
    found: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
        else:
            found.append(p)
    return found


def _open(path: str):  # type: ignore[no-untyped-def]
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


def iter_line_batches(path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[pa.RecordBatch]:
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
                lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data_buf)).cast(pa.string())
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
                    [pa.array([path] * n, pa.string()), pa.array(numbers), lines, pa.array(sec), headers, pa.array(after)],
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
            yield from iter_line_batches(path, self.chunk_bytes)


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


def _parsed_lines(spark: Any, files: list[str]) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.format(DUMP_LINES_SOURCE).option("paths", json.dumps(files)).load()
    line = F.col("line")
    kind = (
        F.when(line.startswith("Dumping "), K_DUMPING)
        .when(line.startswith("| "),
              F.when(line.rlike(D.RECORD_LINE), K_RECORD)
              .when(line.rlike(D.MALFORMED_2_8), K_MALFORMED_28)
              .when(line.rlike(D.RECORD_NO_METADATA_LINE), K_RECORD_NO_META)
              .otherwise(K_UNPARSED))
        .when(line.rlike(D.BATCH_LINE), K_BATCH)
        .when(line.rlike(D.START_OFFSET_LINE), K_START)
        .when(line.rlike(D.SNAPSHOT_LINE), K_SNAPSHOT)
        .when(line.rlike(D.LEGACY_LINE), K_LEGACY)
        .when(line.rlike(D.INVALID_BYTES_LINE), K_INVALID_BYTES)
        .when(line.rlike(D.IGNORED_LINES), K_IGNORED)
        .otherwise(K_UNPARSED)
    )
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

    codec = F.lower(F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["compresscodec"], shift)).when(is_legacy, _tok(tokens, 12)))
    codec_id = F.create_map(*[x for kv in D.CODEC_IDS.items() for x in (F.lit(kv[0]), F.lit(kv[1]))])[codec]
    marker = F.col("line").contains(" endTxnMarker: ")
    return df.select(
        "file", "line_no", "section", "kind_code", "after_batch", "dpath", "broker", "topic", "partition",
        "file_offset", "is_txn_state",
        b("base_offset", "long").alias("base_offset"),
        b("last_offset", "long").alias("last_offset"),
        b("count", "int").alias("record_count"),
        b("base_sequence", "int").alias("base_sequence"),
        b("producer_id", "long").alias("producer_id"),
        b("producer_epoch", "int").alias("producer_epoch"),
        b("partition_leader_epoch", "int").alias("partition_leader_epoch"),
        (b("is_transactional", "string") == "true").alias("is_transactional"),
        (b("is_control", "string") == "true").alias("is_control"),
        F.when(is_batch, F.nullif(F.regexp_extract("line", D.DELETE_HORIZON, 1), F.lit("")).try_cast("long")).alias("delete_horizon"),
        F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["position"], shift)).when(is_legacy, _tok(tokens, 4)).try_cast("long").alias("position"),
        F.when(is_batch, (b("timestamp_type", "string") == "LogAppendTime:").cast("int")).alias("timestamp_type"),
        b("max_timestamp", "long").alias("max_timestamp"),
        F.when(is_batch, _tok(tokens, D.BATCH_TOKENS["size"], shift)).when(is_legacy, _tok(tokens, 8)).try_cast("long").alias("size"),
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
    return np.asarray(col.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype) if len(col) else np.empty(0, dtype)


def _first(table: pa.Table, name: str) -> Any:
    col = table.column(name).drop_null()
    return col[0].as_py() if len(col) else None


def assemble_segment(table: pa.Table) -> pa.Table:
    """One dumped segment's parsed lines → SEGMENT_SUMMARY rows (runs, markers, the segment row).

    Runs in executors (``applyInArrow``); vectorized with numpy, then
    ``segment_fragments`` exactly as ``summarize_segment`` does for the bytes.
    """
    from txnlog.kafka.control import ControlStatus
    from txnlog.kafka.record_batch import BATCH_COLUMNS
    from txnlog.reconstruct import segment_fragments

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
    r_mtype_id = np.array([D.CONTROL_TYPE_IDS.get(t, -1) if t else -1 for t in r_mtype], np.int16) if r_mtype else np.empty(0, np.int16)
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
    status = np.where(is_control, np.where(count == 0, ControlStatus.ZERO_RECORDS, ControlStatus.END_TXN_MARKER), ControlStatus.NOT_CONTROL).astype(np.int8)
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
        out.append(_table(SEGMENT_SUMMARY_SCHEMA, n, {
            **base,
            "kind": pa.array(np.where(frags["kind"] == 1, KIND_MARKER, KIND_RUN).tolist(), pa.string()),
            "partition": pa.array([partition] * n, pa.int32()),
            "file_offset": pa.array([file_offset] * n, pa.int64()),
            **{k: frags[k] for k in (
                "producer_id", "producer_epoch", "min_epoch", "first_offset", "last_offset",
                "first_timestamp", "last_timestamp", "batch_count", "record_count", "size_bytes",
                "coordinator_epoch",
            )},
            "control_type": frags["control_type"].astype(np.int32),
        }))
    is_l = kind == K_LEGACY
    ends = (_np(table, "position", np.int64, 0) + _np(table, "size", np.int64, 0))[is_b | is_l]
    has = batches["base_offset"].size > 0
    out.append(_table(SEGMENT_SUMMARY_SCHEMA, 1, {
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
    }))
    return pa.Table.from_batches(out, schema=SEGMENT_SUMMARY_SCHEMA)


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
    recs = table.filter(pa.array(~is_b))
    r_batch = np.searchsorted(bl, line_no[~is_b], side="right") - 1
    epochs = np.where(r_batch >= 0, ple[np.maximum(r_batch, 0)] if ple.size else -1, -1).astype(np.int32)
    out = [recs.set_column(recs.schema.get_field_index("coordinator_epoch"), "coordinator_epoch", pa.array(epochs, pa.int32()))
           .select(TXN_STATE_SCHEMA.names).cast(TXN_STATE_SCHEMA)]
    counts = _np(table, "record_count", np.int64, 0)[is_b]
    decoded = np.zeros(bl.size, bool)
    decoded[r_batch[r_batch >= 0]] = True
    missing = np.flatnonzero(~decoded & (counts > 0))
    if missing.size:
        n = 1
        out.append(pa.Table.from_batches([_table(TXN_STATE_SCHEMA, n, {
            "kind": KIND_QUARANTINE,
            "broker": _first(table, "broker"),
            "coordinator_partition": pa.array([_first(table, "partition")], pa.int32()),
            "file": _first(table, "dump_file"),
            "position": np.full(1, int(bl[missing[0]]), np.int64),
            "length": np.full(1, 1, np.int64),
            "reason": D.REASON_TXN_UNDECODED,
            "detail": f"{missing.size} of {bl.size} batches of {_first(table, 'dpath')} show no decoded record; "
                      "dump __transaction_state with --transaction-log-decoder",
        })]))
    return pa.concat_tables(out)


# ============================================================================ public API


def register_dump_log_source(spark: Any) -> None:
    spark.dataSource.register(DumpLinesSource)


def _state_id(name: Any) -> Any:
    from pyspark.sql import functions as F

    return F.create_map(*[x for kv in D.STATE_IDS.items() for x in (F.lit(kv[0]), F.lit(kv[1]))])[name]


_KEY_JSON = "struct<type:string,data:struct<transactionalId:string>>"
_VALUE_JSON = (
    "struct<version:string,data:struct<producerId:bigint,previousProducerId:bigint,nextProducerId:bigint,"
    "producerEpoch:int,nextProducerEpoch:int,transactionTimeoutMs:bigint,transactionStatus:int,"
    "transactionPartitions:array<struct<topic:string,partitionIds:array<int>>>,"
    "transactionLastUpdateTimestampMs:bigint,transactionStartTimestampMs:bigint,clientTransactionVersion:int>>"
)


def _records(lines: Any, batches: Any) -> Any:
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
    json_parts = F.flatten(F.transform(
        jval["data"]["transactionPartitions"],
        lambda x: F.transform(x["partitionIds"], lambda p: F.concat(x["topic"], F.lit("-"), p.cast("string"))),
    ))
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
        F.when(is_json & ~tomb, jval["version"].try_cast("int")).alias("value_version"),
        F.coalesce(sv(1, "long"), jv("producerId")).alias("producer_id"),
        F.coalesce(sv(2, "int"), jv("producerEpoch")).alias("producer_epoch"),
        F.coalesce(sv(6, "long"), jv("transactionTimeoutMs")).alias("timeout_ms"),
        F.coalesce(F.when(is_scala & ~tomb, _state_id(F.regexp_extract(scala_val, D.TXN_SCALA_VALUE, 3))),
                   jv("transactionStatus")).alias("state"),
        F.when(is_scala & ~tomb,
               F.when(scala_parts == "", F.array().cast("array<string>")).otherwise(F.split(scala_parts, ",")))
        .when(is_json & ~tomb, json_parts).alias("partitions"),
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
        "line_no", "section", F.col("file").alias("dump_file"), "kind_code", "dpath",
        F.lit(None).cast("int").alias("partition_leader_epoch"),
        F.lit(None).cast("long").alias("record_count"),
        F.col("partition"),
    )
    txn_batches = batches.filter(F.col("kind_code") == K_BATCH).select(
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in arrow_to_spark_schema(TXN_STATE_SCHEMA).fields
          if f.name not in ("broker", "file")],
        "broker", F.col("dpath").alias("file"),
        "line_no", "section", F.col("file").alias("dump_file"), "kind_code", "dpath",
        "partition_leader_epoch", F.col("record_count").cast("long").alias("record_count"), "partition",
    )
    both = decoded.unionByName(txn_batches)
    return both.groupBy("dump_file", "section").applyInArrow(
        assemble_txn_state,
        arrow_to_spark_schema(TXN_STATE_SCHEMA),
    )


def read_dump_logs(spark: Any, paths: list[str]) -> DumpLogFrames:
    """``kafka-dump-log.sh`` outputs under ``paths`` → the rows of the segment and txn-state sources.

    ``summary`` has SEGMENT_SUMMARY_SCHEMA (run/marker/segment/snapshot/quarantine; quarantine
    rows name the dump file and its line number in ``position``, ``length`` 1), ``records`` has
    TXN_STATE_SCHEMA (record/quarantine, plus one ``segment`` row per dumped
    ``__transaction_state`` segment: the coordinator partitions the dumps hold). ``file`` of a fragment is the dumped segment's path as printed.
    """
    from pyspark.sql import functions as F

    register_dump_log_source(spark)
    files = list_dump_files(paths)
    lines = _parsed_lines(spark, files)
    batches = _batch_columns(lines)
    k = F.col("kind_code")

    # --- segments: groups of the lines needed to rebuild each dumped data segment
    # the KRaft metadata log is no data partition: skipped as the log-dir reader skips it
    ignored = F.col("topic").isin(*sorted(IGNORED_TOPICS))
    seg_lines = batches.filter(
        (F.col("section") > 0)
        & (F.col("topic").isNull() | ((F.col("topic") != "__transaction_state") & ~ignored))
        & (F.col("dpath").rlike(r"\.log$") | ~F.col("dpath").rlike(D.FILE_NAME))
        & (k.isin(K_DUMPING, K_START, K_BATCH, K_LEGACY)
           | ((k == K_RECORD) & (F.col("after_batch") | F.col("marker_type").isNotNull())))
    )
    segments = seg_lines.groupBy("file", "section").applyInArrow(
        assemble_segment, arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)
    )

    # --- producer snapshots
    line = F.col("line")

    def sn(i: int, typ: str) -> Any:
        return F.nullif(F.regexp_extract(line, D.SNAPSHOT_LINE, i), F.lit("")).try_cast(typ)

    snapshots = lines.filter((k == K_SNAPSHOT) & (F.col("section") > 0) & ~F.col("is_txn_state")
                             & ~F.coalesce(ignored, F.lit(False))).select(
        F.lit(KIND_SNAPSHOT).alias("kind"), "broker", "topic", "partition", F.col("dpath").alias("file"), "file_offset",
        sn(1, "long").alias("producer_id"),
        sn(2, "int").alias("producer_epoch"),
        F.coalesce(sn(5, "long"), sn(6, "long"), F.lit(-1).cast("long")).alias("first_offset"),
        F.coalesce(sn(10, "long"), F.lit(-1).cast("long")).alias("last_offset"),
        F.coalesce(sn(7, "long"), sn(12, "long")).alias("last_timestamp"),
        sn(3, "int").alias("coordinator_epoch"),
    )

    # --- quarantine: lines we cannot or must not read, with file and line number
    bad_batch = (k == K_BATCH) & line.rlike(r" isvalid: false\s*$")
    unknown_key = (k == K_RECORD) & F.col("is_txn_state") & line.rlike(D.TXN_UNKNOWN_KEY)
    no_partition = (k == K_DUMPING) & F.col("topic").isNull()
    orphan = (F.col("section") == 0) & k.isin(K_BATCH, K_LEGACY, K_RECORD, K_SNAPSHOT, K_START)
    reason = (
        F.when(k == K_UNPARSED, D.REASON_UNPARSED)
        .when(k == K_MALFORMED_28, D.REASON_MALFORMED_2_8)
        .when(k == K_INVALID_BYTES, D.REASON_INVALID_BYTES)
        .when(orphan, F.lit("dump_log_no_dumping_line"))
        .when(bad_batch, D.REASON_CRC)
        .when(unknown_key, D.REASON_TXN_UNKNOWN_KEY)
        .when(no_partition, D.REASON_NO_PARTITION)
    )
    quarantine = lines.withColumn("reason", reason).filter(F.col("reason").isNotNull()).select(
        F.lit(KIND_QUARANTINE).alias("kind"), "broker", "topic", "partition", "file", "file_offset",
        F.col("line_no").alias("position"), F.lit(1).cast("long").alias("length"), "reason",
        F.substring(line, 1, D.DETAIL_CHARS).alias("detail"),
    )

    cols = [f.name for f in SEGMENT_SUMMARY_SCHEMA]

    def shaped(df: Any) -> Any:
        have = set(df.columns)
        spark_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)
        return df.select(*[
            (F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name) for f in spark_schema.fields
        ])

    summary = shaped(segments).unionByName(shaped(snapshots)).unionByName(shaped(quarantine)).select(*cols)

    txn_lines = batches.filter(F.col("is_txn_state") & (k == K_BATCH))
    records = _records(lines.filter(F.col("is_txn_state")), txn_lines)
    # one row per dumped __transaction_state segment, records or not: which coordinator partitions
    # the dumps hold (an empty one too, as a copied empty __transaction_state-<n>/ directory counts)
    txn_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA)
    dumped = lines.filter(F.col("is_txn_state") & (k == K_DUMPING)).select(
        F.lit(KIND_SEGMENT).alias("kind"), "broker", F.col("partition").alias("coordinator_partition"),
        F.col("dpath").alias("file"),
    )
    records = records.unionByName(dumped.select(*[
        (F.col(f.name) if f.name in dumped.columns else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in txn_schema.fields
    ]))
    return DumpLogFrames(summary=summary, records=records, files=files)
