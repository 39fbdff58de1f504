"""Seeded mutation fuzzing of the decoders: corpus, mutators, oracle.

Shared by ``tests/kafka/test_fuzz.py`` (a few thousand inputs, in CI) and ``benchmarks/fuzz.py``
(>= 100,000). Everything is a function of one integer seed, so any failure is reproduced by its
``(seed, index)``.

**Corpus** (:func:`corpus`): what ``txnlog.brokerlog`` writes for the ``sample`` scenario — data
segments (transactional, idempotent, plain, legacy magic 0/1 entries, every codec), non-empty
``__transaction_state`` segments, producer snapshots — plus, from the same writer's encoders,
producer snapshots with many entries, and copies of ``__transaction_state`` segments and marker
batches re-framed with each codec (a broker writes neither compressed, spec §2.3/§3.1, but a copied
or re-produced topic may be: the decompression path must be fuzzed too).

**Mutations** (:data:`SEGMENT_KINDS`, :data:`SNAPSHOT_KINDS`): bit flips, truncations, zeroed,
overwritten, deleted and inserted ranges, spliced batches (the bytes of one batch inside another),
duplicated ranges, huge / negative / off-by-a-little lengths (batchLength is outside the CRC), and,
with the CRC recomputed so that only the decoders' own checks stand between the lie and the
output, record-count lies and header-field lies; decompression bombs (gzip, zstd, lz4, and snappy
blocks that declare a huge length) in place of a control or ``__transaction_state`` batch;
zero-length and non-Kafka files.

**Oracle** (:func:`check_segment`, :func:`check_txn_state`, :func:`check_snapshot`), every input:

1. nothing but :class:`DecodeError` escapes (the scans raise nothing at all; the snapshot decoder
   raises DecodeError, which the Spark layer turns into a quarantine row);
2. no allocation is driven by an untrusted length: the tracemalloc peak of the decode is at most
   ``MEMORY_PER_INPUT_BYTE`` x the input + ``MEMORY_PER_LIMIT`` x the decompression limit + 256 KiB
   (numpy and Python allocations), and the process's peak virtual size (``VmPeak``: also memory
   allocated in compiled code and never touched) does not grow by more than 64 MiB at any input;
3. every damaged byte is quarantined — unless the mutation left it inside a batch that is valid
   (its CRC-32C checks, recomputed here with google-crc32c, not the decoder's CRC), which may
   decode: an honest decoder cannot tell such a batch from a real one, and neither can a broker;
   bytes outside batches and quarantine are legacy entries or zero padding, and add up (the
   accounting of ``test_properties.assert_every_byte_accounted_for``);
4. every batch the mutation did not touch and that lies outside the damaged window decodes to the
   same header fields (and, for ``__transaction_state``, the same records) as in the clean decode;
5. a bomb is quarantined as ``decompressed_too_large``;
6. a sample is cross-checked against kafka-python's ``kafka.record`` decoder (CRC, header fields,
   control records, ``__transaction_state`` keys and values through the spec-written parsers of
   ``tests/brokerlog/kafka_python.py``).
"""

from __future__ import annotations

import json
import random
import struct
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import google_crc32c
import numpy as np

from tests.kafka import encoders as E
from tests.kafka.bombs import bomb
from tests.kafka.strategies import apply_mutations
from txnlog.brokerlog.encode import ProducerSnapshotEntry, encode_producer_snapshot
from txnlog.kafka.control import ControlStatus
from txnlog.kafka.errors import DECOMPRESSED_TOO_LARGE, DecodeError
from txnlog.kafka.producer_snapshot import decode_producer_snapshot
from txnlog.kafka.record_batch import SegmentScan, scan_segment
from txnlog.kafka.txn_state import scan_transaction_log

MiB = 1 << 20
#: The decompression limit the fuzzer runs with (the job's default is 64 MiB; bombs expand to 8-64 MiB).
LIMIT = 1 * MiB
MEMORY_PER_INPUT_BYTE = 16
MEMORY_PER_LIMIT = 4
MEMORY_SLACK = 256 << 10
VM_PEAK_STEP = 64 * MiB
#: Seeds are cut to their first batches up to this size: many small inputs find more than few large ones.
MAX_SEED_BYTES = 48 << 10

SEGMENT_REASONS = {"crc_mismatch", "bad_length", "bad_magic", "truncated_tail"}

# ------------------------------------------------------------------------------------ corpus


@dataclass(frozen=True)
class Seed:
    """A clean input: what the writer wrote (or re-framed), with its batch spans."""

    kind: str  # segment | txn_state | snapshot
    name: str
    data: bytes
    spans: tuple[tuple[int, int], ...] = ()


