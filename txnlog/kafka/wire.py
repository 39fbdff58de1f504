"""Kafka wire constants shared by the decoders and the broker-log writer.

Every number here comes from Apache Kafka's sources; see
``shared/spec/kafka-formats.md`` for the section cited next to each group.
Pure module: stdlib only.
"""

from __future__ import annotations

from enum import IntEnum

# --- Log entries (spec §1.2, FileLogInputStream / Records) -----------------
#: int64 offset + int32 size precede every entry of any magic.
LOG_OVERHEAD = 12
#: offset(8) + size(4) + partitionLeaderEpoch/crc(4) + magic(1)
HEADER_SIZE_UP_TO_MAGIC = 17
MAGIC_OFFSET = 16
#: Smallest legacy entry body (LegacyRecord.RECORD_OVERHEAD_V0).
LEGACY_RECORD_OVERHEAD_V0 = 14

# --- Record batch v2 header (spec §1.3, DefaultRecordBatch) -----------------
RECORD_BATCH_OVERHEAD = 61
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
#: The CRC covers attributes .. end of batch (partitionLeaderEpoch is set after it).
CRC_COVERAGE_START = ATTRIBUTES_OFFSET

CURRENT_MAGIC = 2

# Attribute bits (low byte of the int16 attributes).
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class Compression(IntEnum):
    """CompressionType ids (attributes bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# --- Control records (spec §2) --------------------------------------------
class ControlType(IntEnum):
    """ControlRecordType: the int16 ``type`` of a control record key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_SIZE = 4  # int16 version + int16 type
END_TXN_MARKER_VALUE_SIZE = 6  # int16 version + int32 coordinatorEpoch
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


# --- __transaction_state (spec §3) ----------------------------------------
TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_TRANSACTION_STATE_PARTITIONS = 50
TWO_PHASE_COMMIT_TIMEOUT_MS = 2147483647  # KIP-939: Integer.MAX_VALUE timeout


class TransactionState(IntEnum):
    """TransactionState ids as stored in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (``Empty``, ``PrepareCommit`` ...)."""
        return _STATE_NAMES[self]


_STATE_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_KAFKA_NAME = {name: state for state, name in _STATE_NAMES.items()}

# TransactionLogValue tagged fields (v1+, spec §3.3).
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3  # likely, see spec §3.3 caveat; unknown tags are skipped anyway

# --- Producer snapshot (spec §4) ------------------------------------------
PRODUCER_SNAPSHOT_VERSION = 1
PRODUCER_SNAPSHOT_ENTRIES_OFFSET = 6  # CRC covers [6, end)
PRODUCER_SNAPSHOT_HEADER_SIZE = 10
PRODUCER_SNAPSHOT_ENTRY_SIZE = 46

# --- .txnindex (spec §1.6) ------------------------------------------------
ABORTED_TXN_ENTRY_SIZE = 34
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12

# --- Broker defaults (spec §7.6) ------------------------------------------
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000
LATE_TRANSACTION_BUFFER_MS = 300_000
EPOCH_EXHAUSTION_THRESHOLD = 32766  # isEpochExhausted: epoch >= Short.MAX_VALUE - 1


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (32-bit signed) over UTF-16 code units."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def transaction_state_partition_for(
    transactional_id: str, num_partitions: int = DEFAULT_TRANSACTION_STATE_PARTITIONS
) -> int:
    """TransactionStateManager.partitionFor: ``Utils.abs(hashCode) % numPartitions``."""
    h = java_string_hash(transactional_id)
    # Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
