"""Small Arrow helpers every layer's table code shares: groups of rows, a left join by hash lookup, adding
columns, epoch ms as timestamps. pyarrow and numpy only; no rule lives here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model import contract

#: the run key every output table starts with (set by the Delta writer)
RUN_KEY = ("cluster", "as_of")


def group_starts(*keys: np.ndarray) -> np.ndarray:
    """Positions where any of the (sorted) keys changes; position 0 always."""
    n = keys[0].size
    change = np.zeros(n, bool)
    if n:
        change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def runs(table: pa.Table, on: Sequence[str]) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """The rows where ``table``'s ``on`` values differ from the row before (row 0 always; a null differs from
    everything), and each such run's values: a table grouped by those columns (a partition's transactions, as
    staged) has few runs, so a per-row lookup becomes a lookup per run and a ``np.repeat`` (:func:`per_run`)."""
    n = table.num_rows
    change = np.zeros(n, bool)
    change[:1] = True
    for name in on:
        column = table.column(name)
        if n > 1:
            differs = pc.fill_null(pc.not_equal(column.slice(0, n - 1), column.slice(1)), True)
            change[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), bool)
    starts = np.flatnonzero(change)
    at = pa.array(starts)
    values = list(zip(*(table.column(name).take(at).to_pylist() for name in on), strict=True))
    return starts, values


def per_run(starts: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """``values`` (one per run of :func:`runs`) repeated over each run's rows (``n`` rows in all)."""
    return np.repeat(values, np.diff(np.append(starts, n)))


def lex_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))``: the rows' order by ``major`` then ``minor`` (integers), ties in row order.
    Where the two keys' spans and the row count fit one int64, a plain sort of them packed with the row number
    (numpy's vectorized sort; an indirect two-key sort is several times slower), else ``np.lexsort``."""
    n = major.size
    if not n:
        return np.zeros(0, np.int64)
    lo_a, lo_b = int(major.min()), int(minor.min())
    span_b = int(minor.max()) - lo_b + 1
    if (int(major.max()) - lo_a + 1) * span_b * n >= 1 << 62:
        return np.lexsort((minor, major))
    packed = ((major.astype(np.int64) - lo_a) * span_b + (minor.astype(np.int64) - lo_b)) * n
    packed += np.arange(n, dtype=np.int64)
    packed.sort()
    return packed % n


def strictly_increasing(*keys: np.ndarray) -> bool:
    """Whether the rows' keys (compared in order, as a tuple) grow strictly from each row to the next."""
    if keys[0].size < 2:
        return True
    greater = np.zeros(keys[0].size - 1, bool)
    equal = np.ones(keys[0].size - 1, bool)
    for k in keys:
        greater |= equal & (k[1:] > k[:-1])
        equal &= k[1:] == k[:-1]
    return bool(greater.all())


def table_group_starts(order: pa.Table, keys: Sequence[str]) -> Any:
    """The row numbers where a new group of ``keys`` starts in ``order`` (sorted by ``keys``; null == null
    here): a numpy int64 array, empty for an empty table."""
    if order.num_rows == 0 or not keys:
        return np.flatnonzero(np.arange(order.num_rows) == 0)
    arrays = []
    for key in keys:
        column = order.column(key)
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)
        arrays.append(valid)
        if valid.any():  # a null takes a valid row's value: where validity agrees, only two valid values differ
            values = column.to_numpy(zero_copy_only=False)
            if not valid.all():
                values = values.copy()
                values[~valid] = values[np.argmax(valid)]
            arrays.append(values)
    return group_starts(*arrays)


def groups(table: pa.Table, keys: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of ``table`` per distinct value of ``keys`` (nulls form their own group), as Spark's
    ``groupBy(...).applyInArrow`` hands them to its function: one table per group."""
    if table.num_rows == 0:
        return
    order = table.sort_by([(k, "ascending") for k in keys]).combine_chunks()
    bounds = [*table_group_starts(order, keys).tolist(), order.num_rows]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        yield order.slice(begin, end - begin)


def first_rows(table: pa.Table, keys: list[str], order: list[tuple[str, str]]) -> pa.Table:
    """The first row of each ``keys`` group in ``order`` (Spark's ``row_number() == 1`` over that window)."""
    ordered = table.sort_by([(k, "ascending") for k in keys] + order)
    return ordered.take(pa.array(table_group_starts(ordered, keys), pa.int64()))


def python_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``, a dictionary column's values looked up per chunk from its
    dictionary made Python once (``to_pylist`` builds a value per row through the dictionary: many times slower)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out: list[Any] = []
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            words = np.asarray(chunk.dictionary.to_pylist() + [None], object)  # None: a null's index, -1
            out.extend(words[filled(chunk.indices, -1)].tolist())
        else:
            out.extend(chunk.to_pylist())
    return out


def distinct(column: pa.Array | pa.ChunkedArray) -> set[Any]:
    """The values ``column`` holds, nulls left out, as Python values: made unique in Arrow first, so a column of
    millions of rows with a few values costs no Python object per row.

    >>> sorted(distinct(pa.chunked_array([[3, None, 1], [3]])))
    [1, 3]
    """
    return set(pc.unique(column).drop_null().to_pylist())


def filled(column: Any, null: Any) -> np.ndarray:
    """A column's values as numpy, nulls as ``null``."""
    return np.asarray(pc.fill_null(column, null).to_numpy(zero_copy_only=False))


def validity(column: Any) -> np.ndarray:
    """A column's validity as a numpy bool array."""
    return np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), bool)


