"""A hanging transaction on a real broker, made the way real clusters got them: a transactional batch whose
partition was never added to a transaction on any coordinator.

A producer id from InitProducerId without a transactional.id (an idempotent producer's) writes a batch with
the transactional flag set, with no AddPartitionsToTxn. A broker that verifies each transactional append with
the coordinator (KIP-890, ``transaction.partition.verification.enable``, on by default since 3.6) refuses it;
the session broker runs with the verification off (tests/live/broker.py SESSION_CONFIGS), as every broker before 3.6 did, and appends it: the
partition's LSO is pinned by a transaction no coordinator will ever end (ListTransactions knows no id for
the producer), the case ``kafka-transactions.sh abort`` / ``txnlog abort`` exist for. Raw protocol
(tests/live/raw_fetch.py's connection), no client library: no client can be made to do this on purpose.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from tests.live.raw_fetch import Connection, KafkaProtocolError, _array, _string
from txnlog.brokerlog.encode import RecordSpec, encode_record_batch

__all__ = ["Orphan", "init_producer_id", "produce_transactional"]

_API_PRODUCE = 0
_API_INIT_PRODUCER_ID = 22


@dataclass
class Orphan:
    """A producer with no transactional.id writing transactional batches; ``sequence`` is its next one."""

    producer_id: int
    producer_epoch: int
    sequence: int = 0


#: InitProducerId errors a client retries: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (right after
#: a broker's start, while the transaction coordinator loads)
_RETRIABLE = {14, 15}


def init_producer_id(bootstrap: str, timeout_s: float = 60) -> Orphan:
    """InitProducerId v0 with a null transactional.id: a fresh idempotent producer id, epoch 0."""
    deadline = time.monotonic() + timeout_s
    while True:
        with Connection.to(bootstrap, client_id="txnlog-orphan") as conn:
            r = conn.request(_API_INIT_PRODUCER_ID, 0, _string(None) + struct.pack(">i", 60_000))
            r.i32()  # throttle_time_ms
            error, pid, epoch = r.i16(), r.i64(), r.i16()
        if not error:
            return Orphan(pid, epoch)
        if error not in _RETRIABLE or time.monotonic() > deadline:
            raise KafkaProtocolError(f"InitProducerId: error {error}")
        time.sleep(0.2)


def produce_transactional(bootstrap: str, orphan: Orphan, topic: str, partition: int, values: list[bytes]) -> int:
    """Produce v3 (acks=all) of one transactional batch of ``values``; returns the offset of its first record."""
    now = int(time.time() * 1000)
    batch = encode_record_batch(
        base_offset=0,
        records=[RecordSpec(i, 0, None, v) for i, v in enumerate(values)],
        base_timestamp=now,
        producer_id=orphan.producer_id,
        producer_epoch=orphan.producer_epoch,
        base_sequence=orphan.sequence,
        is_transactional=True,
    )
    # A transactional.id in the request, as KafkaApis.handleProduceRequest wants one for transactional records;
    # no coordinator has ever heard of it.
    body = (
        _string("txnlog-orphan-never-initialised")
        + struct.pack(">hi", -1, 30_000)
        + _array([_string(topic) + _array([struct.pack(">ii", partition, len(batch)) + batch])])
    )
    with Connection.to(bootstrap, client_id="txnlog-orphan") as conn:
        r = conn.request(_API_PRODUCE, 3, body)
        [(_name, [(_index, error, base_offset, _append_time)])] = r.array(
            lambda r: (r.string(), r.array(lambda r: (r.i32(), r.i16(), r.i64(), r.i64())))
        )
    if error:
        raise KafkaProtocolError(f"Produce {topic}-{partition}: error {error}")
    orphan.sequence += len(values)
    return base_offset
