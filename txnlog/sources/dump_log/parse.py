"""``--dump-log`` step 2, the parse: each line's kind and typed fields (``PARSED_SCHEMA``), vectorized with
``pyarrow.compute`` over a chunk of lines (:func:`parse_lines`, called in the lines reader's tasks).
txnlog.engine.spark.dump_log says how the three steps fit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka import dump_log_text as D
from txnlog.sources.dump_log.spark_text import groups, match, np_bool, nullif_empty, pick, spread, try_int
from txnlog.sources.dump_log.txn_text import txn_fields
from txnlog.sources.logdirs import IGNORED_TOPICS

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


def _kinds(lines: pa.Array) -> np.ndarray:
    """The kind of each line: the first pattern of the cascade that matches (a prefix first)."""
    n = len(lines)
    kind = np.full(n, K_UNPARSED, np.int32)
    dumping = np_bool(pc.starts_with(lines, "Dumping "))
    recordish = ~dumping & np_bool(pc.starts_with(lines, "| "))
    kind[dumping] = K_DUMPING
    for idx, cascade in ((np.flatnonzero(recordish), _RECORDISH), (np.flatnonzero(~dumping & ~recordish), _OTHER)):
        for pattern, k in cascade:
            if idx.size == 0:
                break
            m = match(lines.take(pa.array(idx)), pattern)
            kind[idx[m]] = k
            idx = idx[~m]
    return kind


def _path_columns(headers: pa.Array, section: np.ndarray) -> dict[str, pa.Array]:
    """What each line's governing ``Dumping <path>`` line says (D.split_dump_path), computed once per
    distinct header (a chunk holds few) and spread to the lines."""
    enc = pc.dictionary_encode(headers)
    hdr = enc.dictionary
    idx = enc.indices
    dpath = groups(hdr, D.DUMPING_LINE)[0]
    parent, topic, pnum, _, _ = (nullif_empty(g) for g in groups(dpath, D.PARTITION_PATH))
    offset = nullif_empty(groups(dpath, D.FILE_NAME)[0])
    has_topic = np_bool(topic.is_valid())
    broker_dir = has_topic & match(parent, D.BROKER_DIR)
    broker = pc.if_else(pa.array(broker_dir), parent, D.UNKNOWN_BROKER)
    is_txn = np_bool(pc.equal(topic, "__transaction_state"))
    checkpoint = match(dpath, _CHECKPOINT)
    ignored = (has_topic & np_bool(pc.is_in(topic, pa.array(sorted(IGNORED_TOPICS), pa.string())))) | checkpoint
    data_section = (
        (~has_topic | ~is_txn & ~ignored) & (match(dpath, _LOG_FILE) | ~match(dpath, D.FILE_NAME)) & ~checkpoint
    )
    governed = pa.array(section > 0)

    def spread(values: pa.Array, default: Any = None) -> pa.Array:
        out = values.take(idx)
        return pc.if_else(governed, out, pa.scalar(default, values.type))

    return {
        "dpath": spread(dpath),
        "broker": spread(broker, D.UNKNOWN_BROKER),
        "topic": spread(topic),
        "partition": spread(try_int(pnum, pa.int32())),
        "file_offset": spread(try_int(offset, pa.int64())),
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
    shift = np.where(np_bool(pc.match_substring(lines, " deleteHorizonMs: ")), 2, 0)
    names = list(D.BATCH_TOKENS)
    at = [np.full(n, D.BATCH_TOKENS[k]) + (shift if k in D.BATCH_TOKENS_AFTER_CONTROL else 0) for k in names]
    tok = dict(zip(names, _tokens(lines, at), strict=True))
    out = {
        "base_offset": try_int(tok["base_offset"], pa.int64()),
        "last_offset": try_int(tok["last_offset"], pa.int64()),
        "record_count": try_int(tok["count"], pa.int32()),
        "base_sequence": try_int(tok["base_sequence"], pa.int32()),
        "producer_id": try_int(tok["producer_id"], pa.int64()),
        "producer_epoch": try_int(tok["producer_epoch"], pa.int32()),
        "partition_leader_epoch": try_int(tok["partition_leader_epoch"], pa.int32()),
        "is_transactional": pc.equal(tok["is_transactional"], "true"),
        "is_control": pc.equal(tok["is_control"], "true"),
        "delete_horizon": try_int(groups(lines, D.DELETE_HORIZON)[0], pa.int64()),
        "position": try_int(tok["position"], pa.int64()),
        "timestamp_type": pc.cast(pc.equal(tok["timestamp_type"], "LogAppendTime:"), pa.int32()),
        "max_timestamp": try_int(tok["max_timestamp"], pa.int64()),
        "size": try_int(tok["size"], pa.int64()),
        "magic": try_int(tok["magic"], pa.int32()),
        "compression": _codec(tok["compresscodec"]),
        "crc": try_int(tok["crc"], pa.int64()),
        "crc_valid": pc.equal(tok["isvalid"], "true"),
    }
    return out


def _codec(names: pa.Array) -> pa.Array:
    lower = pc.utf8_lower(names)
    found = pc.index_in(lower, pa.array(list(D.CODEC_IDS), pa.string()))
    return pa.array(list(D.CODEC_IDS.values()), pa.int32()).take(found)


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
    lines = _Lines(_valid_utf8(batch.column("line")))
    kind = lines.kind
    section = np.asarray(batch.column("section").to_numpy(zero_copy_only=False), np.int64)
    path = _path_columns(batch.column("section_header"), section)

    # the dump file's name without extension, on the Dumping lines (_replica_names)
    dumping = lines.rows(K_DUMPING)
    files = batch.column("file").take(pa.array(dumping, pa.int64()))
    stem = spread(groups(files, _STEM)[0], dumping, n)
    fields, bad_batch = _batch_and_record_columns(lines)
    s = lines.rows(K_SNAPSHOT)
    snap = _snapshot_fields(lines.sub(s))
    # __transaction_state record lines
    is_txn = np_bool(path["is_txn_state"])
    t = lines.rows(K_RECORD, is_txn)
    txn = {k: spread(v, t, n) for k, v in txn_fields(lines.sub(t)).items()}
    unknown_key = np.zeros(n, bool)
    unknown_key[t[match(lines.sub(t), D.TXN_UNKNOWN_KEY)]] = True
    first_chars = pc.utf8_slice_codeunits(lines.lines, 0, D.DETAIL_CHARS)
    reason, detail = _quarantine_columns(batch, lines, path, section, bad_batch, unknown_key, first_chars)
    # damage shown inside a segment (quarantined by its byte range in assemble_*)
    damage = np.isin(kind, DAMAGE_KINDS) | bad_batch
    invalid = lines.rows(K_INVALID_BYTES)
    columns: dict[str, pa.Array] = {
        "file": batch.column("file"),
        "line_no": batch.column("line_no"),
        "section": batch.column("section"),
        "kind_code": pa.array(kind, pa.int32()),
        "after_batch": batch.column("after_batch"),
        "loc": batch.column("loc"),
        "loc_named": batch.column("loc_named"),
        "stem": stem,
        **path,
        "damage_text": pc.if_else(pa.array(damage), first_chars, None),
        "invalid_bytes": spread(try_int(groups(lines.sub(invalid), D.INVALID_BYTES_LINE)[0], pa.int64()), invalid, n),
        **fields,
        "first_offset": spread(snap["first_offset"], s, n),
        "last_timestamp": spread(snap["last_timestamp"], s, n),
        "coordinator_epoch": spread(snap["coordinator_epoch"], s, n),
        "last_sequence": spread(snap["last_sequence"], s, n),
        **txn,
        "reason": reason,
        "detail": detail,
    }
    for name in ("producer_id", "producer_epoch"):
        columns[name] = pc.coalesce(fields[name], spread(snap[name], s, n), txn[name])
    columns["last_offset"] = pc.coalesce(fields["last_offset"], spread(snap["last_offset"], s, n))
    return pa.RecordBatch.from_arrays([columns[f.name].cast(f.type) for f in PARSED_SCHEMA], schema=PARSED_SCHEMA)


class _Lines:
    """A batch's lines and their kinds: the rows of one kind, and the lines at some rows."""

    def __init__(self, lines: pa.Array) -> None:
        self.lines = lines
        self.kind = _kinds(lines)

    def rows(self, k: int, also: np.ndarray | None = None) -> np.ndarray:
        return np.flatnonzero((self.kind == k) & (True if also is None else also))

    def sub(self, idx: np.ndarray) -> pa.Array:
        return self.lines.take(pa.array(idx, pa.int64()))


