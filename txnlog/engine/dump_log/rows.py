"""kafka-dump-log.sh lines → the rows of the segment and txn-state sources: one function per step, over Arrow.

Both placements call :func:`files_rows` on whole dump files in the Data Source's reader
(txnlog.engine.spark.dump_log): Spark's reading tasks, or the driver's threads for a small input
(``read_dump_logs_here``); it reads the many small files together and a large one as :func:`file_rows` does. That
keeps the lines each output reads (:func:`summary_lines`, :func:`record_lines`) and
applies :func:`summary_rows` or :func:`record_rows` to each dumped segment as soon as its lines are read, with the
replica names the few "Dumping" lines give (txnlog.engine.dump_log.names): a segment's lines never leave their file.
SQL's three-valued logic is kept: a filter keeps a row only where its condition is true (``_where``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.engine.dump_log.assemble import assemble_quiet_segments
from txnlog.engine.dump_log.assemble_many import assemble_segments, assemble_txn_states
from txnlog.engine.dump_log.names import Names, replica_names, with_replica_names
from txnlog.engine.dump_log.outputs import BOTH, BOTH_SCHEMA, DUMP_FILE, DUMPING_LINE, NAMING_COLUMNS, RECORDS, SUMMARY
from txnlog.model.arrow import table_group_starts
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA
from txnlog.sources.dump_log.lines import DEFAULT_CHUNK_BYTES, iter_line_batches
from txnlog.sources.dump_log.parse import (
    DAMAGE_KINDS,
    K_BATCH,
    K_DUMPING,
    K_LEGACY,
    K_RECORD,
    K_SNAPSHOT,
    K_SNAPSHOT_CORRUPT,
    K_START,
    parse_lines,
)

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


#: the parsed columns :func:`summary_rows` reads
SUMMARY_LINE_COLUMNS = tuple(
    dict.fromkeys(
        [*SEGMENT_COLUMNS, "data_section", "kind_code", "after_batch", "marker_type", "section", "is_txn_state"]
        + ["ignored", "first_offset", "last_timestamp", "coordinator_epoch", "last_sequence", "reason", "detail"]
    )
)
#: the parsed columns :func:`record_rows` reads
RECORD_LINE_COLUMNS = tuple(
    dict.fromkeys(
        ["is_txn_state", "kind_code", "txn_decoded", "broker", "partition", "dpath", "rec_offset", "rec_timestamp"]
        + [*RECORD_COLUMNS, "partition_leader_epoch", "record_count", "crc_valid", "position", "size"]
        + ["damage_text", "invalid_bytes", "line_no", "section", "file"]
    )
)


def summary_lines(lines: pa.Table) -> pa.Table:
    """The lines and columns :func:`summary_rows` reads (a row-local filter: Spark applies it in the reading
    tasks, before each dumped segment's lines are grouped)."""
    return _where(lines, _summary_kept(lines)).select(list(SUMMARY_LINE_COLUMNS))


def _summary_kept(lines: pa.Table) -> Any:
    kind = _col(lines, "kind_code")
    record = pc.and_kleene(
        pc.equal(kind, K_RECORD), pc.or_kleene(_col(lines, "after_batch"), pc.is_valid(_col(lines, "marker_type")))
    )
    kinds = _kinds(lines, K_DUMPING, K_START, K_BATCH, K_LEGACY, K_SNAPSHOT, *DAMAGE_KINDS)
    return pc.or_kleene(pc.or_kleene(kinds, record), pc.is_valid(_col(lines, "reason")))


def record_lines(lines: pa.Table) -> pa.Table:
    """The lines and columns :func:`record_rows` reads: the ``__transaction_state`` dumps' record, batch,
    damage and "Dumping" lines."""
    return _where(lines, _record_kept(lines)).select(list(RECORD_LINE_COLUMNS))


def _record_kept(lines: pa.Table) -> Any:
    return pc.and_kleene(
        _col(lines, "is_txn_state"), _kinds(lines, K_DUMPING, K_RECORD, K_BATCH, K_LEGACY, *DAMAGE_KINDS)
    )


def summary_rows(lines: pa.Table, names: Names) -> pa.Table:
    """The parsed lines of whole dumped files or segments → SEGMENT_SUMMARY_SCHEMA rows (segments, producer
    snapshots, quarantine), ``broker`` the replica name ``names`` gives (txnlog.engine.dump_log.names.replica_names)."""
    return _shaped(with_replica_names(_summary(lines), names), SEGMENT_SUMMARY_SCHEMA)


def _summary(lines: pa.Table) -> pa.Table:
    """:func:`summary_rows` with each row's ``dump_file``, ``broker`` as printed."""
    return pa.concat_tables([_segments(lines), _snapshots(lines), _quarantine(lines)], promote_options="default")


def record_rows(lines: pa.Table, names: Names) -> pa.Table:
    """The parsed lines of whole dumped files or segments → TXN_STATE_SCHEMA rows (the ``__transaction_state``
    records and one ``segment`` row per dumped coordinator segment), ``broker`` the replica name."""
    return _shaped(with_replica_names(_txn_records(lines), names), TXN_STATE_SCHEMA)


def _txn_records(lines: pa.Table) -> pa.Table:
    """:func:`record_rows` with each row's ``dump_file``, ``broker`` as printed."""
    return pa.concat_tables([_records(lines), _dumped(lines)], promote_options="default")


def both_lines(lines: pa.Table) -> pa.Table:
    """The lines and columns :func:`both_rows` reads: those :func:`summary_lines` or :func:`record_lines` keeps
    (row-local, as they are)."""
    columns = dict.fromkeys([*SUMMARY_LINE_COLUMNS, *RECORD_LINE_COLUMNS, "loc", "loc_named", "stem"])
    return _where(lines, pc.or_kleene(_summary_kept(lines), _record_kept(lines))).select(list(columns))


def both_rows(lines: pa.Table, names: Names) -> pa.Table:
    """The parsed lines of whole dumped files or segments → :data:`BOTH_SCHEMA` rows: :func:`summary_rows`',
    :func:`record_rows`' (with their dump file) and the "Dumping" lines, ``broker`` the replica name ``names``
    gives, else as printed (one pass reads them before the names are known: :func:`named_outputs` names them)."""
    tables = []
    for output, keep, build in ((SUMMARY, summary_lines, _summary), (RECORDS, record_lines, _txn_records)):
        kept = keep(lines)
        if kept.num_rows:
            tables.append(_tagged(with_replica_names(build(kept), names), output))
    dumping = _where(lines, pc.equal(_col(lines, "kind_code"), K_DUMPING))
    columns = {name: dumping.column("file" if name == "dump_file" else name) for name in NAMING_COLUMNS}
    tables.append(_tagged(pa.table(columns), DUMPING_LINE))
    return pa.concat_tables([_shaped(t, BOTH_SCHEMA) for t in tables])


def _tagged(table: pa.Table, output: str) -> pa.Table:
    return table.append_column("output", pa.repeat(pa.scalar(output, pa.string()), table.num_rows))


def dumping_names(dumping: pa.Table) -> Names:
    """The replica names of the input's "Dumping" lines as :data:`BOTH_SCHEMA` holds them (``NAMING_COLUMNS``)."""
    columns = {"file" if name == "dump_file" else name: dumping.column(name) for name in NAMING_COLUMNS}
    kind = pa.repeat(pa.scalar(K_DUMPING, pa.int32()), dumping.num_rows)
    return replica_names(pa.table({"kind_code": kind, **columns}))


def named_outputs(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Every :data:`BOTH_SCHEMA` row of an input (all its tasks') → (SEGMENT_SUMMARY_SCHEMA rows,
    TXN_STATE_SCHEMA rows), each ``broker`` the replica name the input's "Dumping" lines give: the rows the
    SUMMARY and RECORDS outputs give with those names."""
    output = rows.column("output")
    names = dumping_names(_where(rows, pc.equal(output, DUMPING_LINE)))
    summary = with_replica_names(_where(rows, pc.equal(output, SUMMARY)), names)
    records = with_replica_names(_where(rows, pc.equal(output, RECORDS)), names)
    return _shaped(summary, SEGMENT_SUMMARY_SCHEMA), _shaped(records, TXN_STATE_SCHEMA)


def file_rows(
    path: str,
    names: Names,
    output: str,
    loc: str | None = None,
    loc_named: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[pa.Table]:
    """One dump file → its SUMMARY (:func:`summary_rows`) or RECORDS (:func:`record_rows`) rows, read a chunk at
    a time. A dumped segment's lines never leave their file, so each segment is assembled as soon as the next
    "Dumping" line is read: what is held is one segment's kept lines, never the file's, and nothing is shuffled.
    ``names`` are the replica names (txnlog.engine.dump_log.names.replica_names of the input's "Dumping" lines)."""
    return _batches_rows(iter_line_batches(path, chunk_bytes, loc, loc_named), names, output)


def files_rows(
    files: list[tuple[str, str | None, bool]],
    names: Names,
    output: str,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[pa.Table]:
    """Dump files (path, location name, named) → the rows :func:`file_rows` gives each of them, with a fixed
    cost per file near zero: the lines of the files read whole in a chunk or two (most dumps: a quiet
    partition's segment, a producer snapshot) are parsed and assembled together, up to ``chunk_bytes`` of
    text at a time - one call of each step for many files, and each dumped segment still assembled from its
    own file's lines alone (the assembly groups by dump file and "Dumping" line). A larger file is read as
    :func:`file_rows` reads it, a segment at a time."""
    group: list[pa.RecordBatch] = []
    held = 0
    for path, loc, named in files:
        batches = iter_line_batches(path, chunk_bytes, loc, named)
        first = list(itertools.islice(batches, 2))
        if len(first) == 2 and sum(b.nbytes for b in first) > chunk_bytes // 2:
            yield from _group_rows(group, names, output)
            group, held = [], 0
            yield from _batches_rows(itertools.chain(first, batches), names, output)
            continue
        first += list(batches)  # a short last line read on its own: the file is still small
        group += first
        held += sum(b.nbytes for b in first)
        if held >= chunk_bytes:
            yield from _group_rows(group, names, output)
            group, held = [], 0
    yield from _group_rows(group, names, output)


def _group_rows(group: list[pa.RecordBatch], names: Names, output: str) -> Iterator[pa.Table]:
    """The rows of whole dump files' line batches, parsed and assembled at once."""
    batches = [b for b in group if b.num_rows]
    if not batches:
        return
    keep, build = _STEPS[output]
    kept = keep(pa.Table.from_batches([parse_lines(pa.concat_batches(batches))]))
    if kept.num_rows:
        yield build(kept, names)


def _batches_rows(batches: Iterator[pa.RecordBatch], names: Names, output: str) -> Iterator[pa.Table]:
    """One dump file's line batches → its rows, each dumped segment assembled as soon as it has ended."""
    keep, build = _STEPS[output]
    pending: pa.Table | None = None
    for batch in batches:
        kept = keep(pa.Table.from_batches([parse_lines(batch)]))
        pending = kept if pending is None else pa.concat_tables([pending, kept])
        done = pc.less(pending.column("section"), batch.column("section")[-1])  # sections that have ended
        if pc.any(done).as_py():
            yield build(pending.filter(done), names)
            pending = pending.filter(pc.invert(done))
    if pending is not None and pending.num_rows:
        yield build(pending, names)


#: each output's lines kept and rows built
_STEPS = {SUMMARY: (summary_lines, summary_rows), RECORDS: (record_lines, record_rows), BOTH: (both_lines, both_rows)}


def _where(lines: pa.Table, condition: Any) -> pa.Table:
    """The rows where ``condition`` is true (null: dropped, as SQL's WHERE does)."""
    return lines.filter(pc.fill_null(condition, False))


def _col(lines: pa.Table, name: str) -> Any:
    return lines.column(name)


def _kinds(lines: pa.Table, *kinds: int) -> Any:
    return pc.is_in(_col(lines, "kind_code"), pa.array(kinds, pa.int32()))


def _shaped(table: pa.Table, schema: pa.Schema, *extra: str) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (null where it has none), cast, then ``extra`` as they are
    (what a SELECT of CASTs does)."""
    n = table.num_rows
    arrays = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type) for f in schema
    ]
    fields = [pa.field(f.name, f.type) for f in schema]
    for name in extra:
        arrays.append(table.column(name))
        fields.append(table.schema.field(name))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# --- the rows --------------------------------------------------------------------------------------------


def _segments(lines: pa.Table) -> pa.Table:
    """Each dumped data segment's lines → its summary rows (``assemble_segment``'s, of the busy segments at once:
    ``assemble_segments``)."""
    kinds = _kinds(lines, K_DUMPING, K_START, K_BATCH, K_LEGACY, *DAMAGE_KINDS)
    record = pc.and_kleene(
        pc.equal(_col(lines, "kind_code"), K_RECORD),
        pc.or_kleene(_col(lines, "after_batch"), pc.is_valid(_col(lines, "marker_type"))),
    )
    rows = _where(lines, pc.and_kleene(_col(lines, "data_section"), pc.or_kleene(kinds, record)))
    schema = SEGMENT_SUMMARY_SCHEMA.append(DUMP_FILE)
    rows = rows.select(list(SEGMENT_COLUMNS))
    quiet = pa.array(_quiet(rows))
    busy = _shaped(assemble_segments(rows.filter(pc.invert(quiet))), schema)
    return pa.concat_tables([busy, _shaped(assemble_quiet_segments(rows.filter(quiet)), schema)])


def _quiet(rows: pa.Table) -> np.ndarray:
    """Per line: its dumped segment shows no entry (only its "Dumping" line and the tool's log-start line)."""
    if not rows.num_rows:
        return np.zeros(0, bool)
    order = pc.sort_indices(rows, [("file", "ascending"), ("section", "ascending")]).to_numpy()
    sorted_rows = rows.select(["file", "section"]).take(pa.array(order))
    starts = table_group_starts(sorted_rows, ["file", "section"])
    kind = np.asarray(rows.column("kind_code").to_numpy(zero_copy_only=False))[order]
    entries = np.add.reduceat(~np.isin(kind, (K_DUMPING, K_START)), starts)
    quiet = np.empty(rows.num_rows, bool)
    quiet[order] = np.repeat(entries == 0, np.diff(np.append(starts, rows.num_rows)))
    return quiet


def _snapshots(lines: pa.Table) -> pa.Table:
    """Producer snapshot entries as ``snapshot`` rows."""
    snap = pc.and_kleene(
        pc.and_kleene(pc.equal(_col(lines, "kind_code"), K_SNAPSHOT), pc.greater(_col(lines, "section"), 0)),
        pc.and_kleene(pc.invert(_col(lines, "is_txn_state")), pc.invert(_col(lines, "ignored"))),
    )
    rows = _where(lines, snap)
    columns = ["broker", "topic", "partition", "file_offset", "producer_id", "producer_epoch", "first_offset"]
    columns += ["last_offset", "last_timestamp", "coordinator_epoch", "last_sequence"]
    return _shaped(
        pa.table(
            {
                "kind": pa.repeat(pa.scalar("snapshot"), rows.num_rows),
                "file": rows.column("dpath"),
                **{c: rows.column(c) for c in columns},
                "dump_file": rows.column("file"),
            }
        ),
        SEGMENT_SUMMARY_SCHEMA,
        "dump_file",
    )


def _quarantine(lines: pa.Table) -> pa.Table:
    """Lines that cannot or must not be read, by dump file and line; a corrupt producer snapshot by its file."""
    rows = _where(lines, pc.is_valid(_col(lines, "reason")))
    corrupt = pc.equal(rows.column("kind_code"), K_SNAPSHOT_CORRUPT)
    n = rows.num_rows
    return _shaped(
        pa.table(
            {
                "kind": pa.repeat(pa.scalar("quarantine"), n),
                **{c: rows.column(c) for c in ("broker", "topic", "partition", "file_offset", "reason", "detail")},
                "file": pc.if_else(corrupt, rows.column("dpath"), rows.column("file")),
                "position": pc.if_else(corrupt, pa.scalar(0, pa.int64()), rows.column("line_no")),
                "length": pc.if_else(corrupt, pa.scalar(None, pa.int64()), pa.scalar(1, pa.int64())),
                "dump_file": rows.column("file"),
            }
        ),
        SEGMENT_SUMMARY_SCHEMA,
        "dump_file",
    )


def _records(lines: pa.Table) -> pa.Table:
    """The ``__transaction_state`` record lines with their batch lines, per dumped segment → TXN_STATE rows
    (``assemble_txn_state``)."""
    txn = _col(lines, "is_txn_state")
    decoded = _where(
        lines,
        pc.and_kleene(pc.and_kleene(txn, pc.equal(_col(lines, "kind_code"), K_RECORD)), _col(lines, "txn_decoded")),
    )
    n = decoded.num_rows
    record_rows = {
        "kind": pa.repeat(pa.scalar("record"), n),
        "broker": decoded.column("broker"),
        "coordinator_partition": decoded.column("partition"),
        "file": decoded.column("dpath"),
        "record_offset": decoded.column("rec_offset"),
        "record_timestamp": decoded.column("rec_timestamp"),
        **{c: decoded.column(c) for c in RECORD_COLUMNS},
    }
    batches = _where(lines, pc.and_kleene(txn, _kinds(lines, K_BATCH, K_LEGACY, *DAMAGE_KINDS)))
    batch_rows = {
        "broker": batches.column("broker"),
        "file": batches.column("dpath"),
        "partition_leader_epoch": batches.column("partition_leader_epoch"),
        "record_count": batches.column("record_count").cast(pa.int64()),
        "crc_valid": batches.column("crc_valid"),
        "batch_position": batches.column("position"),
        "batch_size": batches.column("size"),
        "damage_text": batches.column("damage_text"),
        "invalid_bytes": batches.column("invalid_bytes"),
    }
    both = pa.concat_tables(
        [_with_lines(pa.table(record_rows), decoded), _with_lines(pa.table(batch_rows), batches)],
        promote_options="default",
    )
    extra = ["line_no", "section", "dump_file", "kind_code", "dpath", "partition_leader_epoch", "record_count"]
    extra += ["partition", "crc_valid", "batch_position", "batch_size", "damage_text", "invalid_bytes"]
    both = _shaped(_typed(both), TXN_STATE_SCHEMA, *extra)
    schema = TXN_STATE_SCHEMA.append(DUMP_FILE)
    return _shaped(assemble_txn_states(both), schema)


_LINE_TYPES = {
    "partition_leader_epoch": pa.int32(),
    "record_count": pa.int64(),
    "crc_valid": pa.bool_(),
    "batch_position": pa.int64(),
    "batch_size": pa.int64(),
    "damage_text": pa.string(),
    "invalid_bytes": pa.int64(),
}


def _with_lines(rows: pa.Table, lines: pa.Table) -> pa.Table:
    """``rows`` plus the line columns ``assemble_txn_state`` groups and orders by."""
    for name in ("line_no", "section", "kind_code", "dpath", "partition"):
        rows = rows.append_column(name, lines.column(name))
    return rows.append_column("dump_file", lines.column("file"))


def _typed(table: pa.Table) -> pa.Table:
    """The extra line columns in the types the Spark path hands ``assemble_txn_state`` (null-filled ones
    take the type of a null column otherwise)."""
    for name, typ in _LINE_TYPES.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, typ))
        else:
            table = table.set_column(table.column_names.index(name), name, table.column(name).cast(typ))
    return table


def _dumped(lines: pa.Table) -> pa.Table:
    """One ``segment`` row per dumped ``__transaction_state`` segment: the coordinator partitions the dumps
    hold, records or not."""
    rows = _where(lines, pc.and_kleene(_col(lines, "is_txn_state"), pc.equal(_col(lines, "kind_code"), K_DUMPING)))
    table = pa.table(
        {
            "kind": pa.repeat(pa.scalar("segment"), rows.num_rows),
            "broker": rows.column("broker"),
            "coordinator_partition": rows.column("partition"),
            "file": rows.column("dpath"),
            "dump_file": rows.column("file"),
        }
    )
    return _shaped(table, TXN_STATE_SCHEMA, "dump_file")
