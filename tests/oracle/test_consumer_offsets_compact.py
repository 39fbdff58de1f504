"""The records a ``__consumer_offsets`` segment's scan drops before decoding (the compaction of
txnlog.kafka.consumer_offsets_compact) change nothing the job reads: on random partitions of several segments
(plain and transactional commits, tombstones, COMMIT/ABORT markers, compressed batches, groups of any bytes, a
record that does not decode), the partition's rows read with the compaction equal those read from every record,
and the quarantine is the same."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from txnlog.brokerlog.consumer_offsets import ODD_GROUPS, OffsetsPartitionWriter
from txnlog.brokerlog.consumer_offsets_encode import group_metadata_key, offset_commit_key, offset_commit_value
from txnlog.kafka.consumer_offsets import decode_records
from txnlog.kafka.consumer_offsets_scan import scan_consumer_offsets_file
from txnlog.kafka.wire import Compression
from txnlog.rules.consumer_offsets import replay_offsets

GROUPS = ("a", "b", "grüße-☃", *ODD_GROUPS[1:3])
PRODUCERS = ((7001, 0), (7002, 1), (7003, 0))


def _random_partition(w: OffsetsPartitionWriter, rng: random.Random, batches: int) -> None:
    open_: set[tuple[int, int]] = set()
    for _ in range(batches):
        roll = rng.random()
        if roll < 0.15 and open_:
            producer = rng.choice(sorted(open_))
            w.end_transaction(producer, commit=rng.random() < 0.6)
            open_.discard(producer)
            continue
        producer = rng.choice(PRODUCERS) if roll < 0.4 else None
        records: list[tuple[bytes, bytes | None]] = []
        for _ in range(rng.randint(1, 4)):
            key = offset_commit_key(rng.choice(GROUPS), rng.choice(("t", "u")), rng.randint(0, 2))
            if producer is None and rng.random() < 0.15:
                records.append((key, None))  # a tombstone
            elif rng.random() < 0.02:
                records.append((key, b"\x00\x09" + bytes(20)))  # a value version no coordinator writes
            else:
                value = offset_commit_value(rng.randint(0, 1000), version=rng.choice((1, 3, 4)), commit_timestamp=w.now)
                records.append((key, value))
        if rng.random() < 0.05:
            records.append((group_metadata_key(rng.choice(GROUPS)), None))
        codec = rng.choice((Compression.NONE, Compression.NONE, Compression.GZIP))
        w.append(records, producer=producer, compression=codec)
        if producer is not None:
            open_.add(producer)


def _replayed(segments: list[Path], compact: bool) -> tuple[pa.Table, list, int]:
    decoded, markers, damage, n = [], [], [], 0
    for seg in segments:
        records, marks, bad = scan_consumer_offsets_file(seg, compact=compact)
        n += records.num_rows
        rows, undecoded = decode_records(records, file=str(seg))
        decoded.append(rows)
        markers.append(marks)
        damage += [*bad, *undecoded]
    return replay_offsets(pa.concat_tables(decoded), pa.concat_tables(markers)), damage, n


@pytest.mark.parametrize("seed", range(40))
def test_compaction_changes_no_offset(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    w = OffsetsPartitionWriter(tmp_path / "broker-1")
    w.log.segment_bytes = rng.choice((600, 1500, 10**9))
    _random_partition(w, rng, rng.randint(5, 120))
    segments = sorted(w.close().glob("*.log"))
    every, every_damage, n_every = _replayed(segments, compact=False)
    compacted, damage, n_kept = _replayed(segments, compact=True)
    assert compacted.equals(every), (len(segments), compacted.to_pylist(), every.to_pylist())
    assert damage == every_damage
    assert n_kept <= n_every


def test_compaction_drops_records(tmp_path: Path) -> None:
    """The random partitions above are read with fewer records: the comparison is not of two full reads."""
    rng = random.Random(5)
    w = OffsetsPartitionWriter(tmp_path / "broker-1")
    w.log.segment_bytes = 1500
    _random_partition(w, rng, 200)
    segments = sorted(w.close().glob("*.log"))
    assert len(segments) > 3
    _, _, n_every = _replayed(segments, compact=False)
    _, _, n_kept = _replayed(segments, compact=True)
    assert n_kept < 0.95 * n_every, (n_kept, n_every)
