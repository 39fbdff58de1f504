"""Whole partitions' transactions (txnlog.broker.reconstruct.replica_transactions / merge_replicas), no Spark.

The vectorized merge is checked against the step-by-step reference (``merge_fragments``, a loop
that applies ProducerAppendInfo's rules one fragment at a time) on random logs split into random
segments, and on hand-written replicas: a follower behind a marker, one that diverged, a snapshot.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.domain.test_reconstruct import batches
from tests.summary_rows import segment_summary
from txnlog.broker.reconstruct import (
    SNAPSHOT_ENTRY_COLUMNS,
    col,
    merge_fragments,
    merge_replicas,
    replica_logs,
    replica_transactions,
    segment_fragments,
)
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, batch_of
from txnlog.rules.transactions import transactions_of_summary

EVENT = st.tuples(st.integers(-1, 3), st.sampled_from(["data", "data", "commit", "abort"]), st.integers(1, 3))


def _log(events: list[tuple[int, str, int]]) -> list[dict[str, Any]]:
    rows, offset = [], 0
    for pid, kind, n in events:
        if pid < 0:
            rows.append({"offset": offset, "kind": "plain", "records": n})
        elif kind == "data":
            rows.append({"offset": offset, "pid": 100 + pid, "kind": "data", "records": n})
        else:
            rows.append({"offset": offset, "pid": 100 + pid, "kind": kind})
            n = 1
        offset += n
    return rows


def _summary(replicas: dict[str, list[list[dict[str, Any]]]], snapshots: list[pa.RecordBatch] = ()) -> pa.Table:
    """Summary rows (fragments + one segment row per segment) of replicas of partition t-0."""
    parts = list(snapshots)
    for broker, segments in replicas.items():
        for rows in segments:
            if not rows:
                continue
            b = batches(*rows)
            parts += segment_summary(broker, b, segment_fragments(b))
    return pa.Table.from_batches(parts, schema=SEGMENT_SUMMARY_SCHEMA)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(EVENT, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_segments_merge_like_the_reference_loop(events, cuts):
    rows = _log(events)
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    segments = [rows[a:b] for a, b in zip(bounds, bounds[1:])]
    got = transactions_of_summary(_summary({"b0": segments}), {}).to_pylist()
    whole = segment_fragments(batches(*rows))
    want = merge_fragments(whole)
    key = ("producer_id", "first_offset", "last_offset", "marker_offset", "control_type", "batch_count", "record_count")
    assert sorted(tuple(t[k] for k in key) for t in got) == sorted(tuple(t[k] for k in key) for t in want)
    for t in got:
        assert t["replicas"] == ["b0"] and t["open_on_lead"] == (t["marker_offset"] is None)


def test_a_follower_behind_the_marker_is_not_open_and_a_diverged_one_is():
    leader = [
        {"offset": 0, "pid": 7, "kind": "data"},
        {"offset": 1, "kind": "plain"},
        {"offset": 2, "pid": 7, "kind": "commit"},
        {"offset": 3, "kind": "plain"},
    ]
    behind = leader[:2]  # ends before the marker: it has not fetched it yet
    diverged = leader[:2] + [{"offset": 2, "kind": "plain"}, {"offset": 3, "kind": "plain"}]  # past it, without it
    (t,) = transactions_of_summary(_summary({"b1": [leader], "b2": [behind], "b3": [diverged]}), {}).to_pylist()
    assert t["replicas"] == ["b1", "b2", "b3"]
    assert t["open_replicas"] == ["b3"] and t["behind_replicas"] == ["b2"]
    assert t["diverged"] is True and t["open_on_lead"] is False and t["marker_offset"] == 2


def test_snapshot_gives_the_start_below_the_log_start_and_its_epoch():
    # the log starts at 10 (DeleteRecords/retention); the snapshot at 10 says producer 9's transaction began at 4
    rows = [{"offset": 10, "pid": 9, "kind": "data"}, {"offset": 11, "kind": "plain"}]
    snap = batch_of(
        SEGMENT_SUMMARY_SCHEMA,
        1,
        {
            "kind": "snapshot",
            "broker": "b0",
            "topic": "t",
            "partition": np.zeros(1, np.int32),
            "file": "/b0/t-0/00000000000000000010.snapshot",
            "file_offset": np.array([10]),
            "producer_id": np.array([9]),
            "producer_epoch": np.array([0], np.int32),
            "first_offset": np.array([4]),
            "last_offset": np.array([8]),
            "last_timestamp": np.array([500]),
            "coordinator_epoch": np.array([6], np.int32),
        },
    )
    (t,) = transactions_of_summary(_summary({"b0": [rows]}, [snap]), {}).to_pylist()
    assert (t["first_offset"], t["last_offset"], t["marker_offset"]) == (4, 10, None)
    assert t["started_before_log_start"] is True and t["snapshot_offset"] == 10
    assert t["snapshot_coordinator_epoch"] == 6 and t["first_timestamp"] is None
    # a cleanly shut-down copy's next load deletes the snapshot at its log start: nothing is known before 10
    (t,) = transactions_of_summary(_summary({"b0": [rows]}, [snap]), {("b0", "t", 0): (None, True)}).to_pylist()
    assert t["first_offset"] == 10 and t["started_before_log_start"] is False


def _masked(columns: dict[str, Any]) -> dict[str, list[Any]]:
    return {name: [v if ok else None for v, ok in zip(*c, strict=True)] for name, c in columns.items()}


@settings(max_examples=100, deadline=None)
@given(logs=st.lists(st.lists(EVENT, min_size=1, max_size=30), min_size=1, max_size=3))
def test_one_replica_per_partition_merges_as_the_general_path(logs):
    # one replica per partition: merge_replicas takes each row as it is; shuffled, it groups and reduces
    parts = []
    for replica, events in enumerate(logs):
        f = segment_fragments(batches(*_log(events)))
        parts.append({"replica": col(np.full(f["kind"].size, replica, np.int32)), **{k: col(v) for k, v in f.items()}})
    frags = {k: (np.concatenate([p[k][0] for p in parts]), np.concatenate([p[k][1] for p in parts])) for k in parts[0]}
    snaps = {"replica": col(np.empty(0, np.int32))}
    snaps |= {k: col(np.empty(0, np.int32 if "epoch" in k else np.int64)) for k in SNAPSHOT_ENTRY_COLUMNS}
    n = len(logs)
    last = np.array([len(_log(e)) + 100 for e in logs], np.int64)  # any log end past every offset
    logs_ = replica_logs(
        np.arange(n, dtype=np.int32),
        np.arange(n, dtype=np.int32),
        np.zeros(n, np.int64),
        col(last),
        col(np.zeros(n, np.int64), np.zeros(n, bool)),
        np.zeros(n, bool),
    )
    per_replica = replica_transactions(frags, snaps, logs_)
    reverse = np.arange(per_replica["replica"][0].size)[::-1]
    shuffled = {k: (v[reverse], ok[reverse]) for k, (v, ok) in per_replica.items()}
    (got, got_lists), (want, want_lists) = merge_replicas(per_replica, logs_), merge_replicas(shuffled, logs_)
    assert _masked(got) == _masked(want)
    for name, (offsets, members) in want_lists.items():
        assert got_lists[name][0].tolist() == offsets.tolist() and got_lists[name][1].tolist() == members.tolist()
