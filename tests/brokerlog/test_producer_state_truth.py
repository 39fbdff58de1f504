"""The writer's expected producer state (``ScenarioResult.producers``) and the decoder's per-segment producer
rows (``txnlog.broker.producer_state.segment_producers``), each held against kafka-python's decoder.

kafka-python reads every batch of what the writer left on disk; ``Replay`` replays Kafka's producer-state rules
over them (tests/brokerlog/kafka_python.py). Scenarios: ``healthy`` (idempotent producers, TV0/TV1/TV2
transactional ones: TV2 markers clear the sequence), ``deleted_segment_snapshot`` (retention deleted an
idempotent producer's oldest batches and a transaction's first batch: the snapshot holds them),
``transactional_id_expired`` (the clock ran 7 days: producers idle since are expired), and the sample.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from tests.brokerlog.kafka_python import Replay, iter_entries, parse_producer_snapshot
from txnlog.broker.producer_state import segment_producers
from txnlog.brokerlog import scenarios
from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.kafka.record_batch import scan_segment
from txnlog.kafka.wire import DEFAULT_PRODUCER_ID_EXPIRATION_MS

NAMES = ("healthy", "deleted_segment_snapshot", "transactional_id_expired", "sample")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, ScenarioResult]:
    root = tmp_path_factory.mktemp("producer-state")
    return {name: scenarios.write_scenario(name, root / name, seed=3) for name in NAMES}


def _reference_dirs(result: ScenarioResult):
    """(topic, partition, dir) of each data partition's reference replica (the ground truth's broker)."""
    for tp, part in sorted(result.partitions.items()):
        log_dir = next(d for d in result.log_dirs if d.name == f"broker-{part.broker}")
        yield tp, log_dir / f"{tp[0]}-{tp[1]}"


def _batches(d: Path):
    for seg in sorted(d.glob("*.log")):
        for _, batch in iter_entries(seg.read_bytes()):
            yield batch


def _kafka_python_state(d: Path, *, from_snapshot: bool) -> dict[int, dict]:
    """The broker's load: the newest snapshot at or below the log end, then the batches at and after its
    offset (ProducerStateManager.truncateAndReload, UnifiedLog.rebuildProducerState); without it, every batch."""
    replay = Replay()
    start = -1
    if from_snapshot:
        end = 1 + max((b.last_offset for b in _batches(d) if b.magic >= 2), default=-1)
        snaps = [int(p.stem) for p in d.glob("*.snapshot") if int(p.stem) <= end]
        if snaps:
            start = max(snaps)
            replay.seed_producers(parse_producer_snapshot((d / f"{start:020d}.snapshot").read_bytes()))
    for batch in _batches(d):
        if batch.magic >= 2 and batch.base_offset >= start:
            replay.feed(batch)
    return replay.producers


def _unexpired(producers: dict[int, dict], as_of: int) -> dict[int, tuple]:
    """ProducerStateManager.isProducerExpired, at as_of."""
    return {
        pid: (
            p["epoch"],
            p["last_sequence"],
            p["last_timestamp"],
            p["coordinator_epoch"],
            p["current_txn_first_offset"],
        )
        for pid, p in producers.items()
        if p["current_txn_first_offset"] >= 0 or as_of - p["last_timestamp"] < DEFAULT_PRODUCER_ID_EXPIRATION_MS
    }


@pytest.mark.parametrize("name", NAMES)
def test_expected_producer_state_is_what_kafka_python_replays(written, name: str) -> None:
    result = written[name]
    damaged = {q.file.split("/")[1] for q in result.quarantine}  # kafka-python cannot replay past the damage
    compared = 0
    for tp, d in _reference_dirs(result):
        if d.name in damaged:
            continue
        want = {
            p.producer_id: (
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                -1 if p.current_txn_start_offset is None else p.current_txn_start_offset,
            )
            for p in result.producers
            if (p.topic, p.partition) == tp
        }
        assert _unexpired(_kafka_python_state(d, from_snapshot=True), result.as_of_ms) == want, d
        if int(min(d.glob("*.log")).stem) == 0:  # the whole log is there: replaying all of it gives the same
            assert _unexpired(_kafka_python_state(d, from_snapshot=False), result.as_of_ms) == want, d
        compared += len(want)
    assert compared > 10


def test_the_scenarios_hold_what_the_cases_need(written) -> None:
    healthy = written["healthy"]
    idempotent = [p for p in healthy.producers if p.coordinator_epoch == -1 and p.current_txn_start_offset is None]
    assert idempotent and all(p.last_sequence >= 0 for p in idempotent)
    assert any(p.coordinator_epoch >= 0 and p.last_sequence == -1 for p in healthy.producers)  # after a TV2 bump
    retained = written["deleted_segment_snapshot"]
    start = retained.partitions[("metrics", 0)].log_start_offset
    assert start > 0 and any(p.current_txn_start_offset is not None and p.current_txn_start_offset < start
                             for p in retained.producers if p.topic == "metrics")  # fmt: skip
    # producers seen in the logs but idle past producer.id.expiration.ms at as_of: gone
    expired = written["transactional_id_expired"]
    seen = set()
    for tp, d in _reference_dirs(expired):
        seen |= {(tp, pid) for pid in _kafka_python_state(d, from_snapshot=False)}
    kept = {((p.topic, p.partition), p.producer_id) for p in expired.producers}
    assert kept < seen


@pytest.mark.parametrize("name", NAMES)
def test_segment_producer_rows_match_kafka_python(written, name: str) -> None:
    """Per segment and producer id: the last data batch's last sequence, epoch and last offset, and the last
    event's epoch and offset, as kafka-python decodes the batches."""
    result = written[name]
    damaged = {q.file.split("/")[-1] for q in result.quarantine}
    checked = 0
    for log_dir in result.log_dirs:
        for seg in sorted(log_dir.glob("*-[0-9]*/*.log")):
            if seg.parent.name.startswith(("__transaction_state-", "__cluster_metadata-")) or seg.name in damaged:
                continue
            data = seg.read_bytes()
            want: dict[int, dict] = {}
            for _, b in iter_entries(data):
                if b.magic < 2 or b.producer_id < 0:
                    continue
                row = want.setdefault(b.producer_id, {})
                if b.is_control_batch:
                    records = list(b)
                    if not records or records[0].type not in (0, 1):
                        continue
                    row.update(epoch=b.producer_epoch, offset=b.base_offset)
                    row["coordinator_epoch"] = struct.unpack(">hi", records[0].value)[1]
                else:
                    row.update(epoch=b.producer_epoch, offset=b.last_offset)
                    row.update(data_offset=b.last_offset, data_epoch=b.producer_epoch, last_sequence=b.last_sequence)
            want = {pid: r for pid, r in want.items() if r}
            got_cols = segment_producers(scan_segment(np.frombuffer(data, np.uint8), file=str(seg)).batches)
            got = {}
            for i, pid in enumerate(got_cols["producer_id"][0].tolist()):
                row = {"epoch": int(got_cols["producer_epoch"][0][i]), "offset": int(got_cols["last_offset"][0][i])}
                if got_cols["data_offset"][1][i]:
                    row.update(
                        data_offset=int(got_cols["data_offset"][0][i]),
                        data_epoch=int(got_cols["data_epoch"][0][i]),
                        last_sequence=int(got_cols["last_sequence"][0][i]),
                    )
                if got_cols["marker_offset"][1][i]:
                    row["coordinator_epoch"] = int(got_cols["coordinator_epoch"][0][i])
                got[pid] = row
            assert got == want, seg
            checked += sum(1 for r in want.values() if "last_sequence" in r)
    assert checked > 0
