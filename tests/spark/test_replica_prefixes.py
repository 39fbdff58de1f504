"""Property: follower copies that are prefixes of the leader's log change nothing but the replica lists.

Replicas are copies of the leader in offset order (docs/design.md §4; ``ReplicaFetcherThread`` appends what
the leader wrote). For any set of copies where each is a prefix of the leader's log, the findings
and the partition's health must equal those of the leader's log alone — every column except
``replicas`` / ``open_replicas``. Once, a follower that lagged behind a marker made the
transaction open, lowered the LSO and could turn into a SAFE abort.

The examples are random transactional logs (several producers interleaving data batches, COMMIT /
ABORT markers, batches after a producer's own marker, plain batches); each example is its own
topic, and all examples of a hypothesis case go through one ``build_tables`` run per side, so a
few Spark runs check many logs.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.summary_rows import fragment_batch
from txnlog.broker import classify
from txnlog.broker.reconstruct import segment_fragments
from txnlog.engine.staging import merged_here
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA, batch_of
from txnlog.pipeline import Decoded, build_tables

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

HOUR = 3_600_000
BASE_TS = 1_700_000_000_000

BATCH_DTYPES = {
    "base_offset": np.int64,
    "last_offset": np.int64,
    "batch_length": np.int32,
    "is_transactional": bool,
    "is_control": bool,
    "producer_id": np.int64,
    "producer_epoch": np.int16,
    "base_timestamp": np.int64,
    "max_timestamp": np.int64,
    "has_delete_horizon": bool,
    "record_count": np.int32,
    "control_type": np.int16,
    "coordinator_epoch": np.int32,
    "marker_timestamp": np.int64,
    "control_status": np.int8,
}

# one event: (producer 0..3 or -1 for a plain batch, "data" / "commit" / "abort", records)
EVENT = st.tuples(
    st.integers(-1, 3),
    st.sampled_from(["data", "data", "data", "commit", "abort"]),
    st.integers(1, 4),
)


@st.composite
def leader_logs(draw: Any) -> dict[str, Any]:
    """A leader's log and the cut points of 1–3 follower copies (each a prefix: cut in batches)."""
    events = draw(st.lists(EVENT, min_size=1, max_size=30))
    cuts = draw(st.lists(st.integers(0, len(events)), min_size=1, max_size=3))
    return {"events": events, "cuts": cuts}


def _batches(events: list[tuple[int, str, int]]) -> dict[str, np.ndarray]:
    """Batch-header columns of the leader's log; old traffic (hours before as_of) then one recent batch."""
    cols: dict[str, list] = {k: [] for k in BATCH_DTYPES}
    offset = 0
    for i, (pid, kind, n) in enumerate(events):
        marker = kind in ("commit", "abort") and pid >= 0
        n = 1 if marker else n
        ts = BASE_TS + i * 60_000
        cols["base_offset"].append(offset)
        cols["last_offset"].append(offset + n - 1)
        cols["batch_length"].append(61 + 20 * n)
        cols["is_transactional"].append(pid >= 0)
        cols["is_control"].append(marker)
        cols["producer_id"].append(1000 + pid if pid >= 0 else -1)
        cols["producer_epoch"].append(0 if pid >= 0 else -1)
        cols["base_timestamp"].append(ts)
        cols["max_timestamp"].append(ts + n - 1)
        cols["has_delete_horizon"].append(False)
        cols["record_count"].append(n)
        cols["control_type"].append({"commit": 1, "abort": 0}[kind] if marker else -1)
        cols["coordinator_epoch"].append(3 if marker else -1)
        cols["marker_timestamp"].append(ts if marker else -1)
        cols["control_status"].append(1 if marker else 0)
        offset += n
    return {k: np.array(v, dtype=BATCH_DTYPES[k]) for k, v in cols.items()}


