"""txnlog.broker.producer_state against a step-by-step model of the broker's producer state, written here from
Kafka's classes (ProducerAppendInfo.append / appendDataBatch / appendEndTxnMarker, ProducerStateEntry.addBatch /
update / maybeUpdateProducerEpoch, DefaultRecordBatch.lastSequence, ProducerStateManager.isProducerExpired):
one batch at a time, a dict per producer. The module under test reduces segment rows instead; whichever way
a partition's batches are cut into segments (decoded by different tasks), the result must be the model's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from txnlog.broker import producer_state as P
from txnlog.broker import reconstruct as R
from txnlog.kafka.control import ControlStatus

INT_MAX = 2**31 - 1


@pytest.mark.parametrize(
    ("base", "delta", "want"),
    [
        (-1, 0, -1),  # no sequence (RecordBatch.NO_SEQUENCE)
        (-1, 9, -1),
        (0, 0, 0),
        (0, 4, 4),
        (100, 9, 109),
        (INT_MAX, 0, INT_MAX),
        (INT_MAX, 1, 0),  # incrementSequence wraps past Integer.MAX_VALUE to 0
        (INT_MAX - 2, 5, 2),
    ],
    ids=["none", "none-delta", "zero", "four", "hundred", "max", "wrap-1", "wrap-3"],
)
def test_last_sequence_is_base_plus_last_offset_delta_wrapping(base: int, delta: int, want: int) -> None:
    assert P.last_sequences(np.array([base]), np.array([delta])).tolist() == [want]


@pytest.mark.parametrize(
    ("last_timestamp", "open_txn", "want"),
    [
        (0, False, True),  # exactly producer.id.expiration.ms old: expired (>=)
        (1, False, False),
        (0, True, False),  # an open transaction never expires
        (-1, False, True),  # no timestamp (-1): expired
    ],
    ids=["exactly", "younger", "open", "no-timestamp"],
)
def test_expiry_rule(last_timestamp: int, open_txn: bool, want: bool) -> None:
    now, expiration = P.DEFAULT_PRODUCER_ID_EXPIRATION_MS, P.DEFAULT_PRODUCER_ID_EXPIRATION_MS
    assert P.expired(np.array([last_timestamp]), np.array([open_txn]), now, expiration).tolist() == [want]


# --- the model ---------------------------------------------------------------------------------------


@dataclass
class Batch:
    offset: int  # base offset
    pid: int
    epoch: int
    kind: str  # data / marker / empty-control
    base_sequence: int = -1
    delta: int = 0  # last offset delta
    timestamp: int = 0  # data: maxTimestamp; marker: the control record's timestamp
    coordinator_epoch: int = -1
    transactional: bool = False  # a data batch's isTransactional


def model(
    batches: list[Batch], start: dict[int, dict[str, int]] | None = None, expiry_gap_ms: int | None = None
) -> dict[int, dict[str, int]]:
    """The broker's producer state after ``batches`` (offset order), from ``start`` (a loaded snapshot); with
    ``expiry_gap_ms``, the leader's periodic check (ProducerStateManager.removeExpiredProducers) removed a
    producer with nothing open idle that long before its next batch."""
    state = {pid: dict(s) for pid, s in (start or {}).items()}
    open_txn: set[int] = set()
    for b in batches:
        if b.pid < 0 or b.kind == "empty-control":  # no producer id / a cleaned control batch: nothing
            continue
        last = state.get(b.pid)
        if expiry_gap_ms is not None and last and b.pid not in open_txn and b.timestamp - last["ts"] >= expiry_gap_ms:
            del state[b.pid]  # ProducerStateEntry.empty for this batch
        if b.kind == "data" and b.transactional:
            open_txn.add(b.pid)
        elif b.kind == "marker":
            open_txn.discard(b.pid)
        e = state.setdefault(b.pid, {"epoch": -1, "seq": -1, "ts": -1, "ce": -1})
        if b.epoch != e["epoch"]:  # maybeUpdateProducerEpoch: a new epoch clears the batch metadata
            e["epoch"], e["seq"] = b.epoch, -1
        if b.kind == "data":
            if b.base_sequence == -1:
                e["seq"] = -1
            else:
                s = b.base_sequence + b.delta
                e["seq"] = s - 2**31 if s > INT_MAX else s
            e["ts"] = b.timestamp
        else:
            e["ce"], e["ts"] = b.coordinator_epoch, b.timestamp
    return state


def columns(batches: list[Batch]) -> dict[str, np.ndarray]:
    """The scan's batch columns (txnlog.kafka.record_batch.BATCH_COLUMNS) the module reads."""
    data = np.array([b.kind == "data" for b in batches], bool)
    marker = np.array([b.kind == "marker" for b in batches], bool)
    status = np.where(marker, ControlStatus.END_TXN_MARKER, np.where(data, 0, ControlStatus.ZERO_RECORDS))
    base = np.array([b.offset for b in batches], np.int64)
    delta = np.array([b.delta for b in batches], np.int32)
    ts = np.array([b.timestamp for b in batches], np.int64)
    return {
        "producer_id": np.array([b.pid for b in batches], np.int64),
        "producer_epoch": np.array([b.epoch for b in batches], np.int16),
        "is_control": ~data,
        "control_status": status.astype(np.int8),
        "base_offset": base,
        "last_offset": base + delta,
        "last_offset_delta": delta,
        "base_sequence": np.array([b.base_sequence for b in batches], np.int32),
        "max_timestamp": ts,
        "marker_timestamp": np.where(marker, ts, -1),
        "coordinator_epoch": np.array([b.coordinator_epoch if b.kind == "marker" else -1 for b in batches], np.int32),
        "is_transactional": np.array([b.transactional for b in batches], bool),
    }


