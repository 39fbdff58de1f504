"""The remedies the job writes, run against the real coordinator: the coordinator epoch they carry, the script
``txnlog plan --script`` generates, and a second run that finds nothing.

After a committed transaction, a hanging transaction no coordinator owns (tests/live/orphan.py) on a topic of its own, whose producer already
has a marker in the partition: an earlier transaction of it was aborted by WriteTxnMarkers with coordinator
epoch 5, as a coordinator at epoch 5 would write it. From then on the partition fences a marker with an older
coordinator epoch (``ProducerStateManager``'s ``checkCoordinatorEpoch``, TRANSACTION_COORDINATOR_FENCED): an
abort must carry 5, the coordinator epoch DescribeProducers reports and the job reads from the marker. The job
runs on the live topic (Fetch of the partition and of ``__transaction_state``); its abort recommendation's
legacy command carries epoch 5; ``plan --script`` writes the one ``txnlog abort`` for it, a dry run as written;
run with ``--execute`` it re-validates the transaction on DescribeProducers, aborts it and the LSO moves to the
high watermark; the job run again finds nothing, and the plan has nothing to run.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.live.capture import _create_topic
from tests.live.orphan import init_producer_id, produce_transactional
from txnlog.live import abort as live_abort
from txnlog.live import admin as live
from txnlog.ops.cli import main as txnlog_main

pytestmark = pytest.mark.live

TOPIC = "remedy-orphan"
#: the coordinator epoch of the producer's first marker: not 0, so that it cannot be a default
EPOCH = 5


def _job(bootstrap: str, spark: Any, out: Path) -> dict[str, list[dict[str, Any]]]:
    """The job on the live topic, a day ahead (past transaction.max.timeout.ms): this topic's findings,
    abort_recommendations and partition_health rows."""
    from txnlog.model.config import load_config
    from txnlog.output.delta import read_table
    from txnlog.pipeline import run

    as_of = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    cfg = load_config(
        None,
        {"output": str(out), "cluster": "kafka", "bootstrap_servers": bootstrap, "topics": [TOPIC], "as_of": as_of},
    )
    run(cfg, spark=spark, progress=lambda _m: None)
    tables = ("findings", "abort_recommendations", "partition_health")
    return {t: [r for r in read_table(str(out), t).to_pylist() if r["topic"] == TOPIC] for t in tables}


def _offsets(bootstrap: str) -> dict[str, Any]:
    return live.partition_offsets(bootstrap, {}, [(TOPIC, 0)])[0]


def _plan_script(out: Path, script: Path, bootstrap: str) -> str:
    """``txnlog plan --script`` (in this process): the script's text."""
    buf = io.StringIO()
    assert (
        txnlog_main(["plan", "--output", str(out), "--script", str(script), "--bootstrap-servers", bootstrap], out=buf)
        == 0
    )
    return script.read_text()


def _committed(bootstrap: str) -> None:
    """A committed transaction first: the job's live source reads ``__transaction_state``, which the broker
    creates for the first transactional.id."""
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "remedy-done", "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, value=b"done", partition=0)
    p.commit_transaction(30)


@pytest.fixture(scope="module")
def hanging(kafka_broker) -> dict[str, Any]:
    b = kafka_broker.bootstrap
    _create_topic(b, TOPIC, 1)
    _committed(b)
    orphan = init_producer_id(b)
    first = produce_transactional(b, orphan, TOPIC, 0, [b"before-%d" % i for i in range(3)])
    admin = live.admin_client(b)
    try:
        aborted = live_abort.AbortPlan(
            TOPIC, 0, orphan.producer_id, orphan.producer_epoch, EPOCH, first, "", "", None, ""
        )
        live_abort.send_abort(admin, aborted)
        start = produce_transactional(b, orphan, TOPIC, 0, [b"hanging-%d" % i for i in range(2)])
        (row,) = [r for r in live.describe_producers(admin, TOPIC, [0]) if r["producer_id"] == orphan.producer_id]
    finally:
        admin.close()
    assert (row["coordinator_epoch"], row["current_transaction_start_offset"]) == (EPOCH, start)
    return {"bootstrap": b, "orphan": orphan, "start": start, "epoch": orphan.producer_epoch}


