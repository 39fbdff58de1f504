"""The run's metrics at the edges the job's runs do not reach (tests/e2e/test_metrics_job.py compares a run's file
and push with its tables): what is left out when the run has no consumer groups or no audit, two groups whose
names read as one string, the OpenMetrics exposition of the same registry, and a file or push that fails (a warning
line naming the setting, against a real HTTP server answering 500 and a port nobody listens on)."""

from __future__ import annotations

import http.server
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_client import REGISTRY
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from txnlog.model import contract
from txnlog.output import prometheus
from txnlog.rules import metrics

AS_OF = datetime(2026, 11, 2, tzinfo=UTC)
KEY = {"cluster": "c", "as_of": AS_OF}


def _table(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{**KEY, **r} for r in rows], schema=schema)


def _tables(*, blocked: list[dict[str, Any]] | None, integrity: bool, offsets_partition: bool = True) -> dict:
    health = [{"topic": "orders", "partition": 0, "source": "segments", "lso_lag": 5, "max_open_ms": 2500}]
    if offsets_partition:
        health.append({"topic": "__consumer_offsets", "partition": 3, "source": "segments", "lso_lag": 0})
    finding = {"topic": "orders", "partition": 0, "verdict": "HANGING", "reason": "NO_TRANSACTIONAL_ID",
               "source": "segments"}  # fmt: skip
    run = {"run_id": "r1", "started_at": AS_OF, "finished_at": AS_OF + timedelta(seconds=7), "status": "SUCCEEDED",
           "findings_count": 1, "split_outcome_count": 2, "integrity_not_checked_count": 1}  # fmt: skip
    out: dict[str, Any] = {
        "runs": _table(contract.RUNS, [run]),
        "findings": _table(contract.FINDINGS, [finding]),
        "partition_health": _table(contract.PARTITION_HEALTH, health),
    }
    if blocked is not None:
        out["blocked_consumers"] = _table(contract.BLOCKED_CONSUMERS, blocked)
    if integrity:
        out["integrity"] = _table(contract.INTEGRITY, [])
    return out


def _names(tables: dict) -> set[str]:
    return {m.name for m in metrics.metric_families(tables)}


def test_no_group_counts_without_consumer_groups_read_and_no_audit_counts_without_the_audit():
    assert not {n for n in _names(_tables(blocked=[], integrity=False, offsets_partition=False)) if "blocked" in n}
    assert not {n for n in _names(_tables(blocked=None, integrity=False)) if "integrity" in n or "blocked" in n}
    with_both = _names(_tables(blocked=[], integrity=True))
    assert {"txnlog_blocked_consumer_groups", "txnlog_integrity_anomalies"} <= with_both


def test_a_finding_naming_no_group_says_groups_were_read():
    tables = _tables(blocked=[], integrity=False, offsets_partition=False)
    assert "txnlog_blocked_consumer_groups" not in _names(tables)  # blocked_groups null: no group read
    findings = tables["findings"]
    named = pa.array([[]], pa.list_(pa.string()))  # read (live, say), and none blocked behind it
    tables["findings"] = findings.set_column(findings.schema.get_field_index("blocked_groups"), "blocked_groups", named)
    assert "txnlog_blocked_consumer_groups" in _names(tables)


def test_zero_where_the_run_read_groups_and_found_none_blocked():
    (groups,) = [m for m in metrics.metric_families(_tables(blocked=[], integrity=True))
                 if m.name == "txnlog_blocked_consumer_groups"]  # fmt: skip
    assert {s.labels["status"]: s.value for s in groups.samples} == dict.fromkeys(metrics.STATUSES, 0.0)


def test_two_groups_whose_names_read_as_one_string_make_one_series():
    row = {"group": "g\ufffd", "topic": "orders", "partition": 0, "status": "BLOCKED", "holding_producer_id": 7,
           "source": "segments", "offsets_to_high_watermark": 4, "blocked_since": AS_OF - timedelta(seconds=30)}  # fmt: skip
    later = {**row, "offsets_to_high_watermark": 9, "blocked_since": AS_OF - timedelta(seconds=10)}
    text = prometheus_text(_tables(blocked=[row, later], integrity=True))
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["txnlog_blocked_consumer_offsets"].value == 9
    assert samples["txnlog_blocked_consumer_seconds"].value == 30  # the longer wait
    assert samples["txnlog_blocked_consumer_seconds"].labels["group"] == "g\ufffd"
    groups = {s.labels["status"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
              if s.name == "txnlog_blocked_consumer_groups"}  # fmt: skip
    assert groups["BLOCKED"] == 1


def prometheus_text(tables: dict) -> str:
    return generate_latest(metrics.registry(tables)).decode("utf-8")


def test_the_registry_is_the_runs_own_and_reads_as_openmetrics_too():
    registry = metrics.registry(_tables(blocked=[], integrity=True))
    assert (
        registry is not REGISTRY and REGISTRY.get_sample_value("txnlog_run_duration_seconds", {"cluster": "c"}) is None
    )
    assert registry.get_sample_value("txnlog_run_duration_seconds", {"cluster": "c"}) == 7
    assert registry.get_sample_value("txnlog_lso_lag_seconds", {"cluster": "c", "topic": "orders", "partition": "0",
                                                                 "source": "segments"}) == 2.5  # fmt: skip
    assert registry.get_sample_value("txnlog_integrity_anomalies", {"cluster": "c", "check": "SPLIT_OUTCOME"}) == 2
    families = {f.name: f for f in openmetrics_families(openmetrics_latest(registry).decode("utf-8"))}
    assert families["txnlog_run_duration_seconds"].unit == "seconds"
    assert families["txnlog_lso_lag_offsets"].unit == "offsets"


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_file_or_push_that_fails_is_one_line_naming_the_setting(tmp_path: Path):
    registry = metrics.registry(_tables(blocked=[], integrity=True))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        failing = f"http://127.0.0.1:{server.server_address[1]}"
        done, problems = prometheus.publish(registry, cluster="c", textfile=str(tmp_path / "no" / "t.prom"),
                                            pushgateway=failing)  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done == []
    assert problems[0].startswith(f"metrics_file {tmp_path}/no/t.prom: not written (No such file or directory)")
    assert problems[1].startswith(f"pushgateway {failing}: push failed (HTTP Error 500")
    nobody = f"http://127.0.0.1:{_closed_port()}"
    done, problems = prometheus.publish(registry, cluster="c", textfile=str(tmp_path / "t.prom"), pushgateway=nobody)
    assert done == [f"written to {tmp_path}/t.prom"] and len(problems) == 1
    assert problems[0].startswith(f"pushgateway {nobody}: push failed (") and "\n" not in problems[0]
    assert [p.name for p in tmp_path.iterdir()] == ["t.prom"]
