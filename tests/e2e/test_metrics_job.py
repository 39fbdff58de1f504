"""The run's metrics, through the job: ``--metrics-file`` and ``--pushgateway`` on two writer scenarios (consumer
groups behind a hanging transaction; an integrity fault), run as ``./spark-submit.sh`` runs a small input (the job
script's ``main``, no JVM). The file parses with the Prometheus client's own parser, every value equals what the
Delta tables read back hold for the same run, and the push reaches a real HTTP server on 127.0.0.1 (a Pushgateway's
API: PUT /metrics/job/<job>/cluster/<cluster>) with the same exposition."""

from __future__ import annotations

import contextlib
import http.server
import io
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.jobrun import ROOT, job_module
from txnlog.output.delta import read_table

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

STALLED = ("BLOCKED", "UNSTABLE_OFFSET_COMMIT")


class _Gateway(http.server.BaseHTTPRequestHandler):
    """What a Pushgateway answers a push (200, empty), each request kept as (method, path, body)."""

    received: list[tuple[str, str, bytes]] = []

    def _store(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.command, self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST = _store

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Gateway", (_Gateway,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _job(work: Path, scenario: str, cluster: str, gateway: str) -> dict[str, Any]:
    from txnlog.broker.as_of import from_ms
    from txnlog.brokerlog.scenarios import write_scenario

    result = write_scenario(scenario, work / "logs", seed=1)
    prom = work / "textfile" / f"txnlog-{cluster}.prom"
    prom.parent.mkdir(parents=True)
    args = [
        "--logs", str(work / "logs"), "--output", str(work / "out"), "--cluster", cluster,
        "--as-of", from_ms(result.as_of_ms).isoformat(), "--metrics-file", str(prom), "--pushgateway", gateway,
        "--here-if-small",  # as ./spark-submit.sh runs a small input: in this process, no JVM
    ]  # fmt: skip
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = job_module().main(args)
    assert code == 0, printed.getvalue()[-3000:]
    tables = {t: read_table(str(work / "out"), t, cluster=cluster).to_pylist() for t in _TABLES}
    return {"work": work, "prom": prom, "text": prom.read_text(encoding="utf-8"), "tables": tables, "result": result,
            "printed": printed.getvalue(), "cluster": cluster}  # fmt: skip


_TABLES = ("findings", "partition_health", "blocked_consumers", "integrity", "runs", "transactions", "quarantine")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, gateway) -> dict[str, dict[str, Any]]:
    url, _ = gateway
    return {
        "blocked": _job(
            tmp_path_factory.mktemp("metrics-blocked"), "groups_behind_hanging_transaction", "prod-eu", url
        ),
        "integrity": _job(tmp_path_factory.mktemp("metrics-integrity"), "index_entry_missing", "idx", url),
    }


def _samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Family name -> {sorted labels: value}, as the Prometheus client's parser reads ``text``."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        for s in family.samples:
            key = tuple(sorted(s.labels.items()))
            assert key not in out.setdefault(s.name, {}), f"{s.name}{dict(key)} twice"
            out[s.name][key] = s.value
    return out


def _labels(**kw: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in kw.items()))


@pytest.mark.parametrize("name", ["blocked", "integrity"])
def test_the_text_file_holds_the_tables_values(runs, name):
    run = runs[name]
    got, t, c = _samples(run["text"]), run["tables"], run["cluster"]
    (row,) = t["runs"]
    assert row["status"] == "SUCCEEDED"
    # the run
    assert got["txnlog_run_as_of_timestamp_seconds"] == {_labels(cluster=c): row["as_of"].timestamp()}
    assert got["txnlog_run_finished_timestamp_seconds"] == {_labels(cluster=c): row["finished_at"].timestamp()}
    duration = (row["finished_at"] - row["started_at"]).total_seconds()
    assert got["txnlog_run_duration_seconds"] == {_labels(cluster=c): pytest.approx(duration)}
    info = _labels(cluster=c, run_id=row["run_id"], version=row["txnlog_version"], as_of_source="--as-of",
                   status="SUCCEEDED")  # fmt: skip
    assert got["txnlog_run_info"] == {info: 1.0}
    for table in ("findings", "partition_health", "transactions", "quarantine", "integrity"):
        assert got["txnlog_table_rows"][_labels(cluster=c, table=table)] == len(t[table]), table
    late = sum(1 for h in t["partition_health"] if h["has_late_transaction"])
    assert got["txnlog_partitions_with_late_transactions"] == {_labels(cluster=c): late}
    # findings by verdict and reason; the LSO lag of their partitions
    by_reason = Counter((f["verdict"], f["reason"], f["source"]) for f in t["findings"])
    assert got.get("txnlog_findings", {}) == {
        _labels(cluster=c, verdict=v, reason=r, source=s): n for (v, r, s), n in by_reason.items()
    }
    found = {(f["topic"], f["partition"]) for f in t["findings"]}
    health = [h for h in t["partition_health"] if (h["topic"], h["partition"]) in found]
    lag = {_labels(cluster=c, topic=h["topic"], partition=h["partition"], source=h["source"]): h for h in health}
    assert got.get("txnlog_lso_lag_offsets", {}) == {k: h["lso_lag"] for k, h in lag.items()}
    assert got.get("txnlog_lso_lag_seconds", {}) == {k: h["max_open_ms"] / 1000 for k, h in lag.items()}
    # integrity anomalies by check (every check the audit has, 0 where none)
    anomalies = Counter(r["check"] for r in t["integrity"] if r["severity"] != "NOT_CHECKED")
    checks = {dict(k)["check"] for k in got["txnlog_integrity_anomalies"]}
    assert set(anomalies) <= checks
    assert got["txnlog_integrity_anomalies"] == {_labels(cluster=c, check=k): anomalies[k] for k in checks}
    not_checked = sum(1 for r in t["integrity"] if r["severity"] == "NOT_CHECKED")
    assert got["txnlog_integrity_not_checked_partitions"] == {_labels(cluster=c): not_checked}


