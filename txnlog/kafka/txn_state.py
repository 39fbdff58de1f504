"""``__transaction_state`` records: the strict TransactionLogKey / TransactionLogValue decoders.

:func:`decode_transaction_log_key` and :func:`decode_transaction_log_value` raise :class:`DecodeError`;
the bulk scan of a whole segment is :mod:`txnlog.kafka.txn_state_scan` (its names are re-exported here).
Both read values with the one compiled decoder of :mod:`txnlog.kafka.txn_state_value`, so they cannot
disagree on one. The grammar and the reading rules are in docs/formats.md §7.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from txnlog.kafka import errors
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.record_batch import as_uint8
from txnlog.kafka.txn_state_scan import (
    TxnLogScan,
    scan_transaction_log,
    scan_transaction_log_file,
    scan_transaction_log_windows,
)
from txnlog.kafka.txn_state_value import (
    _NPART,
    _NREC,
    _NTAG,
    _NTOPIC,
    _R_CTV,
    _R_EPOCH,
    _R_LAST_UPDATE,
    _R_NEXT_EPOCH,
    _R_NEXT_PID,
    _R_PCOUNT,
    _R_PID,
    _R_PREV_PID,
    _R_START,
    _R_STATE,
    _R_TIMEOUT,
    _R_UNKNOWN_TAGS,
    _R_VALUE_VERSION,
    TXN_PARTITION_COLUMNS,
    TXN_RECORD_COLUMNS,
    _decode_value,
    _detail_field,
    _detail_text,
    _key_trailing_detail,
    _key_version_detail,
)
from txnlog.kafka.wire import (
    TXN_LOG_KEY_VERSION,
    TXN_LOG_VALUE_V0,
    TransactionState,
)

__all__ = [
    "TXN_PARTITION_COLUMNS",
    "TXN_RECORD_COLUMNS",
    "TransactionLogValue",
    "TxnLogScan",
    "decode_transaction_log_key",
    "decode_transaction_log_value",
    "scan_transaction_log",
    "scan_transaction_log_windows",
    "scan_transaction_log_file",
]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    #: ((topic, (partition, ...)), ...) as stored, or None when the array is null.
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0
    #: Top-level tagged fields this decoder does not know: ((tag, payload), ...).
    unknown_tags: tuple[tuple[int, bytes], ...] = ()
    version: int = TXN_LOG_VALUE_V0

    @property
    def effective_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """The partitions Kafka's coordinator loads: none for Empty (TransactionLog.readTxnRecordValue)."""
        if self.state == TransactionState.EMPTY or self.partitions is None:
            return ()
        return self.partitions

    def topic_partitions(self) -> list[str]:
        """``topic-partition`` strings (TopicPartition.toString), in stored order."""
        return [f"{topic}-{p}" for topic, parts in self.effective_partitions for p in parts]


class _Reader:
    """Cursor over one key; every read names the field it is for, errors carry it."""

    __slots__ = ("data", "pos", "end", "file", "position", "reason", "what")

    def __init__(self, data: bytes, file: str, position: int, reason: str, what: str) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)
        self.file = file
        self.position = position
        self.reason = reason
        self.what = what

    def fail(self, field_name: str, detail: str, reason: str | None = None) -> DecodeError:
        return DecodeError(self.file, self.position, f"{self.what}.{field_name}", reason or self.reason, detail)

    def fixed(self, fmt: struct.Struct, field_name: str) -> int:
        if self.pos + fmt.size > self.end:
            raise self.fail(field_name, f"truncated at byte {self.pos}")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def raw(self, n: int, field_name: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(field_name, f"{n} bytes at byte {self.pos} overrun the {self.end}-byte buffer")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def utf8(self, n: int, field_name: str) -> str:
        raw = self.raw(n, field_name)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(field_name, f"not valid UTF-8 ({e.reason})") from e


_I16 = struct.Struct(">h")


def decode_transaction_log_key(
    data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0
) -> str:
    """The transactional.id of a ``__transaction_state`` record key.

    >>> decode_transaction_log_key(b"\\x00\\x00\\x00\\x05txn-1")
    'txn-1'
    """
    if data is None:
        raise DecodeError(file, position, "TransactionLogKey", errors.BAD_TXN_LOG_KEY, "null key")
    r = _Reader(bytes(data), file, position, errors.BAD_TXN_LOG_KEY, "TransactionLogKey")
    version = r.fixed(_I16, "version")
    if version != TXN_LOG_KEY_VERSION:
        raise r.fail("version", _key_version_detail(version))
    length = r.fixed(_I16, "TransactionalId")
    if length < 0:
        raise r.fail("TransactionalId", "null string")
    transactional_id = r.utf8(length, "TransactionalId")
    if r.pos != r.end:
        raise r.fail("TransactionalId", _key_trailing_detail(r.end - r.pos))
    return transactional_id


def decode_transaction_log_value(
    data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0
) -> TransactionLogValue | None:
    """Decode a TransactionLogValue (v0 or v1); None for a tombstone.

    The bulk scan's compiled decoder (:func:`_decode_value`) does the work; a value it
    rejects raises DecodeError with the reason and detail its quarantine row would carry.

    >>> decode_transaction_log_value(None) is None  # tombstone
    True
    """
    if data is None:
        return None
    raw = bytes(data)
    rows = np.full((_NREC, 1), -1, np.int64)  # the walk's layout: a row per column
    # Every tag takes two bytes at least: room for all the unknown ones.
    tags = np.empty((len(raw) // 2 + 1, _NTAG), np.int64)
    reason, detail, a1, a2, topics, nt, parts, npart = _decode_value(
        as_uint8(raw),
        0,
        len(raw),
        0,
        rows,
        0,
        np.empty((16, _NTOPIC), np.int64),
        0,
        np.empty((16, _NPART), np.int64),
        0,
        tags,
    )
    if reason != 0:
        raise DecodeError(
            file,
            position,
            f"TransactionLogValue.{_detail_field(int(detail), int(a1))}",
            errors.REASONS[int(reason)],
            _detail_text(int(detail), int(a1), int(a2)),
        )
    row = rows[:, 0]
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    if row[_R_PCOUNT] >= 0:
        ids: list[list[int]] = [[] for _ in range(int(nt))]
        for _record, topic, partition in parts[:npart].tolist():
            ids[topic].append(partition)
        partitions = tuple(
            (raw[start : start + length].decode("utf-8"), tuple(ids[i]))
            for i, (_record, _src, start, length) in enumerate(topics[:nt].tolist())
        )
    return TransactionLogValue(
        producer_id=int(row[_R_PID]),
        producer_epoch=int(row[_R_EPOCH]),
        transaction_timeout_ms=int(row[_R_TIMEOUT]),
        state=TransactionState(int(row[_R_STATE])),
        partitions=partitions,
        last_update_timestamp_ms=int(row[_R_LAST_UPDATE]),
        start_timestamp_ms=int(row[_R_START]),
        previous_producer_id=int(row[_R_PREV_PID]),
        next_producer_id=int(row[_R_NEXT_PID]),
        next_producer_epoch=int(row[_R_NEXT_EPOCH]),
        client_transaction_version=int(row[_R_CTV]),
        unknown_tags=tuple(
            (tag, raw[start : start + size]) for tag, start, size in tags[: row[_R_UNKNOWN_TAGS]].tolist()
        ),
        version=int(row[_R_VALUE_VERSION]),
    )
