"""How the Data Sources deal files into input partitions (txnlog.engine.plan.pack_files; the dump files'
txnlog.engine.spark.dump_log.dump_groups)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnlog.engine.plan import pack_files
from txnlog.engine.spark.dump_log import dump_groups
from txnlog.sources.logdirs import LogFile

MiB = 2**20


def _files(sizes: list[int]) -> list[LogFile]:
    return [LogFile(f"/logs/t-{i % 3}/{i:020d}.log", "b1", "t", i % 3, i, size, "log") for i, size in enumerate(sizes)]


@pytest.mark.parametrize(
    ("sizes", "max_bytes", "min_partitions", "groups"),
    [
        pytest.param([], 64 * MiB, 4, 0, id="no-files"),
        pytest.param([10 * MiB], 64 * MiB, 4, 1, id="one-file-one-group"),
        pytest.param([10 * MiB] * 3, 64 * MiB, 4, 3, id="fewer-files-than-slots"),
        pytest.param([10 * MiB] * 40, 1024 * MiB, 4, 4, id="small-input-one-group-per-slot"),
        # 16 x 256 MiB + 64 x 12 MiB = 4.75 GiB: 5 groups under 1 GiB are needed, rounded up to 8 (2 per slot)
        pytest.param([256 * MiB] * 16 + [12 * MiB] * 64, 1024 * MiB, 4, 8, id="rounded-up-to-a-multiple-of-slots"),
        pytest.param([0, 0, 0, 0, 0], 64 * MiB, 2, 2, id="empty-files-still-read"),
    ],
)
def test_group_count(sizes: list[int], max_bytes: int, min_partitions: int, groups: int) -> None:
    assert len(pack_files(_files(sizes), max_bytes=max_bytes, min_partitions=min_partitions)) == groups


def test_big_segments_spread_over_groups() -> None:
    # the shape of the end-to-end benchmark's data, scaled down: partitions of 256 MiB segments plus many small files
    sizes = [256 * MiB] * 3 + [51 * MiB] + [256 * MiB] * 3 + [51 * MiB] + [13 * MiB] * 64
    groups = pack_files(_files(sizes), max_bytes=1024 * MiB, min_partitions=4)
    loads = sorted(sum(f.size for f in g) for g in groups)
    assert len(groups) == 4
    assert loads[-1] - loads[0] <= 13 * MiB  # within one small file of each other


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300 * MiB), max_size=60),
    max_bytes=st.integers(min_value=1, max_value=2048 * MiB),
    min_partitions=st.integers(min_value=1, max_value=9),
)
def test_every_file_once_balanced_and_in_order(sizes: list[int], max_bytes: int, min_partitions: int) -> None:
    files = _files(sizes)
    groups = pack_files(files, max_bytes=max_bytes, min_partitions=min_partitions)
    flat = [f for g in groups for f in g]
    assert sorted(flat, key=files.index) == files  # every file exactly once
    assert all(g for g in groups)
    for g in groups:  # inside a group, the listing's order
        assert [files.index(f) for f in g] == sorted(files.index(f) for f in g)
    if files:
        loads = [sum(max(f.size, 1) for f in g) for g in groups]
        # longest-processing-time first: the heaviest group exceeds the lightest by at most one file
        assert max(loads) - min(loads) <= max(max(f.size, 1) for f in files)
        assert len(groups) <= len(files)
        assert len(groups) >= min(len(files), min_partitions)


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300 * MiB), max_size=60),
    partitions=st.lists(st.integers(min_value=0, max_value=4), min_size=60, max_size=60),
    max_bytes=st.integers(min_value=1, max_value=2048 * MiB),
    min_partitions=st.integers(min_value=1, max_value=9),
    whole=st.booleans(),
)
@settings(deadline=None)  # the first example imports pyarrow's compute kernels
def test_planning_on_the_manifest_columns_is_pack_files(
    sizes: list[int], partitions: list[int], max_bytes: int, min_partitions: int, whole: bool
) -> None:
    """The Data Sources plan on the manifest's Arrow columns (txnlog.engine.plan.plan_tasks); the
    groups are exactly pack_files' (pack_partitions' when whole partitions go to one task), each with
    only its own files and the checkpoints of its own partitions."""
    from txnlog.engine.manifest import files_option
    from txnlog.engine.plan import pack_partitions
    from txnlog.engine.spark.sources import plan_partitions

    files = [
        LogFile(f"/logs/b{i % 2}/t{p % 2}-{p}/{i:020d}.log", f"b{i % 2}", f"t{p % 2}", p, i, size, "log")
        for i, (size, p) in enumerate(zip(sizes, partitions, strict=False))
    ]
    checkpoints = [[f"b{b}", f"t{p % 2}", p, 10 * p, True, None] for b in (0, 1) for p in range(5)]
    options = {"max_partition_bytes": str(max_bytes), "min_partitions": str(min_partitions)}
    if whole:
        options["transactions"] = "true"
        options["checkpoints"] = json.dumps(checkpoints)
    planned = plan_partitions({**options, "files": files_option(files)})
    pack = pack_partitions if whole else pack_files
    want = pack(files, max_bytes=max_bytes, min_partitions=min_partitions)
    assert [p.files() for p in planned] == want
    for p, group in zip(planned, want, strict=True):
        held = {(f.topic, f.partition) for f in group}
        want_rows = [r for tp in sorted(held) for r in checkpoints if (r[1], r[2]) == tp]  # by (topic, partition)
        assert p.checkpoint_rows == (want_rows if whole else [])


def test_dump_files_dealt_by_bytes_per_core(tmp_path: Path) -> None:
    """kafka-dump-log.sh files go into tasks by the same rule: every file once, in listing order inside a task,
    four tasks per core where each holds 1 MiB, and a task per file at most."""
    sizes = [3 * MiB, MiB // 2, MiB // 2, 2 * MiB, MiB, MiB, 100, 0]
    paths = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"{i:02d}.txt"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    groups = dump_groups(paths, cores=1)
    assert sorted(p for g in groups for p in g) == paths
    assert all(g == sorted(g) for g in groups)
    assert len(groups) == 4  # 8 MiB: four tasks for the one core
    loads = sorted(sum(sizes[paths.index(p)] for p in g) for g in groups)
    assert loads == [3 * MiB // 2, 3 * MiB // 2 + 100, 2 * MiB, 3 * MiB]  # largest first to the lightest task
    assert dump_groups(paths[6:], cores=2) == [paths[6:]]  # under 1 MiB: one task
