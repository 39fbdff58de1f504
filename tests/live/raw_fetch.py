"""A raw Kafka protocol client: just enough to read a partition's record batches byte for byte.

Kafka clients decode what they fetch; this one does not. It sends ApiVersions v0, Metadata v1 and
Fetch v4 (non-flexible versions, so no tagged fields or compact strings) over a plain socket and
returns each partition's ``records`` field unchanged: the v2 record batches exactly as the producer's
encoder wrote them (CRC, compression framing, attributes), with baseOffset and partitionLeaderEpoch
set by the server, plus the control batches (COMMIT/ABORT markers) the server wrote. With
``isolation_level=READ_UNCOMMITTED`` nothing is filtered, so the concatenation of the fetched
batches from offset 0 to the high watermark is what a broker keeps in its ``.log`` segment files.

Wire grammar used here (Kafka protocol guide; request header v1, response header v0)::

    Request        => size:int32 api_key:int16 api_version:int16 correlation_id:int32
                      client_id:string <body>
    Response       => size:int32 correlation_id:int32 <body>
    string         => len:int16 utf8 (len -1 = null);  bytes => len:int32 raw (-1 = null)
    array          => count:int32 items (count -1 = null)

    ApiVersions v0 (key 18)  req: (empty)
                             resp: error:int16 [api_key:int16 min:int16 max:int16]
    Metadata v1 (key 3)      req: topics:[name:string] (null = all topics)
                             resp: brokers:[node_id:int32 host:string port:int32 rack:string?]
                                   controller_id:int32
                                   topics:[error:int16 name:string internal:int8
                                           partitions:[error:int16 partition:int32 leader:int32
                                                       replicas:[int32] isr:[int32]]]
    Fetch v4 (key 1)         req: replica_id:int32(-1) max_wait_ms:int32 min_bytes:int32
                                  max_bytes:int32 isolation_level:int8
                                  topics:[topic:string partitions:[partition:int32
                                          fetch_offset:int64 partition_max_bytes:int32]]
                             resp: throttle_ms:int32
                                   topics:[topic:string partitions:[partition:int32 error:int16
                                           high_watermark:int64 last_stable_offset:int64
                                           aborted:[producer_id:int64 first_offset:int64]?
                                           records:bytes?]]

A fetch response may end with a partial batch (the size limits cut it); :func:`fetch_partition`
keeps only whole entries (``12 + batchLength`` bytes each) and fetches again from the offset after
the last whole batch, until it reaches the high watermark.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "Connection",
    "FetchResult",
    "KafkaProtocolError",
    "PartitionFetch",
    "PartitionMetadata",
    "api_versions",
    "fetch_partition",
    "metadata",
    "split_entries",
]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

API_FETCH = 1
API_METADATA = 3
API_VERSIONS = 18

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RESPONSE_HEADER = struct.Struct(">ii")  # size, correlation_id
_ENTRY_HEADER = struct.Struct(">qi")  # baseOffset, batchLength (any magic)
_LAST_OFFSET_DELTA_AT = 23  # v2 batch: int32 lastOffsetDelta
_MAGIC_AT = 16


class KafkaProtocolError(RuntimeError):
    """The server answered with an error code, or the bytes did not parse."""


# --- encoding --------------------------------------------------------------------------------------


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _array(items: list[bytes] | None) -> bytes:
    if items is None:
        return _I32.pack(-1)
    return _I32.pack(len(items)) + b"".join(items)


# --- decoding --------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.buf):
            raise KafkaProtocolError(f"response ends at byte {len(self.buf)}; needed {st.size} more at {self.pos}")
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise KafkaProtocolError(f"field of {n} bytes at {self.pos} runs past the response ({len(self.buf)} bytes)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self._raw(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else self._raw(n)

    def array(self, item) -> list | None:
        n = self.i32()
        return None if n == -1 else [item(self) for _ in range(n)]


# --- connection ------------------------------------------------------------------------------------


class Connection:
    """One blocking TCP connection; requests are sent one at a time."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0, client_id: str = "txnlog-raw-fetch") -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.settimeout(timeout)
        self._correlation = 0

    @classmethod
    def to(cls, address: str, **kw) -> Connection:
        host, _, port = address.rpartition(":")
        return cls(host.strip("[]"), int(port), **kw)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise KafkaProtocolError(
                    f"{self.host}:{self.port} closed the connection ({len(chunks)}/{n} bytes read)"
                )
            chunks += chunk
        return bytes(chunks)

    def request(self, api_key: int, api_version: int, body: bytes) -> _Reader:
        """Send one request; return a reader over the response body (after the correlation id)."""
        self._correlation += 1
        header = _I16.pack(api_key) + _I16.pack(api_version) + _I32.pack(self._correlation) + _string(self.client_id)
        payload = header + body
        self._sock.sendall(_I32.pack(len(payload)) + payload)
        size, correlation = _RESPONSE_HEADER.unpack(self._recv_exact(_RESPONSE_HEADER.size))
        body_out = self._recv_exact(size - 4)
        if correlation != self._correlation:
            raise KafkaProtocolError(f"correlation id {correlation}, expected {self._correlation}")
        return _Reader(body_out)


