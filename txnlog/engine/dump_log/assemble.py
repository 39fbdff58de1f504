"""``--dump-log`` step 3, the assembly: one dumped segment's parsed lines become the segment source's rows
(:func:`assemble_segment`) or the txn-state source's (:func:`assemble_txn_state`), with the quarantine rows
of its damage. txnlog.engine.spark.dump_log says how the three steps fit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker.fragments import SUMMARY_FRAGMENT_COLUMNS, segment_fragments
from txnlog.broker.producer_state import segment_producers
from txnlog.kafka import dump_log_text as D
from txnlog.kafka import errors
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import BATCH_COLUMNS
from txnlog.model.arrow import table_group_starts
from txnlog.model.rows import (
    KIND_QUARANTINE,
    KIND_SEGMENT,
    SEGMENT_SUMMARY_SCHEMA,
    TXN_STATE_SCHEMA,
    batch_of,
    broker_timestamps,
    fragment_kinds,
    producer_rows,
)
from txnlog.rules.damage import region_offsets
from txnlog.sources.dump_log.parse import K_BATCH, K_ELIDED, K_INVALID_BYTES, K_LEGACY, K_RECORD, K_START


def _np(table: pa.Table, name: str, dtype: Any, fill: Any) -> np.ndarray:
    col = table.column(name)
    return (
        np.asarray(col.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype) if len(col) else np.empty(0, dtype)
    )


def _first(table: pa.Table, name: str) -> Any:
    col = table.column(name).drop_null()
    return col[0].as_py() if len(col) else None


def _valid(table: pa.Table, unknown: bool = False) -> np.ndarray:
    """Per line: a batch line the segment reader would read (``isvalid: true``, magic 2); ``unknown`` where the
    line says neither."""
    valid = _np(table, "crc_valid", bool, unknown)
    return valid & (_np(table, "magic", np.int32, 2) == 2) if "magic" in table.column_names else valid


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
    bad_magic = _np(table, "magic", np.int32, 2)[idx] != 2
    reason = np.where(
        is_bad_batch,
        np.where(bad_magic, errors.BAD_MAGIC, D.REASON_CRC),
        np.where(
            k == K_INVALID_BYTES, D.REASON_INVALID_BYTES, np.where(k == K_ELIDED, D.REASON_ELIDED, D.REASON_TOOL_ERROR)
        ),
    )
    dump_file = _first(table, dump_col)
    texts = text.take(pa.array(idx)).to_pylist()
    if is_bad_batch.any():  # a batch line is long: its offsets, position and size, as printed, and its verdict
        offsets = _np(table, "base_offset", np.int64, -1)[idx], _np(table, "last_offset", np.int64, -1)[idx]
        magic = _np(table, "magic", np.int32, 2)[idx]
        crc_bad = ~_np(table, "crc_valid", bool, False)[idx]
        texts = [
            f"baseOffset: {offsets[0][j]} lastOffset: {offsets[1][j]} ... position: {pos[idx][j]} ... "
            f"size: {size[idx][j]} magic: {magic[j]} ... isvalid: {str(not crc_bad[j]).lower()}"
            if bad
            else t
            for j, (bad, t) in enumerate(zip(is_bad_batch, texts))
        ]
    return {
        "position": pa.array(position, pa.int64()),
        "length": pa.array(np.where(length >= 0, length, 0), pa.int64(), mask=length < 0),
        "reason": pa.array(reason.tolist(), pa.string()),
        "detail": pa.array([f"{dump_file}:{int(n)}: {t}" for n, t in zip(line_no[idx], texts)], pa.string()),
        "n": int(idx.size),
    }


def _region_offsets(batches: dict[str, np.ndarray], damage: dict[str, Any]) -> dict[str, pa.Array]:
    """The offsets each damaged region of a dumped segment may hold, by the one rule the segment reader
    applies (txnlog.rules.damage.region_offsets), from the batches the dump shows valid: after the last one
    above the region, before the first one below it. A region of unknown length (the tool stopped, or a
    ``...`` with nothing shown after it) runs to the end of what the dump shows, so no batch bounds it after.
    """
    length = damage["length"]
    unknown = np.asarray(length.is_null().to_numpy(zero_copy_only=False), bool)
    span = np.where(unknown, np.iinfo(np.int32).max, np.asarray(length.fill_null(0).to_numpy(), np.int64))
    first, last = region_offsets(
        batches["position"],
        batches["base_offset"],
        batches["last_offset"],
        np.asarray(damage["position"].to_numpy(), np.int64),
        span,
    )
    return {"first_offset": first, "last_offset": last}


def assemble_segment(table: pa.Table) -> pa.Table:
    """One dumped segment's parsed lines → SEGMENT_SUMMARY rows (runs, markers, the segment row).

    Runs in executors (``applyInArrow``); vectorized with numpy, then
    ``segment_fragments`` exactly as ``summarize_segment`` does for the bytes.
    """

    table = table.sort_by("line_no")
    broker, topic, partition, dpath = (_first(table, c) for c in ("broker", "topic", "partition", "dpath"))
    file_offset = _first(table, "file_offset")
    if file_offset is None:
        starts = table.filter(pa.compute.equal(table.column("kind_code"), K_START))
        file_offset = _first(starts, "base_offset")
    batches = _batch_columns(table)
    base = {"broker": broker, "topic": topic, "file": dpath}
    # the producers' state in this segment, as summarize_segment gives it for the bytes (producer_state)
    out = [producer_rows(broker, topic, partition, dpath, file_offset, segment_producers(batches))]
    frags = segment_fragments(batches)
    n = len(frags["kind"])
    if n:
        columns = {
            **base,
            "kind": fragment_kinds(frags["kind"]),
            "partition": partition,
            "file_offset": file_offset,
            **{k: frags[k] for k in SUMMARY_FRAGMENT_COLUMNS},
            "control_type": frags["control_type"].astype(np.int32),
        }
        out.append(batch_of(SEGMENT_SUMMARY_SCHEMA, n, columns))
    out.append(_segment_row(table, batches, base, partition, file_offset))
    damage = damage_rows(table)
    if damage is not None:
        n = damage.pop("n")
        columns = {
            **base,
            "kind": KIND_QUARANTINE,
            "partition": partition,
            "file_offset": file_offset,
            **damage,
            **_region_offsets(batches, damage),
        }
        out.append(batch_of(SEGMENT_SUMMARY_SCHEMA, n, columns))
    result = pa.Table.from_batches(out, schema=SEGMENT_SUMMARY_SCHEMA)
    return result.append_column("dump_file", pa.array([_first(table, "file")] * result.num_rows, pa.string()))


def assemble_quiet_segments(table: pa.Table) -> pa.Table:
    """Dumped segments that show no entry (their "Dumping" line and at most the tool's log-start line: the
    commonest dump, a quiet partition's segment) → the rows :func:`assemble_segment` gives each, made at once:
    the first segment's rows with each segment's own names and offsets, the only values such a segment's
    rows take from its lines. ``table`` holds whole segments (keyed by dump file and "Dumping" line)."""
    if not table.num_rows:
        return SEGMENT_SUMMARY_SCHEMA.append(pa.field("dump_file", pa.string())).empty_table()
    table = table.sort_by([("file", "ascending"), ("section", "ascending"), ("line_no", "ascending")])
    table = table.combine_chunks()
    starts = table_group_starts(table, ["file", "section"])
    ends = np.append(starts[1:], table.num_rows)
    first = assemble_segment(table.slice(0, int(ends[0])))
    if first.num_rows != 1:  # not one segment row alone: each segment assembled on its own
        return pa.concat_tables([assemble_segment(table.slice(int(a), int(b - a))) for a, b in zip(starts, ends)])
    out = first.take(pa.array(np.zeros(starts.size, np.int64)))
    start_offset = pc.if_else(pc.equal(table.column("kind_code"), K_START), table.column("base_offset"), None)
    values = {
        "broker": _firsts(table.column("broker"), starts, ends),
        "topic": _firsts(table.column("topic"), starts, ends),
        "file": _firsts(table.column("dpath"), starts, ends),
        "partition": _firsts(table.column("partition"), starts, ends),
        "file_offset": pc.coalesce(
            _firsts(table.column("file_offset"), starts, ends), _firsts(start_offset, starts, ends)
        ),
        "dump_file": _firsts(table.column("file"), starts, ends),
    }
    for name, column in values.items():
        i = out.column_names.index(name)
        out = out.set_column(i, out.schema.field(i), column.cast(out.schema.field(i).type))
    return out


def _firsts(column: Any, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The first non-null value of each group of rows [start, end) (``_first`` of each), null where none."""
    valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), bool)
    index = np.minimum.reduceat(np.where(valid, np.arange(valid.size), valid.size), starts)
    found = index < ends
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return values.take(pa.array(np.where(found, index, 0), mask=~found))


