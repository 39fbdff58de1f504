"""A task's small segments and producer snapshots decoded together (txnlog.engine.segment_group.SegmentGroup) give the
rows each decoded on its own gives, with a damaged, a cut and a vanished file among them: each its own quarantine
rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tests.kafka import encoders as E
from tests.kafka.test_record_batch import TS, txn_batch
from txnlog.engine.segment_group import SegmentGroup, summarize_snapshot
from txnlog.engine.segments import SegmentRows, summarize_segment
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA
from txnlog.rules.transactions import PartitionTransactions
from txnlog.sources.logdirs import LogFile


def _segment(base: int, pid: int) -> bytes:
    """Two transactions of producer ``pid`` from offset ``base``: batches and their commit markers."""
    out = b""
    for i in range(2):
        first = base + 3 * i
        out += txn_batch(first, pid=pid)
        out += E.marker_batch(
            1, base_offset=first + 2, producer_id=pid, producer_epoch=3, coordinator_epoch=5, timestamp=TS
        )
    return out


def _files(tmp_path: Path) -> list[LogFile]:
    contents: list[tuple[str, int, int, bytes]] = []
    for p in range(3):
        contents.append(("t", p, 0, _segment(0, 100 + p)))
        contents.append(("t", p, 6, _segment(6, 100 + p)))
    clean = _segment(0, 200)
    damaged = bytearray(_segment(0, 201))
    damaged[len(txn_batch(0, pid=201)) + 40] ^= 0xFF  # the first marker's CRC fails
    contents += [
        ("u", 0, 0, bytes(damaged)),
        ("u", 0, 6, _segment(6, 201) + txn_batch(12, pid=201)[:30]),  # a cut tail
        ("u", 1, 0, clean),
        ("u", 1, 6, b""),  # vanishes: removed after the listing
        ("u", 1, 12, _segment(12, 200)),
    ]
    # producer snapshots: (pid, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
    # currentTxnFirstOffset); one open transaction, one bad CRC, one undecodable
    bad_crc = bytearray(E.producer_snapshot([(201, 3, 5, 11, 0, TS, 5, -1)]))
    bad_crc[-1] ^= 1
    snapshots = [
        ("t", 0, 6, E.producer_snapshot([(100, 3, 1, 5, 0, TS, 5, -1)])),
        ("t", 1, 12, E.producer_snapshot([(101, 3, 1, 11, 0, TS, 5, -1), (7, 1, 0, 12, 0, TS, 2, 12)])),
        ("u", 0, 12, bytes(bad_crc)),
        ("u", 1, 6, E.producer_snapshot([(200, 3, 1, 5, 0, TS, 5, -1)], version=2)),
        ("u", 1, 12, E.producer_snapshot([])),
    ]
    files = []
    for kind, rows in (("log", contents), ("snapshot", snapshots)):
        for topic, partition, base, data in rows:
            d = tmp_path / "broker-1" / f"{topic}-{partition}"
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{base:020d}.{kind}"
            path.write_bytes(data)
            files.append(LogFile(str(path), "broker-1", topic, partition, base, len(data), kind))
    Path(files[len(contents) - 2].path).unlink()
    return sorted(files, key=lambda f: (f.topic, f.partition, f.base_offset, f.kind))


def _one_by_one(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    for f in files:
        try:
            if f.kind == "snapshot":
                yield from summarize_snapshot(f, merge, rows)
            else:
                yield from summarize_segment(f, True, rows, merge)
        except OSError:
            pass  # the reader's quarantine row; the group yields its own (compared apart below)
    yield from rows.batches()
    yield from merge.batches({}, SEGMENT_SUMMARY_SCHEMA)


def _together(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    group = SegmentGroup(True, None)
    for f in files:
        yield from group.add(f, rows, merge)
    yield from group.decode(rows, merge)
    yield from rows.batches()
    yield from merge.batches({}, SEGMENT_SUMMARY_SCHEMA)


def _table(batches: Iterator[pa.RecordBatch]) -> pa.Table:
    table = pa.Table.from_batches(list(batches), SEGMENT_SUMMARY_SCHEMA)
    return table.sort_by([(n, "ascending") for n in ("kind", "file", "producer_id", "first_offset", "position")])


def test_a_group_with_bad_files_gives_each_files_own_rows(tmp_path: Path) -> None:
    files = _files(tmp_path)
    vanished = next(f.path for f in files if not Path(f.path).exists())
    together = _table(_together(files))
    unreadable = together.filter(pa.compute.equal(together["reason"], "unreadable_file"))
    assert unreadable["file"].to_pylist() == [vanished]
    rest = together.filter(pa.compute.invert(pa.compute.equal(together["file"], vanished)).fill_null(True))
    alone = _table(_one_by_one(files))
    assert rest.equals(alone)
    quarantine = alone.filter(pa.compute.equal(alone["kind"], "quarantine"))
    name = {(f.topic, f.partition, f.base_offset, f.kind): f.path for f in files}
    assert sorted(zip(quarantine["file"].to_pylist(), quarantine["reason"].to_pylist())) == sorted(
        [
            (name[("u", 0, 0, "log")], "crc_mismatch"),
            (name[("u", 0, 6, "log")], "truncated_tail"),
            (name[("u", 0, 12, "snapshot")], "snapshot_crc_mismatch"),
            (name[("u", 1, 6, "snapshot")], "bad_snapshot"),
        ]
    )
    assert alone.filter(pa.compute.equal(alone["kind"], "transaction")).num_rows > 0
    snapshot_rows = alone.filter(pa.compute.is_valid(alone["snapshot_offset"]))
    assert set(snapshot_rows["producer_id"].to_pylist()) == {7, 100, 101}
