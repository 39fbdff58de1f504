"""Wire primitives readable from numba nopython code: big-endian ints and varints.

The bottom layer (franz-go's ``kbin``): no knowledge of any message. Every
reader takes a uint8 array and a position and trusts the *caller* to have
checked bounds for fixed-width reads; varint readers check bounds themselves
and return a position of ``-1`` when the bytes run out or the varint is too
long, so a record walker can carry the error as a value (no exceptions in
nopython code).

Varints follow ``ByteUtils`` (spec "Sources and conventions"): zig-zag signed,
7 bits per byte, least significant group first, at most 5 bytes for an int32
and 10 for an int64; bits beyond the width are dropped as Java's shifts do.
"""

from __future__ import annotations

import numpy as np

from txnlog.kafka.jit import jit
from txnlog.kafka.wire import MAX_VARINT_BYTES, MAX_VARLONG_BYTES


@jit(inline=True)
def be_i16(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    return v - 0x10000 if v >= 0x8000 else v  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python


@jit(inline=True)
def be_i32(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    return v - 0x100000000 if v >= 0x80000000 else v  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python


@jit(inline=True)
def be_u32(buf: np.ndarray, p: int) -> int:
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python


@jit(inline=True)
def be_i64(buf: np.ndarray, p: int) -> int:
    # int64 shifts wrap like Java's, so the top byte lands in the sign bit.
    hi = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    lo = (
        (np.int64(buf[p + 4]) << 24) | (np.int64(buf[p + 5]) << 16) | (np.int64(buf[p + 6]) << 8) | np.int64(buf[p + 7])
    )
    return (hi << np.int64(32)) | lo  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python


@jit()
def read_varint(buf: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """Zig-zag varint (int32) at ``p``; returns (value, next position) or (0, -1)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for i in range(MAX_VARINT_BYTES):
        if p + i >= end:
            return 0, -1
        b = np.uint64(buf[p + i])
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            u = raw & np.uint64(0xFFFFFFFF)
            v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
            return v, p + i + 1  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python
        shift += np.uint64(7)
    return 0, -1  # "Varint is too long"


@jit()
def read_varlong(buf: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """Zig-zag varlong (int64) at ``p``; returns (value, next position) or (0, -1)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for i in range(MAX_VARLONG_BYTES):
        if p + i >= end:
            return 0, -1
        b = np.uint64(buf[p + i])
        if shift < np.uint64(64):
            raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            v = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
            return v, p + i + 1  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python
        shift += np.uint64(7)
    return 0, -1


@jit()
def read_uvarint(buf: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """Unsigned varint (int32 range, flexible-version lengths and tags); (value, next) or (0, -1)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for i in range(MAX_VARINT_BYTES):
        if p + i >= end:
            return 0, -1
        b = np.uint64(buf[p + i])
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            return np.int64(raw & np.uint64(0xFFFFFFFF)), p + i + 1  # type: ignore[return-value]  # numba returns np.int64 inside compiled code and boxes it to int for Python
        shift += np.uint64(7)
    return 0, -1


@jit(inline=True)
def read_length(buf: np.ndarray, p: int, end: int, flexible: bool, width: int) -> tuple[int, int]:
    """A string length or an array count: in a flexible version a compact uvarint holding length + 1 (0 is null,
    read as -1), else a big-endian int16 (``width`` 2) or int32 (``width`` 4). Returns (value, next) or (0, -1)."""
    if flexible:
        n, q = read_uvarint(buf, p, end)
        return n - 1, q
    if end - p < width:
        return 0, -1
    if width == 2:
        return be_i16(buf, p), p + 2
    return be_i32(buf, p), p + 4


@jit(inline=True)
def skip_tagged_fields(buf: np.ndarray, p: int, end: int) -> int:
    """Step over a flexible version's tagged-field section (a count, then tag, size and bytes for each);
    the position after it, or -1 where it runs past ``end``."""
    ntags, p = read_uvarint(buf, p, end)
    if p < 0:
        return -1
    for _t in range(ntags):
        _tag, p = read_uvarint(buf, p, end)
        if p < 0:
            return -1
        size, p = read_uvarint(buf, p, end)
        if p < 0 or size > end - p:
            return -1
        p += size
    return p


@jit(inline=True)
def is_valid_utf8(buf: np.ndarray, start: int, stop: int) -> bool:
    """Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF), as Arrow string arrays require."""
    ascii_bits = np.uint8(0)
    for k in range(start, stop):  # no branch: compiled to wide ORs; ids and topic names are mostly ASCII
        ascii_bits |= buf[k]
    if ascii_bits < 0x80:
        return True
    i = start
    while i < stop:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
        elif 0xF0 <= c <= 0xF4:
            n = 3
        else:
            return False
        if i + n >= stop:  # the last continuation byte would be past the end
            return False
        c1 = buf[i + 1]
        if c1 < 0x80 or c1 > 0xBF:
            return False
        # Second-byte ranges that exclude overlongs (E0, F0), surrogates (ED) and > U+10FFFF (F4).
        if c == 0xE0 and c1 < 0xA0:
            return False
        if c == 0xED and c1 > 0x9F:
            return False
        if c == 0xF0 and c1 < 0x90:
            return False
        if c == 0xF4 and c1 > 0x8F:
            return False
        for k in range(2, n + 1):
            ck = buf[i + k]
            if ck < 0x80 or ck > 0xBF:
                return False
        i += n + 1
    return True
