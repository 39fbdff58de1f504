"""Splitting big segments at index positions, without Spark: planning from the ``.index``,
its sanity checks (fallback), and the stitch property — the live pieces of any split walk exactly the
batches and quarantine regions of the whole-file walk, damage included."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.domain.test_partition_transactions import _log, _summary
from tests.domain.test_reconstruct import batches
from tests.hot_segments import write_hot_segment
from tests.summary_rows import segment_summary
from txnlog.broker.reconstruct import merge_fragments, segment_fragments
from txnlog.kafka.record_batch import SegmentScan, scan_segment, scan_segment_piece
from txnlog.sources import splits as S


def _points(path: Path) -> S.SplitPoints:
    buf = path.read_bytes()
    points = S.index_split_points(path.with_suffix(".index").read_bytes(), 0, len(buf))
    assert isinstance(points, S.SplitPoints), points
    return points


def stitched(buf: np.ndarray, points: S.SplitPoints, check_crc: bool = True) -> tuple[list[SegmentScan], list[int]]:
    """Every piece's scan as the reader makes it, and the live ones (txnlog.sources.splits)."""
    ok = S.valid_points(buf, points, check_crc)
    stops = points.positions[ok]
    scans: list[SegmentScan] = []
    nxt: dict[int, int | None] = {}
    for k in range(points.positions.size + 1):
        start = 0 if k == 0 else int(points.positions[k - 1])
        if k and not ok[k - 1]:
            nxt[k] = None
            scans.append(SegmentScan("x", int(buf.size), {}))
            continue
        scan = scan_segment_piece(buf, start, stops[stops > start], file="x", check_crc=check_crc)
        scans.append(scan)
        nxt[k] = S.piece_of_stop(points.positions, scan.stopped_at)
    return scans, S.live_pieces(nxt)


def assert_same_as_whole(buf: np.ndarray, points: S.SplitPoints, check_crc: bool = True) -> list[int]:
    whole = scan_segment(buf, file="x", check_crc=check_crc)
    scans, live = stitched(buf, points, check_crc)
    assert live and live[0] == 0
    parts = [scans[k] for k in live]
    for name, column in whole.batches.items():
        np.testing.assert_array_equal(np.concatenate([p.batches[name] for p in parts]), column, err_msg=name)
    assert [q for p in parts for q in p.quarantine] == whole.quarantine
    for name in ("legacy_entries", "legacy_bytes", "zero_padding_bytes", "overlap_bytes"):
        assert sum(getattr(p, name) for p in parts) == getattr(whole, name), name
    assert parts[-1].stopped_at == buf.size
    # the transactions the fragments of the live pieces merge into are the whole file's
    frags = [segment_fragments(p.batches) for p in parts]
    merged = {n: np.concatenate([f[n] for f in frags]) for n in frags[0]}
    assert merge_fragments(merged) == merge_fragments(segment_fragments(whole.batches))
    return live


def _subset(points: S.SplitPoints, chosen: list[int]) -> S.SplitPoints:
    idx = np.array(sorted(set(chosen)), np.int64)
    return S.SplitPoints(points.positions[idx], points.offsets[idx], points.previous[idx])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    damage=st.integers(0, 6),
    tail=st.booleans(),
    picks=st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=12),
    check_crc=st.booleans(),
)
def test_any_split_stitches_to_the_whole_walk(
    tmp_path_factory: pytest.TempPathFactory, seed: int, damage: int, tail: bool, picks: list[float], check_crc: bool
) -> None:
    hot = write_hot_segment(tmp_path_factory.mktemp("hot"), seed, batches=150, damage=damage, truncated_tail=tail)
    buf = np.fromfile(hot.path, np.uint8)
    points = _points(hot.path)
    assert_same_as_whole(buf, _subset(points, [int(p * points.positions.size) for p in picks]), check_crc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), where=st.sampled_from(["at", "before", "spanning"]), kind=st.integers(0, 2))