def _replica_rows(topic: str, broker: str, batches: dict[str, np.ndarray]) -> list[pa.RecordBatch]:
    """What the segment source yields for one copy held in one segment: fragments + the segment row."""
    n_batches = len(batches["base_offset"])
    if n_batches == 0:
        return []
    frags = segment_fragments(batches)
    common = {"broker": broker, "topic": topic, "file": f"/{broker}/{topic}-0/00000000000000000000.log"}
    out = [fragment_batch(common, frags, 0)] if len(frags["kind"]) else []
    out.append(
        batch_of(
            SEGMENT_SUMMARY_SCHEMA,
            1,
            {
                **common,
                "kind": "segment",
                "partition": np.zeros(1, np.int32),
                "file_offset": np.zeros(1, np.int64),
                "first_offset": np.array([batches["base_offset"].min()]),
                "last_offset": np.array([batches["last_offset"].max()]),
                "first_timestamp": np.array([batches["base_timestamp"].min()]),
                "last_timestamp": np.array([batches["max_timestamp"].max()]),
                "batch_count": np.array([n_batches], np.int64),
                "record_count": np.array([int(batches["record_count"].sum())], np.int64),
                "size_bytes": np.array([int(batches["batch_length"].sum())], np.int64),
                "legacy_entries": np.zeros(1, np.int64),
            },
        )
    )
    return out


def _summary(examples: list[dict[str, Any]], with_followers: bool) -> pa.Table:
    parts: list[pa.RecordBatch] = []
    for i, ex in enumerate(examples):
        topic = f"example-{i}"
        leader = _batches(ex["events"])
        parts += _replica_rows(topic, "broker-0", leader)
        if with_followers:
            for j, cut in enumerate(ex["cuts"], start=1):
                prefix = {k: v[:cut] for k, v in leader.items()}
                parts += _replica_rows(topic, f"broker-{j}", prefix)
    return pa.Table.from_batches(parts, schema=SEGMENT_SUMMARY_SCHEMA)


def _tables(spark: Any, summary: pa.Table, as_of_ms: int) -> dict[str, list[dict[str, Any]]]:
    records = TXN_STATE_SCHEMA.empty_table()
    thresholds = classify.Thresholds(as_of_ms=as_of_ms, max_transaction_timeout_ms=900_000)
    as_of = datetime.fromtimestamp(as_of_ms / 1000, tz=UTC)
    stage = tempfile.mkdtemp(prefix="txnlog-prop-")
    try:
        summary, records = merged_here(summary, records, [], stage)  # the replicas' fragments, as a decode hands them
        tables = build_tables(spark, Decoded(summary, records), thresholds, as_of=as_of, scratch=stage)
        return {name: tables[name].to_pylist() for name in ("findings", "abort_recommendations", "partition_health")}
    finally:
        shutil.rmtree(stage, ignore_errors=True)


IGNORED = {"replicas", "open_replicas", "source"}


def _comparable(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple, dict[str, Any]]:
    return {tuple(r[k] for k in key): {k: v for k, v in r.items() if k not in IGNORED} for r in rows}


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(examples=st.lists(leader_logs(), min_size=12, max_size=24))
def test_prefix_copies_change_nothing_but_the_replica_lists(spark, examples):
    as_of_ms = BASE_TS + 40 * 60_000 + 2 * HOUR  # every example's open transactions are idle past the timeout
    alone = _tables(spark, _summary(examples, with_followers=False), as_of_ms)
    copied = _tables(spark, _summary(examples, with_followers=True), as_of_ms)
    keys = {
        "findings": ("topic", "partition", "producer_id", "start_offset"),
        "abort_recommendations": ("topic", "partition", "producer_id", "start_offset"),
        "partition_health": ("topic", "partition"),
    }
    for name, key in keys.items():
        assert _comparable(copied[name], key) == _comparable(alone[name], key), name
    # the property is not vacuous: the examples hold findings, and some copies end inside a transaction
    assert any(r["verdict"] == "HANGING" for r in alone["findings"]) or not any(
        kind == "data" and pid >= 0 for ex in examples for pid, kind, _ in ex["events"]
    )
