"""Scenario ground truth, checked against the written bytes with kafka-python (not with our encoder)."""

from __future__ import annotations

import hashlib
import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from tests.brokerlog.kafka_python import Replay, iter_entries, parse_producer_snapshot, read_txn_state
from txnlog.brokerlog import scenarios
from txnlog.brokerlog.ground_truth import ScenarioResult
from txnlog.kafka.wire import STATE_BY_KAFKA_NAME

NAMES = [n for n in scenarios.SCENARIOS if n != "bulk"]
SINGLE_PURPOSE = {
    "healthy": set(),
    "ongoing_within_timeout": set(),
    "tv2_rollover": set(),
    "no_transactional_id": {"NO_TRANSACTIONAL_ID"},
    "rolled_over_producer_id": {"NO_TRANSACTIONAL_ID", "COORDINATOR_TIMEOUT_OVERDUE"},
    "transactional_id_expired": {"TRANSACTIONAL_ID_EXPIRED"},
    "coordinator_completed": {"COORDINATOR_COMPLETED"},
    "partition_not_in_transaction": {"PARTITION_NOT_IN_TRANSACTION"},
    "markers_pending": {"MARKERS_PENDING"},
    "coordinator_timeout_overdue": {"COORDINATOR_TIMEOUT_OVERDUE"},
    "two_phase_in_doubt": {"TWO_PHASE_IN_DOUBT"},
    "coordinator_stuck": {"COORDINATOR_STUCK"},
    "partial_txn_state": {"NO_TRANSACTIONAL_ID"},
    "corrupt_and_truncated": {"COORDINATOR_COMPLETED"},
    "damage_around_transactions": {"COORDINATOR_COMPLETED"},
    "clean_restart": set(),
    "replicas_disagree": {"COORDINATOR_COMPLETED"},
    "deleted_segment_snapshot": {"COORDINATOR_COMPLETED"},
    "extreme_values": {"NO_TRANSACTIONAL_ID"},
    "messy_incident": {"COORDINATOR_COMPLETED", "NO_TRANSACTIONAL_ID"},
    # what read_committed consumers are served, damaged: no finding (tests/oracle/test_integrity.py)
    "index_entry_missing": set(),
    "index_entry_spurious": set(),
    "txnindex_file_lost": set(),
    "split_outcome": set(),
    "marker_missing": {"COORDINATOR_COMPLETED"},  # the lost marker leaves the partition's transaction hanging
    "epoch_regression": set(),
    "sequence_gap": set(),
    # consumer groups behind a hanging transaction and a pending transactional offset commit
    "groups_behind_hanging_transaction": {"NO_TRANSACTIONAL_ID", "COORDINATOR_TIMEOUT_OVERDUE"},
    "several_open_transactions": {
        "TRANSACTIONAL_ID_EXPIRED",
        "MARKERS_PENDING",
        "NO_TRANSACTIONAL_ID",
        "COORDINATOR_COMPLETED",
    },
}


def _expected_safety(result: ScenarioResult, name: str, f: Any) -> str:
    """VERIFY_FIRST where the copy cannot show for sure that nothing will end the transaction (docs/design.md §4):
    not every __transaction_state partition copied, replicas diverged, or damage where the marker may be."""
    diverged = len(f.brokers) < len(result.partitions[(f.topic, f.partition)].brokers)
    if name == "damage_around_transactions":  # damage before the producer's previous marker hides nothing
        return "SAFE" if f.transactional_id == "ledger-before" else "VERIFY_FIRST"
    damaged = {q.file.split("/")[1] for q in result.quarantine}
    if name == "partial_txn_state" or diverged or f"{f.topic}-{f.partition}" in damaged:
        return "VERIFY_FIRST"
    return "SAFE"


ALL_REASONS = {
    "NO_TRANSACTIONAL_ID",
    "TRANSACTIONAL_ID_EXPIRED",
    "COORDINATOR_COMPLETED",
    "PARTITION_NOT_IN_TRANSACTION",
    "MARKERS_PENDING",
    "COORDINATOR_TIMEOUT_OVERDUE",
    "TWO_PHASE_IN_DOUBT",
    "COORDINATOR_STUCK",
}


