"""A partition read whole by one task (or by the driver, txnlog.engine.spark.placement.read_here) whose files one
replica holds: each big segment finishes the transactions between its producers' markers itself and hands the
task's merge only its edges (txnlog.engine.segments.Edges). The reference is the same read with every fragment merged
at the end (the segments source's ``edge_segment_bytes`` above every segment): the rows must be the same (any
segments finishing their own, the others merged whole), on random multi-segment
logs (rolls anywhere, the writer's producer snapshots and arbitrary ones, DeleteRecords, retention, damage, a
cut tail, any checkpoints) and on every scenario of the broker-log writer (partitions of several replicas
included: they keep the merge of every fragment). No Spark session: the readers run in this process."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hot_segments import BASE_TS, DAMAGE_KINDS, _batch, write_hot_segment
from tests.oracle.judge import ScenarioRun
from txnlog.brokerlog import encode
from txnlog.brokerlog.partition import PartitionLog, segment_file_name
from txnlog.engine.staging import STAGED_SUFFIX, read_raw
from txnlog.kafka.wire import ControlType
from txnlog.model.rows import Checkpoint
from txnlog.rules.finish import RAW_COLUMNS
from txnlog.sources.logdirs import Inventory, LogFile, discover

#: what a transaction row says besides the table's columns: which file (and piece) finished it
_FINISHED_BY = ("broker", "file", "piece")


#: ``edge_segment_bytes`` that no segment reaches: every fragment merged at the end (the reference)
NEVER = 1 << 62


def _read(
    files: list[LogFile], checkpoints: list[Checkpoint], *, edge_bytes: int, stage: str | None, merge_bytes: int = NEVER
) -> pa.Table:
    """The segments source's rows of ``files`` read in this process, whole partitions merged (the driver's read);
    the segments of at least ``edge_bytes`` finish their own transactions; a merge past ``merge_bytes`` finishes at
    its partition's end."""
    from txnlog.engine.manifest import checkpoints_option, files_option
    from txnlog.engine.spark.placement import read_here
    from txnlog.engine.spark.sources import SegmentsSource
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA

    options = {
        "files": files_option(files),
        "checkpoints": checkpoints_option(checkpoints),
        "transactions": "true",
        "min_partitions": "1",
        "edge_segment_bytes": str(edge_bytes),
        "merge_bytes": str(merge_bytes),
        **({"stage": stage} if stage else {}),
    }
    return read_here(SegmentsSource, options, SEGMENT_SUMMARY_SCHEMA)


def _sorted(table: pa.Table) -> list[str]:
    return sorted(map(repr, table.to_pylist()))