def reduce(
    segments: list[list[Batch]],
    snapshot: tuple[int, dict[int, dict[str, int]]] | None = None,
    expiry_gap_ms: int | None = None,
):
    """One replica's segments (and snapshot at an offset) through segment_producers and leader_producers."""
    parts = [P.segment_producers(columns(s)) for s in segments if s]
    events = {name: R.col(np.concatenate([p[name][0] for p in parts]), np.concatenate([p[name][1] for p in parts]))
              for name in P.PRODUCER_COLUMNS}  # fmt: skip
    events["replica"] = R.col(np.zeros(events["producer_id"][0].size, np.int32))
    offset, entries = snapshot if snapshot else (0, {})
    pids = sorted(entries)
    # a snapshot of no producer: one row without a producer id (the file exists, it has no entries)
    nothing = snapshot is not None and not pids
    snaps = {
        "replica": R.col(np.zeros(len(pids) or int(nothing), np.int32)),
        "file_offset": R.col(np.full(len(pids) or int(nothing), offset, np.int64)),
        "producer_id": R.col(
            np.array(pids or [0] * nothing, np.int64), np.array([True] * len(pids) or [False] * nothing)
        ),
        "producer_epoch": R.col(np.array([entries[p]["epoch"] for p in pids] or [0] * nothing, np.int32)),
        "last_sequence": R.col(np.array([entries[p]["seq"] for p in pids] or [0] * nothing, np.int32)),
        "last_timestamp": R.col(np.array([entries[p]["ts"] for p in pids] or [0] * nothing, np.int64)),
        "coordinator_epoch": R.col(np.array([entries[p]["ce"] for p in pids] or [0] * nothing, np.int32)),
    }
    bases = [s[0].offset for s in segments if s]
    lasts = [s[-1].offset + s[-1].delta for s in segments if s]
    replicas = R.replica_logs(
        np.zeros(1, np.int32),
        np.zeros(len(bases), np.int64),
        np.array(bases, np.int64),
        R.col(np.array(lasts, np.int64)),
        R.col(np.zeros(1, np.int64), np.zeros(1, bool)),
        np.zeros(1, bool),
    )
    out = P.leader_producers(events, snaps, replicas, expiry_gap_ms=expiry_gap_ms)
    return {
        int(pid): {
            "epoch": int(out["producer_epoch"][0][i]),
            "seq": int(out["last_sequence"][0][i]),
            "ts": int(out["last_timestamp"][0][i]),
            "ce": int(out["coordinator_epoch"][0][i]),
        }
        for i, pid in enumerate(out["producer_id"][0])
    }