@pytest.fixture(scope="session")
def written(tmp_path_factory) -> dict[str, ScenarioResult]:
    root = tmp_path_factory.mktemp("scenarios")
    out = {}
    for name in NAMES:
        started = time.perf_counter()
        out[name] = scenarios.write_scenario(name, root / name, seed=0)
        out[name].notes["wall_s"] = time.perf_counter() - started
    out["bulk"] = scenarios.bulk(root / "bulk", 0, total_bytes=12 << 20, partitions=6, segment_bytes=2 << 20)
    # The seed the job's embedded sample uses (txnlog.sources.sample.SAMPLE_SEED).
    out["sample@20261122"] = scenarios.write_scenario("sample", root / "sample-20261122", seed=20261122)
    return out


def _partition_dirs(result: ScenarioResult):
    """(broker id, topic, partition, dir) of every copied data partition (what the job analyses)."""
    for log_dir in result.log_dirs:
        broker = int(log_dir.name.split("-")[1])
        for d in sorted(log_dir.iterdir()):
            if not d.is_dir() or d.name.startswith(("__transaction_state-", "__cluster_metadata-")):
                continue
            topic, part = d.name.rsplit("-", 1)
            yield broker, topic, int(part), d


def _checkpointed_log_start(d: Path) -> int | None:
    """The partition's line in its broker's log-start-offset-checkpoint (after DeleteRecords), if any."""
    f = d.parent / "log-start-offset-checkpoint"
    if not f.exists():
        return None
    topic, _, part = d.name.rpartition("-")
    for line in f.read_text().splitlines()[2:]:
        t, p, o = line.split()
        if (t, p) == (topic, part):
            return int(o)
    return None


def _replay_dir(result: ScenarioResult, d: Path) -> tuple[Replay, int]:
    """Replay a partition copy from its snapshot at the log start, skipping the expected quarantine ranges."""
    damaged = {}
    for q in result.quarantine:
        damaged[(str(result.root / q.file), q.position)] = q
    replay = Replay()
    segments = sorted(d.glob("*.log"))
    log_start = _checkpointed_log_start(d) or int(segments[0].stem)
    if log_start > 0:
        # as the broker loads it (ProducerStateManager.truncateAndReload): the newest snapshot at or below
        # the log end; it alone knows transactions that began below the log start
        snaps = sorted(int(p.stem) for p in d.glob("*.snapshot"))
        entries = parse_producer_snapshot((d / f"{snaps[-1]:020d}.snapshot").read_bytes())
        replay.seed_from_snapshot([e for e in entries if e["current_txn_first_offset"] < int(segments[0].stem)])
    for seg in segments:
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            q = damaged.get((str(seg), pos))
            if q is not None:
                pos += q.length
                continue
            entries = iter_entries(data[pos:])
            first = next(entries, None)
            if first is None:
                break
            _, batch = first
            replay.feed(batch)
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return replay, log_start


@pytest.mark.parametrize("name", NAMES + ["bulk", "sample@20261122"])
def test_open_transactions_and_markers_match_a_kafka_python_replay(written, name: str) -> None:
    result = written[name]
    truth_open = {}
    for t in result.open_transactions:
        for b in t.brokers:
            truth_open[(b, t.topic, t.partition, t.producer_id)] = t
    seen_open = set()
    for broker, topic, part, d in _partition_dirs(result):
        replay, log_start = _replay_dir(result, d)
        for pid, txn in replay.open.items():
            key = (broker, topic, part, pid)
            if (*key, txn["first_offset"]) in result.behind:
                continue  # open in this copy alone, but only behind another replica's marker
            assert key in truth_open, f"{name}: open transaction {key} missing from the ground truth"
            t = truth_open[key]
            assert txn["first_offset"] == t.start_offset
            assert txn["last_timestamp"] == t.last_timestamp
            assert txn["epoch"] == t.producer_epoch
            if txn["first_timestamp"] is not None:
                assert txn["first_timestamp"] == t.first_timestamp
                assert t.source == "log"
            else:
                assert t.source == "snapshot" and t.start_offset < int(min(d.glob("*.log")).stem)
            seen_open.add(key)
        ref = result.partitions[(topic, part)]
        if ref.broker == broker:
            assert dict(replay.markers) == {k: v for k, v in result.marker_counts[(topic, part)].items() if v}
            assert replay.legacy == ref.legacy_entries
            assert replay.batches == ref.batches
            if not [q for q in result.quarantine if q.file.startswith(f"broker-{broker}/{topic}-{part}/")]:
                assert replay.last_offset + 1 == ref.log_end_offset or replay.batches == 0
            assert log_start == ref.log_start_offset
    assert seen_open == set(truth_open), f"{name}: ground truth lists transactions the bytes do not hold open"


