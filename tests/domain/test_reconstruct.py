"""Fragment reconstruction (txnlog.broker.reconstruct) on hand-written batch headers."""

from __future__ import annotations

import numpy as np
import pytest

from txnlog.broker.reconstruct import MARKER, RUN, merge_fragments, segment_fragments

COLUMNS = {
    "base_offset": np.int64,
    "last_offset": np.int64,
    "batch_length": np.int32,
    "is_transactional": bool,
    "is_control": bool,
    "producer_id": np.int64,
    "producer_epoch": np.int16,
    "base_timestamp": np.int64,
    "max_timestamp": np.int64,
    "has_delete_horizon": bool,
    "record_count": np.int32,
    "control_type": np.int16,
    "coordinator_epoch": np.int32,
    "marker_timestamp": np.int64,
    "control_status": np.int8,
    "base_sequence": np.int32,
}


def batches(*rows: dict) -> dict[str, np.ndarray]:
    """rows of (offset, pid, kind) → the decoder's column arrays."""
    out: dict[str, list] = {k: [] for k in COLUMNS}
    for r in rows:
        kind = r["kind"]  # "data", "plain", "commit", "abort", "empty_control"
        off = r["offset"]
        n = r.get("records", 1)
        out["base_offset"].append(off)
        out["last_offset"].append(off + n - 1)
        out["batch_length"].append(100)
        out["is_transactional"].append(kind != "plain")
        out["is_control"].append(kind in ("commit", "abort", "empty_control"))
        out["producer_id"].append(r.get("pid", -1))
        out["producer_epoch"].append(r.get("epoch", 0))
        out["base_timestamp"].append(1000 + off)
        out["max_timestamp"].append(1000 + off + n - 1)
        out["has_delete_horizon"].append(r.get("cleaned", False))
        out["record_count"].append(0 if kind == "empty_control" else n)
        out["control_type"].append({"commit": 1, "abort": 0}.get(kind, -1))
        out["coordinator_epoch"].append(7 if kind in ("commit", "abort") else -1)
        out["marker_timestamp"].append(1000 + off if kind in ("commit", "abort") else -1)
        out["control_status"].append({"commit": 1, "abort": 1, "empty_control": 2}.get(kind, 0))
        out["base_sequence"].append(r.get("seq", -1))
    return {k: np.array(v, dtype=COLUMNS[k]) for k, v in out.items()}


def test_runs_and_markers_of_one_segment():
    b = batches(
        {"offset": 0, "pid": 10, "kind": "data", "records": 2},
        {"offset": 2, "pid": 11, "kind": "data"},
        {"offset": 3, "pid": 10, "kind": "data"},
        {"offset": 4, "pid": 10, "kind": "commit"},
        {"offset": 5, "kind": "plain"},
        {"offset": 6, "pid": 10, "kind": "data", "epoch": 1},
        {"offset": 7, "pid": 11, "kind": "empty_control"},  # cleaned marker: ignored like the broker
        {"offset": 8, "pid": 10, "kind": "abort", "epoch": 2},
    )
    f = segment_fragments(b)
    got = sorted(
        zip(
            f["kind"].tolist(),
            f["producer_id"].tolist(),
            f["first_offset"].tolist(),
            f["last_offset"].tolist(),
            f["batch_count"].tolist(),
            f["record_count"].tolist(),
            f["producer_epoch"].tolist(),
        )
    )
    assert got == [
        (RUN, 10, 0, 3, 2, 3, 0),
        (RUN, 10, 6, 6, 1, 1, 1),
        (RUN, 11, 2, 2, 1, 1, 0),
        (MARKER, 10, 4, 4, 1, 1, 0),
        (MARKER, 10, 8, 8, 1, 1, 2),
    ]
    run = [i for i in range(len(f["kind"])) if f["kind"][i] == RUN and f["first_offset"][i] == 0][0]
    assert f["first_timestamp"][run] == 1000 and f["last_timestamp"][run] == 1003
    txns = merge_fragments(f)
    assert [(t["producer_id"], t["first_offset"], t["marker_offset"], t["control_type"]) for t in txns] == [
        (10, 0, 4, 1),
        (11, 2, None, None),
        (10, 6, 8, 0),
    ]


def test_transaction_spanning_segments_merges():
    a = segment_fragments(batches({"offset": 0, "pid": 5, "kind": "data"}))
    b = segment_fragments(batches({"offset": 10, "pid": 5, "kind": "data"}, {"offset": 11, "pid": 5, "kind": "commit"}))
    both = {k: np.concatenate([a[k], b[k]]) for k in a}
    txns = merge_fragments(both)
    assert [(t["first_offset"], t["last_offset"], t["batch_count"], t["marker_offset"]) for t in txns] == [
        (0, 10, 2, 11)
    ]


def test_marker_with_nothing_open_is_ignored():
    f = segment_fragments(batches({"offset": 0, "pid": 5, "kind": "abort"}, {"offset": 1, "pid": 5, "kind": "data"}))
    assert [(t["first_offset"], t["marker_offset"]) for t in merge_fragments(f)] == [(1, None)]


