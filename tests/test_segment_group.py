"""A task's small segments decoded together (txnlog.engine.segments.SegmentGroup) give the rows each decoded on
its own gives, with a damaged, a cut and a vanished file among them: each its own quarantine rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tests.kafka import encoders as E
from tests.kafka.test_record_batch import TS, txn_batch
from txnlog.engine.segments import SegmentGroup, SegmentRows, summarize_segment
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
    files = []
    for topic, partition, base, data in contents:
        d = tmp_path / "broker-1" / f"{topic}-{partition}"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{base:020d}.log"
        path.write_bytes(data)
        files.append(LogFile(str(path), "broker-1", topic, partition, base, len(data), "log"))
    Path(files[-2].path).unlink()
    return files


def _one_by_one(files: list[LogFile]) -> Iterator[pa.RecordBatch]:
    merge, rows = PartitionTransactions(), SegmentRows()
    for f in files:
        try:
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
    vanished = files[-2].path
    together = _table(_together(files))
    unreadable = together.filter(pa.compute.equal(together["reason"], "unreadable_file"))
    assert unreadable["file"].to_pylist() == [vanished]
    rest = together.filter(pa.compute.invert(pa.compute.equal(together["file"], vanished)).fill_null(True))
    alone = _table(_one_by_one(files))
    assert rest.equals(alone)
    quarantine = alone.filter(pa.compute.equal(alone["kind"], "quarantine"))
    assert sorted(zip(quarantine["file"].to_pylist(), quarantine["reason"].to_pylist())) == [
        (files[6].path, "crc_mismatch"),
        (files[7].path, "truncated_tail"),
    ]
    assert alone.filter(pa.compute.equal(alone["kind"], "transaction")).num_rows > 0
