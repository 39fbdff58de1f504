"""What to do about a finding: its remedy, the exact command(s), the Kafka version each needs, and when it is safe.

One function, :func:`remedy_of`, decides it for every finding, whichever path built the finding (the
offline job's two table builds through :func:`remedy_columns`, the live checks in txnlog.live.admin); the
``advice`` sentence of a finding is this remedy's (:attr:`Remedy.advice`).

=====================================  ===================  ==============================================
finding                                remedy               why
=====================================  ===================  ==============================================
HANGING (any reason)                   ``ABORT``            nothing will end it: ``abort --start-offset``
                                                            (KIP-664, 3.0+), the legacy form before 3.0
``COORDINATOR_TIMEOUT_OVERDUE``,       ``FENCE``            the coordinator should have aborted it on its
``COORDINATOR_STUCK`` in Ongoing                            own: bumping the id's epoch makes it abort now
                                                            (``forceTerminateTransaction``, KIP-939, 4.1+;
                                                            ``Admin.fenceProducers``' InitProducerId,
                                                            KIP-618, 3.2+, through ``txnlog fence``)
``TWO_PHASE_IN_DOUBT``                 ``WAIT``             the external transaction manager decides;
                                                            only then commit (``completeTransaction``) or
                                                            abort (``forceTerminateTransaction``)
``MARKERS_PENDING``,                   ``DELIVER_MARKERS``  the outcome is decided; aborting or fencing is
``COORDINATOR_STUCK`` in Prepare*                           wrong (InitProducerId answers
                                                            CONCURRENT_TRANSACTIONS while markers are
                                                            pending): the coordinator must deliver them
anything else                          ``NONE``             nothing to run
=====================================  ===================  ==============================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pyarrow as pa

from txnlog.broker.classify import (
    BOOTSTRAP_PLACEHOLDER,
    HANGING_REASONS,
    PREPARE_STATES,
    Reason,
    Safety,
    Thresholds,
    abort_command,
    legacy_abort_command,
)
from txnlog.broker.evidence import coordinator_stuck_evidence, evidence
from txnlog.kafka.wire import TWO_PHASE_COMMIT_TIMEOUT_MS, TransactionState

__all__ = [
    "REMEDY_COLUMNS",
    "Remedy",
    "RemedyKind",
    "fence_command",
    "force_terminate_command",
    "candidates_text",
    "remedy_arrays",
    "remedy_columns",
    "remedy_of",
]


class RemedyKind(StrEnum):
    """``findings.remedy``."""

    ABORT = "ABORT"  # WriteTxnMarkers ABORT on the partition (kafka-transactions.sh abort)
    FENCE = "FENCE"  # bump the transactional.id's epoch: the coordinator aborts its ongoing transaction
    WAIT = "WAIT"  # someone else decides (a two-phase commit's transaction manager)
    DELIVER_MARKERS = "DELIVER_MARKERS"  # decided; the coordinator must get its markers written
    NONE = "NONE"  # nothing to run


#: the Kafka versions the commands need, as ``findings`` names them
ABORT_NEEDS = "Kafka 3.0+ (KIP-664: DescribeProducers finds the producer at --start-offset)"
LEGACY_ABORT_NEEDS = "brokers before 3.0 (WriteTxnMarkers with the producer id, epoch and coordinator epoch)"
FORCE_TERMINATE_NEEDS = "Kafka 4.1+ (KIP-939: Admin.forceTerminateTransaction)"
FENCE_NEEDS = "Kafka 3.2+ (KIP-618: Admin.fenceProducers' InitProducerId, re-validated with DescribeTransactions)"
DESCRIBE_NEEDS = "Kafka 3.0+ (KIP-664: DescribeTransactions)"
TWO_PHASE_NEEDS = "Kafka 4.1+ (KIP-939: two-phase transactions exist only there)"

#: the ``findings`` columns :func:`remedy_columns` adds (txnlog.model.contract.FINDINGS), in order
REMEDY_COLUMNS = (
    "remedy",
    "remedy_command",
    "remedy_kafka_version",
    "remedy_fallback_command",
    "remedy_fallback_kafka_version",
    "remedy_condition",
)


@dataclass(frozen=True, slots=True)
class Remedy:
    """One finding's remedy: what to run on the newest brokers (``command``, needing ``kafka_version``), on
    older ones (``fallback_command``), when that is safe (``condition``) and the advice sentence."""

    remedy: RemedyKind
    command: str | None
    kafka_version: str | None
    fallback_command: str | None
    fallback_kafka_version: str | None
    condition: str
    advice: str

    def values(self) -> tuple[str | None, ...]:
        """The :data:`REMEDY_COLUMNS` values, in their order."""
        return (
            self.remedy.value,
            self.command,
            self.kafka_version,
            self.fallback_command,
            self.fallback_kafka_version,
            self.condition,
        )

    def columns(self) -> dict[str, Any]:
        return dict(zip(REMEDY_COLUMNS, self.values(), strict=True))


def force_terminate_command(bootstrap: str | None, transactional_id: str) -> str:
    """``kafka-transactions.sh forceTerminateTransaction`` (KIP-939, Kafka 4.1+)."""
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap or BOOTSTRAP_PLACEHOLDER} forceTerminateTransaction "
        f"--transactionalId {transactional_id}"
    )


def fence_command(
    bootstrap: str | None,
    transactional_id: str,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    *,
    two_phase_decided: bool = False,
) -> str:
    """``txnlog fence`` (Admin.fenceProducers' InitProducerId after a live re-check), pinned to the
    finding's producer id and epoch when known."""
    pinned = (
        f" --producer-id {producer_id} --producer-epoch {producer_epoch}"
        if producer_id is not None and producer_epoch is not None
        else ""
    )
    return (
        f"txnlog fence --bootstrap-server {bootstrap or BOOTSTRAP_PLACEHOLDER} --transactional-id {transactional_id}"
        f"{pinned}{' --two-phase-decided' if two_phase_decided else ''}"
    )


def _describe_command(bootstrap: str | None, transactional_id: str) -> str:
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap or BOOTSTRAP_PLACEHOLDER} describe "
        f"--transactional-id {transactional_id}"
    )


