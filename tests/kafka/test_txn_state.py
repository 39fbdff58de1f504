"""__transaction_state keys and values (spec §3): the strict decoders and the bulk scan, held to the same rules."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from tests.kafka import encoders as E
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.txn_state import (
    TXN_PARTITION_COLUMNS,
    TXN_RECORD_COLUMNS,
    TransactionLogValue,
    TxnLogScan,
    decode_transaction_log_key,
    decode_transaction_log_value,
    scan_transaction_log,
    scan_transaction_log_file,
)
from txnlog.kafka.wire import TransactionState

TS = 1_700_000_000_000


def bulk(entries: list[tuple[bytes | None, bytes | None]], **kw: object) -> TxnLogScan:
    return scan_transaction_log(E.txn_log_batch(entries, base_offset=100, **kw), file="tx.log")  # type: ignore[arg-type]


def bulk_row(scan: TxnLogScan, i: int = 0) -> dict[str, object]:
    return {name: col[i].item() for name, col in scan.records.items()}


def assert_bulk_matches(scan: TxnLogScan, i: int, value: TransactionLogValue | None) -> None:
    row = bulk_row(scan, i)
    if value is None:
        assert row["is_tombstone"] is True
        assert all(
            row[c] == -1
            for c in TXN_RECORD_COLUMNS
            if c not in ("position", "offset", "timestamp", "key_version", "is_tombstone")
        )
        return
    assert row["is_tombstone"] is False
    assert row["value_version"] == value.version
    for name in (
        "producer_id",
        "producer_epoch",
        "transaction_timeout_ms",
        "last_update_timestamp_ms",
        "start_timestamp_ms",
        "previous_producer_id",
        "next_producer_id",
        "next_producer_epoch",
        "client_transaction_version",
    ):
        assert row[name] == getattr(value, name), name
    assert row["state"] == value.state
    assert row["unknown_tag_count"] == len(value.unknown_tags)
    parts = scan.partitions
    mine = parts["record_index"] == i
    topics = scan.topic_partition_strings()[mine].tolist()
    if value.partitions is None:
        assert row["partition_count"] == -1 and topics == []
    else:
        expected = [f"{t}-{p}" for t, ps in value.partitions for p in ps]
        assert row["partition_count"] == len(expected) and topics == expected


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize("tid", ["txn-1", "", "ünïcødé-事务", "x" * 1000], ids=["ascii", "empty", "unicode", "long"])
def test_keys(tid: str) -> None:
    key = E.txn_log_key(tid)
    assert decode_transaction_log_key(key) == tid
    scan = bulk([(key, None)])
    assert scan.transactional_ids().tolist() == [tid]
    assert scan.records["key_version"].tolist() == [0]


BAD_KEYS = {
    "null": (None, "key is null"),
    "2-bytes": (b"\x00\x00", "shorter than 4 bytes"),
    "version-1": (E.txn_log_key("g", version=1), "is this __consumer_offsets"),
    "consumer-offsets-v1": (
        struct.pack(">hh", 1, 5) + b"group" + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 3),
        "__consumer_offsets",
    ),
    "group-metadata-v2": (struct.pack(">hh", 2, 5) + b"group", "__consumer_offsets"),
    "offset-commit-v0": (
        struct.pack(">hh", 0, 5) + b"group" + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 3),
        "bytes after the transactional id",
    ),
    "negative-length": (struct.pack(">hh", 0, -1), "negative"),
    "overrun": (struct.pack(">hh", 0, 10) + b"abc", "overruns"),
    "bad-utf8": (struct.pack(">hh", 0, 2) + b"\xc3\x28", "UTF-8"),
}


@pytest.mark.parametrize("case", list(BAD_KEYS), ids=list(BAD_KEYS))
def test_bad_keys(case: str) -> None:
    key, detail = BAD_KEYS[case]
    with pytest.raises(DecodeError) as e:
        decode_transaction_log_key(key)
    assert e.value.reason == "bad_txn_log_key"
    scan = bulk([(key, E.TxnValue().encode(1)), (E.txn_log_key("ok"), None)])
    assert scan.transactional_ids().tolist() == ["ok"]
    assert [(q.reason, q.position, q.length) for q in scan.quarantine] == [("bad_txn_log_key", 0, scan.segment.size)]
    assert scan.quarantine[0].detail.startswith("offset 100: ")
    assert detail in scan.quarantine[0].detail


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("version", [0, 1], ids=["v0", "v1"])
@pytest.mark.parametrize("state", list(TransactionState), ids=lambda s: s.kafka_name)
def test_every_state(state: TransactionState, version: int) -> None:
    raw = E.TxnValue(state=int(state)).encode(version)
    value = decode_transaction_log_value(raw)
    assert value is not None and value.state is state and value.version == version
    assert value.partitions == (("orders", (0, 1)),)
    scan = bulk([(E.txn_log_key("t"), raw)])
    assert_bulk_matches(scan, 0, value)


@pytest.mark.parametrize("state", [8, 127, -1, -128], ids=lambda s: f"state-{s}")
@pytest.mark.parametrize("version", [0, 1], ids=["v0", "v1"])
def test_unknown_state_id(state: int, version: int) -> None:
    raw = E.TxnValue(state=state).encode(version)
    with pytest.raises(DecodeError) as e:
        decode_transaction_log_value(raw)
    assert e.value.reason == "bad_txn_log_value" and "unknown transaction state id" in str(e.value)
    scan = bulk([(E.txn_log_key("t"), raw)])
    assert scan.record_count == 0
    assert [q.reason for q in scan.quarantine] == ["bad_txn_log_value"]
    assert f"unknown transaction state id {state}" in scan.quarantine[0].detail


def test_v0_golden_bytes() -> None:
    raw = bytes.fromhex(
        "0000"  # version 0
        "00000000000003e8"  # producer id 1000
        "0005"  # epoch 5
        "0000ea60"  # timeout 60000
        "01"  # Ongoing
        "00000001"  # 1 topic
        "0001"
        "61"  # "a"
        "00000002"
        "00000000"
        "00000007"  # partitions 0, 7
        "0000018bcfe56800"  # last update 1700000000000
        "0000018bcfe56400"  # start 1699999998976
    )
    assert decode_transaction_log_value(raw) == TransactionLogValue(
        1000, 5, 60000, TransactionState.ONGOING, (("a", (0, 7)),), 1700000000000, 1699999998976
    )


def test_v1_golden_bytes_with_every_tag() -> None:
    raw = bytes.fromhex(
        "0001"
        "00000000000003e8"
        "0005"
        "0000ea60"
        "02"  # v1, pid 1000, epoch 5, 60000, PrepareCommit
        "02"  # compact array: 1 topic
        "02"
        "61"  # compact string "a"
        "02"
        "00000003"  # compact array: partition 3
        "00"  # per-topic tagged fields: none
        "0000018bcfe56800"
        "0000018bcfe56400"
        "05"  # 5 tagged fields
        "00"
        "08"
        "0000000000000001"  # tag 0 PreviousProducerId = 1
        "01"
        "08"
        "0000000000000002"  # tag 1 NextProducerId = 2
        "02"
        "02"
        "0002"  # tag 2 ClientTransactionVersion = 2
        "03"
        "02"
        "0000"  # tag 3 NextProducerEpoch = 0
        "09"
        "03"
        "abcdef"  # tag 9: unknown, skipped by size
    )
    value = decode_transaction_log_value(raw)
    assert value == TransactionLogValue(
        1000,
        5,
        60000,
        TransactionState.PREPARE_COMMIT,
        (("a", (3,)),),
        1700000000000,
        1699999998976,
        previous_producer_id=1,
        next_producer_id=2,
        next_producer_epoch=0,
        client_transaction_version=2,
        unknown_tags=((9, bytes.fromhex("abcdef")),),
        version=1,
    )
    assert_bulk_matches(bulk([(E.txn_log_key("t"), raw)]), 0, value)


TAG_CASES = {
    "none": {},
    "previous-producer-id": {"previous_producer_id": 77},
    "next-producer-id": {"next_producer_id": 78},
    "client-transaction-version": {"client_transaction_version": 2},
    "next-producer-epoch": {"next_producer_epoch": 0},
    "all": {
        "previous_producer_id": 1,
        "next_producer_id": 2,
        "client_transaction_version": 1,
        "next_producer_epoch": 3,
    },
    "defaults-written": {"write_default_tags": True},
    "unknown-tags": {"extra_tags": [(4, b""), (200, b"x" * 300), (70000, b"\x01")]},
    "per-topic-tags": {"topic_tags": [(0, b"abc"), (5, b"")]},
}


@pytest.mark.parametrize("case", list(TAG_CASES), ids=list(TAG_CASES))
def test_v1_tagged_fields(case: str) -> None:
    spec = E.TxnValue(**TAG_CASES[case])  # type: ignore[arg-type]
    value = decode_transaction_log_value(spec.encode(1))
    assert value is not None
    for name in ("previous_producer_id", "next_producer_id", "client_transaction_version", "next_producer_epoch"):
        assert getattr(value, name) == getattr(spec, name), name
    assert value.unknown_tags == tuple(sorted(spec.extra_tags))
    assert_bulk_matches(bulk([(E.txn_log_key("t"), spec.encode(1))]), 0, value)


@pytest.mark.parametrize("tag,size", [(0, 4), (1, 9), (2, 1), (3, 8)], ids=lambda x: str(x))
def test_known_tag_with_wrong_size(tag: int, size: int) -> None:
    raw = E.TxnValue(extra_tags=[(tag, b"\x00" * size)]).encode(1)
    with pytest.raises(DecodeError) as e:
        decode_transaction_log_value(raw)
    assert e.value.reason == "bad_txn_log_value"
    scan = bulk([(E.txn_log_key("t"), raw)])
    assert [q.reason for q in scan.quarantine] == ["bad_txn_log_value"]
    assert f"tag {tag} has size {size}" in scan.quarantine[0].detail


PARTITION_CASES = {
    "null": None,
    "empty": [],
    "one-topic-no-partitions": [("t", [])],
    "many": [("orders", [0, 1, 2]), ("payments", [7]), ("ünï", [2**31 - 1])],
}


@pytest.mark.parametrize("version", [0, 1], ids=["v0", "v1"])
@pytest.mark.parametrize("case", list(PARTITION_CASES), ids=list(PARTITION_CASES))
def test_partitions(case: str, version: int) -> None:
    parts = PARTITION_CASES[case]
    raw = E.TxnValue(partitions=parts).encode(version)
    value = decode_transaction_log_value(raw)
    assert value is not None
    assert value.partitions == (None if parts is None else tuple((t, tuple(p)) for t, p in parts))
    assert_bulk_matches(bulk([(E.txn_log_key("t"), raw)]), 0, value)


def test_effective_partitions_ignore_empty_state() -> None:
    value = decode_transaction_log_value(E.TxnValue(state=0, partitions=[("t", [1])]).encode(1))
    assert value is not None and value.partitions == (("t", (1,)),) and value.effective_partitions == ()
    ongoing = decode_transaction_log_value(E.TxnValue(partitions=[("t", [1, 2])]).encode(1))
    assert ongoing is not None and ongoing.topic_partitions() == ["t-1", "t-2"]


def test_tombstone() -> None:
    assert decode_transaction_log_value(None) is None
    scan = bulk([(E.txn_log_key("gone"), None)])
    assert_bulk_matches(scan, 0, None)
    assert scan.transactional_ids().tolist() == ["gone"]


@pytest.mark.parametrize("version", [2, 3, -1, 0x7FFF], ids=lambda v: f"v{v}")
def test_unknown_value_version(version: int) -> None:
    raw = struct.pack(">h", version) + E.TxnValue().encode(1)[2:]
    with pytest.raises(DecodeError) as e:
        decode_transaction_log_value(raw)
    assert e.value.reason == "unknown_value_version"
    scan = bulk([(E.txn_log_key("t"), raw)])
    assert [q.reason for q in scan.quarantine] == ["unknown_value_version"]


@pytest.mark.parametrize("version", [0, 1], ids=["v0", "v1"])
def test_every_truncation_of_a_value_is_rejected_by_both(version: int) -> None:
    full = E.TxnValue(partitions=[("orders", [0, 1]), ("x", [5])], previous_producer_id=3).encode(version)
    for k in range(len(full)):
        with pytest.raises(DecodeError) as e:
            decode_transaction_log_value(full[:k])
        assert e.value.reason == "bad_txn_log_value", k
    scan = bulk([(E.txn_log_key(f"t{k}"), full[:k]) for k in range(len(full))] + [(E.txn_log_key("whole"), full)])
    assert scan.transactional_ids().tolist() == ["whole"]
    assert [q.reason for q in scan.quarantine] == ["bad_txn_log_value"] * len(full)
    assert scan.partitions["record_index"].tolist() == [0, 0, 0]  # nothing left over from the rejected ones


def test_trailing_bytes_after_a_value_are_ignored() -> None:
    raw = E.TxnValue().encode(0) + b"\xff\xff"
    assert decode_transaction_log_value(raw) == decode_transaction_log_value(raw[:-2])
    assert bulk([(E.txn_log_key("t"), raw)]).quarantine == []


# --------------------------------------------------------------------------- the bulk scan


def test_columns_and_dtypes() -> None:
    scan = bulk([(E.txn_log_key("a"), E.TxnValue().encode(1))])
    assert list(scan.records) == list(TXN_RECORD_COLUMNS)
    assert all(scan.records[n].dtype == d for n, d in TXN_RECORD_COLUMNS.items())
    assert list(scan.partitions) == list(TXN_PARTITION_COLUMNS)
    assert all(scan.partitions[n].dtype == d for n, d in TXN_PARTITION_COLUMNS.items())
    empty = scan_transaction_log(b"")
    assert empty.record_count == 0 and empty.transactional_id_offsets.tolist() == [0]


def test_offsets_timestamps_and_positions() -> None:
    first = E.txn_log_batch([(E.txn_log_key("a"), None), (E.txn_log_key("b"), None)], base_offset=10, timestamp=TS)
    second = E.txn_log_batch([(E.txn_log_key("c"), None)], base_offset=12, timestamp=TS + 50)
    scan = scan_transaction_log(first + second)
    assert scan.records["offset"].tolist() == [10, 11, 12]
    assert scan.records["timestamp"].tolist() == [TS, TS + 1, TS + 50]
    assert scan.records["position"].tolist() == [0, 0, len(first)]


def test_log_append_time_records_use_max_timestamp() -> None:
    recs = [E.record(0, 0, E.txn_log_key("a"), None), E.record(1, 3, E.txn_log_key("b"), None)]
    raw = E.Batch(recs, base_offset=0, attributes=0x08, base_timestamp=TS, max_timestamp=TS + 999).encode()
    assert scan_transaction_log(raw).records["timestamp"].tolist() == [TS + 999, TS + 999]


CODECS = [(1, ""), (2, ""), (2, "raw"), (3, ""), (3, "java"), (4, "")]


@pytest.mark.parametrize(
    "codec,variant", CODECS, ids=["gzip", "snappy-xerial", "snappy-raw", "lz4", "lz4-java-frame", "zstd"]
)
def test_compressed_batches_decode(codec: int, variant: str) -> None:
    entries = [
        (E.txn_log_key(f"txn-{i}"), E.TxnValue(producer_id=i, partitions=[("t", [i])]).encode(i % 2)) for i in range(50)
    ]
    raw = E.txn_log_batch(entries[:25], base_offset=0) + E.txn_log_batch(
        entries[25:], base_offset=25, codec=codec, variant=variant
    )
    scan = scan_transaction_log(raw)
    assert scan.quarantine == []
    assert scan.segment.batches["compression"].tolist() == [0, codec]
    assert scan.transactional_ids().tolist() == [f"txn-{i}" for i in range(50)]
    assert scan.records["producer_id"].tolist() == list(range(50))
    assert scan.topic_partition_strings().tolist() == [f"t-{i}" for i in range(50)]


def test_undecompressable_batch_is_quarantined_and_the_rest_decodes() -> None:
    good = E.txn_log_batch([(E.txn_log_key("a"), None)], base_offset=0)
    bad = E.Batch([E.record(0, 0, E.txn_log_key("b"), None)], base_offset=1, attributes=4, body=b"not zstd").encode()
    scan = scan_transaction_log(good + bad + E.txn_log_batch([(E.txn_log_key("c"), None)], base_offset=2))
    assert scan.transactional_ids().tolist() == ["a", "c"]
    assert [(q.reason, q.position) for q in scan.quarantine] == [("decompression_failed", len(good))]


def test_broken_record_framing_quarantines_the_rest_of_the_batch() -> None:
    recs = [E.record(0, 0, E.txn_log_key("a"), None), b"\x40\x00\x00", E.record(2, 0, E.txn_log_key("c"), None)]
    raw = E.Batch(recs, base_offset=0).encode()
    scan = scan_transaction_log(raw + E.txn_log_batch([(E.txn_log_key("d"), None)], base_offset=3))
    assert scan.transactional_ids().tolist() == ["a", "d"]
    assert [q.reason for q in scan.quarantine] == ["bad_record"]


def test_record_count_larger_than_the_records() -> None:
    raw = E.Batch(
        [E.record(0, 0, E.txn_log_key("a"), None)], base_offset=0, record_count=3, last_offset_delta=0
    ).encode()
    scan = scan_transaction_log(raw)
    assert scan.transactional_ids().tolist() == ["a"]
    assert [(q.reason, q.detail) for q in scan.quarantine] == [
        ("bad_record", "the batch ends after 1 of its 3 records")
    ]


def test_segment_damage_is_carried_over() -> None:
    a = E.txn_log_batch([(E.txn_log_key("a"), None)], base_offset=0)
    b = bytearray(E.txn_log_batch([(E.txn_log_key("b"), None)], base_offset=1))
    b[-1] ^= 1
    c = E.txn_log_batch([(E.txn_log_key("c"), None)], base_offset=2)
    partial = E.txn_log_batch([(E.txn_log_key("d"), None)], base_offset=3)[:10]
    scan = scan_transaction_log(a + bytes(b) + c + partial)
    assert scan.transactional_ids().tolist() == ["a", "c"]
    assert [q.reason for q in scan.quarantine] == ["crc_mismatch", "truncated_tail"]


def test_arrow_buffers_build_columns_without_python_loops() -> None:
    entries = [
        (E.txn_log_key("t-1"), E.TxnValue(partitions=[("orders", [0, 1]), ("pay", [3])]).encode(1)),
        (E.txn_log_key("t-2"), None),
        (E.txn_log_key("t-3"), E.TxnValue(partitions=None, state=0).encode(0)),
        (E.txn_log_key("t-4"), E.TxnValue(partitions=[("x", [9])]).encode(1)),
    ]
    scan = bulk(entries)
    n = scan.record_count
    ids = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(scan.transactional_id_offsets), pa.py_buffer(scan.transactional_id_data)
    )
    assert ids.to_pylist() == ["t-1", "t-2", "t-3", "t-4"]
    data, offsets = scan.topic_partitions()
    names = pa.LargeStringArray.from_buffers(offsets.size - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    lists = pa.LargeListArray.from_arrays(pa.array(scan.partition_list_offsets()), names)
    assert lists.to_pylist() == [["orders-0", "orders-1", "pay-3"], [], [], ["x-9"]]
    assert scan.partitions["partition"].tolist() == [0, 1, 3, 9]
    assert scan.topic_partition_strings().tolist() == ["orders-0", "orders-1", "pay-3", "x-9"]
    assert np.array_equal(scan.transactional_id_length, [3, 3, 3, 3])


def test_topic_partition_names_print_every_int32_as_java_does() -> None:
    ids = [0, 9, 10, 99, 100, 12345, 2**31 - 1, -1, -10, -(2**31)]
    entries = [(E.txn_log_key("t"), E.TxnValue(partitions=[("ünï-topic", ids), ("", [5])]).encode(1))]
    names = bulk(entries).topic_partition_strings().tolist()
    assert names == [f"ünï-topic-{i}" for i in ids] + ["-5"]  # TopicPartition.toString: topic + "-" + partition


def test_scan_transaction_log_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(E.txn_log_batch([(E.txn_log_key("a"), E.TxnValue().encode(1))]))
    scan = scan_transaction_log_file(path)
    assert scan.file == str(path) and scan.transactional_ids().tolist() == ["a"]
    empty = tmp_path / "00000000000000000001.log"
    empty.write_bytes(b"")
    assert scan_transaction_log_file(empty).record_count == 0


@pytest.mark.parametrize("window", [1, 60, 200, 1 << 30])
def test_windows_hold_what_the_whole_scan_holds(window: int) -> None:
    """A segment scanned a window at a time gives the whole scan's records, partitions and quarantine
    entries: damage, a compressed batch, a broken record and a decompression budget spent across windows."""
    from txnlog.kafka.txn_state import scan_transaction_log_windows

    entries = [
        (E.txn_log_key(f"txn-{i}"), E.TxnValue(producer_id=i, partitions=[("t", [i, i + 1])]).encode(1))
        for i in range(8)
    ]
    broken = E.Batch(
        [E.record(0, 0, E.txn_log_key("x"), None), b"\x40\x00\x00"], base_offset=20, record_count=2
    ).encode()
    crc = bytearray(E.txn_log_batch(entries[6:7], base_offset=21))
    crc[-1] ^= 1
    raw = (
        E.txn_log_batch(entries[:3], base_offset=0)
        + E.txn_log_batch(entries[3:5], base_offset=3, codec=4)
        + broken
        + bytes(crc)
        + E.txn_log_batch(entries[5:6], base_offset=30, codec=1)
        + E.txn_log_batch(entries[7:], base_offset=31)
        + E.txn_log_batch(entries[:1], base_offset=40)[:12]
    )
    limit = 2000  # the second compressed batch passes what the first left of the budget
    whole = scan_transaction_log(raw, max_decompressed_bytes=limit)
    windows = list(scan_transaction_log_windows(raw, window, max_decompressed_bytes=limit))
    assert len(windows) >= (2 if window <= 200 else 1)
    ids = [i for w in windows for i in w.transactional_ids().tolist()]
    assert ids == whole.transactional_ids().tolist() and len(ids) > 5
    for name, column in whole.records.items():
        assert np.concatenate([w.records[name] for w in windows]).tolist() == column.tolist(), name
    assert [
        p for w in windows for p in w.topic_partition_strings().tolist()
    ] == whole.topic_partition_strings().tolist()
    got = sorted((q.position, q.reason) for w in windows for q in w.quarantine)
    assert got == sorted((q.position, q.reason) for q in whole.quarantine) and len(got) >= 3