# --- APIs ------------------------------------------------------------------------------------------


def api_versions(conn: Connection) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: {api_key: (min_version, max_version)}."""
    r = conn.request(API_VERSIONS, 0, b"")
    error = r.i16()
    if error:
        raise KafkaProtocolError(f"ApiVersions error {error}")
    return {k: (lo, hi) for k, lo, hi in r.array(lambda r: (r.i16(), r.i16(), r.i16()))}


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    error: int


@dataclass
class Metadata:
    brokers: dict[int, tuple[str, int]]  # node_id -> (host, port)
    partitions: dict[str, list[PartitionMetadata]]  # topic -> partitions sorted by index
    topic_errors: dict[str, int] = field(default_factory=dict)


def metadata(conn: Connection, topics: list[str] | None) -> Metadata:
    """Metadata v1 for ``topics`` (None: every topic)."""
    body = _array(None if topics is None else [_string(t) for t in topics])
    r = conn.request(API_METADATA, 1, body)
    brokers = {}
    for node_id, host, port, _rack in r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string())):
        brokers[node_id] = (host, port)
    r.i32()  # controller_id
    out = Metadata(brokers=brokers, partitions={})

    def partition(r: _Reader, topic: str) -> PartitionMetadata:
        error, index, leader = r.i16(), r.i32(), r.i32()
        r.array(_Reader.i32)  # replicas
        r.array(_Reader.i32)  # isr
        return PartitionMetadata(topic, index, leader, error)

    for _ in range(r.i32()):
        error, name, _internal = r.i16(), r.string(), r.i8()
        out.topic_errors[name] = error
        parts = r.array(lambda r, name=name: partition(r, name)) or []
        out.partitions[name] = sorted(parts, key=lambda p: p.partition)
    return out


@dataclass
class PartitionFetch:
    """One partition of one Fetch v4 response."""

    error: int
    high_watermark: int
    last_stable_offset: int
    aborted_transactions: list[tuple[int, int]] | None  # (producer_id, first_offset); read_committed only
    records: bytes


def fetch_once(
    conn: Connection,
    topic: str,
    partition: int,
    offset: int,
    *,
    isolation_level: int = READ_UNCOMMITTED,
    max_bytes: int = 8 << 20,
    partition_max_bytes: int = 8 << 20,
    max_wait_ms: int = 0,
) -> PartitionFetch:
    """One Fetch v4 request for one partition."""
    part = _I32.pack(partition) + _I64.pack(offset) + _I32.pack(partition_max_bytes)
    body = (
        _I32.pack(-1)  # replica_id: a consumer
        + _I32.pack(max_wait_ms)
        + _I32.pack(1 if max_wait_ms else 0)  # min_bytes
        + _I32.pack(max_bytes)
        + _I8.pack(isolation_level)
        + _array([_string(topic) + _array([part])])
    )
    r = conn.request(API_FETCH, 4, body)
    r.i32()  # throttle_time_ms
    found: PartitionFetch | None = None
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            index, error, hw, lso = r.i32(), r.i16(), r.i64(), r.i64()
            aborted = r.array(lambda r: (r.i64(), r.i64()))
            records = r.bytes_() or b""
            if name == topic and index == partition:
                found = PartitionFetch(error, hw, lso, aborted, records)
    if found is None:
        raise KafkaProtocolError(f"Fetch response has no {topic}-{partition}")
    return found


def split_entries(records: bytes) -> tuple[list[tuple[int, int, int]], int]:
    """Whole log entries at the start of ``records``: ([(position, size, next_offset)], bytes used).

    ``next_offset`` is the offset after the entry: baseOffset + lastOffsetDelta + 1 for magic 2,
    offset + 1 for a legacy entry (whose offset is its last inner offset). A trailing partial entry
    (cut by the fetch size limit) is left out.
    """
    out: list[tuple[int, int, int]] = []
    pos = 0
    while pos + _ENTRY_HEADER.size <= len(records):
        base_offset, length = _ENTRY_HEADER.unpack_from(records, pos)
        size = _ENTRY_HEADER.size + length
        if length <= 0 or pos + size > len(records) or pos + _MAGIC_AT >= len(records):
            break
        if records[pos + _MAGIC_AT] >= 2:
            if pos + _LAST_OFFSET_DELTA_AT + 4 > len(records):
                break
            (delta,) = _I32.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)
            next_offset = base_offset + delta + 1
        else:
            next_offset = base_offset + 1
        out.append((pos, size, next_offset))
        pos += size
    return out, pos


@dataclass
class FetchResult:
    """Everything :func:`fetch_partition` read: the records bytes and the last response's offsets."""

    topic: str
    partition: int
    records: bytes  # the whole entries, concatenated: a segment file's content
    high_watermark: int
    last_stable_offset: int
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    requests: int = 0


