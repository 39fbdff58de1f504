"""PartitionLog: file layout, indexes, .txnindex, snapshots and retention, read back with kafka-python."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from tests.brokerlog.kafka_python import Replay, parse_producer_snapshot, read_log
from txnlog.brokerlog import encode
from txnlog.brokerlog.cluster import SimClock
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import InvalidProducerEpoch, PartitionLog
from txnlog.kafka.wire import Compression, ControlType, TimestampType

BASE_TS = 1_717_401_600_000
NAME = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")


def _batch(
    n: int,
    ts: int,
    *,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    size: int = 100,
    codec: Compression = Compression.NONE,
) -> bytes:
    records = [RecordSpec(i, i, b"k%d" % i, b"x" * size) for i in range(n)]
    return encode.encode_record_batch(
        base_offset=0,
        records=records,
        base_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        compression=codec,
    )


def _segments(d: Path) -> list[int]:
    return sorted(int(p.stem) for p in d.glob("*.log"))


def _all_batches(d: Path) -> list[tuple[int, int, object]]:
    out = []
    for base in _segments(d):
        for pos, b in read_log(d / f"{base:020d}.log"):
            out.append((base, pos, b))
    return out


def _txn_workload(log: PartitionLog, clock: SimClock) -> dict:
    """Three producers, interleaved transactions, commits and aborts, on one partition."""
    expected_aborts = []
    open_first: dict[int, int] = {}
    for round_ in range(60):
        for pid in (100, 200, 300):
            clock.now_ms += 7
            info = log.append(_batch(3, clock.now_ms, pid=pid, epoch=1, seq=round_ * 3, txn=True, size=150))
            open_first.setdefault(pid, info.base_offset)
        if round_ % 4 == 3:
            for pid, ctype in ((100, ControlType.COMMIT), (200, ControlType.ABORT)):
                clock.now_ms += 3
                marker = log.append_end_txn_marker(
                    producer_id=pid, producer_epoch=1, control_type=ctype, coordinator_epoch=4, timestamp=clock.now_ms
                )
                first = open_first.pop(pid)
                if ctype == ControlType.ABORT:
                    others = [f for p, f in open_first.items()]
                    expected_aborts.append(
                        (pid, first, marker.base_offset, min(others) if others else marker.base_offset + 1)
                    )
    return {"aborts": expected_aborts, "open": open_first}


@pytest.fixture()
def written(tmp_path: Path):
    clock = SimClock(BASE_TS)
    log = PartitionLog(
        tmp_path,
        "orders",
        3,
        segment_bytes=16 * 1024,
        index_interval_bytes=1024,
        clock=clock,
        leader_epoch=6,
        topic_id=bytes(range(16)),
    )
    expected = _txn_workload(log, clock)
    log.close()
    return log, expected


def test_segment_files_and_names(written) -> None:
    log, _ = written
    d = log.dir
    assert d.name == "orders-3"
    bases = _segments(d)
    assert len(bases) > 3 and bases[0] == 0
    for p in d.iterdir():
        assert NAME.match(p.name) or p.name in ("leader-epoch-checkpoint", "partition.metadata"), p.name
    for base in bases:
        entries = read_log(d / f"{base:020d}.log")
        assert entries[0][1].base_offset == base
        assert (d / f"{base:020d}.log").stat().st_size <= 16 * 1024
    # Offsets are contiguous across segments and every batch carries the leader epoch.
    batches = _all_batches(d)
    offsets = [b.base_offset for _, _, b in batches]
    assert offsets == sorted(offsets)
    assert all(b.leader_epoch == 6 for _, _, b in batches)
    assert batches[-1][2].last_offset + 1 == log.log_end_offset
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n6 0\n"
    assert (d / "partition.metadata").read_text().startswith("version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw")


def test_offset_and_time_index_point_at_real_batches(written) -> None:
    log, _ = written
    d = log.dir
    for base in _segments(d):
        by_pos = dict(read_log(d / f"{base:020d}.log"))
        index = (d / f"{base:020d}.index").read_bytes()
        entries = [struct.unpack_from(">ii", index, i) for i in range(0, len(index), 8)]
        assert entries, "a 16 KiB segment with a 1 KiB interval has index entries"
        for rel, pos in entries:
            assert pos in by_pos and by_pos[pos].last_offset == base + rel
        assert [e[1] for e in entries] == sorted(e[1] for e in entries)
        tindex = (d / f"{base:020d}.timeindex").read_bytes()
        tentries = [struct.unpack_from(">qi", tindex, i) for i in range(0, len(tindex), 12)]
        assert tentries
        stamps = [t for t, _ in tentries]
        assert stamps == sorted(set(stamps))
        last_offsets = {b.last_offset: b for b in by_pos.values()}
        for ts, rel in tentries:
            assert last_offsets[base + rel].max_timestamp == ts
        # The closing entry: the segment's largest timestamp.
        assert tentries[-1][0] == max(b.max_timestamp for b in by_pos.values())


def test_txnindex_matches_aborts_and_replay(written) -> None:
    log, expected = written
    d = log.dir
    got = []
    for p in sorted(d.glob("*.txnindex")):
        data = p.read_bytes()
        assert len(data) % 34 == 0
        for i in range(0, len(data), 34):
            version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i)
            assert version == 0
            got.append((pid, first, last, lso))
            # The entry sits in the segment holding the ABORT marker.
            assert (
                int(p.stem)
                <= last
                < (
                    log.log_end_offset
                    if p.stem == f"{_segments(d)[-1]:020d}"
                    else _segments(d)[_segments(d).index(int(p.stem)) + 1]
                )
            )
    assert got == expected["aborts"]
    replay = Replay()
    for _, _, b in _all_batches(d):
        replay.feed(b)
    assert {pid: t["first_offset"] for pid, t in replay.open.items()} == expected["open"]
    assert [
        (t["producer_id"], t["first_offset"], t["marker_offset"]) for t in replay.closed if t["outcome"] == "ABORT"
    ] == [(pid, first, last) for pid, first, last, _ in expected["aborts"]]


def test_snapshots_at_rolls_and_close(written) -> None:
    log, expected = written
    d = log.dir
    snaps = sorted(int(p.stem) for p in d.glob("*.snapshot"))
    bases = _segments(d)
    assert snaps == bases[1:] + ([log.log_end_offset] if log.log_end_offset != bases[-1] else [])
    # The snapshot at each segment base equals a replay of everything before it.
    batches = _all_batches(d)
    for snap in snaps:
        replay = Replay()
        for _, _, b in batches:
            if b.base_offset < snap:
                replay.feed(b)
        entries = {e["producer_id"]: e for e in parse_producer_snapshot((d / f"{snap:020d}.snapshot").read_bytes())}
        assert sorted(entries) == [100, 200, 300]
        for pid, e in entries.items():
            txn = replay.open.get(pid)
            assert e["current_txn_first_offset"] == (txn["first_offset"] if txn else -1)
            last = max(
                b.last_offset
                for _, _, b in batches
                if b.base_offset < snap and b.producer_id == pid and not b.is_control_batch
            )
            assert e["last_offset"] == last
            assert e["epoch"] == 1
    final = {
        e["producer_id"]: e for e in parse_producer_snapshot((d / f"{log.log_end_offset:020d}.snapshot").read_bytes())
    }
    assert {p for p, e in final.items() if e["current_txn_first_offset"] >= 0} == set(expected["open"])
    assert final[100]["coordinator_epoch"] == 4 and final[300]["coordinator_epoch"] == -1


def test_retention_deletes_segments_and_their_snapshots(tmp_path: Path) -> None:
    clock = SimClock(BASE_TS)
    log = PartitionLog(tmp_path, "metrics", 0, segment_bytes=4096, clock=clock)
    log.append(_batch(2, clock.now_ms, pid=7, epoch=0, seq=0, txn=True))  # opens, never closed
    for i in range(80):
        clock.now_ms += 10
        log.append(_batch(2, clock.now_ms, pid=8, epoch=0, seq=2 * i))
    bases = [s.base_offset for s in log.segments]
    deleted = log.delete_segments_before(bases[3])
    log.close()
    assert deleted == bases[:3]
    assert log.log_start_offset == bases[3] == _segments(log.dir)[0]
    snaps = sorted(int(p.stem) for p in log.dir.glob("*.snapshot"))
    assert snaps[0] == bases[3]
    at_start = {
        e["producer_id"]: e for e in parse_producer_snapshot((log.dir / f"{bases[3]:020d}.snapshot").read_bytes())
    }
    assert at_start[7]["current_txn_first_offset"] == 0  # known only from the snapshot now
    assert not list(log.dir.glob(f"{0:020d}.*"))


def test_bulk_path_is_byte_identical_to_one_batch_at_a_time(tmp_path: Path) -> None:
    payload = encode.encode_records_payload([RecordSpec(i, i, b"k", b"v" * 90) for i in range(3)], Compression.LZ4)
    n = 700
    ts = BASE_TS + np.arange(n, dtype=np.int64) * 3 // 2
    a = PartitionLog(tmp_path / "a", "t", 0, segment_bytes=16 * 1024, index_interval_bytes=2000, leader_epoch=2)
    b = PartitionLog(tmp_path / "b", "t", 0, segment_bytes=16 * 1024, index_interval_bytes=2000, leader_epoch=2)
    a.append(_batch(1, BASE_TS - 5))
    b.append(_batch(1, BASE_TS - 5))
    a.append_data_batches(
        payload,
        count=300,
        base_timestamps=ts[:300],
        producer_id=9,
        producer_epoch=1,
        first_sequence=0,
        is_transactional=True,
    )
    a.append_data_batches(
        payload,
        count=400,
        base_timestamps=ts[300:],
        producer_id=9,
        producer_epoch=1,
        first_sequence=900,
        is_transactional=True,
    )
    for i in range(n):
        b.append(
            encode.encode_data_batch(
                base_offset=0,
                payload=payload,
                base_timestamp=int(ts[i]),
                producer_id=9,
                producer_epoch=1,
                base_sequence=3 * i,
                is_transactional=True,
            )
        )
    for log in (a, b):
        log.append_end_txn_marker(
            producer_id=9,
            producer_epoch=1,
            control_type=ControlType.ABORT,
            coordinator_epoch=0,
            timestamp=BASE_TS + 2000,
        )
        log.close()
    files_a = sorted(p.name for p in a.dir.iterdir())
    assert files_a == sorted(p.name for p in b.dir.iterdir())
    assert len([f for f in files_a if f.endswith(".log")]) > 2
    for name in files_a:
        assert (a.dir / name).read_bytes() == (b.dir / name).read_bytes(), name


def test_log_append_time_and_follower_copy(tmp_path: Path) -> None:
    clock = SimClock(BASE_TS + 10_000)
    leader = PartitionLog(
        tmp_path / "l", "audit", 0, timestamp_type=TimestampType.LOG_APPEND_TIME, clock=clock, leader_epoch=3
    )
    follower = PartitionLog(
        tmp_path / "f", "audit", 0, timestamp_type=TimestampType.LOG_APPEND_TIME, clock=clock, leader_epoch=3
    )
    info = leader.append(_batch(3, BASE_TS, codec=Compression.GZIP))
    follower.append(info.data, base_offset=info.base_offset)
    leader.close()
    follower.close()
    ((_, batch),) = read_log(leader.dir / f"{0:020d}.log")
    assert batch.validate_crc() and batch.timestamp_type == 1 and batch.max_timestamp == BASE_TS + 10_000
    assert batch.first_timestamp == BASE_TS
    assert (leader.dir / f"{0:020d}.log").read_bytes() == (follower.dir / f"{0:020d}.log").read_bytes()


def test_zombie_epoch_is_refused(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(_batch(1, BASE_TS, pid=5, epoch=3, seq=0, txn=True))
    log.append_end_txn_marker(
        producer_id=5, producer_epoch=4, control_type=ControlType.ABORT, coordinator_epoch=0, timestamp=BASE_TS
    )
    with pytest.raises(InvalidProducerEpoch):
        log.append(_batch(1, BASE_TS, pid=5, epoch=3, seq=1, txn=True))


def test_damage_and_preallocated_indexes(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    infos = [log.append(_batch(2, BASE_TS + i)) for i in range(6)]
    crc = log.corrupt_batch(infos[1], "crc_mismatch")
    magic = log.corrupt_batch(infos[3], "bad_magic")
    length = log.corrupt_batch(infos[4], "bad_length")
    tail = log.append_truncated_tail(_batch(2, BASE_TS + 9), 30)
    log.close(preallocate_active_indexes=True)
    data = (log.dir / f"{0:020d}.log").read_bytes()
    assert (crc.position, magic.position, length.position) == (infos[1].position, infos[3].position, infos[4].position)
    assert tail.position + tail.length == len(data)
    assert data[magic.position + 16] == 7
    assert struct.unpack_from(">i", data, length.position + 8)[0] == 3
    entries = read_log(log.dir / f"{0:020d}.log")
    assert [pos for pos, _ in entries[:2]] == [0, infos[1].position]
    assert entries[0][1].validate_crc() and not entries[1][1].validate_crc()
    assert (log.dir / f"{0:020d}.index").stat().st_size == 10 * 1024 * 1024
    assert (log.dir / f"{0:020d}.timeindex").stat().st_size == 10 * 1024 * 1024 // 12 * 12