_HANGING_ADVICE = {
    Reason.NO_TRANSACTIONAL_ID: "Abort it: nothing will ever end this transaction.",
    Reason.TRANSACTIONAL_ID_EXPIRED: "Abort it: the transactional.id that owned it no longer exists.",
    Reason.COORDINATOR_COMPLETED: (
        "Abort it: the coordinator believes this transaction is over and will never write its marker."
    ),
    Reason.PARTITION_NOT_IN_TRANSACTION: "Abort it: the coordinator will not send a marker to this partition.",
}


def remedy_of(finding: Mapping[str, Any], bootstrap: str | None = None) -> Remedy:
    """The remedy of one finding (a row of ``findings``, or a candidate row of the table builds).

    Reads ``reason``, ``topic``, ``partition``, ``start_offset``, ``producer_id``, ``producer_epoch``,
    ``coordinator_epoch`` (or the candidates' ``last_coordinator_epoch``), ``transactional_id``,
    ``safety``, the coordinator's state (``coordinator_state`` or ``owner_state``), its timeout
    (``timeout_ms`` or ``owner_timeout_ms``), its ``__transaction_state`` partition
    (``coordinator_partition`` or ``owner_coordinator_partition``) and, for coordinator-only findings, the
    ``partitions`` it lists.

    >>> r = remedy_of({"reason": "COORDINATOR_TIMEOUT_OVERDUE", "transactional_id": "cart-writer",
    ...                "producer_id": 7, "producer_epoch": 2, "topic": "inventory", "partition": 1}, "k:9092")
    >>> r.remedy.value, r.kafka_version
    ('FENCE', 'Kafka 4.1+ (KIP-939: Admin.forceTerminateTransaction)')
    >>> r.command.split(" k:9092 ")[1]
    'forceTerminateTransaction --transactionalId cart-writer'
    >>> r.fallback_command
    'txnlog fence --bootstrap-server k:9092 --transactional-id cart-writer --producer-id 7 --producer-epoch 2'
    """
    reason = finding.get("reason") or ""
    tid = finding.get("transactional_id")
    state = _first(finding, "coordinator_state", "owner_state", "state")
    timeout = _first(finding, "owner_timeout_ms", "timeout_ms")
    if reason in HANGING_REASONS:
        return _abort(finding, Reason(reason), bootstrap)
    ongoing = state == TransactionState.ONGOING.kafka_name
    two_phase = reason == Reason.TWO_PHASE_IN_DOUBT or timeout == TWO_PHASE_COMMIT_TIMEOUT_MS
    if two_phase and (ongoing or reason == Reason.TWO_PHASE_IN_DOUBT) and tid:
        return _await_decision(finding, tid, bootstrap)
    overdue = reason == Reason.COORDINATOR_TIMEOUT_OVERDUE
    if tid and (ongoing and (overdue or reason == Reason.COORDINATOR_STUCK) or overdue and state is None):
        return _fence(finding, tid, bootstrap)
    prepare = state in PREPARE_STATES or state == TransactionState.PREPARE_EPOCH_FENCE.kafka_name
    late_in_prepare = reason in (Reason.COORDINATOR_STUCK, Reason.COORDINATOR_TIMEOUT_OVERDUE) and prepare
    if reason == Reason.MARKERS_PENDING or late_in_prepare:
        return _deliver_markers(finding, tid, bootstrap)
    return Remedy(RemedyKind.NONE, None, None, None, None, "nothing to run", "Nothing to run: read the evidence.")