def test_blocked_groups_as_the_table_and_the_scenario_say(runs):
    run = runs["blocked"]
    got, c = _samples(run["text"]), run["cluster"]
    rows = run["tables"]["blocked_consumers"]
    (as_of,) = {r["as_of"] for r in rows}
    groups: dict[str, set[str]] = {}
    for r in rows:
        groups.setdefault(r["status"], set()).add(r["group"])
    assert got["txnlog_blocked_consumer_groups"] == {
        _labels(cluster=c, status=s): len(groups.get(s, ()))
        for s in ("BLOCKED", "UNSTABLE_OFFSET_COMMIT", "BEHIND_LSO", "NOT_BLOCKED_INFERRED")
    }
    stalled = [r for r in rows if r["status"] in STALLED]

    def key(r: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        return _labels(cluster=c, group=r["group"], topic=r["topic"], partition=r["partition"], status=r["status"],
                       holding_producer_id=r["holding_producer_id"], source=r["source"])  # fmt: skip

    assert got["txnlog_blocked_consumer_seconds"] == {
        key(r): pytest.approx((as_of - r["blocked_since"]).total_seconds()) for r in stalled
    }
    assert got["txnlog_blocked_consumer_offsets"] == {
        key(r): r["offsets_to_high_watermark"] for r in stalled if r["offsets_to_high_watermark"] is not None
    }
    # what the scenario wrote (its notes, not the job's): dashboards waits behind the hanging transaction
    truth = run["result"].notes["blocked_truth"]
    dashboards = [dict(k) for k in got["txnlog_blocked_consumer_seconds"] if dict(k)["group"] == "dashboards"]
    assert [(d["status"], d["topic"], d["holding_producer_id"]) for d in dashboards] == [
        ("BLOCKED", "page-views", str(truth["hang_pid"]))
    ]
    assert got["txnlog_findings"][_labels(cluster=c, verdict="HANGING", reason="NO_TRANSACTIONAL_ID",
                                          source="segments")] == 1  # fmt: skip


def test_the_integrity_fault_is_counted(runs):
    got = _samples(runs["integrity"]["text"])
    visible = got["txnlog_integrity_anomalies"][_labels(cluster="idx", check="ABORTED_DATA_VISIBLE")]
    assert visible >= 1  # index_entry_missing: an ABORT without its .txnindex entry


def test_each_run_pushed_the_same_exposition_to_its_cluster(runs, gateway):
    _, received = gateway
    pushed = {path: (method, body) for method, path, body in received}
    for run in runs.values():
        method, body = pushed[f"/metrics/job/txnlog/cluster/{run['cluster']}"]
        assert method == "PUT"  # replaces the cluster's previous push whole
        assert body.decode("utf-8") == run["text"]
    assert len(received) == len(runs)
    assert "txnlog: warning" not in "".join(r["printed"] for r in runs.values())


def test_the_file_is_replaced_whole_and_no_temporary_file_is_left(runs):
    for run in runs.values():
        assert sorted(p.name for p in run["prom"].parent.iterdir()) == [run["prom"].name]


def test_the_runbooks_first_step_prints_what_the_readme_shows(runs):
    """README's runbook, step 0 (who is blocked), run as printed in the blocked run's directory (./out)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"<!-- blocked:python -->\n```python\n(.*?)```", readme, flags=re.S)
    (shown,) = re.findall(r"<!-- blocked:output -->\n```text\n(.*?)```", readme, flags=re.S)
    proc = subprocess.run([sys.executable, "-c", code], cwd=runs["blocked"]["work"], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == shown
