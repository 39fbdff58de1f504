"""Decompression bombs: small compressed streams that expand to a chosen, large size.

Built by streaming compressors fed 1 MiB of zeros at a time, so making a 1 GiB bomb costs
~15 MiB of memory and well under a second (zstd, lz4) or ~3 s per GiB (gzip). The framings are
the ones Kafka's readers take (txnlog.kafka.compression): a gzip member, a zstd frame without a
content size (as zstd-jni streams it), an LZ4 frame. Snappy cannot expand much (a copy costs two
bytes for at most 64), so its "bomb" is a raw block whose preamble *declares* a huge length.
"""

from __future__ import annotations

import functools
import zlib

import cramjam

from tests.kafka.encoders import uvarint

_CHUNK = bytes(1 << 20)


@functools.cache
def bomb(codec: int, expanded: int, prefix: bytes = b"") -> bytes:
    """``prefix`` followed by zeros up to ``expanded`` bytes (rounded up to whole MiB), compressed."""
    chunks = -(-max(expanded - len(prefix), 0) // len(_CHUNK))
    if codec == 1:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [gz.compress(prefix)] + [gz.compress(_CHUNK) for _ in range(chunks)]
        return b"".join(parts) + gz.flush()
    if codec in (3, 4):
        c = (cramjam.lz4 if codec == 3 else cramjam.zstd).Compressor()
        c.compress(prefix)
        for _ in range(chunks):
            c.compress(_CHUNK)
        return bytes(c.finish())
    if codec == 2:
        return snappy_length_lie(expanded)
    raise ValueError(f"no bomb for codec {codec}")


def snappy_length_lie(declared: int) -> bytes:
    """A raw snappy block that declares ``declared`` output bytes and holds a 4-byte literal."""
    return uvarint(declared) + b"\x0c" + b"abcd"  # tag 0x0c: literal of 4 bytes
