"""``txnlog fence``: end a transactional.id's overdue transaction by bumping its epoch, re-validated live first.

The remedy of a LATE finding whose coordinator still shows the transaction Ongoing past its own timeout
(txnlog.rules.remedy, ``FENCE``). What ``Admin.fenceProducers`` (KIP-618, Kafka 3.2+) does: FindCoordinator
for the transactional.id, then InitProducerId for it with no producer id or epoch
(``FenceProducersHandler``). The coordinator bumps the id's epoch and, as for a producer restarting with
that id, aborts the transaction in flight: it writes ABORT markers on every partition the transaction
lists, which releases their last stable offsets (``TransactionCoordinator.handleInitProducerId``: an
Ongoing transaction is aborted first and the request answered CONCURRENT_TRANSACTIONS, so that the client
asks again once the markers are written and gets the epoch bumped past the abort's). The application
still using the id is fenced: its next request fails with ``ProducerFencedException`` and it must restart.

Before anything is sent, :func:`validate_fence` checks what DescribeTransactions (KIP-664, Kafka 3.0+)
answers now: the id is known, its transaction is still Ongoing, still owned by the producer id and epoch
of the finding, and past its timeout; a two-phase-commit id (KIP-939: timeout ``Int.MaxValue``) only
when the operator says its transaction manager has decided. Nothing here sends InitProducerId unless
:func:`send_fence` is called (``--execute``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txnlog.kafka.wire import TWO_PHASE_COMMIT_TIMEOUT_MS, TransactionState
from txnlog.live import admin as live
from txnlog.model.times import duration_text, utc_text

#: what fencing needs of the cluster, in the one line that refuses a cluster without it
NEEDS = (
    "txnlog fence needs Kafka 3.2+ (KIP-618: Admin.fenceProducers' InitProducerId, re-validated with "
    "DescribeTransactions, KIP-664, 3.0+); on 4.1+ kafka-transactions.sh forceTerminateTransaction does the same"
)
#: InitProducerId errors the client asks again after (``FenceProducersHandler.handleError``)
RETRIABLE = ("CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")


class FenceRefused(Exception):
    """Live state does not show what the fence is for; the message says why (one line)."""


class FenceUnsupported(Exception):
    """The cluster does not answer an API the fence needs; the message names the Kafka version needed."""


@dataclass(frozen=True)
class FenceRequest:
    transactional_id: str
    producer_id: int | None = None  # the finding's: refuse when the coordinator shows another
    producer_epoch: int | None = None
    two_phase_decided: bool = False  # a KIP-939 two-phase transaction's manager has decided to abort it

    def describe(self) -> str:
        pinned = (
            f" (producer {self.producer_id} epoch {self.producer_epoch}, as the finding)"
            if self.producer_id is not None and self.producer_epoch is not None
            else " (any producer id and epoch: pass --producer-id and --producer-epoch to pin the finding's)"
        )
        return f"transactional.id {self.transactional_id}{pinned}"


@dataclass(frozen=True)
class FencePlan:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    txn_start_ms: int
    partitions: tuple[str, ...]
    coordinator_id: int | None
    two_phase: bool

    def evidence(self, now_ms: int) -> str:
        listed = ", ".join(self.partitions) or "no partitions"
        since = utc_text(self.txn_start_ms)
        past = (
            "a two-phase-commit transaction (timeout 2147483647) its manager has decided"
            if self.two_phase
            else f"{duration_text(now_ms - self.txn_start_ms - self.timeout_ms)} past its {self.timeout_ms} ms timeout"
        )
        return (
            f"DescribeTransactions shows {self.transactional_id} Ongoing with producer {self.producer_id} epoch "
            f"{self.producer_epoch} since {since}, {past}, listing {listed}"
        )


@dataclass(frozen=True)
class FenceResult:
    producer_id: int
    producer_epoch: int  # the new epoch InitProducerId answered
    state_after: str | None  # what DescribeTransactions answers right after


def validate_fence(request: FenceRequest, description: Mapping[str, Any] | None, now_ms: int) -> FencePlan:
    """Check DescribeTransactions' answer for the id (:func:`txnlog.live.admin.describe_transactions`, None: not
    found) still calls for a fence; raise :class:`FenceRefused` with the reason if not."""
    tid = request.transactional_id
    if description is None:
        raise FenceRefused(
            f"transactional.id {tid}: unknown to its coordinator (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND, "
            "never used or expired); nothing to fence"
        )
    state, pid, epoch = description["state"], description["producer_id"], description["producer_epoch"]
    timeout, start = description.get("timeout_ms"), description.get("txn_start_timestamp")
    listed = ", ".join(description.get("partitions") or []) or "no partitions"
    now = f"DescribeTransactions shows {tid} {state} with producer {pid} epoch {epoch}, listing {listed}"
    if state != TransactionState.ONGOING.kafka_name:
        why = (
            "its markers are being written: never fence then (InitProducerId answers CONCURRENT_TRANSACTIONS)"
            if state
            in (
                TransactionState.PREPARE_COMMIT.kafka_name,
                TransactionState.PREPARE_ABORT.kafka_name,
                TransactionState.PREPARE_EPOCH_FENCE.kafka_name,
            )
            else "no transaction in flight"
        )
        raise FenceRefused(f"{now}: not Ongoing, {why}; nothing to fence")
    if request.producer_id is not None and pid != request.producer_id:
        raise FenceRefused(f"{now}, not producer {request.producer_id}: the id has moved on; look again")
    if request.producer_epoch is not None and epoch != request.producer_epoch:
        raise FenceRefused(f"{now}, not epoch {request.producer_epoch}: the producer has moved on; look again")
    two_phase = timeout == TWO_PHASE_COMMIT_TIMEOUT_MS
    if two_phase and not request.two_phase_decided:
        raise FenceRefused(
            f"{now}: a two-phase-commit transaction (KIP-939, timeout {TWO_PHASE_COMMIT_TIMEOUT_MS}) that only its "
            "external transaction manager decides; pass --two-phase-decided once it has decided to abort it"
        )
    if not two_phase:
        if start is None or start < 0 or timeout is None:
            raise FenceRefused(f"{now}, with no transaction start time: cannot tell it is past its timeout")
        over = now_ms - start - timeout
        if over <= 0:
            raise FenceRefused(
                f"{now}, started {utc_text(start)}: still within its {timeout} ms timeout "
                f"(for {duration_text(-over)} more); the coordinator ends it on its own"
            )
    return FencePlan(
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        timeout_ms=int(timeout) if timeout is not None else TWO_PHASE_COMMIT_TIMEOUT_MS,
        txn_start_ms=int(start) if start is not None else -1,
        partitions=tuple(description.get("partitions") or ()),
        coordinator_id=description.get("coordinator_id"),
        two_phase=two_phase,
    )


def _unsupported(e: Exception) -> bool:
    # Lazy in this module: the Kafka clients load only when a live cluster is asked.
    from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

    return isinstance(e, IncompatibleBrokerVersion | UnsupportedVersionError)


def revalidate_fence(admin: Any, request: FenceRequest, now_ms: int | None = None) -> FencePlan:
    """:func:`validate_fence` over DescribeTransactions asked now."""

    try:
        description = live.describe_transactions(admin, [request.transactional_id])[request.transactional_id]
    except Exception as e:
        if _unsupported(e):
            raise FenceUnsupported(f"the cluster does not answer DescribeTransactions ({e}); {NEEDS}") from e
        raise
    return validate_fence(request, description, int(time.time() * 1000) if now_ms is None else now_ms)


def send_fence(
    admin: Any, plan: FencePlan, *, max_transaction_timeout_ms: int = 900_000, deadline_s: float = 60.0
) -> FenceResult:
    """FindCoordinator + InitProducerId for ``plan``'s id, as ``Admin.fenceProducers`` sends them: no producer id
    or epoch, so the coordinator bumps the epoch and aborts the ongoing transaction. Asks again on the errors the
    Java handler retries (CONCURRENT_TRANSACTIONS while the abort's markers are written, a coordinator moving)
    until ``deadline_s``. The transaction timeout sent is the id's own (capped at the brokers'
    ``transaction.max.timeout.ms``: a larger one is refused with INVALID_TRANSACTION_TIMEOUT)."""
    from kafka import errors as kafka_errors
    from kafka.protocol.metadata import CoordinatorType
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    tid = plan.transactional_id
    timeout_ms = min(plan.timeout_ms, max_transaction_timeout_ms)

    async def init_producer_id() -> Any:
        coordinators = await admin._find_coordinator_ids([tid], key_type=CoordinatorType.TRANSACTION)
        request = InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1
        )
        return await admin._manager.send(request, node_id=coordinators[tid])

    deadline = time.monotonic() + deadline_s
    backoff = 0.1
    while True:
        try:
            response = admin._manager.run(init_producer_id)
        except Exception as e:
            if _unsupported(e):
                raise FenceUnsupported(f"the cluster does not answer InitProducerId ({e}); {NEEDS}") from e
            raise
        error = kafka_errors.for_code(response.error_code)
        if error is kafka_errors.NoError:
            break
        name = getattr(error, "message", error.__name__)
        if name in RETRIABLE and time.monotonic() < deadline:
            if name in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"):  # ask FindCoordinator again
                admin._manager.cluster._coordinators.pop((CoordinatorType.TRANSACTION, tid), None)
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
            continue
        raise error(f"InitProducerId for {tid} failed")
    after = live.describe_transactions(admin, [tid]).get(tid)
    return FenceResult(
        producer_id=int(response.producer_id),
        producer_epoch=int(response.producer_epoch),
        state_after=after["state"] if after else None,
    )
