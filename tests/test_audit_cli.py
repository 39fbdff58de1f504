"""``txnlog audit`` over tables the job wrote (in this process, no Spark: small inputs) from broker-log writer
scenarios: one with a ``.txnindex`` entry removed (``index_entry_missing``: ABORTED_DATA_VISIBLE), one with a
spurious entry (``index_entry_spurious``: COMMITTED_DATA_HIDDEN), one without a fault (``markers_pending``), and
the kafka-dump-log.sh text of the last one (no ``.txnindex``: INDEX_NOT_CHECKED). The rows printed are the
``integrity`` rows as written; the writer's ground truth (``notes["integrity"]``) says which anomalies there are.
The per-check counts of the ``runs`` row and the run summary are checked on the same runs."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.shared import render_broker_dumps
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.model.config import load_config
from txnlog.model.contract import ANOMALY_CHECKS, RUNS, IntegrityCheck, check_count_column
from txnlog.ops.cli import AUDIT_FAIL_ON, main
from txnlog.output.delta import read_table
from txnlog.pipeline import RunResult, run

FAULTS = ("index_entry_missing", "index_entry_spurious")


@dataclass(frozen=True)
class Written:
    output: str
    truth: list[dict[str, Any]]  # the writer's injected anomalies
    result: RunResult


def _job(tmp: Path, name: str, *, dump: bool = False) -> Written:
    truth = write_scenario(name, tmp / "logs")
    inputs = {"logs": [str(truth.root)]}
    if dump:
        render_broker_dumps(truth.root, tmp / "dumps")
        inputs = {"dump_log": [str(d) for d in sorted((tmp / "dumps").iterdir())]}
    out = str(tmp / "out")
    config = load_config(
        None, {**inputs, "output": out, "as_of": str(truth.as_of_ms), "cluster": name, "progress": False}
    )
    result = run(config, progress=lambda _m: None)
    return Written(out, list(truth.notes.get("integrity", [])), result)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    """Each scenario's job run, once for the module (a few seconds each, no Spark)."""
    runs = {name: _job(tmp_path_factory.mktemp(name), name) for name in (*FAULTS, "markers_pending")}
    runs["dump"] = _job(tmp_path_factory.mktemp("dump"), "markers_pending", dump=True)
    return runs


def _audit(w: Written, *argv: str, code: int | None = None) -> tuple[int, str]:
    out = io.StringIO()
    rc = main(["audit", "--output", w.output, *argv], out=out)
    assert code is None or rc == code, (rc, out.getvalue())
    return rc, out.getvalue()