def _batch_and_record_columns(lines: _Lines) -> tuple[dict[str, pa.Array], np.ndarray]:
    """The batch lines' and legacy entries' fields, the record lines' offset, timestamp and marker, all spread
    over every line; and which batch lines show a damaged batch."""
    n = lines.kind.size
    b = lines.rows(K_BATCH)
    fields = {k: spread(v, b, n) for k, v in _batch_fields(lines.sub(b)).items()}
    legacy = lines.rows(K_LEGACY)
    lpos, lsize, lcodec = _tokens(lines.sub(legacy), [np.full(legacy.size, i) for i in (4, 8, 12)])
    for name, values in (
        ("position", try_int(lpos, pa.int64())),
        ("size", try_int(lsize, pa.int64())),
        ("compression", _codec(lcodec)),
    ):
        fields[name] = pc.coalesce(fields[name], spread(values, legacy, n))
    r = lines.rows(K_RECORD)
    rec_offset, rec_ts = _tokens(lines.sub(r), [np.full(r.size, 3), np.full(r.size, 5)])
    marker = r[np_bool(pc.match_substring(lines.sub(r), " endTxnMarker: "))]
    marker_type, marker_epoch = groups(lines.sub(marker), D.END_TXN_MARKER)
    fields |= {
        "rec_offset": spread(try_int(rec_offset, pa.int64()), r, n),
        "rec_timestamp": spread(try_int(rec_ts, pa.int64()), r, n),
        "marker_type": spread(marker_type, marker, n),
        "marker_epoch": spread(try_int(marker_epoch, pa.int32()), marker, n),
    }
    bad_batch = np.zeros(n, bool)
    bad_batch[b[match(lines.sub(b), _BAD_BATCH)]] = True
    # a batch line whose magic is not 2: FileLogInputStream.nextBatch frames any magic above 1 as a v2 batch and
    # DumpLogSegments prints the byte as read (its CRC does not cover it), where the segment reader says bad_magic
    magic = fields["magic"].take(pa.array(b, pa.int64()))
    bad_batch[b[np_bool(pc.not_equal(pc.fill_null(magic, 2), 2))]] = True
    return fields, bad_batch


