"""Decode errors and quarantine entries: bad bytes are data (docs/design.md §4a).

Two ways a decoder reports bad input:

* the strict single-record helpers (``decode_control_key``,
  ``decode_transaction_log_value`` ...) raise :class:`DecodeError`, a
  ``ValueError`` that names the file, byte position, field and a short reason;
* the bulk scanners (``scan_segment``, ``scan_transaction_log`` ...) never raise
  on input: every unreadable byte range or record becomes a
  :class:`QuarantineEntry` and the scan goes on. The Spark layer turns those
  into rows of the ``quarantine`` table.

Reasons are short snake_case strings, defined once here. The numba walkers
carry them as small integers (:data:`REASON_CODES`) because strings do not
cross the nopython boundary cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- Reasons ---------------------------------------------------------------
# Segment damage (FileLogInputStream, docs/design.md §4a).
CRC_MISMATCH = "crc_mismatch"
BAD_LENGTH = "bad_length"
BAD_MAGIC = "bad_magic"
TRUNCATED_TAIL = "truncated_tail"
# A record inside a CRC-valid batch whose framing is broken (DefaultRecord.readFrom).
BAD_RECORD = "bad_record"
DECOMPRESSION_FAILED = "decompression_failed"
# A compressed records section that expands past max_decompressed_bytes (a decompression bomb, or a
# batch far larger than any broker writes): quarantined instead of allocated (txnlog.kafka.compression).
DECOMPRESSED_TOO_LARGE = "decompressed_too_large"
# Control records (EndTransactionMarker).
BAD_CONTROL_RECORD = "bad_control_record"
# __transaction_state (TransactionLog).
BAD_TXN_LOG_KEY = "bad_txn_log_key"
BAD_TXN_LOG_VALUE = "bad_txn_log_value"
UNKNOWN_VALUE_VERSION = "unknown_value_version"
# __consumer_offsets (GroupCoordinatorRecordSerde): a key or value that does not read as its record type's
# message, and a key whose record type the group coordinator does not know (UnknownRecordTypeException).
BAD_OFFSETS_KEY = "bad_consumer_offsets_key"
BAD_OFFSETS_VALUE = "bad_consumer_offsets_value"
UNKNOWN_RECORD_TYPE = "unknown_record_type"
# Producer snapshots (ProducerStateManager).
BAD_SNAPSHOT = "bad_snapshot"
SNAPSHOT_CRC_MISMATCH = "snapshot_crc_mismatch"
# Index files (OffsetIndex, TimeIndex, TransactionIndex).
BAD_INDEX = "bad_index"
# A file the task could not open or read at all (gone since discovery, permissions, an I/O error).
UNREADABLE_FILE = "unreadable_file"

#: Every reason, in code order. The code of a reason is its index; 0 is "no error".
REASONS: tuple[str, ...] = (
    "",
    CRC_MISMATCH,
    BAD_LENGTH,
    BAD_MAGIC,
    TRUNCATED_TAIL,
    BAD_RECORD,
    DECOMPRESSION_FAILED,
    BAD_CONTROL_RECORD,
    BAD_TXN_LOG_KEY,
    BAD_TXN_LOG_VALUE,
    UNKNOWN_VALUE_VERSION,
    BAD_SNAPSHOT,
    SNAPSHOT_CRC_MISMATCH,
    BAD_INDEX,
    DECOMPRESSED_TOO_LARGE,  # appended: the codes above stay what they were
    UNREADABLE_FILE,
    BAD_OFFSETS_KEY,
    BAD_OFFSETS_VALUE,
    UNKNOWN_RECORD_TYPE,
)
REASON_CODES: dict[str, int] = {reason: code for code, reason in enumerate(REASONS)}


class DecodeError(ValueError):
    """Bytes that cannot be what they claim to be.

    ``str(e)`` is ``"<file>@<position>: <field>: <reason>"`` followed by
    ``": <detail>"`` when a detail is given, e.g.
    ``"00000000000000000000.log@4711: TransactionLogValue.TransactionStatus: bad_txn_log_value: unknown state id 9"``.
    """

    def __init__(self, file: str, position: int, field: str, reason: str, detail: str = "") -> None:
        self.file = file
        self.position = position
        self.field = field
        self.reason = reason
        self.detail = detail
        message = f"{file}@{position}: {field}: {reason}"
        if detail:
            message += f": {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the attributes when the error crosses a process boundary (Spark workers pickle).
        return (DecodeError, (self.file, self.position, self.field, self.reason, self.detail))


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """An unreadable byte range ``[position, position + length)`` of ``file``, or one record.

    For a record-level problem (a ``__transaction_state`` record, a control
    record) ``position``/``length`` cover the batch that holds it and ``detail``
    names the record's offset.
    """

    file: str
    position: int
    length: int
    reason: str
    detail: str = ""