@pytest.mark.parametrize("name", NAMES)
def test_findings_have_no_marker_after_them(written, name: str) -> None:
    result = written[name]
    for f in result.findings:
        if f.topic is None:
            continue
        damaged = {(q.file, q.position) for q in result.quarantine}
        for broker in f.brokers:
            d = result.root / f"broker-{broker}" / f"{f.topic}-{f.partition}"
            later = []
            for seg in sorted(d.glob("*.log")):
                rel = str(seg.relative_to(result.root))
                for pos, b in iter_entries(seg.read_bytes()):
                    if (rel, pos) in damaged:  # a damaged marker is no marker to a reader
                        continue
                    if (
                        b.magic == 2
                        and b.is_control_batch
                        and b.producer_id == f.producer_id
                        and b.base_offset > f.start_offset
                    ):
                        later.append(b.base_offset)
            assert later == [], f"{name}: {f} has markers after it at {later}"


@pytest.mark.parametrize("name", NAMES + ["bulk", "sample@20261122"])
def test_as_of_is_the_newest_broker_written_timestamp(written, name: str) -> None:
    """Markers, __transaction_state records and LogAppendTime batches: what a broker's clock wrote
    (the job's as_of rule); a client's CreateTime never counts."""
    result = written[name]
    damaged = {(q.file, q.position) for q in result.quarantine}
    best = -1
    for log_dir in result.log_dirs:
        for seg in log_dir.glob("*/*.log"):
            if seg.parent.name.startswith("__cluster_metadata"):
                continue
            coordinator = seg.parent.name.startswith("__transaction_state-")
            rel = str(seg.relative_to(result.root))
            for pos, b in iter_entries(seg.read_bytes()):
                if (rel, pos) in damaged or b.magic != 2:
                    continue
                if coordinator or b.is_control_batch or b.timestamp_type == 1:
                    best = max(best, b.max_timestamp)
    assert best == result.as_of_ms


@pytest.mark.parametrize("name", NAMES)
def test_coordinator_truth_matches_the_transaction_log(written, name: str) -> None:
    result = written[name]
    latest = {}
    counts: dict[str, int] = {}
    for part, _, txn_id, value in read_txn_state(result.log_dirs):
        latest[txn_id] = (part, value)
        counts[txn_id] = counts.get(txn_id, 0) + 1
    assert set(latest) == set(result.coordinator)
    for txn_id, (part, value) in latest.items():
        truth = result.coordinator[txn_id]
        assert truth.coordinator_partition == part
        assert truth.records == counts[txn_id]
        if value is None:
            assert truth.is_tombstoned
            continue
        assert STATE_BY_KAFKA_NAME[truth.state] == value["state"]
        assert (truth.producer_id, truth.producer_epoch, truth.timeout_ms) == (
            value["producer_id"],
            value["producer_epoch"],
            value["timeout_ms"],
        )
        assert sorted(truth.partitions) == sorted(f"{t}-{p}" for t, p in value["partitions"] or [])
        assert (truth.next_producer_id, truth.next_producer_epoch) == (
            value["next_producer_id"],
            value["next_producer_epoch"],
        )
    assert result.all_txn_state_partitions_present == (len(result.txn_state_partitions_present) == 50)


