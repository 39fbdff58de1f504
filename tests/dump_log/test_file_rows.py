"""A dump file read segment by segment gives the rows of the whole file read at once.

``file_rows`` assembles each dumped segment as soon as the next "Dumping" line is read, ``files_rows`` reads
small files together, the one pass (``both``) gives both outputs' rows and the "Dumping" lines, named
afterwards, and the names Spark's read takes from the "Dumping" lines alone (``listed_names``) are those of every
line: each is held here to the plain reading of every line (``iter_line_batches`` → ``parse_lines`` →
``summary_rows``/``record_rows`` on all of them), for chunk sizes that cut lines and segments.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from txnlog.engine.dump_log.names import listed_names, replica_names
from txnlog.engine.dump_log.rows import (
    BOTH,
    RECORDS,
    SUMMARY,
    file_rows,
    files_rows,
    named_outputs,
    record_rows,
    summary_rows,
)
from txnlog.sources.dump_log.lines import dumping_lines, iter_line_batches
from txnlog.sources.dump_log.parse import parse_lines


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """One file holding a broker's data segments, snapshots and __transaction_state dumps, CRLF line ends, a
    stray line before the first "Dumping" and no newline at the end."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    root = tmp_path_factory.mktemp("file-rows")
    write_scenario("coordinator_stuck", root / "logs", seed=2)
    inv = discover([str(root / "logs")])
    files = [*inv.segments, *inv.snapshots, *inv.txn_state_segments]
    mine = [f for f in files if f.broker == "broker-1" and os.path.getsize(f.path) > 0]
    txn = [f for f in mine if f.topic == "__transaction_state"]
    data = [f for f in mine if f.topic != "__transaction_state"]
    text = "a line before any Dumping\n"
    for f in (
        data[:4] + [f for f in data if f.path.endswith(".snapshot")][:2] + txn[:3]
    ):  # each dump cut after 80 lines: the file stays small, every kind of line in it
        shown = render_dump(f.path, "3.x", deep_iteration=True, transaction_log_decoder=f in txn)
        text += "".join(shown.splitlines(keepends=True)[:80])
    path = root / "broker-1.txt"
    path.write_bytes(text.replace("\n", "\r\n").rstrip("\r\n").encode())
    return path


def _all_lines(path: Path) -> pa.Table:
    return pa.Table.from_batches([parse_lines(b) for b in iter_line_batches(str(path), 1 << 20, "b1", True)])


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=repr)


@pytest.mark.parametrize("chunk", [2000, 1 << 20])
def test_rows_segment_by_segment_are_the_rows_of_the_whole_file(dump: Path, chunk: int) -> None:
    lines = _all_lines(dump)
    names = replica_names(lines)
    for output, rows in ((SUMMARY, summary_rows), (RECORDS, record_rows)):
        want = rows(lines, names)
        assert want.num_rows > 0
        parts = list(file_rows(str(dump), names, output, "b1", True, chunk))
        got = pa.concat_tables(parts)
        assert got.schema == want.schema
        assert _sorted(got) == _sorted(want), output
    assert len(list(file_rows(str(dump), names, SUMMARY, "b1", True, 4096))) > 1, "segments leave as they end"


@pytest.mark.parametrize("chunk", [2000, 1 << 20])
def test_files_read_together_give_each_file_s_rows(dump: Path, tmp_path: Path, chunk: int) -> None:
    """``files_rows`` parses and assembles small files together: the rows are those of each file read alone
    (``file_rows``), for files read whole, files read a segment at a time (``chunk`` 2000), dumped segments with
    no entry and an empty file."""
    text = dump.read_bytes().decode()
    parts = text.split("\r\nDumping ")
    files = [tmp_path / "whole.txt"]
    files[0].write_text(text, newline="")
    for i, part in enumerate(parts[1:]):
        files.append(tmp_path / f"part-{i}.txt")
        files[-1].write_text("Dumping " + part + "\n", newline="")
    for partition, offset in ((3, 0), (4, 42)):  # dumped segments showing no entry, each in a file of its own
        files.append(tmp_path / f"quiet-{partition}.txt")
        shown = f"/var/lib/kafka/data/quiet-{partition}/{offset:020d}.log"
        files[-1].write_text(f"Dumping {shown}\nLog starting offset: {offset}\n")
    files.append(tmp_path / "empty.txt")
    files[-1].write_text("")
    inputs = [(str(f), "b1", True) for f in files]
    lines = pa.concat_tables([_all_lines(f) for f in files[:-1]])
    names = replica_names(lines)
    for output in (SUMMARY, RECORDS):
        want = [t for path, loc, named in inputs for t in file_rows(path, names, output, loc, named, chunk)]
        got = list(files_rows(inputs, names, output, chunk))
        assert sum(t.num_rows for t in want) > len(files)
        assert all(t.schema == want[0].schema for t in got)
        assert _sorted(pa.concat_tables(got)) == _sorted(pa.concat_tables(want)), output