def _batch_columns(table: pa.Table, segment: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The segment's batches as the binary scan's BATCH_COLUMNS, from its batch lines and the record lines below
    them; only the valid batches (``isvalid: false`` is quarantined as crc_mismatch and, as in the binary path,
    not used). ``table`` in line order; with ``segment`` (ascending: the dumped segment of each line) the lines
    of several segments one after another, each batch's segment in the key ``segment``."""
    kind = _np(table, "kind_code", np.int32, -1)
    is_b = kind == K_BATCH
    valid_all = _valid(table)[is_b]
    nb = int(is_b.sum())
    segment = np.zeros(kind.size, np.int64) if segment is None else segment

    def col(name: str, dtype: Any, fill: Any) -> np.ndarray:
        return _np(table, name, dtype, fill)[is_b]

    max_ts = col("max_timestamp", np.int64, -1)
    is_control = col("is_control", bool, False)
    count = col("record_count", np.int32, 0)
    control = _from_record_lines(table, kind, segment, is_b, max_ts, is_control, count)
    dh = table.column("delete_horizon").filter(pa.array(is_b))
    dh_np = np.asarray(dh.fill_null(-1).to_numpy(zero_copy_only=False), np.int64) if nb else np.empty(0, np.int64)
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
        "base_timestamp": np.where(dh_np >= 0, dh_np, control["base_timestamp"]),
        "max_timestamp": max_ts,
        "producer_id": col("producer_id", np.int64, -1),
        "producer_epoch": col("producer_epoch", np.int16, -1),
        "base_sequence": col("base_sequence", np.int32, -1),
        "record_count": count,
        "control_key_version": np.where(is_control, 0, -1).astype(np.int16),
        "control_type": control["control_type"],
        "control_value_version": np.where(control["control_status"] == ControlStatus.END_TXN_MARKER, 0, -1).astype(
            np.int16
        ),
        "coordinator_epoch": control["coordinator_epoch"],
        "marker_timestamp": control["marker_timestamp"],
        "control_status": control["control_status"],
        "has_delete_horizon": dh_np >= 0,
    }
    for name, dtype in BATCH_COLUMNS.items():  # columns added to the binary scan later: neutral values
        if name not in batches:
            batches[name] = np.zeros(nb, dtype)
    out = {k: np.asarray(v, BATCH_COLUMNS.get(k))[valid_all] for k, v in batches.items()}
    out["segment"] = segment[is_b][valid_all]
    return out


