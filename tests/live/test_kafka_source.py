"""The Kafka source for data partitions against the real broker (the session broker), with real transactional
producers.

One topic of 8 partitions gets committed, aborted and open transactions from librdkafka
(confluent-kafka) and kafka-python producers in every codec they have (tests/live/capture.py), plus a
producer SIGKILLed mid-transaction on partitions 3 and 4. The same partitions are then copied byte for
byte with a raw Fetch (tests/live/raw_fetch.py: the offline path's input, what a broker's ``.log`` holds).

* ``--live-range all`` writes the same transactions (offsets, producer ids and epochs, outcomes) as the
  offline path (``--logs``) on the copied bytes;
* ``unstable`` fetches only each unstable partition's tail from its LSO and the bounded look-back
  before it (bytes counted), nothing at all for the stable partitions, and its open transactions are
  the ``all`` run's;
* ``./spark-submit.sh --master local[1]`` gives the same rows as the in-process ``local[2]`` run.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.live import raw_fetch
from tests.live.capture import default_plans, run_capture
from tests.live.killed import run_and_kill
from txnlog.model.config import load_config
from txnlog.output.delta import read_table

pytestmark = pytest.mark.live

PARTITIONS = 8
KILLED_PARTITIONS = (3, 4)
ROOT = Path(__file__).resolve().parents[2]

# A transactional producer that writes to two partitions, reports the offsets, and waits to be killed.
_KILLED_PRODUCER = r"""
import json, sys, time
import confluent_kafka
bootstrap, topic, tid, parts = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                              "transaction.timeout.ms": 900000, "compression.type": "zstd",
                              "linger.ms": 5, "log_level": 3})
p.init_transactions(30)
p.begin_transaction()
delivered = []
def cb(err, msg):
    delivered.append([msg.partition(), msg.offset(), None if err is None else str(err)])
for part in parts:
    for i in range(3):
        p.produce(topic, value=(b"killed-%d-" % i) * 40, partition=part, on_delivery=cb)
assert p.flush(30) == 0
print(json.dumps(delivered), flush=True)
time.sleep(900)
"""

KEY = ("topic", "partition", "producer_id", "producer_epoch", "first_offset", "last_offset", "outcome")


def _kill_mid_transaction(bootstrap: str, topic: str) -> dict[int, list[int]]:
    tid = f"kafka-source-killed-{uuid.uuid4().hex[:6]}"
    return run_and_kill(_KILLED_PRODUCER, bootstrap, topic, tid, json.dumps(KILLED_PARTITIONS))


@pytest.fixture(scope="module")
def topic(kafka_broker, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The topic on the server, and its partitions copied as a broker log dir (``logs/kafka``)."""
    name = f"kafka-source-{uuid.uuid4().hex[:8]}"
    work = tmp_path_factory.mktemp("kafka-source")
    run_capture(
        kafka_broker.bootstrap, work / "capture", topic=name, partitions=PARTITIONS, plans=default_plans(PARTITIONS)
    )
    killed = _kill_mid_transaction(kafka_broker.bootstrap, name)
    logs = work / "logs" / "kafka"
    for p in range(PARTITIONS):
        f = raw_fetch.fetch_partition(kafka_broker.bootstrap, name, p)
        d = logs / f"{name}-{p}"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(f.records)
    return {"name": name, "bootstrap": kafka_broker.bootstrap, "work": work, "logs": work / "logs", "killed": killed}


def _run(spark, topic: dict[str, Any], out: str, **over: Any) -> Any:
    from txnlog.pipeline import run

    config = load_config(None, {"output": out, "cluster": "kafka", **over})
    return run(config, spark=spark, progress=lambda _m: None)


def _keys(out: str) -> set[tuple]:
    return {tuple(r[k] for k in KEY) for r in read_table(out, "transactions").to_pylist()}


@pytest.fixture(scope="module")
def runs(spark, topic: dict[str, Any]) -> dict[str, Any]:
    work = topic["work"]
    live = {"bootstrap_servers": topic["bootstrap"], "topics": [topic["name"]]}
    results = {
        "all": _run(spark, topic, str(work / "out-all"), live_range="all", **live),
        "unstable": _run(spark, topic, str(work / "out-unstable"), live_range="unstable", **live),
        "offline": _run(spark, topic, str(work / "out-offline"), logs=[str(topic["logs"])]),
    }
    return {k: (str(work / f"out-{k}"), r) for k, r in results.items()}