@pytest.mark.parametrize("chunk", [2000, 1 << 20])
def test_one_pass_named_afterwards_gives_each_output_s_rows(dump: Path, tmp_path: Path, chunk: int) -> None:
    """The one pass (``both``: both outputs' rows, the brokers as printed, and the "Dumping" lines) named
    afterwards (``named_outputs``) gives the rows of the ``summary`` and ``records`` passes read with the names
    of every "Dumping" line: here two replicas told apart by their dump files' names (the same printed paths in
    two files), a dumped segment with no entry and an empty file."""
    files = [tmp_path / "b1.txt", tmp_path / "b2.txt", tmp_path / "quiet.txt", tmp_path / "empty.txt"]
    files[0].write_bytes(dump.read_bytes())
    files[1].write_bytes(dump.read_bytes())
    files[2].write_text("Dumping /var/lib/kafka/data/quiet-3/00000000000000000000.log\nLog starting offset: 0\n")
    files[3].write_text("")
    inputs = [(str(f), None, False) for f in files]
    lines = pa.Table.from_batches(
        [parse_lines(b) for f in files for b in iter_line_batches(str(f), 1 << 20, None, False)]
    )
    names = replica_names(lines)
    assert len(set(names.values())) > 1
    summary, records = named_outputs(pa.concat_tables(files_rows(inputs, {}, BOTH, chunk)))
    for output, got in ((SUMMARY, summary), (RECORDS, records)):
        want = pa.concat_tables(files_rows(inputs, names, output, chunk))
        assert want.num_rows > 0
        assert got.schema == want.schema
        assert _sorted(got) == _sorted(want), output


@pytest.mark.parametrize("chunk", [7, 2000, 1 << 20])
def test_names_from_the_dumping_lines_alone_are_those_of_every_line(dump: Path, tmp_path: Path, chunk: int) -> None:
    """``dumping_lines`` finds each file's "Dumping" lines by a byte search, for chunks that cut them (CRLF, a
    first line that is one, no newline at the end, an empty file), and ``listed_names`` gives the names and the
    ``__transaction_state`` dumps that every line read and parsed gives."""
    files = [tmp_path / "b1.txt", tmp_path / "b2.txt", tmp_path / "quiet.txt", tmp_path / "empty.txt"]
    files[0].write_bytes(dump.read_bytes())
    files[1].write_bytes(dump.read_bytes().split(b"\r\n", 1)[1])  # its first line a "Dumping" line
    files[2].write_text("Dumping /var/lib/kafka/data/quiet-3/00000000000000000000.log")
    files[3].write_text("")
    inputs = [(str(f), None, False) for f in files]
    raw = pa.Table.from_batches([b for f in files for b in iter_line_batches(str(f), 1 << 20, None, False)])
    lines = pa.Table.from_batches([parse_lines(b) for b in raw.to_batches()])
    dumping = raw.filter(pa.compute.starts_with(raw.column("line"), "Dumping "))
    found = pa.Table.from_batches([dumping_lines(str(f), None, False, chunk) for f in files])
    assert found.column("line").to_pylist() == dumping.column("line").to_pylist()
    assert found.column("file").to_pylist() == dumping.column("file").to_pylist()
    names, coordinator = listed_names(inputs)
    assert len(set(names.values())) > 1
    assert names == replica_names(lines)
    txn = set(lines.filter(lines.column("is_txn_state")).column("file").to_pylist())
    assert coordinator == [f for f, _, _ in inputs if f in txn] == [str(files[0]), str(files[1])]
