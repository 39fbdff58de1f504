"""Every read-back example in the README runs as printed: the blocks marked
``<!-- readback:NAME -->`` are cut out of README.md and run in a directory holding ``./out``, a small
output written with txnlog's own writer (two runs), then what each read is checked against the table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from txnlog.model import contract as tables
from txnlog.output.delta import read_table, write_tables

ROOT = Path(__file__).resolve().parents[1]
AS_OF = [datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC)]


def examples() -> dict[str, tuple[str, str]]:
    """name -> (language, code) of the README's marked blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- readback:(\w+) -->\n```(\w+)\n(.*?)```", text, flags=re.S)
    return {name: (lang, code) for name, lang, code in found}


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("readme")
    for i, as_of in enumerate(AS_OF):
        rows = [
            {"topic": "orders", "partition": 5, "producer_id": 40015, "start_offset": 897 + i, "verdict": "HANGING",
             "reason": "NO_TRANSACTIONAL_ID"},
            {"topic": "orders", "partition": 6, "producer_id": 40016, "start_offset": 10, "verdict": "LATE",
             "reason": "MARKERS_PENDING"},
        ]  # fmt: skip
        keys = {"cluster": "c1", "as_of": as_of}
        data = pa.Table.from_pylist(
            [{**{f.name: None for f in tables.FINDINGS}, **keys, **r} for r in rows], schema=tables.FINDINGS
        )
        write_tables(None, str(work / "out"), {"findings": data}, cluster="c1", as_of=as_of)
    return work


def test_the_readme_has_every_engine() -> None:
    assert set(examples()) == {"deltalake", "polars", "spark", "duckdb"}


def _run_python(code: str, cwd: Path, tail: str) -> str:
    """The example in a fresh interpreter (its exit is part of what is tested: delta-rs #2184)."""
    script = code + "\n" + tail
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_deltalake_example(out: Path) -> None:
    _lang, code = examples()["deltalake"]
    for _ in range(3):  # the unsafe form aborted at exit 3 times in 5
        printed = _run_python(code, out, "print(findings.num_rows)")
        assert int(printed) == read_table(str(out / "out"), "findings").num_rows == 4


def test_polars_example(out: Path) -> None:
    _lang, code = examples()["polars"]
    printed = _run_python(code, out, "print(findings.height, newest.height, sorted(newest['start_offset']))")
    assert printed.split(maxsplit=2) == ["4", "2", "[10, 898]\n"]


def test_duckdb_example(out: Path) -> None:
    import duckdb

    from tests.spark.test_delta import _duckdb_with_delta

    _lang, sql = examples()["duckdb"]
    con: duckdb.DuckDBPyConnection = _duckdb_with_delta()
    statements = [
        s.strip() for s in sql.split(";") if s.strip() and not s.strip().upper().startswith(("INSTALL", "LOAD"))
    ]
    cwd = os.getcwd()
    try:
        os.chdir(out)
        got = con.execute(statements[-1]).fetchall()
    finally:
        os.chdir(cwd)
    assert got == [("HANGING", "NO_TRANSACTIONAL_ID", 1), ("LATE", "MARKERS_PENDING", 1)]


def test_spark_example(out: Path, spark) -> None:
    _lang, code = examples()["spark"]
    cwd = os.getcwd()
    scope: dict = {"spark": spark}
    try:
        os.chdir(out)
        exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example, as printed
    finally:
        os.chdir(cwd)
    assert scope["findings"].count() == 4