def _split(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(transaction rows as the tables read them, every other row)."""
    is_txn = pc.equal(table.column("kind"), "transaction")
    return table.filter(is_txn).select(list(RAW_COLUMNS)), table.filter(pc.invert(is_txn))


def _staged(stage: Path) -> pa.Table | None:
    parts = [read_raw(str(p)) for p in sorted(stage.rglob(f"*{STAGED_SUFFIX}"))]
    return pa.concat_tables(parts).select(list(RAW_COLUMNS)) if parts else None


def assert_edges_read_the_same(
    files: list[LogFile],
    checkpoints: list[Checkpoint],
    work: Path,
    edge_bytes: int = 0,
    reference: pa.Table | None = None,
) -> tuple[pa.Table, pa.Table]:
    """The read whose segments of at least ``edge_bytes`` finish their own and the reference give the same rows,
    unstaged (every transaction yielded) and staged (the job's way); returns the unstaged ones (edges, reference).
    ``reference``: the reference's unstaged read of these files where the caller has it already (the same read)."""
    unstaged = got = _read(files, checkpoints, edge_bytes=edge_bytes, stage=None)
    want = _read(files, checkpoints, edge_bytes=NEVER, stage=None) if reference is None else reference
    got_txns, got_rest = _split(got)
    want_txns, want_rest = _split(want)
    assert _sorted(got_rest) == _sorted(want_rest)
    assert _sorted(got_txns) == _sorted(want_txns)

    # staged: every transaction in the stage, the same ones; the rows yielded are the reference's plus, from the
    # segments that finished their own, closed ones whose marker is below the high watermark (the verdicts' rule
    # drops them: txnlog.rules.partitions.with_lso), as a split partition's pieces yield them
    (work / "edges").mkdir()
    (work / "all").mkdir()
    got = _read(files, checkpoints, edge_bytes=edge_bytes, stage=str(work / "edges"))
    want = _read(files, checkpoints, edge_bytes=NEVER, stage=str(work / "all"))
    got_staged, want_staged = _staged(work / "edges"), _staged(work / "all")
    assert (got_staged is None) == (want_staged is None)
    if got_staged is not None and want_staged is not None:
        assert _sorted(got_staged) == _sorted(want_staged)
    got_txns, got_rest = _split(got)
    want_txns, want_rest = _split(want)
    assert _sorted(got_rest) == _sorted(want_rest)
    extra = list(got_txns.to_pylist())
    for row in want_txns.to_pylist():
        extra.remove(row)  # every row the reference yields is yielded
    hw = {(c.topic, c.partition): c.high_watermark for c in checkpoints}
    for row in extra:
        assert row["marker_offset"] is not None and not row["open_replicas"] and not row["open_on_lead"], row
        bound = hw.get((row["topic"], row["partition"]))
        assert bound is None or row["marker_offset"] < bound, (row, bound)
    return unstaged, want


# ------------------------------------------------------------------------------------------------------------
# random multi-segment logs of one replica
# ------------------------------------------------------------------------------------------------------------

_EVENT = st.tuples(
    st.integers(-1, 1),  # producer (-1: a non-transactional batch)
    st.sampled_from(["data", "data", "commit", "abort"]),
    st.integers(1, 3),  # records
    st.sampled_from([False] * 7 + [True]),  # roll a new segment before it
)
#: (producer, where its open transaction starts: None, none open, else at a batch's offset (which batch, then
#: -1, 0 or +1: markers' edges); its coordinator epoch)
_SNAPSHOT_ENTRY = st.tuples(
    st.integers(0, 1),
    st.one_of(st.none(), st.tuples(st.integers(0, 1000), st.integers(-1, 1))),
    st.integers(0, 3),
)


def _write_log(
    directory: Path,
    seed: int,
    events: list[tuple[int, str, int, bool]],
    extra_snapshot: tuple[int, list[tuple[int, tuple[int, int] | None, int]]],
    cut: tuple[str, float] | None,
    damage: list[int],
    tail: bool,
) -> PartitionLog:
    rng = random.Random(seed)
    log = PartitionLog(directory, "t", 0, segment_bytes=1 << 30, index_interval_bytes=512)
    infos = []
    seq = dict.fromkeys(range(4), 0)
    for i, (pid, kind, n, roll) in enumerate(events):
        if roll and log.active_segment.size:
            log.roll()
        ts = BASE_TS + i * 10
        if pid < 0:
            infos.append(log.append(_batch(rng, ts, n=n)))
        elif kind == "data":
            infos.append(log.append(_batch(rng, ts, pid=100 + pid, seq=seq[pid], n=n)))
            seq[pid] += n
        else:
            control = ControlType.COMMIT if kind == "commit" else ControlType.ABORT
            infos.append(
                log.append_end_txn_marker(
                    producer_id=100 + pid, producer_epoch=0, control_type=control, coordinator_epoch=n, timestamp=ts
                )
            )
    if cut is not None:  # DeleteRecords inside the log, or retention below a segment boundary
        how, where = cut
        offset = int(where * log.log_end_offset)
        (log.delete_records if how == "delete_records" else log.delete_segments_before)(offset)
    for k in sorted(set(damage)):
        if k < len(infos) and infos[k].segment_base_offset in {s.base_offset for s in log.segments}:
            log.corrupt_batch(infos[k], DAMAGE_KINDS[k % len(DAMAGE_KINDS)])
    if tail:
        log.append_truncated_tail(_batch(rng, BASE_TS + len(events) * 10, n=3), 20)
    percent, entries = extra_snapshot
    log.close(snapshot=percent < 50)
    if percent >= 50:  # the newest snapshot at that percent of the log: any state, a transaction open from anywhere
        at = percent * log.log_end_offset // 100
        starts = {
            pid: -1 if start is None else min(max(infos[start[0] % len(infos)].base_offset + start[1], 0), at)
            for pid, start, _ in entries
        }
        for path in log.dir.glob("*.snapshot"):
            if int(path.name.split(".")[0]) >= at:
                path.unlink()
        epochs = {pid: epoch for pid, _, epoch in entries}
        (log.dir / segment_file_name(at, ".snapshot")).write_bytes(
            encode.encode_producer_snapshot(
                [
                    encode.ProducerSnapshotEntry(
                        producer_id=100 + pid,
                        producer_epoch=0,
                        last_offset=at,
                        timestamp=BASE_TS,
                        coordinator_epoch=epochs[pid],
                        current_txn_first_offset=starts[pid],
                    )
                    for pid in sorted(starts)
                ]
            )
        )
    return log


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 1000),
    events=st.lists(_EVENT, min_size=20, max_size=120),
    extra_snapshot=st.tuples(st.integers(25, 100), st.lists(_SNAPSHOT_ENTRY, min_size=1, max_size=3)),
    cut=st.one_of(
        st.none(), st.tuples(st.sampled_from(["delete_records", "retention"]), st.floats(0, 1, exclude_max=True))
    ),
    damage=st.lists(st.integers(0, 119), max_size=3),
    tail=st.booleans(),
    checkpoint=st.tuples(st.booleans(), st.booleans(), st.one_of(st.none(), st.floats(0, 1.2))),
    edge_file=st.one_of(st.none(), st.integers(0, 1000)),
)
def test_segments_finish_their_own_and_the_merge_gets_the_edges(
    seed: int,
    events: list[tuple[int, str, int, bool]],
    extra_snapshot: tuple[int, list[tuple[int, tuple[int, int] | None, int]]],
    cut: tuple[str, float] | None,
    damage: list[int],
    tail: bool,
    checkpoint: tuple[bool, bool, float | None],
    edge_file: int | None,
) -> None:
    """``edge_file``: the segments at least as big as that one finish their own (None: every segment)."""
    with tempfile.TemporaryDirectory(prefix="whole-edges-") as tmp:
        root = Path(tmp)
        log = _write_log(root / "b0", seed, events, extra_snapshot, cut, damage, tail)
        inv = discover([str(root / "b0")])
        known_start, clean, hw = checkpoint
        checkpoints = [
            Checkpoint(
                inv.brokers[0] if inv.brokers else "b0",
                "t",
                0,
                high_watermark=None if hw is None else int(hw * log.log_end_offset),
                log_start_offset=log.log_start_offset if known_start else None,
                clean_shutdown=clean,
            )
        ]
        sizes = sorted(f.size for f in inv.segments)
        edge_bytes = 0 if edge_file is None or not sizes else sizes[edge_file % len(sizes)]
        assert_edges_read_the_same([*inv.segments, *inv.snapshots], checkpoints, root, edge_bytes)


