"""The job's read of ``__consumer_offsets`` (txnlog.engine.consumer_offsets.read_partitions: each segment walked
once, the commits kept decided in the walk from the keys asked for and those a producer's batch commits to, the
kept rows of all a task's segments built at once) against the record-by-record path (every record of every segment
decoded by txnlog.kafka.consumer_offsets.decode_records, then replayed), on random partitions of several segments:
plain and transactional commits, COMMIT/ABORT markers, tombstones, GroupMetadata records, records that do not
decode, plain and compressed batches."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from txnlog.brokerlog.consumer_offsets import OffsetsPartitionWriter
from txnlog.brokerlog.consumer_offsets_encode import (
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)
from txnlog.brokerlog.partition import PartitionLog
from txnlog.engine.consumer_offsets import SOURCE_SCHEMA, read_partitions
from txnlog.kafka.consumer_offsets import decode_records
from txnlog.kafka.consumer_offsets_commits import hashes_of
from txnlog.kafka.consumer_offsets_scan import scan_consumer_offsets_file
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, Compression
from txnlog.rules.consumer_offsets import replay_offsets
from txnlog.sources.logdirs import discover

_TPS = [("orders", 0), ("orders", 1), ("pay", 0), ("pay", 2)]
_GROUPS = ["g0", "g1", "grüße", "nul\x00"]
_PRODUCERS = [(7, 0), (8, 0), (9, 1)]
_COMPARED = ["group_bytes", "topic", "partition", "state", "producer_id", "committed_offset", "record_offset"]


def _bad(rng: random.Random, topic: str, partition: int) -> tuple[bytes, bytes | None]:
    """A record the compiled reader does not take (the general reader decodes or quarantines it): an unknown record
    type, an OffsetCommitValue of version 5 or cut short, a group that is not UTF-8 (Kafka reads it, replaced)."""
    value = offset_commit_value(rng.randint(0, 999))
    key = offset_commit_key("g0", topic, partition)
    return rng.choice(
        [
            (b"\x00\x63undecodable", b"\x00\x00"),
            (key, b"\x00\x05" + value[2:]),
            (key, value[:-3]),
            (struct.pack(">hh", 1, 2) + b"\xff\xfe" + key[2 + 2 + 2 :], value),
        ]
    )


def _plain_records(w: OffsetsPartitionWriter, rng: random.Random) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for _ in range(rng.randint(1, 4)):
        group, (topic, partition) = rng.choice(_GROUPS), rng.choice(_TPS)
        r = rng.random()
        if r < 0.1:
            out.append((offset_commit_key(group, topic, partition), None))
        elif r < 0.15:
            out.append(_bad(rng, topic, partition))
        elif r < 0.2:
            out.append((group_metadata_key(group), None))
        else:
            out.append((offset_commit_key(group, topic, partition), offset_commit_value(rng.randint(0, 999))))
    return out


def _random_partition(log_dir, n: int, rng: random.Random) -> set[tuple[str, int]]:
    """A random ``__consumer_offsets-<n>``; the topic partitions a producer's batch commits to."""
    w = OffsetsPartitionWriter(log_dir, n)
    w.log = PartitionLog(log_dir, CONSUMER_OFFSETS_TOPIC, n, segment_bytes=rng.choice([500, 1500, 2**20]))
    touched: set[tuple[str, int]] = set()
    for _ in range(rng.randint(5, 40)):
        codec = rng.choice([Compression.NONE, Compression.GZIP])
        if rng.random() < 0.3:
            producer = rng.choice(_PRODUCERS)
            tps = rng.sample(_TPS, rng.randint(1, 2))
            touched |= set(tps)
            commits = [(offset_commit_key(rng.choice(_GROUPS), t, p), offset_commit_value(rng.randint(0, 999)))
                       for t, p in tps]  # fmt: skip
            w.append(commits, producer=producer, compression=codec)
            if rng.random() < 0.5:
                w.end_transaction(producer, commit=rng.random() < 0.6)
        else:
            w.append(_plain_records(w, rng), compression=codec)
    w.close()
    return touched


def _reference(files) -> list[dict]:
    """The offsets of one partition, every record of every segment decoded record by record and replayed."""
    decoded, markers = [], []
    for f in sorted(files, key=lambda f: f.base_offset):
        records, marks, _ = scan_consumer_offsets_file(f.path)
        decoded.append(decode_records(records, file=f.path)[0])
        markers.append(marks)
    offsets = replay_offsets(pa.concat_tables(decoded), pa.concat_tables(markers))
    return offsets.select(_COMPARED).to_pylist()


@pytest.mark.parametrize("seed", range(12))
def test_the_jobs_read_equals_every_record_decoded(tmp_path, seed):
    rng = random.Random(seed)
    log_dir = tmp_path / "broker-1"
    touched = {n: _random_partition(log_dir, n, rng) for n in range(3)}
    files = discover([str(log_dir)]).consumer_offsets_segments
    parts = [[f for f in files if f.partition == n] for n in range(3)]

    def read(wanted):
        rows = pa.Table.from_batches(read_partitions(parts, True, None, wanted), schema=SOURCE_SCHEMA).to_pylist()
        offsets = [(r["coordinator_partition"], {k: r[k] for k in _COMPARED}) for r in rows if r["kind"] == "offset"]
        return offsets, [r for r in rows if r["kind"] != "offset"]

    whole, others = read(None)
    assert whole == [(n, r) for n in range(3) for r in _reference(parts[n])]
    for asked in ([], [rng.choice(_TPS)], rng.sample(_TPS, 2), [("nothing", 5)]):
        some, some_others = read(hashes_of(asked))
        kept = [(n, r) for n, r in whole if (r["topic"], r["partition"]) in set(asked) | touched[n]]
        # a group that is not UTF-8 is read by the general reader, its records all kept: rows beyond those asked
        assert [(n, r) for n, r in some if (r["topic"], r["partition"]) in set(asked) | touched[n]] == kept
        assert all(row in whole for row in some)
        assert some_others == others
