"""The ``segment`` summary rows of a task's files (:class:`SegmentRows`): one row per data segment (or piece of
one) with its offsets, times and counts, and its producers' rows, kept as Python values and built into one
batch per call of :meth:`SegmentRows.batches`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.broker.producer_state import files_producers, segment_producers
from txnlog.model.rows import (
    KIND_PIECE,
    KIND_PRODUCER,
    KIND_SEGMENT,
    SEGMENT_SUMMARY_SCHEMA,
    batch_of,
    broker_written,
    newest_timestamp,
)
from txnlog.sources.logdirs import LogFile


def file_columns(files: list[LogFile], of: np.ndarray) -> dict[str, pa.Array]:
    """The columns that name the file of each row, ``of`` the index in ``files`` of each."""
    take = pa.array(of)
    return {
        "broker": pa.array([f.broker for f in files], pa.string()).take(take),
        "topic": pa.array([f.topic for f in files], pa.string()).take(take),
        "partition": pa.array([f.partition for f in files], pa.int32()).take(take),
        "file": pa.array([f.path for f in files], pa.string()).take(take),
        "file_offset": pa.array([f.base_offset for f in files], pa.int64()).take(take),
    }


class SegmentRows:
    """The ``segment`` summary rows of a task's files, kept as Python values and built into one batch
    (:meth:`batches`): building a batch of the schema's 40 columns costs ~0.2 ms, whatever its rows."""

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {name: [] for name in _SEGMENT_ROW_TYPES}
        self.kinds: list[str] = []
        #: producer rows waiting for :meth:`batches`, built there into one batch (:meth:`add_rows`)
        self.pending: list[tuple[int, dict[str, Any], dict[str, tuple[np.ndarray, np.ndarray | None]]]] = []
        #: producer rows of :meth:`add_files`, already one batch per call
        self.built: list[pa.RecordBatch] = []

    def add(
        self,
        file: LogFile,
        batches: dict[str, np.ndarray],
        legacy_entries: int,
        *,
        piece: int | None = None,
        next_piece: int | None = None,
    ) -> None:
        """The row of ``file``, a data segment whose batch columns are ``batches``, and its producer rows;
        with ``piece``, a ``piece`` row of that piece of it (txnlog.sources.splits)."""

        b = batches
        producers = segment_producers(b)
        self.add_rows(
            producers["producer_id"][0].size,
            {
                "broker": file.broker,
                "topic": file.topic,
                "partition": file.partition,
                "file": file.path,
                "file_offset": file.base_offset,
                "piece": piece,
            },
            {name: (values, valid) for name, (values, valid) in producers.items()},
        )
        self.kinds.append(KIND_SEGMENT if piece is None else KIND_PIECE)
        has = len(b["base_offset"]) > 0
        row = {
            "broker": file.broker,
            "topic": file.topic,
            "partition": file.partition,
            "file": file.path,
            "file_offset": file.base_offset,
            "first_offset": int(b["base_offset"].min()) if has else None,
            "last_offset": int(b["last_offset"].max()) if has else None,
            "first_timestamp": int(b["base_timestamp"].min()) if has else None,
            "last_timestamp": int(b["max_timestamp"].max()) if has else None,
            "batch_count": len(b["base_offset"]),
            "record_count": int(b["record_count"].astype(np.int64).sum()),
            "size_bytes": file.size,
            "legacy_entries": legacy_entries,
            **{name: newest_timestamp(b["max_timestamp"], mask) for name, mask in broker_written(b).items()},
            "piece": piece,
            "next_piece": next_piece,
        }
        for name, value in row.items():
            self.values[name].append(value)

    def add_files(
        self, files: list[LogFile], batches: dict[str, np.ndarray], counts: np.ndarray, legacy: list[int]
    ) -> None:
        """The rows of whole data segments ``files`` as :meth:`add` gives them, of all at once: ``batches`` their
        batch columns one after another, ``counts`` the rows of each; their producer rows are built here as one
        batch, kept for :meth:`batches`."""
        owner = np.repeat(np.arange(len(files)), counts)
        producers, of = files_producers(batches, owner)
        if of.size:
            self.built.append(
                batch_of(
                    SEGMENT_SUMMARY_SCHEMA,
                    int(of.size),
                    {
                        "kind": KIND_PRODUCER,
                        **file_columns(files, of),
                        **{name: pa.array(values, mask=~valid) for name, (values, valid) in producers.items()},
                    },
                )
            )
        has = counts > 0
        starts = (np.cumsum(counts) - counts)[has]
        n = len(files)

        def per_file(ufunc: np.ufunc, values: np.ndarray, mask: np.ndarray | None = None) -> list[Any]:
            out: list[Any] = [None] * n
            if not starts.size:
                return out
            if mask is None:
                reduced = ufunc.reduceat(values, starts).tolist()
                found = [True] * starts.size
            else:
                low = np.iinfo(np.int64).min
                reduced = ufunc.reduceat(np.where(mask, values, low), starts).tolist()
                found = np.logical_or.reduceat(mask, starts).tolist()
            for i, value, ok in zip(np.flatnonzero(has).tolist(), reduced, found, strict=True):
                out[i] = value if ok else None
            return out

        b = batches
        max_ts = b["max_timestamp"].astype(np.int64)
        columns = {
            "broker": [f.broker for f in files],
            "topic": [f.topic for f in files],
            "partition": [f.partition for f in files],
            "file": [f.path for f in files],
            "file_offset": [f.base_offset for f in files],
            "first_offset": per_file(np.minimum, b["base_offset"]),
            "last_offset": per_file(np.maximum, b["last_offset"]),
            "first_timestamp": per_file(np.minimum, b["base_timestamp"]),
            "last_timestamp": per_file(np.maximum, b["max_timestamp"]),
            "batch_count": counts.tolist(),
            "record_count": [0 if v is None else v for v in per_file(np.add, b["record_count"].astype(np.int64))],
            "size_bytes": [f.size for f in files],
            "legacy_entries": legacy,
            **{name: per_file(np.maximum, max_ts, mask) for name, mask in broker_written(b).items()},
            "piece": [None] * n,
            "next_piece": [None] * n,
        }
        for name, values in columns.items():
            self.values[name].extend(values)
        self.kinds.extend([KIND_SEGMENT] * n)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows added since the last call, as one batch of ``SEGMENT_SUMMARY_SCHEMA`` (none if none)."""
        n = len(self.values["file"])
        if not n:
            yield from self._pending_rows()
            return
        columns = {name: pa.array(values, _SEGMENT_ROW_TYPES[name]) for name, values in self.values.items()}
        kinds = pa.array(self.kinds, pa.string())
        self.values = {name: [] for name in _SEGMENT_ROW_TYPES}
        self.kinds = []
        yield batch_of(SEGMENT_SUMMARY_SCHEMA, n, {"kind": kinds, **columns})
        yield from self._pending_rows()

    def add_rows(
        self, n: int, scalars: dict[str, Any], arrays: dict[str, tuple[np.ndarray, np.ndarray | None]]
    ) -> None:
        """``n`` rows of kind ``producer`` of one file, kept for :meth:`batches`: ``scalars`` the same in every
        row (None: null), ``arrays`` (values, valid or None: all valid) per row. Built as a batch of their own,
        a file's rows would hold the GIL once per file for the schema's every column; kept here, the files' rows
        become one batch per :meth:`batches` (benchmarks/RESULTS.md §2, "Many small segments: the cost per file")."""
        if n:
            self.pending.append((n, scalars, arrays))

    def _pending_rows(self) -> Iterator[pa.RecordBatch]:
        """The rows of :meth:`add_rows` since the last call, as one batch in the order added (none if none), and
        those of :meth:`add_files`."""
        built, self.built = self.built, []
        yield from built
        pending, self.pending = self.pending, []
        if not pending:
            return
        counts = np.array([n for n, _, _ in pending], np.int64)
        total = int(counts.sum())
        owner = pa.array(np.repeat(np.arange(len(pending), dtype=np.int64), counts))
        columns: dict[str, Any] = {"kind": KIND_PRODUCER}
        for name in dict.fromkeys(k for _, scalars, _ in pending for k in scalars):
            each = [scalars.get(name) for _, scalars, _ in pending]
            if all(v is None for v in each):
                continue
            type = SEGMENT_SUMMARY_SCHEMA.field(name).type
            columns[name] = each[0] if len(pending) == 1 else pa.array(each, type).take(owner)
        for name in dict.fromkeys(k for _, _, arrays in pending for k in arrays):
            type = SEGMENT_SUMMARY_SCHEMA.field(name).type
            given = [arrays.get(name) for _, _, arrays in pending]
            if all(g is not None for g in given):  # one array of every file's values
                values = np.concatenate([np.asarray(g[0]) for g in given if g is not None])
                valid = np.concatenate(
                    [
                        np.ones(n, bool) if g is None or g[1] is None else np.asarray(g[1], bool)
                        for n, g in zip(counts, given)
                    ]
                )
                columns[name] = pa.array(values, mask=~valid)
                continue
            chunks = [
                pa.nulls(int(n), type)
                if g is None
                else pa.array(g[0], mask=None if g[1] is None else ~np.asarray(g[1], bool)).cast(type)
                for n, g in zip(counts, given)
            ]
            columns[name] = pa.concat_arrays(chunks)
        yield batch_of(SEGMENT_SUMMARY_SCHEMA, total, columns)


#: the columns a ``segment`` row sets besides its kind (the others are null)
_SEGMENT_ROW_TYPES: dict[str, pa.DataType] = {
    name: SEGMENT_SUMMARY_SCHEMA.field(name).type
    for name in (
        "broker",
        "topic",
        "partition",
        "file",
        "file_offset",
        "first_offset",
        "last_offset",
        "first_timestamp",
        "last_timestamp",
        "batch_count",
        "record_count",
        "size_bytes",
        "legacy_entries",
        "marker_timestamp",
        "log_append_timestamp",
        "piece",
        "next_piece",
    )
}