# ------------------------------------------------------------------------------------------------------------
# the broker-log writer's scenarios
# ------------------------------------------------------------------------------------------------------------


def _scenario_names() -> list[str]:
    from txnlog.brokerlog import scenarios

    return [n for n in scenarios.SCENARIOS if n != "bulk"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``written(name)``: scenario ``name`` written once for this module (seed 0, read only) and the reference's
    unstaged read of its files: (files, checkpoints, reference rows), shared by the two tests below."""
    from txnlog.brokerlog import scenarios

    made: dict[str, tuple[list[LogFile], list[Checkpoint], pa.Table]] = {}

    def get(name: str) -> tuple[list[LogFile], list[Checkpoint], pa.Table]:
        if name not in made:
            logs = tmp_path_factory.mktemp(f"edges-{name}") / "logs"
            scenarios.write_scenario(name, logs, seed=0, internal_partitions=ScenarioRun.INTERNAL_PARTITIONS)
            inv: Inventory = discover([str(logs)])
            files, checkpoints = [*inv.segments, *inv.snapshots], list(inv.checkpoints)
            made[name] = files, checkpoints, _read(files, checkpoints, edge_bytes=NEVER, stage=None)
        return made[name]

    return get


@pytest.mark.parametrize("name", _scenario_names())
def test_the_writers_scenarios_read_the_same(tmp_path: Path, name: str, written) -> None:  # type: ignore[no-untyped-def]
    files, checkpoints, reference = written(name)
    got, _ = assert_edges_read_the_same(files, checkpoints, tmp_path, reference=reference)
    assert got.num_rows


@pytest.mark.parametrize("name", _scenario_names())
def test_a_merge_per_partition_reads_the_same(tmp_path: Path, name: str, written) -> None:  # type: ignore[no-untyped-def]
    """A task whose merge finishes at every partition's end (``merge_bytes`` 1) yields and stages the rows that one
    merge of all its partitions at the task's end gives, into one staged file as well."""
    files, checkpoints, once = written(name)
    each = _read(files, checkpoints, edge_bytes=NEVER, stage=None, merge_bytes=1)
    assert each.num_rows and _sorted(each) == _sorted(once)

    each = _read(files, checkpoints, edge_bytes=NEVER, stage=str(tmp_path / "each"), merge_bytes=1)
    once = _read(files, checkpoints, edge_bytes=NEVER, stage=str(tmp_path / "once"))
    assert _sorted(each) == _sorted(once)
    assert len(list((tmp_path / "each").rglob(f"*{STAGED_SUFFIX}"))) == 1
    assert _sorted(_staged(tmp_path / "each")) == _sorted(_staged(tmp_path / "once"))


# ------------------------------------------------------------------------------------------------------------
# the merge holds edges only
# ------------------------------------------------------------------------------------------------------------


def test_the_merge_of_a_hot_partition_gets_a_few_fragments_per_producer_and_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each segment hands on at most, per producer, the run before its first marker, that marker, its last
    marker and the run after it; the other segments' transactions never reach the merge."""
    from txnlog.engine import tasks

    segments, producers = 6, 4
    for k in range(segments):  # one replica's partition, six segments of many transactions each
        hot = write_hot_segment(tmp_path / "src" / str(k), k, batches=1000, producers=producers)
        base = k * 10_000
        target = tmp_path / "b0" / "hot-0"
        target.mkdir(parents=True, exist_ok=True)
        data = bytearray(hot.path.read_bytes())
        position = 0
        while position < len(data):  # rebase every batch: segment k holds offsets from k * 10_000
            first = int.from_bytes(data[position : position + 8], "big")
            data[position : position + 8] = (first + base).to_bytes(8, "big")
            position += 12 + int.from_bytes(data[position + 8 : position + 12], "big")
        (target / segment_file_name(base, ".log")).write_bytes(bytes(data))
    inv = discover([str(tmp_path / "b0")])
    assert len(inv.segments) == segments

    held: list[int] = []  # the fragments each merge of a whole partition holds when it emits
    original = tasks.staged_transactions

    def recording(acc: Any, *args: Any, **kwargs: Any) -> Any:
        held.append(sum(v.size for v in acc.frags.values["kind"]))
        return original(acc, *args, **kwargs)

    monkeypatch.setattr(tasks, "staged_transactions", recording)
    files = [*inv.segments, *inv.snapshots]
    got = _read(files, list(inv.checkpoints), edge_bytes=0, stage=None)
    want = _read(files, list(inv.checkpoints), edge_bytes=NEVER, stage=None)
    assert len(held) == 2
    assert held[0] <= 4 * producers * segments
    assert held[1] > 10 * held[0]
    got_txns, want_txns = _split(got)[0], _split(want)[0]
    assert want_txns.num_rows > 100 * segments
    assert _sorted(got_txns) == _sorted(want_txns)