def _coordinator(finding: Mapping[str, Any]) -> str:
    """The finding's ``__transaction_state`` partition, as the advice names it."""
    cp = _first(finding, "coordinator_partition", "owner_coordinator_partition")
    return f"__transaction_state-{cp}" if cp is not None else "the id's __transaction_state partition"


def _abort(finding: Mapping[str, Any], reason: Reason, bootstrap: str | None) -> Remedy:
    """A hanging transaction: abort it on its partition, with the producer's last marker's coordinator epoch."""
    topic, partition = str(finding.get("topic")), int(finding.get("partition") or 0)
    pid, epoch = int(finding.get("producer_id") or 0), int(finding.get("producer_epoch") or 0)
    ce = _first(finding, "coordinator_epoch", "last_coordinator_epoch")
    condition = (
        "SAFE: nothing will ever end this transaction; 'txnlog abort' re-validates it live first (still open at "
        "that offset, same producer id and epoch, still HANGING)"
        if finding.get("safety") != Safety.VERIFY_FIRST
        else "VERIFY_FIRST: only once the doubt the evidence names is cleared on the live cluster "
        "(kafka-transactions.sh describe-producers shows it still open at that offset, the coordinator "
        "does not list the partition); then 'txnlog abort' re-validates it"
    )
    return Remedy(
        RemedyKind.ABORT,
        abort_command(bootstrap, topic, partition, int(finding.get("start_offset") or 0)),
        ABORT_NEEDS,
        legacy_abort_command(bootstrap, topic, partition, pid, epoch, -1 if ce is None else int(ce)),
        LEGACY_ABORT_NEEDS,
        condition,
        _HANGING_ADVICE[reason],
    )


def _await_decision(finding: Mapping[str, Any], tid: str, bootstrap: str | None) -> Remedy:
    """A two-phase (KIP-939) transaction: only its external transaction manager decides it."""
    pid, epoch = finding.get("producer_id"), finding.get("producer_epoch")
    return Remedy(
        RemedyKind.WAIT,
        force_terminate_command(bootstrap, tid),
        FORCE_TERMINATE_NEEDS,
        fence_command(bootstrap, tid, pid, epoch, two_phase_decided=True),
        TWO_PHASE_NEEDS,
        f"never automatically: only after the external transaction manager has decided {tid}'s transaction. "
        "Decided to commit: the application commits it (KafkaProducer.completeTransaction); decided to abort: "
        "one of these commands",
        f"Do not abort or fence it yet: the external transaction manager decides. Once it has: to commit, the "
        f"application's completeTransaction; to abort, kafka-transactions.sh forceTerminateTransaction "
        f"--transactionalId {tid} (Kafka 4.1+).",
    )


def _fence(finding: Mapping[str, Any], tid: str, bootstrap: str | None) -> Remedy:
    """An Ongoing transaction past its timeout that the coordinator does not abort: bump the id's epoch."""
    pid, epoch = finding.get("producer_id"), finding.get("producer_epoch")
    return Remedy(
        RemedyKind.FENCE,
        force_terminate_command(bootstrap, tid),
        FORCE_TERMINATE_NEEDS,
        fence_command(bootstrap, tid, pid, epoch),
        FENCE_NEEDS,
        f"the live coordinator still shows {tid} with producer {pid} epoch {epoch}, Ongoing and past its timeout "
        "('txnlog fence' checks this with DescribeTransactions before it sends anything); the application "
        "owning the id is fenced (ProducerFencedException) and must restart. Brokers before 3.2: no command, "
        "wait for the coordinator or restart the broker leading "
        f"{_coordinator(finding)}",
        f"Fence {tid}: the coordinator should have aborted this transaction at its timeout; bumping the id's "
        f"epoch makes it abort it now (kafka-transactions.sh forceTerminateTransaction on Kafka 4.1+, txnlog "
        f"fence on 3.2+). The application using {tid} gets ProducerFencedException and must restart.",
    )