def random_log(rng: np.random.Generator, n: int) -> list[Batch]:
    """Batches of a few producers: idempotent, transactional with markers (same epoch or bumped, TV2),
    epoch bumps on data, cleaned control batches, sequences near the wrap, no-sequence batches."""
    out: list[Batch] = []
    offset = int(rng.integers(0, 1000))
    epochs = {pid: int(rng.integers(0, 3)) for pid in (1, 2, 3)}
    seqs = {pid: int(rng.choice([0, INT_MAX - 6])) for pid in (1, 2, 3)}
    for i in range(n):
        pid = int(rng.integers(1, 4))
        roll = rng.random()
        ts = 1_700_000_000_000 + i * 1000
        if roll < 0.6:
            if rng.random() < 0.1:
                epochs[pid] += 1
            delta = int(rng.integers(0, 5))
            base_seq = -1 if rng.random() < 0.1 else seqs[pid]
            seqs[pid] = (seqs[pid] + delta + 1) % 2**31
            out.append(Batch(offset, pid, epochs[pid], "data", base_seq, delta, ts))
            offset += delta + 1
        elif roll < 0.9:
            bump = rng.random() < 0.4  # transactions v2: the marker carries epoch + 1
            epochs[pid] += int(bump)
            out.append(
                Batch(offset, pid, epochs[pid], "marker", timestamp=ts, coordinator_epoch=int(rng.integers(0, 9)))
            )
            offset += 1
        else:
            out.append(Batch(offset, pid, epochs[pid], "empty-control", timestamp=ts))
            offset += 1
    return out


def cuts(rng: np.random.Generator, log: list[Batch], k: int) -> list[list[Batch]]:
    points = sorted(int(x) for x in rng.choice(np.arange(1, len(log)), size=min(k, len(log) - 1), replace=False))
    return [log[a:b] for a, b in zip([0, *points], [*points, len(log)], strict=True)]


@pytest.mark.parametrize("seed", range(40))
def test_any_cut_into_segments_gives_the_models_state(seed: int) -> None:
    rng = np.random.default_rng(seed)
    log = random_log(rng, int(rng.integers(2, 60)))
    want = model(log)
    assert reduce([log]) == want
    for k in (1, 3, 10):
        segments = cuts(rng, log, k)
        assert reduce(segments) == want
        assert reduce(list(reversed(segments))) == want  # the order rows arrive in does not matter


@pytest.mark.parametrize("seed", range(40))
def test_snapshot_then_the_batches_at_and_after_its_offset(seed: int) -> None:
    """The broker loads the snapshot and replays what follows it: earlier batches no longer count (a
    producer the snapshot lacks, e.g. expired when it was taken, is back only with a later batch)."""
    rng = np.random.default_rng(1000 + seed)
    log = random_log(rng, int(rng.integers(4, 60)))
    at = int(rng.integers(1, len(log)))
    before, after = log[:at], log[at:]
    entries = model(before)
    offset = after[0].offset
    # segments cut anywhere, one across the snapshot's offset (a snapshot at the log end on restart, then
    # more batches in the same segment)
    assert reduce(cuts(rng, log, 4), (offset, entries)) == model(after, entries)
    if entries:
        entries.pop(sorted(entries)[0])  # gone from the snapshot (expired when it was taken)
    want = model(after, entries)
    # snapshots are taken at a roll: the segments start at its offset
    segments = (cuts(rng, before, 2) if len(before) > 2 else [before]) + (
        cuts(rng, after, 2) if len(after) > 2 else [after]
    )
    assert reduce(segments, (offset, entries)) == want
    # retention deleted every segment before the snapshot: the same state
    assert reduce(cuts(rng, after, 2) if len(after) > 2 else [after], (offset, entries)) == want


def test_an_idempotent_producer_keeps_its_sequence_and_a_tv2_marker_clears_it() -> None:
    log = [
        Batch(0, 7, 0, "data", 0, 4, 1000),  # idempotent: sequences 0..4
        Batch(5, 7, 0, "data", 5, 2, 2000),  # 5..7
        Batch(8, 9, 3, "data", 10, 0, 3000),  # transactional, epoch 3
        Batch(9, 9, 3, "marker", timestamp=4000, coordinator_epoch=2),  # TV0/1: same epoch, sequence kept
        Batch(10, 9, 3, "data", 11, 1, 5000),
        Batch(12, 9, 4, "marker", timestamp=6000, coordinator_epoch=2),  # TV2: epoch + 1 clears it
        Batch(13, 7, 0, "empty-control", timestamp=9000),  # cleaned: ignored
    ]
    assert reduce([log[:3], log[3:]]) == {
        7: {"epoch": 0, "seq": 7, "ts": 2000, "ce": -1},
        9: {"epoch": 4, "seq": -1, "ts": 6000, "ce": 2},
    }


