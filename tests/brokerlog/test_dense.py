"""The transaction-dense benchmark writer, checked with kafka-python (not with our encoder)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.brokerlog.kafka_python import (
    Replay,
    parse_producer_snapshot,
    read_log,
    read_txn_state,
)
from txnlog.brokerlog import encode
from txnlog.brokerlog.dense import DenseResult, DenseTopic, dense
from txnlog.kafka.wire import Compression, ControlType

KiB = 1024
SMALL_MIX = (
    DenseTopic("out", 3, 64 * KiB, 2 * KiB, Compression.LZ4, 3, 1),
    DenseTopic("changelog", 8, 16 * KiB, 512, Compression.NONE, 1, 1),
    DenseTopic("repartition", 8, 8 * KiB, 256, Compression.NONE, 1, 4),
)


@pytest.fixture(scope="module", params=["mix", "hot"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DenseResult:
    hot = (
        {"hot_fraction": 0.5, "hot_segment_bytes": 128 * KiB, "hot_batch_bytes": 512} if request.param == "hot" else {}
    )
    return dense(
        tmp_path_factory.mktemp("dense"),
        seed=3,
        total_bytes=1 << 20,
        producers=4,
        topics=SMALL_MIX,
        abort_rate=0.05,
        **hot,
    )


def test_hot_partition(tmp_path: Path) -> None:
    """``hot_fraction``: one partition written by every producer every round holds about that share of the
    data bytes, in segments of ``hot_segment_bytes`` with offset indexes, as transaction-dense as the rest."""
    r = dense(tmp_path, seed=1, total_bytes=1 << 20, producers=4, topics=SMALL_MIX, hot_fraction=0.6,
              hot_segment_bytes=128 * KiB, hot_batch_bytes=512)  # fmt: skip
    sizes: Counter[str] = Counter()
    for f in tmp_path.glob("broker-1/*-[0-9]*/*.log"):
        if not f.parent.name.startswith("__"):
            sizes[f.parent.name] += f.stat().st_size
    assert 0.57 <= sizes["dense-hot-0"] / sum(sizes.values()) <= 0.7  # whole rounds: about the share asked
    hot = sorted((tmp_path / "broker-1" / "dense-hot-0").glob("*.log"))
    assert len(hot) >= 4 and all(f.stat().st_size <= 128 * KiB for f in hot)
    assert all(f.with_suffix(".index").stat().st_size >= 8 for f in hot)
    assert r.partitions["dense-hot-0"]["writers"] == 4
    hot_txns = r.partitions["dense-hot-0"]["COMMIT"] + r.partitions["dense-hot-0"]["ABORT"]
    assert hot_txns / r.transactions > 0.3


def test_every_transaction_ends_as_the_truth_says(written: DenseResult) -> None:
    a = written.arrays
    want = {
        (
            written.topics[t],
            p,
            pid,
            first,
            last,
            marker,
            "COMMIT" if o else "ABORT",
        )
        for t, p, pid, first, last, marker, o in zip(
            a["topic"].tolist(),
            a["partition"].tolist(),
            a["producer_id"].tolist(),
            a["first_offset"].tolist(),
            a["last_offset"].tolist(),
            a["marker_offset"].tolist(),
            a["outcome"].tolist(),
            strict=True,
        )
    }
    got = set()
    markers: Counter[str] = Counter()
    for pdir in sorted(written.root.glob("broker-1/*-[0-9]*")):
        topic, part = pdir.name.rsplit("-", 1)
        if topic.startswith("__"):
            continue
        replay = Replay()
        for seg in sorted(pdir.glob("*.log")):
            for _, batch in read_log(seg):
                replay.feed(batch)
        assert not replay.open, f"{pdir.name}: open transactions {replay.open}"
        markers.update(replay.markers)
        for t in replay.closed:
            got.add(
                (
                    topic,
                    int(part),
                    t["producer_id"],
                    t["first_offset"],
                    t["last_offset"],
                    t["marker_offset"],
                    t["outcome"],
                )
            )
    assert got == want
    assert written.transactions == len(want) > 500
    assert written.outcomes["ABORT"] > 5
    assert dict(markers) == {k: v for k, v in written.outcomes.items() if v}
    assert written.findings == [] and written.open_transactions == 0


def test_markers_are_the_brokers_bytes(written: DenseResult) -> None:
    """The vectorized markers equal ``encode_end_txn_marker_batch`` byte for byte."""
    seg = min((written.root / "broker-1" / "changelog-2").glob("*.log"))
    data = seg.read_bytes()
    checked = 0
    for pos, batch in read_log(seg):
        if not batch.is_control_batch:
            continue
        rec = next(iter(batch))
        ref = encode.encode_end_txn_marker_batch(
            offset=batch.base_offset,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            control_type=ControlType(rec.type),
            coordinator_epoch=int.from_bytes(rec.value[2:6], "big"),
            timestamp=batch.first_timestamp,
            partition_leader_epoch=batch.leader_epoch,
        )
        assert data[pos : pos + len(ref)] == ref
        checked += 1
    assert checked > 10


def test_coordinator_records_and_snapshots(written: DenseResult) -> None:
    records = read_txn_state([written.root / "broker-1"])
    states = Counter(v["state"] for _, _, _, v in records if v is not None)
    rounds, producers = written.rounds, written.producers
    assert written.coordinator_records == 3 * rounds * producers
    # one Empty per producer at init; per round and producer: Ongoing, Prepare*, Complete*
    assert sum(states.values()) == producers + 3 * rounds * producers
    # the final snapshot of a partition: no transaction open, last marker's epoch
    snap = max((written.root / "broker-1" / "out-0").glob("*.snapshot"))
    entries = parse_producer_snapshot(snap.read_bytes())
    assert len(entries) == 3
    assert all(e["current_txn_first_offset"] == -1 for e in entries)


def test_dense_enough() -> None:
    """The default mix: >= 300,000 transactions per GiB of data segments over 685 partitions."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        r = dense(d, total_bytes=16 << 20)
        seg_bytes = sum(
            f.stat().st_size for f in Path(d).glob("broker-1/*/*.log") if not f.parent.name.startswith("__")
        )
        assert len(r.partitions) == 685
        assert r.transactions / (seg_bytes / (1 << 30)) >= 300_000
