"""segment_from_records: consumed records laid out as a segment decode exactly as written."""

from __future__ import annotations

from txnlog.brokerlog.encode import encode_transaction_log_key, encode_transaction_log_value
from txnlog.kafka.consumed import segment_from_records
from txnlog.kafka.record_batch import scan_segment
from txnlog.kafka.txn_state import decode_transaction_log_value, scan_transaction_log
from txnlog.live.admin import kafka_python_settings


def test_round_trip_with_tombstones_long_values_and_gaps() -> None:
    ids = [f"id-{i}-" + "x" * (i * 40) for i in range(6)]  # keys and values past the 1-byte varint range
    values = [
        encode_transaction_log_value(
            version=i % 2,
            producer_id=i,
            producer_epoch=1,
            transaction_timeout_ms=1,
            state=1,
            partitions={"t" * (i * 30 + 1): list(range(i * 20))},
            last_update_timestamp_ms=2,
            start_timestamp_ms=3,
        )
        for i in range(6)
    ]
    values[2] = None
    offsets = [3, 4, 10, 11, 500, 100_000]  # compaction gaps
    seg = segment_from_records(
        offsets,
        [7, 8, 9, 10, 11, 12],
        [len(encode_transaction_log_key(i)) for i in ids],
        b"".join(encode_transaction_log_key(i) for i in ids),
        [-1 if v is None else len(v) for v in values],
        b"".join(v for v in values if v),
        [5] * 6,
    )
    assert scan_segment(seg, check_crc=False).quarantine == []
    scan = scan_transaction_log(seg, check_crc=False)
    assert scan.quarantine == []
    assert scan.records["offset"].tolist() == offsets and scan.records["timestamp"].tolist() == [7, 8, 9, 10, 11, 12]
    assert scan.transactional_ids().tolist() == ids
    assert scan.records["is_tombstone"].tolist() == [False, False, True, False, False, False]
    for i, v in enumerate(values):
        if v is not None:
            want = decode_transaction_log_value(v)
            assert scan.records["producer_id"][i] == want.producer_id


def test_empty_and_null_key() -> None:
    assert segment_from_records([], [], [], b"", [], b"").size == 0
    scan = scan_transaction_log(segment_from_records([0], [1], [-1], b"", [1], b"x"), check_crc=False)
    assert scan.record_count == 0 and len(scan.quarantine) == 1


def test_kafka_python_settings_translate_librdkafka_names() -> None:
    got = kafka_python_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca.pem",
            "log_level": 3,
        }
    )
    assert got == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": True,
    }
    import pytest

    from txnlog.model.errors import UsageError

    with pytest.raises(UsageError, match="kafka.sasl.oauthbearer.config: not supported"):
        kafka_python_settings({"sasl.oauthbearer.config": "x"})