def test_delete_horizon_is_not_a_first_timestamp():
    """A cleaned batch keeps its delete horizon in base_timestamp (spec §1.3): use max_timestamp."""
    b = batches({"offset": 0, "pid": 5, "kind": "data", "records": 3, "cleaned": True})
    b["base_timestamp"][0] = 9_999_999  # the delete horizon
    f = segment_fragments(b)
    assert f["first_timestamp"].tolist() == [1002]


@pytest.mark.parametrize("kind", ["plain", "empty_control"])
def test_no_transactional_data_no_fragments(kind):
    f = segment_fragments(batches({"offset": 0, "pid": 3, "kind": kind}))
    assert len(f["kind"]) == 0


def test_a_batch_whose_sequence_skips_is_the_runs_sequence_gap():
    """ProducerAppendInfo.checkSequence's test between adjacent batches of a run: the next base sequence is the
    previous last sequence + 1 (wrapping at Integer.MAX_VALUE), at the same epoch; -1 means no gap."""
    in_order = segment_fragments(
        batches(
            {"offset": 0, "pid": 5, "kind": "data", "records": 3, "seq": 2147483646},  # 2147483646..0
            {"offset": 3, "pid": 5, "kind": "data", "seq": 1},
            {"offset": 4, "pid": 5, "kind": "data", "seq": 0, "epoch": 1},  # a new epoch starts again
            {"offset": 5, "pid": 5, "kind": "commit"},
        )
    )
    assert in_order["sequence_gap"].tolist() == [-1, -1]
    gap = segment_fragments(
        batches(
            {"offset": 0, "pid": 5, "kind": "data", "records": 2, "seq": 0},
            {"offset": 2, "pid": 6, "kind": "data", "seq": 0},
            {"offset": 3, "pid": 5, "kind": "data", "seq": 4},  # 2 and 3 lost
            {"offset": 4, "pid": 5, "kind": "data", "seq": 9},
            {"offset": 5, "pid": 5, "kind": "commit"},
            {"offset": 6, "pid": 5, "kind": "data", "seq": 20},  # the next transaction: its first batch
        )
    )
    runs = {(int(p), int(o)): int(g) for p, o, g, k in
            zip(gap["producer_id"], gap["first_offset"], gap["sequence_gap"], gap["kind"], strict=True) if k == RUN}  # fmt: skip
    assert runs == {(5, 0): 3, (6, 2): -1, (5, 6): -1}


def test_runs_cut_at_piece_edges_are_checked_for_sequence_gaps_as_one_run():
    """txnlog.broker.reconstruct.cut_sequence_gaps: a segment's batches cut into pieces, each piece's fragments made
    alone; two runs of one producer and file with no marker between them are checked at the cut by the rule inside
    a run (ProducerAppendInfo.checkSequence: the next sequence, after Integer.MAX_VALUE 0, at the same epoch);
    runs of different files are not, as a whole read of each does not."""
    from txnlog.broker.reconstruct import cut_sequence_gaps

    rows = [
        {"offset": 0, "pid": 5, "kind": "data", "records": 2, "seq": 2147483646},  # 2147483646, 2147483647
        {"offset": 2, "pid": 5, "kind": "data", "seq": 0},  # piece 1: follows across the cut (wraps)
        {"offset": 3, "pid": 6, "kind": "data", "seq": 7},
        {"offset": 4, "pid": 6, "kind": "data", "seq": 9},  # piece 2: 8 lost at the cut
        {"offset": 5, "pid": 7, "kind": "data", "seq": 3},
        {"offset": 6, "pid": 7, "kind": "data", "seq": 0, "epoch": 1},  # piece 3: a new epoch starts again
        {"offset": 7, "pid": 5, "kind": "commit"},
        {"offset": 8, "pid": 5, "kind": "data", "seq": 9},  # piece 4: after a marker, a new run
    ]
    cuts = [0, 1, 3, 5, 7, 8]  # the pieces: each producer's two batches on either side of a cut

    def gaps(file_of_piece: list[int]) -> dict[tuple[int, int], int]:
        parts = [segment_fragments(batches(*rows[a:b])) for a, b in zip(cuts, cuts[1:], strict=False)]
        frags = {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}
        file = np.concatenate([np.full(p["kind"].size, f) for p, f in zip(parts, file_of_piece, strict=True)])
        got = cut_sequence_gaps(frags, file)
        run = frags["kind"] == RUN
        return dict(
            zip(zip(frags["producer_id"][run].tolist(), frags["first_offset"][run].tolist()), got[run].tolist())
        )

    whole = segment_fragments(batches(*rows))
    assert sorted(whole["sequence_gap"][whole["kind"] == RUN].tolist()) == [-1, -1, -1, 4]  # pid 6's run
    assert gaps([0, 0, 0, 0, 0]) == {(5, 0): -1, (5, 2): -1, (6, 3): -1, (6, 4): 4, (7, 5): -1, (7, 6): -1, (5, 8): -1}
    assert gaps([0, 0, 1, 1, 1])[(6, 4)] == -1  # pieces of two files: not one run
    assert gaps([-1] * 5)[(6, 4)] == -1  # fragments of no split file
