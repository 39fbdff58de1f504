"""Producer snapshots (spec §4)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.kafka import encoders as E
from txnlog.kafka.errors import DecodeError
from txnlog.kafka.producer_snapshot import (
    SNAPSHOT_ENTRY_COLUMNS,
    decode_producer_snapshot,
    decode_producer_snapshot_file,
    decode_producer_snapshots,
    snapshot_offset_from_name,
)

# The three producers of shared/realdata/dump-log/klog-readSnapshotFromKafka3Dump.txt (a production
# cluster), re-encoded: (pid, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
# currentTxnFirstOffset).
PRODUCTION = [
    (171101, 12, 0, 932442537, 0, 1655628030307, 54, -1),
    (199398, 0, 0, 933607621, 0, 1655761267833, 57, 933607621),
    (173102, 16, 0, 933203854, 0, 1655704254875, 59, -1),
]


def test_decodes_every_field(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "00000000000933607637.snapshot"
    path.write_bytes(E.producer_snapshot(PRODUCTION))
    snap = decode_producer_snapshot_file(path)
    assert snap.version == 1 and snap.crc_valid and snap.trailing_bytes == 0 and snap.file == str(path)
    assert list(snap.entries) == list(SNAPSHOT_ENTRY_COLUMNS)
    assert all(snap.entries[n].dtype == d for n, d in SNAPSHOT_ENTRY_COLUMNS.items())
    rows = list(zip(*(snap.entries[n].tolist() for n in SNAPSHOT_ENTRY_COLUMNS)))
    assert rows == PRODUCTION
    assert snap.open_transactions.tolist() == [False, True, False]
    assert snapshot_offset_from_name(path) == 933607637


def test_empty_snapshot() -> None:
    snap = decode_producer_snapshot(E.producer_snapshot([]))
    assert snap.entry_count == 0 and snap.crc_valid


def test_bad_crc_is_reported_not_raised() -> None:
    raw = bytearray(E.producer_snapshot(PRODUCTION))
    raw[-1] ^= 1
    snap = decode_producer_snapshot(bytes(raw))
    assert not snap.crc_valid and snap.entry_count == 3


def test_trailing_bytes_are_ignored_but_covered_by_the_crc() -> None:
    raw = E.producer_snapshot(PRODUCTION) + b"\x00\x00"
    snap = decode_producer_snapshot(raw)
    assert snap.trailing_bytes == 2 and snap.entry_count == 3 and not snap.crc_valid


BAD = {
    "empty": b"",
    "9-bytes": b"\x00\x01" + b"\x00" * 7,
    "version-0": E.producer_snapshot(PRODUCTION, version=0),
    "version-2": E.producer_snapshot(PRODUCTION, version=2),
    "negative-count": struct.pack(">hIi", 1, 0, -1),
    "count-overruns": E.producer_snapshot(PRODUCTION)[:-1],
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_snapshots_raise(case: str) -> None:
    with pytest.raises(DecodeError) as e:
        decode_producer_snapshot(BAD[case], file="x.snapshot")
    assert e.value.reason == "bad_snapshot" and e.value.file == "x.snapshot"


@pytest.mark.parametrize(
    "name", ["00000000000000001234.snapshot.deleted", "foo.snapshot", "00000000000000001234.log", ".snapshot"]
)
def test_snapshot_names(name: str) -> None:
    with pytest.raises(ValueError):
        snapshot_offset_from_name(name)
    assert snapshot_offset_from_name("/x/y/00000000000000000000.snapshot") == 0


def test_many_snapshots_decoded_at_once_give_each_its_own_entries() -> None:
    """decode_producer_snapshots of good, empty, bad-CRC, trailing-bytes and undecodable files, one after another
    in one buffer: each file's entries, CRC verdict and error as decode_producer_snapshot of it alone gives."""
    bad_crc = bytearray(E.producer_snapshot(PRODUCTION))
    bad_crc[-1] ^= 1
    raws = [
        E.producer_snapshot(PRODUCTION),
        E.producer_snapshot([]),
        bytes(bad_crc),
        E.producer_snapshot(PRODUCTION[:1]) + b"\x00\x00",
        *BAD.values(),
        E.producer_snapshot(PRODUCTION[1:]),
    ]
    files = [f"{k}.snapshot" for k in range(len(raws))]
    many = decode_producer_snapshots(b"".join(raws), np.cumsum([0, *map(len, raws)]), files)
    start = 0
    for k, (raw, file) in enumerate(zip(raws, files, strict=True)):
        try:
            alone = decode_producer_snapshot(raw, file=file)
        except DecodeError as e:
            error = many.errors[k]
            assert error is not None and (str(error), error.reason, error.position) == (str(e), e.reason, e.position)
            assert many.counts[k] == 0
            continue
        assert many.errors[k] is None and bool(many.crc_valid[k]) == alone.crc_valid
        rows = slice(start, start + int(many.counts[k]))
        start = rows.stop
        for name, values in alone.entries.items():
            assert many.entries[name].dtype == values.dtype
            np.testing.assert_array_equal(many.entries[name][rows], values, err_msg=name)
    assert start == many.entries["producer_id"].size
