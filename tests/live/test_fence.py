"""``txnlog fence`` end to end on a real Kafka coordinator: real transactional producers SIGKILLed mid-transaction.

The session broker (tests/live/broker.py) checks for timed-out transactions once an hour instead of Kafka's 10 s
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``), so a killed producer's transaction with a 1 s
timeout stays Ongoing past it: the COORDINATOR_TIMEOUT_OVERDUE a fence is for (a coordinator that has not
aborted it on its own). Each refusal is one line and exit 2, with nothing sent (the id's state and epoch
unchanged); the fence (InitProducerId for the id) bumps the epoch, the coordinator aborts the transaction on
both partitions it lists, their LSOs move to the high watermark, and the job run on the live partitions finds
the transaction before and nothing after.
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.live.capture import _create_topic
from tests.live.killed import run_and_kill
from txnlog.live import admin as live
from txnlog.ops.cli import main as txnlog_main

pytestmark = pytest.mark.live

TOPIC = "fence-txn"
YOUNG_TOPIC = "fence-young"  # tx-young's, so that nothing else is open on TOPIC

# A transactional producer that writes to partitions 0 and 1, reports the offsets, and waits to be killed.
_KILLED_PRODUCER = r"""
import json, sys, time
import confluent_kafka
bootstrap, topic, tid, timeout_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                              "transaction.timeout.ms": timeout_ms, "linger.ms": 5, "log_level": 3})
p.init_transactions(30)
p.begin_transaction()
delivered = []
def cb(err, msg):
    delivered.append([msg.partition(), msg.offset(), None if err is None else str(err)])
for part in (0, 1):
    for i in range(3):
        p.produce(topic, value=b"fenced-%d" % i, partition=part, on_delivery=cb)
assert p.flush(30) == 0
print(json.dumps(delivered), flush=True)
time.sleep(600)
"""


def _kill_mid_transaction(bootstrap: str, topic: str, tid: str, timeout_ms: int) -> dict[int, list[int]]:
    return run_and_kill(_KILLED_PRODUCER, bootstrap, topic, tid, str(timeout_ms))


def _committed(bootstrap: str, tid: str) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, value=b"done", partition=2)
    p.commit_transaction(30)
    p.flush(10)


@pytest.fixture(scope="module")
def cluster(kafka_broker) -> Any:
    """tx-overdue: killed, 1 s timeout, past it. tx-young: killed, 10 min timeout (its own topic). tx-done:
    committed."""
    b = kafka_broker.bootstrap
    _create_topic(b, TOPIC, 3)
    _create_topic(b, YOUNG_TOPIC, 2)
    _committed(b, "tx-done")
    young = _kill_mid_transaction(b, YOUNG_TOPIC, "tx-young", 600_000)
    overdue = _kill_mid_transaction(b, TOPIC, "tx-overdue", 1000)
    time.sleep(1.5)  # past tx-overdue's timeout
    admin = live.admin_client(b)
    yield {"bootstrap": b, "admin": admin, "overdue": overdue, "young": young}
    admin.close()


def _describe(cluster: dict[str, Any], tid: str) -> dict[str, Any]:
    d = live.describe_transactions(cluster["admin"], [tid])[tid]
    assert d is not None
    return d


def _fence(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    buf = io.StringIO()
    rc = txnlog_main(["fence", *argv], out=buf)
    return rc, buf.getvalue(), capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_dry_run_validates_and_sends_nothing(cluster, capsys) -> None:
    d = _describe(cluster, "tx-overdue")
    assert d["state"] == "Ongoing" and d["timeout_ms"] == 1000
    args = ["--bootstrap-server", cluster["bootstrap"], "--transactional-id", "tx-overdue"]
    pinned = ["--producer-id", str(d["producer_id"]), "--producer-epoch", str(d["producer_epoch"])]
    rc, out, err = _fence(args + pinned, capsys)
    assert rc == 0, err
    assert "DRY RUN" in out
    assert f"validated: DescribeTransactions shows tx-overdue Ongoing with producer {d['producer_id']} epoch" in out
    assert f"past its 1000 ms timeout, listing {TOPIC}-0, {TOPIC}-1" in out
    assert f"would fence tx-overdue: producer_id={d['producer_id']} producer_epoch={d['producer_epoch']}" in out
    assert "forceTerminateTransaction --transactionalId tx-overdue" in out
    assert _describe(cluster, "tx-overdue") == d  # nothing sent


@pytest.mark.parametrize(
    "case",
    ["other producer id", "other epoch", "within its timeout", "not ongoing", "unknown id"],
)
def test_refused_one_line_exit_2_nothing_sent(cluster, capsys, case: str) -> None:
    d = _describe(cluster, "tx-overdue")
    pid, epoch = d["producer_id"], d["producer_epoch"]
    tid, pin, expect = {
        "other producer id": ("tx-overdue", (pid + 1, epoch), f"not producer {pid + 1}: the id has moved on"),
        "other epoch": ("tx-overdue", (pid, epoch + 1), f"not epoch {epoch + 1}: the producer has moved on"),
        "within its timeout": ("tx-young", None, "still within its 600000 ms timeout"),
        "not ongoing": ("tx-done", None, "not Ongoing, no transaction in flight; nothing to fence"),
        "unknown id": ("no-such-id", None, "unknown to its coordinator"),
    }[case]
    before = {t: live.describe_transactions(cluster["admin"], [t])[t] for t in ("tx-overdue", tid)}
    argv = ["--bootstrap-server", cluster["bootstrap"], "--transactional-id", tid, "--execute"]
    if pin:
        argv += ["--producer-id", str(pin[0]), "--producer-epoch", str(pin[1])]
    rc, _, err = _fence(argv, capsys)
    assert rc == 2
    line = _one_line(err)
    assert line.startswith("txnlog: refused: ") and expect in line, line
    assert {t: live.describe_transactions(cluster["admin"], [t])[t] for t in before} == before


def test_usage_errors_are_one_line(cluster, capsys) -> None:
    rc, _, err = _fence(
        ["--bootstrap-server", cluster["bootstrap"], "--transactional-id", "tx-overdue", "--producer-id", "1"], capsys
    )
    assert rc == 2 and "--producer-id and --producer-epoch together" in _one_line(err)
    rc, _, err = _fence(["--transactional-id", "tx-overdue"], capsys)
    assert rc == 2 and "pass --bootstrap-server" in _one_line(err)


def _job_findings(bootstrap: str, spark: Any, out: str) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The job on the live topic (read with Fetch), a day ahead so every open transaction is a candidate."""
    from txnlog.model.config import load_config
    from txnlog.output.delta import read_table
    from txnlog.pipeline import run

    as_of = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    cfg = load_config(
        None, {"output": out, "cluster": "kafka", "bootstrap_servers": bootstrap, "topics": [TOPIC], "as_of": as_of}
    )
    run(cfg, spark=spark, progress=lambda _m: None)
    findings = [r for r in read_table(out, "findings").to_pylist() if r["topic"] == TOPIC]
    lags = {
        r["partition"]: r["lso_lag"] for r in read_table(out, "partition_health").to_pylist() if r["topic"] == TOPIC
    }
    return findings, lags


