"""The job end to end, run as a user runs it: ``./spark-submit.sh`` in a shell.

One run of the README command (no arguments → the embedded sample cluster,
which holds healthy traffic and every verdict class), then a rerun of the same
(cluster, as_of) and a second as_of; a partial ``__transaction_state`` dump;
and bad input. Every assertion compares the Delta tables, read back with
delta-rs / duckdb / polars, with the ground truth the broker-log writer knows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process, run_job
from txnlog.broker.classify import Reason
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.ops.unblock import ADMIN_CONNECT_TIMEOUT_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_readme_command_succeeds_and_prints_a_summary(readme_run):
    assert readme_run.proc.returncode == 0, readme_run.proc.stderr[-3000:]
    out = readme_run.proc.stdout
    assert "findings by verdict" in out
    assert "worst partitions (by LSO lag)" in out
    assert f"{readme_run.workdir}/out/<table>" in out or "out/<table>" in out
    for table in (
        "transactions",
        "findings",
        "abort_recommendations",
        "partition_health",
        "coordinator_state",
        "quarantine",
        "runs",
    ):
        assert (readme_run.workdir / "out" / table / "_delta_log").is_dir()


def _runbook() -> list[tuple[str, list[str]]]:
    """README's runbook: (command, the lines it prints) for every ``$ `` line of the marked blocks."""
    import re

    steps: list[tuple[str, list[str]]] = []
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for block in re.findall(r"<!-- runbook -->\n```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return steps


def _words(lines: list[str]) -> list[list[str]]:
    return [line.split() for line in lines]


def test_the_readme_runbook_prints_what_it_shows(readme_run):
    """Each runbook command, run in the sample run's directory as printed, prints the README's lines (tabs
    shown as spaces there). `sh unblock.sh` and `txnlog fence` print their dry run, then fail to reach
    kafka-1:9092 (no broker here): the README shows the dry run. find-hanging exits 1 only where it lists a
    HANGING finding."""
    steps = _runbook()
    assert [c.split()[:2] for c, _ in steps] == [
        ["txnlog", "find-hanging"], ["txnlog", "describe-producers"], ["txnlog", "plan"], ["cat", "unblock.sh"],
        ["sh", "unblock.sh"], ["txnlog", "find-hanging"], ["txnlog", "plan"], ["txnlog", "fence"],
    ]  # fmt: skip
    # kafka-1:9092 does not answer here: the two commands that try it give up after 3 s, not the default 30
    env = {
        **os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        ADMIN_CONNECT_TIMEOUT_ENV: "3",
    }  # fmt: skip

    def start(command: str) -> subprocess.Popen:
        return subprocess.Popen(
            command, shell=True, cwd=readme_run.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    # The two commands that try kafka-1:9092 wait for the admin client's bootstrap timeout before they
    # fail; they read the output and the script only, so they wait beside the later steps, not one after
    # another. Each step still starts after the one before it (unblock.sh is written by the plan before it).
    started: list[tuple[str, list[str], subprocess.Popen]] = []
    done: dict[int, tuple[str, str]] = {}  # step -> (stdout, stderr) of the steps waited for in turn
    try:
        for command, expected in steps:
            proc = start(command)
            started.append((command, expected, proc))
            if not (command == "sh unblock.sh" or command.startswith("txnlog fence")):
                done[len(started) - 1] = proc.communicate(timeout=300)
        for step, (command, expected, proc) in enumerate(started):
            stdout, stderr = done[step] if step in done else proc.communicate(timeout=300)
            printed = stdout.splitlines()
            if command == "sh unblock.sh" or command.startswith("txnlog fence"):
                assert proc.returncode == 2 and "cannot reach kafka-1:9092" in stderr, stderr
                printed = printed[: len(expected)]
            else:
                hanging = "find-hanging" in command and any(" HANGING " in line for line in expected)
                assert proc.returncode == (1 if hanging else 0), stderr
            assert _words(printed) == _words(expected), command
    finally:
        for _command, _expected, proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def test_sample_has_every_verdict_class(readme_run):
    reasons = {f.reason for f in readme_run.truth.findings}
    assert reasons == set(Reason), "the embedded sample should exercise every reason of docs/design.md §4"


@pytest.fixture(scope="module")
def findings(readme_run):
    recs = T.recommendations_by_key(readme_run.out)
    return T.actual_findings(readme_run.out, recs), T.expected_findings(readme_run.truth)


@pytest.mark.parametrize("reason", list(Reason))
def test_finding_per_reason(findings, reason):
    actual, expected = findings
    want = {k: v for k, v in expected.items() if v["reason"] == reason}
    got = {k: v for k, v in actual.items() if v["reason"] == reason}
    assert want, f"ground truth has no {reason}"
    assert got == want


def test_no_other_findings(findings):
    actual, expected = findings
    assert set(actual) == set(expected)


def test_abort_recommendations_exact_commands(readme_run):
    recs = T.rows(readme_run.out, "abort_recommendations")
    expected_hanging = {k for k, v in T.expected_findings(readme_run.truth).items() if v["verdict"] == "HANGING"}
    assert {T.finding_key(r) for r in recs} == expected_hanging
    opens = {(o.topic, o.partition, o.producer_id, o.start_offset): o for o in readme_run.truth.open_transactions}
    for r in recs:
        o = opens[T.finding_key(r)]
        assert r["command"] == (
            f"kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic {o.topic} "
            f"--partition {o.partition} --start-offset {o.start_offset}"
        )
        assert r["legacy_command"] == (
            f"kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic {o.topic} --partition {o.partition} "
            f"--producer-id {o.producer_id} --producer-epoch {o.producer_epoch} --coordinator-epoch {max(o.coordinator_epoch, 0)}"
        )
        assert r["reason"] in (
            "NO_TRANSACTIONAL_ID",
            "TRANSACTIONAL_ID_EXPIRED",
            "COORDINATOR_COMPLETED",
            "PARTITION_NOT_IN_TRANSACTION",
        )


def test_seed_case_evidence(readme_run):
    """KAFKA-14053: batches after the producer's ABORT marker while the coordinator is complete."""
    seeds = [
        o
        for o in readme_run.truth.open_transactions
        if o.reason == "COORDINATOR_COMPLETED" and o.previous_marker_offset is not None
    ]
    assert seeds
    got = {T.finding_key(f): f for f in T.rows(readme_run.out, "findings")}
    for o in seeds:
        f = got[(o.topic, o.partition, o.producer_id, o.start_offset)]
        # the sentence starts with it when the transaction began before the log start ("Producer 40009 ...")
        assert f"producer {o.producer_id} epoch {o.producer_epoch}" in f["evidence"].lower()
        if o.source == "snapshot":  # the marker went with the deleted segment
            assert "before the log start offset" in f["evidence"] and "producer snapshot at offset" in f["evidence"]
        else:
            assert f"marker at offset {o.previous_marker_offset}" in f["evidence"]
        assert o.transactional_id in f["evidence"]
        assert f["advice"].startswith("Abort it")


def test_open_transactions_ages(readme_run):
    got = {T.finding_key(f): f for f in T.rows(readme_run.out, "findings") if f["topic"] is not None}
    for o in readme_run.truth.open_transactions:
        f = got.get((o.topic, o.partition, o.producer_id, o.start_offset))
        if f is None:
            continue
        assert f["idle_ms"] == o.idle_ms
        assert T.ms(f["last_timestamp"]) == o.last_timestamp
        if o.source == "log":
            assert f["open_ms"] == o.open_ms
            assert T.ms(f["first_timestamp"]) == o.first_timestamp
        else:  # begun before the retained log: only the snapshot knows it
            assert f["started_before_log_start"] is True


def test_transactions_match_ground_truth(readme_run):
    actual = T.actual_transactions(readme_run.out)
    expected = T.expected_transactions(readme_run.truth)
    # A transaction whose first batches went with a deleted segment is known only from the
    # producer snapshot: its first timestamp and batch/record/byte counts are not in the input.
    for o in readme_run.truth.open_transactions:
        if o.source == "snapshot":
            key = (o.topic, o.partition, o.producer_id, o.start_offset)
            got = actual[key]
            assert got["first_timestamp"] is None
            for field in ("first_timestamp", "batch_count", "record_count", "size_bytes"):
                got.pop(field)
                expected[key].pop(field)
    assert actual == expected


def test_commit_abort_counts_per_partition(readme_run):
    """Healthy traffic: COMMIT/ABORT counts per partition as the writer produced them."""

    def count(outcomes):
        counts: dict[tuple, dict[str, int]] = {}
        for topic, partition, outcome in outcomes:
            c = counts.setdefault((topic, partition), {"COMMIT": 0, "ABORT": 0, "OPEN": 0})
            c[outcome] += 1
        return counts

    got = count((t["topic"], t["partition"], t["outcome"]) for t in T.rows(readme_run.out, "transactions"))
    want = count((t.topic, t.partition, t.outcome) for t in readme_run.truth.transactions)
    assert got == want
    assert sum(c["COMMIT"] for c in got.values()) > 100 and sum(c["ABORT"] for c in got.values()) > 10


def test_ongoing_within_timeout_is_open_without_finding(readme_run):
    fresh = [o for o in readme_run.truth.open_transactions if o.verdict is None]
    assert fresh, "the sample should hold a transaction still inside its timeout"
    txns = {T.transaction_key(t): t for t in T.rows(readme_run.out, "transactions")}
    health = {(p["topic"], p["partition"]): p for p in T.rows(readme_run.out, "partition_health")}
    finding_keys = {T.finding_key(f) for f in T.rows(readme_run.out, "findings")}
    for o in fresh:
        key = (o.topic, o.partition, o.producer_id, o.start_offset)
        assert txns[key]["outcome"] == "OPEN"
        assert key not in finding_keys
        assert health[(o.topic, o.partition)]["lso_lag"] > 0


def test_partition_health_matches_ground_truth(readme_run):
    """partition_health holds what the leader (the most advanced replica) reports: a follower that
    lags or diverged does not move the partition's offsets (docs/design.md §4)."""
    got = {(p["topic"], p["partition"]): p for p in T.rows(readme_run.out, "partition_health")}
    assert set(got) == set(readme_run.truth.partitions)
    for key, w in readme_run.truth.partitions.items():
        p = got[key]
        assert (
            p["log_start_offset"],
            p["log_end_offset"],
            p["last_stable_offset"],
            p["lso_lag"],
            p["open_transactions"],
            p["has_late_transaction"],
        ) == (
            w.log_start_offset,
            w.log_end_offset,
            w.last_stable_offset,
            w.lso_lag,
            w.open_transactions,
            w.has_late_transaction,
        ), key
        assert p["high_watermark"] == w.log_end_offset, key  # the writer checkpoints the log end
        assert p["last_stable_offset"] >= p["log_start_offset"], key


def test_coordinator_state_matches_ground_truth(readme_run):
    got = {r["transactional_id"]: r for r in T.rows(readme_run.out, "coordinator_state")}
    assert set(got) == set(readme_run.truth.coordinator)
    for tid, want in readme_run.truth.coordinator.items():
        r = got[tid]
        assert r["is_tombstoned"] == want.is_tombstoned, tid
        assert r["coordinator_partition"] == want.coordinator_partition, tid
        if want.is_tombstoned:
            continue
        assert (
            r["producer_id"],
            r["producer_epoch"],
            r["state"],
            r["timeout_ms"],
            sorted(r["partitions"] or []),
            T.ms(r["last_update_timestamp"]),
            r["previous_producer_id"],
            r["next_producer_id"],
            r["client_transaction_version"],
            r["coordinator_epoch"],
        ) == (
            want.producer_id,
            want.producer_epoch,
            want.state,
            want.timeout_ms,
            sorted(want.partitions),
            want.last_update_timestamp,
            want.previous_producer_id,
            want.next_producer_id,
            want.client_transaction_version,
            want.coordinator_epoch,
        ), tid


def test_quarantine_rows_and_analysis_after_damage(readme_run):
    got = sorted(
        (Path(q["file"]).relative_to(readme_run.workdir / "cache").parts[-2:], q["position"], q["length"], q["reason"])
        for q in T.rows(readme_run.out, "quarantine")
    )
    want = sorted((Path(q.file).parts[-2:], q.position, q.length, q.reason) for q in readme_run.truth.quarantine)
    assert [(tuple(a), b, c, d) for a, b, c, d in got] == [(tuple(a), b, c, d) for a, b, c, d in want]
    assert {q[3] for q in want} >= {"truncated_tail", "crc_mismatch"}


def test_replica_that_lost_a_marker(readme_run):
    partial = [
        o
        for o in readme_run.truth.open_transactions
        if o.verdict and o.brokers and len(o.brokers) < len(readme_run.truth.partitions[(o.topic, o.partition)].brokers)
    ]
    assert partial, "the sample should hold a transaction open on one replica only"
    got = {T.finding_key(f): f for f in T.rows(readme_run.out, "findings")}
    for o in partial:
        f = got[(o.topic, o.partition, o.producer_id, o.start_offset)]
        assert f["open_replicas"] == [T.broker_name(b) for b in sorted(o.brokers)]
        assert "the replicas diverged: open only on " + T.broker_name(o.brokers[0]) in f["evidence"]
        assert o.safety == "VERIFY_FIRST"
        assert (
            T.recommendations_by_key(readme_run.out)[(o.topic, o.partition, o.producer_id, o.start_offset)]["safety"]
            == "VERIFY_FIRST"
        )


def test_readers_duckdb_and_polars(readme_run):
    import duckdb
    import polars as pl

    findings = pl.read_delta(f"{readme_run.out}/findings")
    assert findings.height == len(readme_run.truth.findings)
    con = duckdb.connect()
    con.execute(f"LOAD '{duckdb_delta_extension()}'")
    top = con.execute(README_DUCKDB_QUERY.replace("./out", readme_run.out)).fetchall()
    hanging = sum(1 for f in readme_run.truth.findings if f.verdict == "HANGING")
    assert sum(n for verdict, _reason, n in top if verdict == "HANGING") == hanging


README_DUCKDB_QUERY = """
SELECT verdict, reason, count(*) AS n
FROM delta_scan('./out/findings')
WHERE as_of = (SELECT max(as_of) FROM delta_scan('./out/findings'))
GROUP BY verdict, reason ORDER BY verdict, n DESC
"""


def duckdb_delta_extension() -> str:
    import duckdb
    import duckdb_extension_delta

    base = (
        Path(duckdb_extension_delta.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "delta.duckdb_extension"
    )
    return str(base)


def _snapshot(out: str) -> dict[str, list]:
    tables = (
        "transactions",
        "findings",
        "abort_recommendations",
        "partition_health",
        "coordinator_state",
        "coordinator_history",
        "quarantine",
    )
    snap = {}
    for t in tables:
        snap[t] = sorted(repr(sorted(r.items())) for r in T.rows(out, t))
    return snap


def test_rerun_same_as_of_is_idempotent_and_new_as_of_appends(readme_run, spark, tmp_path):
    """The README command run again where it ran (a copy of its directory: other modules read the README
    run's output as it was), then with a later --as-of. The job's main in process: the command is the same."""
    before = _snapshot(readme_run.out)
    work = tmp_path / "rerun"
    shutil.copytree(readme_run.workdir / "out", work / "out")
    out = str(work / "out")
    assert _snapshot(out) == before
    env = {"TXNLOG_CACHE": str(readme_run.workdir / "cache")}  # the same sample files, named as before
    again = run_in_process(spark, cwd=work, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _snapshot(out) == before
    assert len(T.rows(out, "runs")) == 1

    later = readme_run.truth.as_of_ms + 3_600_000
    third = run_in_process(spark, "--as-of", str(later), cwd=work, env=env)
    assert third.returncode == 0, third.stderr[-3000:]
    runs = T.rows(out, "runs")
    assert sorted(T.ms(r["as_of"]) for r in runs) == [readme_run.truth.as_of_ms, later]
    first_run = _snapshot_as_of(out, readme_run.truth.as_of_ms)
    assert first_run == before
    assert len(T.rows(out, "transactions", as_of=later)) == len(
        T.rows(out, "transactions", as_of=readme_run.truth.as_of_ms)
    )


def _snapshot_as_of(out: str, as_of_ms: int) -> dict[str, list]:
    tables = (
        "transactions",
        "findings",
        "abort_recommendations",
        "partition_health",
        "coordinator_state",
        "coordinator_history",
        "quarantine",
    )
    return {t: sorted(repr(sorted(r.items())) for r in T.rows(out, t, as_of=as_of_ms)) for t in tables}


@pytest.mark.parametrize("scenario", ["partial_txn_state", "corrupt_and_truncated"])
def test_dedicated_scenario(spark, tmp_path, scenario):
    """partial __transaction_state → VERIFY_FIRST; damaged segments → quarantine rows and the
    hanging transaction written after the damage is still found (the job's main in process)."""
    truth = write_scenario(scenario, tmp_path / "logs", seed=3)
    out = str(tmp_path / "out")
    proc = run_in_process(spark, "--logs", str(tmp_path / "logs"), "--output", out, "--cluster", scenario, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = T.recommendations_by_key(out)
    assert T.actual_findings(out, recs) == T.expected_findings(truth)
    got_q = sorted((Path(q["file"]).name, q["position"], q["length"], q["reason"]) for q in T.rows(out, "quarantine"))
    want_q = sorted((Path(q.file).name, q.position, q.length, q.reason) for q in truth.quarantine)
    assert got_q == want_q
    if scenario == "partial_txn_state":
        no_id = [r for r in recs.values() if r["reason"] == "NO_TRANSACTIONAL_ID"]
        assert no_id and all(r["safety"] == "VERIFY_FIRST" for r in no_id)
    else:
        assert {q[3] for q in want_q} >= {"crc_mismatch", "bad_magic", "bad_length", "truncated_tail"}
        damaged = {(Path(q.file).parent.name, Path(q.file).name) for q in truth.quarantine}
        after = [f for f in truth.findings if f.verdict == "HANGING"]
        assert after, "the scenario should hold a hanging transaction after the damage"
        assert any(f"{f.topic}-{f.partition}" in {d[0] for d in damaged} for f in after)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--logs", "/nonexistent/kafka-logs"], "/nonexistent/kafka-logs"),
        (["--logs", "EMPTY"], "no Kafka logs found"),
        (["--config", "BADCONF"], "bogus_key"),
    ],
    ids=["missing-path", "no-kafka-logs", "unknown-config-key"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: x\nbogus_key: 1\n")
    args = [str(empty) if a == "EMPTY" else str(bad) if a == "BADCONF" else a for a in args]
    proc = run_job(*args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("txnlog: error: ") and needle in last


def test_offline_kafka_transactions_cli(readme_run):
    """`txnlog find-hanging/list/describe/describe-producers/timeline` over the job's tables."""
    import io

    from txnlog.ops.cli import main

    def cli(*args: str, code: int = 0) -> str:
        buf = io.StringIO()
        # the README run's as_of (its output holds one run; pinned all the same)
        assert main([*args, "--output", readme_run.out, "--as-of", str(readme_run.truth.as_of_ms)], out=buf) == code
        return buf.getvalue()

    # exit 1: the run has HANGING findings (the contract cron and CI checks rely on)
    assert any(f.verdict == "HANGING" for f in readme_run.truth.findings)
    hanging = cli("find-hanging", code=1)
    lines = hanging.splitlines()
    assert lines[0].split()[:6] == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
    ]
    assert len(lines) == 1 + len(readme_run.truth.findings)
    for f in readme_run.truth.findings:
        if f.topic:
            assert any(line.split()[:3] == [f.topic, str(f.partition), str(f.producer_id)] for line in lines[1:])
    tid = next(f.transactional_id for f in readme_run.truth.findings if f.reason == "COORDINATOR_COMPLETED")
    listing = cli("list")
    assert any(line.split()[0] == tid for line in listing.splitlines()[1:])
    described = cli("describe", "--transactional-id", tid)
    assert tid in described and "CompleteCommit" in described
    f = next(f for f in readme_run.truth.findings if f.reason == "COORDINATOR_COMPLETED")
    producers = cli("describe-producers", "--topic", f.topic, "--partition", str(f.partition))
    row = next(line.split() for line in producers.splitlines()[1:] if line.split()[0] == str(f.producer_id))
    assert row[-1] == str(f.start_offset)  # CurrentTransactionStartOffset
    timeline = cli("timeline", "--topic", f.topic, "--partition", str(f.partition), "--producer-id", str(f.producer_id))
    assert "OPEN" in timeline
