"""The output contract: every Delta table txnlog writes, as Arrow schemas.

This module is the one home of output column names and types (docs/design.md §3).
Dashboards and acceptance checks read these names: add columns freely, never
rename one. Spark schemas are derived from these in ``txnlog.engine.spark.schemas``.
The values of ``source`` and ``outcome`` are enums here too (:class:`InputSource`,
:class:`Outcome`); verdicts, reasons and safety are :mod:`txnlog.broker.classify`'s.

Conventions: every table starts with ``cluster`` (string) and ``as_of``
(timestamp, UTC); offsets and ids are int64, epochs int32, durations ``*_ms``
int64, timestamps microsecond UTC (what Spark writes as TIMESTAMP_MICROS).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pyarrow as pa


class InputSource(StrEnum):
    """The ``source`` column (docs/design.md §3): which input a row's data came from. The pipeline reads the
    offline inputs, :mod:`txnlog.live.admin` the live cluster; both write these values."""

    SEGMENTS = "segments"  # broker log directories: segment files, indexes, producer snapshots
    DUMP_LOG = "dump_log"  # kafka-dump-log.sh text
    LIVE_LOG = "live_log"  # records fetched from a live cluster (__transaction_state or data partitions)
    LIVE = "live"  # admin-API answers of --verify-live (ListOffsets, DescribeProducers, DescribeTransactions)


#: the replica name of what a live cluster answers (the Kafka source reads from each partition's leader,
#: whichever broker that is), in ``replicas``/``open_replicas`` and quarantine's ``replica``
LIVE_REPLICA = "live"


class Outcome(StrEnum):
    """``transactions.outcome`` (docs/design.md §3)."""

    COMMIT = "COMMIT"
    ABORT = "ABORT"
    OPEN = "OPEN"  # no marker yet
    UNKNOWN = "UNKNOWN"  # a marker whose type the input does not show (a dump without --deep-iteration)


class IntegrityCheck(StrEnum):
    """``integrity.check``: what the audit (txnlog.rules.integrity) found, named after what a read_committed consumer
    or the coordinator got wrong; docs/integrity.md and the README's "How txnlog decides" give the Kafka class that
    decides each and what the copy must hold for it to run."""

    ABORTED_DATA_VISIBLE = "ABORTED_DATA_VISIBLE"  # an ABORT with no .txnindex entry: delivered as committed
    COMMITTED_DATA_HIDDEN = "COMMITTED_DATA_HIDDEN"  # a .txnindex entry ending at no ABORT: committed data dropped
    SPLIT_OUTCOME = "SPLIT_OUTCOME"  # a partition's marker differs from the coordinator's Prepare* outcome
    MARKER_MISSING = "MARKER_MISSING"  # the coordinator completed the transaction; the partition has no marker
    EPOCH_REGRESSION = "EPOCH_REGRESSION"  # a data batch below the producer's last marker epoch on the partition
    SEQUENCE_GAP = "SEQUENCE_GAP"  # a sequence gap inside one transaction on a partition
    INDEX_NOT_CHECKED = "INDEX_NOT_CHECKED"  # the input has no segment files: no .txnindex to check


class IntegritySeverity(StrEnum):
    """``integrity.severity``: ERROR and WARNING rows are anomalies; NOT_CHECKED says a check could not run."""

    ERROR = "ERROR"  # consumers got the wrong data, whatever their fetches
    WARNING = "WARNING"  # they may have, depending on how their fetches split
    NOT_CHECKED = "NOT_CHECKED"  # the copy lacks what the check needs (once per partition)


#: the checks that report anomalies, each counted in its own ``runs`` column ``<check in lower case>_count``
ANOMALY_CHECKS = tuple(c for c in IntegrityCheck if c is not IntegrityCheck.INDEX_NOT_CHECKED)


def check_count_column(check: str) -> str:
    """The ``runs`` column counting ``check``'s anomaly rows, e.g. ``aborted_data_visible_count``."""
    return f"{check.lower()}_count"


TS = pa.timestamp("us", tz="UTC")
STR = pa.string()
I64 = pa.int64()
I32 = pa.int32()
BOOL = pa.bool_()
STR_LIST = pa.list_(pa.string())


def _schema(*fields: tuple[str, pa.DataType], nullable: set[str] | None = None) -> pa.Schema:
    keys = {"cluster", "as_of"}
    return pa.schema(
        [pa.field("cluster", STR, nullable=False), pa.field("as_of", TS, nullable=False)]
        + [pa.field(name, typ, nullable=name not in keys) for name, typ in fields]
    )


