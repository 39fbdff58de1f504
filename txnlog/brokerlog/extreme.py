"""Values at the edges of their types, written as real clients and damaged disks write them.

Two rules of the job: no value in the data crashes it, and ``as_of`` never comes from a
client's clock. Producers stamp CreateTime themselves (``ProducerBatch``/``RecordAccumulator``
take ``time.milliseconds()`` of the client, or whatever the application passes to
``ProducerRecord(timestamp=…)``); the broker keeps it unless the topic is LogAppendTime
(``LogValidator`` only bounds it when ``log.message.timestamp.after.max.ms`` says so, which is
``Long.MAX_VALUE`` before Kafka 4.0). So a log can hold:

* ``micros``: an idempotent producer whose clock is in microseconds (a known client bug):
  CreateTime ≈ year 55 000;
* ``nanos``: one in nanoseconds: CreateTime ≈ 1.7e18 ms, beyond what a microsecond timestamp holds;
* ``epoch``: a plain producer writing CreateTime −1 (``RecordBatch.NO_TIMESTAMP``) and one writing 0;
* ``limits``: an idempotent producer id ``Long.MAX_VALUE`` with epoch ``Short.MAX_VALUE``, and on
  ``limits-1`` a transactional batch of producer id ``Long.MAX_VALUE`` at offset ``Long.MAX_VALUE − 1``
  (the last offset a log can hold; the CRC does not cover the base offset, so a corrupt header can
  carry any) that nothing ends: the one finding, HANGING / NO_TRANSACTIONAL_ID.

Broker-written time (markers, ``__transaction_state``, LogAppendTime) keeps running up to
``as_of``: the healthy background workload of the other scenarios.
"""

from __future__ import annotations

from typing import Any

from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import Cluster, IdempotentProducer, RecordSpec
from txnlog.brokerlog.ground_truth import HANGING, Intent

LONG_MAX = (1 << 63) - 1
SHORT_MAX = (1 << 15) - 1

#: value class → (topic, partition) it is written to
PARTITIONS: dict[str, tuple[str, int]] = {
    "micros": ("micros", 0),
    "nanos": ("nanos", 0),
    "timestamp_minus_1": ("epoch", 0),
    "timestamp_0": ("epoch", 1),
    "producer_id_max": ("limits", 0),
    "offset_max": ("limits", 1),
}


class ClockScaledProducer(IdempotentProducer):
    """An idempotent producer whose CreateTime is the cluster clock times ``scale`` (1000: µs)."""

    def __init__(self, cluster: Any, *, scale: int, **kwargs: Any) -> None:
        super().__init__(cluster, **kwargs)
        self.scale = scale

    def _records(self, topic: str, n_records: int | None, value_bytes: int | None) -> tuple[list[RecordSpec], int]:
        records, base_ts = super()._records(topic, n_records, value_bytes)
        return records, base_ts * self.scale


def _fixed_timestamp_batch(
    c: Any, topic: str, timestamp: int, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1
) -> bytes:
    records, _ = c.records.batch(end_ts=c.now, n_records=3, value_bytes=80, key_prefix=topic, linger_ms=0)
    return encode.encode_record_batch(
        base_offset=0,
        records=records,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


#: what the scenario says about itself (txnlog.brokerlog.scenarios.extreme_values)
DESCRIPTION = "client clocks in µs and ns, CreateTime −1 and 0, ids and offsets at Long.MAX"


def write_extreme_values(c: Cluster) -> list[Intent]:
    """µs and ns CreateTime, CreateTime −1 and 0, producer id and offsets at Long.MAX (one HANGING finding),
    on a small cluster with background traffic (txnlog.brokerlog.scenarios.extreme_values runs it)."""
    for topic, partitions in (("micros", 1), ("nanos", 1), ("epoch", 2), ("limits", 2)):
        c.create_topic(topic, partitions, replication_factor=1)
    micros = ClockScaledProducer(
        c, scale=1000, **c._producer_kwargs("micros-client", encode.Compression.NONE, 150, (1, 5), 5)
    )
    nanos = ClockScaledProducer(
        c, scale=1_000_000, **c._producer_kwargs("nanos-client", encode.Compression.NONE, 150, (1, 5), 5)
    )
    for _ in range(6):
        micros.send(*PARTITIONS["micros"])
        nanos.send(*PARTITIONS["nanos"])
        c.advance(2_000)
    epoch = c.partition(*PARTITIONS["timestamp_minus_1"])
    epoch.append(_fixed_timestamp_batch(c, "epoch", -1))
    c.partition(*PARTITIONS["timestamp_0"]).append(_fixed_timestamp_batch(c, "epoch", 0))
    limits = c.partition(*PARTITIONS["producer_id_max"])
    limits.append(
        _fixed_timestamp_batch(c, "limits", c.now, producer_id=LONG_MAX, producer_epoch=SHORT_MAX, base_sequence=0)
    )
    top = c.partition(*PARTITIONS["offset_max"]).leader_log
    top.append(_fixed_timestamp_batch(c, "limits", c.now))
    # one record at offset Long.MAX − 1 (the log end offset is then Long.MAX, the last one a log can
    # have), in a transaction of producer id Long.MAX that nothing ends: HANGING, no transactional.id
    records, _ = c.records.batch(end_ts=c.now, n_records=1, value_bytes=80, key_prefix="limits", linger_ms=0)
    top.append(
        encode.encode_record_batch(
            base_offset=0,
            records=records,
            base_timestamp=c.now,
            producer_id=LONG_MAX,
            producer_epoch=SHORT_MAX - 1,
            base_sequence=0,
            is_transactional=True,
        ),
        base_offset=LONG_MAX - 1,
    )
    intents = [
        Intent(
            HANGING,
            "NO_TRANSACTIONAL_ID",
            *PARTITIONS["offset_max"],
            producer_id=LONG_MAX,
            label="producer id and offset at Long.MAX",
        )
    ]
    return intents
