"""Golden tests on bytes written by real Kafka brokers (shared/realdata/record-batches, see its README).

Expected values were read by hand from the hex dumps (``xxd``) and are also
checked against kafka-python's independent decoder below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from txnlog.kafka.control import ControlStatus
from txnlog.kafka.record_batch import scan_segment, scan_segment_file

REALDATA = Path(__file__).parents[2].parent / "shared" / "realdata" / "record-batches"
pytestmark = pytest.mark.skipif(
    not REALDATA.is_dir(),
    reason=f"real broker bytes not found at {REALDATA} (shared/ is checked out beside the repo in CI)",
)

# kafka-python-record_batch_data_v2.bin: 4 batches (by hand from the hex).
V2_EXPECTED = {
    "position": [0, 71, 147, 218],
    "base_offset": [0, 1, 3, 0],  # the file concatenates separate samples: offsets restart
    "last_offset": [0, 2, 3, 0],
    "batch_length": [59, 64, 59, 69],
    "partition_leader_epoch": [1, 2, 2, 0],
    "magic": [2, 2, 2, 2],
    "crc": [0x0318A270, 0xC85CBD23, 0x2E0B85B7, 0x5CD8EF52],
    "crc_valid": [True] * 4,
    "compression": [0] * 4,
    "timestamp_type": [0] * 4,
    "is_transactional": [False] * 4,
    "is_control": [False] * 4,
    "last_offset_delta": [0, 1, 0, 0],
    "base_timestamp": [1503229838908, 1503229959532, 1503229962141, 1535546684353],
    "max_timestamp": [1503229838908, 1503229959700, 1503229962141, 1535546684353],
    "producer_id": [-1] * 4,
    "producer_epoch": [-1] * 4,
    "base_sequence": [-1] * 4,
    "record_count": [1, 2, 1, 1],
    "control_status": [0] * 4,
}


def test_v2_batches_golden() -> None:
    scan = scan_segment_file(REALDATA / "kafka-python-record_batch_data_v2.bin")
    assert scan.quarantine == [] and scan.legacy_entries == 0 and scan.zero_padding_bytes == 0
    assert scan.size == 299
    for name, expected in V2_EXPECTED.items():
        assert scan.batches[name].tolist() == expected, name


def test_v2_batches_agree_with_kafka_python() -> None:
    raw = (REALDATA / "kafka-python-record_batch_data_v2.bin").read_bytes()
    scan = scan_segment(raw)
    records = MemoryRecords(raw)
    i = 0
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        b = {name: col[i].item() for name, col in scan.batches.items()}
        assert (b["base_offset"], b["last_offset"], b["partition_leader_epoch"], b["crc"]) == (
            batch.base_offset,
            batch.last_offset,
            batch.leader_epoch,
            batch.crc,
        )
        assert (b["base_timestamp"], b["max_timestamp"], b["producer_id"], b["record_count"]) == (
            batch.first_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.records_count,
        )
        assert b["batch_length"] + 12 == batch.size_in_bytes
        i += 1
    assert i == scan.batch_count == 4


@pytest.mark.parametrize(
    "name,entries", [("kafka-python-record_batch_data_v0.bin", 4), ("kafka-python-record_batch_data_v1.bin", 4)]
)
def test_legacy_files_are_counted(name: str, entries: int) -> None:
    path = REALDATA / name
    scan = scan_segment_file(path)
    assert scan.batch_count == 0
    assert scan.quarantine == []
    assert scan.legacy_entries == entries
    assert scan.legacy_bytes == path.stat().st_size  # every byte accounted for (and every legacy CRC-32 valid)


def test_control_batch_golden() -> None:
    """A control batch whose value is not an EndTxnMarker: reported, not a crash.

    Its stored CRC (0x6597ffd0) does not match its bytes (CRC-32C 0xd56b5fb4; kafka-python's own
    validate_crc() says False too): the sample was edited by hand. With CRC checking it is damage.
    """
    path = REALDATA / "kafka-python-control_batch_data_v2.bin"
    checked = scan_segment_file(path)
    assert checked.batch_count == 0
    assert [(q.position, q.length, q.reason) for q in checked.quarantine] == [(0, 94, "crc_mismatch")]
    assert not DefaultRecordBatch(path.read_bytes()).validate_crc()

    scan = scan_segment_file(path, check_crc=False)
    b = {name: col.tolist() for name, col in scan.batches.items()}
    assert b["is_control"] == [True] and b["is_transactional"] == [False]
    assert b["control_key_version"] == [0]
    assert b["control_type"] == [0]  # ABORT
    assert b["control_status"] == [ControlStatus.BAD_VALUE]
    assert b["control_value_version"] == [0x6F70]  # "op" of "opaque-control-message"
    assert b["coordinator_epoch"] == [-1]
    assert b["marker_timestamp"] == [9999999]
    assert [q.reason for q in scan.quarantine] == ["bad_control_record"]
    # kafka-python reads the same key.
    (rec,) = list(DefaultRecordBatch(path.read_bytes()))
    assert (rec.version, rec.type, rec.value) == (0, 0, b"opaque-control-message")
