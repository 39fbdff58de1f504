"""The integrity audit (txnlog.rules.integrity) over the run's staged files, in this process: the staged
transactions' audited columns, and the coordinator's decisions from the staged ``__transaction_state`` records.
Where this process staged them (the driver placement: :func:`kept_columns` while it decodes and merges), the
columns are those the merge wrote, kept in memory up to :data:`KEPT_BYTES` (txnlog.engine.staging.kept_in_memory:
no copy); a file past it, or staged elsewhere, is read by the placement's threads. The driver's audit
(:func:`audit_here`) checks a group of whole partitions at a time against the decisions that name them, built a
coordinator partition at a time: its memory does not grow with the input. In Spark's tasks:
txnlog.engine.spark.integrity."""

from __future__ import annotations

import dataclasses
import pickle
import posixpath
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import fs as pafs

from txnlog.engine.plan import pack_sizes
from txnlog.engine.staging import forget_kept, kept_in_memory, kept_tables, read_raw
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.finish import HISTORY_COLUMNS, RAW_COLUMNS
from txnlog.rules.integrity import (
    MS_SCHEMA,
    TXN_COLUMNS,
    Decisions,
    as_rows,
    audited,
    decisions,
    decisions_by,
    index_rows,
    joined,
    partition_integrity,
    producer_rows,
)
from txnlog.sources import storage

__all__ = [
    "HELD_SCHEMA",
    "STAGED_SCHEMA",
    "audit_groups",
    "audit_here",
    "decisions_of",
    "held_partitions",
    "integrity_here",
    "kept_columns",
    "staged_columns",
]