@pytest.mark.parametrize("name", NAMES + ["sample@20261122"])
def test_findings_are_what_the_scenario_is_about(written, name: str) -> None:
    result = written[name]
    reasons = {f.reason for f in result.findings}
    if name.startswith("sample"):
        assert reasons == ALL_REASONS
        assert {f.verdict for f in result.findings} == {"HANGING", "LATE"}
        assert result.legacy_entries > 0 and result.quarantine
    else:
        assert reasons == SINGLE_PURPOSE[name]
    for f in result.findings:
        if f.verdict == "HANGING":
            assert f.safety == _expected_safety(result, name, f)
        else:
            assert f.safety is None
        assert (
            result.as_of_ms
            - next(
                (
                    t.last_timestamp
                    for t in result.open_transactions
                    if (t.topic, t.partition, t.producer_id) == (f.topic, f.partition, f.producer_id)
                ),
                0,
            )
            > result.max_transaction_timeout_ms
        )


def test_special_scenario_properties(written) -> None:
    assert {t.brokers for t in written["replicas_disagree"].open_transactions} in ({(1,)}, {(2,)})
    assert [t.source for t in written["deleted_segment_snapshot"].open_transactions] == ["snapshot"]
    assert written["partial_txn_state"].all_txn_state_partitions_present is False
    assert len(written["partial_txn_state"].txn_state_partitions_present) == 30
    ongoing = written["ongoing_within_timeout"].open_transactions
    assert len(ongoing) == 2 and all(t.verdict is None and t.idle_ms < 15 * 60_000 for t in ongoing)
    stuck = written["coordinator_stuck"].findings[0]
    assert stuck.topic is None and stuck.coordinator_state == "PrepareAbort"
    pnit = [t for t in written["partition_not_in_transaction"].open_transactions if t.verdict is None]
    assert len(pnit) == 1 and pnit[0].coordinator_state == "Ongoing"
    expired = written["transactional_id_expired"]
    assert expired.coordinator["invoice-writer"].is_tombstoned
    rollover = written["tv2_rollover"]
    fx = rollover.coordinator["fx-rates"]
    old, new = rollover.notes["rolled_over_from"], rollover.notes["rolled_over_to"]
    assert fx.producer_id == new != old and fx.state in ("CompleteCommit", "CompleteAbort")
    rows = [t for t in rollover.transactions if (t.topic, t.partition) == ("orders", 2) and t.producer_id in (old, new)]
    assert {(t.producer_id, t.marker_epoch) for t in rows if t.marker_epoch == 32767} == {(old, 32767)}
    assert all(t.marker_epoch == t.producer_epoch + 1 for t in rows)  # TV2: markers at data epoch + 1
    assert {t.producer_id for t in rows} == {old, new}
    for result in written.values():
        for (broker, topic, part), health in result.replica_partitions.items():
            here = [
                t for t in result.open_transactions if (t.topic, t.partition) == (topic, part) and broker in t.brokers
            ]
            lagging = [b for b in result.behind if b[:3] == (broker, topic, part)]
            assert health.open_transactions == len(here) + len(lagging)
            if lagging:
                continue
            oldest = min(here, key=lambda t: t.start_offset, default=None)
            assert health.has_late_transaction == (oldest is not None and oldest.idle_ms > 20 * 60_000)
            # at most the high watermark, never below the log start (UnifiedLog.lastStableOffset,
            # updateFirstUnstableOffset); lower on a running broker's copy where a completed transaction's
            # marker is not yet below the high watermark
            hw = health.high_watermark if health.high_watermark is not None else health.log_end_offset
            ongoing = max(min(oldest.start_offset if oldest else hw, hw), health.log_start_offset)
            if health.held_by_unreplicated:
                assert health.last_stable_offset < ongoing
            else:
                assert health.last_stable_offset == ongoing
    clean = written["clean_restart"].replica_partitions
    restarted, running = clean[(1, "positions", 0)], clean[(2, "positions", 1)]
    assert restarted.high_watermark == restarted.last_stable_offset == restarted.log_end_offset - 1
    assert not restarted.held_by_unreplicated and running.held_by_unreplicated
    assert running.high_watermark == running.log_end_offset - 1 > running.last_stable_offset
    assert (written["clean_restart"].root / "broker-1" / ".kafka_cleanshutdown").exists()
    assert not (written["clean_restart"].root / "broker-2" / ".kafka_cleanshutdown").exists()
    completed = written["coordinator_completed"].open_transactions[0]
    assert completed.previous_marker_offset is not None and completed.previous_marker_offset < completed.start_offset