def least(*values: Any) -> Any:
    """Spark's ``least``: the smallest non-null value per row, null when all are."""
    return reduce(lambda a, b: pc.min_element_wise(a, b, skip_nulls=True), values)


def greatest(*values: Any) -> Any:
    """Spark's ``greatest``: the largest non-null value per row, null when all are."""
    return reduce(lambda a, b: pc.max_element_wise(a, b, skip_nulls=True), values)


def is_true(values: Any) -> Any:
    """A boolean column with null read as false (a SQL filter's reading)."""
    return pc.fill_null(values, False)


def of_kind(table: pa.Table, *kinds: str) -> pa.Table:
    """The rows of ``table`` whose ``kind`` is one of ``kinds``."""
    return table.filter(pc.is_in(table.column("kind"), pa.array(list(kinds), pa.string())))


def with_columns(table: pa.Table, **columns: Any) -> pa.Table:
    """``table`` with ``columns`` added or replaced (Spark's ``withColumns``)."""
    for name, values in columns.items():
        if not isinstance(values, pa.Array | pa.ChunkedArray):
            values = pa.array(values) if isinstance(values, list | np.ndarray) else pa.repeat(values, table.num_rows)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, values)
        else:
            table = table.append_column(name, values)
    return table


def left_join(left: pa.Table, right: pa.Table, on: list[str], columns: Sequence[str] | None = None) -> pa.Table:
    """A left join on ``on``, unique in ``right``: ``left`` (rows and order kept) plus ``right``'s ``columns``."""
    names = [c for c in (columns or right.column_names) if c not in on]
    if right.num_rows == 0:
        return with_columns(left, **{c: pa.nulls(left.num_rows, right.schema.field(c).type) for c in names})
    return with_columns(left, **{c: lookup(left, on, right, c) for c in names})


def lookup(keys: pa.Table, on: list[str], table: pa.Table, value: str, *, nulls_match: bool = False) -> pa.ChunkedArray:
    """``table[value]`` for each row of ``keys``: a left join on ``on`` (unique in ``table``), order kept;
    null where a key is not in ``table`` or, unless ``nulls_match`` (a null key value is a value of its own, as
    ``group_by`` makes it a group), null. Hash lookups of each row's key codes, not a join.

    >>> table = pa.table({"k": ["a", None], "v": [1, 2]})
    >>> lookup(pa.table({"k": [None, "a", "b"]}), ["k"], table, "v").to_pylist()
    [None, 1, None]
    >>> lookup(pa.table({"k": [None, "a", "b"]}), ["k"], table, "v", nulls_match=True).to_pylist()
    [2, 1, None]
    """
    found = pa.chunked_array(
        [
            pc.index_in(
                key_codes(keys, on, table, nulls_match=nulls_match),
                value_set=key_codes(table, on, table, nulls_match=nulls_match),
                skip_nulls=True,
            )
        ]
    )
    return table.column(value).take(found)


def key_codes(rows: pa.Table, on: list[str], table: pa.Table, *, nulls_match: bool = False) -> pa.Array:
    """One int64 per row of ``rows`` naming its ``on`` values among ``table``'s (null: a value ``table``
    lacks, or, unless ``nulls_match``, a null)."""
    codes = np.zeros(rows.num_rows, np.int64)
    valid = np.ones(rows.num_rows, bool)
    for name in on:
        values = pc.unique(table.column(name))
        code = pc.index_in(rows.column(name), value_set=values, skip_nulls=not nulls_match)
        valid &= np.asarray(pc.is_valid(code).to_numpy(zero_copy_only=False), bool)
        codes = codes * max(len(values), 1) + pc.fill_null(code, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return pa.array(codes, mask=~valid)


#: a table's rows and the columns a rule derives for it, by the contract's names: :func:`project` takes the rest of
#: its columns from the rows
Shaped = tuple[pa.Table, dict[str, Any]]


def project(table: pa.Table, name: str, **derived: Any) -> pa.Table:
    """The contract's columns of ``name`` but the run key (txnlog.model.contract), from ``derived`` or ``table``."""
    fields = [f for f in contract.TABLES[name] if f.name not in RUN_KEY]
    arrays = []
    for f in fields:
        value = derived[f.name] if f.name in derived else table.column(f.name)
        if not isinstance(value, pa.Array | pa.ChunkedArray):
            value = pa.repeat(pa.scalar(value, f.type), table.num_rows)
        arrays.append(value.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in fields]))