def test_all_range_writes_the_offline_transactions(runs, topic) -> None:
    live_out, live_result = runs["all"]
    offline_out, _ = runs["offline"]
    live, offline = _keys(live_out), _keys(offline_out)
    assert live == offline
    outcomes = {k[-1] for k in live}
    assert {"COMMIT", "ABORT", "OPEN"} <= outcomes, outcomes
    # the killed producer's transaction is open on both of its partitions
    opened = {(k[1], k[4]) for k in live if k[-1] == "OPEN"}
    for p, offsets in topic["killed"].items():
        assert (p, min(offsets)) in opened
    rows = read_table(live_out, "transactions").to_pylist()
    assert {r["source"] for r in rows} == {"live_log"} and {tuple(r["replicas"]) for r in rows} == {("live",)}
    assert live_result.as_of_source == "live_cut"
    run_row = read_table(live_out, "runs").to_pylist()[0]
    assert run_row["as_of_source"] == "live_cut" and run_row["inputs"] == [f"kafka://{topic['bootstrap']}"]


def test_partition_health_has_the_cut_offsets(runs, topic) -> None:
    from txnlog.live.admin import partition_offsets

    out, _ = runs["unstable"]
    now = {o["partition"]: o for o in partition_offsets(topic["bootstrap"], {}, [(topic["name"], p) for p in range(8)])}
    health = {r["partition"]: r for r in read_table(out, "partition_health").to_pylist() if r["source"] == "live_log"}
    assert sorted(health) == list(range(PARTITIONS))
    for p, h in health.items():
        assert (h["high_watermark"], h["last_stable_offset"]) == (
            now[p]["high_watermark"],
            now[p]["last_stable_offset"],
        ), p
        # what the input holds starts where the range read began: at the LSO or its look-back, never before
        assert now[p]["log_start_offset"] <= h["log_start_offset"] <= now[p]["last_stable_offset"], p


def test_unstable_run_has_the_open_transactions(runs) -> None:
    every, tail = _keys(runs["all"][0]), _keys(runs["unstable"][0])
    assert tail <= every
    assert {k for k in tail if k[-1] == "OPEN"} == {k for k in every if k[-1] == "OPEN"}
    assert len(tail) < len(every)


def test_unstable_fetches_only_the_tail_and_the_lookback(topic) -> None:
    """The bytes read are the copied segment's bytes from the look-back's first batch to the end, and
    the look-back is bounded; stable partitions cost no Fetch at all."""
    import numpy as np

    from txnlog.engine.spark.live_batches import capture_cut, pack_ranges, read_ranges
    from txnlog.kafka.record_batch import scan_segment
    from txnlog.live.fetch import FetchSettings

    lookback = 600
    cut = capture_cut(topic["bootstrap"], {}, [topic["name"]], mode="unstable", lookback_bytes=lookback)
    unstable = {r.partition for r in cut.ranges if r.last_stable_offset < r.high_watermark}
    assert set(KILLED_PARTITIONS) <= unstable and unstable != set(range(PARTITIONS))
    parts = pack_ranges(cut.ranges, tasks=16)
    idle = [p for p in parts if not p.value["fetch"]]
    assert len(idle) == 1 and {r.partition for r in idle[0].ranges()} == set(range(PARTITIONS)) - unstable
    settings = FetchSettings(partition_max_bytes=4096)
    for r in cut.ranges:
        if r.partition not in unstable:
            continue
        reads: list[Any] = []
        rows = list(read_ranges(topic["bootstrap"], {}, [r], settings=settings, reads=reads))
        assert rows and len(reads) == 1
        read = reads[0]
        segment = (topic["logs"] / "kafka" / f"{topic['name']}-{r.partition}" / "00000000000000000000.log").read_bytes()
        scan = scan_segment(segment)
        b = scan.batches
        at_lso = int(np.flatnonzero(b["base_offset"] <= r.last_stable_offset)[-1])
        first = int(np.flatnonzero(b["base_offset"] == read.first_offset)[0])
        start = int(b["position"][first])
        assert read.data.tobytes() == segment[start:], r.partition
        tail_bytes = len(segment) - int(b["position"][at_lso])
        back_bytes = int(b["position"][at_lso]) - start
        # the look-back stops once it holds `lookback` bytes: at most one window more than that
        assert back_bytes >= min(lookback, int(b["position"][at_lso])), (r.partition, back_bytes)
        assert back_bytes <= 2 * lookback + int(b["batch_length"][:at_lso].max(initial=0)) + 12
        # fetched: what was kept plus the partial entries the 4 KiB limit cut (one per request at most)
        assert len(segment) - start <= read.bytes_fetched <= len(segment) - start + read.requests * 4096
        assert tail_bytes > 0