def test_a_snapshot_of_no_producer_still_cuts_off_the_batches_before_it() -> None:
    """The leader had expired the producer (``ProducerStateManager.removeExpiredProducers``) when it took a
    snapshot at a roll, whose file then holds no entry, and the producer wrote again after it: its entry
    starts empty, the older marker's coordinator epoch gone. The snapshot's file is a row without a producer
    id. (A segment holding batches on both sides of a snapshot still lends its earlier fields to a producer
    the snapshot lacks: see :func:`txnlog.broker.producer_state.leader_producers`.)"""
    before = [Batch(0, 7, 2, "data", 0, 1, 1000), Batch(2, 7, 2, "marker", timestamp=2000, coordinator_epoch=3)]
    after = [Batch(3, 7, 2, "data", 2, 2, 90_000_000)]
    want = model(after)
    assert want[7]["ce"] == -1
    assert reduce([before, after], (3, {})) == want
    assert reduce([after], (3, {})) == want  # retention deleted the segment before it


@pytest.mark.parametrize("seed", range(40))
def test_a_producer_idle_past_the_expiry_gap_restarts_from_an_empty_entry(seed: int) -> None:
    """A running leader's periodic check removed a producer idle for ``expiry_gap_ms`` with nothing open
    between two of its batches (the model's reset): whichever way the log is cut into segments, the
    reduction gives the model's state (its coordinator epoch −1 unless a marker follows the last such gap,
    its sequence −1 unless a data batch does)."""
    rng = np.random.default_rng(2000 + seed)
    gap = 86_400_000 + 600_000
    log = random_log(rng, int(rng.integers(2, 60)))
    jumps = np.cumsum(rng.choice([0, 0, 0, 0, gap - 1, gap, 2 * gap], size=len(log)))
    log = [
        Batch(
            b.offset, b.pid, b.epoch, b.kind, b.base_sequence, b.delta, b.timestamp + int(j), b.coordinator_epoch,
            transactional=b.kind == "data" and b.pid != 1,  # producer 1 is idempotent
        )
        for b, j in zip(log, jumps, strict=True)
    ]  # fmt: skip
    want = model(log, expiry_gap_ms=gap)
    assert reduce([log], expiry_gap_ms=gap) == want
    for k in (1, 3, 10):
        segments = cuts(rng, log, k)
        assert reduce(segments, expiry_gap_ms=gap) == want
        assert reduce(list(reversed(segments)), expiry_gap_ms=gap) == want


@pytest.mark.parametrize("seed", range(20))
def test_segments_decoded_together_give_each_segments_own_rows(seed: int) -> None:
    """files_producers and files_fragments over several segments' columns, one after another: each segment's
    rows as its own segment_producers / segment_fragments call gives them, segment after segment."""
    rng = np.random.default_rng(seed)
    log = random_log(rng, int(rng.integers(2, 80)))
    segments = [*cuts(rng, log, int(rng.integers(1, 8))), []]  # and a segment of no batches
    rng.shuffle(segments)

    def full(batches: list[Batch]) -> dict[str, np.ndarray]:
        c = columns(batches)
        n = len(batches)
        return {
            **c,
            "base_timestamp": c["max_timestamp"] - 5,
            "has_delete_horizon": np.zeros(n, bool),
            "record_count": (c["last_offset_delta"] + 1).astype(np.int32),
            "batch_length": np.full(n, 70, np.int32),
            "control_type": np.where(c["control_status"] == ControlStatus.END_TXN_MARKER, 1, -1).astype(np.int16),
        }

    each = [full(s) for s in segments]
    together = {name: np.concatenate([e[name] for e in each]) for name in each[0]}
    owner = np.repeat(np.arange(len(each)), [len(s) for s in segments])

    rows, of = P.files_producers(together, owner)
    frags, frag_of = R.files_fragments(together, owner)
    for k, e in enumerate(each):
        own = P.segment_producers(e)
        for name, (values, valid) in own.items():
            np.testing.assert_array_equal(rows[name][0][of == k][valid], values[valid], err_msg=name)
            np.testing.assert_array_equal(rows[name][1][of == k], valid, err_msg=name)
        for name, values in R.segment_fragments(e).items():
            np.testing.assert_array_equal(frags[name][frag_of == k], values, err_msg=name)
    assert np.all(np.diff(of) >= 0) and np.all(np.diff(frag_of) >= 0)
