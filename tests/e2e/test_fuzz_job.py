"""Mutated partitions through the whole job, in the shared Spark session.

The writer's ``sample`` cluster is run once clean. Each mutated run copies it and damages many
partitions at once with the fuzzer's mutators (``tests.kafka.fuzzing``): a few of the sample's own
data partitions and ``__transaction_state`` partitions in place, and many more added as copies of
sample partitions under new topic names, each with one file mutated (a segment, or a producer
snapshot). Then, with the clean run's ``as_of`` (a mutation may change the newest broker-written
time, and every age with it):

* the job succeeds;
* every damaged file has quarantine rows — "damaged" judged by a reader independent of txnlog:
  the spec's framing walk and kafka-python's CRC check for segments (a file they read to the end,
  or whose unread rest is all zero preallocation, is sound), Kafka's snapshot rules read from the
  spec for snapshots (a CRC-fixed count that shrinks the entries is sound to Kafka, and to txnlog);
* every partition the mutations left alone gets the clean run's findings (verdict, reason, owner,
  safety) and partition health — except findings whose owner lives in a mutated
  ``__transaction_state`` partition, or that have no owner while one is mutated (a damaged
  coordinator partition may hide or drop an owner: docs/design.md §4 "safety never rests on what could not
  be read").

A separate test runs a decompression bomb through the job's command line (its script's ``main`` in process,
tests/e2e/jobrun.py) with a config file that sets ``max_decompressed_bytes``.
"""

from __future__ import annotations

import random
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import google_crc32c
import pytest

from tests.e2e import truth as T
from tests.kafka import fuzzing as F

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CLUSTER = "fuzz"


@dataclass
class Damage:
    files: list[tuple[Path, str]] = field(default_factory=list)  # (mutated file, mutation kind)
    partitions: set[tuple[str, int]] = field(default_factory=set)  # data partitions touched
    coordinator_partitions: set[int] = field(default_factory=set)


def _run(spark: Any, logs: Path, out: Path, as_of: str | None) -> Any:
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    overrides = {
        "logs": [str(logs)],
        "output": str(out),
        "cluster": CLUSTER,
        "progress": False,
        # the fuzzer's limit: its bombs (8 or 64 MiB) all pass it
        "max_decompressed_bytes": F.LIMIT,
    }
    if as_of is not None:
        overrides["as_of"] = as_of
    return run(load_config(None, overrides), spark=spark, progress=lambda _m: None)


def _data_partition_dirs(logs: Path) -> list[Path]:
    return sorted(
        d
        for d in logs.glob("*/*-*")
        if d.is_dir() and not d.name.startswith("__") and any(f.stat().st_size for f in d.glob("*.log"))
    )


