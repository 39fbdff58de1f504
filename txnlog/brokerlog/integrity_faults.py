"""Scenarios whose read_committed consumers get what the markers did not decide (the integrity audit's faults).

Each writes a small healthy cluster (txnlog.brokerlog.scenarios) and then damages what a read_committed fetch is
served: a ``.txnindex`` entry of an ABORT removed, an entry for a COMMIT added, a ``.txnindex`` file deleted; or
breaks a transaction's atomicity the way a person does (``kafka-transactions.sh abort`` on one partition of a
transaction the coordinator then commits), loses a partition's marker of a transaction the coordinator completed,
or appends what a leader refuses (a zombie's batch at an old epoch, a
batch whose sequence skips a lost one).
The ground truth is in ``notes["integrity"]``: one dict per expected anomaly (check, topic, partition, replica,
producer_id, marker_offset).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from txnlog.brokerlog.cluster import Cluster
from txnlog.brokerlog.ground_truth import HANGING, ExpectedTransaction, Intent, ScenarioResult
from txnlog.brokerlog.partition import segment_file_name
from txnlog.brokerlog.workload import run_situation
from txnlog.kafka import wire
from txnlog.kafka.indexes import decode_txn_index
from txnlog.kafka.wire import ABORTED_TXN_ENTRY_SIZE

__all__ = ["INTEGRITY_SCENARIOS"]

_Situation = Callable[..., ScenarioResult]


def _aborts(result: ScenarioResult) -> list[ExpectedTransaction]:
    return [
        t
        for t in result.transactions
        if t.outcome == "ABORT" and t.marker_offset is not None and not t.topic.startswith("__")
    ]


def _segment_of(part_dir: Path, offset: int) -> int:
    bases = sorted(int(p.stem) for p in part_dir.glob("*.log"))
    return max(b for b in bases if b <= offset)


def _part_dir(result: ScenarioResult, topic: str, partition: int) -> tuple[str, Path]:
    (log_dir,) = result.log_dirs  # one broker: the audit's replica is its log dir's name
    return log_dir.name, log_dir / f"{topic}-{partition}"


def _entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """An AbortedTxn as TransactionIndex.append writes it: version int16 0, producerId, firstOffset,
    lastOffset, lastStableOffset (int64 each, big-endian)."""
    return b"".join([(0).to_bytes(2, "big"), *(v.to_bytes(8, "big", signed=True) for v in (pid, first, last, lso))])


def _note(result: ScenarioResult, check: str, t: ExpectedTransaction, replica: str | None) -> None:
    truth = {
        "check": check,
        "topic": t.topic,
        "partition": t.partition,
        "replica": replica,
        "producer_id": t.producer_id,
        "marker_offset": t.marker_offset,
    }
    truths = result.notes.setdefault("integrity", [])
    assert isinstance(truths, list)
    truths.append(truth)


def index_entry_missing(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """An ABORT-ended transaction whose ``.txnindex`` entry is gone: read_committed consumers receive it."""
    result = _healthy_small(out, seed, overwrite, "index_entry_missing")
    t = _aborts(result)[0]
    replica, part = _part_dir(result, t.topic, t.partition)
    path = part / segment_file_name(_segment_of(part, t.marker_offset or 0), ".txnindex")
    data = path.read_bytes()
    entries = decode_txn_index(data).entries
    keep = [
        data[i * ABORTED_TXN_ENTRY_SIZE : (i + 1) * ABORTED_TXN_ENTRY_SIZE]
        for i in range(entries["producer_id"].size)
        if (int(entries["producer_id"][i]), int(entries["last_offset"][i])) != (t.producer_id, t.marker_offset)
    ]
    path.write_bytes(b"".join(keep))
    _note(result, "ABORTED_DATA_VISIBLE", t, replica)
    return result


def txnindex_file_lost(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A segment's ``.txnindex`` file deleted: every ABORT-ended transaction of that segment is delivered."""
    result = _healthy_small(out, seed, overwrite, "txnindex_file_lost")
    t = _aborts(result)[0]
    replica, part = _part_dir(result, t.topic, t.partition)
    base = _segment_of(part, t.marker_offset or 0)
    (part / segment_file_name(base, ".txnindex")).unlink()
    for other in _aborts(result):
        same = (other.topic, other.partition) == (t.topic, t.partition)
        if same and _segment_of(part, other.marker_offset or 0) == base:
            _note(result, "ABORTED_DATA_VISIBLE", other, replica)
    return result