def fetch_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    *,
    start_offset: int = 0,
    isolation_level: int = READ_UNCOMMITTED,
    max_bytes: int = 1 << 20,
    timeout: float = 10.0,
) -> FetchResult:
    """Fetch ``topic``-``partition`` from ``start_offset`` up to its high watermark, bytes untouched.

    Finds the partition leader with Metadata, then fetches with Fetch v4 until the offset after the
    last whole batch reaches the high watermark (``READ_COMMITTED``: the last stable offset) of the
    first response; records appended meanwhile are not waited for. ``max_bytes`` bounds each response; a batch larger than
    that is still returned whole (the limit is raised for it).
    """
    with Connection.to(bootstrap, timeout=timeout) as boot:
        md = metadata(boot, [topic])
    error = md.topic_errors.get(topic)
    if error:
        raise KafkaProtocolError(f"Metadata error {error} for topic {topic!r}")
    parts = {p.partition: p for p in md.partitions.get(topic, [])}
    if partition not in parts:
        raise KafkaProtocolError(f"topic {topic!r} has no partition {partition} (has {sorted(parts)})")
    leader = parts[partition].leader
    if leader not in md.brokers:
        raise KafkaProtocolError(f"{topic}-{partition} has no live leader (leader={leader})")
    host, port = md.brokers[leader]

    out = bytearray()
    aborted: list[tuple[int, int]] = []
    offset = start_offset
    target: int | None = None
    requests = 0
    limit = max_bytes
    deadline = time.monotonic() + 6 * timeout
    with Connection(host, port, timeout=timeout) as conn:
        while True:
            resp = fetch_once(
                conn,
                topic,
                partition,
                offset,
                isolation_level=isolation_level,
                max_bytes=limit,
                partition_max_bytes=limit,
            )
            requests += 1
            if resp.error:
                raise KafkaProtocolError(f"Fetch error {resp.error} for {topic}-{partition} at offset {offset}")
            if target is None:  # read_committed stops at the last stable offset
                target = resp.high_watermark if isolation_level == READ_UNCOMMITTED else resp.last_stable_offset
            for pair in resp.aborted_transactions or []:
                if pair not in aborted:
                    aborted.append(pair)
            entries, _used = split_entries(resp.records)
            # A server may return the whole batch holding ``offset``; batches that end before it were read already.
            entries = [e for e in entries if e[2] > offset]
            for pos, size, _next in entries:
                out += resp.records[pos : pos + size]
            if entries:
                offset = entries[-1][2]
                limit = max_bytes
            if offset >= target:
                break
            if not entries:
                if resp.records:  # one batch bigger than the limit: ask for more
                    limit *= 2
                else:
                    raise KafkaProtocolError(
                        f"{topic}-{partition}: the server returned no records at offset {offset}, "
                        f"below the target offset {target} (high watermark {resp.high_watermark}, "
                        f"last stable offset {resp.last_stable_offset})"
                    )
            if time.monotonic() > deadline:
                raise KafkaProtocolError(
                    f"{topic}-{partition}: stuck at offset {offset} < high watermark {target} after {requests} fetches"
                )
    return FetchResult(topic, partition, bytes(out), resp.high_watermark, resp.last_stable_offset, aborted, requests)