#: the staged transaction columns the audit reads
STAGED_SCHEMA = pa.schema([SEGMENT_SUMMARY_SCHEMA.field(c) for c in TXN_COLUMNS if c in RAW_COLUMNS])
#: what a staged transactions file holds (:func:`held_partitions`): one row per partition, with the file's rows
HELD_SCHEMA = pa.schema(
    [("path", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("rows", pa.int64())]
)
#: the staged ``__transaction_state`` columns the coordinator's decisions read
_HISTORY_COLUMNS = [
    c
    for c in (
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "state",
        "partitions",
        "coordinator_partition",
        "record_offset",
        "client_transaction_version",
    )  # fmt: skip
    if c in HISTORY_COLUMNS
]


#: the most bytes of the staged files' audited columns kept in memory as they are written (:func:`kept_columns`);
#: the files past it are read again by the audit
KEPT_BYTES = 64 << 20
#: about the most bytes of audited transaction columns in a group of :func:`audit_here`, and the bytes of those
#: columns per staged transaction, to deal the files into groups before reading them
GROUP_BYTES, ROW_BYTES = 32 << 20, 128
#: groups of :func:`audit_here` per thread at least: a few, so that unequal groups even out over the threads
GROUPS_PER_THREAD = 2


@contextmanager
def kept_columns(scratch: str) -> Iterator[None]:
    """While inside, the audited columns of the transactions and ``__transaction_state`` records this process
    stages under ``scratch`` (txnlog.engine.staging) are kept in memory as written, for the audit, up to
    :data:`KEPT_BYTES` of them."""
    stages = {f"{scratch}/transactions": STAGED_SCHEMA.names, f"{scratch}/coordinator_history": _HISTORY_COLUMNS}
    with kept_in_memory(stages, KEPT_BYTES):
        yield


def staged_columns(path: str) -> pa.Table:
    """The audited columns of a staged transactions file (txnlog.engine.staging), as staged: those kept in
    memory where this process staged the file, else read."""
    table = _columns(path, STAGED_SCHEMA.names)
    return table if table.schema.equals(STAGED_SCHEMA) else table.cast(STAGED_SCHEMA)


def _columns(uri: str, columns: list[str]) -> pa.Table:
    """Those of ``columns`` a staged file (Arrow IPC, txnlog.engine.staging) has: the tables this process kept of
    it (:func:`kept_columns`), else read, only their buffers."""
    kept = kept_tables(uri)
    if kept:
        present = [c for c in columns if c in kept[0].column_names]
        return pa.concat_tables([t.select(present) for t in kept])
    return read_raw(uri, columns)


def integrity_here(
    files: list[str],
    index: pa.Table,
    segments: pa.Table,
    decided: Decisions | Future[Decisions],
    threads: int = 1,
    beside: ThreadPoolExecutor | None = None,
) -> pa.Table:
    """:func:`txnlog.rules.integrity.partition_integrity` of every partition of the staged transaction ``files``
    at once (the rule is vectorized over whole partitions): their columns kept in memory (:func:`kept_columns`),
    or those of a file not kept read by ``threads`` threads (Arrow's IPC reader releases the GIL).

    With ``beside`` (a pool of one thread, where ``decided`` may still be being computed: :func:`decisions_of`),
    the checks against the decisions run there while this thread runs the ``.txnindex`` checks: the two halves
    are independent and spend their time in Arrow's and numpy's kernels, which release the GIL."""
    with ThreadPoolExecutor(max(1, min(threads, len(files) or 1)), thread_name_prefix="txnlog-audit") as pool:
        parts = [p for p in pool.map(staged_columns, files) if p.num_rows]
    txns = audited(pa.concat_tables(parts) if parts else STAGED_SCHEMA.empty_table())
    known: Callable[[], Decisions] = decided.result if isinstance(decided, Future) else lambda: decided
    if beside is None:
        return partition_integrity(txns, index, segments, known())
    producers = beside.submit(lambda: producer_rows(txns, known()))
    rows = index_rows(txns, index, segments, lambda: known().owners)
    return as_rows(rows + producers.result())


def decisions_of(files: list[str]) -> Decisions:
    """The coordinator's decisions (txnlog.rules.integrity.decisions) of the staged ``__transaction_state``
    records ``files``: only the columns they need are read."""
    parts = [p for p in (_columns(path, _HISTORY_COLUMNS) for path in files) if p.num_rows]
    if not parts:
        return decisions(pa.table({}))
    return decisions(pa.concat_tables(parts, promote_options="permissive"))


def held_partitions(path: str) -> pa.Table:
    """The partitions (topic, partition) whose transactions the staged file ``path`` holds, one row each
    (:data:`HELD_SCHEMA`, ``rows`` the file's); only those two columns are read."""
    table = _columns(path, ["topic", "partition"])
    held = table.group_by(["topic", "partition"], use_threads=False).aggregate([])
    n = held.num_rows
    return pa.table(
        [
            pa.array([path] * n, pa.string()),
            held.column("topic").cast(pa.string()),
            held.column("partition").cast(pa.int32()),
            pa.array([table.num_rows] * n, pa.int64()),
        ],
        schema=HELD_SCHEMA,
    )


def audit_groups(held: pa.Table, groups: int) -> list[list[str]]:
    """The staged transaction files of ``held`` (:func:`held_partitions` of each) dealt into at most ``groups``
    groups balanced by rows, each holding the whole of its partitions: the audit checks a partition's every
    transaction at once. A task stages whole partitions (txnlog.engine.plan), so each file is a unit of its own;
    files that share a partition all the same (none should) go into one group together. A row whose topic is null
    names only its file (and its rows): Spark's audit sends one per file and only the partitions files share."""
    if not held.num_rows:
        return []
    paths = held.column("path").combine_chunks().dictionary_encode()
    names, file_of = paths.dictionary.to_pylist(), paths.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    unit = np.arange(len(names), dtype=np.int64)  # each file's unit: its own, unless it shares a partition
    keyed = pa.table({"topic": held.column("topic"), "partition": held.column("partition"), "file": file_of})
    keyed = keyed.filter(pc.is_valid(keyed.column("topic")))  # a row with no partition only names its file
    shared = keyed.group_by(["topic", "partition"], use_threads=False).aggregate([("file", "distinct")])
    lists = shared.column("file_distinct")
    shared_lists = lists.filter(pc.greater(pc.list_value_length(lists), 1)).to_pylist()
    for members in shared_lists:
        roots = {_root(unit, m) for m in members}
        unit[list(roots)] = min(roots)
    if shared_lists:  # none where every file holds whole partitions: no per-file Python then
        unit = np.array([_root(unit, f) for f in range(len(names))], np.int64)
    rows = np.zeros(len(names), np.int64)
    rows[file_of] = held.column("rows").to_numpy(zero_copy_only=False)
    units, unit_of = np.unique(unit, return_inverse=True)
    sizes = np.maximum(np.bincount(unit_of, weights=rows, minlength=len(units)), 1).astype(np.int64).tolist()
    order = np.argsort(unit_of, kind="stable")  # the files of each unit, together
    bounds = np.searchsorted(unit_of[order], np.arange(len(units) + 1))
    files = [[names[f] for f in order[bounds[u] : bounds[u + 1]]] for u in range(len(units))]
    return [[name for u in members for name in files[u]] for members in pack_sizes(sizes, 1 << 62, groups)]


def _root(unit: np.ndarray, f: int) -> int:
    while unit[f] != f:
        f = int(unit[f])
    return f


def audit_here(
    files: list[str],
    history: list[str],
    indexes: Callable[[], tuple[pa.Table, pa.Table]],
    spill: str,
    threads: int = 1,
) -> pa.Table:
    """:func:`integrity_here`'s rows, in memory that does not grow with the input: the staged transaction
    ``files`` dealt into groups that hold whole partitions (:func:`audit_groups`, about :data:`GROUP_BYTES` of
    audited columns each), and the coordinator's decisions built a coordinator partition at a time (a
    transactional id's records are all in its partition, ``TransactionStateManager.partitionFor``), each one's
    split by the groups of the partitions they name and written under ``spill``; then each group checked against
    the decisions that name its partitions (txnlog.rules.integrity.joined). Both on ``threads`` threads.
    ``indexes`` gives the ``.txnindex`` entries and their segments (txnlog.sources.txnindex), asked for once the
    decisions are split: they may be read meanwhile."""
    if not files:
        return MS_SCHEMA.empty_table()
    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="txnlog-audit") as pool:
        held = pa.concat_tables(pool.map(held_partitions, files))
        rows = held.group_by("path", use_threads=False).aggregate([("rows", "max")]).column("rows_max")
        wanted = -(-int(pc.sum(rows).as_py() or 0) * ROW_BYTES // GROUP_BYTES)
        groups = audit_groups(held, max(threads * GROUPS_PER_THREAD, wanted))
        units = _units(history, pool)
        split = partial(_split_decisions, _grouped(held, groups), len(groups), spill)
        owners = list(pool.map(split, enumerate(units)))
        check = partial(_group_rows, *indexes(), spill, owners)
        found = list(pool.map(check, range(len(groups)), groups))
    return pa.concat_tables(found) if found else MS_SCHEMA.empty_table()


def _grouped(held: pa.Table, groups: list[list[str]]) -> pa.Table:
    """The partitions of ``held`` (:func:`held_partitions`' rows) with the group of :func:`audit_groups` their
    files are in, a partition once."""
    group_of = {path: g for g, members in enumerate(groups) for path in members}
    tagged = held.append_column("group", pa.array([group_of[p] for p in held.column("path").to_pylist()], pa.int64()))
    return (
        tagged.group_by(["topic", "partition"], use_threads=False)
        .aggregate([("group", "min")])
        .rename_columns(["topic", "partition", "group"])
    )


def _units(history: list[str], pool: ThreadPoolExecutor) -> list[list[str]]:
    """The staged ``__transaction_state`` files ``history`` as runs of consecutive files that share no
    transactional id with another run: one file (a coordinator partition's records) each, unless a transactional
    id's records are in several (never in a broker's log; then the files between them join it too, so that the
    decisions built a run at a time are those of the files in their order: txnlog.rules.integrity.joined)."""
    if len(history) < 2:
        return [history] if history else []
    ids = list(pool.map(lambda f: pc.unique(_columns(f, ["transactional_id"]).column(0)), history))
    if not any(len(i) for i in ids):
        return [[f] for f in history]
    table = pa.table(
        {
            "id": pa.chunked_array([i.cast(pa.string()) for i in ids]),
            "file": np.repeat(np.arange(len(history)), [len(i) for i in ids]),
        }
    )
    spans = table.group_by("id", use_threads=False).aggregate([("file", "min"), ("file", "max")])
    last = np.arange(len(history))  # each file's run reaches at least this file
    for low, high in zip(spans.column("file_min").to_numpy(), spans.column("file_max").to_numpy(), strict=True):
        last[low] = max(last[low], high)
    units: list[list[str]] = []
    reach = -1
    for f, path in enumerate(history):
        if f > reach:
            units.append([])
        units[-1].append(path)
        reach = max(reach, int(last[f]))
    return units


def _split_decisions(partitions: pa.Table, groups: int, spill: str, unit: tuple[int, list[str]]) -> Decisions:
    """The decisions of one run of ``__transaction_state`` files (:func:`_units`), split by the groups of the
    partitions they name (``partitions``: topic, partition, group) and written under ``spill``; returned: its
    owners alone (small), which every group needs."""
    u, files = unit
    decided = decisions_of(files)
    if decided.decided.num_rows:
        _spilled(posixpath.join(spill, "lists", f"{u:08d}.pickle"), decided.prepares.column("partitions"))
        for g, part in enumerate(decisions_by(decided, partitions, groups, lists=False)):
            if part.decided.num_rows:
                ours = part.prepares.append_column("unit", pa.array(np.full(part.prepares.num_rows, u, np.int32)))
                _spilled(posixpath.join(spill, f"{g}", f"{u:08d}.pickle"), dataclasses.replace(part, prepares=ours))
    none = decisions(pa.table({}))
    return Decisions(none.decided, decided.owners, none.partitions, none.prepares)


def _group_rows(
    index: pa.Table, segments: pa.Table, spill: str, owners: list[Decisions], g: int, files: list[str]
) -> pa.Table:
    """The rows of the group ``g`` of staged transaction ``files`` (whole partitions) against the decisions that
    name its partitions (:func:`_split_decisions`: ``owners`` each run's owners, for the runs that name none)."""
    parts = [t for t in (staged_columns(path) for path in files) if t.num_rows]
    for path in files:
        forget_kept(path)  # read: its kept columns are freed as the group's rows are
    filesystem, where = storage.filesystem(posixpath.join(spill, f"{g}"))
    found = filesystem.get_file_info(pafs.FileSelector(where, allow_not_found=True))
    written = {posixpath.basename(i.path) for i in found if i.type == pafs.FileType.File}
    name = "{:08d}.pickle".format
    pieces = [
        _unspilled(posixpath.join(spill, f"{g}", name(u))) if name(u) in written else own
        for u, own in enumerate(owners)
    ]
    txns = pa.concat_tables(parts) if parts else STAGED_SCHEMA.empty_table()
    decided = dataclasses.replace(joined(pieces), lists=partial(_lists, spill))
    return partition_integrity(txns, index, segments, decided)


def _lists(spill: str, rows: pa.Table) -> pa.Array:
    """The partitions that ``rows`` of a group's Prepare* records list (their ``unit`` and ``row``:
    :func:`_split_decisions`), read from ``spill``: only the anomalies' evidence asks for them."""
    read: dict[int, pa.ChunkedArray] = {}
    lists = []
    for u, row in zip(rows.column("unit").to_pylist(), rows.column("row").to_pylist(), strict=True):
        if u not in read:
            read[u] = _unspilled(posixpath.join(spill, "lists", f"{u:08d}.pickle"))
        lists.append(read[u][row].as_py())
    return pa.array(lists, pa.list_(pa.string()))


def _spilled(uri: str, value: object) -> None:
    """Write ``value`` (Arrow tables, or what holds them) as ``uri``, for :func:`_unspilled`."""
    filesystem, path = storage.filesystem(uri)
    filesystem.create_dir(posixpath.dirname(path), recursive=True)
    with filesystem.open_output_stream(path, compression="lz4") as out:
        out.write(pickle.dumps(value, protocol=5))


def _unspilled(uri: str) -> Any:
    """What :func:`_spilled` wrote as ``uri``."""
    filesystem, path = storage.filesystem(uri)
    with filesystem.open_input_stream(path, compression="lz4") as source:
        return pickle.loads(source.read())