def test_quarantine_rows_point_at_the_damage(written) -> None:
    result = written["corrupt_and_truncated"]
    assert sorted(q.reason for q in result.quarantine) == ["bad_length", "bad_magic", "crc_mismatch", "truncated_tail"]
    for q in result.quarantine:
        data = (result.root / q.file).read_bytes()
        size = struct.unpack_from(">i", data, q.position + 8)[0]
        if q.reason == "truncated_tail":
            assert q.position + q.length == len(data) and 12 + size > q.length
            continue
        if q.reason == "bad_length":
            assert size < 14
        elif q.reason == "bad_magic":
            assert data[q.position + 16] not in (0, 1, 2)
        else:
            ((_, batch),) = list(iter_entries(data[q.position : q.position + q.length]))
            assert not batch.validate_crc()
        _, following = next(iter_entries(data[q.position + q.length :]))
        assert following.validate_crc()  # a reader resynchronises right after the damage
    hanging = result.findings[0]
    crc = next(q for q in result.quarantine if q.reason == "crc_mismatch")
    assert crc.file.endswith("events-0/00000000000000000000.log")
    assert hanging.topic == "events" and hanging.partition == 0
    crc_offset = next(iter_entries((result.root / crc.file).read_bytes()[crc.position :]))[1].base_offset
    assert hanging.start_offset > crc_offset


def test_sample_is_small_and_quick(written) -> None:
    result = written["sample"]
    assert result.notes["wall_s"] < 10
    assert 1e6 < result.bytes_written < 40e6
    json.dumps(result.to_dict())


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes_different_seed_different_bytes(written, tmp_path: Path) -> None:
    again = scenarios.write_scenario("sample", tmp_path / "again", seed=0)
    assert _tree_digest(again.root) == _tree_digest(written["sample"].root)
    assert again.to_dict()["findings"] == written["sample"].to_dict()["findings"]
    other = scenarios.write_scenario("coordinator_completed", tmp_path / "other", seed=1)
    assert _tree_digest(other.root) != _tree_digest(written["coordinator_completed"].root)


def test_bulk_write_speed(tmp_path: Path) -> None:
    # CPU time of this process (encoding + writes into the page cache): stable when other
    # jobs share the machine; the wall-clock check at 1 GiB is the slow test below.
    started = time.process_time()
    result = scenarios.bulk(tmp_path / "bulk", 0, total_bytes=192 << 20, partitions=32)
    speed = result.bytes_written / (time.process_time() - started) / 1e6
    assert result.bytes_written > 190e6
    assert speed >= 100, f"bulk wrote {speed:.0f} MB per CPU second"


@pytest.mark.slow
def test_bulk_one_gib_wall_clock(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = scenarios.bulk(tmp_path / "bulk", 0, total_bytes=1 << 30)
    speed = result.bytes_written / (time.perf_counter() - started) / 1e6
    assert result.bytes_written >= 1 << 30
    assert speed >= 100, f"bulk wrote {speed:.0f} MB/s"


def test_bulk_one_hot_partition(tmp_path: Path) -> None:
    """``large_partitions=1, partitions=0`` (benchmarks/scale.py's hot partition): every data byte in one
    topic-partition, in full segments each with its ``.index`` as a broker writes it; its hanging transaction kept."""
    result = scenarios.bulk(
        tmp_path / "hot", 0, total_bytes=8 << 20, partitions=0, large_partitions=1, segment_bytes=2 << 20
    )
    data = [d for d in (tmp_path / "hot" / "broker-1").iterdir() if d.is_dir() and not d.name.startswith("__")]
    assert [d.name for d in data] == ["bulk-large-0"]
    logs = sorted(data[0].glob("*.log"))
    assert len(logs) >= 4
    for log in logs[:-1]:  # full segments (the last is the active one)
        assert log.stat().st_size > (2 << 20) - 4096
        index = log.with_suffix(".index")
        assert index.stat().st_size > 0 and index.stat().st_size % 8 == 0
    assert [(f.topic, f.partition) for f in result.findings] == [("bulk-large", 0)]
