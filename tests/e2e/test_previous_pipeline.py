"""A pipeline refactor changes no output: every table, row for row, equals what the previous pipeline wrote.

The fixtures under ``tests/fixtures/previous_pipeline/<input>/<table>.parquet`` were written by the
pipeline of commit 4810dc3 (the README next to them says how). This test reads the tables the *current*
job wrote through ``./spark-submit.sh`` on the same two inputs, with the same ``as_of`` and ``cluster`` --
the session's shared runs (tests/e2e/shared.py), which other modules read too:

* ``sample``: the README's command (no input: the embedded sample cluster, deterministic,
  ``txnlog.sources.sample``), whose cluster ``sample`` and natural ``as_of`` are the fixture's (asserted);
* ``messy_dumps``: the writer's ``messy_incident`` scenario (seed 3) printed as kafka-dump-log.sh
  output, one directory per broker, passed as ``--dump-log <dir>`` per broker with ``--cluster messy-dumps
  --as-of`` the scenario's as_of (tests/e2e/test_messy.py reads the same run).

and compares every table except ``runs`` (which holds a run id, wall-clock durations and the
effective config): same row count and, after sorting both sides by every column, equal values in
every column of the fixture, list columns in their stored order. None of the compared tables holds a
per-run column, so nothing is ignored; ``cluster`` and ``as_of`` must be equal too.

Paths: the inputs live in a temporary directory, and a few string values name a file in it
(``quarantine.file`` for the sample's segments, ``quarantine.detail`` for a dump line). Every string
value, in every column, has that directory's prefix replaced with a placeholder -- ``<sample-logs>``
for ``$TXNLOG_CACHE/sample-<version>-seed<seed>-<writer>/logs``, ``<dumps>`` for the dumps directory
-- in the actual rows here and, when they were written, in the fixtures (which therefore hold no
machine-specific paths). Paths the dumps print themselves (``/var/lib/kafka/data/...``) are input, kept.

An output change that is *intended* regenerates the fixtures from the current job:
``TXNLOG_REGENERATE_PREVIOUS_PIPELINE=1 .venv/bin/python -m pytest tests/e2e/test_previous_pipeline.py``
(the tests then write the fixtures and skip), and the commit says why the output changed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "previous_pipeline"
REGENERATE = os.environ.get("TXNLOG_REGENERATE_PREVIOUS_PIPELINE") == "1"

TABLES = (
    "transactions",
    "findings",
    "abort_recommendations",
    "partition_health",
    "producer_state",
    "coordinator_state",
    "coordinator_history",
    "quarantine",
    "integrity",
)
NOT_COMPARED = {"runs", "blocked_consumers"}  # runs: run id, wall-clock timings, effective config: per run by
# design; blocked_consumers: newer than the previous pipeline (tests/e2e/test_blocked_consumers_job.py asserts it)

# The as_of of each input: what the previous pipeline picked on its own (runs.as_of, as_of_source
# log_append_time), pinned so that the fixture is the job's natural output (the messy dumps' is
# tests/e2e/shared.py MESSY_AS_OF, given with --as-of; the sample's is the README run's own, asserted).
SAMPLE_AS_OF = "1718020807806"  # 2024-06-10T12:00:07.806Z
SAMPLE_CLUSTER = "sample"

SHOW = 5  # differing rows shown in a failure


@dataclass
class Output:
    out: Path
    placeholders: dict[str, str]  # path prefix -> placeholder


# --- the inputs: the session's shared runs (tests/e2e/shared.py) ----------------------------------------


@pytest.fixture(scope="module")
def sample_output(readme_run) -> Output:
    """The README command's run: the embedded sample, cluster ``sample``, its natural as_of (pinned here)."""
    assert readme_run.proc.returncode == 0, readme_run.proc.stderr[-3000:]
    (run,) = read_delta(Path(readme_run.out), "runs", {}).to_pylist()
    assert (run["cluster"], str(_epoch_ms(run["as_of"]))) == (SAMPLE_CLUSTER, SAMPLE_AS_OF)
    (logs,) = (readme_run.workdir / "cache").glob("sample-*/logs")
    return Output(Path(readme_run.out), {str(logs): "<sample-logs>"})


@pytest.fixture(scope="module")
def messy_dumps_output(messy_dumps_run, messy_incident) -> Output:
    """``--dump-log`` per broker directory, ``--cluster messy-dumps --as-of`` MESSY_AS_OF."""
    return Output(Path(messy_dumps_run.out), {str(messy_incident.dumps): "<dumps>"})


