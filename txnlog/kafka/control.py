"""Control records: the key every control record carries, and the EndTxnMarker value.

Wire grammar (ControlRecordType.java, EndTransactionMarker.java)::

    ControlRecordKey => version:int16 type:int16          (version 0; 4 bytes)
    EndTxnMarker     => version:int16 coordinatorEpoch:int32  (version 0; 6 bytes)
                        only when type is ABORT (0) or COMMIT (1)

Kafka's rules, followed here:

* a key shorter than 4 bytes, or with a negative version, is invalid;
* a higher key or marker version is parsed as version 0 (forward compatible;
  Kafka only logs it) - extra trailing bytes are ignored;
* an EndTxnMarker value shorter than 6 bytes or with a negative version is invalid;
* an unknown control type is ``UNKNOWN``: ignored, not an error.

One rule of our own: a version above ``MAX_PLAUSIBLE_MESSAGE_VERSION`` (255) is
not "a newer version" but bytes that are not this message at all (kafka-python's
sample control batch has the value ``opaque-control-message``, whose first two
bytes read as version 28528). Kafka would take its "coordinator epoch" from the
ASCII ``aque``; handing that to ``kafka-transactions.sh abort
--coordinator-epoch`` would fence the real coordinator, so we refuse.

The per-batch parsing inside segment scans is compiled and lives in
:mod:`txnlog.kafka.record_batch`; it applies exactly these rules and reports the
outcome as a :class:`ControlStatus`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from txnlog.kafka.errors import BAD_CONTROL_RECORD, DecodeError
from txnlog.kafka.wire import (
    CONTROL_KEY_SIZE,
    END_TXN_MARKER_VALUE_SIZE,
    MAX_PLAUSIBLE_MESSAGE_VERSION,
    ControlType,
)

__all__ = [
    "ControlKey",
    "ControlStatus",
    "EndTxnMarker",
    "decode_control_key",
    "decode_end_txn_marker",
]

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class ControlStatus(IntEnum):
    """What a scan made of a batch's control record (column ``control_status``)."""

    NOT_CONTROL = 0
    #: ABORT/COMMIT whose EndTxnMarker value decoded: coordinator_epoch is set.
    END_TXN_MARKER = 1
    #: Control batch with no records (left by the cleaner); the broker ignores it (ProducerAppendInfo.append).
    ZERO_RECORDS = 2
    #: Another control type (KRaft LEADER_CHANGE, SNAPSHOT_*, ..., or unknown): ignored.
    OTHER_TYPE = 3
    #: The record or its key is unreadable: control_type is -1.
    BAD_KEY = 4
    #: ABORT/COMMIT key, but the value is not an EndTxnMarker: coordinator_epoch is -1.
    BAD_VALUE = 5


@dataclass(frozen=True, slots=True)
class ControlKey:
    version: int
    #: The raw int16 type; compare with :class:`ControlType` (unknown values are kept, not mapped).
    type: int

    @property
    def control_type(self) -> ControlType | None:
        """The known type, or None for an UNKNOWN one."""
        try:
            return ControlType(self.type)
        except ValueError:
            return None

    @property
    def is_end_txn_marker(self) -> bool:
        return self.type in (ControlType.ABORT, ControlType.COMMIT)


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    version: int
    coordinator_epoch: int


def _bytes_of(data: bytes | bytearray | memoryview | None) -> bytes | None:
    return None if data is None else bytes(data)


def decode_control_key(data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0) -> ControlKey:
    """Decode a control record key.

    >>> decode_control_key(b"\\x00\\x00\\x00\\x01")
    ControlKey(version=0, type=1)
    """
    raw = _bytes_of(data)
    if raw is None:
        raise DecodeError(file, position, "ControlRecordKey", BAD_CONTROL_RECORD, "null key")
    if len(raw) < CONTROL_KEY_SIZE:
        raise DecodeError(
            file, position, "ControlRecordKey", BAD_CONTROL_RECORD, f"{len(raw)} bytes, need {CONTROL_KEY_SIZE}"
        )
    version, type_ = _KEY.unpack_from(raw)
    if version < 0:
        raise DecodeError(file, position, "ControlRecordKey.version", BAD_CONTROL_RECORD, f"negative version {version}")
    if version > MAX_PLAUSIBLE_MESSAGE_VERSION:
        raise DecodeError(
            file, position, "ControlRecordKey.version", BAD_CONTROL_RECORD, f"implausible version {version}"
        )
    return ControlKey(version, type_)


def decode_end_txn_marker(
    data: bytes | bytearray | memoryview | None, *, file: str = "", position: int = 0
) -> EndTxnMarker:
    """Decode the value of an ABORT/COMMIT control record.

    >>> decode_end_txn_marker(b"\\x00\\x00\\x00\\x00\\x00\\x07")
    EndTxnMarker(version=0, coordinator_epoch=7)
    """
    raw = _bytes_of(data)
    if raw is None:
        raise DecodeError(file, position, "EndTxnMarker", BAD_CONTROL_RECORD, "null value")
    if len(raw) < END_TXN_MARKER_VALUE_SIZE:
        raise DecodeError(
            file, position, "EndTxnMarker", BAD_CONTROL_RECORD, f"{len(raw)} bytes, need {END_TXN_MARKER_VALUE_SIZE}"
        )
    version, coordinator_epoch = _MARKER.unpack_from(raw)
    if version < 0:
        raise DecodeError(file, position, "EndTxnMarker.version", BAD_CONTROL_RECORD, f"negative version {version}")
    if version > MAX_PLAUSIBLE_MESSAGE_VERSION:
        raise DecodeError(
            file,
            position,
            "EndTxnMarker.version",
            BAD_CONTROL_RECORD,
            f"implausible version {version}: not an EndTxnMarker",
        )
    return EndTxnMarker(version, coordinator_epoch)