def _split(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition("-")
    return topic, int(p)


def _mutate_file(path: Path, rng: random.Random, donors: list[F.Seed], kinds: tuple[str, ...], i: int) -> str:
    data = path.read_bytes()
    kind = kinds[i % len(kinds)]
    if path.suffix == ".snapshot":
        seed = F.Seed("snapshot", path.name, data)
        m = F.mutate_snapshot(seed, kind, rng, donors)
    else:
        role = "txn_state" if path.parent.name.startswith("__transaction_state") else "segment"
        m = F.mutate_log(F.Seed(role, path.name, data, tuple(F.batch_spans(data))), kind, rng, donors)
    path.write_bytes(m.data)
    return m.kind


def _mutate_partition(pdir: Path, rng: random.Random, donors: list[F.Seed], i: int, damage: Damage) -> None:
    logs = [f for f in sorted(pdir.glob("*.log")) if f.stat().st_size]
    # the job reads no snapshot of a __transaction_state partition: a damaged one would be no test
    snapshots = [] if pdir.name.startswith("__") else sorted(pdir.glob("*.snapshot"))
    if snapshots and rng.random() < 0.2:
        target, kinds = rng.choice(snapshots), F.SNAPSHOT_KINDS
    else:
        target, kinds = rng.choice(logs), F.SEGMENT_KINDS
    damage.files.append((target, _mutate_file(target, rng, donors, kinds, i)))


def mutated_cluster(clean: Path, dest: Path, seed: int, copies: int, originals: int, coordinators: int) -> Damage:
    """A copy of ``clean`` with ``originals`` data partitions and ``coordinators`` __transaction_state
    partitions mutated in place, plus ``copies`` mutated copies of data partitions as new topics."""
    rng = random.Random(seed)
    shutil.copytree(clean, dest)
    donors = [
        F.Seed("segment", p.name, p.read_bytes(), tuple(F.batch_spans(p.read_bytes())))
        for p in sorted(clean.glob("*/*-*/*.log"))[:60]
        if p.stat().st_size
    ]
    damage = Damage()
    i = 0
    for pdir in rng.sample(_data_partition_dirs(dest), originals):
        _mutate_partition(pdir, rng, donors, i, damage)
        damage.partitions.add(_split(pdir.name))
        i += 1
    coordinator_dirs = sorted(
        d for d in dest.glob("*/__transaction_state-*") if any(f.stat().st_size for f in d.glob("*.log"))
    )
    for pdir in rng.sample(coordinator_dirs, coordinators):
        _mutate_partition(pdir, rng, donors, i, damage)
        damage.coordinator_partitions.add(_split(pdir.name)[1])
        i += 1
    sources = _data_partition_dirs(clean)
    broker = sorted(p for p in dest.iterdir() if p.is_dir())[0]
    for j in range(copies):
        src = rng.choice(sources)
        topic, partition = _split(src.name)
        copy = broker / f"fz{seed}x{j}.{topic}-{partition}"
        shutil.copytree(src, copy)
        _mutate_partition(copy, rng, donors, i, damage)
        i += 1
    return damage


def sound_by_independent_reader(path: Path) -> bool:
    """Is this file sound, read without txnlog? (spec §1.2 framing + kafka-python CRC; spec §4.1 snapshots)"""
    data = path.read_bytes()
    if path.suffix == ".snapshot":
        # What Kafka's reader accepts (ProducerStateManager.readSnapshot, spec §4.1): version 1, the CRC-32C
        # over [6, end), a count that neither is negative nor overruns the file; bytes after the entries pass.
        if len(data) < 10:
            return False
        version, crc, count = struct.unpack_from(">hIi", data, 0)
        return version == 1 and crc == google_crc32c.value(data[6:]) and 0 <= count <= (len(data) - 10) // 46
    from tests.brokerlog.kafka_python import iter_entries

    end = 0
    try:
        for pos, batch in iter_entries(data):
            if not batch.validate_crc():
                return _every_byte_in_a_valid_entry(data)
            end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    except Exception:  # noqa: BLE001 - kafka-python cannot even read the header (e.g. a v2 entry < 61 bytes)
        return _every_byte_in_a_valid_entry(data)
    # read to the end, or only zero preallocation is left
    return not any(data[end:]) or _every_byte_in_a_valid_entry(data)


def _every_byte_in_a_valid_entry(data: bytes) -> bool:
    """Brute force: is every byte inside some entry that kafka-python finds CRC-valid, or zero padding?

    The framing walk stops at the first break, but bytes missing at a batch's end can leave that batch
    CRC-valid (it borrows the next batch's first bytes, usually zeros) with the next one intact a few
    bytes earlier: nothing is unreadable then, and nothing needs quarantine.
    """
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.legacy_records import LegacyRecordBatch

    n = len(data)
    covered = bytearray(n)
    tail = len(data.rstrip(b"\x00"))
    covered[tail:] = b"\x01" * (n - tail)
    for p in range(max(n - 16, 0)):
        magic = data[p + 16]
        if magic > 2:
            continue
        size = struct.unpack_from(">i", data, p + 8)[0]
        if size < (49 if magic == 2 else 14) or p + 12 + size > n:
            continue
        chunk = data[p : p + 12 + size]
        try:
            valid = (DefaultRecordBatch(chunk) if magic == 2 else LegacyRecordBatch(chunk, magic)).validate_crc()
        except Exception:  # noqa: BLE001 - not an entry kafka-python can read
            continue
        if valid:
            covered[p : p + 12 + size] = b"\x01" * (12 + size)
    return all(covered)


def findings_by_partition(out: str) -> dict[tuple[str, int], dict[tuple, Any]]:
    recs = T.recommendations_by_key(out)
    grouped: dict[tuple[str, int], dict[tuple, Any]] = {}
    for key, f in T.actual_findings(out, recs).items():
        if key[0] is not None:
            grouped.setdefault((key[0], key[1]), {})[key] = f
    return grouped


def health_by_partition(out: str) -> dict[tuple[str, int], tuple]:
    return {
        (p["topic"], p["partition"]): (p["log_end_offset"], p["last_stable_offset"], p["open_transactions"])
        for p in T.rows(out, "partition_health")
    }


@dataclass
class Clean:
    logs: Path
    out: str
    as_of: str
    findings: dict[tuple[str, int], dict[tuple, Any]]
    health: dict[tuple[str, int], tuple]


@pytest.fixture(scope="module")
def clean(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Clean:
    from txnlog.brokerlog.scenarios import write_scenario

    work = tmp_path_factory.mktemp("fuzz-job")
    write_scenario("sample", work / "logs", seed=5)
    out = str(work / "clean")
    result = _run(spark, work / "logs", Path(out), None)
    as_of = str(int(result.as_of.timestamp() * 1000))
    findings = findings_by_partition(out)
    assert findings, "the sample has findings: the comparison is not vacuous"
    return Clean(work / "logs", out, as_of, findings, health_by_partition(out))


def check_mutated_run(spark: Any, clean: Clean, work: Path, seed: int, copies: int) -> tuple[int, int]:
    damage = mutated_cluster(clean.logs, work / "logs", seed, copies=copies, originals=6, coordinators=2)
    out = work / "out"
    _run(spark, work / "logs", out, clean.as_of)  # the job succeeds: run() returns

    rows = T.rows(str(out), "quarantine")
    quarantined = {Path(q["file"]).resolve() for q in rows if q["file"]}
    damaged = [(f, kind) for f, kind in damage.files if not sound_by_independent_reader(f)]
    missing = [f"{f} ({kind})" for f, kind in damaged if f.resolve() not in quarantined]
    assert not missing, f"damaged files without quarantine rows: {missing[:10]}"
    # a bomb is a sound batch to a reader that does not decompress, and a quarantine row to txnlog
    bombed = {Path(q["file"]).resolve() for q in rows if q["reason"] == "decompressed_too_large"}
    bombs = [f.resolve() for f, kind in damage.files if kind == "bomb"]
    assert bombs and set(bombs) <= bombed
    assert len(damaged) > len(damage.files) // 2  # most mutations damage: the check is not vacuous

    findings = findings_by_partition(str(out))
    health = health_by_partition(str(out))
    compared = 0

    def comparable(f: dict[str, Any]) -> bool:
        owner = f["coordinator_partition"]
        return owner not in damage.coordinator_partitions and not (owner is None and damage.coordinator_partitions)

    for tp in set(clean.findings) | set(clean.health):
        if tp in damage.partitions:
            continue
        want = {k: f for k, f in clean.findings.get(tp, {}).items() if comparable(f)}
        got = {k: f for k, f in findings.get(tp, {}).items() if comparable(f)}
        assert got == want, tp
        assert health.get(tp) == clean.health.get(tp), tp
        compared += 1
    assert compared > 10
    return len(damage.files), len(damaged)


def test_mutated_partitions_through_the_job(spark: Any, clean: Clean, tmp_path: Path) -> None:
    """Two runs of 66 mutated partitions each (6 + 2 of the sample's own, 58 added copies)."""
    total = 0
    for seed in (1, 2):
        files, _damaged = check_mutated_run(spark, clean, tmp_path / f"run{seed}", seed, copies=58)
        total += files
    assert total >= 130


@pytest.mark.slow
def test_many_mutated_partitions_through_the_job(spark: Any, clean: Clean, tmp_path: Path) -> None:
    """Five runs of 208 mutated partitions each."""
    for seed in range(10, 15):
        check_mutated_run(spark, clean, tmp_path / f"run{seed}", seed, copies=200)


def test_decompression_bomb_through_the_command_line(spark: Any, tmp_path: Path) -> None:
    """A gzip bomb in a marker and a zstd bomb in a __transaction_state batch, 16 MiB each, under a
    config file's max_decompressed_bytes of 1 MiB: the job exits 0 and quarantines both batches with
    the configured limit in the detail (the default, 64 MiB, would have decoded them)."""
    from tests.e2e.jobrun import run_in_process
    from tests.kafka import encoders as E
    from tests.kafka.bombs import bomb
    from txnlog.brokerlog.scenarios import write_scenario

    logs = tmp_path / "logs"
    write_scenario("healthy", logs, seed=3)
    segments = {}
    for pdir in sorted(p for p in logs.glob("*/*-*") if p.is_dir()):
        last = sorted(pdir.glob("*.log"))[-1:] if any(f.stat().st_size for f in pdir.glob("*.log")) else []
        role = "txn_state" if pdir.name.startswith("__transaction_state") else "data"
        if last and (role == "txn_state" or not pdir.name.startswith("__")) and role not in segments:
            segments[role] = last[0]
    targets = []
    for role, codec in (("data", 1), ("txn_state", 4)):
        path = segments[role]
        data = path.read_bytes()
        next_offset = max(
            struct.unpack_from(">q", data, p)[0] + struct.unpack_from(">i", data, p + 23)[0] + 1
            for p, _ in F.batch_spans(data)
        )
        if role == "data":
            first = E.record(0, 0, E.control_key(0), E.end_txn_marker(3))
            attrs, pid = 0x30 | codec, 424242
        else:
            first = E.record(0, 0, E.txn_log_key("bombed"), None)
            attrs, pid = codec, -1
        body = E.compress(codec, first) + bomb(codec, 16 << 20)
        batch = E.Batch(
            base_offset=next_offset, attributes=attrs, producer_id=pid, producer_epoch=0, record_count=1, body=body
        )
        path.write_bytes(data + batch.encode())
        targets.append((path, len(data)))
    config = tmp_path / "bombs.yaml"
    config.write_text("max_decompressed_bytes: 1048576\n")
    out = tmp_path / "out"
    proc = run_in_process(
        spark, "--config", str(config), "--logs", str(logs), "--output", str(out), "--cluster", "bombs", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [q for q in T.rows(str(out), "quarantine") if q["reason"] == "decompressed_too_large"]
    got = {(Path(q["file"]).resolve(), q["position"]) for q in rows}
    assert got == {(path.resolve(), position) for path, position in targets}
    assert all("max_decompressed_bytes (1048576)" in q["detail"] for q in rows)