TRANSACTIONS = _schema(
    ("topic", STR),
    ("partition", I32),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("first_offset", I64),
    ("last_offset", I64),
    ("marker_offset", I64),
    ("outcome", STR),  # COMMIT / ABORT / OPEN (UNKNOWN: a marker whose type the input does not show)
    ("marker_epoch", I32),
    ("coordinator_epoch", I32),
    ("first_timestamp", TS),
    ("last_timestamp", TS),
    ("marker_timestamp", TS),
    ("duration_ms", I64),
    ("batch_count", I64),
    ("record_count", I64),
    ("size_bytes", I64),
    ("transactional_id", STR),
    # beyond the contract
    ("replicas", STR_LIST),  # brokers (log dirs) holding this transaction
    ("open_replicas", STR_LIST),  # brokers where it has no marker
    ("started_before_log_start", BOOL),  # first offset known only from a producer snapshot
    ("source", STR),  # the partition's input: segments / dump_log / live ("+"-joined when several inputs held it)
)

FINDINGS = _schema(
    ("topic", STR),
    ("partition", I32),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("start_offset", I64),
    ("first_timestamp", TS),
    ("last_timestamp", TS),
    ("open_ms", I64),
    ("idle_ms", I64),
    ("lso_lag", I64),
    ("verdict", STR),  # HANGING / LATE
    ("reason", STR),
    ("transactional_id", STR),
    ("coordinator_state", STR),
    ("coordinator_partition", I32),
    ("coordinator_epoch", I32),
    ("evidence", STR),
    ("advice", STR),
    # beyond the contract
    # what to do (txnlog.rules.remedy): ABORT / FENCE / WAIT / DELIVER_MARKERS / NONE, the command for the
    # newest brokers and the Kafka version it needs, the one for older brokers, and when it is safe
    ("remedy", STR),
    ("remedy_command", STR),
    ("remedy_kafka_version", STR),
    ("remedy_fallback_command", STR),
    ("remedy_fallback_kafka_version", STR),
    ("remedy_condition", STR),
    ("replicas", STR_LIST),
    ("open_replicas", STR_LIST),
    ("started_before_log_start", BOOL),
    ("source", STR),
    # the consumer groups this finding's remedy unblocks (blocked_consumers: BLOCKED behind this transaction, or
    # with pending transactional offsets in it); null where the input holds no __consumer_offsets partition
    ("blocked_groups", STR_LIST),
)

ABORT_RECOMMENDATIONS = _schema(
    ("topic", STR),
    ("partition", I32),
    ("start_offset", I64),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("coordinator_epoch", I32),
    ("transactional_id", STR),
    ("reason", STR),
    ("safety", STR),  # SAFE / VERIFY_FIRST
    ("command", STR),
    ("legacy_command", STR),
    # the impact: aborting this one and the HANGING ones before it on the partition moves the LSO
    # to lso_after_abort, releasing offsets_released offsets to read_committed consumers (txnlog plan)
    ("lso_after_abort", I64),
    ("offsets_released", I64),
    # beyond the contract
    ("source", STR),  # the input the finding came from (see TRANSACTIONS.source)
    # the consumer groups this abort unblocks: BLOCKED on the partition below lso_after_abort, or with pending
    # transactional offsets in this transaction; null where the input holds no __consumer_offsets partition
    ("blocked_groups", STR_LIST),
)

PARTITION_HEALTH = _schema(
    ("topic", STR),
    ("partition", I32),
    ("log_start_offset", I64),
    ("log_end_offset", I64),
    ("high_watermark", I64),  # null when unknown (no replication-offset-checkpoint in the input)
    ("last_stable_offset", I64),
    ("lso_lag", I64),
    ("open_transactions", I64),
    ("max_open_ms", I64),
    ("has_late_transaction", BOOL),
    ("stuck_since", TS),
    # beyond the contract
    ("replicas", STR_LIST),
    ("batch_count", I64),
    ("max_timestamp", TS),
    ("source", STR),  # segments / dump_log (the offline inputs) / live (ListOffsets, --verify-live)
)

#: What DescribeProducers would have answered at as_of (txnlog.broker.producer_state): the producers with state on
#: the partition's leader (the most advanced replica, as for partition_health), transactional and idempotent,
#: without those producer.id.expiration.ms removed (idle that long, nothing open).
PRODUCER_STATE = _schema(
    ("topic", STR),
    ("partition", I32),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("last_sequence", I32),  # -1: none (no batch since the epoch changed), as the broker answers
    ("last_timestamp", TS),
    ("coordinator_epoch", I32),  # of its last marker, else the snapshot's; -1: none, as the broker answers
    ("current_txn_start_offset", I64),  # first offset of its open transaction; null if none
    # beyond the contract
    ("replica", STR),  # the replica (broker log dir) whose state this is: the most advanced one
    ("from_snapshot", BOOL),  # known only from a producer snapshot: no batch of it after the snapshot's offset
    # last_timestamp as the broker holds it, epoch ms (also -1 and clocks past the year 9999, which
    # last_timestamp shows as null): what DescribeProducers answers and kafka-transactions.sh prints
    ("last_timestamp_ms", I64),
    ("source", STR),  # the partition's input (see TRANSACTIONS.source)
)

