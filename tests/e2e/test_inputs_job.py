"""The other inputs end to end, run as a user runs them: ``./spark-submit.sh`` in a shell.

* ``--dump-log``: the embedded sample cluster (3 brokers, every verdict, a truncated tail and a
  CRC mismatch) printed as ``kafka-dump-log.sh --deep-iteration`` of Kafka 4.x per broker and
  partition (segments and producer snapshots), ``__transaction_state`` with
  ``--transaction-log-decoder`` (the job script's ``main`` in process, on the shared Spark session:
  tests/e2e/jobrun.py); then the README's own command (Kafka 3.x) on one partition's dump.
* ``--bootstrap-servers`` alone (live mode) with ``--topic``: a noida-db server on 127.0.0.1
  serves a scenario's ``__transaction_state`` records from its own ``__transaction_state`` topic
  (noida-db's coordinator does not write records there: shared/FEASIBILITY.md §1), and a real
  transactional producer SIGKILLed mid-transaction pins the LSO of the ``--topic`` partitions.

Tables are read back with delta-rs, polars and duckdb and compared with the writer's ground truth.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import truth as T
from tests.e2e.jobrun import run_in_process, run_job
from tests.e2e.test_job import README_DUCKDB_QUERY, duckdb_delta_extension
from txnlog.brokerlog.scenarios import write_scenario
from txnlog.kafka.dump_log_render import render_dump
from txnlog.sources.sample import SAMPLE_SEED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
#: the Kafka version the full run's dumps are printed as: 4.x's JSON --transaction-log-decoder
#: prints every field of a coordinator record (the 3.x one has no start time: spec §5.4)
VERSION = "trunk"


def _dump_sample(logs: Path, dumps: Path) -> tuple[list[Path], Path]:
    """One dump per broker and partition (segments then snapshots) and one of __transaction_state,
    as ``kafka-dump-log.sh --deep-iteration --files <dir>/*.log,<dir>/*.snapshot`` and
    ``kafka-dump-log.sh --transaction-log-decoder --files __transaction_state-*/*.log`` print them."""
    dumps.mkdir()
    files = []
    txn = dumps.parent / "txn-state.txt"
    with open(txn, "w") as t:
        for broker in sorted(p for p in logs.iterdir() if p.is_dir()):
            for part in sorted(p for p in broker.iterdir() if p.is_dir()):
                segs = sorted(part.glob("*.log")) + sorted(part.glob("*.snapshot"))
                if part.name.startswith("__transaction_state-"):
                    for f in segs:
                        t.write(render_dump(str(f), VERSION, deep_iteration=False, transaction_log_decoder=True))
                    continue
                out = dumps / f"{broker.name}-{part.name}.txt"
                with open(out, "w") as o:
                    for f in segs:
                        o.write(render_dump(str(f), VERSION, deep_iteration=True))
                files.append(out)
    return files, txn


@pytest.fixture(scope="module")
def dump_run(spark, tmp_path_factory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("dumplog")
    truth = write_scenario("sample", work / "logs", seed=SAMPLE_SEED)
    files, txn = _dump_sample(work / "logs", work / "dumps")
    proc = run_in_process(
        spark,
        "--dump-log",
        "dumps",
        "--dump-log",
        "txn-state.txt",
        "--cluster",
        "ticket-4711",
        "--output",
        "out",
        cwd=work,
    )
    return {"proc": proc, "out": str(work / "out"), "truth": truth, "work": work, "files": files, "txn": txn}


def test_dump_log_job_succeeds(dump_run) -> None:
    proc = dump_run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "kafka-dump-log.sh output file" in proc.stdout and "findings by verdict" in proc.stdout
    runs = T.rows(dump_run["out"], "runs")
    assert len(runs) == 1 and runs[0]["cluster"] == "ticket-4711" and runs[0]["status"] == "SUCCEEDED"
    assert sorted(runs[0]["inputs"]) == sorted([str(dump_run["work"] / "dumps"), str(dump_run["txn"])])
    assert T.ms(runs[0]["as_of"]) == dump_run["truth"].as_of_ms


def test_dump_log_findings_and_commands_are_the_ground_truth(dump_run) -> None:
    out, truth = dump_run["out"], dump_run["truth"]
    recs = T.recommendations_by_key(out)
    assert T.actual_findings(out, recs) == T.expected_findings(truth)
    opens = {(o.topic, o.partition, o.producer_id, o.start_offset): o for o in truth.open_transactions}
    assert recs and all(r["safety"] in ("SAFE", "VERIFY_FIRST") for r in recs.values())
    for key, r in recs.items():
        o = opens[key]
        assert r["command"] == (
            f"kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic {o.topic} "
            f"--partition {o.partition} --start-offset {o.start_offset}"
        )
        assert r["legacy_command"] == (
            f"kafka-transactions.sh --bootstrap-server <bootstrap> abort --topic {o.topic} --partition {o.partition} "
            f"--producer-id {o.producer_id} --producer-epoch {o.producer_epoch} "
            f"--coordinator-epoch {max(o.coordinator_epoch, 0)}"
        )
    got = {T.finding_key(f): f for f in T.rows(out, "findings") if f["topic"] is not None}
    for o in truth.open_transactions:  # ages and the snapshot-only start, as from the segments
        f = got.get((o.topic, o.partition, o.producer_id, o.start_offset))
        if f is None:
            continue
        assert f["idle_ms"] == o.idle_ms and T.ms(f["last_timestamp"]) == o.last_timestamp
        if o.source == "log":
            assert f["open_ms"] == o.open_ms and T.ms(f["first_timestamp"]) == o.first_timestamp
        else:
            assert f["started_before_log_start"] is True
            assert "before the log start offset" in f["evidence"] and "producer snapshot at offset" in f["evidence"]
        if o.brokers and len(o.brokers) < len(truth.partitions[(o.topic, o.partition)].brokers):
            assert f["open_replicas"] == [T.broker_name(b) for b in sorted(o.brokers)]


def test_dump_log_transactions_health_and_coordinator(dump_run) -> None:
    out, truth = dump_run["out"], dump_run["truth"]
    actual, expected = T.actual_transactions(out), T.expected_transactions(truth)
    for o in truth.open_transactions:  # begun in a deleted segment: only the snapshot knows it
        if o.source == "snapshot":
            key = (o.topic, o.partition, o.producer_id, o.start_offset)
            for field in ("first_timestamp", "batch_count", "record_count", "size_bytes"):
                actual[key].pop(field)
                expected[key].pop(field)
    assert actual == expected
    health = {(p["topic"], p["partition"]): p for p in T.rows(out, "partition_health")}
    assert set(health) == set(truth.partitions)
    for (topic, partition), r in truth.partitions.items():  # what the leader reports (docs/design.md §4)
        p = health[(topic, partition)]
        assert (p["log_end_offset"], p["last_stable_offset"]) == (r.log_end_offset, r.last_stable_offset), (
            topic,
            partition,
        )
    state = {r["transactional_id"]: r for r in T.rows(out, "coordinator_state")}
    assert set(state) == set(truth.coordinator)
    for tid, want in truth.coordinator.items():
        r = state[tid]
        assert r["is_tombstoned"] == want.is_tombstoned
        if want.is_tombstoned:
            continue
        assert (
            r["producer_id"],
            r["producer_epoch"],
            r["state"],
            r["timeout_ms"],
            sorted(r["partitions"] or []),
            T.ms(r["last_update_timestamp"]),
            r["coordinator_partition"],
            r["coordinator_epoch"],
            r["previous_producer_id"],
            r["next_producer_id"],
            r["client_transaction_version"],
        ) == (
            want.producer_id,
            want.producer_epoch,
            want.state,
            want.timeout_ms,
            sorted(want.partitions),
            want.last_update_timestamp,
            want.coordinator_partition,
            want.coordinator_epoch,
            want.previous_producer_id,
            want.next_producer_id,
            want.client_transaction_version,
        ), tid


def test_dump_log_quarantine_names_dump_lines(dump_run) -> None:
    """The truncated tail and the CRC mismatch of the sample, as the segment reader reports them: the
    segment file and byte position the dump printed, the dump file and line in detail."""
    q = T.rows(dump_run["out"], "quarantine")
    got = sorted((Path(r["file"]).parts[-2:], r["position"], r["reason"]) for r in q)
    want = sorted((Path(x.file).parts[-2:], x.position, x.reason) for x in dump_run["truth"].quarantine)
    assert got == want
    for r in q:
        dump_file, line_no, _ = r["detail"].split(":", 2)
        line = (dump_run["work"] / dump_file).read_text().splitlines()[int(line_no) - 1]
        assert f"position: {r['position']}" in line or "invalid bytes" in line, line


def test_dump_log_readers_duckdb_and_polars(dump_run) -> None:
    import duckdb
    import polars as pl

    out, truth = dump_run["out"], dump_run["truth"]
    assert pl.read_delta(f"{out}/findings").height == len(truth.findings)
    con = duckdb.connect()
    con.execute(f"LOAD '{duckdb_delta_extension()}'")
    top = con.execute(README_DUCKDB_QUERY.replace("./out", out)).fetchall()
    assert sum(n for _v, _r, n in top) == len(truth.findings)


def test_readme_dump_log_command(tmp_path) -> None:
    """README "kafka-dump-log.sh output", verbatim: one partition's dump and the decoded
    __transaction_state; the partition's finding and abort command come out."""
    truth = write_scenario("sample", tmp_path / "logs", seed=SAMPLE_SEED)
    hang = next(f for f in truth.findings if f.reason == "COORDINATOR_COMPLETED" and f.topic == "orders")
    part = f"{hang.topic}-{hang.partition}"
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("kafka-dump-log.sh --deep-iteration --files /var/lib/kafka/data/orders-7") :]
    block = block[: block.index("```")]
    commands = block.strip().splitlines()
    assert commands[0].startswith(
        "kafka-dump-log.sh --deep-iteration --files /var/lib/kafka/data/orders-7/*.log > orders-7.txt"
    )
    assert commands[1].startswith(
        "kafka-dump-log.sh --transaction-log-decoder --files /var/lib/kafka/data/__transaction_state-*/*.log > txn-state.txt"
    )
    # what those two commands print (Kafka 3.x): the partition on a broker where it is open, and
    # __transaction_state from every broker (each holds some of its partitions)
    broker = (
        tmp_path / "logs" / T.broker_name((hang.brokers or truth.partitions[(hang.topic, hang.partition)].brokers)[0])
    )
    with open(tmp_path / "orders-7.txt", "w") as o:
        for f in sorted((broker / part).glob("*.log")):
            o.write(render_dump(str(f), "3.x", deep_iteration=True))
    with open(tmp_path / "txn-state.txt", "w") as o:
        for f in sorted((tmp_path / "logs").glob("broker-*/__transaction_state-*/*.log")):
            o.write(render_dump(str(f), "3.x", deep_iteration=False, transaction_log_decoder=True))
    cmd = commands[2].split()
    assert cmd[0] == "./spark-submit.sh"
    proc = run_job(*cmd[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = str(tmp_path / "out")
    findings = [f for f in T.rows(out, "findings") if f["topic"] is not None]
    assert [
        (f["topic"], f["partition"], f["producer_id"], f["start_offset"], f["verdict"], f["reason"]) for f in findings
    ] == [(hang.topic, hang.partition, hang.producer_id, hang.start_offset, "HANGING", "COORDINATOR_COMPLETED")]
    (rec,) = T.rows(out, "abort_recommendations")
    assert rec["command"].endswith(
        f"abort --topic {hang.topic} --partition {hang.partition} --start-offset {hang.start_offset}"
    )
    assert {r["cluster"] for r in T.rows(out, "runs")} == {"ticket-4711"}


# ============================================================================ live mode


@pytest.fixture(scope="module")
def noida_server(tmp_path_factory):  # type: ignore[no-untyped-def]
    from tests.live.noida import start_or_skip

    server = start_or_skip(tmp_path_factory.mktemp("noida"))
    try:
        yield server
    finally:
        server.stop()


def _serve_transaction_state(bootstrap: str, logs: Path) -> int:
    """Every record of the scenario's __transaction_state segments, produced to the same partition of
    the server's __transaction_state topic (same 50-partition layout), in log order. Record
    timestamps are near now (the server, like a broker, deletes records older than its retention);
    the job gets the scenario's as_of with --as-of. Returns the number of records."""
    import struct

    import confluent_kafka

    from txnlog.kafka.compression import decompress
    from txnlog.kafka.dump_log_render import _V2_HEADER, _iter_v2_records

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "log_level": 3,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    errors: list[Any] = []
    n = 0
    now = int(time.time() * 1000) - 600_000
    for seg in sorted(logs.glob("broker-*/__transaction_state-*/*.log")):
        partition = int(seg.parent.name.rsplit("-", 1)[1])
        buf = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(buf):
            (bo, blen, _ple, magic, _crc, attrs, _lod, _bts, _mts, _pid, _pe, _bs, count) = _V2_HEADER.unpack_from(
                buf, pos
            )
            assert magic == 2 and struct.unpack_from(">q", buf, pos)[0] == bo
            payload = decompress(attrs & 0x07, buf[pos + 61 : pos + 12 + blen])
            for _ts, _od, key, value, _h in _iter_v2_records(payload, count):
                p.produce(
                    "__transaction_state",
                    key=key,
                    value=value,
                    partition=partition,
                    timestamp=now + n,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                )
                n += 1
            pos += 12 + blen
        p.flush(60)
    assert p.flush(60) == 0 and not errors, errors
    return n


@pytest.mark.live
def test_live_mode_with_topic(noida_server, tmp_path) -> None:
    """``./spark-submit.sh --bootstrap-servers B --topic T``: __transaction_state read live (every
    partition), the scenario's stuck coordinator record found; T's partitions checked live."""
    from tests.live.capture import _create_topic
    from tests.live.test_live_tables import _kill_mid_transaction

    b = noida_server.bootstrap
    truth = write_scenario("coordinator_stuck", tmp_path / "logs", seed=0)
    assert _serve_transaction_state(b, tmp_path / "logs") > 0
    _create_topic(b, "verify-live-txn", 3)  # the killed producer of tests/live/test_live_tables.py
    killed = _kill_mid_transaction(b)
    proc = run_job(
        "--bootstrap-servers",
        b,
        "--topic",
        "verify-live-txn",
        "--as-of",
        str(truth.as_of_ms),
        "--cluster",
        "noida",
        "--output",
        "out",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"__transaction_state read live from {b}" in proc.stdout
    out = str(tmp_path / "out")

    # offline rows from the live __transaction_state: the scenario's coordinator, its stuck record
    state = {r["transactional_id"]: r for r in T.rows(out, "coordinator_state") if r["source"] == "live_log"}
    assert set(state) == set(truth.coordinator)
    for tid, want in truth.coordinator.items():
        r = state[tid]
        if want.is_tombstoned:
            assert r["is_tombstoned"]
            continue
        assert (
            r["producer_id"],
            r["producer_epoch"],
            r["state"],
            sorted(r["partitions"] or []),
            T.ms(r["last_update_timestamp"]),
            r["coordinator_partition"],
            r["previous_producer_id"],
            r["client_transaction_version"],
        ) == (
            want.producer_id,
            want.producer_epoch,
            want.state,
            sorted(want.partitions),
            want.last_update_timestamp,
            want.coordinator_partition,
            want.previous_producer_id,
            want.client_transaction_version,
        ), tid
    offline = [f for f in T.rows(out, "findings") if f["source"] == "live_log"]
    want = [f for f in truth.findings if f.reason == "COORDINATOR_STUCK"]
    assert [(f["verdict"], f["reason"], f["transactional_id"]) for f in offline] == [
        (f.verdict, f.reason, f.transactional_id) for f in want
    ]

    # live rows for --topic: the killed producer pins the LSO of partitions 1 and 2
    health = {r["partition"]: r for r in T.rows(out, "partition_health") if r["source"] == "live"}
    assert sorted(health) == [0, 1, 2] and all(r["topic"] == "verify-live-txn" for r in health.values())
    assert health[0]["lso_lag"] == 0
    for p in (1, 2):
        assert (health[p]["last_stable_offset"], health[p]["lso_lag"]) == (min(killed[p]), len(killed[p]))
    live_state = [r for r in T.rows(out, "coordinator_state") if r["source"] == "live"]
    assert [(r["transactional_id"], r["state"]) for r in live_state] == [("vl-killed", "Ongoing")]


def test_topic_needs_bootstrap_servers(tmp_path) -> None:
    """--topic without a cluster: one line, exit 2, before any JVM starts."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--topic", "orders"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "txnlog: error: --topic orders: needs --bootstrap-servers (the live cluster to ask about it); "
        "give it or drop --topic"
    )
    assert time.monotonic() - t0 < 60
    with __import__("socket").socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--bootstrap-servers", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"txnlog: error: --bootstrap-servers 127.0.0.1:{port}: cannot reach the cluster")
    assert re.search(
        r"--topic TOPIC",
        subprocess.run([str(ROOT / "spark-submit.sh"), "--help"], capture_output=True, text=True, timeout=60).stdout,
    )


def test_topic_flag_and_config_key(tmp_path, capsys) -> None:
    """--topic (repeatable) is the config key `topics` and turns the live checks on; the key is
    documented in conf/default.yaml and a misspelt one is still rejected."""
    import sys

    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import find_hanging
    finally:
        sys.path.pop(0)
    from txnlog.model.config import DEFAULT_FILE, ConfigError, load_config

    args = find_hanging.build_parser().parse_args(
        ["--bootstrap-servers", "k:9092", "--topic", "orders", "--topic", "payments"]
    )
    assert args.topic == ["orders", "payments"]
    assert "\ntopics: []" in DEFAULT_FILE.read_text() and "--topic" in DEFAULT_FILE.read_text()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("topics: [orders]\nbootstrap_servers: k:9092\nverify_live: true\n")
    assert load_config(str(cfg)).topics == ["orders"]
    cfg.write_text("topic: orders\n")
    with pytest.raises(ConfigError, match="unknown key 'topic' \\(did you mean 'topics'\\?\\)"):
        load_config(str(cfg))
    assert find_hanging.main(["--validate-only", "--topic", "orders", "--dump-log", str(cfg)]) == 2
    assert "--topic orders: needs --bootstrap-servers" in capsys.readouterr().err