def test_damage_at_a_split_edge_stitches(
    tmp_path_factory: pytest.TempPathFactory, seed: int, where: str, kind: int
) -> None:
    """Damage on the batch at a split point (the point fails its check: the previous piece walks on), on
    the batch just before it (the damage region ends at the split point), or a batch whose length now
    spans the split point (the whole walk passes over it: that piece is dead)."""
    directory = tmp_path_factory.mktemp("edge")
    probe = write_hot_segment(directory / "probe", seed, batches=150)
    points = _points(probe.path)
    k = int(points.positions.size // 2)
    at = next(i for i, info in enumerate(probe.infos) if info.position == int(points.positions[k]))
    hot = write_hot_segment(directory / "hot", seed, batches=150, damage_at=[at if where == "at" else at - 1])
    assert _points(hot.path).positions.tolist() == points.positions.tolist()
    if where == "spanning":  # instead: the batch before the split point grows past it, with a valid CRC
        hot = write_hot_segment(directory / "span", seed, batches=150)
        info = hot.infos[at - 1]
        data = bytearray(hot.path.read_bytes())
        length = info.size - 12 + [20, 200, 4000][kind]
        struct.pack_into(">i", data, info.position + 8, length)
        crc = google_crc32c.value(bytes(data[info.position + 21 : info.position + 12 + length]))
        struct.pack_into(">I", data, info.position + 17, crc)
        hot.path.write_bytes(bytes(data))
    buf = np.fromfile(hot.path, np.uint8)
    live = assert_same_as_whole(buf, _subset(points, [k - 1, k, k + 1]))
    if where in ("at", "spanning"):
        assert 2 not in live  # the piece at the damaged/passed-over point (subset index 1) was not used
    whole = scan_segment(buf)
    split = int(points.positions[k])
    if where == "spanning":  # one valid batch now covers the split point
        ends = whole.batches["position"] + 12 + whole.batches["batch_length"]
        assert ((whole.batches["position"] < split) & (ends > split)).any()
    else:  # a quarantine region at or right before the split point
        assert any(q.position <= split <= q.position + q.length for q in whole.quarantine)


def test_index_planning_picks_positions_near_equal_cuts(tmp_path: Path) -> None:
    hot = write_hot_segment(tmp_path, 3, batches=400)
    size = hot.path.stat().st_size
    points = _points(hot.path)
    positions = {info.position for info in hot.infos}
    assert set(points.positions.tolist()) <= positions  # every index entry points at a batch start
    plan = S.plan_pieces(points, size, -(-size // 4))
    assert plan.positions.size == 3
    for k, p in enumerate(plan.positions.tolist(), start=1):
        assert abs(p - k * size / 4) < 2 * 512 + 400  # the nearest entry: entries every ~index.interval.bytes
    assert S.plan_pieces(points, size, size).positions.size == 0  # not above the piece size: whole
    assert S.plan_pieces(points, size, size + 1).positions.size == 0


def _index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", r, p) for r, p in entries)


@pytest.mark.parametrize(
    ("index", "why"),
    [
        (None, S.INDEX_MISSING),
        (b"", S.INDEX_EMPTY),
        (bytes(8 * 100), S.INDEX_EMPTY),  # preallocated, never written
        (_index([(3, 100), (7, 200)]) + b"\x00\x00\x00", S.INDEX_BAD_LENGTH),
        (_index([(3, 100), (-2, 200)]), S.INDEX_BELOW_BASE),
        (_index([(3, 100), (3, 200)]), S.INDEX_OFFSETS_NOT_INCREASING),
        (_index([(3, 200), (7, 100)]), S.INDEX_POSITIONS_NOT_INCREASING),
        (_index([(3, 100), (7, 5000)]), S.INDEX_POSITION_PAST_END),
    ],
    ids=["missing", "empty", "preallocated", "partial-entry", "below-base", "offsets", "positions", "past-end"],
)
def test_index_sanity_checks_fall_back(index: bytes | None, why: str) -> None:
    assert S.index_split_points(index, 1000, 4096) == why


def test_index_of_another_segment_fails_at_read_time(tmp_path: Path) -> None:
    """An index whose offsets do not fit the batches (another segment's, or shifted) passes the sanity
    checks, but no split point validates: piece 0 reads the whole file, the others nothing."""
    hot = write_hot_segment(tmp_path, 5, batches=200)
    buf = np.fromfile(hot.path, np.uint8)
    points = _points(hot.path)
    shifted = S.SplitPoints(points.positions, points.offsets + 1000, points.previous + 1000)
    assert not S.valid_points(buf, shifted, True).any()
    assert assert_same_as_whole(buf, shifted) == [0]
    inside = S.SplitPoints(points.positions + 3, points.offsets, points.previous)  # not batch starts
    assert not S.valid_points(buf, inside, True).any()
    assert assert_same_as_whole(buf, inside) == [0]


def test_live_pieces_follow_the_chain() -> None:
    assert S.live_pieces({0: 1, 1: 2, 2: 3}) == [0, 1, 2]
    assert S.live_pieces({0: 2, 1: 2, 2: 4, 3: 4}) == [0, 2]  # 0 walked over 1's start; 3 passed over
    assert S.live_pieces({0: 3, 1: None, 2: None}) == [0]  # points 1, 2 invalid: 0 read everything


def test_segment_row_of_pieces() -> None:
    rows = [
        {"first_offset": 0, "last_offset": 9, "batch_count": 3, "marker_timestamp": None, "size_bytes": 10},
        {"first_offset": None, "last_offset": None, "batch_count": 0, "marker_timestamp": 7, "size_bytes": 10},
        {"first_offset": 10, "last_offset": 20, "batch_count": 2, "marker_timestamp": 5, "size_bytes": 10},
    ]
    row = S.segment_row(rows)
    assert (row["first_offset"], row["last_offset"], row["batch_count"], row["marker_timestamp"]) == (0, 20, 5, 7)
    assert row["first_timestamp"] is None and row["legacy_entries"] == 0


def test_random_positions_never_change_the_result(tmp_path: Path) -> None:
    """Split points that are not batch starts at all (a garbled index): whatever validates, the stitch holds."""
    hot = write_hot_segment(tmp_path, 9, batches=200, damage=4, truncated_tail=True)
    buf = np.fromfile(hot.path, np.uint8)
    starts = {info.position: info for info in hot.infos}
    rng = random.Random(1)
    for _ in range(20):
        positions = sorted(rng.sample(range(1, buf.size - 1), 8) + rng.sample(sorted(starts), 4))
        positions = sorted(set(positions))
        offsets = [starts[p].last_offset if p in starts else 0 for p in positions]
        points = S.SplitPoints(
            np.array(positions, np.int64), np.array(offsets, np.int64), np.full(len(positions), -1, np.int64)
        )
        assert_same_as_whole(buf, points)


def test_stitch_keeps_live_pieces_and_one_unreadable_row() -> None:
    from txnlog.engine.spark.stitch import live_and_dead

    def row(file: str, piece: int, nxt: int | None) -> dict:
        return {"broker": "b", "file": file, "piece": piece, "next_piece": nxt}

    live, dead = live_and_dead(
        [row("a", 0, 2), row("a", 1, 2), row("a", 2, 4), row("a", 3, None), row("u", 0, -1), row("u", 1, -1)]
    )
    assert [r["piece"] for r in live[("b", "a")]] == [0, 2]
    assert live[("b", "u")] == []
    assert dead == {("b", "a", 1), ("b", "a", 3), ("b", "u", 1)}


def test_a_files_pieces_give_its_segment_row_and_its_dead_pieces() -> None:
    """What the stitch's task returns for one file's ``piece`` rows: the segment row of the live chain (the first
    live piece's other values, the reductions of txnlog.sources.splits.segment_row) and the dead pieces' rows."""
    from txnlog.engine.spark.stitch import stitched_rows

    def row(piece: int, nxt: int | None, first: int, last: int, batches: int) -> dict:
        return {"broker": "b", "file": "f", "topic": "t", "kind": "piece", "piece": piece, "next_piece": nxt,
                "first_offset": first, "last_offset": last, "batch_count": batches, "marker_timestamp": None}  # fmt: skip

    rows = [row(0, 2, 0, 9, 3), row(1, 2, 5, 9, 2), row(2, 3, 10, 19, 4)]  # 0 walked over 1: 1 is dead
    segment, dead = stitched_rows(rows)
    assert segment["kind"] == "segment" and segment["piece"] is None and segment["next_piece"] is None
    assert (segment["first_offset"], segment["last_offset"], segment["batch_count"]) == (0, 19, 7)
    assert segment["topic"] == "t" and segment["marker_timestamp"] is None
    assert dead == rows[1]
    assert stitched_rows([row(0, -1, 0, 0, 0), row(1, -1, 0, 0, 0)]) == [row(1, -1, 0, 0, 0)]  # unreadable


def test_only_a_stragglers_big_segments_are_split() -> None:
    # ten partitions of 100 bytes, each with one 60-byte segment above the threshold: an even share of
    # 1000 bytes over 2 cores is 500, no partition comes near it, so none is split (the dense mix's case)
    sizes = np.array([60, 40] * 10)
    units = np.repeat(np.arange(10), 2)
    assert not S.worth_splitting(sizes, units, 50, cores=2).any()
    # one hot partition of 4 x 250 bytes beside a cold one of 100: 1000 x 1.5 > 1100, its big files are split,
    # the cold partition's 100-byte file (above the threshold too) is not
    sizes = np.array([250, 250, 250, 250, 100])
    units = np.array([7, 7, 7, 7, 3])
    assert S.worth_splitting(sizes, units, 99, cores=2).tolist() == [True, True, True, True, False]
    # ... and not its files at or below the threshold
    assert S.worth_splitting(sizes, units, 250, cores=2).tolist() == [False] * 5
    # files read one by one (their own unit): only a file whose excess over an even share pays for its split
    sizes = np.array([800, 150, 50])
    assert S.worth_splitting(sizes, np.arange(3), 50, cores=2).tolist() == [True, False, False]
    # a partition holding 55 % of the input: on 2 cores the rest keeps the other core busy nearly as long, and
    # splitting costs more than that; on 8 cores it is the straggler by far
    sizes, units = np.array([275, 275] + [112] * 4), np.array([1, 1, 2, 3, 4, 5])
    assert not S.worth_splitting(sizes, units, 100, cores=2).any()
    assert S.worth_splitting(sizes, units, 100, cores=8).tolist() == [True, True] + [False] * 4
    # one core, nothing to spread over; splitting off
    assert not S.worth_splitting(sizes, np.arange(3), 50, cores=1).any()
    assert not S.worth_splitting(sizes, np.arange(3), 0, cores=4).any()
    assert S.worth_splitting(np.array([], np.int64), np.array([], np.int64), 50, cores=2).size == 0


def test_the_drivers_stitch_imports_no_compiled_walk() -> None:
    """The stitch of pieces (txnlog.engine.spark.stitch: planned in the driver, run in tasks) imports neither numba
    nor the compiled walk: ~60 MiB of the driver's memory at every input with a big segment (benchmarks/RESULTS.md §2, "Both mixes at 1–8 GiB, index splits
    only for stragglers")."""
    import subprocess
    import sys

    code = "import sys, txnlog.engine.spark.stitch; print('numba' in sys.modules, 'txnlog.kafka.record_batch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


_SNAPSHOT_ENTRY = st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 3))


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.integers(-1, 3), st.sampled_from(["data", "data", "commit", "abort"]), st.integers(1, 3)),
        min_size=1,
        max_size=60,
    ),
    cuts=st.lists(st.integers(1, 59), max_size=8),
    snapshot=st.one_of(st.none(), st.tuples(st.integers(0, 70), st.lists(_SNAPSHOT_ENTRY, max_size=4))),
    high_watermark=st.one_of(st.none(), st.integers(0, 70)),
)
def test_pieces_finish_their_inner_transactions_and_hand_on_only_edges(events, cuts, snapshot, high_watermark) -> None:
    """A partition's log cut anywhere into files (a split segment's pieces): each finishes the transactions between
    its producers' first and last markers (txnlog.rules.transactions.piece_edges, txnlog.engine.segments.finished_transactions)
    and only its edge fragments are merged with the others' (transactions_of_summary): together, exactly the whole
    read's transaction rows — transactions spanning many pieces, a marker first in a piece, a producer whose only
    batch is at an edge, markers that close nothing, a producer snapshot whose open transaction starts anywhere."""
    import pyarrow as pa

    from txnlog.engine.segments import Edges, finished_transactions
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, batch_of
    from txnlog.rules.finish import RAW_COLUMNS
    from txnlog.rules.transactions import piece_edges, transactions_of_summary
    from txnlog.sources.logdirs import LogFile

    rows = _log(events)
    snaps: list[pa.RecordBatch] = []
    starts = (np.empty(0, np.int64), np.empty(0, np.int64))
    if snapshot is not None:
        at, entries = snapshot
        entries = list({pid: (pid, first, epoch) for pid, first, epoch in entries}.values())  # one entry per producer
        n = len(entries)
        firsts = np.array([min(first, at) if first % 5 else -1 for _, first, _ in entries], np.int64)
        snaps.append(
            batch_of(
                SEGMENT_SUMMARY_SCHEMA,
                n,
                {
                    "kind": "snapshot",
                    "broker": "b0",
                    "topic": "t",
                    "partition": np.zeros(n, np.int32),
                    "file": f"/b0/t-0/{at:020d}.snapshot",
                    "file_offset": np.full(n, at, np.int64),
                    "producer_id": np.array([100 + p for p, _, _ in entries], np.int64),
                    "producer_epoch": np.zeros(n, np.int32),
                    "first_offset": firsts,
                    "last_offset": firsts + 1,
                    "last_timestamp": np.full(n, 5000, np.int64),
                    "coordinator_epoch": np.array([e for _, _, e in entries], np.int32),
                },
            )
        )
        opened = firsts >= 0
        starts = (np.array([100 + p for p, _, _ in entries], np.int64)[opened], firsts[opened])
    checkpoints = {("b0", "t", 0): (None, False, high_watermark)}
    want = transactions_of_summary(_summary({"b0": [rows]}, snaps), checkpoints)

    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    pieces = [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    finished: list[pa.Table] = []
    edge_summaries: list[dict] = []
    for k, piece in enumerate(pieces):
        frags = segment_fragments(batches(*piece))
        edge, inner = piece_edges(frags, starts)
        assert (edge | inner).all()
        file = LogFile("/b0/t-0/00000000000000000000.log", "b0", "t", 0, 0, 1, "log")
        if inner.any():
            done = finished_transactions(
                file, {c: v[inner] for c, v in frags.items()}, Edges(starts, checkpoints, None), k
            )
            finished += [pa.Table.from_batches([b]) for b in done]
        edge_summaries.append({"rows": [r for r, _ in zip(piece, range(len(piece)), strict=True)], "edge": edge})
    # the edges: every piece's fragments at its edges, each piece a segment of the replica (as the stitch gives)
    edge_parts = []
    for k, piece in enumerate(pieces):
        b = batches(*piece)
        edge_parts += segment_summary("b0", b, segment_fragments(b), edge_summaries[k]["edge"])
    merged = transactions_of_summary(
        pa.Table.from_batches([*edge_parts, *snaps], schema=SEGMENT_SUMMARY_SCHEMA), checkpoints
    )
    got = [merged.select(list(RAW_COLUMNS)), *(t.select(list(RAW_COLUMNS)) for t in finished)]
    got_rows = sorted(map(repr, pa.concat_tables(got).to_pylist()))
    assert got_rows == sorted(map(repr, want.select(list(RAW_COLUMNS)).to_pylist()))
    # what the merge reads is the edges only: at most a producer's first, last marker and runs beside them
    assert sum(p.num_rows for p in edge_parts) <= sum(len(p) for p in pieces) * 2


def _transactions_of_a_read(file, points: S.SplitPoints | None) -> list[str]:
    """The ``transactions`` rows (txnlog.rules.finish.RAW_COLUMNS) a read of ``file`` gives, whole or in the pieces
    cut at ``points``: the segments source's kernels (txnlog.engine.segments) and the job's stitch and merge
    (txnlog.engine.spark.stitch.stitched_rows, txnlog.rules.transactions.transactions_of_summary), without Spark.
    Split, the pieces finish their inner transactions (a partition of one replica) and hand on their edges."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from txnlog.engine.segment_rows import SegmentRows
    from txnlog.engine.segments import Edges, Piece, summarize_piece, summarize_segment
    from txnlog.engine.spark.stitch import stitched_rows
    from txnlog.model.rows import KIND_PIECE, SEGMENT_SUMMARY_SCHEMA
    from txnlog.rules.finish import RAW_COLUMNS
    from txnlog.rules.transactions import KIND_TRANSACTION, transactions_of_summary

    checkpoints = {(file.broker, file.topic, file.partition): (None, False, None)}
    rows = SegmentRows()
    if points is None:
        parts = list(summarize_segment(file, True, rows))
    else:
        edges = Edges((np.empty(0, np.int64), np.empty(0, np.int64)), checkpoints, None)
        parts = [
            batch
            for k in range(points.positions.size + 1)
            for batch in summarize_piece(
                file, Piece(k, points.positions, points.offsets, points.previous), True, rows, edges=edges
            )
        ]
    summary = pa.Table.from_batches([*parts, *rows.batches()], schema=SEGMENT_SUMMARY_SCHEMA)
    is_piece = pc.equal(summary.column("kind"), KIND_PIECE)
    stitched = stitched_rows(summary.filter(is_piece).to_pylist())
    assert all(r["kind"] == "segment" for r in stitched), "a dead piece"  # the chain holds every piece
    summary = pa.concat_tables(
        [summary.filter(pc.invert(is_piece)), pa.Table.from_pylist(stitched, schema=SEGMENT_SUMMARY_SCHEMA)]
    )
    is_txn = pc.equal(summary.column("kind"), KIND_TRANSACTION)
    txns = pa.concat_tables(
        [summary.filter(is_txn), transactions_of_summary(summary.filter(pc.invert(is_txn)), checkpoints)]
    )
    return sorted(map(repr, txns.select(list(RAW_COLUMNS)).to_pylist()))


def test_a_gap_a_damaged_batch_leaves_is_found_across_a_piece_edge(tmp_path: Path) -> None:
    """A producer's transaction whose middle batch is damaged (quarantined), the segment split right after the damage:
    the batch after it is in the next piece. The whole read finds the gap the lost batch leaves in the producer's
    sequences (``ProducerAppendInfo.checkSequence``); so does the split read, from the sequences the first piece
    hands on at its edge (txnlog.broker.reconstruct.cut_sequence_gaps)."""
    from txnlog.sources.logdirs import discover

    seed = 3
    probe = write_hot_segment(tmp_path / "probe", seed, batches=120, index_interval_bytes=128)
    b = scan_segment(np.fromfile(probe.path, np.uint8)).batches
    points = _points(probe.path)
    data = b["is_transactional"] & ~b["is_control"] & (b["producer_id"] >= 0)

    def next_of_producer(i: int) -> int | None:
        later = np.flatnonzero((b["producer_id"] == b["producer_id"][i]) & (np.arange(b["producer_id"].size) > i))
        return int(later[0]) if later.size else None

    def case() -> tuple[int, int, int]:
        """(a data batch of a transaction with data batches of its producer before and after it, with no marker
        between: the one to damage; the batch after it, its producer's next; the split point between them)."""
        for h in np.flatnonzero(data).tolist():
            i = next_of_producer(h)
            j = next_of_producer(i) if i is not None else None
            if i is None or j is None or not (data[i] and data[j]):
                continue
            between = np.flatnonzero((points.positions > b["position"][i]) & (points.positions <= b["position"][j]))
            if between.size:
                return i, j, int(between[0])
        raise AssertionError("no such batch")

    damaged, after, point = case()
    write_hot_segment(tmp_path / "b1", seed, batches=120, index_interval_bytes=128, damage_at=[damaged])
    (file,) = discover([str(tmp_path / "b1")]).segments
    cut = S.SplitPoints(*(a[point : point + 1] for a in (points.positions, points.offsets, points.previous)))
    whole = _transactions_of_a_read(file, None)
    gaps = [r for r in whole if f"'sequence_gap': {int(b['base_offset'][after])}," in r]
    assert len(gaps) == 1, "the whole read finds the gap at the damaged batch's successor"
    assert _transactions_of_a_read(file, cut) == whole
