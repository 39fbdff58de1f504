"""A guarded abort of one hanging transaction: re-validate against live state (:func:`validate_abort`), then, only
on request, WriteTxnMarkers ABORT to the partition leader (:func:`send_abort`), its response read as Kafka's
``AbortTransactionHandler`` reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from txnlog.broker import classify
from txnlog.broker.classify import Verdict
from txnlog.live.admin import describe_producers, describe_transactions, list_transactions
from txnlog.live.hanging import evidence_of, live_verdicts


class AbortRefused(Exception):
    """The transaction failed re-validation against live state; the message says why (one line)."""


@dataclass(frozen=True)
class AbortRequest:
    topic: str
    partition: int
    start_offset: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    coordinator_epoch: int | None = None

    def describe(self) -> str:
        if self.start_offset is not None:
            return f"the open transaction starting at offset {self.start_offset} on {self.topic}-{self.partition}"
        return (
            f"the open transaction of producer {self.producer_id} epoch {self.producer_epoch} "
            f"on {self.topic}-{self.partition}"
        )


@dataclass(frozen=True)
class AbortPlan:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # as sent: a negative one becomes 0, as kafka-transactions.sh does
    start_offset: int
    verdict: str
    reason: str
    transactional_id: str | None
    evidence: str


def validate_abort(
    request: AbortRequest,
    producers: Sequence[Mapping[str, Any]],
    listings: Mapping[int, Mapping[str, Any]],
    descriptions: Mapping[str, Mapping[str, Any] | None],
    thresholds: classify.Thresholds,
) -> AbortPlan:
    """Check live state (DescribeProducers of the partition, ListTransactions/DescribeTransactions
    of the producer id) still shows a HANGING transaction; raise :class:`AbortRefused` if not."""
    tp = f"{request.topic}-{request.partition}"
    mine = [p for p in producers if p["topic"] == request.topic and p["partition"] == request.partition]
    open_at = sorted(
        p["current_transaction_start_offset"] for p in mine if p["current_transaction_start_offset"] is not None
    )
    seen = f"DescribeProducers lists {len(mine)} active producer{'s' if len(mine) != 1 else ''}" + (
        f", open transactions at offsets {', '.join(map(str, open_at))}" if open_at else ", none in a transaction"
    )
    if request.start_offset is not None:
        match = [p for p in mine if p["current_transaction_start_offset"] == request.start_offset]
        if not match:
            raise AbortRefused(
                f"Could not find any open transactions starting at offset {request.start_offset} "
                f"on partition {tp} ({seen}); nothing to abort"
            )
        row = match[0]
    else:
        match = [p for p in mine if p["producer_id"] == request.producer_id]
        if not match:
            raise AbortRefused(f"producer {request.producer_id} has no state on {tp} ({seen}); nothing to abort")
        row = match[0]
        if row["current_transaction_start_offset"] is None:
            raise AbortRefused(
                f"producer {request.producer_id} has no open transaction on {tp} ({seen}); nothing to abort"
            )
        if row["producer_epoch"] != request.producer_epoch:
            raise AbortRefused(
                f"producer {request.producer_id} is at epoch {row['producer_epoch']} on {tp}, "
                f"not {request.producer_epoch}: the transaction changed; look again"
            )
    idle = thresholds.as_of_ms - row["last_timestamp"]
    if idle <= thresholds.max_transaction_timeout_ms:
        raise AbortRefused(
            f"producer {row['producer_id']}'s transaction on {tp} was last written {idle} ms ago, not more than "
            f"transaction.max.timeout.ms={thresholds.max_transaction_timeout_ms}: not a hanging candidate"
        )
    ((verdict, reason, _),) = live_verdicts([row], listings, descriptions, thresholds)
    listing = listings.get(row["producer_id"])
    desc = descriptions.get(listing["transactional_id"]) if listing else None
    evidence = evidence_of(row, listing, desc, idle, None)
    if verdict != Verdict.HANGING:
        why = f"{verdict} ({reason})" if verdict else "not hanging (the coordinator still owns this transaction)"
        raise AbortRefused(f"{tp} @ {row['current_transaction_start_offset']}: verdict is {why}: {evidence}")
    ce = request.coordinator_epoch if request.coordinator_epoch is not None else row["coordinator_epoch"]
    return AbortPlan(
        topic=request.topic,
        partition=request.partition,
        producer_id=row["producer_id"],
        producer_epoch=row["producer_epoch"],
        coordinator_epoch=max(int(ce), 0),
        start_offset=row["current_transaction_start_offset"],
        verdict=verdict,
        reason=reason,
        transactional_id=listing["transactional_id"] if listing else None,
        evidence=evidence,
    )


def revalidate_abort(admin: Any, request: AbortRequest, thresholds: classify.Thresholds) -> AbortPlan:
    """:func:`validate_abort` over state asked from the cluster now."""
    producers = describe_producers(admin, request.topic, [request.partition])
    pids = {p["producer_id"] for p in producers}
    listings = list_transactions(admin, pids)
    descriptions = describe_transactions(admin, {x["transactional_id"] for x in listings.values()})
    return validate_abort(request, producers, listings, descriptions, thresholds)


class AbortUnsupported(Exception):
    """The cluster cannot abort (no WriteTxnMarkers); the message says so."""


def send_abort(admin: Any, plan: AbortPlan) -> None:
    """WriteTxnMarkers ABORT for ``plan`` to the partition leader (kafka-python ``abort_transaction``)."""
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec
    from kafka.errors import IncompatibleBrokerVersion

    spec = AbortTransactionSpec(
        TopicPartition(plan.topic, plan.partition), plan.producer_id, plan.producer_epoch, plan.coordinator_epoch
    )

    # kafka-python's abort_transaction, with the response read as Kafka's Admin reads it: its own check
    # passes a response that lacks the partition's result (no error code to look at). The steps are
    # kafka-python 3.0's (_async_abort_transaction), pinned in pyproject.toml.
    async def write_marker() -> Any:
        leaders = await admin._async_get_leader_for_partitions([spec.topic_partition])
        return await admin._manager.send(admin._abort_transaction_request(spec), node_id=next(iter(leaders)))

    try:
        response = admin._manager.run(write_marker)
    except IncompatibleBrokerVersion as e:
        raise AbortUnsupported(f"the broker does not support WriteTxnMarkers (admin abort): {e}") from e
    check_abort_response(response, plan)


def check_abort_response(response: Any, plan: AbortPlan) -> None:
    """Raise unless the WriteTxnMarkers response holds exactly one result, for the plan's producer, topic and
    partition, without error: ``AbortTransactionHandler.handleResponse`` (clients/.../admin/internals)."""
    from kafka import errors as kafka_errors

    def unexpected(what: str) -> Exception:
        return kafka_errors.KafkaError(
            f"WriteTxnMarkers response included unexpected {what} (expected exactly one entry for producer "
            f"{plan.producer_id} on {plan.topic}-{plan.partition}): the marker may not have been written; "
            f"check with 'txnlog find-hanging' before retrying"
        )

    markers = list(response.markers)
    if len(markers) != 1 or markers[0].producer_id != plan.producer_id:
        raise unexpected("marker entries")
    topics = list(markers[0].topics)
    if len(topics) != 1 or topics[0].name != plan.topic:
        raise unexpected("topic entries")
    partitions = list(topics[0].partitions)
    if len(partitions) != 1 or partitions[0].partition_index != plan.partition:
        raise unexpected("partition entries")
    error = kafka_errors.for_code(partitions[0].error_code)
    if error is not kafka_errors.NoError:
        raise error(f"WriteTxnMarkers (abort) failed for {plan.topic}-{plan.partition}")
