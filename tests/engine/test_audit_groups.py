"""How the audit deals staged transaction files into Spark's tasks (txnlog.engine.integrity.audit_groups): every
partition's files in one group, the groups balanced by rows."""

from __future__ import annotations

import pyarrow as pa

from txnlog.engine.integrity import HELD_SCHEMA, audit_groups, held_partitions
from txnlog.engine.staging import write_raw


def _held(rows: list[tuple[str, str | None, int | None, int]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(HELD_SCHEMA.names, r, strict=True)) for r in rows], schema=HELD_SCHEMA)


def _group_of(groups: list[list[str]]) -> dict[str, int]:
    return {path: g for g, members in enumerate(groups) for path in members}


def test_each_file_its_own_unit_when_no_partition_is_shared() -> None:
    held = _held([("a", "t", 0, 100), ("a", "t", 1, 100), ("b", "t", 2, 90), ("c", "u", 0, 10), ("d", "u", 1, 5)])
    groups = audit_groups(held, 2)
    assert sorted(p for g in groups for p in g) == ["a", "b", "c", "d"]
    # balanced by rows: the two heaviest files apart
    assert len(groups) == 2 and _group_of(groups)["a"] != _group_of(groups)["b"]


def test_files_sharing_a_partition_are_checked_together() -> None:
    # b and d share t-1, d and e share u-0: all three in one group, however many groups there may be
    held = _held(
        [("a", "t", 0, 50), ("b", "t", 1, 50), ("c", "t", 2, 50), ("d", "t", 1, 50), ("d", "u", 0, 50),
         ("e", "u", 0, 50), ("f", "u", 1, 50)]
    )  # fmt: skip
    groups = audit_groups(held, 6)
    where = _group_of(groups)
    assert where["b"] == where["d"] == where["e"]
    assert sorted(where) == ["a", "b", "c", "d", "e", "f"] and len(groups) == 4


def test_nothing_held_no_group() -> None:
    assert audit_groups(HELD_SCHEMA.empty_table(), 4) == []


def test_held_partitions_of_a_staged_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = pa.table({"topic": ["t", "t", "u", "t"], "partition": pa.array([0, 0, 3, 1], pa.int32())})
    write_raw(table, str(tmp_path), "part-x.arrow", columns=None)
    held = held_partitions(f"{tmp_path}/part-x.arrow")
    assert held.schema.equals(HELD_SCHEMA)
    assert sorted((r["topic"], r["partition"], r["rows"]) for r in held.to_pylist()) == [
        ("t", 0, 4), ("t", 1, 4), ("u", 3, 4)
    ]  # fmt: skip


def test_rows_without_a_partition_name_only_their_file() -> None:
    # as Spark's audit sends them: one row per file (no partition), and the rows of the partitions files share
    held = _held(
        [("a", None, None, 100), ("b", None, None, 90), ("c", None, None, 10), ("d", None, None, 5),
         ("c", "u", 0, 10), ("d", "u", 0, 5)]
    )  # fmt: skip
    groups = audit_groups(held, 3)
    where = _group_of(groups)
    assert sorted(where) == ["a", "b", "c", "d"] and len(groups) == 3
    assert where["c"] == where["d"] and len({where["a"], where["b"], where["c"]}) == 3
