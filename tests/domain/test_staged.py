"""Staged transactions (txnlog.engine.staging, txnlog.rules.finish) without Spark: the staging files and the finish's lookups."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from txnlog.engine import staging as staged
from txnlog.engine.staging import read_raw, stage_name, write_raw
from txnlog.model import contract as tables
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, repeated
from txnlog.rules.finish import OWNERS_SCHEMA, RAW_COLUMNS, SOURCES_SCHEMA, Finish

AS_OF = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _raw(rows: list[dict]) -> pa.Table:
    schema = pa.schema([SEGMENT_SUMMARY_SCHEMA.field(name) for name in RAW_COLUMNS])
    return pa.Table.from_pylist([{"replicas": ["b1"], **r} for r in rows], schema=schema)


RAW = _raw(
    [
        {"topic": "t", "partition": 0, "producer_id": 7, "first_offset": 0, "marker_offset": 3, "control_type": 1},
        {"topic": "t", "partition": 1, "producer_id": 8, "first_offset": 5, "first_timestamp": 1_000},
        {"topic": "u", "partition": 0, "producer_id": 9, "first_offset": 2, "marker_offset": 4, "control_type": 0},
        {"topic": None, "partition": 0, "producer_id": 7, "first_offset": 9},
    ]
)


def test_staged_file_reads_back_as_written(tmp_path):
    name = stage_name(["b1/t-0", "b1/t-1"])
    write_raw(RAW, str(tmp_path), name)
    assert name.endswith(".arrow") and read_raw(str(tmp_path / name)).equals(RAW)
    assert read_raw(f"file://{tmp_path / name}").equals(RAW)


def test_a_staged_file_written_in_parts_reads_back_whole(tmp_path):
    with staged.RawWriter(str(tmp_path), "part.arrow") as writer:
        writer.write(RAW.slice(0, 1))
        writer.write(RAW.slice(1, 0))  # no rows: nothing
        writer.write(RAW.slice(1))
    assert read_raw(str(tmp_path / "part.arrow")).equals(RAW)
    with staged.RawWriter(str(tmp_path), "none.arrow") as writer:
        writer.write(RAW.slice(0, 0))
    assert not (tmp_path / "none.arrow").exists()


def test_a_scratch_directory_that_cannot_be_written_is_a_usage_error_not_an_unreadable_input(tmp_path):
    """A reader quarantines an input file it cannot read (an OSError); a staged write that fails must not look
    like one, so it is a UsageError naming the scratch directory."""
    import pytest

    from txnlog.model.errors import UsageError

    blocked = tmp_path / "stage"
    blocked.write_text("a file where the scratch directory should be")
    with pytest.raises(staged.StagingError) as caught:
        write_raw(RAW, str(blocked), "part.arrow")
    assert not isinstance(caught.value, OSError) and isinstance(caught.value, UsageError)
    assert str(blocked) in str(caught.value) and "--output" in str(caught.value)


def test_finish_looks_up_owners_and_sources_like_a_left_join():
    owners = pa.Table.from_pylist(
        [{"producer_id": 9, "transactional_id": "nine"}, {"producer_id": 7, "transactional_id": "seven"}],
        schema=OWNERS_SCHEMA,
    )
    sources = pa.Table.from_pylist(
        [
            {"topic": "t", "partition": 1, "source": "dump"},
            {"topic": "t", "partition": 0, "source": "segments"},
            {"topic": "v", "partition": 0, "source": "other"},
        ],
        schema=SOURCES_SCHEMA,
    )
    out = Finish(as_of_ms=2_000, owners=owners, sources=sources)(RAW, "c1", AS_OF)
    assert out.schema.equals(tables.TRANSACTIONS)
    assert out.column("transactional_id").to_pylist() == ["seven", None, "nine", "seven"]
    assert out.column("source").to_pylist() == ["segments", "dump", None, None]
    assert out.column("cluster").to_pylist() == ["c1"] * 4
    assert out.column("as_of").to_pylist() == [AS_OF] * 4
    assert out.column("outcome").to_pylist() == ["COMMIT", "OPEN", "ABORT", "OPEN"]
    assert out.column("duration_ms").to_pylist() == [None, 1_000, None, None]


def test_finish_of_no_rows_and_no_owners():
    empty = RAW.slice(0, 0)
    out = Finish(as_of_ms=0, owners=OWNERS_SCHEMA.empty_table(), sources=SOURCES_SCHEMA.empty_table())
    assert out(empty, "c1", AS_OF).num_rows == 0
    assert out(RAW, "c1", AS_OF).column("transactional_id").null_count == 4


def test_a_staged_file_is_finished_a_chunk_at_a_time_into_what_finishing_it_whole_gives(tmp_path, monkeypatch):
    """finish_files reads a staged file a few record batches at a time: its Parquet file holds the rows that
    finishing the whole file at once gives, in order (here batches of one row, chunks of two)."""
    monkeypatch.setattr(staged, "STAGED_BATCH_ROWS", 1)
    name = stage_name(["b1", "p"])
    write_raw(RAW, str(tmp_path / "stage"), name)
    assert [t.num_rows for t in staged.raw_chunks(str(tmp_path / "stage" / name))] == [2, 2]
    how = Finish(as_of_ms=2_000, owners=OWNERS_SCHEMA.empty_table(), sources=SOURCES_SCHEMA.empty_table())
    batches = iter([pa.RecordBatch.from_pydict({"path": [str(tmp_path / "stage" / name)]})])
    (done,) = list(staged.finish_files(batches, how, str(tmp_path / "out"), "c1", AS_OF))
    assert done.column("rows").to_pylist() == [4]
    written = pq.read_table(tmp_path / "out" / done.column("path")[0].as_py())
    assert written.equals(how(RAW, "c1", AS_OF))


def test_repeated_values_are_those_of_a_list():
    """rows.repeated lays a string out directly; it must equal the list of n values Arrow would build."""
    for value, type in [
        ("broker-1", pa.string()),
        ("", pa.string()),
        ("é/ü", pa.large_string()),
        (AS_OF, pa.timestamp("us", tz="UTC")),
        (7, pa.int32()),
        (None, pa.string()),
    ]:
        for n in (0, 1, 5):
            got = repeated(value, type, n)
            got.validate(full=True)
            assert got.equals(pa.array([value] * n, type)), (value, type, n)


def test_kept_columns_are_what_the_file_holds_and_a_rewrite_starts_them_anew(tmp_path):
    stage, name = str(tmp_path / "transactions"), stage_name(["b1/t-0"])
    columns = ["topic", "partition", "producer_id", "marker_offset"]
    with staged.kept_in_memory({stage: columns}):
        with staged.RawWriter(stage, name) as writer:
            writer.write(RAW.slice(0, 2))
            writer.write(RAW.slice(2))
        kept = staged.kept_tables(f"{stage}/{name}")
        assert kept is not None and pa.concat_tables(kept).equals(read_raw(f"{stage}/{name}").select(columns))
        write_raw(RAW.slice(3), stage, name)  # a retried task's attempt overwrites the file: its columns too
        kept = staged.kept_tables(f"file://{stage}/{name}")
        assert kept is not None and pa.concat_tables(kept).equals(RAW.slice(3).select(columns))
        write_raw(RAW, str(tmp_path / "elsewhere"), name)
        assert staged.kept_tables(str(tmp_path / "elsewhere" / name)) is None  # not a kept stage: read it
    assert staged.kept_tables(f"{stage}/{name}") is None  # dropped with the run
