"""The run's "now" (``as_of``): ``--as-of``, else the newest time a *broker's* clock wrote.

Every age (``open_ms``, ``idle_ms``, ``max_open_ms``, late/hanging) is measured against ``as_of``.
Producers stamp CreateTime with their own clock — some in microseconds (a known client bug), some
simply wrong — and the broker keeps it (``LogValidator`` bounds it only when
``log.message.timestamp.after.max.ms`` says so). So without ``--as-of`` "now" is the newest of:

``markers``
    transaction markers: the partition leader stamps them with its clock
    (``MemoryRecords.withEndTransactionMarker(…, System.currentTimeMillis(), …)``, written by
    ``KafkaApis.handleWriteTxnMarkersRequest``);
``transaction_state``
    ``__transaction_state`` records: the coordinator stamps them
    (``TransactionStateManager.appendTransactionToLog``: ``time.milliseconds()``);
``log_append_time``
    batches of LogAppendTime topics: the leader overwrites the max timestamp with its clock
    (``LogValidator``, ``TimestampType.LOG_APPEND_TIME``).

``runs.as_of_source`` says which one (``--as-of`` when given; ``live_cut`` for a live run, whose "now"
is the moment the driver captured every partition's range: it looks at the present). File modification times are never a
source: a copy resets them, which would inflate every age. An input with no broker-written time
at all stops the run with one line asking for ``--as-of`` (rather than measuring ages from 1970).

A segment whose client timestamps run more than :data:`FUTURE_BOUND_MS` past ``as_of`` is reported
as a ``quarantine`` row with reason ``timestamp_in_future`` (a warning: its batches are analysed as
read, their timestamps are kept, they are only never taken as "now").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.model.config import parse_as_of
from txnlog.model.errors import UsageError
from txnlog.model.times import MAX_MS

AS_OF_FLAG = "--as-of"
MARKERS = "markers"
TRANSACTION_STATE = "transaction_state"
LOG_APPEND_TIME = "log_append_time"
#: a live run (the Kafka source): the moment the driver captured every partition's range
LIVE_CUT = "live_cut"
#: ties go to the first: a marker is the most direct evidence of the partitions' own clock
SOURCES = (MARKERS, TRANSACTION_STATE, LOG_APPEND_TIME)

#: How far past ``as_of`` a client timestamp may lie before it is reported: one hour, the default of
#: the broker's ``log.message.timestamp.after.max.ms`` since Kafka 4.0 (KIP-937), beyond which a
#: 4.x broker refuses the produce request (``LogValidator.validateTimestamp``).
FUTURE_BOUND_MS = 3_600_000
REASON_FUTURE = "timestamp_in_future"
#: its detail: the newest timestamp, how far past as_of, as_of (ISO, ms), where as_of came from
FUTURE_DETAIL = (
    "newest batch timestamp %d ms since 1970 is %d ms after as_of %s (%s): a client clock in "
    "microseconds or nanoseconds, or wrong; its batches are analysed as read, never taken as now"
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def broker_times_of(summary: Any, records: Any) -> dict[str, int | None]:
    """Newest broker-written timestamp (ms) per source of Arrow tables (either may be None: none).

    ``summary``: SEGMENT_SUMMARY_SCHEMA rows (``segment`` rows carry ``marker_timestamp`` and
    ``log_append_timestamp``, and so do the ``piece`` rows of a split segment before its stitch,
    txnlog.sources.splits); ``records``: TXN_STATE_SCHEMA rows (``record`` rows carry ``record_timestamp``).
    Partial answers combine with :func:`newest_times` (Spark applies this to each batch:
    txnlog.engine.spark.collect.broker_times).
    """

    def newest(table: Any, kinds: list[str], column: str) -> int | None:
        if table is None:
            return None
        rows = table.select(["kind", column])  # the filter then copies two columns, not every one
        rows = rows.filter(pc.is_in(rows.column("kind"), pa.array(kinds, pa.string())))
        value = pc.max(rows.column(column)).as_py() if rows.num_rows else None
        return None if value is None else int(value)

    return {
        MARKERS: newest(summary, ["segment", "piece"], "marker_timestamp"),
        LOG_APPEND_TIME: newest(summary, ["segment", "piece"], "log_append_timestamp"),
        TRANSACTION_STATE: newest(records, ["record"], "record_timestamp"),
    }


def newest_times(parts: list[dict[str, int | None]]) -> dict[str, int | None]:
    """:func:`broker_times_of`'s answers for parts of the input combined: the newest per source."""
    return {s: max((p[s] for p in parts if p.get(s) is not None), default=None) for s in SOURCES}  # type: ignore[type-var]


def from_ms(ms: int) -> datetime:
    """The instant ``ms`` milliseconds after 1970 (UTC)."""
    return _EPOCH + timedelta(milliseconds=ms)


def to_ms(moment: datetime) -> int:
    """Milliseconds after 1970 (UTC) of ``moment``: :func:`from_ms` undone."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def choose(as_of_option: Any, times: dict[str, int | None], cut_ms: int | None = None) -> tuple[datetime, str]:
    """(as_of, as_of_source): ``--as-of`` when given, else the moment of a live run's cut, ``cut_ms`` (a live run
    looks at the present), else the newest broker-written time.

    >>> choose(None, {"markers": 1_700_000_000_000, "transaction_state": 1_700_000_000_500, "log_append_time": None})
    (datetime.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=datetime.timezone.utc), 'transaction_state')
    >>> choose(None, {"markers": None, "transaction_state": None, "log_append_time": None})
    Traceback (most recent call last):
    ...
    txnlog.model.errors.UsageError: the input holds no broker-written time (no transaction markers, __transaction_state records or LogAppendTime batches) to measure ages against, and client timestamps are not trusted for that; give --as-of (ISO-8601 or epoch ms), e.g. when the logs were copied
    """  # noqa: E501 -- a doctest's expected exception message is one line
    if as_of_option is not None:
        return parse_as_of(as_of_option), AS_OF_FLAG
    if cut_ms is not None:
        return from_ms(cut_ms), LIVE_CUT
    known = {s: t for s in SOURCES if (t := times.get(s)) is not None and t > 0}
    if not known:
        raise UsageError(
            "the input holds no broker-written time (no transaction markers, __transaction_state records or "
            "LogAppendTime batches) to measure ages against, and client timestamps are not trusted for that; "
            "give --as-of (ISO-8601 or epoch ms), e.g. when the logs were copied"
        )
    newest = max(known.values())
    source = next(s for s in SOURCES if known.get(s) == newest)
    if newest > MAX_MS:
        raise UsageError(
            f"the newest broker-written time in the input ({source}: {newest} ms since 1970) is past the year 9999, "
            "so a broker clock or a record is wrong; "
            "give --as-of (ISO-8601 or epoch ms), e.g. when the logs were copied"
        )
    return _EPOCH + timedelta(milliseconds=newest), source
