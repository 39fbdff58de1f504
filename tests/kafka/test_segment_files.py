"""Many segments walked in one compiled call give each file exactly what its own walk gives: rows, control
columns, quarantine entries (damage stays in its file), counters."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kafka import encoders as E
from tests.kafka.scans import assert_same_scan
from tests.kafka.test_record_batch import BAD_CONTROL, TS, _entry_mix, control, txn_batch
from txnlog.kafka.record_batch import SegmentScan, scan_segment
from txnlog.kafka.segment_files import SegmentsScan, scan_segments


def _corpus() -> dict[str, bytes]:
    out = dict(_entry_mix())
    for case, (records, _) in BAD_CONTROL.items():
        out[f"control-{case}"] = txn_batch(0) + control(records)
    out["control-gzip"] = txn_batch(0) + control(
        [E.record(0, 2, E.control_key(1), E.end_txn_marker(33))], attributes=0x31
    )
    out["control-not-gzip"] = control(
        [E.record(0, 0, E.control_key(1), E.end_txn_marker(1))], attributes=0x31, body=b"not gzip at all"
    )
    out["markers"] = (
        txn_batch(0)
        + E.marker_batch(1, base_offset=2, producer_id=4711, producer_epoch=3, coordinator_epoch=5, timestamp=TS)
        + txn_batch(3)
    )
    return out


def _together(raws: list[bytes], names: list[str], check_crc: bool = True, **kw: int) -> SegmentsScan:
    bounds = np.cumsum([0, *map(len, raws)])
    buf = np.frombuffer(b"".join(raws), np.uint8)
    return scan_segments(buf, bounds, names, check_crc=check_crc, **kw)


def _file_of(group: SegmentsScan, k: int) -> SegmentScan:
    start = int(group.counts[:k].sum())
    rows = slice(start, start + int(group.counts[k]))
    return SegmentScan(
        file=group.files[k],
        size=int(group.sizes[k]),
        batches={name: col[rows] for name, col in group.batches.items()},
        quarantine=group.quarantine[k],
        legacy_entries=int(group.legacy_entries[k]),
        legacy_bytes=int(group.legacy_bytes[k]),
        zero_padding_bytes=int(group.zero_padding_bytes[k]),
        crc_checked=group.crc_checked,
        overlap_bytes=int(group.overlap_bytes[k]),
        stopped_at=int(group.sizes[k]),
    )


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "no-crc"])
@pytest.mark.parametrize("seed", range(6))
def test_files_walked_together_give_each_file_its_own_walk(seed: int, check_crc: bool) -> None:
    """Groups of clean, damaged, cut, padded, legacy and control-record files in random orders (a file may
    come twice): each file's part of the group's scan is its own scan_segment."""
    corpus = _corpus()
    rng = np.random.default_rng(seed)
    names = [str(n) for n in rng.choice(list(corpus), size=int(rng.integers(1, 2 * len(corpus))))]
    raws = [corpus[n] for n in names]
    files = [f"{k}-{n}.log" for k, n in enumerate(names)]
    group = _together(raws, files, check_crc)
    assert group.batches["position"].size == int(group.counts.sum())
    for k, (raw, file) in enumerate(zip(raws, files, strict=True)):
        assert_same_scan(_file_of(group, k), scan_segment(raw, file=file, check_crc=check_crc))


def test_a_damaged_file_keeps_its_damage_to_itself() -> None:
    """A cut tail or garbage at the end of one file is that file's quarantine; the next file, walked after it
    in the same buffer, loses nothing and the cut tail is not read as the start of its first batch."""
    corpus = _corpus()
    raws = [corpus["cut-tail"], corpus["clean"], corpus["garbage-between"], corpus["only-zeros"], corpus["clean"]]
    group = _together(raws, [f"{k}.log" for k in range(len(raws))])
    assert [[q.reason for q in entries] for entries in group.quarantine] == [
        ["truncated_tail"],
        [],
        [group.quarantine[2][0].reason],
        [],
        [],
    ]
    assert group.counts.tolist() == [4, 4, 4, 0, 4]
    assert group.zero_padding_bytes.tolist()[3] == 100


def test_each_file_has_its_own_decompression_budget() -> None:
    """The budget for compressed control batches is per file, as each file's own scan has it."""
    raw = control([E.record(0, 2, E.control_key(1), E.end_txn_marker(33))], attributes=0x31)
    alone = scan_segment(raw, max_decompressed_bytes=64)
    assert alone.quarantine == []
    group = _together([raw, raw, raw], ["a.log", "b.log", "c.log"], max_decompressed_bytes=64)
    assert group.quarantine == [[], [], []]
    assert group.batches["coordinator_epoch"].tolist() == [33, 33, 33]


def test_no_files_and_empty_files() -> None:
    group = _together([b"", b""], ["a.log", "b.log"])
    assert group.counts.tolist() == [0, 0] and group.batches["position"].size == 0
    assert _together([], []).counts.size == 0
