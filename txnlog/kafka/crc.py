"""CRC-32C (Castagnoli), for record batches (DefaultRecordBatch) and producer snapshots (ProducerStateManager).

Record batches carry a CRC-32C over bytes ``[21, end)``; checking it is most of
the cost of a segment walk, so the walk calls a native implementation from
numba nopython code. Three backends, chosen once at import:

``external``
    The C library bundled in the ``google-crc32c`` wheel
    (``google_crc32c.libs/libcrc32c-*.so``, hardware SSE4.2 path), loaded with
    ``llvmlite.binding.load_library_permanently`` and declared as a
    ``numba.types.ExternalFunction``. The symbol is resolved by name at link
    time, so functions that call it can be cached on disk. ~5-8 GB/s.
``ctypes``
    The same library through a ctypes function pointer (the address is baked
    into the machine code, so no on-disk cache).
``software``
    A table-driven CRC-32C compiled by numba (~0.5-1 GB/s). Used only when the
    library cannot be found or loaded; a warning is emitted once. (Chosen over
    calling ``google_crc32c.value`` per batch from Python: it keeps the walk
    compiled, including CRC-checked resynchronisation.)

Numba-callable API: ``crc32c_update(crc, buf, start, stop) -> uint32`` over
``buf[start:stop]`` of a uint8 array, where ``crc`` is a previous result (0 to
start). Python API: :func:`crc32c`.
"""

from __future__ import annotations

import ctypes
import glob
import os
import warnings
from typing import Any

import numpy as np
from numba import types

from txnlog.kafka.jit import jit

__all__ = ["BACKEND", "NUMBA_CACHEABLE", "crc32_ieee", "crc32c", "crc32c_update", "library_path"]

# Castagnoli polynomial, reflected (RFC 3720 §B.4).
_POLY_REFLECTED = 0x82F63B78


def library_path() -> str | None:
    """Path of ``libcrc32c`` inside the installed google-crc32c wheel, or None."""
    try:
        import google_crc32c  # optional here: without the wheel the compiled table-driven CRC is used
    except ImportError:
        return None
    site = os.path.dirname(os.path.dirname(os.path.abspath(google_crc32c.__file__)))
    # auditwheel puts vendored libraries in "<package>.libs"; a source build links libcrc32c.so elsewhere.
    for pattern in ("google_crc32c.libs/libcrc32c*.so*", "google_crc32c/libcrc32c*.so*"):
        found = sorted(glob.glob(os.path.join(site, pattern)))
        if found:
            return found[0]
    return None


def _software_table() -> np.ndarray:
    """Slice-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes."""
    table = np.zeros((8, 256), dtype=np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (_POLY_REFLECTED if c & 1 else 0)
        table[0, b] = c
    for b in range(256):
        c = int(table[0, b])
        for k in range(1, 8):
            c = (c >> 8) ^ int(table[0, c & 0xFF])
            table[k, b] = c
    return table


_TABLE = _software_table()


@jit()
def crc32c_software(crc: int, buf: np.ndarray, start: int, stop: int) -> int:
    """Table-driven CRC-32C of ``buf[start:stop]`` continuing from ``crc``."""
    t = _TABLE
    c = np.uint32(crc) ^ np.uint32(0xFFFFFFFF)
    i = start
    # Slice-by-8: eight table lookups per 8 input bytes.
    while i + 8 <= stop:
        lo = c ^ (
            np.uint32(buf[i])
            | (np.uint32(buf[i + 1]) << np.uint32(8))
            | (np.uint32(buf[i + 2]) << np.uint32(16))
            | (np.uint32(buf[i + 3]) << np.uint32(24))
        )
        c = (
            t[7, lo & np.uint32(0xFF)]
            ^ t[6, (lo >> np.uint32(8)) & np.uint32(0xFF)]
            ^ t[5, (lo >> np.uint32(16)) & np.uint32(0xFF)]
            ^ t[4, lo >> np.uint32(24)]
            ^ t[3, buf[i + 4]]
            ^ t[2, buf[i + 5]]
            ^ t[1, buf[i + 6]]
            ^ t[0, buf[i + 7]]
        )
        i += 8
    while i < stop:
        c = t[0, (c ^ np.uint32(buf[i])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        i += 1
    return c ^ np.uint32(0xFFFFFFFF)  # type: ignore[return-value]  # numba boxes the compiled np.uint32 to int for Python


def _choose_backend() -> tuple[str, Any]:
    path = library_path()
    if path is not None:
        try:
            import llvmlite.binding as llvm

            llvm.load_library_permanently(path)
            # crc32c_extend(uint32_t crc, const uint8_t* data, size_t n): the pointer is passed as an
            # integer (uintp), which has the same calling convention on every 64-bit ABI numba targets.
            fn = types.ExternalFunction("crc32c_extend", types.uint32(types.uint32, types.uintp, types.uintp))
            return "external", fn
        except Exception:  # noqa: BLE001 - any loader failure just means "try the next backend"
            pass
        try:
            lib = ctypes.CDLL(path)
            cfn = lib.crc32c_extend
            cfn.restype = ctypes.c_uint32
            cfn.argtypes = [ctypes.c_uint32, ctypes.c_size_t, ctypes.c_size_t]
            return "ctypes", cfn
        except Exception:  # noqa: BLE001
            pass
    warnings.warn(
        "txnlog: libcrc32c from google-crc32c not found or not loadable; using a slower compiled software CRC-32C",
        RuntimeWarning,
        stacklevel=2,
    )
    return "software", None


BACKEND, _NATIVE = _choose_backend()
#: Whether functions that call ``crc32c_update`` may be cached on disk (see txnlog.kafka.jit).
NUMBA_CACHEABLE = BACKEND == "external"

if BACKEND in ("external", "ctypes"):
    _native = _NATIVE

    @jit(cacheable=NUMBA_CACHEABLE)
    def crc32c_update(crc: int, buf: np.ndarray, start: int, stop: int) -> int:
        """CRC-32C of ``buf[start:stop]`` continuing from ``crc`` (native library)."""
        if stop <= start:
            return np.uint32(crc)  # type: ignore[return-value]  # numba boxes the compiled np.uint32 to int for Python
        return _native(np.uint32(crc), buf.ctypes.data + start, stop - start)

else:
    crc32c_update = crc32c_software


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``crc``), as an unsigned int.

    >>> hex(crc32c(b"123456789"))  # the check value of CRC-32C
    '0xe3069283'
    """
    if isinstance(data, bytes):
        try:
            import google_crc32c

            return int(google_crc32c.extend(crc, data))
        except ImportError:
            pass
    arr = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    return int(crc32c_update(crc, arr, 0, arr.size))


def _ieee_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        table[b] = c
    return table


_IEEE_TABLE = _ieee_table()


@jit()
def crc32_ieee(buf: np.ndarray, start: int, stop: int) -> int:
    """Plain CRC-32 (zlib polynomial) of ``buf[start:stop]``: the CRC of legacy magic 0/1 entries (LegacyRecord).

    Table-driven, one byte at a time: legacy entries are rare in any segment worth analysing.
    """
    t = _IEEE_TABLE
    c = np.uint32(0xFFFFFFFF)
    for i in range(start, stop):
        c = t[(c ^ np.uint32(buf[i])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
    return c ^ np.uint32(0xFFFFFFFF)  # type: ignore[return-value]  # numba boxes the compiled np.uint32 to int for Python
