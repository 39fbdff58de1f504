"""Several ``__consumer_offsets`` partitions read and replayed together (txnlog.engine.consumer_offsets.read_partitions)
give the rows each gives read on its own: a marker ends only the pending offsets of the partition it is written in
(``OffsetMetadataManager.replayEndTransactionMarker`` runs per coordinator partition), and a key or a producer id
that two partitions share stays two."""

from __future__ import annotations

import pyarrow as pa

from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter, write_every_kind
from txnlog.brokerlog.consumer_offsets_encode import offset_commit_key, offset_commit_value
from txnlog.engine.consumer_offsets import SOURCE_SCHEMA, read_partition, read_partitions
from txnlog.kafka.consumer_offsets_commits import hashes_of
from txnlog.sources.logdirs import discover


def _second_partition(log_dir) -> None:
    """``__consumer_offsets-1``: the same keys and producer ids as write_every_kind's partition, other outcomes.
    Producer 4000 (committed in partition 0) left open here at a low offset; producer 4002 (open in partition 0)
    committed here, after partition 0's log end."""
    w = OffsetsPartitionWriter(log_dir, 1)
    w.append(
        [(offset_commit_key("txn", "orders", 0), offset_commit_value(70, commit_timestamp=w.now))], producer=(4000, 0)
    )
    for n in range(120):  # past partition 0's offsets
        w.append([(offset_commit_key("pad", "orders", n % 3), offset_commit_value(n, commit_timestamp=w.now))])
    w.append(
        [(offset_commit_key("txn", "orders", 2), offset_commit_value(72, commit_timestamp=w.now))], producer=(4002, 0)
    )
    w.end_transaction((4002, 0), commit=True)
    w.close()


def _rows(batches: list[pa.RecordBatch]) -> list[dict]:
    return pa.Table.from_batches(batches, schema=SOURCE_SCHEMA).to_pylist()


def _by_kind(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["kind"], []).append(r)
    return out


def test_partitions_replayed_together_are_each_replayed_alone(tmp_path):
    write_every_kind(tmp_path / "broker-1", 0)
    _second_partition(tmp_path / "broker-1")
    files = discover([str(tmp_path / "broker-1")]).consumer_offsets_segments
    parts = [[f for f in files if f.partition == n] for n in (0, 1)]
    for wanted in (None, hashes_of([("orders", 0)])):
        alone = [r for p in parts for r in _rows(read_partition(p, True, None, wanted))]
        together = _rows(read_partitions(parts, True, None, wanted))
        assert _by_kind(together) == _by_kind(alone)
    pending = {
        (r["coordinator_partition"], r["partition"], r["producer_id"], r["committed_offset"])
        for r in _rows(read_partitions(parts, True, None))
        if r["kind"] == "offset" and r["group"] == "txn" and r["state"] == "pending"
    }
    # partition 0: 4002's commit of orders-2 still open (its COMMIT is partition 1's); partition 1: 4000's commit of
    # orders-0 still open (its COMMIT is partition 0's)
    assert pending == {(0, 2, 4002, 62), (1, 0, 4000, 70)}
    committed = {
        (r["coordinator_partition"], r["partition"]): r["committed_offset"]
        for r in _rows(read_partitions(parts, True, None))
        if r["kind"] == "offset" and r["group"] == "txn" and r["state"] == "committed"
    }
    assert committed == {(0, 0): 60, (0, 1): 50, (0, 2): 50, (1, 2): 72}