def test_an_older_coordinator_epoch_is_fenced(hanging) -> None:
    """What makes the epoch matter: WriteTxnMarkers with an older coordinator epoch (kafka-python's default -1,
    or 0 where the unknown epoch is sent as 0) is refused, and the transaction stays open."""
    from kafka.errors import TransactionCoordinatorFencedError

    b, orphan = hanging["bootstrap"], hanging["orphan"]
    admin = live.admin_client(b)
    try:
        for stale in (-1, 0, EPOCH - 1):
            plan = live_abort.AbortPlan(
                TOPIC, 0, orphan.producer_id, hanging["epoch"], stale, hanging["start"], "", "", None, ""
            )
            with pytest.raises(TransactionCoordinatorFencedError):
                live_abort.send_abort(admin, plan)
    finally:
        admin.close()
    assert _offsets(b)["last_stable_offset"] == hanging["start"]


def test_plan_script_aborts_with_the_epoch_the_broker_expects(hanging, spark, tmp_path: Path) -> None:
    b, start = hanging["bootstrap"], hanging["start"]
    before = _job(b, spark, tmp_path / "before")
    (finding,) = before["findings"]
    assert (finding["verdict"], finding["reason"], finding["start_offset"]) == (
        "HANGING",
        "NO_TRANSACTIONAL_ID",
        start,
    )
    (rec,) = before["abort_recommendations"]
    assert rec["coordinator_epoch"] == EPOCH  # the producer's last marker's, what DescribeProducers reports
    assert f"--coordinator-epoch {EPOCH}" in rec["legacy_command"]
    assert f"--start-offset {start}" in rec["command"]

    script = tmp_path / "unblock.sh"
    text = _plan_script(tmp_path / "before", script, b)
    calls = [line for line in text.splitlines() if line.startswith("txnlog ")]
    ours = [line for line in calls if f"--topic {TOPIC} " in line]
    assert ours == [
        f'txnlog abort --bootstrap-servers {b} --topic {TOPIC} --partition 0 --start-offset {start} "$@"  '
        f"# LSO {start} -> {start + 2}, 2 offsets released"
    ], text
    # the session's broker also holds transactions other tests left open; their partitions are not in this run's
    # input (one topic), so the plan can only fence them: kept out of the script this test executes
    others = [line for line in calls if line not in ours]
    assert all(line.startswith("txnlog fence ") and "not in the input" in line for line in others), text
    script.write_text("".join(line + "\n" for line in text.splitlines() if line not in others))

    # the script run (the venv's txnlog on PATH; its dry run is tests/test_cli.py's) passes its arguments to each
    # 'txnlog abort': --execute, and an idle threshold of 0 for the re-validation, the transaction being seconds old
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    idle = ["--max-transaction-timeout-ms", "0"]
    done = subprocess.run(["sh", str(script), *idle, "--execute"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and f"coordinator_epoch={EPOCH}" in done.stdout, done.stdout + done.stderr
    after = _offsets(b)
    assert after["last_stable_offset"] == after["high_watermark"] == start + 3  # the ABORT marker's offset + 1

    again = _job(b, spark, tmp_path / "after")
    assert again["findings"] == [] and again["abort_recommendations"] == []
    assert [h["lso_lag"] for h in again["partition_health"]] == [0]
    # nothing of ours is left to abort; the session broker's other open transactions can still only be fenced
    text = _plan_script(tmp_path / "after", script, b)
    calls = [line for line in text.splitlines() if line.startswith("txnlog ")]
    assert all(line.startswith("txnlog fence ") and "not in the input" in line for line in calls), text
    assert calls or "nothing is SAFE to abort" in text, text
