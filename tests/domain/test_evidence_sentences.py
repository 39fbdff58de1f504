"""Evidence and advice read as finished English in every case: every reason × every input kind
(copied segments, a kafka-dump-log.sh dump, the live Kafka source, replicas that diverged, damage nearby)
× what may be unknown (transactional.id, coordinator state and times, the log start, the previous marker)
× one or several batches. No ``None``/``nan``, no singular/plural slip, no empty clause or stray punctuation."""

from __future__ import annotations

import itertools
import re

import pytest

from txnlog.broker import classify as C
from txnlog.broker.evidence import with_blocked_groups, with_pending_groups
from txnlog.kafka.wire import ControlType
from txnlog.rules.remedy import coordinator_stuck_evidence_and_advice, evidence_and_advice

AS_OF = 1_763_800_000_000

BASE = {
    "topic": "orders",
    "partition": 5,
    "producer_id": 40015,
    "producer_epoch": 3,
    "start_offset": 614,
    "last_offset": 620,
    "last_timestamp_ms": AS_OF - 3_600_000,
    "idle_ms": 3_600_000,
    "owner_partitions": ["orders-4"],
    "owner_timeout_ms": 60_000,
    "owner_coordinator_partition": 17,
}

INPUTS = {
    "segments": {"replicas": ["broker-1", "broker-2"], "open_replicas": ["broker-1", "broker-2"]},
    "dump_log": {"replicas": ["dumps/b1"], "open_replicas": ["dumps/b1"]},
    "live": {"replicas": ["live"], "open_replicas": ["live"], "log_start_offset": 600},
    "diverged": {
        "replicas": ["broker-1", "broker-2", "broker-3"],
        "open_replicas": ["broker-2"],
        "behind_replicas": ["broker-3"],
        "diverged": True,
    },
    "damaged": {
        "replicas": ["broker-1"],
        "open_replicas": ["broker-1"],
        "damage_after": True,
        "damaged_files": ["broker-1/orders-5/00000000000000000600.log"],
        "txn_state_damaged": True,
        "checkpoint_note": "replication-offset-checkpoint of broker-1 lags the segments",
    },
}

OWNERS = {
    "known": {
        "transactional_id": "payments-7",
        "owner_state": "CompleteAbort",
        "owner_last_update_ms": AS_OF - 1_800_000,
        "owner_txn_start_ms": AS_OF - 3_700_000,
    },
    "unknown": {"transactional_id": None, "owner_state": None, "owner_last_update_ms": None},
}

STARTS = {
    "in-log": {"started_before_log_start": False},
    "before-log-start": {"started_before_log_start": True, "snapshot_offset": 600, "log_start_offset": 610},
    "before-log-start-unknown": {"started_before_log_start": True, "snapshot_offset": None, "log_start_offset": None},
}

MARKERS = {
    "none": {"prev_marker_type": None},
    "abort": {"prev_marker_type": int(ControlType.ABORT), "prev_marker_offset": 613, "prev_marker_epoch": 3},
    "commit-no-epoch": {"prev_marker_type": int(ControlType.COMMIT), "prev_marker_offset": 600},
}

SLIPS = [
    (r"\bNone\b", "a None"),
    (r"\bnan\b", "a nan"),
    (r"\b1 batches\b", "singular/plural"),
    (r"\b(?:[02-9]|\d{2,}) batch\b(?!es)", "singular/plural"),
    (r"\b1 batch(?:es)? (?:follow|are)\b", "verb agreement"),
    (r"\bbatches (?:follows|is)\b", "verb agreement"),
    (r"  ", "a double space"),
    (r" [,;.:)]", "a space before punctuation"),
    (r"[,;:]\s*[,;.)]", "an empty clause"),
    (r"\(\s*\)", "empty parentheses"),
    (r"\.\.", "a doubled full stop"),
]


def _slips(text: str) -> list[str]:
    return [what for pattern, what in SLIPS if re.search(pattern, text)]


#: coordinator-only findings (COORDINATOR_STUCK) have their own sentence: test_coordinator_stuck_sentence
PARTITION_REASONS = [r for r in C.Reason if r != C.Reason.COORDINATOR_STUCK]
#: all read, or how many of the 50 __transaction_state partitions were (None: not counted)
READ = {"all": (True, None), "uncounted": (False, None), "none": (False, 0), "one": (False, 1), "some": (False, 12)}
#: every combination but the reason and the input kind, checked in one test per (reason, input kind): the
#: 9,000-odd cases are cheap, pytest's own cost per test is not
CASES = list(itertools.product(OWNERS, STARTS, MARKERS, (0, 1, 2), READ))


