"""CRC-32C backends agree with each other and with google-crc32c."""

from __future__ import annotations

import os
import zlib

import google_crc32c
import numpy as np
import pytest

from txnlog.kafka import crc


def test_backend_is_the_native_library_here() -> None:
    # The venv installs google-crc32c with its bundled libcrc32c: the fast, cacheable path must be in use.
    assert crc.library_path() is not None
    assert crc.BACKEND == "external" and crc.NUMBA_CACHEABLE


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 61, 1000, 65537])
def test_all_implementations_agree(n: int) -> None:
    data = os.urandom(n + 3)
    arr = np.frombuffer(data, np.uint8)
    expected = google_crc32c.value(data[3:])
    assert crc.crc32c(data[3:]) == expected
    assert crc.crc32c(arr[3:]) == expected
    assert crc.crc32c(bytearray(data[3:])) == expected
    assert int(crc.crc32c_update(0, arr, 3, n + 3)) == expected
    assert int(crc.crc32c_software(0, arr, 3, n + 3)) == expected
    assert int(crc.crc32_ieee(arr, 3, n + 3)) == zlib.crc32(data[3:])


def test_check_value_and_chaining() -> None:
    assert crc.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc.crc32c(b"6789", crc.crc32c(b"12345")) == 0xE3069283
    arr = np.frombuffer(b"123456789", np.uint8)
    assert int(crc.crc32c_software(int(crc.crc32c_software(0, arr, 0, 4)), arr, 4, 9)) == 0xE3069283
