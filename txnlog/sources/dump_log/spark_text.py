"""Arrow functions that give what Spark SQL's string functions give (``rlike``, ``regexp_extract``,
``try_cast``, ``from_json``, ``CASE WHEN``), so that parsing a dump's lines with ``pyarrow.compute`` yields
what the same parse written in Spark SQL would."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from txnlog.kafka import dump_log_text as D

#: string fields a Kafka version may print as a JSON number (a string field reads a number as its text)
NUMBER_AS_TEXT = (r'"(version|type|transactionStatus)":(-?[0-9]+)([,}])', r'"\1":"\2"\3')


def match(strings: pa.Array, pattern: str) -> np.ndarray:
    """``strings rlike pattern`` (Java meaning: :func:`D.re2`), nulls false."""
    if len(strings) == 0:
        return np.zeros(0, bool)
    m = pc.match_substring_regex(strings, D.re2(pattern))
    return np.asarray(m.fill_null(False).to_numpy(zero_copy_only=False), bool)


def groups(strings: pa.Array, pattern: str) -> list[pa.Array]:
    """``regexp_extract(strings, pattern, i)`` for every group i: "" where the pattern or the group
    does not match (as Spark's), null where the string is null."""
    if len(strings) == 0:
        return [pa.array([], pa.string())] * D.re2(pattern, named=True).count("(?P<")
    found = pc.extract_regex(strings, D.re2(pattern, named=True))
    fields = found.flatten()  # null where no match
    return [pc.if_else(strings.is_null(), None, f.fill_null("")) for f in fields]


def nullif_empty(strings: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(strings, ""), None, strings)


def try_int(strings: pa.Array, typ: pa.DataType) -> pa.Array:
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


def spread(values: pa.Array, idx: np.ndarray, n: int) -> pa.Array:
    """``values`` (one per row ``idx``) placed in an array of ``n`` rows, null elsewhere."""
    pos = np.full(n, len(values), np.int64)
    pos[idx] = np.arange(idx.size)
    return pa.concat_arrays([values, pa.nulls(1, values.type)]).take(pa.array(pos))


def pick(n: int, typ: pa.DataType, *choices: tuple[np.ndarray, pa.Array]) -> pa.Array:
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


def np_bool(values: pa.Array) -> np.ndarray:
    return np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), bool)


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


def from_json(strings: pa.Array, typ: pa.StructType) -> pa.StructArray:
    """Spark's ``from_json(s, typ)`` over JSON objects, with ``pyarrow.json``; a batch it rejects (a
    value of another JSON type than ``typ`` says, a duplicate key, broken JSON: never in the tool's
    output) is converted line by line as Spark would."""
    if len(strings) == 0:
        return pa.array([], typ)

    text = pc.replace_substring_regex(strings, *NUMBER_AS_TEXT)
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