def _snapshot_fields(snapshot_lines: pa.Array) -> dict[str, pa.Array]:
    """The producer snapshot entries' fields, one value per snapshot line."""
    sg = groups(snapshot_lines, D.SNAPSHOT_LINE)

    def sn(i: int, typ: pa.DataType | None = None) -> pa.Array:  # group i (1-based), try_cast
        return try_int(sg[i - 1], typ or pa.int64())

    minus_one = pa.scalar(-1, pa.int64())
    return {
        "producer_id": sn(1),
        "producer_epoch": sn(2, pa.int32()),
        "coordinator_epoch": sn(3, pa.int32()),
        "first_offset": pc.coalesce(sn(5), sn(6), minus_one),
        "last_offset": pc.coalesce(sn(10), minus_one),
        "last_sequence": pc.coalesce(sn(9, pa.int32()), pa.scalar(-1, pa.int32())),
        "last_timestamp": pc.coalesce(sn(7), sn(12)),
    }


def _quarantine_columns(
    batch: pa.RecordBatch,
    lines: _Lines,
    path: dict[str, pa.Array],
    section: np.ndarray,
    bad_batch: np.ndarray,
    unknown_key: np.ndarray,
    first_chars: pa.Array,
) -> tuple[pa.Array, pa.Array]:
    """(reason, detail) of each line: lines no format knows, lines outside any readable segment, corrupt
    snapshots (null where the line is fine)."""
    kind = lines.kind
    governed = section > 0
    ignored = np_bool(path["ignored"])
    is_txn = np_bool(path["is_txn_state"])
    in_segment = np_bool(path["data_section"]) | (is_txn & governed)
    outside = ~in_segment & ~ignored
    orphan = ~governed & np.isin(kind, (K_BATCH, K_LEGACY, K_RECORD, K_SNAPSHOT, K_START))
    no_partition = (kind == K_DUMPING) & np_bool(path["topic"].is_null()) & ~ignored
    corrupt = lines.rows(K_SNAPSHOT_CORRUPT, governed)
    snapshot_crc = np.zeros(kind.size, bool)
    crc_text = groups(lines.sub(corrupt), D.SNAPSHOT_CORRUPT_LINE)[0]
    snapshot_crc[corrupt[np_bool(pc.not_equal(crc_text, ""))]] = True
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
        batch.column("file"), ":", pc.cast(batch.column("line_no"), pa.string()), ": entries ignored: ", first_chars, ""
    )
    is_corrupt = (kind == K_SNAPSHOT_CORRUPT) & governed
    return reason, pick(kind.size, pa.string(), (is_corrupt, entries_ignored), (code > 0, first_chars))
