"""Hypothesis strategies for segments, records and damage."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.kafka import encoders as E

#: Settings for the decoder property tests (kept local: a global profile would change other suites).
#: TXNLOG_HYPOTHESIS_EXAMPLES raises the example count for a long local run.
PROPERTIES = settings(
    max_examples=int(os.environ.get("TXNLOG_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
timestamps = st.integers(0, 2**50)
small_bytes = st.binary(max_size=40)


@st.composite
def data_records(draw: st.DrawFn) -> list[bytes]:
    n = draw(st.integers(1, 6))
    out = []
    offset = 0
    for _ in range(n):
        headers = draw(st.lists(st.tuples(st.text(max_size=5), st.none() | small_bytes), max_size=2))
        out.append(
            E.record(
                offset,
                draw(st.integers(-1000, 10**6)),
                draw(st.none() | small_bytes),
                draw(st.none() | small_bytes),
                headers,
            )
        )
        offset += draw(st.integers(1, 3))
    return out


@dataclass
class BatchSpec:
    batch: E.Batch
    kind: str  # data / marker / control-other / control-empty
    control_type: int = -1
    coordinator_epoch: int = -1
    timestamp_delta: int = 0

    def encode(self) -> bytes:
        return self.batch.encode()


@st.composite
def batch_specs(draw: st.DrawFn, base_offset: int = 0) -> BatchSpec:
    kind = draw(st.sampled_from(["data", "data", "data", "marker", "control-other", "control-empty"]))
    ts = draw(timestamps)
    common = {
        "base_offset": base_offset,
        "partition_leader_epoch": draw(int32),
        "base_timestamp": ts,
        "max_timestamp": ts + draw(st.integers(0, 10**6)),
        "producer_id": draw(st.integers(-1, 2**63 - 1)),
        "producer_epoch": draw(int16),
    }
    if kind == "data":
        recs = draw(data_records())
        codec = draw(st.integers(0, 4))
        attrs = (
            codec
            | draw(st.sampled_from([0, 0x08]))
            | draw(st.sampled_from([0, 0x10]))
            | draw(st.sampled_from([0, 0x40]))
        )
        b = E.Batch(
            recs,
            attributes=attrs,
            base_sequence=draw(int32),
            last_offset_delta=draw(st.integers(len(recs) - 1, len(recs) + 5)),
            compression_variant=draw(st.sampled_from(["", "raw", "java"])),
            **common,
        )  # type: ignore[arg-type]
        return BatchSpec(b, kind)
    attrs = 0x20 | draw(st.sampled_from([0, 0x10])) | draw(st.sampled_from([0, 0x08]))
    if kind == "control-empty":
        return BatchSpec(E.Batch([], attributes=attrs, record_count=0, last_offset_delta=0, **common), kind)  # type: ignore[arg-type]
    delta = draw(st.integers(0, 1000))
    if kind == "marker":
        ctype = draw(st.sampled_from([0, 1]))
        epoch = draw(int32)
        value = E.end_txn_marker(epoch, version=draw(st.sampled_from([0, 0, 1, 255])))
    else:
        ctype = draw(st.integers(2, 300))
        epoch = -1
        value = draw(small_bytes)
    rec = E.record(0, delta, E.control_key(ctype, version=draw(st.sampled_from([0, 0, 1]))), value)
    return BatchSpec(E.Batch([rec], attributes=attrs, base_sequence=-1, **common), kind, ctype, epoch, delta)  # type: ignore[arg-type]


@st.composite
def segments(draw: st.DrawFn, max_batches: int = 10) -> list[BatchSpec]:
    n = draw(st.integers(1, max_batches))
    offset = draw(st.integers(0, 2**40))
    specs = []
    for _ in range(n):
        spec = draw(batch_specs(offset))
        specs.append(spec)
        b = spec.batch
        count = len(b.records) if b.record_count is None else b.record_count
        lod = max(count - 1, 0) if b.last_offset_delta is None else b.last_offset_delta
        offset += lod + 1 + draw(st.integers(0, 5))
    return specs


@st.composite
def txn_values(draw: st.DrawFn) -> E.TxnValue:
    topics = st.text(min_size=0, max_size=12)
    return E.TxnValue(
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        transaction_timeout_ms=draw(int32),
        state=draw(st.integers(0, 7)),
        partitions=draw(st.none() | st.lists(st.tuples(topics, st.lists(int32, max_size=5)), max_size=4)),
        last_update_timestamp_ms=draw(int64),
        start_timestamp_ms=draw(int64),
        previous_producer_id=draw(st.sampled_from([-1]) | int64),
        next_producer_id=draw(st.sampled_from([-1]) | int64),
        next_producer_epoch=draw(st.sampled_from([-1]) | int16),
        client_transaction_version=draw(st.sampled_from([0]) | int16),
        extra_tags=draw(
            st.lists(st.tuples(st.integers(4, 2**20), st.binary(max_size=10)), max_size=3, unique_by=lambda t: t[0])
        ),
        topic_tags=draw(st.lists(st.tuples(st.integers(0, 100), st.binary(max_size=5)), max_size=2)),
        write_default_tags=draw(st.booleans()),
    )


# --------------------------------------------------------------------------- damage

Op = tuple  # ("flip", pos, mask) | ("overwrite", pos, bytes) | ("zeros", pos, n) | ("insert", pos, bytes) | ("delete", pos, n) | ("truncate", pos)


@st.composite
def mutations(draw: st.DrawFn, size: int) -> list[Op]:
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "flip", "overwrite", "zeros", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(size - 1, 0)))
        if kind == "flip":
            ops.append((kind, pos, draw(st.integers(1, 255))))
        elif kind == "overwrite":
            ops.append((kind, pos, draw(st.binary(min_size=1, max_size=80))))
        elif kind == "zeros":
            ops.append((kind, pos, draw(st.integers(1, 200))))
        elif kind == "insert":
            ops.append((kind, pos, draw(st.binary(min_size=1, max_size=80))))
        elif kind == "delete":
            ops.append((kind, pos, draw(st.integers(1, 80))))
        else:
            ops.append((kind, pos))
        size = max(size, 1)
    return ops


def apply_mutations(
    data: bytes, batches: list[tuple[int, int]], ops: list[Op]
) -> tuple[bytes, list[tuple[int, int] | None], tuple[int, int]]:
    """Apply ``ops``; returns (mutated bytes, each batch's new (start, end) or None if touched, damaged span).

    The damaged span covers every byte any op touched, in the final coordinates.
    """
    buf = bytearray(data)
    spans: list[tuple[int, int] | None] = list(batches)
    lo, hi = len(buf), 0

    def touch(a: int, b: int) -> None:
        nonlocal lo, hi
        lo, hi = min(lo, a), max(hi, b)
        for i, s in enumerate(spans):
            if s is not None and s[0] < b and a < s[1]:
                spans[i] = None

    for op in ops:
        kind, pos = op[0], min(op[1], len(buf))
        if kind in ("flip", "overwrite", "zeros"):
            if pos >= len(buf):
                continue
            if kind == "flip":
                buf[pos] ^= op[2]
                touch(pos, pos + 1)
            else:
                patch = op[2] if kind == "overwrite" else bytes(op[2])
                patch = patch[: len(buf) - pos]
                buf[pos : pos + len(patch)] = patch
                touch(pos, pos + len(patch))
        elif kind == "insert":
            n = len(op[2])
            buf[pos:pos] = op[2]
            for i, s in enumerate(spans):
                if s is not None:
                    if s[0] < pos < s[1]:
                        spans[i] = None
                    elif s[0] >= pos:
                        spans[i] = (s[0] + n, s[1] + n)
            if lo >= pos and lo < len(buf):
                lo += n
            if hi > pos:
                hi += n
            touch(pos, pos + n)
        elif kind == "delete":
            n = min(op[2], len(buf) - pos)
            if n <= 0:
                continue
            del buf[pos : pos + n]
            for i, s in enumerate(spans):
                if s is not None:
                    if s[0] < pos + n and pos < s[1]:
                        spans[i] = None
                    elif s[0] >= pos + n:
                        spans[i] = (s[0] - n, s[1] - n)

            def shift(x: int, pos: int = pos, n: int = n) -> int:  # called at once; bound anyway
                return x if x <= pos else (pos if x < pos + n else x - n)

            lo, hi = shift(lo), shift(hi)
            touch(pos, pos)  # the seam: bytes on both sides are what they were
        else:  # truncate
            del buf[pos:]
            touch(pos, 1 << 62)
    return bytes(buf), spans, (lo, hi)