def batch_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every entry of a clean log (framing per spec §1.2)."""
    spans = []
    pos = 0
    while pos + 12 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + size
        if size < 14 or end > len(data):
            break
        spans.append((pos, end))
        pos = end
    return spans


def _cut(data: bytes, limit: int) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    spans = []
    for s, e in batch_spans(data):
        if e > limit and spans:
            break
        spans.append((s, e))
    end = spans[-1][1] if spans else 0
    return data[:end], tuple(spans)


def _reframe(batch: bytes, codec: int) -> bytes:
    """A v2 batch with its records section compressed with ``codec`` (header fields kept, CRC new)."""
    (attrs,) = struct.unpack_from(">h", batch, 21)
    fields = struct.unpack_from(">qiibIhiqqqhii", batch, 0)
    base_offset, _, leader_epoch, _, _, _, lod, base_ts, max_ts, pid, epoch, seq, count = fields
    return E.Batch(
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        attributes=(attrs & ~7) | codec,
        last_offset_delta=lod,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
        body=E.compress(codec, batch[61:]),
    ).encode()


def corpus(work: Path, seed: int = 1) -> list[Seed]:
    """The clean inputs: the ``sample`` scenario's files (written under ``work``) and re-framed copies."""
    from txnlog.brokerlog import write_scenario

    logs = work / "logs"
    if not logs.is_dir():
        write_scenario("sample", logs, seed=seed)
    seeds: list[Seed] = []
    for path in sorted(logs.glob("*/*/*.log")):
        raw = path.read_bytes()
        if not raw or path.parent.name.startswith(("__consumer_offsets", "__cluster_metadata")):
            continue
        kind = "txn_state" if path.parent.name.startswith("__transaction_state") else "segment"
        data, spans = _cut(raw, MAX_SEED_BYTES)
        seeds.append(Seed(kind, f"{path.parent.parent.name}/{path.parent.name}/{path.name}", data, spans))
    for path in sorted(logs.glob("*/*/*.snapshot")):
        seeds.append(Seed("snapshot", f"{path.parent.parent.name}/{path.parent.name}/{path.name}", path.read_bytes()))
    rng = random.Random(seed)
    for n in (1, 2, 7, 40, 200):
        entries = [
            ProducerSnapshotEntry(
                producer_id=rng.randrange(2**40),
                producer_epoch=rng.randrange(2**15),
                last_sequence=rng.randrange(-1, 2**31),
                last_offset=rng.randrange(-1, 2**40),
                offset_delta=rng.randrange(0, 100),
                timestamp=rng.randrange(2**41),
                coordinator_epoch=rng.randrange(-1, 100),
                current_txn_first_offset=rng.choice([-1, rng.randrange(2**40)]),
            )
            for _ in range(n)
        ]
        seeds.append(Seed("snapshot", f"encoded-{n}.snapshot", encode_producer_snapshot(entries)))
    # Compressed copies: every batch of a few __transaction_state segments, and the markers of a few
    # data segments, re-framed with each codec (snappy in both framings).
    txn = [s for s in seeds if s.kind == "txn_state"][:4]
    with_markers = [s for s in seeds if s.kind == "segment" and _control_spans(s)][:4]
    for i, codec in enumerate((1, 2, 3, 4)):
        for s in txn[i : i + 1] + txn[(i + 2) % max(len(txn), 1) :][:1]:
            data = b"".join(_reframe(s.data[a:b], codec) for a, b in s.spans if s.data[a + 16] == 2)
            seeds.append(Seed("txn_state", f"{s.name}+codec{codec}", data, tuple(batch_spans(data))))
        for s in with_markers[i : i + 1]:
            control = set(_control_spans(s))
            data = b"".join(_reframe(s.data[a:b], codec) if (a, b) in control else s.data[a:b] for a, b in s.spans)
            seeds.append(Seed("segment", f"{s.name}+codec{codec}-markers", data, tuple(batch_spans(data))))
    return seeds


def _control_spans(s: Seed) -> list[tuple[int, int]]:
    return [(a, b) for a, b in s.spans if s.data[a + 16] == 2 and s.data[a + 22] & 0x20]


# ------------------------------------------------------------------------------------ mutations

SEGMENT_KINDS = (
    "bit_flip",
    "truncate",
    "zero_fill",
    "overwrite",
    "delete",
    "insert",
    "splice",
    "duplicate",
    "length_lie",
    "count_lie",
    "field_lie",
    "bomb",
    "empty_file",
    "non_kafka",
)
SNAPSHOT_KINDS = (
    "bit_flip",
    "truncate",
    "zero_fill",
    "overwrite",
    "delete",
    "insert",
    "splice",
    "count_lie",
    "count_lie_crc_fixed",
    "version_lie",
    "entry_lie_crc_fixed",
    "trailing_bytes",
    "empty_file",
    "non_kafka",
)
#: Mutations after which a changed file may legitimately decode clean (the lie has a valid CRC).
CRC_FIXED = {"count_lie", "field_lie", "count_lie_crc_fixed", "entry_lie_crc_fixed"}
LENGTH_LIES = (-1, -(2**31), 2**31 - 1, 0, 13, 48, 49, 2**24)


