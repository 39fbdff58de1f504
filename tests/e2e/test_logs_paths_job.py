"""``--logs`` given what an operator copies first, as a user gives it (relative paths, in the working directory).

* the stuck partition's directory alone (``--logs copies/orders-2/``): one replica, named after the
  parent directory; no ``__transaction_state``, so the run's input line and the finding say it was
  not read and the abort is VERIFY_FIRST;
* one segment file alone (``--logs incident/orders-5/00000000000000000000.log``);
* a mix: a broker's log dir, another broker's partition directory and a third broker's later segment;
* a directory of kafka-dump-log.sh ``.txt`` files given to ``--logs``: exit 2, one line saying
  ``use --dump-log``.

The logs are the embedded sample cluster's (``txnlog.brokerlog``); expectations come from its ground
truth and the files' names, never from the job's output. The three runs are the job script's ``main`` in
process, on the shared Spark session (tests/e2e/jobrun.py: what they check is the job's, not the wrapper's);
the refused input goes through ``./spark-submit.sh``, whose exit code and last line it checks.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process, run_job
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.kafka.dump_log_render import render_dump
from txnlog.sources.sample import SAMPLE_SEED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NOT_READ = "__transaction_state was not read (no __transaction_state-<n>/ in the input)"


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, Any]:
    work = tmp_path_factory.mktemp("logs-paths")
    truth = write_scenario("sample", work / "logs", seed=SAMPLE_SEED)
    return work, truth


def _finding(truth: Any, reason: str, topic: str) -> Any:
    return next(f for f in truth.findings if f.reason == reason and f.topic == topic)


def _open_rows(out: str) -> list[tuple]:
    return [
        (f["topic"], f["partition"], f["producer_id"], f["start_offset"], f["verdict"], f["reason"])
        for f in T.rows(out, "findings")
    ]


def test_partition_directory(spark, sample, tmp_path) -> None:
    """The stuck partition's directory, the first thing an operator copies: its open transaction is
    found; with no __transaction_state it is NO_TRANSACTIONAL_ID and the abort VERIFY_FIRST, as the
    run's input line and the finding's evidence say."""
    work, truth = sample
    hang = _finding(truth, "COORDINATOR_COMPLETED", "orders")  # open on one broker only
    (broker,) = hang.brokers
    assert hang.partition == 2
    shutil.copytree(work / "logs" / T.broker_name(broker) / "orders-2", tmp_path / "copies" / "orders-2")
    proc = run_in_process(spark, "--logs", "copies/orders-2/", "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert NOT_READ in proc.stdout and "1 segment and 1 snapshot of 1 partition" in proc.stdout
    out = str(tmp_path / "out")
    assert _open_rows(out) == [
        ("orders", 2, hang.producer_id, hang.start_offset, "HANGING", "NO_TRANSACTIONAL_ID"),
    ]
    (f,) = T.rows(out, "findings")
    assert f["open_replicas"] == ["copies"]
    assert "__transaction_state was not read (the input holds none of its partitions)" in f["evidence"]
    (rec,) = T.rows(out, "abort_recommendations")
    assert rec["safety"] == "VERIFY_FIRST" and rec["command"] == (
        f"kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic orders --partition 2 "
        f"--start-offset {hang.start_offset}"
    )
    (health,) = T.rows(out, "partition_health")
    want = truth.partitions[("orders", 2)]
    assert (health["topic"], health["partition"], health["replicas"]) == ("orders", 2, ["copies"])
    assert (health["log_end_offset"], health["last_stable_offset"]) == (want.log_end_offset, hang.start_offset)
    assert {(t["topic"], t["partition"]) for t in T.rows(out, "transactions")} == {("orders", 2)}
    (run,) = T.rows(out, "runs")
    assert run["inputs"] == [str(tmp_path / "copies" / "orders-2")] and run["status"] == "SUCCEEDED"


def test_single_segment_file(spark, sample, tmp_path) -> None:
    """One segment file, copied into a directory named after its partition: topic and partition from
    that name, the replica from the directory above."""
    work, truth = sample
    no_id = _finding(truth, "NO_TRANSACTIONAL_ID", "orders")
    seg = work / "logs" / T.broker_name(no_id.brokers[0]) / f"orders-{no_id.partition}" / f"{0:020d}.log"
    (tmp_path / "incident" / f"orders-{no_id.partition}").mkdir(parents=True)
    shutil.copy(seg, tmp_path / "incident" / f"orders-{no_id.partition}" / seg.name)
    given = f"incident/orders-{no_id.partition}/{seg.name}"
    proc = run_in_process(spark, "--logs", given, "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert NOT_READ in proc.stdout and "1 segment and 0 snapshots of 1 partition" in proc.stdout
    out = str(tmp_path / "out")
    assert _open_rows(out) == [
        ("orders", no_id.partition, no_id.producer_id, no_id.start_offset, "HANGING", "NO_TRANSACTIONAL_ID")
    ]
    (rec,) = T.rows(out, "abort_recommendations")
    assert rec["safety"] == "VERIFY_FIRST"
    (health,) = T.rows(out, "partition_health")
    assert (health["topic"], health["partition"], health["replicas"]) == ("orders", no_id.partition, ["incident"])
    assert [r["inputs"] for r in T.rows(out, "runs")] == [[str(tmp_path / given)]]


def test_mixed_log_dir_partition_dir_and_segment(spark, sample, tmp_path) -> None:
    """broker-3's log dir, broker-2's copy of orders-5 and broker-1's last metrics-0 segment: three
    replicas; orders-5 is compared across brokers 2 and 3; metrics-0 starts at the segment's base offset."""
    work, truth = sample
    logs = work / "logs"
    no_id = _finding(truth, "NO_TRANSACTIONAL_ID", "orders")
    assert sorted(no_id.brokers) == [2, 3]
    last = sorted((logs / "broker-1" / "metrics-0").glob("*.log"))[-1]
    given = [str(logs / "broker-3"), str(logs / "broker-2" / "orders-5"), str(last)]
    proc = run_in_process(spark, *[a for p in given for a in ("--logs", p)], "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on 3 brokers" in proc.stdout and NOT_READ not in proc.stdout
    out = str(tmp_path / "out")
    health = {(h["topic"], h["partition"]): h for h in T.rows(out, "partition_health") if h["topic"][0] != "_"}
    on_broker_3 = {tp for tp, r in truth.partitions.items() if 3 in r.brokers and tp[0][0] != "_"}
    assert set(health) == on_broker_3 | {("metrics", 0)}
    assert health[("orders", 5)]["replicas"] == ["broker-2", "broker-3"]
    assert health[("metrics", 0)]["replicas"] == ["broker-1"]
    assert health[("metrics", 0)]["log_start_offset"] == int(last.name[:20]) > 0
    found = {T.finding_key(f): f for f in T.rows(out, "findings")}
    f = found[("orders", 5, no_id.producer_id, no_id.start_offset)]
    assert (f["reason"], f["open_replicas"]) == ("NO_TRANSACTIONAL_ID", ["broker-2", "broker-3"])
    assert [r["inputs"] for r in T.rows(out, "runs")] == [given]


def test_dump_log_text_given_to_logs(sample, tmp_path) -> None:
    """kafka-dump-log.sh output in --logs: exit 2 before Spark, one line saying to use --dump-log."""
    work, _truth = sample
    (tmp_path / "dumps").mkdir()
    for part in ("orders-2", "orders-5"):
        with open(tmp_path / "dumps" / f"{part}.txt", "w") as o:
            for f in sorted((work / "logs" / "broker-3" / part).glob("*.log")):
                o.write(render_dump(str(f), "3.x", deep_iteration=True))
    proc = run_job("--logs", "dumps/", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "txnlog: error: --logs dumps/: holds kafka-dump-log.sh output, not Kafka's log files; use --dump-log dumps/"
    )
    assert not (tmp_path / "out").exists()