def test_spark_submit_local1_matches_local2(runs, topic, tmp_path) -> None:
    """The job through ./spark-submit.sh on one core gives the rows of the in-process local[2] run."""
    out = str(tmp_path / "out")
    cmd = [
        str(ROOT / "spark-submit.sh"), "--master", "local[1]", "--bootstrap-servers", topic["bootstrap"],
        "--topic", topic["name"], "--live-range", "all", "--output", out, "--cluster", "kafka",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _keys(out) == _keys(runs["all"][0])


def _producer(bootstrap: str, tid: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, "log_level": 3})
    p.init_transactions(30)
    return p


def _transaction(p: Any, topic: str, partitions: tuple[int, ...], *, end: str | None) -> None:
    p.begin_transaction()
    for part in partitions:
        for i in range(5):
            p.produce(topic, value=b"since-%d" % i * 20, partition=part)
    assert p.flush(30) == 0
    if end == "commit":
        p.commit_transaction(30)
    elif end == "abort":
        p.abort_transaction(30)


def test_since_last_run_keeps_every_transaction_once(kafka_broker, spark, tmp_path) -> None:
    """Two nightly runs: the second reads only what is new (and the transaction open at the first), writes
    that transaction with its outcome and drops the first run's OPEN row; the history has each once."""
    from tests.live.capture import _create_topic
    from txnlog.engine.spark.live_batches import capture_cut, previous_cut

    b, name = kafka_broker.bootstrap, f"since-{uuid.uuid4().hex[:8]}"
    _create_topic(b, name, 4)
    a = _producer(b, f"since-a-{uuid.uuid4().hex[:6]}")
    for _ in range(3):
        _transaction(a, name, (0, 1, 2, 3), end="commit")
    _transaction(a, name, (1,), end=None)  # open at the first run
    out = str(tmp_path / "out")
    live = {"bootstrap_servers": b, "topics": [name], "live_range": "since-last-run", "cluster": "nightly"}
    first = _run(spark, {}, out, **live)
    assert first.as_of_source == "live_cut"
    one = read_table(out, "transactions").to_pylist()
    # the first run reads as 'unstable': it writes the transactions from the LSO on, here the open one
    assert [(r["partition"], r["outcome"]) for r in one] == [(1, "OPEN")]
    open_first = one[0]["first_offset"]

    a.commit_transaction(30)  # the open transaction ends after the first cut
    _transaction(a, name, (0, 2), end="commit")
    _transaction(a, name, (0,), end="abort")
    c = _producer(b, f"since-c-{uuid.uuid4().hex[:6]}")
    _transaction(c, name, (3,), end=None)  # open at the second run

    before = previous_cut(out, "nightly")
    assert before is not None and before.as_of == first.as_of
    cut = capture_cut(b, {}, [name], mode="since-last-run", previous=before)
    starts = {r.partition: r.start for r in cut.ranges}
    prev_hw = {p: hw for (_t, p), (_lso, hw) in before.offsets.items()}
    # only what is new, and the transaction that was open at the first cut, whole
    assert starts == {0: prev_hw[0], 1: open_first, 2: prev_hw[2], 3: prev_hw[3]}

    second = _run(spark, {}, out, **live)
    history = read_table(out, "transactions").to_pylist()
    keys = [(r["partition"], r["producer_id"], r["first_offset"]) for r in history]
    assert len(keys) == len(set(keys)), "a transaction written twice"
    by_run = {r["as_of"]: [] for r in history}
    for r in history:
        by_run[r["as_of"]].append((r["partition"], r["outcome"]))
    assert list(by_run) == [second.as_of]  # the first run's only row (OPEN) was superseded
    assert sorted(by_run[second.as_of]) == [(0, "ABORT"), (0, "COMMIT"), (1, "COMMIT"), (2, "COMMIT"), (3, "OPEN")]
    t = next(r for r in history if r["partition"] == 1)
    assert (t["first_offset"], t["outcome"]) == (open_first, "COMMIT")
    # every transaction from the first cut's LSO on is in the history, exactly as the whole log gives it
    everything = _run(spark, {}, str(tmp_path / "all"), bootstrap_servers=b, topics=[name], live_range="all")
    assert everything.as_of_source == "live_cut"
    full = {
        (r["partition"], r["producer_id"], r["first_offset"], r["last_offset"], r["outcome"])
        for r in read_table(str(tmp_path / "all"), "transactions").to_pylist()
    }
    got = {(r["partition"], r["producer_id"], r["first_offset"], r["last_offset"], r["outcome"]) for r in history}
    lso_first = {p: lso for (_t, p), (lso, _hw) in before.offsets.items()}
    assert got == {k for k in full if k[2] >= lso_first[k[0]]}