@dataclass
class Mutant:
    seed: Seed
    kind: str
    data: bytes
    #: (old start, new start) of each batch no mutation touched
    intact: list[tuple[int, int]] = field(default_factory=list)
    window: tuple[int, int] = (0, 0)  # the damaged bytes, in the mutant's coordinates
    #: (position, length) of a bomb batch the scan must quarantine as decompressed_too_large
    bomb: tuple[int, int] | None = None
    detail: str = ""


def _fix_crc(buf: bytearray, start: int) -> None:
    (size,) = struct.unpack_from(">i", buf, start + 8)
    crc = google_crc32c.value(bytes(buf[start + 21 : start + 12 + size]))
    struct.pack_into(">I", buf, start + 17, crc)


def _random_bytes(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n)


def _non_kafka(rng: random.Random) -> bytes:
    choice = rng.randrange(6)
    n = rng.randrange(1, 20_000)
    if choice == 0:
        return _random_bytes(rng, n)
    if choice == 1:
        return ("".join(rng.choice('abcdefghij \n{}:,"0123456789') for _ in range(n))).encode()
    if choice == 2:
        return json.dumps({"topic": "orders", "offsets": list(range(rng.randrange(1, 500)))}).encode()
    if choice == 3:
        return b"\x89PNG\r\n\x1a\n" + _random_bytes(rng, n)
    if choice == 4:
        return b"\xff" * n
    return bytes(n) + _random_bytes(rng, rng.randrange(1, 64))  # zeros, then a little garbage


def _ops_mutant(seed: Seed, kind: str, ops: list[tuple], detail: str = "") -> Mutant:
    data, moved, (lo, hi) = apply_mutations(seed.data, list(seed.spans), ops)
    if hi <= lo:  # a seam (bytes deleted): the bytes on both sides
        lo, hi = max(lo - 1, 0), min(lo + 1, len(data))
    hi = min(hi, len(data))
    intact = [(old[0], new[0]) for old, new in zip(seed.spans, moved) if new is not None]
    return Mutant(seed, kind, data, intact, (lo, hi), detail=detail or repr(ops)[:200])


def mutate_log(seed: Seed, kind: str, rng: random.Random, donors: list[Seed]) -> Mutant:
    """One mutant of a segment or ``__transaction_state`` seed."""
    data = seed.data
    n = len(data)
    spans = list(seed.spans)
    if kind == "empty_file":
        return Mutant(seed, kind, b"", [], (0, 0))
    if kind == "non_kafka":
        junk = _non_kafka(rng)
        return Mutant(seed, kind, junk, [], (0, len(junk)))
    if kind == "bit_flip":
        ops = [("flip", rng.randrange(n), 1 << rng.randrange(8)) for _ in range(rng.choice((1, 1, 2, 3, 8)))]
        return _ops_mutant(seed, kind, ops)
    if kind == "truncate":
        return _ops_mutant(seed, kind, [("truncate", rng.randrange(n))])
    if kind == "zero_fill":
        return _ops_mutant(seed, kind, [("zeros", rng.randrange(n), rng.choice((1, 4, 12, 61, 200, 4096)))])
    if kind == "overwrite":
        return _ops_mutant(seed, kind, [("overwrite", rng.randrange(n), _random_bytes(rng, rng.randrange(1, 100)))])
    if kind == "delete":
        return _ops_mutant(seed, kind, [("delete", rng.randrange(n), rng.choice((1, 3, 8, 12, 61, 500)))])
    if kind == "insert":
        return _ops_mutant(seed, kind, [("insert", rng.randrange(n + 1), _random_bytes(rng, rng.randrange(1, 100)))])
    if kind == "splice":
        donor = rng.choice(donors)
        a, b = rng.choice(donor.spans)
        piece = donor.data[a:b]
        if rng.random() < 0.3:  # part of a batch
            cut = rng.randrange(len(piece))
            piece = piece[:cut] if rng.random() < 0.5 else piece[cut:]
        s, e = rng.choice(spans)
        pos = rng.randrange(s + 1, e) if e - s > 1 else s
        op = ("insert", pos, piece) if rng.random() < 0.7 else ("overwrite", pos, piece)
        return _ops_mutant(seed, kind, [op], detail=f"{op[0]} {len(piece)} bytes of {donor.name}@{a} at {pos}")
    if kind == "duplicate":
        a = rng.randrange(n)
        b = min(n, a + rng.randrange(1, 2000))
        return _ops_mutant(seed, kind, [("insert", rng.randrange(n + 1), data[a:b])])
    if kind == "length_lie":
        s, e = rng.choice(spans)
        lie = rng.choice(LENGTH_LIES + (e - s - 12 + rng.choice((-13, -1, 1, 2, 61)),))
        return _ops_mutant(seed, kind, [("overwrite", s + 8, struct.pack(">i", lie))], detail=f"batchLength {lie}")
    v2 = [(s, e) for s, e in spans if data[s + 16] == 2]
    if kind in ("count_lie", "field_lie"):
        if not v2:
            return mutate_log(seed, "bit_flip", rng, donors)
        s, e = rng.choice(v2)
        buf = bytearray(data[s:e])
        if kind == "count_lie":
            (count,) = struct.unpack_from(">i", buf, 57)
            lie = rng.choice((-1, -(2**31), 2**31 - 1, 0, count + 1, count - 1, count * 2 + 5, rng.randrange(2**31)))
            struct.pack_into(">i", buf, 57, lie)
            detail = f"recordsCount {count} -> {lie}"
        else:
            offset, fmt = rng.choice(
                ((21, ">h"), (23, ">i"), (27, ">q"), (35, ">q"), (43, ">q"), (51, ">h"), (53, ">i"))
            )
            bits = struct.calcsize(fmt) * 8
            value = rng.choice(
                (-1, 0, 1, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1)))
            )
            struct.pack_into(fmt, buf, offset, value)
            detail = f"field @{offset} -> {value}"
        _fix_crc(buf, 0)
        return _ops_mutant(seed, kind, [("overwrite", s, bytes(buf))], detail=detail)
    if kind == "bomb":
        targets = [(s, e) for s, e in v2 if seed.kind == "txn_state" or data[s + 22] & 0x20] or v2
        if not targets:
            return mutate_log(seed, "non_kafka", rng, donors)
        s, e = rng.choice(targets)
        codec = rng.choice((1, 2, 3, 4))
        expanded = rng.choice((8, 64)) * MiB
        original = data[s:e]
        (attrs,) = struct.unpack_from(">h", original, 21)
        first_record = original[61:] if not attrs & 7 else b""
        # Data batches are never decompressed: in a data segment the bomb is a control batch.
        control = 0x30 if seed.kind == "segment" else 0
        # prefix (the original records) and the cached bomb as two members/frames: readers take both
        body = bomb(codec, expanded) if codec == 2 else E.compress(codec, first_record[:4096]) + bomb(codec, expanded)
        bombed = E.Batch(
            base_offset=struct.unpack_from(">q", original, 0)[0],
            attributes=(attrs & ~7) | codec | control,
            base_timestamp=struct.unpack_from(">q", original, 27)[0],
            max_timestamp=struct.unpack_from(">q", original, 35)[0],
            producer_id=struct.unpack_from(">q", original, 43)[0],
            producer_epoch=struct.unpack_from(">h", original, 51)[0],
            record_count=max(struct.unpack_from(">i", original, 57)[0], 1),
            last_offset_delta=struct.unpack_from(">i", original, 23)[0],
            body=body,
        ).encode()
        m = _ops_mutant(
            seed, kind, [("delete", s, e - s), ("insert", s, bombed)], detail=f"codec {codec} {expanded >> 20} MiB"
        )
        m.window = (s, s + len(bombed))
        m.bomb = (s, len(bombed))
        return m
    raise ValueError(kind)


