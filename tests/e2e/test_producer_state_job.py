"""``producer_state`` written by the job (its script's ``main`` in process, on the shared Spark session:
tests/e2e/jobrun.py), against the writer's ground truth (``ScenarioResult.producers``: its own producer
state, never the job's output), and ``txnlog describe-producers`` printing it.

* ``healthy``: idempotent producers (no coordinator epoch, a sequence) next to TV0/TV1/TV2 transactional ones;
* ``deleted_segment_snapshot``: retention deleted the oldest segments; with the log-end snapshots removed (a
  copy of a running broker) the state is the snapshot at the new log start plus the batches after it — one
  producer is known from that snapshot alone, and a transaction's start lies below the log start;
* ``transactional_id_expired``: the clock ran 7 days; without snapshots every batch is replayed and the job
  itself drops the producers idle past ``producer.id.expiration.ms`` (the default, then a shorter one by config).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.jobrun import run_in_process
from tests.e2e.truth import broker_name, ms, rows
from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.brokerlog.scenarios import write_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _drop_snapshots(logs: Path) -> int:
    """Remove each partition's newest producer snapshot (the one a clean shutdown writes at the log end)."""
    n = 0
    for d in sorted(p for p in logs.glob("broker-*/*-[0-9]*") if p.is_dir()):
        snaps = sorted(d.glob("*.snapshot"))
        if snaps:
            snaps[-1].unlink()
            n += 1
    return n


def _run(
    spark: Any, work: Path, name: str, *, drop: bool, expiration_ms: Callable[[ScenarioResult], int] | None = None
) -> tuple[str, ScenarioResult]:
    """Write scenario ``name``, drop its log-end snapshots if asked, run the job (``producer_id_expiration_ms``:
    ``expiration_ms`` of the written truth, when given)."""
    logs = work / "logs"
    truth = write_scenario(name, logs, seed=3)
    if drop:
        assert _drop_snapshots(logs) > 0
    args = ["--logs", str(logs), "--output", str(work / "out"), "--cluster", name]
    if expiration_ms is not None:
        conf = work / "expiry.yaml"
        conf.write_text(f"producer_id_expiration_ms: {expiration_ms(truth)}\n")
        args += ["--config", str(conf)]
    proc = run_in_process(spark, *args, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return str(work / "out"), truth


def _got(out: str) -> dict[tuple, dict[str, Any]]:
    return {(r["topic"], r["partition"], r["producer_id"]): r for r in rows(out, "producer_state")}


def _want(truth: ScenarioResult, expiration_ms: int | None = None) -> dict[tuple, dict[str, Any]]:
    """The writer's producers; with a shorter expiration, those it also removes (isProducerExpired)."""
    return {
        (p.topic, p.partition, p.producer_id): {
            "producer_epoch": p.producer_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "coordinator_epoch": p.coordinator_epoch,
            "current_txn_start_offset": p.current_txn_start_offset,
        }
        for p in truth.producers
        if expiration_ms is None
        or p.current_txn_start_offset is not None
        or truth.as_of_ms - p.last_timestamp < expiration_ms
    }


def _compare(out: str, want: dict[tuple, dict[str, Any]], truth: ScenarioResult) -> dict[tuple, dict[str, Any]]:
    got = _got(out)
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        assert {**{k: g[k] for k in w}, "last_timestamp": ms(g["last_timestamp"])} == w, key
        # the state of a most advanced replica (the leader's log end; ties: any of them holds the same state)
        ends = {b: truth.replica_partitions[(b, key[0], key[1])].log_end_offset
                for b in truth.partitions[key[:2]].brokers}  # fmt: skip
        assert g["replica"] in {broker_name(b) for b, end in ends.items() if end == max(ends.values())}
    return got


@pytest.fixture(scope="module")
def healthy(spark, tmp_path_factory) -> tuple[str, ScenarioResult]:
    return _run(spark, tmp_path_factory.mktemp("ps-healthy"), "healthy", drop=False)


def test_idempotent_and_transactional_producers(healthy) -> None:
    out, truth = healthy
    got = _compare(out, _want(truth), truth)
    idempotent = [r for r in got.values() if r["coordinator_epoch"] == -1 and r["current_txn_start_offset"] is None]
    assert idempotent and all(r["last_sequence"] >= 0 for r in idempotent)
    assert any(r["coordinator_epoch"] >= 0 and r["last_sequence"] == -1 for r in got.values())  # TV2 bump
    assert {r["source"] for r in got.values()} == {"segments"}


def test_retention_leaves_the_snapshots_state(spark, tmp_path) -> None:
    out, truth = _run(spark, tmp_path, "deleted_segment_snapshot", drop=True)
    got = _compare(out, _want(truth), truth)
    start = truth.partitions[("metrics", 0)].log_start_offset
    metrics = [r for k, r in got.items() if k[:2] == ("metrics", 0)]
    assert any(r["current_txn_start_offset"] is not None and r["current_txn_start_offset"] < start for r in metrics)
    assert any(r["from_snapshot"] for r in metrics) and not all(r["from_snapshot"] for r in metrics)


@pytest.fixture(scope="module")
def expired_logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ps-expired")


def _median_idle(truth: ScenarioResult) -> int:
    """An expiration that splits the scenario's idle producers: the median time since their last batch."""
    idle = sorted(truth.as_of_ms - p.last_timestamp for p in truth.producers if p.current_txn_start_offset is None)
    return idle[len(idle) // 2]


def test_expired_producers_are_gone(spark, expired_logs) -> None:
    out, truth = _run(spark, expired_logs / "default", "transactional_id_expired", drop=True)
    _compare(out, _want(truth), truth)
    out, truth = _run(
        spark, expired_logs / "shorter", "transactional_id_expired", drop=True, expiration_ms=_median_idle
    )
    shorter = _want(truth, _median_idle(truth))
    assert 0 < len(shorter) < len(_want(truth))
    _compare(out, shorter, truth)


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_describe_producers_prints_the_tables_rows(healthy, fmt: str) -> None:
    """Every partition's describe-producers output, parsed back, is its producer_state rows as printed."""
    from txnlog.ops.cli import main

    out, _ = healthy
    by_tp: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows(out, "producer_state"):
        by_tp.setdefault((r["topic"], r["partition"]), []).append(r)
    assert len(by_tp) > 3
    for (topic, partition), written in sorted(by_tp.items()):
        buf = io.StringIO()
        argv = ["describe-producers", "--topic", topic, "--partition", str(partition), "--format", fmt]
        assert main([*argv, "--output", out], out=buf) == 0
        text = buf.getvalue()
        if fmt == "table":
            head, *body = [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines() if line]
            printed = [dict(zip(head, r, strict=True)) for r in body]
        elif fmt == "json":
            printed = [
                {k: str(v) if v is not None else "None" for k, v in json.loads(x).items()} for x in text.splitlines()
            ]
        else:
            printed = [{k: v or "None" for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
        want = [
            {
                "ProducerId": str(r["producer_id"]),
                "ProducerEpoch": str(r["producer_epoch"]),
                "LatestCoordinatorEpoch": str(r["coordinator_epoch"]),
                "LastSequence": str(r["last_sequence"]),
                "LastTimestamp": str(ms(r["last_timestamp"])),
                "CurrentTransactionStartOffset": str(r["current_txn_start_offset"])
                if r["current_txn_start_offset"] is not None
                else "None",
            }
            for r in sorted(written, key=lambda r: r["producer_id"])
        ]
        assert printed == want, (topic, partition)