def _problems(reason, inputs, owner, start, marker, batches, all_read) -> list[str]:
    """What reads wrongly in the evidence and advice of one case (empty: both are finished English)."""
    row = {**BASE, **INPUTS[inputs], **OWNERS[owner], **STARTS[start], **MARKERS[marker], "batch_count": batches}
    if batches == 1:
        row["last_offset"] = row["start_offset"]
    everything, read = READ[all_read]
    thresholds = C.Thresholds(as_of_ms=AS_OF, all_txn_state_partitions_read=everything, txn_state_partitions_read=read)
    evidence, advice = evidence_and_advice(row, reason, thresholds)
    problems: list[str] = []
    for text in (evidence, advice):
        problems += [f"{slip}: {text!r}" for slip in _slips(text)]
        if not (text[0].isupper() or text[0].isdigit()):
            problems.append(f"starts in lower case: {text!r}")
        if not text.endswith("."):
            problems.append(f"no full stop at the end: {text!r}")
    if reason == C.Reason.NO_TRANSACTIONAL_ID and read == 0:
        if "__transaction_state was not read" not in evidence or "currently owns" in evidence:
            problems.append(f"not saying __transaction_state was not read: {evidence!r}")
    if reason == C.Reason.NO_TRANSACTIONAL_ID and read == 12:
        if "only 12 of 50 __transaction_state partitions were read" not in evidence:
            problems.append(f"not saying how many __transaction_state partitions were read: {evidence!r}")
    return problems


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("reason", PARTITION_REASONS, ids=str)
def test_evidence_reads_as_english(reason, inputs) -> None:
    """Every case of ``reason`` on ``inputs``: each failing case is named (owner-start-marker-batches-read)."""
    failures = [
        f"{reason}-{inputs}-{'-'.join(map(str, case))}: {problem}"
        for case in CASES
        for problem in _problems(reason, inputs, *case)
    ]
    assert not failures, f"{len(failures)} problems:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("partitions", [["orders-4", "orders-9"], []])
def test_coordinator_stuck_sentence(partitions) -> None:
    row = {
        "transactional_id": "archiver",
        "producer_id": 7,
        "producer_epoch": 1,
        "state": "PrepareAbort",
        "txn_start_ms": AS_OF - 7_200_000,
        "last_update_ms": None,
        "timeout_ms": 60_000,
        "partitions": partitions,
        "coordinator_partition": 17,
    }
    evidence, advice = coordinator_stuck_evidence_and_advice(row, C.Thresholds(as_of_ms=AS_OF))
    for text in (evidence, advice):
        assert not _slips(text), (_slips(text), text)
        assert text.endswith(".")


@pytest.mark.parametrize("pending", [{}, {"billing": ["invoices-0"]}, {"billing": ["a-1", "a-0"], "etl": ["b-2"]}])
def test_a_transaction_in_consumer_offsets_says_compaction_stopped(pending) -> None:
    """A transaction in a ``__consumer_offsets`` partition holds its LSO, and the log cleaner compacts only below
    the LSO (LogCleanerManager.cleanableOffsets); the groups whose offset commits it holds pending are named."""
    row = {**BASE, **INPUTS["segments"], **OWNERS["known"], **MARKERS["none"], "batch_count": 1}
    row.update(topic="__consumer_offsets", partition=7, last_offset=row["start_offset"])
    thresholds = C.Thresholds(as_of_ms=AS_OF, all_txn_state_partitions_read=True)
    evidence, _ = evidence_and_advice(row, C.Reason.COORDINATOR_TIMEOUT_OVERDUE, thresholds)
    text = with_pending_groups(evidence, pending)
    assert not _slips(text) and text.endswith(".") and text.count(".") == evidence.count("."), text
    assert "at or below offset 614" in text
    assert "compaction of __consumer_offsets-7 has stopped for every group placed there" in text, text
    if not pending:
        assert text == evidence
    elif len(pending) == 1:
        assert "offset commits of group billing (invoices-0) pending" in text, text
    else:
        assert "offset commits of groups billing (a-0, a-1), etl (b-2) pending" in text, text
    plain, _ = evidence_and_advice({**row, "topic": "orders"}, C.Reason.COORDINATOR_TIMEOUT_OVERDUE, thresholds)
    assert "compaction" not in plain


@pytest.mark.parametrize("groups", [[], ["dashboards"], ["reports", "dashboards"]])
def test_a_transaction_names_the_groups_blocked_behind_it(groups) -> None:
    """A transaction holding a data partition's LSO names the groups whose committed offset is that LSO (a
    read_committed fetch stops there, UnifiedLog.read), in one finished sentence."""
    row = {**BASE, **INPUTS["segments"], **OWNERS["known"], **MARKERS["none"], "batch_count": 1}
    row.update(topic="page-views", partition=3, last_offset=row["start_offset"])
    evidence, _ = evidence_and_advice(row, C.Reason.COORDINATOR_TIMEOUT_OVERDUE, C.Thresholds(as_of_ms=AS_OF))
    text = with_blocked_groups(evidence, row["start_offset"], groups)
    # one sentence still: its only new full stop is the one in UnifiedLog.read
    assert not _slips(text) and text.endswith(".") and text.count(". ") == evidence.count(". "), text
    if not groups:
        assert text == evidence
    elif len(groups) == 1:
        assert "consumer group dashboards waits behind it: its committed offset is this LSO (614)" in text, text
    else:
        assert "consumer groups dashboards, reports wait behind it: their committed offset is this LSO (614)" in text