def _printed(text: str, fmt: str) -> list[dict[str, str]]:
    """The rows printed, header → value (none: '-')."""
    if fmt == "table":
        head, *body = [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines() if "\t" in line]
        return [dict(zip(head, r, strict=True)) for r in body]
    if fmt == "json":
        return [{k: "-" if v is None else str(v) for k, v in json.loads(line).items()} for line in text.splitlines()]
    return [{k: v or "-" for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]


def _integrity(w: Written) -> list[dict[str, Any]]:
    return read_table(w.output, "integrity").to_pylist()


@pytest.mark.parametrize("name", FAULTS)
def test_audit_lists_the_injected_anomaly_and_exits_1(written: dict[str, Written], name: str) -> None:
    w = written[name]
    assert w.truth, "the scenario injects a fault"
    rc, text = _audit(w)
    rows = _printed(text, "table")
    errors = {
        (r["Check"], r["Topic"], int(r["Partition"]), r["Replica"], int(r["ProducerId"]), int(r["MarkerOffset"]))
        for r in rows
        if r["Severity"] == "ERROR"
    }
    injected = {
        (t["check"], t["topic"], t["partition"], t["replica"], t["producer_id"], t["marker_offset"]) for t in w.truth
    }
    assert errors == injected and rc == 1
    # every written row is printed, once, with its values
    table = _integrity(w)
    assert len(rows) == len(table) > 0
    for printed, row in zip(
        sorted(rows, key=lambda r: r["FirstOffset"]), sorted(table, key=lambda r: str(r["first_offset"])), strict=True
    ):
        assert (
            printed["Records"] == str(row["records_affected"]) and printed["RestartRepairs"] == row["restart_repairs"]
        )


def test_the_formats_print_the_same_rows_and_verbose_adds_evidence(written: dict[str, Written]) -> None:
    w = written["index_entry_missing"]
    shown = {fmt: _printed(_audit(w, "--format", fmt, code=1)[1], fmt) for fmt in ("table", "json", "csv")}
    times = [{k: v for k, v in r.items() if k in ("From", "To")} for r in shown["json"]]
    assert [{k: v[:19] + "Z" for k, v in t.items()} for t in times] == [  # json: ISO-8601 with the fraction
        {k: v for k, v in r.items() if k in ("From", "To")} for r in shown["table"]
    ]
    untimed = {
        fmt: [{k: v for k, v in r.items() if k not in ("From", "To")} for r in rows] for fmt, rows in shown.items()
    }
    assert untimed["table"] == untimed["json"] == untimed["csv"] and shown["table"] == shown["csv"]
    (row,) = _integrity(w)
    _, text = _audit(w, "-v", code=1)
    assert f"{row['evidence']}\n  advice: {row['advice']}" in text
    (verbose,) = [json.loads(line) for line in _audit(w, "-v", "--format", "json", code=1)[1].splitlines()]
    assert (verbose["Evidence"], verbose["Advice"], verbose["KafkaClass"]) == (
        row["evidence"],
        row["advice"],
        row["kafka_class"],
    )


def test_filters_and_fail_on(written: dict[str, Written]) -> None:
    w = written["index_entry_missing"]
    (row,) = _integrity(w)
    other = next(c for c in IntegrityCheck if c != row["check"])
    assert _audit(w, "--check", other, code=0)[1].count("\n") == 1  # the header only
    assert _audit(w, "--check", row["check"].lower(), code=1)[1].count("\n") == 2
    assert _audit(w, "--topic", row["topic"], "--partition", str(row["partition"]), code=1)
    assert _audit(w, "--replica", "no-such-broker", code=0)
    assert _audit(w, "--fail-on", "never", code=0)
    assert _audit(w, "--fail-on", "error", code=1)
    assert _audit(w, "--check", "NO_SUCH_CHECK", code=2)
    assert _audit(w, "--topic", row["topic"], "--partition", "999", code=2)


def test_a_run_without_a_fault_lists_nothing_and_exits_0(written: dict[str, Written]) -> None:
    w = written["markers_pending"]
    assert w.truth == [] and _integrity(w) == []
    assert _audit(w, code=0)[1].count("\n") == 1
    assert _audit(w, "--fail-on", "not-checked", code=0)


def test_not_checked_rows_are_listed_but_fail_only_when_asked(written: dict[str, Written]) -> None:
    """A dump (kafka-dump-log.sh text) has no .txnindex: every partition read is INDEX_NOT_CHECKED, no anomaly."""
    w = written["dump"]
    table = _integrity(w)
    assert table and {(r["check"], r["severity"]) for r in table} == {("INDEX_NOT_CHECKED", "NOT_CHECKED")}
    _, text = _audit(w, code=0)
    assert len(_printed(text, "table")) == len(table)
    assert _audit(w, "--fail-on", "error", code=0)
    assert _audit(w, "--fail-on", "not-checked", code=1)


def test_the_runs_row_counts_each_check(written: dict[str, Written]) -> None:
    for w in written.values():
        (runs,) = [r for r in read_table(w.output, "runs").to_pylist() if r["status"] == "SUCCEEDED"]
        table = _integrity(w)
        anomalies = [r for r in table if r["severity"] != "NOT_CHECKED"]
        assert runs["integrity_count"] == len(table)
        assert runs["integrity_anomaly_count"] == len(anomalies)
        assert runs["integrity_not_checked_count"] == len(table) - len(anomalies)
        for check in ANOMALY_CHECKS:
            assert runs[check_count_column(check)] == sum(r["check"] == check for r in anomalies), check
        assert set(w.result.integrity) == {t["check"] for t in w.truth}


def test_the_run_summary_names_the_anomalies(written: dict[str, Written]) -> None:
    missing = written["index_entry_missing"].result.summary_text()
    assert "integrity audit: 1 anomaly (ABORTED_DATA_VISIBLE 1)" in missing and "txnlog audit" in missing
    assert "integrity audit: no anomaly\n" in written["markers_pending"].result.summary_text()
    n = len(_integrity(written["dump"]))
    assert f"integrity audit: no anomaly; {n} partitions not checked" in written["dump"].result.summary_text()


def test_every_anomaly_check_has_a_runs_column_and_fail_on_is_documented() -> None:
    from txnlog.ops.audit import FAIL_ON

    assert {check_count_column(c) for c in ANOMALY_CHECKS} <= set(RUNS.names)
    assert set(AUDIT_FAIL_ON) == set(FAIL_ON)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert all(f"`{c}`" in readme for c in IntegrityCheck)
    assert all(f"--fail-on {v}" in readme or f"`{v}`" in readme for v in AUDIT_FAIL_ON)


def test_help_stays_lazy() -> None:
    """Building the parser (``txnlog --help``, a usage error) loads neither pyarrow nor delta-rs."""
    import subprocess
    import sys

    code = "import sys; from txnlog.ops.cli import build_parser; build_parser(); print(sorted(m for m in ('pyarrow', 'deltalake') if m in sys.modules))"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_the_readme_runbook_step_prints_what_it_shows(written: dict[str, Written]) -> None:
    """README's "consumers saw aborted data": each command of its marked block, on the scenario it names, prints
    the lines shown (tabs as spaces there), and the job's summary line it quotes is the run's."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- runbook:(\w+) -->\n```console\n(.*?)```", readme, flags=re.S)
    assert [name for name, _ in blocks] == ["index_entry_missing"]
    for name, block in blocks:
        command, *shown = block.splitlines()
        assert command.startswith("$ txnlog audit")
        out = io.StringIO()
        rc = main([*command.split()[2:], "--output", written[name].output], out=out)
        assert rc == 1 and [line.split() for line in out.getvalue().splitlines()] == [line.split() for line in shown]
    (quoted,) = [line for line in readme.splitlines() if line.startswith("  integrity audit: 1 anomaly")]
    assert quoted in written["index_entry_missing"].result.summary_text().splitlines()