def test_execute_fences_the_overdue_transaction(cluster, capsys, spark, tmp_path) -> None:
    b, overdue = cluster["bootstrap"], cluster["overdue"]
    before, lags = _job_findings(b, spark, str(tmp_path / "before"))
    starts = {(r["partition"], r["start_offset"]) for r in before}
    assert {(p, min(o)) for p, o in overdue.items()} <= starts  # the job finds it on both partitions
    assert lags[0] > 0 and lags[1] > 0

    d = _describe(cluster, "tx-overdue")
    rc, out, err = _fence(
        [
            "--bootstrap-server",
            b,
            "--transactional-id",
            "tx-overdue",
            "--producer-id",
            str(d["producer_id"]),
            "--producer-epoch",
            str(d["producer_epoch"]),
            "--execute",
        ],
        capsys,
    )
    assert rc == 0, err
    after = _describe(cluster, "tx-overdue")
    assert after["state"] != "Ongoing" and after["producer_epoch"] > d["producer_epoch"]
    assert (
        f"fenced tx-overdue: producer {after['producer_id']} is now at epoch {after['producer_epoch']} "
        f"(was {d['producer_epoch']}); its transaction on {TOPIC}-0, {TOPIC}-1 is aborted"
    ) in out

    # Its LSO moved: nothing is open on the two partitions any more.
    offsets = {o["partition"]: o for o in live.partition_offsets(b, None, [(TOPIC, 0), (TOPIC, 1)])}
    for p in (0, 1):
        assert offsets[p]["last_stable_offset"] == offsets[p]["high_watermark"] > max(overdue[p])

    # A second check: the fence refuses (nothing in flight), and the job finds nothing on the topic.
    rc, _, err = _fence(["--bootstrap-server", b, "--transactional-id", "tx-overdue", "--execute"], capsys)
    assert rc == 2 and "not Ongoing" in _one_line(err)
    found, lags = _job_findings(b, spark, str(tmp_path / "after"))
    assert found == [] and lags[0] == 0 and lags[1] == 0
    assert _describe(cluster, "tx-young")["state"] == "Ongoing"  # refused earlier: untouched
