"""Decompress the records section of a compressed v2 batch (attributes bits 0-2).

Data batches never need this (hanging-transaction detection reads headers
only); it is for the two places where records matter and a writer might have
compressed them anyway: ``__transaction_state`` batches (the coordinator forces
``compression.type=uncompressed``, spec §3.1, but a copied or re-produced
topic may not be) and control batches (never compressed by a broker, §2.3).

Framings, as Kafka's Java client writes them (CompressionType / the
``*InputStream`` classes; not in the spec, which marks them UNVERIFIED):

* gzip: an RFC 1952 stream;
* snappy: snappy-java's ``SnappyOutputStream`` *xerial* framing
  (``\\x82SNAPPY\\x00``, int32 version, int32 min compatible version, then blocks
  of int32 big-endian length + raw snappy); librdkafka and others may write a
  bare raw snappy block, so anything without the magic is read as raw;
* lz4: the standard LZ4 frame format (KIP-57 fixed the header checksum for
  magic >= 1, so v2 batches always have a correct one);
* zstd: a standard zstd frame, usually without a content size (streamed).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import cramjam

from txnlog.kafka.errors import DECOMPRESSION_FAILED, DecodeError
from txnlog.kafka.wire import XERIAL_SNAPPY_HEADER_SIZE, XERIAL_SNAPPY_MAGIC, Compression

if TYPE_CHECKING:
    import numpy as np

__all__ = ["decompress"]

_BLOCK_LENGTH = struct.Struct(">i")


def _snappy(payload: bytes) -> bytes:
    if not payload.startswith(XERIAL_SNAPPY_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(payload))
    out = bytearray()
    pos = XERIAL_SNAPPY_HEADER_SIZE
    while pos < len(payload):
        if pos + 4 > len(payload):
            raise ValueError(f"xerial snappy block length cut at byte {pos}")
        (length,) = _BLOCK_LENGTH.unpack_from(payload, pos)
        pos += 4
        if length < 0 or pos + length > len(payload):
            raise ValueError(f"xerial snappy block of {length} bytes at byte {pos - 4} overruns the payload")
        out += bytes(cramjam.snappy.decompress_raw(payload[pos : pos + length]))
        pos += length
    return bytes(out)


def decompress(
    codec: int, payload: bytes | bytearray | memoryview | np.ndarray, *, file: str = "", position: int = 0
) -> bytes:
    """Decompress ``payload`` written with CompressionType ``codec``; DecodeError if it cannot be.

    >>> decompress(0, b"abc")
    b'abc'
    """
    data = bytes(payload)
    try:
        if codec == Compression.NONE:
            return data
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except Exception as e:  # noqa: BLE001 - cramjam raises its own DecompressionError, and ValueError
        raise DecodeError(file, position, "records", DECOMPRESSION_FAILED, f"{Compression(codec).name}: {e}") from e
    raise DecodeError(file, position, "attributes.compression", DECOMPRESSION_FAILED, f"unknown codec {codec}")
