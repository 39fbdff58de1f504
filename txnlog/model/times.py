"""Times as txnlog writes them: an epoch-millisecond moment as UTC text and a span of milliseconds as days,
hours, minutes and seconds in sentences (evidence, advice, progress lines; a missing value reads "an unknown
time"), and epoch-millisecond columns as the tables' UTC timestamps."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UNKNOWN = "an unknown time"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: the newest instant a Python datetime (and so every reader of the tables) can hold
MAX_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)


def timestamps(ms: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Epoch ms → timestamp (UTC), the tables' one rule for it; unknown (negative) and past-year-9999 values
    become null (a client clock in µs or ns: no reader's datetime holds it; txnlog.broker.as_of reports such
    segments as ``timestamp_in_future``)."""

    values = pc.fill_null(ms, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    ok = (values >= 0) & (values <= MAX_MS)
    return pa.array(np.where(ok, values, 0) * 1000, pa.timestamp("us", tz="UTC"), mask=~ok)


def utc_text(ms: float | int | None) -> str:
    """The moment ``ms`` (milliseconds since the epoch) in UTC, to the second.

    >>> utc_text(1_700_000_000_000), utc_text(None), utc_text(float("nan"))
    ('2023-11-14 22:13:20Z', 'an unknown time', 'an unknown time')
    """
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return UNKNOWN
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration_text(ms: float | int | None) -> str:
    """A span of ``ms`` milliseconds in its two largest units (seconds alone under a minute).

    >>> duration_text(90_061_000), duration_text(3_720_000), duration_text(61_500), duration_text(999)
    ('1d 1h 1m', '1h 2m', '1m 1s', '0s')
    """
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return UNKNOWN
    s = int(ms // 1000)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"
