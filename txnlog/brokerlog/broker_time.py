"""The newest broker-written timestamp of a written cluster: the ground truth of ``as_of``.

The job's rule (README, "What it writes"): without ``--as-of``, "now" is the
newest time a *broker's* clock wrote into the input, never a client's CreateTime:

* transaction markers: the partition leader stamps the control record with its own clock
  (``MemoryRecords.withEndTransactionMarker(…, System.currentTimeMillis(), …)`` in
  ``KafkaApis.handleWriteTxnMarkersRequest``);
* ``__transaction_state`` records: the coordinator stamps them
  (``TransactionStateManager.appendTransactionToLog``: ``time.milliseconds()``);
* LogAppendTime batches: the leader overwrites the batch's max timestamp with its clock
  (``LogValidator``, ``TimestampType.LOG_APPEND_TIME``).
"""

from __future__ import annotations

from typing import Any

from txnlog.kafka import wire
from txnlog.kafka.wire import TimestampType


def broker_time_ms(cluster: Any) -> int:
    """Largest broker-written timestamp in the logs still on disk (−1 when there is none)."""
    best = -1
    for broker in cluster.brokers.values():
        for log in broker.logs.values():
            if not log.dir.exists():
                continue
            if log.topic == wire.TRANSACTION_STATE_TOPIC or log.timestamp_type is TimestampType.LOG_APPEND_TIME:
                best = max(best, log.max_timestamp)
            else:
                best = max([best] + [m.timestamp for m in log.markers if m.offset >= log.log_start_offset])
    return best
