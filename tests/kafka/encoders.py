"""Small test-side encoders for the formats txnlog.kafka decodes.

Written from the spec (shared/spec/kafka-formats.md), independently of the
decoders, so that round-trip tests compare two separate readings of the spec.
kafka-python's builder is used as a third, independent writer elsewhere.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import cramjam
import google_crc32c

# ---------------------------------------------------------------- primitives


def uvarint(v: int) -> bytes:
    v &= 0xFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def uvarlong(v: int) -> bytes:
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v: int) -> bytes:
    return uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def varlong(v: int) -> bytes:
    return uvarlong(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


# ---------------------------------------------------------------- records and batches


def record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    body = bytearray(b"\x00")
    body += varlong(timestamp_delta)
    body += varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        kb = hk.encode()
        body += varint(len(kb)) + kb
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def xerial_snappy(data: bytes, block: int = 32 * 1024) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, max(len(data), 1), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, only for the LZ4 frame header checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            for k in range(4):
                (lane,) = struct.unpack_from("<I", data, i + 4 * k)
                v[k] = (rotl((v[k] + lane * p2) & m, 13) * p1) & m
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = (rotl((h + lane * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


def java_style_lz4(data: bytes, block: int = 64 * 1024) -> bytes:
    """An LZ4 frame shaped like KafkaLZ4BlockOutputStream's: independent blocks, 64 KiB, no content size."""
    flg = 0x60  # version 01, block independence
    bd = 0x40  # 64 KiB max block
    out = bytearray(b"\x04\x22\x4d\x18" + bytes([flg, bd]))
    out.append((_xxh32(bytes([flg, bd])) >> 8) & 0xFF)
    for i in range(0, len(data), block):
        chunk = data[i : i + block]
        compressed = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(compressed) < len(chunk):
            out += struct.pack("<I", len(compressed)) + compressed
        else:
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
    out += b"\x00\x00\x00\x00"
    return bytes(out)


def compress(codec: int, data: bytes, *, variant: str = "") -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data)) if variant == "raw" else xerial_snappy(data)
    if codec == 3:
        return java_style_lz4(data) if variant == "java" else bytes(cramjam.lz4.compress(data))
    if codec == 4:
        c = cramjam.zstd.Compressor()
        c.compress(data)
        return bytes(c.finish())  # streamed: no content size in the frame header, as zstd-jni writes
    raise ValueError(codec)


@dataclass
class Batch:
    records: list[bytes] = field(default_factory=list)  # encoded records
    base_offset: int = 0
    last_offset_delta: int | None = None
    partition_leader_epoch: int = 0
    magic: int = 2
    attributes: int = 0
    base_timestamp: int = 1_700_000_000_000
    max_timestamp: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    record_count: int | None = None
    compression_variant: str = ""
    body: bytes | None = None  # already-encoded records section (overrides records)

    def encode(self) -> bytes:
        raw = b"".join(self.records)
        body = (
            self.body if self.body is not None else compress(self.attributes & 7, raw, variant=self.compression_variant)
        )
        count = len(self.records) if self.record_count is None else self.record_count
        lod = max(count - 1, 0) if self.last_offset_delta is None else self.last_offset_delta
        max_ts = self.base_timestamp if self.max_timestamp is None else self.max_timestamp
        after_crc = (
            struct.pack(
                ">hiqqqhii",
                self.attributes,
                lod,
                self.base_timestamp,
                max_ts,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                count,
            )
            + body
        )
        crc = google_crc32c.value(after_crc)
        length = 4 + 1 + 4 + len(after_crc)
        return struct.pack(">qiibI", self.base_offset, length, self.partition_leader_epoch, self.magic, crc) + after_crc


def control_key(control_type: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, control_type)


def end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    return struct.pack(">hi", version, coordinator_epoch)


