"""A lost ``.txnindex`` on a real broker: read_committed consumers receive aborted data, and txnlog says so.

A broker of this module's own gets a committed and an aborted transaction on ``lost-0`` and is stopped cleanly;
the segment's ``.txnindex`` is deleted; the restarted broker (a clean restart: LogLoader keeps a segment whose
offset index is there, docs/integrity.md) serves the aborted records to a real read_committed consumer
(confluent-kafka, ``isolation.level=read_committed``). The job over the stopped broker's log dir gives an
``ABORTED_DATA_VISIBLE`` row for that transaction.
"""

from __future__ import annotations

import time

import pytest

from tests.e2e import truth as T
from tests.live.broker import SESSION_CONFIGS, KafkaBroker, start_or_skip
from tests.live.capture import _create_topic
from tests.oracle.judge import run_txnlog

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

TOPIC = "lost"


def _transaction(bootstrap: str, tid: str, values: list[bytes], commit: bool) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(TOPIC, value=v, partition=0)
    assert p.flush(30) == 0
    p.commit_transaction(30) if commit else p.abort_transaction(30)


def _read_committed(bootstrap: str) -> list[bytes]:
    """What a read_committed consumer receives from ``lost-0``: polled until it reaches the end of the partition
    (``enable.partition.eof``, at the last stable offset) where that end is the high watermark, i.e. every
    transaction's marker is written and nothing more is to come; or two minutes (a loaded machine)."""
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{time.time_ns()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error() is None:
                got.append(m.value())
            elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                _low, high = c.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, 0), timeout=10, cached=False)
                if m.offset() >= high:
                    break
    finally:
        c.close()
    return got


def test_a_lost_txnindex_delivers_aborted_data_and_txnlog_flags_it(tmp_path):
    broker = start_or_skip(KafkaBroker(tmp_path / "broker", configs=list(SESSION_CONFIGS)))
    try:
        _create_topic(broker.bootstrap, TOPIC, 1)
        _transaction(broker.bootstrap, "lost-commit", [b"c1", b"c2"], commit=True)
        _transaction(broker.bootstrap, "lost-abort", [b"a1", b"a2"], commit=False)
        before = _read_committed(broker.bootstrap)
    finally:
        assert broker.stop() == 0, broker.report()
    assert before == [b"c1", b"c2"]
    (index,) = (broker.log_dir / f"{TOPIC}-0").glob("*.txnindex")
    index.unlink()
    try:
        after = _read_committed(broker.start().bootstrap)
    finally:
        assert broker.stop() == 0, broker.report()
    assert after == [b"c1", b"c2", b"a1", b"a2"]  # the aborted records, served as committed

    out = tmp_path / "out"
    # the stopped broker rebuilt nothing: its clean restart left the segment without a .txnindex
    assert not list((broker.log_dir / f"{TOPIC}-0").glob("*.txnindex"))
    run_txnlog(None, broker.log_dir.parent, out, int(time.time() * 1000), "lost-txnindex")
    rows = [r for r in T.rows(str(out), "integrity") if r["topic"] == TOPIC]
    assert [(r["check"], r["first_offset"], r["records_affected"]) for r in rows] == [("ABORTED_DATA_VISIBLE", 3, 2)]
    assert "no .txnindex file" in rows[0]["evidence"]
