"""Kafka wire constants shared by the decoders and the broker-log writer.

Every number here comes from Apache Kafka's sources, named next to each group;
docs/formats.md describes the formats they belong to.
Pure module: stdlib only.
"""

from __future__ import annotations

from enum import IntEnum

# --- Log entries (FileLogInputStream, Records) ---------------------------------
#: int64 offset + int32 size precede every entry of any magic.
LOG_OVERHEAD = 12
#: offset(8) + size(4) + partitionLeaderEpoch/crc(4) + magic(1)
HEADER_SIZE_UP_TO_MAGIC = 17
MAGIC_OFFSET = 16
#: Smallest legacy entry body (LegacyRecord.RECORD_OVERHEAD_V0).
LEGACY_RECORD_OVERHEAD_V0 = 14

# --- Record batch v2 header (DefaultRecordBatch) ---------------------------------
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


# --- Control records (ControlRecordType, EndTransactionMarker) -----------
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


# --- __transaction_state (TransactionLog, TransactionLogKey/Value.json) ---
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

# TransactionLogValue tagged fields (v1+, TransactionLogValue.json).
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_NEXT_PRODUCER_EPOCH = 3  # not in the oracle's TransactionLogValue.json (tags 0-2); unknown tags are skipped

# --- Producer snapshot (ProducerStateManager, ProducerSnapshot.json) ------
PRODUCER_SNAPSHOT_VERSION = 1
PRODUCER_SNAPSHOT_ENTRIES_OFFSET = 6  # CRC covers [6, end)
PRODUCER_SNAPSHOT_HEADER_SIZE = 10
PRODUCER_SNAPSHOT_ENTRY_SIZE = 46

# --- .txnindex (TransactionIndex, AbortedTxn) ----------------------------
ABORTED_TXN_ENTRY_SIZE = 34
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12

# --- Broker defaults (TransactionStateManagerConfig, TransactionLogConfig) --
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


# --- Added for the decoders (txnlog.kafka.record_batch and friends) -------

# Legacy magic 0/1 entries (LegacyRecord, AbstractLegacyRecordBatch). The CRC is a plain CRC-32
# (zlib polynomial) over [MAGIC_OFFSET, end of entry).
LEGACY_CRC_OFFSET = 12
LEGACY_ATTRIBUTES_OFFSET = 17
#: crc(4) + magic(1) + attributes(1) + timestamp(8) + keyLength(4) + valueLength(4)
LEGACY_RECORD_OVERHEAD_V1 = 22

#: Bits 7-15 of the v2 attributes are unused (DefaultRecordBatch): set ones mean the bytes are not a header.
ATTRIBUTES_UNUSED_MASK = 0xFF80
MAX_COMPRESSION_CODEC = 4  # Compression.ZSTD

# Records inside a v2 batch (DefaultRecord, ByteUtils).
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
#: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headersCount: one byte each at least.
MIN_RECORD_SIZE = 7

#: No Kafka message schema has ever had a version anywhere near this. A control
#: key / EndTxnMarker whose int16 version exceeds it is not one (e.g. the ASCII
#: "op" = 28528 of kafka-python's "opaque-control-message" sample), even though
#: Kafka itself would parse any non-negative version as v0 (ControlRecordType, EndTransactionMarker).
MAX_PLAUSIBLE_MESSAGE_VERSION = 255

# __transaction_state key and value versions (TransactionLogKey.json, TransactionLogValue.json).
TXN_LOG_KEY_VERSION = 0
TXN_LOG_VALUE_V0 = 0
TXN_LOG_VALUE_V1 = 1  # first flexible version
TXN_LOG_VALUE_HIGHEST_VERSION = 1

# Producer snapshot header (ProducerStateManager.readSnapshot).
PRODUCER_SNAPSHOT_CRC_OFFSET = 2
PRODUCER_SNAPSHOT_COUNT_OFFSET = 6

# Snappy as written by Kafka's Java clients: the xerial/snappy-java stream framing:
# 8-byte magic, int32 version, int32 min compatible version, then blocks of
# (int32 big-endian compressed length, raw snappy block). Other writers use raw snappy.
XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
XERIAL_SNAPPY_HEADER_SIZE = 16

# --- Added for the broker-log writer (txnlog.brokerlog) -------------------
# Broker and client defaults the writer reproduces. Sources: ServerLogConfigs /
# LogConfig (segment and index sizes), TransactionStateManagerConfig and
# TransactionLogConfig, ProducerStateManager.

MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE; TV2 markers may carry it after a rollover (KIP-890)
ABORTED_TXN_VERSION = 0  # AbortedTxn.CurrentVersion

#: ``LogFileUtils.filenamePrefixFromOffset``: at least 20 digits, zero padded.
LOG_FILE_NAME_DIGITS = 20
DEFAULT_SEGMENT_BYTES = 1 << 30  # log.segment.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # log.index.interval.bytes
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024  # log.index.size.max.bytes: preallocated index size
DEFAULT_TRANSACTION_STATE_SEGMENT_BYTES = 100 * 1024 * 1024  # transaction.state.log.segment.bytes
DEFAULT_TRANSACTION_STATE_REPLICATION_FACTOR = 3
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
#: producer.id.expiration.check.interval.ms: how often ``UnifiedLog.producerExpireCheck`` runs
#: ``ProducerStateManager.removeExpiredProducers`` (``ProducerStateManagerConfig``, ``ServerLogConfigs``)
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000
DEFAULT_ABORT_TIMED_OUT_TRANSACTIONS_INTERVAL_MS = 10_000
DEFAULT_REMOVE_EXPIRED_TRANSACTIONAL_IDS_INTERVAL_MS = 3_600_000

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft metadata log: not a data partition

# Codec framings as Kafka's Java producer writes them (writer side; readers never
# decompress data). xerial SnappyOutputStream: magic + int32 version 1 + int32
# min compatible version 1, 32 KiB blocks. Lz4BlockOutputStream: LZ4 frame v1,
# independent blocks, 64 KiB max block size, no content size / checksums.
XERIAL_SNAPPY_VERSION = 1
XERIAL_SNAPPY_MIN_COMPATIBLE_VERSION = 1
XERIAL_SNAPPY_BLOCK_SIZE = 32 * 1024
LZ4_FRAME_MAGIC = 0x184D2204
LZ4_FRAME_BLOCK_SIZE = 64 * 1024