def marker_batch(
    control_type: int,
    *,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int = 1_700_000_000_000,
    transactional: bool = True,
) -> bytes:
    """A transaction marker as the broker writes it (spec §2.3)."""
    rec = record(0, 0, control_key(control_type), end_txn_marker(coordinator_epoch))
    return Batch(
        [rec],
        base_offset=base_offset,
        attributes=0x20 | (0x10 if transactional else 0),
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    ).encode()


def legacy_entry(
    offset: int, value: bytes | None, key: bytes | None = None, magic: int = 1, timestamp: int = 0
) -> bytes:
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


# ---------------------------------------------------------------- __transaction_state


def txn_log_key(transactional_id: str, version: int = 0) -> bytes:
    raw = transactional_id.encode()
    return struct.pack(">hh", version, len(raw)) + raw


@dataclass
class TxnValue:
    producer_id: int = 1000
    producer_epoch: int = 0
    transaction_timeout_ms: int = 60_000
    state: int = 1
    partitions: list[tuple[str, list[int]]] | None = field(default_factory=lambda: [("orders", [0, 1])])
    last_update_timestamp_ms: int = 1_700_000_000_000
    start_timestamp_ms: int = 1_699_999_999_000
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0
    extra_tags: list[tuple[int, bytes]] = field(default_factory=list)  # unknown tags to write
    topic_tags: list[tuple[int, bytes]] = field(default_factory=list)  # per-topic tags to write
    write_default_tags: bool = False  # write known tags even when at their defaults

    def encode(self, version: int = 1) -> bytes:
        out = bytearray(
            struct.pack(
                ">hqhib", version, self.producer_id, self.producer_epoch, self.transaction_timeout_ms, self.state
            )
        )
        flexible = version >= 1
        if self.partitions is None:
            out += uvarint(0) if flexible else struct.pack(">i", -1)
        else:
            out += uvarint(len(self.partitions) + 1) if flexible else struct.pack(">i", len(self.partitions))
            for topic, ids in self.partitions:
                tb = topic.encode()
                out += uvarint(len(tb) + 1) + tb if flexible else struct.pack(">h", len(tb)) + tb
                out += uvarint(len(ids) + 1) if flexible else struct.pack(">i", len(ids))
                out += b"".join(struct.pack(">i", p) for p in ids)
                if flexible:
                    out += uvarint(len(self.topic_tags))
                    for tag, payload in self.topic_tags:
                        out += uvarint(tag) + uvarint(len(payload)) + payload
        out += struct.pack(">qq", self.last_update_timestamp_ms, self.start_timestamp_ms)
        if flexible:
            tags: list[tuple[int, bytes]] = []
            d = self.write_default_tags
            if d or self.previous_producer_id != -1:
                tags.append((0, struct.pack(">q", self.previous_producer_id)))
            if d or self.next_producer_id != -1:
                tags.append((1, struct.pack(">q", self.next_producer_id)))
            if d or self.client_transaction_version != 0:
                tags.append((2, struct.pack(">h", self.client_transaction_version)))
            if d or self.next_producer_epoch != -1:
                tags.append((3, struct.pack(">h", self.next_producer_epoch)))
            tags += self.extra_tags
            tags.sort(key=lambda t: t[0])
            out += uvarint(len(tags))
            for tag, payload in tags:
                out += uvarint(tag) + uvarint(len(payload)) + payload
        return bytes(out)


def txn_log_batch(
    entries: Iterable[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    codec: int = 0,
    timestamp: int = 1_700_000_000_000,
    variant: str = "",
) -> bytes:
    recs = [record(i, i, k, v) for i, (k, v) in enumerate(entries)]
    return Batch(
        recs,
        base_offset=base_offset,
        attributes=codec,
        base_timestamp=timestamp,
        max_timestamp=timestamp + max(len(recs) - 1, 0),
        compression_variant=variant,
    ).encode()


# ---------------------------------------------------------------- producer snapshot


def producer_snapshot(entries: Sequence[tuple[int, int, int, int, int, int, int, int]], version: int = 1) -> bytes:
    """entries: (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
    current_txn_first_offset)."""
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", version, google_crc32c.value(body)) + body
