"""``txnlog_live_txn_state``: every ``__transaction_state`` record of a live cluster.

    spark.read.format("txnlog_live_txn_state").options(**live_options(cfg)).load()

Rows have exactly :data:`~txnlog.model.rows.TXN_STATE_SCHEMA` (kind ``record``,
broker ``live``, coordinator_partition = the topic partition, file ``kafka://<topic>-<p>``)
plus ``quarantine`` rows for records that do not decode, like the offline source.

* The driver (``partitions()``) lists the topic's partitions and captures each one's
  [log start, high watermark) *once*: the read is a consistent cut, and records the
  coordinator appends while Spark runs are not read. One InputPartition per topic partition.
* Each task runs a confluent-kafka Consumer with ``assign()`` (no group, no commits),
  from the captured start offset to the captured end offset, and keeps raw key/value bytes.
* The bytes are laid out as a segment (:func:`txnlog.kafka.consumed.segment_from_records`)
  and decoded by the same compiled scan as segment files
  (:func:`txnlog.kafka.txn_state.scan_transaction_log`) into Arrow, chunk by chunk.
  The consumer API hands out one ``Message`` object per record, so collecting
  offset/timestamp/key/value is a Python loop per record; that loop is inherent to the
  client and is the only one (decoding is columnar).

Options:

``conf``
    JSON object of librdkafka client settings (``bootstrap.servers`` and the
    ``kafka:`` mapping of the config: security.protocol, sasl.*, ssl.*).
``bootstrap_servers``
    sets/overrides ``bootstrap.servers`` in ``conf``.
``topic``
    default ``__transaction_state``; tests serve writer-made records from a normal
    topic of the same layout.
``timeout_s``
    how long a task may take to reach its end offset (default 300).
``chunk_records``
    records decoded per Arrow batch (default 100000).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.engine.txn_state import quarantine_of, record_batch_of
from txnlog.kafka.consumed import segment_from_records
from txnlog.kafka.errors import QuarantineEntry
from txnlog.kafka.txn_state import scan_transaction_log
from txnlog.model.contract import InputSource
from txnlog.model.rows import TXN_STATE_SCHEMA
from txnlog.sources.logdirs import LogFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TRANSACTION_STATE_TOPIC = "__transaction_state"
LIVE_BROKER = "live"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_CHUNK_RECORDS = 100_000


def live_options(
    bootstrap_servers: str,
    kafka_conf: dict[str, Any] | None = None,
    *,
    topic: str = TRANSACTION_STATE_TOPIC,
    timeout_s: float | None = None,
) -> dict[str, str]:
    """Reader options from a bootstrap list and the config's ``kafka`` mapping."""
    opts = {"conf": json.dumps(dict(kafka_conf or {})), "bootstrap_servers": bootstrap_servers, "topic": topic}
    if timeout_s is not None:
        opts["timeout_s"] = str(timeout_s)
    return opts


def client_conf(options: dict[str, str]) -> dict[str, Any]:
    """librdkafka settings for the consumer: the ``conf`` JSON plus bootstrap, no group, no commits."""
    conf = dict(json.loads(options.get("conf") or "{}"))
    if options.get("bootstrap_servers"):
        conf["bootstrap.servers"] = options["bootstrap_servers"]
    if not conf.get("bootstrap.servers"):
        raise ValueError("txnlog_live_txn_state: no bootstrap servers (option bootstrap_servers or conf)")
    conf.setdefault("log_level", 3)
    return conf


@dataclass(frozen=True)
class LivePartition(InputPartition):
    topic: str
    partition: int
    start: int  # first offset to read (log start offset at capture time)
    end: int  # high watermark at capture time: read offsets < end


