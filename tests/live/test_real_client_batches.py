"""Real client-written batches: librdkafka and kafka-python producers -> a real Kafka broker -> raw Fetch -> scan_segment.

The capture (tests/live/capture.py) produces a known plan of committed, aborted and open transactions
plus idempotent and plain rounds, with every codec each client can write here, then raw-fetches each
partition into ``<topic>-<p>/00000000000000000000.log``. These tests decode those files with txnlog
and check every batch against the plan and against kafka-python's independent decoder.

Nothing here trusts txnlog to attribute a batch: data batches are traced to their producer through
their record values (decompressed with cramjam, parsed by kafka-python), markers through the
(producer id, epoch) of that producer's data.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from tests.live import raw_fetch
from tests.live.capture import (
    ABORT,
    CODEC_IDS,
    COMMIT,
    CONFLUENT,
    KAFKA_PYTHON,
    OPEN,
    Capture,
    ProducerPlan,
    _decompress,
    independent_records,
    kafka_python_codecs,
    run_capture,
)
from txnlog.kafka.compression import decompress
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import SegmentScan, scan_segment, scan_segment_file

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]

PARTITIONS = 3
_MARKER_VALUE = struct.Struct(">hi")  # EndTxnMarker: version int16, coordinatorEpoch int32 (spec §2.2)


@dataclass
class Segment:
    partition: int
    path: Path
    raw: bytes
    scan: SegmentScan
    owner: list[str]  # plan name per batch (row of scan.batches)
    values: list[list[bytes] | None]  # record values per data batch (None for markers)

    def rows(self, name: str) -> list[int]:
        return [i for i, o in enumerate(self.owner) if o == name]

    def batch_bytes(self, i: int) -> bytes:
        return _batch_bytes(self.raw, self.scan, i)


def _batch_bytes(raw: bytes, scan: SegmentScan, i: int) -> bytes:
    pos = int(scan.batches["position"][i])
    return raw[pos : pos + 12 + int(scan.batches["batch_length"][i])]


@pytest.fixture(scope="module")
def capture(kafka_broker, tmp_path_factory: pytest.TempPathFactory) -> Capture:
    topic = f"real-batches-{uuid.uuid4().hex[:8]}"  # the server is shared by the session
    return run_capture(
        kafka_broker.bootstrap,
        tmp_path_factory.mktemp("segments"),
        topic=topic,
        partitions=PARTITIONS,
        server="Apache Kafka 4.0.0-SNAPSHOT (shared/kafka-broker)",
    )


@pytest.fixture(scope="module")
def segments(capture: Capture) -> dict[int, Segment]:
    plans = {p.name: p for p in capture.plans}
    out: dict[int, Segment] = {}
    for part, path in capture.segments.items():
        raw = path.read_bytes()
        scan = scan_segment(raw, file=str(path))
        owner: list[str] = []
        values: list[list[bytes] | None] = []
        for i in range(scan.batch_count):
            if scan.batches["is_control"][i]:
                owner.append("")
                values.append(None)
                continue
            records = independent_records(_batch_bytes(raw, scan, i))
            names = {r.value.split(b"|", 1)[0].decode() for r in records}
            assert len(names) == 1 and names <= plans.keys(), f"{path} batch {i}: values from {names}"
            owner.append(names.pop())
            values.append([r.value for r in records])
        out[part] = Segment(part, path, raw, scan, owner, values)
    # Markers belong to the transactional producer whose data carries the same (producer id, epoch).
    by_id: dict[tuple[int, int], set[str]] = defaultdict(set)
    for seg in out.values():
        b = seg.scan.batches
        for i, name in enumerate(seg.owner):
            if name and plans[name].transactional:
                by_id[(int(b["producer_id"][i]), int(b["producer_epoch"][i]))].add(name)
    for seg in out.values():
        b = seg.scan.batches
        for i in range(seg.scan.batch_count):
            if b["is_control"][i]:
                key = (int(b["producer_id"][i]), int(b["producer_epoch"][i]))
                assert len(by_id.get(key, ())) == 1, f"{seg.path} marker {i} {key}: data producers {by_id.get(key)}"
                seg.owner[i] = next(iter(by_id[key]))
    return out


def _plans(capture: Capture, **where) -> list[ProducerPlan]:
    return [p for p in capture.plans if all(getattr(p, k) == v for k, v in where.items())]


# --- the capture itself ----------------------------------------------------------------------------


def test_every_codec_was_exercised(capture: Capture) -> None:
    assert {p.codec for p in _plans(capture, client=CONFLUENT, mode="transactional")} == {
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    }
    assert {p.codec for p in _plans(capture, client=KAFKA_PYTHON, mode="transactional")} == set(kafka_python_codecs())
    assert {"none", "gzip"} <= set(kafka_python_codecs())


def test_segment_files_are_named_like_kafka(capture: Capture) -> None:
    for part, path in capture.segments.items():
        assert path.name == "00000000000000000000.log"
        assert path.parent.name == f"{capture.topic}-{part}"


# --- decoding ---------------------------------------------------------------------------------------


def test_segments_decode_without_damage(capture: Capture, segments: dict[int, Segment]) -> None:
    for part, seg in segments.items():
        scan, b = seg.scan, seg.scan.batches
        assert scan.quarantine == [], (seg.path, scan.quarantine)
        assert scan.crc_checked and b["crc_valid"].all()
        assert (scan.legacy_entries, scan.zero_padding_bytes, scan.overlap_bytes) == (0, 0, 0)
        assert int((b["batch_length"].astype(np.int64) + 12).sum()) == scan.size == len(seg.raw) > 0
        assert (b["magic"] == 2).all()
        # Offsets are dense from 0 to the high watermark: every offset is in exactly one batch.
        assert b["base_offset"][0] == 0
        assert (b["base_offset"][1:] == b["last_offset"][:-1] + 1).all()
        assert int(b["last_offset"][-1]) + 1 == capture.fetches[part].high_watermark


def test_memory_mapped_scan_is_identical(segments: dict[int, Segment]) -> None:
    for seg in segments.values():
        mapped = scan_segment_file(seg.path)
        assert mapped.quarantine == [] and mapped.size == seg.scan.size
        for name, col in seg.scan.batches.items():
            assert np.array_equal(col, mapped.batches[name]), name


def test_every_batch_is_attributed(capture: Capture, segments: dict[int, Segment]) -> None:
    assert all(seg.owner and all(seg.owner) for seg in segments.values())
    assert capture.manifest["unattributed_batches"] == []


def test_batches_and_markers_per_producer_exactly_as_produced(capture: Capture, segments: dict[int, Segment]) -> None:
    for plan in capture.plans:
        for part, seg in segments.items():
            b = seg.scan.batches
            got = []
            for i in seg.rows(plan.name):
                if b["is_control"][i]:
                    got.append(
                        ({0: "ABORT", 1: "COMMIT"}.get(int(b["control_type"][i]), f"type {b['control_type'][i]}"), 1)
                    )
                else:
                    got.append(("data", int(b["record_count"][i])))
            assert got == plan.expected_sequence(part), f"{plan.name} in partition {part}"


def test_record_values_are_the_produced_ones(capture: Capture, segments: dict[int, Segment]) -> None:
    for plan in capture.plans:
        for part, seg in segments.items():
            data_rows = [i for i in seg.rows(plan.name) if not seg.scan.batches["is_control"][i]]
            rounds = [k for k, r in enumerate(plan.rounds) if part in r.partitions]
            assert len(data_rows) == len(rounds), (plan.name, part)
            for i, k in zip(data_rows, rounds):
                expected = [plan.value(k, part, j) for j in range(plan.rounds[k].records)]
                assert seg.values[i] == expected, (plan.name, part, k)


def test_attributes_as_configured(capture: Capture, segments: dict[int, Segment]) -> None:
    plans = {p.name: p for p in capture.plans}
    for seg in segments.values():
        b = seg.scan.batches
        for i, name in enumerate(seg.owner):
            plan = plans[name]
            where = f"{seg.path.parent.name} batch {i} ({name})"
            assert b["timestamp_type"][i] == 0, where  # CreateTime
            assert b["base_timestamp"][i] <= b["max_timestamp"][i], where
            if b["is_control"][i]:
                # Markers: written by the server, uncompressed, transactional + control (attributes 0x30).
                assert seg.batch_bytes(i)[21:23] == b"\x00\x30", where
                assert (b["compression"][i], b["record_count"][i], b["last_offset_delta"][i]) == (0, 1, 0), where
                assert b["is_transactional"][i] and b["base_sequence"][i] == -1, where
                assert b["control_status"][i] == ControlStatus.END_TXN_MARKER, where
                assert (b["control_key_version"][i], b["control_value_version"][i]) == (0, 0), where
                assert b["coordinator_epoch"][i] >= 0, where
                assert b["marker_timestamp"][i] == b["base_timestamp"][i] == b["max_timestamp"][i], where
            else:
                assert b["compression"][i] == plan.codec_id, where
                assert bool(b["is_transactional"][i]) == plan.transactional, where
                assert b["control_status"][i] == ControlStatus.NOT_CONTROL and b["control_type"][i] == -1, where
                attrs = seg.batch_bytes(i)[21:23]
                assert attrs == bytes([0, plan.codec_id | (0x10 if plan.transactional else 0)]), where


def test_producer_ids_epochs_and_sequences(capture: Capture, segments: dict[int, Segment]) -> None:
    ids: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for seg in segments.values():
        b = seg.scan.batches
        for i, name in enumerate(seg.owner):
            ids[name].add((int(b["producer_id"][i]), int(b["producer_epoch"][i])))
    for plan in capture.plans:
        assert len(ids[plan.name]) == 1, (plan.name, ids[plan.name])  # markers carry their data's id and epoch
        pid, epoch = next(iter(ids[plan.name]))
        if plan.mode == "plain":
            assert (pid, epoch) == (-1, -1), plan.name
        else:
            assert pid >= 0 and epoch >= 0, plan.name
    # One producer id per transactional.id (its incarnations differ only by epoch, +1 each), one per idempotent producer.
    per_tid: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for plan in _plans(capture, mode="transactional"):
        pid, epoch = next(iter(ids[plan.name]))
        per_tid[plan.transactional_id].append((plan.stage, pid, epoch))
    for tid, incarnations in per_tid.items():
        incarnations.sort()
        assert len({pid for _, pid, _ in incarnations}) == 1, (tid, incarnations)
        epochs = [e for _, _, e in incarnations]
        assert epochs == list(range(epochs[0], epochs[0] + len(epochs))), (tid, incarnations)
    owners = [next(iter(per_tid[tid]))[1] for tid in per_tid] + [
        next(iter(ids[p.name]))[0] for p in _plans(capture, mode="idempotent")
    ]
    assert len(owners) == len(set(owners)), owners
    # Sequences: per (id, epoch, partition) they start at 0 and run on without a gap, aborted batches included.
    for plan in capture.plans:
        for seg in segments.values():
            b = seg.scan.batches
            expected_seq = 0
            for i in seg.rows(plan.name):
                if b["is_control"][i]:
                    continue
                if plan.mode == "plain":
                    assert b["base_sequence"][i] == -1
                    continue
                assert b["base_sequence"][i] == expected_seq, (plan.name, seg.partition, i)
                expected_seq += int(b["record_count"][i])


# --- the independent decoder ---------------------------------------------------------------------------


def test_kafka_python_agrees_on_every_header(segments: dict[int, Segment]) -> None:
    for seg in segments.values():
        b = seg.scan.batches
        mr = MemoryRecords(seg.raw)
        walked = 0
        while mr.next_batch() is not None:
            walked += 1
        assert walked == seg.scan.batch_count
        for i in range(seg.scan.batch_count):
            kp = DefaultRecordBatch(seg.batch_bytes(i))
            where = f"{seg.path.parent.name} batch {i}"
            assert kp.validate_crc(), where
            got = {
                "base_offset": kp.base_offset,
                "batch_length": kp.size_in_bytes - 12,
                "partition_leader_epoch": kp.leader_epoch,
                "magic": kp.magic,
                "crc": kp.crc,
                "compression": kp.compression_type,
                "timestamp_type": kp.timestamp_type,
                "is_transactional": kp.is_transactional,
                "is_control": kp.is_control_batch,
                "last_offset_delta": kp.last_offset_delta,
                "last_offset": kp.last_offset,
                "base_timestamp": kp.first_timestamp,
                "max_timestamp": kp.max_timestamp,
                "producer_id": kp.producer_id,
                "producer_epoch": kp.producer_epoch,
                "base_sequence": kp.base_sequence,
                "record_count": kp.records_count,
            }
            ours = {k: b[k][i].item() for k in got}
            assert ours == got, where
            if kp.is_control_batch:
                (ctl,) = list(kp)
                value_version, coordinator_epoch = _MARKER_VALUE.unpack(ctl.value)
                assert len(ctl.value) == _MARKER_VALUE.size, where
                assert (ctl.version, ctl.type, value_version, coordinator_epoch, ctl.timestamp) == (
                    b["control_key_version"][i],
                    b["control_type"][i],
                    b["control_value_version"][i],
                    b["coordinator_epoch"][i],
                    b["marker_timestamp"][i],
                ), where
            else:
                records = independent_records(seg.batch_bytes(i))
                assert len(records) == kp.records_count, where
                assert [r.offset for r in records] == list(range(kp.base_offset, kp.last_offset + 1)), where
                ts = [r.timestamp for r in records]
                assert min(ts) == kp.first_timestamp and max(ts) == kp.max_timestamp, where


def test_txnlog_decompresses_what_the_clients_compressed(segments: dict[int, Segment]) -> None:
    seen = set()
    for seg in segments.values():
        b = seg.scan.batches
        for i in np.flatnonzero(b["compression"] != 0):
            codec = int(b["compression"][i])
            payload = seg.batch_bytes(int(i))[61:]
            assert decompress(codec, payload) == _decompress(codec, payload), (seg.path, int(i), codec)
            seen.add((seg.owner[int(i)].split("-")[0], codec))
    assert {c for client, c in seen if client == "cfk"} == {1, 2, 3, 4}
    assert {c for client, c in seen if client == "kp"} == {CODEC_IDS[c] for c in kafka_python_codecs()} - {0}


# --- the server's view -----------------------------------------------------------------------------------


def test_read_committed_view_matches_the_segment(capture: Capture, segments: dict[int, Segment]) -> None:
    """The server's aborted-transaction list and last stable offset follow from the bytes alone.

    Per partition: an aborted transaction is (producer id, offset of its first data batch), as a
    ``.txnindex`` would hold it; the last stable offset is the first offset of the still-open
    transaction (else the high watermark).
    """
    for part, seg in segments.items():
        b = seg.scan.batches
        first_open: dict[tuple[int, int], int] = {}  # (id, epoch) -> first offset of its current transaction
        aborted = []
        for i in range(seg.scan.batch_count):
            if not b["is_transactional"][i]:
                continue
            key = (int(b["producer_id"][i]), int(b["producer_epoch"][i]))
            if not b["is_control"][i]:
                first_open.setdefault(key, int(b["base_offset"][i]))
                continue
            start = first_open.pop(key, None)
            if b["control_type"][i] == 0 and start is not None:  # no data here: no entry (spec §1.6)
                aborted.append((key[0], start))
        hw = capture.fetches[part].high_watermark
        lso = min(first_open.values(), default=hw)
        rc = capture.committed_fetches[part]
        assert sorted(rc.aborted_transactions) == sorted(aborted), part
        assert rc.last_stable_offset == lso, part
        opens = [r for p in capture.plans for r in p.rounds if r.outcome == OPEN and part in r.partitions]
        assert (lso < hw) == bool(opens), part


def test_server_transaction_state_agrees(kafka_broker, capture: Capture, segments: dict[int, Segment]) -> None:
    from kafka.admin import KafkaAdminClient

    ids = {}
    for seg in segments.values():
        b = seg.scan.batches
        for i, name in enumerate(seg.owner):
            ids[name] = (int(b["producer_id"][i]), int(b["producer_epoch"][i]))
    last = {}
    for plan in sorted(_plans(capture, mode="transactional"), key=lambda p: p.stage):
        last[plan.transactional_id] = plan
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap, client_id="txnlog-live-test")
    try:
        described = admin.describe_transactions(sorted(last))
    finally:
        admin.close()
    for tid, plan in last.items():
        d = described[tid]
        assert (d.producer_id, d.producer_epoch) == ids[plan.name], tid
        is_open = plan.rounds[-1].outcome == OPEN
        assert (d.state.value == "Ongoing") == is_open, (tid, d.state)
        if is_open:
            assert {tp.partition for tp in d.topic_partitions} == set(plan.rounds[-1].partitions), tid


def test_manifest_matches_the_bytes(capture: Capture) -> None:
    manifest = json.loads(capture.manifest_path.read_text())
    assert manifest["topic"] == capture.topic
    assert [s["partition"] for s in manifest["segments"]] == list(range(PARTITIONS))
    for producer in manifest["producers"]:
        observed = producer["observed"]["per_partition"]
        for part, expected in producer["expected"].items():
            assert (
                observed.get(part, {"data_batches": 0, "records": 0, "commit_markers": 0, "abort_markers": 0})
                == expected
            ), (producer["name"], part)
        assert producer["committed_transactions"] == sum(r["outcome"] == COMMIT for r in producer["rounds"])
        assert producer["aborted_transactions"] == sum(r["outcome"] == ABORT for r in producer["rounds"])


# --- the raw client -------------------------------------------------------------------------------------


def test_split_entries_keeps_only_whole_batches(segments: dict[int, Segment]) -> None:
    seg = segments[0]
    b = seg.scan.batches
    ends = (b["position"] + 12 + b["batch_length"]).tolist()
    for cut in sorted(
        {1, 11, 12, 30, 61, ends[0] - 1, ends[0], ends[0] + 5, ends[2] + 17, len(seg.raw) - 1, len(seg.raw)}
    ):
        entries, used = raw_fetch.split_entries(seg.raw[:cut])
        whole = [e for e in ends if e <= cut]
        assert used == (whole[-1] if whole else 0), cut
        assert [nxt for _, _, nxt in entries] == (b["last_offset"][: len(whole)] + 1).tolist(), cut


def test_fetched_bytes_are_the_brokers_log_file(kafka_broker, capture: Capture) -> None:
    """What Fetch returned is, byte for byte, the partition's ``.log`` in the broker's log dir (one segment)."""
    for part, path in capture.segments.items():
        (on_disk,) = sorted((kafka_broker.log_dir / f"{capture.topic}-{part}").glob("*.log"))
        assert on_disk.read_bytes() == path.read_bytes(), part


def test_fetch_from_the_middle_returns_the_tail(kafka_broker, capture: Capture, segments: dict[int, Segment]) -> None:
    seg = segments[1]
    b = seg.scan.batches
    i = seg.scan.batch_count // 2
    tail = raw_fetch.fetch_partition(kafka_broker.bootstrap, capture.topic, 1, start_offset=int(b["base_offset"][i]))
    assert tail.records == seg.raw[int(b["position"][i]) :]


def test_fetch_loop_reassembles_size_limited_responses(
    kafka_broker, capture: Capture, segments: dict[int, Segment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's own size-limited responses (KIP-74: the first batch whole even past the limit), then an
    emulated broker that cuts each response at ``partition_max_bytes`` even inside the first batch (a
    response Kafka does not give, the fetch loop's worst case) and starts at the batch holding the offset."""
    seg = segments[0]
    b = seg.scan.batches
    hw = capture.fetches[0].high_watermark
    assert raw_fetch.fetch_partition(kafka_broker.bootstrap, capture.topic, 0, max_bytes=100).records == seg.raw
    calls: list[tuple[int, int]] = []

    def cut_fetch_once(
        conn, topic, partition, offset, *, isolation_level, max_bytes, partition_max_bytes, max_wait_ms=0
    ):
        calls.append((offset, partition_max_bytes))
        i = int(np.searchsorted(b["last_offset"], offset))  # the batch holding ``offset``
        start = int(b["position"][i])
        return raw_fetch.PartitionFetch(0, hw, hw, None, seg.raw[start : start + partition_max_bytes])

    monkeypatch.setattr(raw_fetch, "fetch_once", cut_fetch_once)
    got = raw_fetch.fetch_partition(kafka_broker.bootstrap, capture.topic, 0, max_bytes=100)
    assert got.records == seg.raw and got.high_watermark == hw
    assert max(limit for _, limit in calls) > 100  # grew for batches larger than the limit
    # From inside a batch: that whole batch comes back first (a broker returns the batch holding the offset).
    i = next(i for i in range(seg.scan.batch_count) if b["record_count"][i] > 1)
    got = raw_fetch.fetch_partition(kafka_broker.bootstrap, capture.topic, 0, start_offset=int(b["base_offset"][i]) + 1)
    assert got.records == seg.raw[int(b["position"][i]) :]