COORDINATOR_STATE = _schema(
    ("transactional_id", STR),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("state", STR),
    ("timeout_ms", I64),
    ("partitions", STR_LIST),
    ("txn_start_timestamp", TS),
    ("last_update_timestamp", TS),
    ("coordinator_partition", I32),
    ("coordinator_epoch", I32),
    ("previous_producer_id", I64),
    ("next_producer_id", I64),
    ("client_transaction_version", I32),
    ("is_tombstoned", BOOL),
    # beyond the contract
    ("next_producer_epoch", I32),
    ("record_offset", I64),
    ("transitions", I64),  # records seen for this id (history length)
    # the input of the latest record: segments / dump_log / live_log (the live cluster's __transaction_state) /
    # live (DescribeTransactions, --verify-live)
    ("source", STR),
)

#: Every __transaction_state record, in log order (the history behind coordinator_state).
COORDINATOR_HISTORY = _schema(
    ("transactional_id", STR),
    ("coordinator_partition", I32),
    ("record_offset", I64),
    ("record_timestamp", TS),
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("state", STR),
    ("timeout_ms", I64),
    ("partitions", STR_LIST),
    ("txn_start_timestamp", TS),
    ("last_update_timestamp", TS),
    ("coordinator_epoch", I32),
    ("previous_producer_id", I64),
    ("next_producer_id", I64),
    ("next_producer_epoch", I32),
    ("client_transaction_version", I32),
    ("is_tombstone", BOOL),
    ("value_version", I32),
)

#: The integrity audit (txnlog.rules.integrity): did read_committed consumers get what the markers decided? One row
#: per anomaly; a check that could not run says so once per partition (severity NOT_CHECKED).
INTEGRITY = _schema(
    ("check", STR),  # ABORTED_DATA_VISIBLE / COMMITTED_DATA_HIDDEN / SPLIT_OUTCOME / INDEX_NOT_CHECKED
    ("severity", STR),  # ERROR (data delivered wrongly) / WARNING (may be, depending on fetches) / NOT_CHECKED
    ("topic", STR),
    ("partition", I32),
    ("replica", STR),  # the broker (log dir) whose files show it; null: the partition (every replica)
    ("producer_id", I64),
    ("producer_epoch", I32),
    ("transactional_id", STR),
    ("first_offset", I64),
    ("last_offset", I64),
    ("marker_offset", I64),
    ("marker_type", STR),  # COMMIT / ABORT: the partition's marker for this transaction
    ("records_affected", I64),
    ("bytes_affected", I64),
    ("from_time", TS),
    ("to_time", TS),
    ("consumers_received", STR),  # a read_committed consumer of this replica gets: ALL/NONE/DEPENDS_ON_FETCH/NOT_YET
    ("consumers_should_receive", STR),  # what the marker decided: ALL / NONE
    ("restart_repairs", STR),  # NO / UNCLEAN_RESTART (LogLoader recovers the segment) / NOT_APPLICABLE
    ("kafka_class", STR),  # the Kafka class whose behaviour the row states
    ("evidence", STR),
    ("advice", STR),
    ("source", STR),
)

#: a classic group's member (GroupMetadata); KIP-848 and assign() groups have none here
MEMBER = pa.struct([("member_id", STR), ("client_id", STR), ("client_host", STR)])