def _deliver_markers(finding: Mapping[str, Any], tid: str | None, bootstrap: str | None) -> Remedy:
    """A decided transaction whose markers are not all written: the coordinator retries them; never abort."""
    topic, partition = finding.get("topic"), finding.get("partition")
    tp = f"{topic}-{partition}" if topic is not None and partition is not None else None
    coordinator = _coordinator(finding)
    listed = [tp] if tp else list(finding.get("partitions") or [])
    one = len(listed) == 1
    where = f"the leader{'' if one else 's'} of {', '.join(listed) or 'its partitions'}"
    accept, those, healthy = ("accepts", "that leader", "it is") if one else ("accept", "those leaders", "they are")
    gone = (
        ""
        if tp
        else "; if a listed partition no longer exists (its topic deleted during the prepare), its markers "
        "cannot be delivered"
    )
    return Remedy(
        RemedyKind.DELIVER_MARKERS,
        _describe_command(bootstrap, tid) if tid else None,
        DESCRIBE_NEEDS if tid else None,
        None,
        None,
        "never abort or fence (InitProducerId answers CONCURRENT_TRANSACTIONS while markers are pending; "
        "aborting a PrepareCommit breaks atomicity): the coordinator, the leader of "
        f"{coordinator}, retries the markers until {where} {accept} them; watch the command's state reach "
        f"Complete*{gone}",
        f"Do not abort or fence: the coordinator decided and retries the markers until {where} {accept} them. "
        f"Check {those}; if {healthy} healthy, move the leadership of {coordinator} (e.g. restart the broker "
        f"leading it): the new coordinator resends the markers{gone}.",
    )


def _first(row: Mapping[str, Any], *names: str) -> Any:
    return next((row[n] for n in names if row.get(n) is not None), None)


def remedy_columns(rows: pa.Table, bootstrap: str | None) -> dict[str, pa.Array]:
    """:data:`REMEDY_COLUMNS` for every row of ``rows`` (findings, or classified candidates: null where a
    row has no ``reason``). Findings are the few stuck transactions: one :func:`remedy_of` per row."""
    return remedy_arrays([remedy_of(r, bootstrap) if r.get("reason") else None for r in rows.to_pylist()])


def remedy_arrays(remedies: Sequence[Remedy | None]) -> dict[str, pa.Array]:
    """:data:`REMEDY_COLUMNS` of ``remedies``, one row each (None: a row without a remedy, all null)."""
    rows = [_NO_REMEDY if r is None else r.values() for r in remedies]
    return {c: pa.array([row[i] for row in rows], pa.string()) for i, c in enumerate(REMEDY_COLUMNS)}


_NO_REMEDY = (None,) * len(REMEDY_COLUMNS)


def evidence_and_advice(row: dict, reason: Reason | str, thresholds: Thresholds) -> tuple[str, str]:
    """A partition-level finding's evidence sentence (txnlog.broker.evidence.evidence) and advice: its remedy's."""
    advice = remedy_of({**row, "reason": str(reason)}, thresholds.bootstrap_servers).advice
    return evidence(row, reason, thresholds), advice


def candidates_text(
    rows: Sequence[dict], reasons: Iterable[str], safeties: Iterable[str], thresholds: Thresholds
) -> tuple[list[str | None], list[str | None], list[Remedy | None]]:
    """(evidence, advice, remedy) of each candidate row (its ``reason`` and ``safety`` given apart; none where it
    has no reason): one :func:`remedy_of` a row for both its advice and its remedy columns."""
    texts: list[str | None] = []
    advice: list[str | None] = []
    remedies: list[Remedy | None] = []
    bootstrap = thresholds.bootstrap_servers
    for row, reason, safety in zip(rows, reasons, safeties, strict=True):
        remedy = remedy_of({**row, "reason": str(reason), "safety": safety or None}, bootstrap) if reason else None
        texts.append(evidence(row, reason, thresholds) if remedy is not None else None)
        advice.append(remedy.advice if remedy is not None else None)
        remedies.append(remedy)
    return texts, advice, remedies


def coordinator_stuck_evidence_and_advice(row: dict, thresholds: Thresholds) -> tuple[str, str]:
    """A stuck coordinator record's evidence sentence (txnlog.broker.evidence.coordinator_stuck_evidence) and advice."""
    advice = remedy_of({**row, "reason": Reason.COORDINATOR_STUCK.value}, thresholds.bootstrap_servers).advice
    return coordinator_stuck_evidence(row, thresholds), advice
