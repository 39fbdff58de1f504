"""The decompression cap: a bomb is a quarantine row, never an out-of-memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import cramjam
import pytest

from tests.kafka import encoders as E
from tests.kafka.bombs import bomb, snappy_length_lie
from txnlog.kafka.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.errors import DECOMPRESSED_TOO_LARGE, DECOMPRESSION_FAILED, DecodeError
from txnlog.kafka.record_batch import scan_segment
from txnlog.kafka.txn_state import scan_transaction_log

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
CODECS = [(1, ""), (2, ""), (2, "raw"), (3, ""), (3, "java"), (4, "")]
CODEC_IDS = ["gzip", "snappy-xerial", "snappy-raw", "lz4", "lz4-java-frame", "zstd"]


def text(n: int) -> bytes:
    """``n`` bytes that compress, but not to nothing."""
    return (b"transaction state of txn-%d; " * (n // 20 + 1))[:n]


@pytest.mark.parametrize(("codec", "variant"), CODECS, ids=CODEC_IDS)
def test_output_of_exactly_the_limit_decodes_one_byte_more_does_not(codec: int, variant: str) -> None:
    data = text(300_000)  # past the first buffer (64 KiB or 8x the payload): the growth path runs
    payload = E.compress(codec, data, variant=variant)
    assert decompress(codec, payload, limit=len(data)) == data
    with pytest.raises(DecodeError) as e:
        decompress(codec, payload, limit=len(data) - 1)
    assert e.value.reason == DECOMPRESSED_TOO_LARGE
    assert f"expand past {len(data) - 1} bytes" in e.value.detail


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_a_bomb_is_too_large_not_failed(codec: int) -> None:
    payload = bomb(codec, 256 * MiB)
    assert len(payload) < 2 * MiB  # a bomb: 256 MiB from at most a few hundred KiB
    with pytest.raises(DecodeError) as e:
        decompress(codec, payload, limit=MiB, file="f.log", position=4711)
    assert (e.value.reason, e.value.file, e.value.position) == (DECOMPRESSED_TOO_LARGE, "f.log", 4711)


def test_snappy_declared_length_is_checked_before_anything_is_allocated() -> None:
    with pytest.raises(DecodeError) as e:
        decompress(2, snappy_length_lie(2**31), limit=MiB)
    assert e.value.reason == DECOMPRESSED_TOO_LARGE
    # every xerial block counts against the same limit
    block = bytes(cramjam.snappy.compress_raw(text(600_000)))
    xerial = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + (len(block).to_bytes(4, "big") + block) * 2
    assert len(decompress(2, xerial, limit=1_200_000)) == 1_200_000
    with pytest.raises(DecodeError) as e:
        decompress(2, xerial, limit=1_199_999)
    assert e.value.reason == DECOMPRESSED_TOO_LARGE


@pytest.mark.parametrize(("codec", "variant"), CODECS, ids=CODEC_IDS)
def test_damage_is_still_decompression_failed(codec: int, variant: str) -> None:
    payload = E.compress(codec, text(50_000), variant=variant)
    with pytest.raises(DecodeError) as e:
        decompress(codec, payload[: len(payload) // 2])
    assert e.value.reason == DECOMPRESSION_FAILED


def test_cramjam_still_names_a_full_buffer_as_we_expect() -> None:
    """The cap tells an overflow from damage by this message (txnlog.kafka.compression._BUFFER_FULL)."""
    import numpy as np

    for module in (cramjam.gzip, cramjam.lz4, cramjam.zstd):
        with pytest.raises(Exception, match="failed to write whole buffer"):
            module.decompress_into(bytes(module.compress(text(10_000))), np.empty(100, np.uint8))


def test_a_gigabyte_bomb_costs_the_limit_not_a_gigabyte(tmp_path: Path) -> None:
    """Peak RSS of a fresh process: decompressing a 1 GiB zstd bomb under the default 64 MiB limit."""
    (tmp_path / "bomb").write_bytes(bomb(4, 1024 * MiB))
    script = textwrap.dedent(
        f"""
        import resource
        from txnlog.kafka.compression import decompress
        from txnlog.kafka.errors import DecodeError
        payload = open({str(tmp_path / "bomb")!r}, "rb").read()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            decompress(4, payload)
        except DecodeError as e:
            print(e.reason)
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out[0] == DECOMPRESSED_TOO_LARGE
    grown = int(out[1])
    assert grown <= DEFAULT_MAX_DECOMPRESSED_BYTES + 32 * MiB, f"peak RSS grew by {grown / MiB:.0f} MiB"


