"""How the ``txnlog`` verbs print rows: ``--format table`` (aligned columns), ``json`` (one object a line,
for ``jq``) or ``csv``, with values formatted the same way in all three."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc


def datetime_safe(data: Any) -> Any:
    """``data`` with timestamps a Python datetime cannot hold (past the year 9999, e.g. a client clock
    in µs, written by another tool) as null, so that reading the rows never fails."""

    low, high = (
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )
    for i, f in enumerate(data.schema):
        if pa.types.is_timestamp(f.type):
            ticks = data.column(i).cast(pa.int64())  # in the column's unit
            per_s = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[f.type.unit]
            lo, hi = (
                max(
                    -(2**63),
                    min(2**63 - 1, int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * per_s),
                )
                for t in (low, high)
            )
            ok = pc.and_(pc.greater_equal(ticks, lo), pc.less_equal(ticks, hi))
            data = data.set_column(i, f, pc.if_else(ok, data.column(i), pa.scalar(None, f.type)))
    return data


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, list):
        return ",".join(map(str, value)) or "-"
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], fmt: str, out: TextIO) -> None:
    """Rows as ``fmt``: ``table`` as kafka-transactions.sh prints (``ToolsUtils.prettyPrintTable``: every
    value padded to its column's width and followed by a tab; ``-`` for none), ``json`` one object per
    line keyed by the headers (times ISO-8601 UTC, none as null), ``csv`` a header row and the rows."""
    if fmt == "json":
        for r in rows:
            print(json.dumps({h: _json_value(r.get(k)) for h, k in columns}), file=out)
        return
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow([h for h, _ in columns])
        for r in rows:
            w.writerow(["" if r.get(k) is None else format_value(r.get(k)) for _, k in columns])
        return
    cells = [[format_value(r.get(key)) for _, key in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, _) in enumerate(columns)]
    for line in [[h for h, _ in columns], *cells]:
        print("".join(v.ljust(w) + "\t" for v, w in zip(line, widths, strict=True)), file=out)
