"""The parts of a simulated cluster below its coordinator: topic-partitions, the clock, record contents,
brokers, topics, and a partition's replicas (txnlog.brokerlog.cluster puts them together)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import AppendInfo, PartitionLog
from txnlog.kafka.wire import ControlType, TimestampType

if TYPE_CHECKING:
    pass


TopicPartition = tuple[str, int]


class ProducerFencedError(RuntimeError):
    """The coordinator moved on (timeout abort, newer epoch, expiry): this producer instance is dead."""


class SimClock:
    """Simulated wall clock in epoch milliseconds (UTC)."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = int(now_ms)

    def __call__(self) -> int:
        return self.now_ms

    def iso(self) -> str:
        return datetime.fromtimestamp(self.now_ms / 1000, tz=UTC).isoformat()


# ---------------------------------------------------------------------------
# Record contents
# ---------------------------------------------------------------------------

_WORDS = (
    b"alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    b"quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
).split()


class RecordFactory:
    """Plausible keys and JSON-ish values (compressible like real payloads), deterministic."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seq = 0

    def value(self, size: int, ts: int) -> bytes:
        rng = self.rng
        self.seq += 1
        head = b'{"id":%d,"ts":%d,"customer":"c-%05d","amount":%d.%02d,"currency":"EUR","note":"' % (
            self.seq,
            ts,
            rng.randrange(100000),
            rng.randrange(1, 5000),
            rng.randrange(100),
        )
        if size < len(head) + 8:
            head = b'{"id":%d,"v":"' % self.seq
        words = []
        length = len(head) + 2
        while length < size:
            w = _WORDS[rng.randrange(len(_WORDS))]
            words.append(w)
            length += len(w) + 1
        return (head + b" ".join(words))[: max(size - 2, len(head))] + b'"}'

    def batch(
        self,
        *,
        end_ts: int,
        n_records: int,
        value_bytes: int,
        key_prefix: str,
        linger_ms: int = 5,
        header_probability: float = 0.2,
    ) -> tuple[list[RecordSpec], int]:
        """Records created over ``linger_ms`` ending at ``end_ts``; returns (records, base timestamp)."""
        rng = self.rng
        span = rng.randint(0, linger_ms) if n_records > 1 else 0
        base_ts = end_ts - span
        deltas = sorted([0] + [rng.randint(0, span) for _ in range(n_records - 1)])
        records = []
        for i, delta in enumerate(deltas):
            key = f"{key_prefix}-{rng.randrange(100000):05d}".encode()
            size = max(24, int(value_bytes * rng.uniform(0.6, 1.4)))
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if rng.random() < header_probability:
                headers = (("trace-id", b"%032x" % rng.getrandbits(128)), ("source", b"checkout-service"))
            records.append(RecordSpec(i, delta, key, self.value(size, base_ts + delta), headers))
        return records, base_ts


# ---------------------------------------------------------------------------
# Brokers, topics, replicas
# ---------------------------------------------------------------------------


@dataclass
class Broker:
    broker_id: int
    log_dir: Path
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)


@dataclass
class TopicConfig:
    name: str
    partitions: int
    replication_factor: int
    segment_bytes: int
    index_interval_bytes: int
    timestamp_type: TimestampType
    compacted: bool
    topic_id: bytes


class ReplicatedPartition:
    """One partition and its replicas; appends go to the leader and are copied to followers."""

    def __init__(
        self, topic: str, partition: int, replicas: Sequence[int], logs: dict[int, PartitionLog], leader_epoch: int
    ):
        self.topic = topic
        self.partition = partition
        self.replicas = tuple(replicas)
        self.leader = self.replicas[0]
        self.logs = logs
        self.leader_epoch = leader_epoch
        #: broker id → True while that follower is cut off (misses appends).
        self.offline_followers: set[int] = set()

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def leader_log(self) -> PartitionLog:
        return self.logs[self.leader]

    def append(self, batch: bytes, *, skip_replicas: Iterable[int] = ()) -> AppendInfo:
        """Leader append, then followers copy the same bytes at the same offsets."""
        info = self.leader_log.append(batch)
        skip = set(skip_replicas) | self.offline_followers
        for broker_id, log in self.logs.items():
            if broker_id != self.leader and broker_id not in skip:
                log.append(info.data, base_offset=info.base_offset)
        return info

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        control_type: ControlType,
        coordinator_epoch: int,
        timestamp: int,
        skip_replicas: Iterable[int] = (),
    ) -> AppendInfo:
        batch = encode.encode_end_txn_marker_batch(
            offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            control_type=control_type,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
        )
        return self.append(batch, skip_replicas=skip_replicas)

    def bump_leader_epoch(self, new_leader: int | None = None) -> int:
        """A leader election: new leader (default: same) and leader epoch + 1."""
        if new_leader is not None:
            if new_leader not in self.replicas:
                raise ValueError(f"broker {new_leader} holds no replica of {self.topic}-{self.partition}")
            self.leader = new_leader
        self.leader_epoch += 1
        for log in self.logs.values():
            log.leader_epoch = self.leader_epoch
        return self.leader_epoch
