"""``--dump-log`` step 3 for many dumped segments at once: the rows txnlog.engine.dump_log.assemble.assemble_segment
gives each segment, made by one pass over all their lines.

A segment at a time, the assembly is a few dozen small numpy and Arrow calls and a batch of the schema's every
column per segment: Python between small kernels, which holds the GIL. Here the segments' lines are converted once,
their batches collapsed into fragments and producer rows by the calls the log-dir reader uses for many segments
(txnlog.broker.fragments.files_fragments, txnlog.broker.producer_state.files_producers), their ``segment`` rows
reduced per segment, and the rows built as one batch per kind. Only a segment whose dump shows damage is still
read on its own, for its quarantine rows (rare).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker.fragments import SUMMARY_FRAGMENT_COLUMNS, files_fragments
from txnlog.broker.producer_state import files_producers
from txnlog.engine.dump_log.assemble import (
    _batch_columns,
    _firsts,
    _np,
    _region_offsets,
    _valid,
    assemble_txn_state,
    damage_rows,
)
from txnlog.model.arrow import table_group_starts
from txnlog.model.rows import (
    KIND_PRODUCER,
    KIND_QUARANTINE,
    KIND_SEGMENT,
    SEGMENT_SUMMARY_SCHEMA,
    TXN_STATE_SCHEMA,
    batch_of,
    broker_written,
    fragment_kinds,
)
from txnlog.sources.dump_log.parse import K_BATCH, K_LEGACY, K_RECORD, K_START

_SCHEMA = SEGMENT_SUMMARY_SCHEMA.append(pa.field("dump_file", pa.string()))


def _by_segment(lines: pa.Table, file: str) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """``lines`` in file, "Dumping" section and line order (one chunk), with each dumped segment's first row, the
    row after its last, and each row's segment number."""
    table = lines.sort_by([(file, "ascending"), ("section", "ascending"), ("line_no", "ascending")])
    table = table.combine_chunks()
    starts = table_group_starts(table, [file, "section"])
    ends = np.append(starts[1:], table.num_rows)
    return table, starts, ends, np.repeat(np.arange(starts.size), ends - starts)


def assemble_segments(lines: pa.Table) -> pa.Table:
    """Dumped data segments' parsed lines (whole segments, keyed by dump file and "Dumping" line) → the rows
    ``assemble_segment`` gives each of them (SEGMENT_SUMMARY_SCHEMA and ``dump_file``), grouped by kind."""
    if not lines.num_rows:
        return _SCHEMA.empty_table()
    table, starts, ends, segment = _by_segment(lines, "file")
    names = _names(table, starts, ends)
    batches = _batch_columns(table, segment)
    owner = batches.pop("segment")
    parts = [_producer_rows(batches, owner, names), _fragment_rows(batches, owner, names)]
    parts.append(_segment_rows(table, batches, owner, segment, names))
    parts += _damage_rows(table, batches, owner, starts, ends, names)
    return pa.Table.from_batches([p for p in parts if p.num_rows], schema=_SCHEMA)


def _names(table: pa.Table, starts: np.ndarray, ends: np.ndarray) -> dict[str, pa.Array]:
    """Per segment: the columns that name it, as ``assemble_segment`` takes them from its lines."""
    start_offset = pc.if_else(pc.equal(table.column("kind_code"), K_START), table.column("base_offset"), None)
    return {
        "broker": _firsts(table.column("broker"), starts, ends).cast(pa.string()),
        "topic": _firsts(table.column("topic"), starts, ends).cast(pa.string()),
        "partition": _firsts(table.column("partition"), starts, ends).cast(pa.int32()),
        "file": _firsts(table.column("dpath"), starts, ends).cast(pa.string()),
        "file_offset": pc.coalesce(
            _firsts(table.column("file_offset"), starts, ends).cast(pa.int64()),
            _firsts(start_offset, starts, ends).cast(pa.int64()),
        ),
        "dump_file": _firsts(table.column("file"), starts, ends).cast(pa.string()),
    }


def _named(names: dict[str, pa.Array], of: np.ndarray) -> dict[str, pa.Array]:
    take = pa.array(of, pa.int64())
    return {name: column.take(take) for name, column in names.items()}


def _producer_rows(batches: dict[str, np.ndarray], owner: np.ndarray, names: dict[str, pa.Array]) -> pa.RecordBatch:
    producers, of = files_producers(batches, owner)
    columns = {name: pa.array(values, mask=~valid) for name, (values, valid) in producers.items()} if of.size else {}
    return batch_of(_SCHEMA, int(of.size), {"kind": KIND_PRODUCER, **_named(names, of), **columns})


def _fragment_rows(batches: dict[str, np.ndarray], owner: np.ndarray, names: dict[str, pa.Array]) -> pa.RecordBatch:
    frags, of = files_fragments(batches, owner)
    if not of.size:
        return batch_of(_SCHEMA, 0, {})
    columns = {
        "kind": fragment_kinds(frags["kind"]),
        **{k: frags[k] for k in SUMMARY_FRAGMENT_COLUMNS},
        "control_type": frags["control_type"].astype(np.int32),
    }
    return batch_of(_SCHEMA, int(of.size), {**_named(names, of), **columns})