#: Who is blocked (txnlog.rules.blocked), from the copy's ``__consumer_offsets`` partitions or a live cluster's admin
#: APIs (txnlog.live.groups): one row per consumer group and partition whose LSO an open transaction holds below the
#: high watermark, and per partition a group has pending transactional offsets of. A read_committed fetch stops at
#: the LSO (``UnifiedLog.read``), a read_uncommitted one at the high watermark; ``__consumer_offsets`` does not record
#: isolation levels, so the status is inferred from the committed offset.
BLOCKED_CONSUMERS = _schema(
    ("group", STR),  # as Kafka reads the key (new String(bytes, UTF_8): malformed bytes replaced by U+FFFD)
    ("group_bytes", pa.binary()),  # the group's bytes exactly as stored: two groups are told apart by them
    ("topic", STR),
    ("partition", I32),
    ("committed_offset", I64),  # the group's stable committed offset (OffsetMetadataManager's replay); null: none
    ("last_stable_offset", I64),
    ("high_watermark", I64),
    # high_watermark - committed_offset: offsets, not records a consumer receives (the transaction's markers and
    # aborted records included)
    ("offsets_to_high_watermark", I64),
    ("blocked_since", TS),  # the later of the holding transaction's first timestamp and the commit's timestamp
    ("holding_producer_id", I64),  # the open transaction that holds the LSO (or the group's pending offsets)
    ("holding_start_offset", I64),
    # BLOCKED: committed offset = LSO < HW (a read_committed group: inferred); NOT_BLOCKED_INFERRED: above the LSO
    # (read_uncommitted, or a reset); BEHIND_LSO: below it, still reading; UNSTABLE_OFFSET_COMMIT: a pending
    # transactional offset of this partition. Only behind a finding (LATE or HANGING): a young transaction gives no row
    ("status", STR),
    # the group's partitions ("topic-partition") with a pending transactional offset commit: OffsetFetch with
    # requireStable (the Java consumer always asks so) answers UNSTABLE_OFFSET_COMMIT, so every member stalls at
    # start-up and rebalance whatever its isolation level (OffsetMetadataManager.fetchOffsets)
    ("pending_transactional_offsets", STR_LIST),
    ("members", pa.list_(MEMBER)),  # classic groups' last GroupMetadata (live: DescribeConsumerGroups); null: unknown
    ("coordinator_partition", I32),  # the __consumer_offsets partition of the group
    ("source", STR),  # segments (the copy's __consumer_offsets) / live (the admin APIs: txnlog.live.groups)
)

QUARANTINE = _schema(
    ("file", STR),
    ("position", I64),
    ("length", I64),
    ("reason", STR),
    # beyond the contract
    ("detail", STR),
    ("topic", STR),
    ("partition", I32),
    ("replica", STR),
)

RUNS = _schema(
    ("run_id", STR),
    ("started_at", TS),
    ("finished_at", TS),
    ("inputs", STR_LIST),
    ("transactions_count", I64),
    ("findings_count", I64),
    ("abort_recommendations_count", I64),
    ("partition_health_count", I64),
    ("producer_state_count", I64),
    ("coordinator_state_count", I64),
    ("coordinator_history_count", I64),
    ("quarantine_count", I64),
    ("hanging_count", I64),
    ("late_count", I64),
    ("partitions_with_late_transactions", I64),
    ("txnlog_version", STR),
    ("status", STR),  # RUNNING (writing its tables) / SUCCEEDED (complete) / FAILED
    ("config", STR),  # the effective configuration, as JSON
    # beyond the contract
    # where as_of came from: --as-of / markers / transaction_state / log_append_time (txnlog.broker.as_of)
    ("as_of_source", STR),
    # a FAILED run's error, one line (null otherwise)
    ("error", STR),
    # the integrity audit: its rows, its anomalies (ERROR and WARNING rows, whatever the check), the partitions
    # whose checks could not run (NOT_CHECKED rows), and the anomalies of each check (check_count_column). Null in
    # the rows of runs written before these columns.
    ("integrity_count", I64),
    ("integrity_anomaly_count", I64),
    ("integrity_not_checked_count", I64),
    ("aborted_data_visible_count", I64),
    ("committed_data_hidden_count", I64),
    ("split_outcome_count", I64),
    ("marker_missing_count", I64),
    ("epoch_regression_count", I64),
    ("sequence_gap_count", I64),
)

#: table name -> schema, in the order they are written.
TABLES: dict[str, pa.Schema] = {
    "transactions": TRANSACTIONS,
    "findings": FINDINGS,
    "abort_recommendations": ABORT_RECOMMENDATIONS,
    "partition_health": PARTITION_HEALTH,
    "producer_state": PRODUCER_STATE,
    "coordinator_state": COORDINATOR_STATE,
    "coordinator_history": COORDINATOR_HISTORY,
    "quarantine": QUARANTINE,
    "integrity": INTEGRITY,
    "blocked_consumers": BLOCKED_CONSUMERS,
    "runs": RUNS,
}


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """How every txnlog writer writes a table's Parquet files (``pyarrow.parquet`` keyword arguments): snappy, and
    dictionary pages for the string columns (names, states, lists of partitions: they repeat) and none for the
    numbers (offsets, ids, times: mostly distinct, so the writer built a dictionary per column chunk only to fall
    back to plain pages). On the 4.6 GiB hot mix the ``transactions`` write took 0.52-0.56 s instead of 0.68-0.72
    and ``coordinator_history`` 0.66-0.71 instead of 0.92-0.97 (three runs each), and the files were 5-13 %
    smaller (benchmarks/RESULTS.md §2)."""
    strings = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_list(f.type)]
    return {"compression": "snappy", "use_dictionary": strings}