def _from_record_lines(
    table: pa.Table,
    kind: np.ndarray,
    segment: np.ndarray,
    is_b: np.ndarray,
    max_ts: np.ndarray,
    is_control: np.ndarray,
    count: np.ndarray,
) -> dict[str, np.ndarray]:
    """What the record lines below each batch line say of it: its base timestamp (the first record's, printed
    after the batch line), and for a control batch its status, control type, coordinator epoch and timestamp.
    ``table`` in line order, ``segment`` the dumped segment of each line (ascending)."""
    line = np.arange(kind.size)
    bl = line[is_b]
    nb = int(bl.size)
    # record lines → their batch (the closest batch line above them, in the same segment)
    is_r = kind == K_RECORD
    r_batch = np.searchsorted(bl, line[is_r], side="right") - 1
    r_ok = r_batch >= 0
    r_ok[r_ok] = segment[bl[r_batch[r_ok]]] == segment[is_r][r_ok]
    r_ts = _np(table, "rec_timestamp", np.int64, -1)[is_r]
    r_after = _np(table, "after_batch", bool, False)[is_r]
    r_mtype = table.column("marker_type").filter(pa.array(is_r)).to_pylist() if is_r.any() else []
    r_mtype_id = (
        np.array([D.CONTROL_TYPE_IDS.get(t, -1) if t else -1 for t in r_mtype], np.int16)
        if r_mtype
        else np.empty(0, np.int16)
    )
    r_mepoch = _np(table, "marker_epoch", np.int32, -1)[is_r]
    base_ts = max_ts.copy()
    first = r_ok & r_after
    base_ts[r_batch[first]] = r_ts[first]
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
    return {
        "base_timestamp": base_ts,
        "control_status": status,
        "control_type": ctype,
        "coordinator_epoch": cepoch,
        "marker_timestamp": marker_ts,
    }


def _segment_row(
    table: pa.Table, batches: dict[str, np.ndarray], base: dict[str, Any], partition: Any, file_offset: Any
) -> pa.RecordBatch:
    """The segment's own ``segment`` row: its offsets, times, counts and size (the end of its last entry)."""
    kind = _np(table, "kind_code", np.int32, -1)
    is_l = kind == K_LEGACY
    ends = (_np(table, "position", np.int64, 0) + _np(table, "size", np.int64, 0))[(kind == K_BATCH) | is_l]
    has = batches["base_offset"].size > 0
    return batch_of(
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


def _undecoded(table: pa.Table, batch_lines: np.ndarray, missing: np.ndarray) -> pa.Table:
    """The quarantine row of a dumped ``__transaction_state`` segment whose batches at ``missing`` show no
    decoded record (dumped without ``--transaction-log-decoder``)."""
    detail = (
        f"{missing.size} of {batch_lines.size} batches of {_first(table, 'dpath')} show no decoded record; "
        "dump __transaction_state with --transaction-log-decoder"
    )
    row = {
        "kind": KIND_QUARANTINE,
        "broker": _first(table, "broker"),
        "coordinator_partition": pa.array([_first(table, "partition")], pa.int32()),
        "file": _first(table, "dump_file"),
        "position": np.full(1, int(batch_lines[missing[0]]), np.int64),
        "length": np.full(1, 1, np.int64),
        "reason": D.REASON_TXN_UNDECODED,
        "detail": detail,
    }
    return pa.Table.from_batches([batch_of(TXN_STATE_SCHEMA, 1, row)])


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
    valid = _valid(table, True)[is_b]
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
                            "coordinator_partition": _first(table, "partition"),
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
        out.append(_undecoded(table, bl, missing))
    result = pa.concat_tables(out)
    return result.append_column("dump_file", pa.array([dump_file] * result.num_rows, pa.string()))
