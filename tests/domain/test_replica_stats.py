"""Per-replica bounds and the leader (txnlog.rules.partitions.replica_stats, by txnlog.broker.reconstruct.replica_logs)."""

from __future__ import annotations

import pyarrow as pa

from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.partitions import replica_stats


def _segment(broker: str | None, topic: str, partition: int | None, base: int, last: int | None) -> dict:
    return {
        "kind": "segment", "broker": broker, "topic": topic, "partition": partition, "file_offset": base,
        "last_offset": last, "batch_count": 1, "last_timestamp": 5, "input": "dump_log",
    }  # fmt: skip


def test_a_replica_the_input_does_not_name_is_a_replica_of_its_own() -> None:
    """kafka-dump-log.sh output may name no broker (or no partition): those segments form a replica of their
    own, as grouping them does, and never break the bounds of the named ones."""
    rows = [
        _segment("b1", "t", 0, 0, 9),
        _segment("b1", "t", 0, 10, 19),
        _segment(None, "t", 0, 0, 14),
        _segment("b2", "t", 0, 0, 19),
        _segment(None, "u", None, 0, 3),
    ]
    schema = SEGMENT_SUMMARY_SCHEMA.append(pa.field("input", pa.string()))
    summary = pa.Table.from_pylist(rows, schema=schema)
    stats = {(r["broker"], r["topic"], r["partition"]): r for r in replica_stats(summary, []).to_pylist()}
    assert {k: (r["log_start_offset"], r["log_end_offset"]) for k, r in stats.items()} == {
        ("b1", "t", 0): (0, 20),
        (None, "t", 0): (0, 15),
        ("b2", "t", 0): (0, 20),
        (None, "u", None): (0, 4),
    }
    # the most advanced replica leads; ties go to the first broker name
    assert [k for k, r in stats.items() if r["is_lead"]] == [("b1", "t", 0), (None, "u", None)]
