"""Decompress the records section of a compressed v2 batch (attributes bits 0-2), within a size cap.

Data batches never need this (hanging-transaction detection reads headers
only); it is for the two places where records matter and a writer might have
compressed them anyway: ``__transaction_state`` batches (the coordinator forces
``compression.type=uncompressed``, TransactionLog.EnforcedCompression, but a copied or re-produced
topic may not be) and control batches (never compressed by a broker:
MemoryRecordsBuilder.appendEndTxnMarker, docs/formats.md §6).

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

The payload is attacker-controlled, and so is how far it expands: a few KiB of
zstd or gzip can claim gigabytes (a "decompression bomb"), and a zstd frame
header or a raw snappy preamble can *declare* any output size. Kafka's own
readers stream records out of the compressed stream one at a time
(``DefaultRecordBatch.compressedIterator``), so they never hold the whole
output; we decode a batch's records in one pass over its whole output, so the
output is bounded instead: at most ``limit`` bytes, else :data:`DECOMPRESSED_TOO_LARGE`.
The bound holds for the memory, not only the answer:

* gzip, lz4, zstd go through cramjam's ``decompress_into`` into a buffer we
  allocate: the codec writes into it and fails when it is full, whatever the
  stream or its header claims. (cramjam's one-shot ``decompress`` grows its
  output to whatever the stream produces; its ``Decompressor`` classes buffer
  the whole input and produce the whole output in one call: neither is
  bounded.) The buffer starts near the likely size and grows 8x at a time up to
  ``limit + 1`` bytes, so a small batch does not cost a ``limit``-sized
  allocation; cramjam 2.x reports a full buffer as Rust's ``WriteZero`` error,
  "failed to write whole buffer", which is how an overflow is told from damage
  (tests/kafka/test_compression.py pins that message);
* snappy (raw, and each xerial block) declares its length in a preamble: it is
  checked against what is left of ``limit`` before anything is allocated.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import cramjam
import numpy as np

from txnlog.kafka.errors import DECOMPRESSED_TOO_LARGE, DECOMPRESSION_FAILED, DecodeError
from txnlog.kafka.wire import XERIAL_SNAPPY_HEADER_SIZE, XERIAL_SNAPPY_MAGIC, Compression

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_MAX_DECOMPRESSED_BYTES", "budget_detail", "decompress"]

#: Default of ``limit`` (config key ``max_decompressed_bytes``): 64 MiB, 64 times Kafka's default
#: ``max.message.bytes`` (1 MiB) and far above any control batch or coordinator batch a broker writes.
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 << 20

_BLOCK_LENGTH = struct.Struct(">i")
#: cramjam's message for "the output buffer is full" (Rust std::io::ErrorKind::WriteZero).
_BUFFER_FULL = "failed to write whole buffer"
#: The first output buffer: this many times the payload, at least _MIN_BUFFER bytes; then 8x per retry.
_FIRST_RATIO = 8
_MIN_BUFFER = 64 << 10
_GROWTH = 8


class _TooLarge(Exception):
    """The output passed the limit (internal: becomes a DecodeError with DECOMPRESSED_TOO_LARGE)."""


def _bounded_into(into: Callable[..., int], data: bytes, limit: int) -> bytes:
    """``into(data, buffer)`` with buffers growing to ``limit + 1`` bytes; _TooLarge past ``limit``."""
    size = min(limit + 1, max(_MIN_BUFFER, _FIRST_RATIO * len(data)))
    while True:
        # np.empty: only the pages the codec writes become resident.
        out = np.empty(size, np.uint8)
        try:
            n = int(into(data, out))
        except Exception as e:  # noqa: BLE001 - cramjam raises its own DecompressionError
            if _BUFFER_FULL not in str(e):
                raise
            if size > limit:
                raise _TooLarge from e
            size = min(limit + 1, size * _GROWTH)
            continue
        if n > limit:
            raise _TooLarge
        return out[:n].tobytes()


def _raw_snappy(block: bytes, left: int) -> bytes:
    # The preamble (a uvarint) declares the output size; snap allocates it before decoding.
    if int(cramjam.snappy.decompress_raw_len(block)) > left:
        raise _TooLarge
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy(payload: bytes, limit: int) -> bytes:
    if not payload.startswith(XERIAL_SNAPPY_MAGIC):
        return _raw_snappy(payload, limit)
    out = bytearray()
    pos = XERIAL_SNAPPY_HEADER_SIZE
    while pos < len(payload):
        if pos + 4 > len(payload):
            raise ValueError(f"xerial snappy block length cut at byte {pos}")
        (length,) = _BLOCK_LENGTH.unpack_from(payload, pos)
        pos += 4
        if length < 0 or pos + length > len(payload):
            raise ValueError(f"xerial snappy block of {length} bytes at byte {pos - 4} overruns the payload")
        out += _raw_snappy(payload[pos : pos + length], limit - len(out))
        pos += length
    return bytes(out)


def decompress(
    codec: int,
    payload: bytes | bytearray | memoryview | np.ndarray,
    *,
    file: str = "",
    position: int = 0,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress ``payload`` written with CompressionType ``codec``; DecodeError if it cannot be.

    The reason is ``decompressed_too_large`` when the output would pass ``limit`` bytes,
    ``decompression_failed`` for any other fault.

    >>> decompress(0, b"abc")
    b'abc'
    """
    data = bytes(payload)
    try:
        if codec == Compression.NONE:
            return data  # nothing expands
        if codec == Compression.GZIP:
            return _bounded_into(cramjam.gzip.decompress_into, data, limit)
        if codec == Compression.SNAPPY:
            return _snappy(data, limit)
        if codec == Compression.LZ4:
            return _bounded_into(cramjam.lz4.decompress_into, data, limit)
        if codec == Compression.ZSTD:
            return _bounded_into(cramjam.zstd.decompress_into, data, limit)
    except _TooLarge as e:
        raise DecodeError(
            file,
            position,
            "records",
            DECOMPRESSED_TOO_LARGE,
            f"{Compression(codec).name}: {len(data)} bytes expand past {limit} bytes",
        ) from e
    except Exception as e:  # noqa: BLE001 - cramjam raises its own DecompressionError, and ValueError
        raise DecodeError(file, position, "records", DECOMPRESSION_FAILED, f"{Compression(codec).name}: {e}") from e
    raise DecodeError(file, position, "attributes.compression", DECOMPRESSION_FAILED, f"unknown codec {codec}")


def budget_detail(e: DecodeError, max_decompressed_bytes: int) -> str:
    """The quarantine detail of a scan's decompression error; for an overflow, which limit it was."""
    if e.reason != DECOMPRESSED_TOO_LARGE:
        return e.detail
    return f"{e.detail}, what was left of max_decompressed_bytes ({max_decompressed_bytes}) for this file"
