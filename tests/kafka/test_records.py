"""The one record-frame reader (spec §1.4): every field, every truncation, and its callers agree."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kafka import encoders as E
from txnlog.kafka.dump_log_render import _iter_v2_records
from txnlog.kafka.records import RECORD_BROKEN, RECORD_BROKEN_AT_OFFSET, RECORD_OK, read_header, read_record

RECORDS = {
    "plain": (3, 250, b"k", b"value", ()),
    "null-key": (0, 0, None, b"v", ()),
    "tombstone": (7, -5, b"key", None, ()),
    "empty": (1, 1, b"", b"", ()),
    "headers": (2, 10, b"k", b"v", (("h1", b"x"), ("h2", None), ("", b""))),
    "wide": (2**31 - 1, 2**40, b"k" * 300, b"v" * 70000, (("h" * 200, b"y" * 200),)),
}


def _arr(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, np.uint8)


@pytest.mark.parametrize("case", list(RECORDS), ids=list(RECORDS))
def test_every_field(case: str) -> None:
    offset_delta, ts_delta, key, value, headers = RECORDS[case]
    raw = E.record(offset_delta, ts_delta, key, value, headers) + b"\xff\xff"  # what follows is not read
    end = len(raw) - 2
    frame, nxt, ts, od, ks, kl, vs, vl, hs, hc = read_record(_arr(raw), 0, len(raw))
    assert (frame, nxt, ts, od) == (RECORD_OK, end, ts_delta, offset_delta)
    assert (None if kl < 0 else raw[ks : ks + kl]) == key
    assert (None if vl < 0 else raw[vs : vs + vl]) == value
    assert hc == len(headers)
    q = hs
    for hkey, hvalue in headers:
        q, hks, hkl, hvs, hvl = read_header(_arr(raw), q, end)
        assert raw[hks : hks + hkl].decode() == hkey
        assert (None if hvl < 0 else raw[hvs : hvs + hvl]) == hvalue
    assert q == end
    assert (
        list(_iter_v2_records(raw[:end] * 2, 2)) == [(ts_delta, offset_delta, key, value, [h for h, _ in headers])] * 2
    )


@pytest.mark.parametrize("case", list(RECORDS), ids=list(RECORDS))
def test_every_truncation_breaks_the_frame(case: str) -> None:
    offset_delta, ts_delta, key, value, headers = RECORDS[case]
    raw = E.record(offset_delta, ts_delta, key, value, headers)
    for cut in range(len(raw)):
        assert read_record(_arr(raw), 0, cut)[0] != RECORD_OK, cut


def test_the_offset_is_known_once_offset_delta_was_read() -> None:
    # length 3: attributes, timestampDelta, offsetDelta (9), then nothing where the key length should be
    raw = E.varint(3) + b"\x00" + E.varlong(0) + E.varint(9)
    frame, _, _, od, *_ = read_record(_arr(raw), 0, len(raw))
    assert (frame, od) == (RECORD_BROKEN_AT_OFFSET, 9)
    # length 2: the offsetDelta is missing
    raw = E.varint(2) + b"\x00" + E.varlong(0)
    assert read_record(_arr(raw), 0, len(raw))[0] == RECORD_BROKEN


BROKEN = {
    "zero-length": E.varint(0),
    "negative-length": E.varint(-1),
    "negative-header-count": E.varint(6)
    + b"\x00"
    + E.varlong(0)
    + E.varint(0)
    + E.varint(-1)
    + E.varint(-1)
    + E.varint(-1),
    "negative-header-key": E.varint(8)
    + b"\x00"
    + E.varlong(0)
    + E.varint(0)
    + E.varint(-1)
    + E.varint(-1)
    + E.varint(1)
    + E.varint(-1)
    + E.varint(-1),
    "bytes-left-in-the-record": E.varint(8)
    + b"\x00"
    + E.varlong(0)
    + E.varint(0)
    + E.varint(-1)
    + E.varint(-1)
    + E.varint(0)
    + b"\x00\x00",
    "varint-longer-than-5-bytes": E.varint(11)
    + b"\x00"
    + E.varlong(0)
    + b"\xff" * 5
    + b"\x01"
    + E.varint(-1)
    + E.varint(-1)
    + E.varint(0),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_broken_frames(case: str) -> None:
    raw = BROKEN[case]
    assert read_record(_arr(raw), 0, len(raw))[0] != RECORD_OK
    assert list(_iter_v2_records(raw, 1)) == []