# --------------------------------------------------------------------------- inside the scans


def test_control_batch_bomb_is_quarantined_and_the_segment_goes_on() -> None:
    marker = E.record(0, 0, E.control_key(0), E.end_txn_marker(7))
    before = E.marker_batch(1, base_offset=0, producer_id=4, producer_epoch=0, coordinator_epoch=6)
    bombed = E.Batch(
        [marker], base_offset=1, attributes=0x34, producer_id=5, body=bomb(4, 64 * MiB, prefix=marker)
    ).encode()
    after = E.marker_batch(0, base_offset=2, producer_id=5, producer_epoch=0, coordinator_epoch=8)
    scan = scan_segment(before + bombed + after, max_decompressed_bytes=MiB)
    assert scan.batches["base_offset"].tolist() == [0, 1, 2]  # the header of the bombed batch still counts
    assert scan.batches["control_status"].tolist() == [
        ControlStatus.END_TXN_MARKER,
        ControlStatus.BAD_KEY,
        ControlStatus.END_TXN_MARKER,
    ]
    (q,) = scan.quarantine
    assert (q.reason, q.position, q.length) == (DECOMPRESSED_TOO_LARGE, len(before), len(bombed))
    assert "max_decompressed_bytes (1048576)" in q.detail
    # the same batch under a limit it fits in is an ordinary marker
    roomy = scan_segment(bombed, max_decompressed_bytes=65 * MiB)
    assert roomy.quarantine == [] and roomy.batches["coordinator_epoch"].tolist() == [7]


def test_txn_state_budget_is_per_file_and_later_batches_still_decode() -> None:
    def batch(i: int, codec: int, pad: int) -> bytes:
        # a record whose (unknown) header pads the records section to ~pad bytes
        rec = E.record(0, 0, E.txn_log_key(f"t{i}"), None, [("pad", text(pad))])
        return E.Batch([rec], base_offset=i, attributes=codec).encode()

    raw = batch(0, 4, 600_000) + batch(1, 1, 600_000) + batch(2, 0, 10) + batch(3, 4, 10)
    scan = scan_transaction_log(raw, max_decompressed_bytes=MiB)
    # batch 0 spends 600 kB of the 1 MiB; batch 1 does not fit in what is left; 2 is plain; 3 fits
    assert scan.transactional_ids().tolist() == ["t0", "t2", "t3"]
    assert [q.reason for q in scan.quarantine] == [DECOMPRESSED_TOO_LARGE]
    assert scan.quarantine[0].position == len(batch(0, 4, 600_000))
    assert scan_transaction_log(raw, max_decompressed_bytes=2 * MiB).quarantine == []


def test_txn_state_bomb_in_a_copied_segment() -> None:
    key = E.txn_log_key("bombed")
    rec = E.record(0, 0, key, None)
    good = E.txn_log_batch([(E.txn_log_key("a"), None)], base_offset=0)
    bombed = E.Batch([rec], base_offset=1, attributes=1, body=bomb(1, 128 * MiB, prefix=rec)).encode()
    scan = scan_transaction_log(good + bombed + E.txn_log_batch([(E.txn_log_key("c"), None)], base_offset=2))
    assert scan.transactional_ids().tolist() == ["a", "c"]
    assert [(q.reason, q.position) for q in scan.quarantine] == [(DECOMPRESSED_TOO_LARGE, len(good))]