def index_entry_spurious(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """An aborted-transaction entry for a transaction that committed: read_committed consumers drop it."""
    result = _healthy_small(out, seed, overwrite, "index_entry_spurious")
    aborted_tps = {(a.topic, a.partition) for a in _aborts(result)}
    t = next(
        t
        for t in result.transactions
        if t.outcome == "COMMIT" and t.marker_offset is not None and (t.topic, t.partition) in aborted_tps
    )
    replica, part = _part_dir(result, t.topic, t.partition)
    path = part / segment_file_name(_segment_of(part, t.marker_offset or 0), ".txnindex")
    marker = t.marker_offset or 0
    data = path.read_bytes()
    lasts = decode_txn_index(data).entries["last_offset"]
    at = int((lasts < marker).sum()) * ABORTED_TXN_ENTRY_SIZE  # where TransactionIndex.append would have put it
    path.write_bytes(data[:at] + _entry(t.producer_id, t.first_offset, marker, marker + 1) + data[at:])
    _note(result, "COMMITTED_DATA_HIDDEN", t, replica)
    return result


def split_outcome(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A person aborts one partition of a transaction by hand (``kafka-transactions.sh abort``) while its
    commit's markers are in flight; the coordinator then commits: the partitions disagree."""

    a, b = ("payments", 0), ("payments", 1)
    seen: dict[str, int] = {}

    def act(c: Cluster) -> list[Intent]:
        p = c.transactional_producer("ledger-writer", transaction_version=1).init_transactions()
        p.begin_transaction()
        p.send(*a)
        p.send(*b)
        pid, epoch = p.producer_id, p.producer_epoch
        seen["producer_id"] = pid
        p.commit_transaction(deliver_markers_to=[a])  # b's leader unreachable: its marker waits
        c.tick(100, 500)
        c.partition(*b).append_end_txn_marker(
            producer_id=pid,
            producer_epoch=epoch,
            control_type=wire.ControlType.ABORT,
            coordinator_epoch=c.coordinator.coordinator_epoch("ledger-writer"),
            timestamp=c.clock(),
        )
        c.coordinator.deliver_pending_markers("ledger-writer")
        return []

    result = run_situation(out, seed, overwrite, name="split_outcome", description=split_outcome.__doc__ or "", act=act)
    t = next(t for t in _aborts(result) if (t.topic, t.partition, t.producer_id) == (*b, seen["producer_id"]))
    _note(result, "SPLIT_OUTCOME", t, None)
    return result


def _copied_in(c: Cluster, tp: tuple[str, int], batch: bytes) -> int:
    """Append ``batch`` at the leader's log end to every replica of ``tp``, as a follower copies it
    (``AppendOrigin.REPLICATION``: no epoch or sequence check); returns its base offset."""
    replicated = c.partition(*tp)
    at = replicated.leader_log.log_end_offset
    for log in replicated.logs.values():
        log.append(batch, base_offset=at)
    return at


def marker_missing(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A transaction (version 2) on two partitions that the coordinator commits and completes while one
    partition's COMMIT marker is never written (lost on its way; the coordinator writes Complete* only once every
    partition acknowledged it, so only a fault gets here); another producer's transaction then goes on past it
    on that partition."""

    a, b = ("payments", 0), ("payments", 1)
    seen: dict[str, int] = {}

    def act(c: Cluster) -> list[Intent]:
        p = c.transactional_producer("ledger-writer", transaction_version=2).init_transactions()
        p.begin_transaction()
        p.send(*a)
        p.send(*b)
        seen["producer_id"] = p.producer_id
        p.commit_transaction(deliver_markers_to=[a])  # b's marker: not written
        c.tick(100, 500)
        meta = c.coordinator.metadata["ledger-writer"]
        meta.stalled = False
        c.coordinator._complete(meta)  # as though b had acknowledged it
        c.tick(100, 500)
        q = c.transactional_producer("audit-writer", transaction_version=2).init_transactions()
        q.begin_transaction()
        q.send(*b)
        q.commit_transaction()
        return [Intent(HANGING, "COORDINATOR_COMPLETED", *b, transactional_id="ledger-writer", label="marker lost")]

    result = run_situation(
        out, seed, overwrite, name="marker_missing", description=marker_missing.__doc__ or "", act=act
    )
    t = next(
        t
        for t in result.transactions
        if (t.topic, t.partition, t.producer_id) == (*b, seen["producer_id"]) and t.marker_offset is None
    )
    _note(result, "MARKER_MISSING", t, None)
    return result


def epoch_regression(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A zombie's data batch at the epoch before the producer's last marker on the partition, copied into the log
    as a follower copies (past the leader's ``ProducerAppendInfo`` epoch check); the producer's next
    transaction there (transaction version 2: a new epoch per transaction) continues it to its marker."""

    tp = ("payments", 0)
    seen: dict[str, int] = {}

    def act(c: Cluster) -> list[Intent]:
        p = c.transactional_producer("ledger-writer", transaction_version=2).init_transactions()
        p.begin_transaction()
        p.send(*tp)
        p.commit_transaction()  # its marker carries the bumped epoch, which the producer now holds
        c.tick(100, 500)
        current = p.producer_epoch
        p.producer_epoch = current - 1  # a zombie: the epoch of the transaction just committed
        zombie = p._build(*tp, records=None, n_records=1, value_bytes=None, transactional=True)
        p.producer_epoch = current
        seen["first_offset"] = _copied_in(c, tp, zombie)
        seen["producer_id"] = p.producer_id
        c.tick(100, 500)
        p.begin_transaction()
        p.send(*tp)
        p.commit_transaction()
        return []

    result = run_situation(
        out, seed, overwrite, name="epoch_regression", description=epoch_regression.__doc__ or "", act=act
    )
    t = next(
        t
        for t in result.transactions
        if (t.topic, t.partition, t.producer_id, t.first_offset) == (*tp, seen["producer_id"], seen["first_offset"])
    )
    _note(result, "EPOCH_REGRESSION", t, None)
    return result


def sequence_gap(out: str | Path, seed: int = 0, *, overwrite: bool = False) -> ScenarioResult:
    """A transaction missing a batch in the middle: the producer's second batch never reached the log, and its
    third was copied in as a follower copies (``AppendOrigin.REPLICATION``: no sequence check), so its base
    sequence skips the lost batch's; the transaction then commits."""

    tp = ("payments", 0)
    seen: dict[str, int] = {}

    def act(c: Cluster) -> list[Intent]:
        p = c.transactional_producer("ledger-writer", transaction_version=2).init_transactions()
        p.begin_transaction()
        p.send(*tp)
        p._build(*tp, records=None, n_records=2, value_bytes=None, transactional=True)  # lost: its sequences used
        after = p._build(*tp, records=None, n_records=1, value_bytes=None, transactional=True)
        seen["gap"] = _copied_in(c, tp, after)
        seen["producer_id"] = p.producer_id
        c.tick(100, 500)
        p.commit_transaction()
        return []

    result = run_situation(out, seed, overwrite, name="sequence_gap", description=sequence_gap.__doc__ or "", act=act)
    t = next(
        t
        for t in result.transactions
        if (t.topic, t.partition, t.producer_id) == (*tp, seen["producer_id"])
        and t.first_offset < seen["gap"] <= t.last_offset
    )
    _note(result, "SEQUENCE_GAP", t, None)
    return result


def _healthy_small(out: str | Path, seed: int, overwrite: bool, name: str) -> ScenarioResult:

    return run_situation(
        out, seed, overwrite, name=name, description=f"{name}: a small healthy cluster, then the fault", act=_nothing
    )


def _nothing(c: Cluster) -> list[Intent]:
    return []


INTEGRITY_SCENARIOS: dict[str, _Situation] = {
    "index_entry_missing": index_entry_missing,
    "index_entry_spurious": index_entry_spurious,
    "txnindex_file_lost": txnindex_file_lost,
    "split_outcome": split_outcome,
    "marker_missing": marker_missing,
    "epoch_regression": epoch_regression,
    "sequence_gap": sequence_gap,
}