def mutate_snapshot(seed: Seed, kind: str, rng: random.Random, donors: list[Seed]) -> Mutant:
    data = seed.data
    n = len(data)
    if kind == "empty_file":
        return Mutant(seed, kind, b"", window=(0, 0))
    if kind == "non_kafka":
        junk = _non_kafka(rng)
        return Mutant(seed, kind, junk, window=(0, len(junk)))
    buf = bytearray(data)
    if kind == "count_lie" or kind == "count_lie_crc_fixed":
        (count,) = struct.unpack_from(">i", buf, 6)
        lie = rng.choice((-1, -(2**31), 2**31 - 1, count + 1, max(count - 1, 0), 0, rng.randrange(2**31)))
        struct.pack_into(">i", buf, 6, lie)
        if kind == "count_lie_crc_fixed":
            struct.pack_into(">I", buf, 2, google_crc32c.value(bytes(buf[6:])))
        return Mutant(seed, kind, bytes(buf), window=(6, 10), detail=f"count {count} -> {lie}")
    if kind == "version_lie":
        lie = rng.choice((0, 2, -1, 256, rng.randrange(-(2**15), 2**15)))
        struct.pack_into(">h", buf, 0, lie if lie != 1 else 2)
        return Mutant(seed, kind, bytes(buf), window=(0, 2))
    if kind == "entry_lie_crc_fixed":
        if n <= 10:
            return mutate_snapshot(seed, "trailing_bytes", rng, donors)
        pos = rng.randrange(10, n)
        buf[pos] ^= 1 << rng.randrange(8)
        struct.pack_into(">I", buf, 2, google_crc32c.value(bytes(buf[6:])))
        return Mutant(seed, kind, bytes(buf), window=(pos, pos + 1))
    if kind == "trailing_bytes":
        extra = _random_bytes(rng, rng.randrange(1, 100))
        return Mutant(seed, kind, data + extra, window=(n, n + len(extra)))
    if kind == "splice":
        donor = rng.choice(donors)
        a, b = rng.choice(donor.spans)
        pos = rng.randrange(n + 1)
        return Mutant(seed, kind, data[:pos] + donor.data[a:b] + data[pos:], window=(pos, pos + b - a))
    spans: list[tuple[int, int]] = []
    ops: list[tuple]
    if kind == "bit_flip":
        ops = [("flip", rng.randrange(n), 1 << rng.randrange(8)) for _ in range(rng.choice((1, 2, 3)))]
    elif kind == "truncate":
        ops = [("truncate", rng.randrange(n))]
    elif kind == "zero_fill":
        ops = [("zeros", rng.randrange(n), rng.choice((1, 4, 46, 200)))]
    elif kind == "overwrite":
        ops = [("overwrite", rng.randrange(n), _random_bytes(rng, rng.randrange(1, 60)))]
    elif kind == "delete":
        ops = [("delete", rng.randrange(n), rng.choice((1, 4, 46, 100)))]
    elif kind == "insert":
        ops = [("insert", rng.randrange(n + 1), _random_bytes(rng, rng.randrange(1, 60)))]
    else:
        raise ValueError(kind)
    out, _, (lo, hi) = apply_mutations(data, spans, ops)
    return Mutant(seed, kind, out, window=(lo, max(hi, lo)), detail=repr(ops)[:200])