def _segment_rows(
    table: pa.Table, batches: dict[str, np.ndarray], owner: np.ndarray, segment: np.ndarray, names: dict[str, Any]
) -> pa.RecordBatch:
    """Each segment's ``segment`` row (``assemble_segment``'s ``_segment_row``, of every segment at once)."""
    n = len(names["file"])
    counts = np.bincount(owner, minlength=n)
    has = counts > 0
    first = (np.cumsum(counts) - counts)[has]

    def reduced(ufunc: np.ufunc, values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
        out = np.zeros(n, np.int64)
        found = has.copy()
        if first.size:
            v = values.astype(np.int64)
            if mask is not None:
                v = np.where(mask, v, np.iinfo(np.int64).min)
                found[has] = np.logical_or.reduceat(mask, first)
            out[has] = ufunc.reduceat(v, first)
        return pa.array(out, pa.int64(), mask=~found)

    kind = _np(table, "kind_code", np.int32, -1)
    framed = (kind == K_BATCH) | (kind == K_LEGACY)
    ends = (_np(table, "position", np.int64, 0) + _np(table, "size", np.int64, 0))[framed]
    size = np.zeros(n, np.int64)
    np.maximum.at(size, segment[framed], ends)
    columns = {
        "kind": KIND_SEGMENT,
        **names,
        "first_offset": reduced(np.minimum, batches["base_offset"]),
        "last_offset": reduced(np.maximum, batches["last_offset"]),
        "first_timestamp": reduced(np.minimum, batches["base_timestamp"]),
        "last_timestamp": reduced(np.maximum, batches["max_timestamp"]),
        "batch_count": counts.astype(np.int64),
        "record_count": np.bincount(owner, batches["record_count"].astype(np.float64), n).astype(np.int64),
        "size_bytes": size,
        "legacy_entries": np.bincount(segment[kind == K_LEGACY], minlength=n).astype(np.int64),
        **{name: reduced(np.maximum, batches["max_timestamp"], mask) for name, mask in broker_written(batches).items()},
    }
    return batch_of(_SCHEMA, n, columns)


def _damage_rows(
    table: pa.Table,
    batches: dict[str, np.ndarray],
    owner: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    names: dict[str, pa.Array],
) -> list[pa.RecordBatch]:
    """The quarantine rows of the segments whose dump shows damage, each read on its own (``damage_rows``)."""
    text = np.asarray(table.column("damage_text").is_valid().to_numpy(zero_copy_only=False), bool)
    damaged = np.flatnonzero(np.logical_or.reduceat(text, starts)) if text.any() else np.empty(0, np.int64)
    out = []
    for s in damaged.tolist():
        damage = damage_rows(table.slice(int(starts[s]), int(ends[s] - starts[s])))
        if damage is None:
            continue
        mine = {k: v[owner == s] for k, v in batches.items()}
        n = damage.pop("n")
        columns = {"kind": KIND_QUARANTINE, **_named(names, np.full(n, s)), **damage, **_region_offsets(mine, damage)}
        out.append(batch_of(_SCHEMA, n, columns))
    return out


_TXN_SCHEMA = TXN_STATE_SCHEMA.append(pa.field("dump_file", pa.string()))


def assemble_txn_states(lines: pa.Table) -> pa.Table:
    """Dumped ``__transaction_state`` segments' batch and record lines (whole segments, keyed by dump file and
    "Dumping" line) → the rows ``assemble_txn_state`` gives each of them, made at once: each record with its
    batch's leader epoch (the records of a batch the dump shows invalid dropped); a segment that shows damage,
    or batches without decoded records, assembled on its own for those quarantine rows."""
    if not lines.num_rows:
        return _TXN_SCHEMA.empty_table()
    table, starts, ends, segment = _by_segment(lines, "dump_file")
    kind = _np(table, "kind_code", np.int32, -1)
    is_b, is_rec = kind == K_BATCH, kind == K_RECORD
    rows = np.flatnonzero(is_b)
    ple = _np(table, "partition_leader_epoch", np.int32, -1)[is_b]
    valid = _valid(table, True)[is_b]
    # each line's batch: the closest batch line above it in its segment (-1: none)
    batch = np.searchsorted(rows, np.arange(kind.size), side="right") - 1
    has = batch >= 0
    has[has] = segment[rows[batch[has]]] == segment[has]
    batch = np.where(has, batch, -1)
    use = is_rec & ~(has & ~valid[np.maximum(batch, 0)] if rows.size else np.zeros(kind.size, bool))
    epochs = np.where(batch[use] >= 0, ple[np.maximum(batch[use], 0)] if ple.size else -1, -1).astype(np.int32)
    recs = table.filter(pa.array(use))
    recs = recs.set_column(recs.schema.get_field_index("coordinator_epoch"), "coordinator_epoch", pa.array(epochs))
    out = [recs.select(_TXN_SCHEMA.names).cast(_TXN_SCHEMA)]
    decoded = np.zeros(rows.size, bool)
    decoded[batch[is_rec & has]] = True
    undecoded = ~decoded & (_np(table, "record_count", np.int64, 0)[is_b] > 0)
    text = np.asarray(table.column("damage_text").is_valid().to_numpy(zero_copy_only=False), bool)
    odd = np.zeros(starts.size, bool)
    odd[segment[text]] = True
    odd[segment[rows[undecoded]]] = True
    for s in np.flatnonzero(odd).tolist():  # the segment's own assembly: its records again, and its quarantine
        alone = assemble_txn_state(table.slice(int(starts[s]), int(ends[s] - starts[s])))
        out.append(alone.filter(pc.equal(alone.column("kind"), KIND_QUARANTINE)).cast(_TXN_SCHEMA))
    return pa.concat_tables(out)