def capture_partitions(options: dict[str, str]) -> list[LivePartition]:
    """The topic's partitions with their [log start, high watermark) captured now (driver side); none when the
    cluster has no such topic (``__transaction_state`` before any transactional producer used a coordinator:
    the run goes on without coordinator state, txnlog.live.admin.check_cluster)."""
    # Lazy in this module: the Kafka clients load only when a live cluster is asked.
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    topic = options.get("topic") or TRANSACTION_STATE_TOPIC
    timeout = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
    conf = client_conf(options)
    conf.update({"group.id": "txnlog-live-capture", "enable.auto.commit": False, "allow.auto.create.topics": False})
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout)
        tmd = md.topics.get(topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return []
        if tmd.error is not None or not tmd.partitions:
            why = tmd.error if tmd is not None and tmd.error is not None else "no partitions"
            raise RuntimeError(f"txnlog_live_txn_state: cannot read topic {topic}: {why}")
        parts = []
        for p in sorted(tmd.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
            parts.append(LivePartition(topic, p, int(low), int(high)))
        return parts
    finally:
        consumer.close()


def consume_range(
    conf: dict[str, Any], part: LivePartition, *, timeout_s: float, batch: int = 10_000
) -> Iterator[tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[int]]]:
    """Chunks of (offsets, timestamps, keys, values, leader_epochs) for offsets in [start, end)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

    if part.end <= part.start:
        return
    conf = dict(conf)
    conf.update(
        {
            "group.id": "txnlog-live",  # required by librdkafka; assign() never joins it
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
        }
    )
    consumer = Consumer(conf)
    try:
        start = part.start if part.start >= 0 else OFFSET_BEGINNING
        consumer.assign([TopicPartition(part.topic, part.partition, start)])
        deadline = time.monotonic() + timeout_s
        last = part.end - 1
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"txnlog_live_txn_state: {part.topic}-{part.partition} did not reach offset {part.end} "
                    f"within {timeout_s:.0f} s (option timeout_s)"
                )
            msgs = consumer.consume(batch, timeout=1.0)
            offsets: list[int] = []
            stamps: list[int] = []
            keys: list[bytes | None] = []
            values: list[bytes | None] = []
            epochs: list[int] = []
            for m in msgs:  # per record: inherent to the consumer API
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done = True  # at the high watermark (compaction may leave end-1 absent)
                        continue
                    raise KafkaException(err)
                o = cast(int, m.offset())  # a message without an error has an offset
                if o >= part.end:
                    done = True
                    continue
                offsets.append(o)
                stamps.append(m.timestamp()[1])
                keys.append(m.key())
                values.append(m.value())
                e = m.leader_epoch()
                epochs.append(-1 if e is None else e)
                if o >= last:
                    done = True
            if not done and not msgs:
                # No EOF event and nothing new: compare the position with the end.
                pos = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if pos >= part.end:
                    done = True
            if offsets:
                yield offsets, stamps, keys, values, epochs
    finally:
        consumer.close()


def decode_chunk(
    part: LivePartition,
    offsets: list[int],
    stamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    epochs: list[int],
) -> Iterator[Any]:
    """Arrow batches (records, then quarantine) of TXN_STATE_SCHEMA for one consumed chunk."""

    name = f"kafka://{part.topic}-{part.partition}"
    klen = np.fromiter((-1 if k is None else len(k) for k in keys), np.int64, len(keys))
    vlen = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, len(values))
    seg = segment_from_records(
        offsets,
        stamps,
        klen,
        b"".join(k for k in keys if k is not None),
        vlen,
        b"".join(v for v in values if v is not None),
        epochs,
    )
    scan = scan_transaction_log(seg, file=name, check_crc=False)
    file = LogFile(
        path=name,
        broker=LIVE_BROKER,
        topic=part.topic,
        partition=part.partition,
        base_offset=int(offsets[0]),
        size=int(seg.size),
        kind="log",
    )
    batch = record_batch_of(scan, file)
    if batch is not None:
        yield batch
    if scan.quarantine:
        # Positions are in the rebuilt buffer; report the Kafka offset of the record instead.
        base = scan.segment.batches["base_offset"]
        starts = scan.segment.batches["position"]
        entries = []
        for q in scan.quarantine:
            i = int(np.searchsorted(starts, q.position, side="right")) - 1
            offset = int(base[max(i, 0)]) if base.size else -1
            entries.append(
                QuarantineEntry(
                    name,
                    offset,
                    1,
                    q.reason,
                    f"record at offset {offset}: {q.detail}" if q.detail else f"record at offset {offset}",
                )
            )
        yield quarantine_of(file, entries)


class _LiveReader(DataSourceReader):
    def __init__(self, options: dict[str, str]):
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return list(capture_partitions(self.options))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, LivePartition):
            return  # the one empty partition Spark reads when partitions() gave none (no such topic)
        conf = client_conf(self.options)
        timeout = float(self.options.get("timeout_s", DEFAULT_TIMEOUT_S))
        chunk = int(self.options.get("chunk_records", DEFAULT_CHUNK_RECORDS))
        buf: tuple[list, list, list, list, list] = ([], [], [], [], [])
        for piece in consume_range(conf, partition, timeout_s=timeout, batch=min(chunk, 10_000)):
            lists: tuple[list[Any], ...] = piece
            for acc, new in zip(buf, lists, strict=True):
                acc.extend(new)
            if len(buf[0]) >= chunk:
                yield from decode_chunk(partition, *buf)
                buf = ([], [], [], [], [])
        if buf[0]:
            yield from decode_chunk(partition, *buf)


class LiveTxnStateSource(DataSource):
    """``spark.read.format("txnlog_live_txn_state").options(**live_options(bootstrap, cfg.kafka)).load()``"""

    @classmethod
    def name(cls) -> str:
        return "txnlog_live_txn_state"

    def schema(self) -> StructType:
        return arrow_to_spark_schema(TXN_STATE_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _LiveReader(dict(self.options))


def register_live_source(spark: SparkSession) -> None:
    spark.dataSource.register(LiveTxnStateSource)


def read_live_records(spark: SparkSession, bootstrap: str, kafka_conf: dict[str, Any]) -> DataFrame:
    """The live cluster's ``__transaction_state`` records, labelled with their input."""
    register_live_source(spark)
    live = spark.read.format(LiveTxnStateSource.name()).options(**live_options(bootstrap, kafka_conf)).load()
    return live.withColumn("input", F.lit(InputSource.LIVE_LOG))