# ------------------------------------------------------------------------------------ oracle


class Violation(AssertionError):
    """An invariant that did not hold, with what is needed to reproduce it."""


def _vm_peak() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _traced(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """(result, exception, peak bytes allocated during the call) — tracemalloc must be tracing."""
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        out, err = fn(*args, **kwargs), None
    except BaseException as e:  # noqa: BLE001 - the oracle judges every exception
        out, err = None, e
    return out, err, tracemalloc.get_traced_memory()[1] - base


def _memory_bound(size: int, decompresses: bool) -> int:
    return MEMORY_PER_INPUT_BYTE * size + (MEMORY_PER_LIMIT * LIMIT if decompresses else 0) + MEMORY_SLACK


def _covered(scan: SegmentScan, lo: int, hi: int) -> int:
    """How many bytes of [lo, hi) lie in neither an emitted batch, a segment-damage entry nor the zero tail."""
    if hi <= lo:
        return 0
    mask = np.zeros(hi - lo, bool)
    b = scan.batches
    for p, length in zip(b["position"].tolist(), b["batch_length"].tolist()):
        a, z = max(p, lo), min(p + 12 + length, hi)
        if a < z:
            mask[a - lo : z - lo] = True
    for q in scan.quarantine:
        a, z = max(q.position, lo), min(q.position + q.length, hi)
        if a < z:
            mask[a - lo : z - lo] = True
    tail = scan.size - scan.zero_padding_bytes
    if tail < hi:
        mask[max(tail, lo) - lo :] = True
    return int((~mask).sum())


def _segment_invariants(m: Mutant, scan: SegmentScan, clean: dict[int, tuple], quarantine: list) -> None:
    from tests.kafka.test_properties import assert_every_byte_accounted_for, header_rows

    assert_every_byte_accounted_for(scan)
    arr = m.data
    b = scan.batches
    for p, n, crc in zip(b["position"].tolist(), b["batch_length"].tolist(), b["crc"].tolist()):
        if google_crc32c.value(arr[p + 21 : p + 12 + n]) != crc:
            raise Violation(f"batch at {p} emitted with a CRC that does not check")
    lo, hi = m.window
    uncovered = _covered(scan, lo, hi)
    if uncovered > scan.legacy_bytes:
        raise Violation(f"{uncovered} damaged bytes in [{lo}, {hi}) neither quarantined nor in a valid batch")
    got = header_rows(scan)
    ends = dict(m.seed.spans)
    for old, new in m.intact:
        if new + ends[old] - old <= lo or new >= hi:
            if old in clean:  # a v2 batch (legacy entries have no row)
                if got.get(new) != clean[old]:
                    raise Violation(f"intact batch {old} -> {new} decoded as {got.get(new)}, was {clean[old]}")
    if m.bomb is not None:
        want = [q for q in quarantine if q.reason == DECOMPRESSED_TOO_LARGE and q.position == m.bomb[0]]
        if not want:
            raise Violation(f"bomb at {m.bomb[0]} not quarantined as decompressed_too_large: {quarantine}")


@dataclass
class Tally:
    """What a run saw, per input kind and mutation kind."""

    inputs: Counter = field(default_factory=Counter)  # (input kind, mutation kind) -> n
    quarantined: Counter = field(default_factory=Counter)  # inputs with >= 1 quarantine entry / error
    entries: Counter = field(default_factory=Counter)  # quarantine entries per reason
    decode_errors: Counter = field(default_factory=Counter)  # snapshot DecodeError reasons
    exceptions: list[str] = field(default_factory=list)  # anything else that escaped: must stay empty
    violations: list[str] = field(default_factory=list)
    max_memory_ratio: float = 0.0  # peak traced / bound
    crosschecked: int = 0

    def add(self, kind: str, m: Mutant, quarantine: list, error: DecodeError | None = None) -> None:
        self.inputs[(kind, m.kind)] += 1
        if quarantine or error is not None:
            self.quarantined[(kind, m.kind)] += 1
        for q in quarantine:
            self.entries[q.reason] += 1
        if error is not None:
            self.decode_errors[error.reason] += 1


class Oracle:
    """Decodes mutants and checks the invariants; keeps the clean decodes of the seeds."""

    def __init__(self, seeds: list[Seed], tally: Tally | None = None, crosscheck_every: int = 25) -> None:
        self.seeds = seeds
        self.tally = tally or Tally()
        self.crosscheck_every = crosscheck_every
        self._clean: dict[str, dict[int, tuple]] = {}
        self._clean_txn: dict[str, dict[int, list[tuple]]] = {}
        self._count = 0
        self._vm_peak = 0
        self._warm_up()

    def _warm_up(self) -> None:
        """Compile every decoder path before anything is measured (numba compiles on first use)."""
        for s in self.seeds:
            if s.kind == "segment":
                self.clean_rows(s)
                scan_segment(s.data, check_crc=False, max_decompressed_bytes=LIMIT)
            elif s.kind == "txn_state":
                self.clean_rows(s)
                self.clean_records(s)
        rng = random.Random(0)
        donors = [s for s in self.seeds if s.kind != "snapshot" and s.spans]
        for s in [s for s in self.seeds if s.kind == "snapshot"][:3]:
            for kind in SNAPSHOT_KINDS:
                try:
                    decode_producer_snapshot(mutate_snapshot(s, kind, rng, donors).data)
                except DecodeError:
                    pass
        for s in donors[:1] + [s for s in self.seeds if s.kind == "txn_state"][:1]:
            for kind in SEGMENT_KINDS:
                m = mutate_log(s, kind, rng, donors)
                scan_segment(m.data, max_decompressed_bytes=LIMIT)
                scan_segment(m.data, check_crc=False, max_decompressed_bytes=LIMIT)
                scan_transaction_log(m.data, max_decompressed_bytes=LIMIT)

    def clean_rows(self, seed: Seed) -> dict[int, tuple]:
        from tests.kafka.test_properties import header_rows

        if seed.name not in self._clean:
            scan = scan_segment(seed.data, file=seed.name, max_decompressed_bytes=LIMIT)
            if scan.quarantine:
                raise Violation(f"seed {seed.name} does not decode clean: {scan.quarantine[:3]}")
            self._clean[seed.name] = header_rows(scan)
        return self._clean[seed.name]

    def clean_records(self, seed: Seed) -> dict[int, list[tuple]]:
        if seed.name not in self._clean_txn:
            scan = scan_transaction_log(seed.data, file=seed.name, max_decompressed_bytes=LIMIT)
            if scan.quarantine:
                raise Violation(f"seed {seed.name} does not decode clean: {scan.quarantine[:3]}")
            self._clean_txn[seed.name] = _records_by_batch(scan)
        return self._clean_txn[seed.name]

    def _watch_vm(self, m: Mutant) -> None:
        peak = _vm_peak()
        if self._vm_peak and peak - self._vm_peak > VM_PEAK_STEP:
            raise Violation(f"VmPeak grew by {(peak - self._vm_peak) >> 20} MiB at one input")
        self._vm_peak = max(self._vm_peak, peak)

    def check(self, m: Mutant) -> None:
        """Decode ``m`` with its kind's decoder and check every invariant (raises Violation)."""
        self._count += 1
        if not self._vm_peak:
            self._vm_peak = _vm_peak()
        if m.seed.kind == "snapshot":
            self._check_snapshot(m)
        elif m.seed.kind == "txn_state":
            self._check_txn_state(m)
        else:
            self._check_segment(m)
        self._watch_vm(m)

    def _memory(self, m: Mutant, peak: int, decompresses: bool) -> None:
        bound = _memory_bound(len(m.data), decompresses)
        self.tally.max_memory_ratio = max(self.tally.max_memory_ratio, peak / bound)
        if peak > bound:
            raise Violation(f"decode allocated {peak} bytes for a {len(m.data)}-byte input (bound {bound})")

    def _check_segment(self, m: Mutant) -> None:
        clean = self.clean_rows(m.seed)
        scan, err, peak = _traced(scan_segment, m.data, file=m.seed.name, max_decompressed_bytes=LIMIT)
        if err is not None:
            self.tally.exceptions.append(f"{type(err).__name__}: {err}")
            raise Violation(f"scan_segment raised {type(err).__name__}: {err}") from err
        self._memory(m, peak, decompresses=True)
        self.tally.add("segment", m, scan.quarantine)
        _segment_invariants(m, scan, clean, scan.quarantine)
        # The same bytes without CRC checks: nothing raises, every byte accounted for.
        from tests.kafka.test_properties import assert_every_byte_accounted_for

        assert_every_byte_accounted_for(scan_segment(m.data, check_crc=False, max_decompressed_bytes=LIMIT))
        if self._count % self.crosscheck_every == 0:
            crosscheck_segment(m.data, scan)
            self.tally.crosschecked += 1

    def _check_txn_state(self, m: Mutant) -> None:
        clean = self.clean_rows(m.seed)
        clean_records = self.clean_records(m.seed)
        scan, err, peak = _traced(scan_transaction_log, m.data, file=m.seed.name, max_decompressed_bytes=LIMIT)
        if err is not None:
            self.tally.exceptions.append(f"{type(err).__name__}: {err}")
            raise Violation(f"scan_transaction_log raised {type(err).__name__}: {err}") from err
        self._memory(m, peak, decompresses=True)
        self.tally.add("txn_state", m, scan.quarantine)
        _segment_invariants(m, scan.segment, clean, scan.quarantine)
        if scan.transactional_id_offsets.size != scan.record_count + 1:
            raise Violation("transactional id offsets do not match the records")
        got = _records_by_batch(scan)
        spans = dict(m.seed.spans)
        lo, hi = m.window
        for old, new in m.intact:
            if (new + spans[old] - old <= lo or new >= hi) and old in clean:
                if got.get(new, []) != clean_records.get(old, []):
                    raise Violation(f"records of intact batch {old} -> {new} differ")
        for q in scan.quarantine:
            if not (0 <= q.position and q.position + q.length <= len(m.data)):
                raise Violation(f"quarantine entry outside the file: {q}")
        if self._count % self.crosscheck_every == 0:
            crosscheck_segment(m.data, scan.segment)
            crosscheck_txn_state(m.data, scan)
            self.tally.crosschecked += 1

    def _check_snapshot(self, m: Mutant) -> None:
        snap, err, peak = _traced(decode_producer_snapshot, m.data, file=m.seed.name)
        self._memory(m, peak, decompresses=False)
        if err is not None and not isinstance(err, DecodeError):
            self.tally.exceptions.append(f"{type(err).__name__}: {err}")
            raise Violation(f"decode_producer_snapshot raised {type(err).__name__}: {err}") from err
        changed = m.data != m.seed.data
        # The Spark layer quarantines a DecodeError and a CRC mismatch (txnlog.engine.segments.summarize_snapshot).
        quarantined = err is not None or (snap is not None and not snap.crc_valid)
        self.tally.add("snapshot", m, [], err if isinstance(err, DecodeError) else None)
        if snap is not None and not snap.crc_valid:
            self.tally.quarantined[("snapshot", m.kind)] += 1
            self.tally.entries["snapshot_crc_mismatch"] += 1
        if changed and not quarantined and m.kind not in CRC_FIXED:
            raise Violation("a damaged snapshot decoded with a valid CRC")
        if m.kind == "empty_file" and err is None:
            raise Violation("an empty snapshot decoded")
        if snap is not None and snap.crc_valid:
            from tests.brokerlog.kafka_python import parse_producer_snapshot

            try:
                theirs = parse_producer_snapshot(m.data)
            except (AssertionError, struct.error):
                theirs = None  # stricter than Kafka: no trailing bytes allowed
            ours = [dict(zip(_SNAPSHOT_NAMES, row)) for row in zip(*(c.tolist() for c in snap.entries.values()))]
            if theirs is not None and ours != theirs:
                raise Violation("snapshot entries differ from the spec-written parser's")
            clean = decode_producer_snapshot(m.seed.data)
            k = min(snap.entry_count, clean.entry_count)
            if not changed or m.kind == "count_lie_crc_fixed":
                for name in snap.entries:
                    if snap.entries[name][:k].tolist() != clean.entries[name][:k].tolist():
                        raise Violation(f"snapshot entries changed ({name}) though no entry byte was")


_SNAPSHOT_NAMES = (
    "producer_id",
    "epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)


def _records_by_batch(scan) -> dict[int, list[tuple]]:  # type: ignore[no-untyped-def]
    """Per batch position: (offset, transactional id, every value column) of its records."""
    ids = scan.transactional_ids().tolist()
    cols = {name: col.tolist() for name, col in scan.records.items()}
    out: dict[int, list[tuple]] = {}
    for i, tid in enumerate(ids):
        row = (tid,) + tuple(cols[name][i] for name in cols if name != "position")
        out.setdefault(cols["position"][i], []).append(row)
    return out


# ------------------------------------------------------------------------------------ kafka-python


def crosscheck_segment(data: bytes, scan: SegmentScan) -> None:
    """Every emitted batch, read by kafka-python: CRC, header fields, control record type/epoch."""
    from kafka.record.default_records import DefaultRecordBatch

    from tests.brokerlog import kafka_python  # noqa: F401 - installs cramjam into kafka-python's codec hooks

    b = scan.batches
    for i, p in enumerate(b["position"].tolist()):
        n = int(b["batch_length"][i])
        kb = DefaultRecordBatch(data[p : p + 12 + n])
        if not kb.validate_crc():
            raise Violation(f"kafka-python rejects the CRC of the batch at {p}")
        fields = (
            kb.base_offset,
            kb.last_offset,
            kb.producer_id,
            kb.producer_epoch,
            kb.base_sequence,
            kb.is_transactional,
            kb.is_control_batch,
            kb.max_timestamp,
            kb.timestamp_type,
        )
        ours = (
            int(b["base_offset"][i]),
            int(b["last_offset"][i]),
            int(b["producer_id"][i]),
            int(b["producer_epoch"][i]),
            int(b["base_sequence"][i]),
            bool(b["is_transactional"][i]),
            bool(b["is_control"][i]),
            int(b["max_timestamp"][i]),
            int(b["timestamp_type"][i]),
        )
        if fields != ours:
            raise Violation(f"batch at {p}: kafka-python reads {fields}, txnlog {ours}")
        if int(b["control_status"][i]) == ControlStatus.END_TXN_MARKER:
            first = next(iter(kb))
            epoch = struct.unpack_from(">i", first.value, 2)[0]
            if (first.type, epoch) != (int(b["control_type"][i]), int(b["coordinator_epoch"][i])):
                raise Violation(f"marker at {p}: kafka-python reads type {first.type} epoch {epoch}")


def crosscheck_txn_state(data: bytes, scan) -> None:  # type: ignore[no-untyped-def]
    """The records txnlog decoded, against kafka-python's record framing and the spec-written parsers."""
    from kafka.record.default_records import DefaultRecordBatch

    from tests.brokerlog.kafka_python import parse_txn_log_key, parse_txn_log_value

    by_batch = _records_by_batch(scan)
    names = [n for n in scan.records if n != "position"]
    b = scan.segment.batches
    for i, p in enumerate(b["position"].tolist()):
        ours = by_batch.get(p, [])
        if not ours:
            continue
        n = int(b["batch_length"][i])
        try:
            theirs = {r.offset: r for r in DefaultRecordBatch(data[p : p + 12 + n])}
        except Exception:  # noqa: BLE001 - kafka-python cannot read the batch's records; txnlog read some
            continue  # (a count lie: kafka-python stops at the lie, txnlog quarantines the rest)
        for row in ours:
            rec = dict(zip(("transactional_id", *names), row))
            r = theirs.get(rec["offset"])
            if r is None:
                raise Violation(f"record at offset {rec['offset']} not in kafka-python's reading of batch {p}")
            if parse_txn_log_key(r.key) != rec["transactional_id"]:
                raise Violation(f"offset {rec['offset']}: transactional id differs")
            if r.value is None:
                if not rec["is_tombstone"]:
                    raise Violation(f"offset {rec['offset']}: a tombstone decoded as a value")
                continue
            try:
                v = parse_txn_log_value(r.value)
            except (AssertionError, struct.error, UnicodeDecodeError, IndexError):
                continue  # the spec parser is stricter (no trailing bytes, ascending tags)
            want = (v["producer_id"], v["producer_epoch"], v["timeout_ms"], v["state"])
            got = (rec["producer_id"], rec["producer_epoch"], rec["transaction_timeout_ms"], rec["state"])
            if want != got:
                raise Violation(f"offset {rec['offset']}: value {got}, spec parser {want}")


# ------------------------------------------------------------------------------------ driver


def mutants(seeds: list[Seed], count: int, seed: int, input_kind: str, first: int = 0):  # type: ignore[no-untyped-def]
    """Mutants ``first .. first + count - 1`` of ``input_kind`` seeds, round-robin over the mutation kinds;
    index i is reproducible on its own: its rng is ``Random(f"{seed}/{input_kind}/{i}")``."""
    pool = [s for s in seeds if s.kind == input_kind and (s.kind == "snapshot" or s.spans)]
    donors = [s for s in seeds if s.kind != "snapshot" and s.spans]
    kinds = SNAPSHOT_KINDS if input_kind == "snapshot" else SEGMENT_KINDS
    for i in range(first, first + count):
        rng = random.Random(f"{seed}/{input_kind}/{i}")
        target = rng.choice(pool)
        kind = kinds[i % len(kinds)]
        if input_kind == "snapshot":
            yield i, mutate_snapshot(target, kind, rng, donors)
        else:
            yield i, mutate_log(target, kind, rng, donors)


def run(seeds: list[Seed], counts: dict[str, int], seed: int, oracle: Oracle | None = None, first: int = 0) -> Tally:
    """Fuzz ``counts[kind]`` inputs of each kind; violations are collected (with their reproducer)."""
    oracle = oracle or Oracle(seeds)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for input_kind, count in counts.items():
            for i, m in mutants(seeds, count, seed, input_kind, first):
                try:
                    oracle.check(m)
                except Violation as v:
                    oracle.tally.violations.append(
                        f"{input_kind}#{i} seed={seed} {m.kind} on {m.seed.name} ({m.detail}): {v}"
                    )
                except AssertionError as v:  # assert_every_byte_accounted_for
                    oracle.tally.violations.append(
                        f"{input_kind}#{i} seed={seed} {m.kind} on {m.seed.name} ({m.detail}): bytes {v}"
                    )
    finally:
        if started:
            tracemalloc.stop()
    return oracle.tally
