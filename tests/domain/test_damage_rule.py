"""The damage rule (txnlog.rules.damage): a quarantined region holds only the offsets between the valid
batches either side of it in its file, and the segment bounds only where the file has no batch on a side."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from txnlog.rules.damage import ranges, region_offsets, region_source


@st.composite
def files(draw):  # type: ignore[no-untyped-def]
    """A file of entries in byte order, each a valid batch (offsets ascending) or a damaged region."""
    n = draw(st.integers(1, 12))
    kinds = draw(st.lists(st.booleans(), min_size=n, max_size=n))  # True: a valid batch
    sizes = draw(st.lists(st.integers(20, 200), min_size=n, max_size=n))
    counts = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    position, offset = 0, draw(st.integers(0, 1000))
    batches, regions = [], []
    for valid, size, count in zip(kinds, sizes, counts, strict=True):
        if valid:
            batches.append((position, offset, offset + count - 1))
        else:
            regions.append((position, size, offset, offset + count - 1))  # the offsets the bytes held
        position, offset = position + size, offset + count
    return batches, regions


def _brute(batches, region):  # type: ignore[no-untyped-def]
    position, length = region[:2]
    before = [b for b in batches if b[0] < position]
    after = [b for b in batches if b[0] >= position + length]
    first = max(before)[2] + 1 if before else None
    last = min(after)[1] - 1 if after else None
    return first, last


@settings(max_examples=300, deadline=None)
@given(files(), st.randoms(use_true_random=False))
def test_region_offsets_are_bounded_by_the_valid_batches_either_side(file, rnd):
    batches, regions = file
    shuffled = list(batches)
    rnd.shuffle(shuffled)  # the rule sorts its own input
    cols = [np.array([b[i] for b in shuffled], np.int64) for i in range(3)]
    first, last = region_offsets(
        *cols, np.array([r[0] for r in regions], np.int64), np.array([r[1] for r in regions], np.int64)
    )
    for i, region in enumerate(regions):
        assert (first[i].as_py(), last[i].as_py()) == _brute(batches, region)
        lo, hi = first[i].as_py(), last[i].as_py()
        assert lo is None or lo <= region[2]  # never narrower than what the damaged bytes held
        assert hi is None or hi >= region[3]


def test_ranges_fall_back_to_the_segment_bounds_and_ignore_row_order():
    replica = {"broker": "broker-1", "topic": "t", "partition": 0}
    segments = pa.Table.from_pylist([{**replica, "file_offset": o} for o in (0, 100, 200)])
    quarantined = pa.Table.from_pylist(
        [
            {**replica, "file_offset": 0, "file": "a.log", "first_offset": 10, "last_offset": 19},  # inside
            {**replica, "file_offset": 100, "file": "b.log", "first_offset": None, "last_offset": 150},  # at the start
            {**replica, "file_offset": 100, "file": "b.log", "first_offset": 180, "last_offset": None},  # at the end
            {
                **replica,
                "file_offset": 200,
                "file": "c.log",
                "first_offset": 250,
                "last_offset": None,
            },  # the log's tail
        ]
    )
    want = {
        ("t", 0): tuple(
            sorted(
                [
                    (10, 20, region_source("a.log", True, True)),
                    (100, 151, region_source("b.log", False, True)),
                    (180, 200, region_source("b.log", True, False)),
                    (250, None, region_source("c.log", True, False)),
                ],
                key=repr,
            )
        )
    }
    assert ranges(segments, quarantined) == want
    reversed_rows = [quarantined.num_rows - 1 - i for i in range(quarantined.num_rows)]
    assert ranges(segments.take([2, 0, 1]), quarantined.take(reversed_rows)) == want
    assert "bounded by the valid batches either side" in want[("t", 0)][0][2]


def test_a_dumped_region_names_the_dump_line_it_came_from():
    """A region read from kafka-dump-log.sh text is labelled with the dump line that showed it (its
    ``detail``), bounded by the same rule; a region of the log files names its file only."""
    replica = {"broker": "b1", "topic": "t", "partition": 0, "file_offset": 0, "first_offset": 10, "last_offset": 14}
    line = "b1.txt:57: baseOffset: 10 lastOffset: 14 count: 5 ... isvalid: false"
    rows = [
        {**replica, "file": "/var/lib/kafka/data/t-0/0.log", "detail": line, "input": "dump_log"},
        {**replica, "file": "/copy/b1/t-0/0.log", "detail": "crc mismatch", "input": "segments"},
    ]
    segments = pa.Table.from_pylist([{k: replica[k] for k in ("broker", "topic", "partition", "file_offset")}])
    got = {r[2] for r in ranges(segments, pa.Table.from_pylist(rows))[("t", 0)]}
    assert got == {
        "/var/lib/kafka/data/t-0/0.log (bounded by the valid batches either side; " + line + ")",
        "/copy/b1/t-0/0.log (bounded by the valid batches either side)",
    }
