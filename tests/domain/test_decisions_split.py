"""The coordinator's decisions built a ``__transaction_state`` partition at a time and split by groups of data
partitions (txnlog.rules.integrity_producers.joined, decisions_by), as the driver's audit builds them
(txnlog.engine.integrity.audit_here), against the decisions of the whole history at once: the same decisions,
owners and evidence, whatever the codes."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import TransactionState as S
from txnlog.rules.integrity import Decisions, decisions, decisions_by, joined

_SCHEMA = pa.schema(
    [
        ("transactional_id", pa.string()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("state", pa.int32()),
        ("partitions", pa.list_(pa.string())),
        ("coordinator_partition", pa.int32()),
        ("record_offset", pa.int64()),
    ]
)


def _history(cp: int, records: list[tuple[str, int, S, list[str]]]) -> pa.Table:
    rows = [
        {
            "transactional_id": tid,
            "producer_id": pid,
            "producer_epoch": 5,
            "state": int(state),
            "partitions": listed,
            "coordinator_partition": cp,
            "record_offset": offset,
        }
        for offset, (tid, pid, state, listed) in enumerate(records)
    ]
    return pa.Table.from_pylist(rows, schema=_SCHEMA)


# three coordinator partitions; producer 1 is named by two transactional ids (the newest owns it), and the
# partition t-1 is also written t-01 (two names: only the first known pairs, as in the whole history)
HISTORIES = [
    _history(
        0,
        [
            ("a", 1, S.ONGOING, ["t-0", "t-1"]),
            ("a", 1, S.PREPARE_COMMIT, ["t-0", "t-1"]),
            ("a", 1, S.COMPLETE_COMMIT, []),
            ("a", 1, S.PREPARE_ABORT, ["t-1", "u-0"]),
            ("a", 1, S.COMPLETE_ABORT, []),
        ],
    ),
    _history(1, [("b", 2, S.PREPARE_COMMIT, ["t-01", "u-0"]), ("b", 2, S.COMPLETE_COMMIT, [])]),
    _history(
        2,
        [
            ("c", 1, S.PREPARE_ABORT, ["t-0"]),
            ("c", 1, S.COMPLETE_ABORT, []),
            ("d", 3, S.PREPARE_COMMIT, ["u-0", "v-0"]),  # never completed: no decision
        ],
    ),
]
GROUPS = pa.table({"topic": ["t", "t", "u"], "partition": pa.array([0, 1, 0], pa.int32()), "group": [0, 0, 1]})


def _said(d: Decisions) -> tuple[set[tuple], dict[int, str]]:
    """What ``d`` decides, free of its codes: (transactional id, partition name, rank, outcome, Prepare* record,
    its partitions) per decision, and each producer's owner."""
    width = max(d.partitions.num_rows, 1)
    names = d.partitions.column("name").to_pylist()
    keys, ranks = d.decided.column("key").to_pylist(), d.decided.column("rank").to_pylist()
    where = d.prepares.take(d.decided.column("prepare"))
    listed = d.listed(where).to_pylist()
    codes = dict(zip(d.owners.column("code").to_pylist(), d.owners.column("transactional_id").to_pylist(), strict=True))
    said = set()
    for i, (key, tid) in enumerate(zip(keys, where.column("transactional_id").to_pylist(), strict=True)):
        assert codes.get(key // width, tid) == tid, "the key's transactional id is its prepare's"
        record = (where.column("coordinator_partition")[i].as_py(), where.column("record_offset")[i].as_py())
        decided = d.decided.column("decided")[i].as_py()
        said.add((tid, names[key % width], ranks[i], decided, record, listed[i]))
    owners = dict(zip(d.owners.column("producer_id").to_pylist(), d.owners.column("transactional_id").to_pylist()))
    return said, owners


def test_the_decisions_of_each_coordinator_partition_joined_are_those_of_the_whole_history() -> None:
    whole = decisions(pa.concat_tables(HISTORIES))
    parts = joined([decisions(h) for h in HISTORIES])
    assert _said(parts) == _said(whole)
    assert _said(whole)[1] == {1: "c", 2: "b", 3: "d"}
    assert parts.decided.sort_by([("key", "ascending"), ("rank", "ascending")]).equals(parts.decided)


def test_each_group_holds_the_decisions_that_name_its_partitions() -> None:
    whole = _said(decisions(pa.concat_tables(HISTORIES)))
    for lists in (True, False):
        split = [decisions_by(decisions(h), GROUPS, 2, lists=lists) for h in HISTORIES]
        for g in range(2):
            pieces = [s[g] for s in split]
            if not lists:  # each Prepare* record's partitions read back by its history and row, as the engine does
                pieces = [dataclasses.replace(p, prepares=_tagged(p.prepares, u)) for u, p in enumerate(pieces)]
            group = joined(pieces)
            group = group if lists else dataclasses.replace(group, lists=_lists)
            topics = set(GROUPS.filter(pc.equal(GROUPS.column("group"), g)).column("topic").to_pylist())
            said, owners = _said(group)
            assert said == {w for w in whole[0] if w[1].rsplit("-", 1)[0] in topics}
            assert owners == whole[1]


def _tagged(prepares: pa.Table, unit: int) -> pa.Table:
    return prepares.append_column("unit", pa.array([unit] * prepares.num_rows, pa.int32()))


def _lists(rows: pa.Table) -> pa.Array:
    lists = [decisions(h).prepares.column("partitions") for h in HISTORIES]
    pairs = zip(rows.column("unit").to_pylist(), rows.column("row").to_pylist(), strict=True)
    return pa.array([lists[u][r].as_py() for u, r in pairs], pa.list_(pa.string()))
