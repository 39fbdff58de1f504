"""Big segments read in pieces by several Spark tasks: the Data Source's output,
stitched, gives the same segment, quarantine, transaction and producer rows as the whole read, for any
split; a hot partition's big segment becomes several tasks; the job's Delta tables are the same; damage
near a split edge still makes later aborts VERIFY_FIRST."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import strategies as st

from tests.hot_segments import write_hot_segment
from tests.oracle.judge import draw_distinct
from txnlog.sources import splits as S
from txnlog.sources.logdirs import Inventory, discover

pytestmark = pytest.mark.spark

_SPLIT_ONLY = ("piece", "next_piece")


def _inventory(
    root: Path, seed: int, *, damage: int, tail: bool, interval: int, batches: int = 300, at: int | None = None,
    hot: str = "hot", cold: str = "cold",
) -> Inventory:  # fmt: skip
    """A log dir of a hot partition (topic ``hot``: one segment of ``batches`` appends, ``damage`` of them
    damaged, and the one at ``at``) and a cold one."""
    broker = root / "b1"
    segment = write_hot_segment(
        broker, seed, batches=batches, damage=damage, damage_at=None if at is None else [at], truncated_tail=tail,
        index_interval_bytes=interval, topic=hot,
    )  # fmt: skip
    write_hot_segment(broker, seed + 1, batches=40, topic=cold, damage=1)
    assert segment.path.with_suffix(".index").stat().st_size > 0
    return discover([str(broker)])


@dataclass(frozen=True)
class _Split:
    """An input read whole and in pieces of ``split_bytes``: its big segment's topic is ``hot``, its topics are
    ``topics`` (no other input's); ``staged``: the split partition's fragments go through files there (the job's
    way), else rows."""

    inv: Inventory
    split_bytes: int
    staged: str | None = None
    hot: str = "hot"
    topics: tuple[str, ...] = ("hot", "cold")
    label: str = ""  # what a failure names it by


def _source(spark, inv: list[Inventory], split_bytes: int, staged: str | None = None, cores: int | None = None) -> Any:
    """The segments source's DataFrame over the inputs ``inv`` as the job reads it: whole partitions per task,
    merged there, segments above ``split_bytes`` in pieces (0: none) where splitting pays on ``cores`` (None: the
    source's default)."""
    from txnlog.engine.manifest import checkpoints_option, files_option
    from txnlog.engine.spark.sources import SegmentsSource

    spark.dataSource.register(SegmentsSource)
    options = {
        "files": files_option([f for i in inv for f in (*i.segments, *i.snapshots)]),
        "checkpoints": checkpoints_option([c for i in inv for c in i.checkpoints]),
        "transactions": "true",
        "min_partitions": "4",
        "split_segment_bytes": str(split_bytes),
        **({"fragments_stage": staged} if staged else {}),
        **({"cores": str(cores)} if cores else {}),
    }
    return spark.read.format(SegmentsSource.name()).options(**options).load()


def _read(spark, inv: Inventory, split_bytes: int) -> tuple[Any, Any]:
    """(the source's DataFrame; the summary after the stitch)."""
    from txnlog.engine.spark.stitch import stitch_pieces

    df = _source(spark, [inv], split_bytes)
    return df, stitch_pieces(df)


def _tables(summary, inv: list[Inventory], fragments: bool, only: Any = None, staged=None, dead: Any = None) -> dict:
    """The rows the table build reads of ``summary`` as the job hands them over (txnlog.engine.spark.collect), as
    Arrow tables: the split partitions' fragments merged per partition in tasks, every transaction kept (no stage)."""
    from pyspark.sql import functions as F

    from txnlog.engine.spark import collect
    from txnlog.model.rows import KIND_MARKER, KIND_RUN
    from txnlog.rules.finish import RAW_COLUMNS
    from txnlog.rules.producers import producers_of_summary
    from txnlog.rules.transactions import KIND_TRANSACTION, checkpoints_of

    checkpoints = checkpoints_of([c for i in inv for c in i.checkpoints])
    if fragments:
        merged = collect.merged_fragments(
            summary, checkpoints, stage=None, fragment_partitions=only, staged=staged, dead=dead
        )
        summary = summary.filter(~F.col("kind").isin(KIND_RUN, KIND_MARKER)).unionByName(merged)
    rows, _ = collect.collected(summary, summary.limit(0))
    kind = rows.column("kind")
    return {
        "kinds": rows.select(["kind", "topic"]),
        "segment": rows.filter(pc.equal(kind, "segment")).drop_columns(list(_SPLIT_ONLY)),
        "quarantine": rows.filter(pc.equal(kind, "quarantine")).drop_columns(list(_SPLIT_ONLY)),
        "transactions": rows.filter(pc.equal(kind, KIND_TRANSACTION)).select(list(RAW_COLUMNS)),  # every column
        "producers": producers_of_summary(rows, checkpoints),
    }


def _by_topic(table: pa.Table) -> dict[str, list[str]]:
    """Per topic, its rows, each as the repr of its columns in name order (the reads' column orders differ)."""
    out: dict[str, list[str]] = {}
    for row in table.select(sorted(table.column_names)).to_pylist():
        out.setdefault(row["topic"], []).append(repr(row))
    return {topic: sorted(rows) for topic, rows in out.items()}


def _of(rows: dict[str, list[str]], topics: tuple[str, ...]) -> list[str]:
    return [row for topic in topics for row in rows.get(topic, [])]


def assert_splits_equal_whole(spark, splits: list[_Split]) -> list[int]:
    """For each input, the stitched split read's tables equal the whole read's; returns how many pieces each had.
    Every input is read whole in one read; in pieces, the inputs of one piece size and stage by one read (on many
    cores, so that each one's big segment is split as if it were read alone), those reads one union: one Spark job
    for each step of the stitch and the merge, whatever the number of inputs."""
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

    from txnlog.engine.spark.stitch import stitch_pieces

    inv = [s.inv for s in splits]
    (staged,) = {s.staged for s in splits if s.staged} or {None}  # one stage for all: per partition inside it
    groups: dict[tuple[int, str | None], list[Inventory]] = {}
    for s in splits:
        groups.setdefault((s.split_bytes, s.staged), []).append(s.inv)
    reads = [_source(spark, g, size, stage, 1000 if len(g) > 1 else None) for (size, stage), g in groups.items()]
    split_df = reduce(DataFrame.unionByName, reads).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        raw = split_df.select("kind", "topic", "partition", "piece").toArrow()
        split_read = stitch_pieces(split_df)
        want = _tables(_source(spark, inv, 0), inv, fragments=False)
        got = _tables(
            split_read.summary, inv, fragments=True, only=split_read.partitions, staged=staged, dead=split_read.dead
        )
    finally:
        split_df.unpersist()
    assert not pc.any(pc.equal(want.pop("kinds").column("kind"), "piece")).as_py()
    want, got = ({name: _by_topic(t) for name, t in tables.items() if name != "kinds"} for tables in (want, got))
    pieces = []
    for s in splits:
        mine = raw.filter(pc.is_in(raw.column("topic"), pa.array(s.topics)))
        kind, hot = mine.column("kind"), pc.equal(mine.column("topic"), s.hot)
        piece_rows = mine.filter(pc.equal(kind, "piece"))
        # only the big segment's partition was split
        split = set(zip(*piece_rows.select(["topic", "partition"]).to_pydict().values(), strict=True))
        assert split == {(s.hot, 0)}, s.label
        pieces.append(piece_rows.num_rows)
        if s.staged:  # the split partition's fragments went to files, not rows
            assert not pc.any(pc.and_(hot, pc.is_in(kind, pa.array(["run", "marker"])))).as_py()
            assert any(Path(s.staged, f"{s.hot}-0").rglob("*.arrow"))
        # a partition of one replica: every piece finishes the transactions between its producers' first and last
        # markers itself (txnlog.rules.transactions.piece_edges); of several, the pieces hand on every fragment
        finished = pc.sum(pc.and_(pc.equal(kind, "transaction"), pc.is_valid(mine.column("piece")))).as_py() or 0
        replicas = len({f.broker for f in s.inv.segments if f.topic == s.hot})
        assert (finished > 0) == (replicas == 1), s.label
        for name in ("segment", "quarantine", "transactions", "producers"):
            assert _of(got[name], s.topics) == _of(want[name], s.topics), (name, s.label)
        assert _of(want["transactions"], s.topics) and _of(want["segment"], s.topics)
    return pieces


def assert_split_equals_whole(spark, inv: Inventory, split_bytes: int, staged: str | None = None) -> int:
    """The stitched split read's tables equal the whole read's; returns how many pieces there were.
    ``staged``: the split partition's fragments go through staged files there (the job's way), not rows."""
    (pieces,) = assert_splits_equal_whole(spark, [_Split(inv, split_bytes, staged, label=f"{split_bytes} bytes")])
    return pieces


@dataclass(frozen=True)
class _Case:
    """An input of :func:`test_any_split_gives_the_whole_reads_rows`: its hot segment (``batches`` appends,
    ``damage`` random ones damaged, a cut tail) with index entries every ~``interval`` bytes, cut into ``pieces``
    (None: pieces of the size of the known case read the same way, :func:`_split_of`); ``edge``: the batch right before that split point of the plan damaged too;
    ``staged``: the fragments staged as files (the job's way for a log dir), else rows (kafka-dump-log.sh input's)."""

    seed: int
    damage: int
    tail: bool
    interval: int
    staged: bool
    pieces: int | None = None
    batches: int = 300
    edge: int | None = None


#: the edges found so far, read in every run: a damaged batch in a producer's transaction whose next batch is in
#: the next piece (the split read found no ``sequence_gap`` there before its pieces handed on their runs' sequences)
KNOWN_CASES = (
    _Case(seed=2, damage=4, tail=False, pieces=2, interval=128, staged=False),
    _Case(seed=964, damage=1, tail=False, pieces=3, interval=128, staged=True),
)

_CASES = st.builds(
    _Case,
    seed=st.integers(0, 10_000),
    damage=st.integers(0, 5),
    tail=st.booleans(),
    interval=st.sampled_from([128, 512, 2048]),
    staged=st.booleans(),
    batches=st.integers(180, 700),  # 2 to 7 pieces of the known cases' sizes
    edge=st.one_of(st.none(), st.integers(0, 7)),
)


def _split_of(root: Path, i: int, case: _Case, piece_bytes: int = 0) -> _Split:
    """The input of ``case`` under ``root``, its topics ``hot<i>`` and ``cold<i>``, cut into ``case.pieces`` or
    else pieces of ``piece_bytes``: with ``edge``, the batch right before that split point of an undamaged copy's
    plan damaged (the batches before it are the same bytes)."""
    hot, cold = f"hot{i}", f"cold{i}"
    at = None
    if case.edge is not None:
        probe = write_hot_segment(root / "probe", case.seed, batches=case.batches, index_interval_bytes=case.interval)
        size = probe.path.stat().st_size
        points = S.index_split_points(probe.path.with_suffix(".index").read_bytes(), 0, size)
        assert isinstance(points, S.SplitPoints)
        plan = S.plan_pieces(points, size, -(-size // case.pieces) if case.pieces else piece_bytes)
        if plan.positions.size:
            position = int(plan.positions[case.edge % plan.positions.size])
            at = next(k for k, info in enumerate(probe.infos) if info.position == position) - 1
    inv = _inventory(
        root, case.seed, damage=case.damage, tail=case.tail, interval=case.interval, batches=case.batches, at=at,
        hot=hot, cold=cold,
    )  # fmt: skip
    size = next(f for f in inv.segments if f.topic == hot).size
    staged = str(root.parent / "fragments") if case.staged else None
    split_bytes = -(-size // case.pieces) if case.pieces else piece_bytes
    # what a failure names: the case with its pieces, which read alone (a KNOWN_CASES entry) cut it the same way
    label = repr(replace(case, pieces=-(-size // split_bytes)))
    return _Split(inv, split_bytes, staged, hot, (hot, cold), label)


def test_any_split_gives_the_whole_reads_rows(spark, tmp_path: Path) -> None:
    """Fragments as rows (the way kafka-dump-log.sh input goes) or staged as files (the job's way for a split
    partition of a log dir): either way the split read's tables are the whole read's, every column of them, for
    inputs drawn by hypothesis (a new draw each run: a failure names its case, to add to :data:`KNOWN_CASES`) and
    the known edges, all read together (:func:`assert_splits_equal_whole`)."""
    import random

    splits = [_split_of(tmp_path / f"case{i}", i, case) for i, case in enumerate(KNOWN_CASES)]
    # the drawn inputs in pieces of the known case's size that is read the same way (rows or staged): one read each
    piece_bytes = {s.staged is not None: s.split_bytes for s in splits}
    drawn = draw_distinct(_CASES, 6, random.randrange(1 << 32))
    every = [*KNOWN_CASES, *drawn]
    for i, case in enumerate(drawn, start=len(splits)):
        splits.append(_split_of(tmp_path / f"case{i}", i, case, piece_bytes[case.staged]))
    pieces = assert_splits_equal_whole(spark, splits)
    assert all(p >= 2 for p in pieces), list(zip(every, pieces, strict=True))


def test_a_split_partition_of_two_replicas_hands_on_every_fragment(spark, tmp_path: Path) -> None:
    """A transaction's row merges every replica's view of it (open on one, behind on another): pieces of a
    partition that two log dirs hold finish nothing themselves, and the split still gives the whole read's rows."""
    import shutil

    inv = _inventory(tmp_path, 5, damage=1, tail=True, interval=512)
    shutil.copytree(tmp_path / "b1", tmp_path / "b2")
    inv = discover([str(tmp_path / "b1"), str(tmp_path / "b2")])
    hot = next(f for f in inv.segments if f.topic == "hot")
    assert assert_split_equals_whole(spark, inv, -(-hot.size // 4), str(tmp_path / "fragments")) >= 8


def test_a_hot_partitions_big_segment_becomes_several_tasks(spark, tmp_path: Path) -> None:
    from txnlog.engine.manifest import files_option
    from txnlog.engine.spark.sources import SegmentsSource

    inv = _inventory(tmp_path, 7, damage=0, tail=False, interval=512)
    hot = next(f for f in inv.segments if f.topic == "hot")
    options = {"files": files_option([*inv.segments, *inv.snapshots]), "transactions": "true", "min_partitions": "8"}

    def tasks(split_bytes: int) -> int:
        spark.dataSource.register(SegmentsSource)
        df = spark.read.format(SegmentsSource.name()).options(**options, split_segment_bytes=str(split_bytes)).load()
        return df.rdd.getNumPartitions()

    # whole partitions per task: the hot partition (segment + snapshot) and the cold one
    assert tasks(0) == 2
    # six pieces of the hot segment, each its own unit, besides its snapshot and the cold partition
    assert tasks(-(-hot.size // 6)) == 8
    # not above the threshold: nothing changes
    assert tasks(hot.size) == 2
    # whole or in pieces, every batch of the segments is counted once (segment rows, or a split file's piece rows)
    for split_bytes in (0, -(-hot.size // 6)):
        df = spark.read.format(SegmentsSource.name()).options(**options, split_segment_bytes=str(split_bytes)).load()
        counted = df.where("kind IN ('segment', 'piece')").selectExpr("sum(batch_count)").first()[0]
        assert counted == _batch_count(inv)


def _batch_count(inv: Inventory) -> int:
    from txnlog.kafka.record_batch import scan_segment_file

    return sum(scan_segment_file(f.path).batch_count for f in inv.segments)


def test_missing_or_corrupt_index_reads_the_file_whole(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    inv = _inventory(tmp_path, 11, damage=2, tail=False, interval=512)
    hot = next(f for f in inv.segments if f.topic == "hot")
    index = Path(hot.path).with_suffix(".index")
    good = index.read_bytes()
    split = -(-hot.size // 4)
    for bad in (None, b"", good[:-3], good[8:16] + good[:8] + good[16:]):
        if bad is None:
            index.unlink()
        else:
            index.write_bytes(bad)
        df, _ = _read(spark, inv, split)
        assert df.filter(F.col("kind") == "piece").count() == 0
        assert df.rdd.getNumPartitions() == 2
    index.write_bytes(good)
    assert assert_split_equals_whole(spark, inv, split) == 4


def _verdicts(out: Path) -> pa.Table:
    from tests.e2e.test_previous_pipeline import read_delta

    return read_delta(out, "abort_recommendations", {})


def test_job_tables_and_damage_at_a_split_edge(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.run with and without splits writes the same Delta tables; the hot partition's damage, put on
    the batches at and right before a split point, makes the aborts of the hanging transactions before it
    VERIFY_FIRST because of it."""
    from tests.e2e.test_previous_pipeline import TABLES, differences, read_delta
    from txnlog.engine.spark import collect as spark_splits  # where Spark's decode calls stitch_pieces
    from txnlog.model.config import load_config
    from txnlog.pipeline import run
    from txnlog.sources import splits as S

    stitched: list[bool] = []
    real = spark_splits.stitch_pieces

    def recording(summary, persist=None):
        out = real(summary, persist)
        stitched.append(out.partitions.count() > 0)
        return out

    monkeypatch.setattr(spark_splits, "stitch_pieces", recording)

    probe = write_hot_segment(tmp_path / "probe", 32, batches=300, index_interval_bytes=512)
    size = probe.path.stat().st_size
    points = S.index_split_points(probe.path.with_suffix(".index").read_bytes(), 0, size)
    assert isinstance(points, S.SplitPoints)
    plan = S.plan_pieces(points, size, -(-size // 6))
    # the damage goes to the first split point after the start of a transaction left open
    oldest_open = min(t.first_offset for t in probe.log.open_txns.values())
    starts = {info.position: i for i, info in enumerate(probe.infos)}
    at = next(starts[p] for p in plan.positions.tolist() if probe.infos[starts[p]].base_offset > oldest_open + 1)
    edge = probe.infos[at].position
    broker = tmp_path / "logs" / "b1"
    write_hot_segment(broker, 32, batches=300, index_interval_bytes=512, damage_at=[at - 1, at])

    def job(out: Path, split_bytes: int, driver_max_bytes: int = 0) -> None:
        config = load_config(
            None,
            {
                "logs": [str(broker)],
                "output": str(out),
                "as_of": "2030-01-01T00:00:00Z",
                "cluster": "splits",
                "driver_max_bytes": driver_max_bytes,
                "progress": False,
                "split_segment_bytes": split_bytes,
            },
        )
        run(config, spark=spark, progress=lambda _m: None)

    job(tmp_path / "whole", 0)
    assert stitched == []
    job(tmp_path / "split", -(-size // 6))
    assert stitched == [True]  # the job did read the segment in pieces
    # a small input decoded in the driver reads every segment whole: one process, nothing to spread
    job(tmp_path / "split_here", -(-size // 6), driver_max_bytes=64 << 20)
    assert stitched == [True]
    problems: list[str] = []
    for table in TABLES:
        want = read_delta(tmp_path / "whole", table, {})
        for other in ("split", "split_here"):
            problems += [f"{other}: {p}" for p in differences(table, want, read_delta(tmp_path / other, table, {}))]
    assert not problems, "\n".join(problems)
    quarantine = read_delta(tmp_path / "split", "quarantine", {}).to_pylist()
    assert any(q["position"] <= edge <= q["position"] + q["length"] for q in quarantine)
    damaged = probe.infos[at - 1].base_offset
    recs = [r for r in _verdicts(tmp_path / "split").to_pylist() if r["start_offset"] < damaged]
    assert recs and {r["safety"] for r in recs} == {"VERIFY_FIRST"}
    findings = read_delta(tmp_path / "split", "findings", {}).to_pylist()
    before = [f for f in findings if f["start_offset"] is not None and f["start_offset"] < damaged]
    assert before and all(
        "a quarantined region after its first batch may hold its marker" in f["evidence"] for f in before
    )