def _epoch_ms(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


INPUTS = {"sample": "sample_output", "messy_dumps": "messy_dumps_output"}


# --- normalising, sorting, reading, writing ---------------------------------------------------------


def normalise(value: Any, placeholders: dict[str, str]) -> Any:
    """Every string (also inside lists) with the input's temporary path prefix replaced."""
    if isinstance(value, str):
        for prefix, placeholder in placeholders.items():
            value = value.replace(prefix, placeholder)
        return value
    if isinstance(value, list):
        return [normalise(v, placeholders) for v in value]
    return value


def _sort_key(value: Any) -> tuple:
    """Total order over a column value: nulls first, lists element by element."""
    if value is None:
        return (0,)
    if isinstance(value, list):
        return (1, tuple(_sort_key(v) for v in value))
    return (1, value)


def sorted_rows(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    """Rows ordered by the full key: every column, in the fixture's column order."""
    return sorted(rows, key=lambda r: tuple(_sort_key(r.get(c)) for c in columns))


def read_delta(out: Path, table: str, placeholders: dict[str, str]) -> pa.Table:
    from deltalake import DeltaTable

    data = DeltaTable(str(out / table)).to_pyarrow_table()
    rows = [{k: normalise(v, placeholders) for k, v in r.items()} for r in data.to_pylist()]
    return pa.Table.from_pylist(sorted_rows(rows, data.schema.names), schema=data.schema)


def write_fixture(data: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, compression="zstd", compression_level=19)


def _show(row: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()) + "}"


def _fmt(v: Any) -> str:
    return v.isoformat() if isinstance(v, datetime) else repr(v)


def differences(table: str, want: pa.Table, got: pa.Table) -> list[str]:
    """Readable differences, empty when every fixture column of every row is equal."""
    if want.equals(got):  # the same columns, types and rows, in the same order: nothing to tell
        return []
    problems: list[str] = []
    columns = want.schema.names
    missing = [c for c in columns if c not in got.schema.names]
    if missing:
        problems.append(f"{table}: columns missing from the output: {missing}")
    common = [c for c in columns if c not in missing]
    types = [
        f"{c}: {want.schema.field(c).type} -> {got.schema.field(c).type}"
        for c in common
        if not want.schema.field(c).type.equals(got.schema.field(c).type)
    ]
    if types:
        problems.append(f"{table}: column types changed: {types}")
    if want.num_rows != got.num_rows:
        problems.append(f"{table}: {got.num_rows} rows, the previous pipeline wrote {want.num_rows}")
    want_rows = sorted_rows([{c: r[c] for c in common} for r in want.to_pylist()], common)
    got_rows = sorted_rows([{c: r[c] for c in common} for r in got.to_pylist()], common)
    if want_rows == got_rows:
        return problems
    # rows present on one side only (as multisets), then the first differing pairs in sorted order
    want_count = Counter(repr(tuple(r.values())) for r in want_rows)
    got_count = Counter(repr(tuple(r.values())) for r in got_rows)
    only_want = [r for r in want_rows if want_count[repr(tuple(r.values()))] > got_count[repr(tuple(r.values()))]]
    only_got = [r for r in got_rows if got_count[repr(tuple(r.values()))] > want_count[repr(tuple(r.values()))]]
    problems.append(
        f"{table}: {len(only_want)} row(s) of the previous pipeline not in the output, "
        f"{len(only_got)} row(s) of the output it did not write"
    )
    problems += [f"  previous only: {_show(r)}" for r in only_want[:SHOW]]
    problems += [f"  output only:   {_show(r)}" for r in only_got[:SHOW]]
    if len(only_want) == len(only_got):  # changed values rather than lost/extra rows: which columns
        for w, g in list(zip(only_want, only_got))[:SHOW]:
            diff = ", ".join(f"{c}: {_fmt(w[c])} -> {_fmt(g[c])}" for c in common if w[c] != g[c])
            problems.append(f"  changed: {diff}")
    return problems


# --- the tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("input_name", list(INPUTS))
def test_same_tables(request, input_name: str) -> None:
    """The job writes the same tables as before: those compared here, and runs."""
    output: Output = request.getfixturevalue(INPUTS[input_name])
    written = {p.name for p in output.out.iterdir() if (p / "_delta_log").is_dir()}
    assert written == set(TABLES) | NOT_COMPARED


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("input_name", list(INPUTS))
def test_table_equals_previous_pipeline(request, input_name: str, table: str) -> None:
    output: Output = request.getfixturevalue(INPUTS[input_name])
    got = read_delta(output.out, table, output.placeholders)
    path = FIXTURES / input_name / f"{table}.parquet"
    if REGENERATE:
        write_fixture(got, path)
        pytest.skip(f"regenerated {path}")
    assert path.exists(), f"no fixture {path}: see {FIXTURES / 'README.md'}"
    want = pq.read_table(path)
    rows = [{k: normalise(v, output.placeholders) for k, v in r.items()} for r in want.to_pylist()]
    want = pa.Table.from_pylist(rows, schema=want.schema)
    problems = differences(table, want, got)
    assert not problems, f"{input_name}/{table} differs from the previous pipeline's output:\n" + "\n".join(problems)
