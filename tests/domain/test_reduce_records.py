"""``__transaction_state`` records reduced where they are decoded (txnlog.rules.coordinator), no Spark.

Whatever the records and however many replicas hold them, the reduced rows must answer every
question the job asks of the coordinator exactly as all records do: each transactional.id's newest
record and newest value record by (partition, offset) (``TransactionStateManager.loadTransactionMetadata``
replays in offset order), its record count, each producer id's newest record by (offset, partition),
the newest record timestamp, which partitions were read; and every record is staged once.
"""

from __future__ import annotations

import glob
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from txnlog.engine.staging import read_raw, records_writer, reduced_staged
from txnlog.model.rows import TXN_STATE_SCHEMA
from txnlog.rules.coordinator import distinct_records, reduce_records

RECORD = st.tuples(
    st.integers(0, 2),  # coordinator partition
    st.integers(0, 4),  # transactional.id
    st.integers(-1, 3),  # producer id (-1: a tombstone, which names none)
    st.integers(0, 10**6),  # record timestamp (not an order: failovers write older ones later)
)


def _records(spec: list[tuple[int, int, int, int]], replicas: int) -> pa.Table:
    rows: list[dict[str, Any]] = []
    offsets = [0, 0, 0]
    for part, tid, pid, ts in spec:
        offset = offsets[part]
        offsets[part] += 1
        for r in range(replicas):
            rows.append(
                {
                    "kind": "record",
                    "broker": f"b{r}",
                    "coordinator_partition": part,
                    "record_offset": offset,
                    "record_timestamp": ts,
                    "transactional_id": f"app-{tid}",
                    "is_tombstone": pid < 0,
                    "producer_id": None if pid < 0 else 1000 + pid,
                    "state": None if pid < 0 else 4,
                    "partitions": None if pid < 0 else [f"t-{offset}"],
                }
            )
    return pa.Table.from_pylist(rows, schema=TXN_STATE_SCHEMA)


def _answers(rows: list[dict[str, Any]], counts: dict[str, int] | None = None) -> dict[str, Any]:
    by = lambda r: (r["coordinator_partition"], r["record_offset"])  # noqa: E731
    ids = {r["transactional_id"] for r in rows}
    pids = {r["producer_id"] for r in rows if r["producer_id"] is not None}
    return {
        "last": {i: max((r for r in rows if r["transactional_id"] == i), key=by) for i in ids},
        "last_value": {
            i: max((r for r in rows if r["transactional_id"] == i and not r["is_tombstone"]), key=by, default=None)
            for i in ids
        },
        "owner": {
            p: max(
                (r for r in rows if r["producer_id"] == p),
                key=lambda r: (r["record_offset"], r["coordinator_partition"]),
            )["transactional_id"]
            for p in pids
        },
        "newest_ts": max(r["record_timestamp"] for r in rows),
        "partitions": {r["coordinator_partition"] for r in rows},
        "counts": counts if counts is not None else {i: sum(r["transactional_id"] == i for r in rows) for i in ids},
    }


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(RECORD, min_size=1, max_size=40), replicas=st.integers(1, 3))
def test_reduced_rows_answer_like_all_records(spec, replicas, tmp_path_factory):
    stage = str(tmp_path_factory.mktemp("stage"))
    table = _records(spec, replicas)
    with records_writer(stage, "key") as sink:
        reduced = reduced_staged(table, sink).to_pylist()
    once = [r for r in table.to_pylist() if r["broker"] == "b0"]
    counts: dict[str, int] = {}
    for r in reduced:
        counts[r["transactional_id"]] = counts.get(r["transactional_id"], 0) + (r["transitions"] or 0)
    got = _answers([{k: v for k, v in r.items() if k != "transitions"} for r in reduced], counts)
    want = _answers(once)
    strip = lambda d: {k: (v and {**v, "broker": None}) for k, v in d.items()}  # noqa: E731  (any replica's copy)
    for key in ("last", "last_value"):
        assert strip(got[key]) == strip(want[key]), key
    for key in ("owner", "newest_ts", "partitions", "counts"):
        assert got[key] == want[key], key
    (staged,) = glob.glob(f"{stage}/*.arrow")
    assert read_raw(staged).num_rows == len(spec)  # every record once, whatever the replicas


def _key(rows: list[dict[str, Any]]) -> list[str]:
    """Rows compared whatever their order, and whichever replica's copy of a record was kept."""
    return sorted(repr(sorted({**r, "broker": None}.items())) for r in rows)


@settings(max_examples=200, deadline=None)
@given(
    spec=st.lists(RECORD, min_size=1, max_size=40),
    replicas=st.integers(1, 3),
    split=st.sets(st.integers(0, 2)),
    cut=st.integers(0, 45),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_reduction_reapplies_to_partial_reductions_and_ignores_row_order(spec, replicas, split, cut, seed):
    """Reducing the union of two partial reductions gives the rows reducing all records at once gives, when
    the two share no record: disjoint coordinator partitions (as Spark's tasks or a second input leave them),
    or the offsets of a partition below and from ``cut`` (a segment's windows, the offsets read already
    dropped, as the reader reduces them); so does any order of rows."""
    import numpy as np
    import pyarrow.compute as pc

    table = _records(spec, replicas)
    whole = reduce_records(table)
    mine = pc.is_in(table.column("coordinator_partition"), pa.array(sorted(split), pa.int32()))
    below = pc.less(table.column("record_offset"), cut)
    for piece in (mine, below):
        parts = [reduce_records(table.filter(mask)) for mask in (piece, pc.invert(piece))]
        again = reduce_records(pa.concat_tables(parts))
        assert _key(again.to_pylist()) == _key(whole.to_pylist())
    shuffled = table.take(pa.array(np.random.default_rng(seed).permutation(table.num_rows)))
    assert _key(reduce_records(shuffled).to_pylist()) == _key(whole.to_pylist())


@settings(max_examples=200, deadline=None)
@given(
    spec=st.lists(RECORD, min_size=1, max_size=30),
    copies=st.lists(st.tuples(st.sampled_from(["b1", "b2", "b3"]), st.booleans()), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_copy_kept_is_decided_by_the_copies_not_their_order(spec, copies, seed):
    """Copies of a record that differ in what they show (Kafka 3.x's dump prints no start timestamp or value
    version, 4.x's does; the same replica dumped twice) give the same rows, every column, in any row order: the
    least replica name's copy, of its copies the one that shows more."""
    import numpy as np

    table = _records(spec, 1)
    rows = []
    for broker, shows in copies:
        copy = table.to_pylist()
        for r in copy:
            r["broker"] = broker
            r["value_version"] = 1 if shows and not r["is_tombstone"] else None
            r["txn_start_timestamp"] = r["record_timestamp"] if shows and not r["is_tombstone"] else None
        rows += copy
    every = pa.Table.from_pylist(rows, schema=TXN_STATE_SCHEMA)
    want_broker = min(b for b, _ in copies)
    shown = any(s for b, s in copies if b == want_broker)
    order = np.random.default_rng(seed).permutation(every.num_rows)
    for records in (every, every.take(pa.array(order)), every.take(pa.array(order[::-1]))):
        kept = distinct_records(records)
        assert kept.num_rows == table.num_rows
        assert set(kept.column("broker").to_pylist()) == {want_broker}
        tombstones = sum(r["is_tombstone"] for r in table.to_pylist())
        assert kept.column("value_version").null_count == (tombstones if shown else table.num_rows)
        assert kept.equals(distinct_records(every)) and reduce_records(records).equals(reduce_records(every))
