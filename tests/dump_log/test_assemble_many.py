"""Dumped segments assembled at once (txnlog.engine.dump_log.assemble_many.assemble_segments) give the rows of
each segment assembled on its own (txnlog.engine.dump_log.assemble.assemble_segment), every row and column: on
real kafka-dump-log.sh outputs (realdata/dump-log: 2.7 to 3.x, deep iteration, control records, a damaged dump),
on a hand-written dump with a batch line ``isvalid: false`` and a line no format knows, and on a scenario's
segments rendered by each Kafka version's tool (a busy partition's segments, a damaged marker). The same for
``__transaction_state`` segments (assemble_txn_states against assemble_txn_state)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.dump_log.test_golden import DUMPS, SYNTHETIC
from txnlog.engine.dump_log.assemble import assemble_segment, assemble_txn_state
from txnlog.engine.dump_log.assemble_many import assemble_segments
from txnlog.engine.dump_log.rows import SEGMENT_COLUMNS, summary_lines
from txnlog.model.arrow import groups
from txnlog.sources.dump_log.lines import iter_line_batches
from txnlog.sources.dump_log.parse import parse_lines


def _segment_lines(paths: list[str]) -> pa.Table:
    """The data segments' lines of the dump files ``paths``, as txnlog.engine.dump_log.rows hands them on."""
    parsed = [parse_lines(b) for p in paths for b in iter_line_batches(p, 1 << 20, None, False)]
    lines = summary_lines(pa.Table.from_batches(parsed))
    return lines.filter(pc.fill_null(lines.column("data_section"), False)).select(list(SEGMENT_COLUMNS))


def _rows(table: pa.Table) -> list[str]:
    return sorted(repr(r) for r in table.to_pylist())


def _assert_each_segment(lines: pa.Table) -> None:
    alone = [assemble_segment(g) for g in groups(lines, ("file", "section"))]
    at_once = assemble_segments(lines)
    assert alone, "no dumped data segment"
    want = pa.concat_tables(alone)
    assert at_once.schema.names == want.schema.names
    assert _rows(at_once.cast(want.schema)) == _rows(want)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A scenario with a damaged marker, every data segment dumped by Kafka 2.8's, 3.x's and 4.x's tool."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    root = tmp_path_factory.mktemp("assemble-many")
    write_scenario("damage_around_transactions", root / "logs", seed=1)
    out = []
    for version in ("2.8", "3.x", "4.x"):
        path = root / f"{version}.txt"
        path.write_text(
            "".join(render_dump(f.path, version, deep_iteration=True) for f in discover([str(root / "logs")]).segments)
        )
        out.append(str(path))
    return out


@pytest.mark.skipif(not os.path.isdir(DUMPS), reason=f"realdata dump-log not found at {DUMPS}")
def test_real_dumps() -> None:
    _assert_each_segment(_segment_lines(sorted(glob.glob(os.path.join(DUMPS, "*.txt")))))


def test_a_hand_written_dump(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.txt"
    path.write_text(SYNTHETIC)
    _assert_each_segment(_segment_lines([str(path)]))


def test_rendered_segments(rendered: list[str]) -> None:
    _assert_each_segment(_segment_lines(rendered))


def _record_rows_both_ways(paths: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, pa.Table]:
    """``record_rows`` of the dump files ``paths``: the segments assembled at once, and each on its own."""
    from txnlog.engine.dump_log import rows

    parsed = [parse_lines(b) for p in paths for b in iter_line_batches(p, 1 << 20, None, False)]
    lines = rows.record_lines(pa.Table.from_batches(parsed))
    at_once = rows.record_rows(lines, {})

    def each(table: pa.Table) -> pa.Table:
        return pa.concat_tables([assemble_txn_state(g) for g in groups(table, ("dump_file", "section"))])

    monkeypatch.setattr(rows, "assemble_txn_states", each)
    return at_once, rows.record_rows(lines, {})


def test_transaction_state_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``__transaction_state`` dumps: a scenario's, by 3.x's and 4.x's decoder, one of them without the decoder
    (a quarantine row per segment), and the real ones."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    write_scenario("tv2_rollover", tmp_path / "logs", seed=1)
    segments = discover([str(tmp_path / "logs")]).txn_state_segments
    paths = sorted(glob.glob(os.path.join(DUMPS, "*.txt"))) if os.path.isdir(DUMPS) else []
    for version, decoder in (("3.x", True), ("4.x", True), ("3.x", False)):
        path = tmp_path / f"{version}-{decoder}.txt"
        path.write_text("".join(render_dump(f.path, version, transaction_log_decoder=decoder) for f in segments))
        paths.append(str(path))
    at_once, each = _record_rows_both_ways(paths, monkeypatch)
    kinds = set(at_once.column("kind").to_pylist())
    assert {"record", "segment", "quarantine"} <= kinds, kinds
    assert _rows(at_once) == _rows(each)
