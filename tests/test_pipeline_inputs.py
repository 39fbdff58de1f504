"""The job on other inputs than copied log dirs: kafka-dump-log.sh text (in-process, shared session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnlog.model.config import load_config
from txnlog.output.delta import read_table
from txnlog.pipeline import run

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "dump-log"


@pytest.mark.spark
@pytest.mark.skipif(not REALDATA.is_dir(), reason="shared/realdata/dump-log is not beside the checkout")
def test_real_dump_log_outputs_flow_into_the_tables(spark, tmp_path):
    out = str(tmp_path / "out")
    config = load_config(None, {"dump_log": [str(REALDATA)], "output": out, "cluster": "klog"})
    result = run(config, spark=spark, progress=lambda _m: None)
    txns = sorted(
        (
            t["topic"],
            t["partition"],
            t["first_offset"],
            t["last_offset"],
            t["marker_offset"],
            t["outcome"],
            t["coordinator_epoch"],
            t["batch_count"],
        )
        for t in read_table(out, "transactions").to_pylist()
    )
    # klog-testWithDeepIterationWithControlRecords.txt, read by hand: producer 0 writes offsets 0-3,
    # COMMIT at 4 (coordinator epoch 4); then offset 5, COMMIT at 6.
    assert txns == [
        ("transactional-foo", 0, 0, 3, 4, "COMMIT", 4, 3),
        ("transactional-foo", 0, 5, 5, 6, "COMMIT", 4, 1),
    ]
    reasons = {q["reason"] for q in read_table(out, "quarantine").to_pylist()}
    assert "dump_log_malformed_2_8" in reasons  # the broken 2.8 output is reported, not mis-parsed
    state = {r["transactional_id"]: r for r in read_table(out, "coordinator_state").to_pylist()}
    assert state, "the --transaction-log-decoder dump holds __transaction_state records"
    assert result.counts["findings"] == 0
    assert {t["source"] for t in read_table(out, "transactions").to_pylist()} == {"dump_log"}
    assert {r["source"] for r in state.values()} == {"dump_log"}


def test_library_run_in_live_mode_fails_in_one_line_before_spark(tmp_path):
    """A notebook calling run() on an unreachable cluster gets a UsageError naming it, not a Spark task traceback.

    The check (``txnlog.live.admin.check_cluster``, a 30 s timeout) gives up once librdkafka has said for a few
    seconds that every broker is down (a refused port), without waiting out the timeout."""
    import socket
    import time

    from txnlog.model.errors import UsageError

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = load_config(None, {"bootstrap_servers": f"127.0.0.1:{port}", "output": str(tmp_path / "out")})

    class NoSpark:  # run() must fail before it touches the session
        def __getattr__(self, name):
            raise AssertionError(f"Spark was used ({name}) before the cluster was checked")

    started = time.monotonic()
    with pytest.raises(UsageError, match=rf"^--bootstrap-servers 127\.0\.0\.1:{port}: cannot reach the cluster"):
        run(config, spark=NoSpark(), progress=lambda _m: None)
    assert time.monotonic() - started < 15, "a refused port fails within seconds, not the 30 s timeout"


def test_cluster_is_named_after_the_input(tmp_path) -> None:
    """No --cluster: the same input gives the same name (reruns replace their run, since-last-run finds the
    previous one), different inputs different names; the embedded sample stays 'sample'."""
    from txnlog.pipeline import Inputs, cluster_name
    from txnlog.sources.offline import Offline

    a, b = tmp_path / "incident-4711" / "logs", tmp_path / "other" / "logs"
    assert cluster_name("prod-eu", Inputs(Offline(logs=(str(a),)))) == ("prod-eu", False)
    assert cluster_name(None, Inputs(sample=True)) == ("sample", True)
    assert cluster_name(None, Inputs(live="k2:9092,k1:9092")) == ("live-k1:9092,k2:9092", True)
    name, derived = cluster_name(None, Inputs(Offline(logs=(str(a),))))
    assert derived and name.startswith("logs-") and len(name) == len("logs-") + 8
    assert cluster_name(None, Inputs(Offline(logs=(str(a) + "/",))))[0] == name  # the same directory
    assert cluster_name(None, Inputs(Offline(logs=(str(b),))))[0] != name
    dumps = ("broker-1=/x/b1 orders.txt", "/x/b2")
    name = cluster_name(None, Inputs(Offline(dump_log=dumps)))[0]
    assert name.startswith("b1-orders.txt-") and name == cluster_name(None, Inputs(Offline(dump_log=dumps)))[0]


def test_the_inputs_come_named_and_placed(tmp_path) -> None:
    """plan_inputs hands on the run's cluster name and placement with the inputs; with no input and no sample
    (the job's check before it decides on Spark) it names nothing and places the run in the driver, where a
    run without input reads the embedded sample."""
    from txnlog.pipeline import plan_inputs

    nothing = plan_inputs(load_config(None, {"progress": False}), sample=False)
    assert nothing.name == "" and nothing.placement.driver and nothing.without_spark
    named = plan_inputs(load_config(None, {"progress": False, "cluster": "prod-eu", "delta_writer": "spark"}))
    assert (named.name, named.name_derived, named.sample) == ("prod-eu", False, True)
    assert named.placement.driver and not named.without_spark  # the Spark writer needs a session
