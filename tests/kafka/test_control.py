"""Strict control-record decoders (spec §2.1, §2.2)."""

from __future__ import annotations

import pytest

from tests.kafka import encoders as E
from txnlog.kafka.control import ControlKey, EndTxnMarker, decode_control_key, decode_end_txn_marker
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.wire import ControlType


@pytest.mark.parametrize("control_type", list(ControlType), ids=lambda t: t.name)
def test_every_known_control_type(control_type: ControlType) -> None:
    key = decode_control_key(E.control_key(control_type))
    assert key == ControlKey(0, int(control_type))
    assert key.control_type is control_type
    assert key.is_end_txn_marker == (control_type in (ControlType.ABORT, ControlType.COMMIT))


def test_unknown_type_is_kept_not_an_error() -> None:
    key = decode_control_key(E.control_key(42))
    assert key.type == 42 and key.control_type is None and not key.is_end_txn_marker


def test_higher_versions_parse_as_v0_and_ignore_trailing_bytes() -> None:
    assert decode_control_key(E.control_key(1, version=2) + b"xyz") == ControlKey(2, 1)
    assert decode_end_txn_marker(E.end_txn_marker(7, version=5) + b"\x00\x01") == EndTxnMarker(5, 7)


@pytest.mark.parametrize("coordinator_epoch", [0, 1, 2**31 - 1, -1], ids=lambda e: f"epoch-{e}")
def test_end_txn_marker(coordinator_epoch: int) -> None:
    assert decode_end_txn_marker(E.end_txn_marker(coordinator_epoch)) == EndTxnMarker(0, coordinator_epoch)


BAD_KEYS = {
    "null": None,
    "empty": b"",
    "3-bytes": b"\x00\x00\x00",
    "negative-version": E.control_key(0, version=-1),
    "implausible-version": b"op" + b"aq",
}
BAD_MARKERS = {
    "null": None,
    "5-bytes": b"\x00\x00\x00\x00\x00",
    "negative-version": E.end_txn_marker(3, version=-1),
    "text": b"opaque-control-message",
}


@pytest.mark.parametrize("data", list(BAD_KEYS.values()), ids=list(BAD_KEYS))
def test_bad_keys_raise(data: bytes | None) -> None:
    with pytest.raises(DecodeError) as e:
        decode_control_key(data, file="f.log", position=9)
    assert e.value.reason == "bad_control_record" and e.value.file == "f.log" and e.value.position == 9
    assert str(e.value).startswith("f.log@9: ControlRecordKey")


@pytest.mark.parametrize("data", list(BAD_MARKERS.values()), ids=list(BAD_MARKERS))
def test_bad_markers_raise(data: bytes | None) -> None:
    with pytest.raises(DecodeError) as e:
        decode_end_txn_marker(data)
    assert e.value.reason == "bad_control_record"
    assert isinstance(e.value, ValueError)


def test_decode_error_survives_pickling() -> None:
    import pickle

    err = DecodeError("a.log", 5, "X.y", "bad_length", "why")
    back = pickle.loads(pickle.dumps(err))
    assert (back.file, back.position, back.field, back.reason, back.detail, str(back)) == (
        "a.log",
        5,
        "X.y",
        "bad_length",
        "why",
        "a.log@5: X.y: bad_length: why",
    )
