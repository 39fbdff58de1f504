"""The integrity audit's checks against the coordinator's decisions and the producer's append invariants
(docs/integrity.md); the ``.txnindex`` checks are in txnlog.rules.integrity.

* ``SPLIT_OUTCOME``: each PrepareCommit / PrepareAbort record of the coordinator lists the transaction's
  partitions (the Complete* after it lists none); on every listed partition in the copy, the producer's
  transaction there must end with that outcome's marker. Transactions are matched by order on the partition (the
  coordinator's n-th completed Prepare* naming the partition and the producer's n-th ended transaction there,
  counted from the newest: the oldest may be gone from either log), never by epoch: under transaction version 0
  consecutive transactions share an epoch, under version 2 markers and the coordinator carry the data's epoch + 1.
* ``EPOCH_REGRESSION``: a transaction whose data batches carry an epoch below the producer's previous marker on the
  partition. ``ProducerAppendInfo.checkProducerEpoch`` rejects such a batch from a client
  (``InvalidProducerEpochException``) and only logs it when it loads or replicates the log, so it is in a log only
  when something bypassed the leader's checks.

Pure and vectorized: Arrow tables in, anomaly rows out (as dicts: only the anomalies are formatted one by one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import ControlType, TransactionState
from txnlog.model import contract
from txnlog.model.arrow import group_starts, key_codes

__all__ = ["EPOCH_REGRESSION", "SPLIT_OUTCOME", "Decisions", "coordinator_rows", "decisions", "epoch_rows"]

SPLIT_OUTCOME = "SPLIT_OUTCOME"
EPOCH_REGRESSION = "EPOCH_REGRESSION"

ERROR, WARNING, NOT_CHECKED = "ERROR", "WARNING", "NOT_CHECKED"
ALL, NONE = "ALL", "NONE"

_PREPARES = ("PrepareCommit", "PrepareAbort")
_COMPLETES = ("CompleteCommit", "CompleteAbort")
_DECISION_SCHEMA = pa.schema(
    [
        ("transactional_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("rank", pa.int64()),  # 0: the newest decision naming the partition
        ("decided", pa.int32()),  # the marker's ControlType
        ("prepare", pa.int64()),  # the row of :attr:`Decisions.prepares`
        ("transaction_version", pa.int32()),
    ]
)
_PREPARES_SCHEMA = pa.schema(
    [("coordinator_partition", pa.int32()), ("record_offset", pa.int64()), ("partitions", pa.list_(pa.string()))]
)
_OWNERS_SCHEMA = pa.schema([("producer_id", pa.int64()), ("transactional_id", pa.string())])


@dataclass(frozen=True)
class Decisions:
    """What the coordinator decided, per partition (:func:`decisions`): ``decided`` one row per completed
    Prepare* record and partition it lists, ranked from the newest; ``owners`` producer id -> transactional id;
    ``prepares`` the completed Prepare* records (where, and the partitions they list). Small next to the
    transactions: the engine hands it to every partition's task."""

    decided: pa.Table
    owners: pa.Table
    prepares: pa.Table


def decisions(history: pa.Table) -> Decisions:
    """:class:`Decisions` of the ``coordinator_history`` rows (any order; ``state`` the state's name, or its code
    as staged)."""
    if not history.num_rows or "transactional_id" not in history.column_names:
        return Decisions(_DECISION_SCHEMA.empty_table(), _OWNERS_SCHEMA.empty_table(), _PREPARES_SCHEMA.empty_table())
    if pa.types.is_integer(history.column("state").type):
        codes = pa.array([int(s) for s in TransactionState], history.column("state").type)
        names = pa.array([s.kafka_name for s in TransactionState], pa.string())
        found = pc.index_in(history.column("state"), value_set=codes)
        history = history.set_column(history.schema.get_field_index("state"), "state", names.take(found))
    h = history.filter(pc.is_valid(history.column("transactional_id")))
    h = h.sort_by([("transactional_id", "ascending"), ("coordinator_partition", "ascending"),
                   ("record_offset", "ascending")])  # fmt: skip
    owners = h.filter(pc.is_valid(h.column("producer_id"))).select(["producer_id", "transactional_id"])
    owners = owners.group_by("producer_id").aggregate([("transactional_id", "max")])
    owners = pa.table(
        [owners.column("producer_id").cast(pa.int64()), owners.column("transactional_id_max")],
        schema=_OWNERS_SCHEMA,
    )
    ids = np.asarray(h.column("transactional_id").to_numpy(zero_copy_only=False), object)
    states = np.asarray(pc.fill_null(h.column("state"), "").to_numpy(zero_copy_only=False), object)
    same_next = np.zeros(h.num_rows, bool)
    same_next[:-1] = ids[1:] == ids[:-1]
    next_state = np.append(states[1:], "")
    completed = np.isin(states, _PREPARES) & same_next & np.isin(next_state, _COMPLETES)
    prep = h.filter(pa.array(completed))
    prepares = pa.table(
        {
            "coordinator_partition": prep.column("coordinator_partition").cast(pa.int32()),
            "record_offset": prep.column("record_offset").cast(pa.int64()),
            "partitions": prep.column("partitions"),
        }
    )
    parts = prep.column("partitions").combine_chunks()
    split = pc.extract_regex(pc.list_flatten(parts), r"^(?P<topic>.*)-(?P<partition>[0-9]+)$")
    ok = pc.is_valid(split)
    parent = pc.filter(pc.list_parent_indices(parts), ok).cast(pa.int64())
    split = pc.filter(split, ok)
    version = (
        prep.column("client_transaction_version")
        if "client_transaction_version" in prep.column_names
        else pa.nulls(prep.num_rows, pa.int32())
    )
    commit = pc.equal(prep.column("state"), "PrepareCommit")
    outcome = pc.if_else(commit, int(ControlType.COMMIT), int(ControlType.ABORT)).cast(pa.int32())
    decided = pa.table(
        {
            "transactional_id": prep.column("transactional_id").take(parent),
            "topic": pc.struct_field(split, "topic"),
            "partition": pc.struct_field(split, "partition").cast(pa.int32()),
            "rank": pa.nulls(len(parent), pa.int64()),
            "decided": outcome.take(parent),
            "prepare": parent,
            "transaction_version": version.cast(pa.int32()).take(parent),
        }
    )
    decided = _ranked(decided, ["transactional_id", "topic", "partition"], ["prepare"])
    return Decisions(decided.cast(_DECISION_SCHEMA), owners, prepares)


def _ranked(table: pa.Table, keys: list[str], order: list[str]) -> pa.Table:
    """``table`` sorted by ``keys`` then ``order`` descending, with ``rank`` the row's place in its group (0: the
    greatest ``order``)."""
    table = table.sort_by([(k, "ascending") for k in keys] + [(o, "descending") for o in order])
    n = table.num_rows
    if not n:
        return table.set_column(table.schema.get_field_index("rank"), "rank", pa.array([], pa.int64()))
    codes = [np.asarray(pc.fill_null(table.column(k).cast(pa.string()), "").to_numpy(zero_copy_only=False), object)
             for k in keys]  # fmt: skip
    starts = group_starts(*codes)
    sizes = np.diff(np.append(starts, n))
    rank = np.arange(n) - np.repeat(starts, sizes)
    return table.set_column(table.schema.get_field_index("rank"), "rank", pa.array(rank, pa.int64()))


def coordinator_rows(txns: pa.Table, decided: Decisions) -> list[dict[str, Any]]:
    """``SPLIT_OUTCOME`` rows of ``txns`` (the transactions of whole partitions) against ``decided``."""
    d = decided.decided
    if not d.num_rows or not txns.num_rows or not decided.owners.num_rows:
        return []
    found = pc.index_in(txns.column("producer_id"), value_set=decided.owners.column("producer_id"))
    mine = txns.append_column("transactional_id", decided.owners.column("transactional_id").take(found))
    ended = pc.and_(pc.is_valid(mine.column("marker_offset")), pc.is_valid(mine.column("control_type")))
    mine = mine.filter(pc.and_(ended, pc.is_valid(mine.column("transactional_id"))))
    mine = mine.select(["transactional_id", "topic", "partition", "producer_id", "producer_epoch", "first_offset",
                        "last_offset", "marker_offset", "control_type", "record_count", "size_bytes",
                        "first_timestamp", "last_timestamp"])  # fmt: skip
    mine = _ranked(mine.append_column("rank", pa.nulls(mine.num_rows, pa.int64())),
                   ["transactional_id", "topic", "partition"], ["marker_offset"])  # fmt: skip
    keys = ["transactional_id", "topic", "partition"]
    width = max(mine.num_rows, d.num_rows) + 1  # a rank is below both
    mine_key = pc.add(pc.multiply(key_codes(mine, keys, d), width), mine.column("rank"))
    found = pc.index_in(mine_key, value_set=pc.add(pc.multiply(key_codes(d, keys, d), width), d.column("rank")))
    paired = pc.is_valid(found)
    mine, found = mine.filter(paired), pc.filter(found, paired)
    outcome = d.column("decided").take(found)
    split = pc.not_equal(mine.column("control_type"), outcome)
    pairs = mine.append_column("decided", outcome).append_column("prepare", d.column("prepare").take(found))
    pairs = pairs.filter(split)
    if not pairs.num_rows:
        return []
    where = decided.prepares.take(pairs.column("prepare"))
    pairs = pairs.append_column("coordinator_partition", where.column("coordinator_partition"))
    pairs = pairs.append_column("record_offset", where.column("record_offset"))
    pairs = pairs.append_column("listed", pc.binary_join(where.column("partitions"), ", "))
    pairs = pairs.sort_by([("topic", "ascending"), ("partition", "ascending"), ("marker_offset", "ascending")])
    return [_split_row(p) for p in pairs.to_pylist()]


def _split_row(p: dict[str, Any]) -> dict[str, Any]:
    decided = "COMMIT" if p["decided"] == ControlType.COMMIT else "ABORT"
    got = "ABORT" if p["control_type"] == ControlType.ABORT else "COMMIT"
    return {
        **_txn_columns(p, p["transactional_id"]),
        "check": SPLIT_OUTCOME,
        "severity": ERROR,
        "consumers_received": ALL if got == "COMMIT" else NONE,
        "consumers_should_receive": ALL if decided == "COMMIT" else NONE,
        "restart_repairs": "NOT_APPLICABLE",
        "kafka_class": "TransactionMetadata (PrepareCommit/PrepareAbort partitions), ControlRecordType",
        "evidence": f"the coordinator ({p['transactional_id']}, __transaction_state-{p['coordinator_partition']} "
        f"offset {p['record_offset']}) decided {decided} for {p['listed']}, but this partition's transaction of "
        f"producer {p['producer_id']} at {p['first_offset']}..{p['last_offset']} ended with {got} at "
        f"{p['marker_offset']}: the transaction is not atomic.",
        "advice": "a marker written by hand (kafka-transactions.sh abort) on one partition of a transaction the "
        "coordinator then committed is the likely cause; reconcile the consumers of this partition with those of "
        "the transaction's other partitions.",
    }


def _txn_columns(t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
    """A partition-wide row's columns of the transaction ``t`` (every replica: ``replica`` null)."""
    control = t.get("control_type")
    return {
        "topic": t["topic"],
        "partition": t["partition"],
        "replica": None,
        "producer_id": t["producer_id"],
        "producer_epoch": t.get("producer_epoch"),
        "transactional_id": txn_id,
        "first_offset": t["first_offset"],
        "last_offset": t["last_offset"],
        "marker_offset": t.get("marker_offset"),
        "marker_type": None if control is None else "ABORT" if control == ControlType.ABORT else "COMMIT",
        "records_affected": t.get("record_count"),
        "bytes_affected": t.get("size_bytes"),
        "from_time": t.get("first_timestamp"),
        "to_time": t.get("last_timestamp"),
        "source": contract.InputSource.SEGMENTS.value,
    }


def epoch_rows(txns: pa.Table, owners: pa.Table) -> list[dict[str, Any]]:
    """``EPOCH_REGRESSION`` rows: transactions whose lowest data epoch is below the epoch of the producer's
    previous marker on the partition (``min_epoch`` < ``prev_marker_epoch``, both known)."""
    low, prev = txns.column("min_epoch"), txns.column("prev_marker_epoch")
    bad = txns.filter(pc.fill_null(pc.less(low, prev), False))
    if not bad.num_rows:
        return []
    names = dict(zip(owners.column("producer_id").to_pylist(), owners.column("transactional_id").to_pylist()))
    return [_epoch_row(t, names.get(t["producer_id"])) for t in bad.to_pylist()]


def _epoch_row(t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
    return {
        **_txn_columns(t, txn_id),
        "check": EPOCH_REGRESSION,
        "severity": ERROR,
        "consumers_received": None,
        "consumers_should_receive": None,
        "restart_repairs": "NO",
        "kafka_class": "ProducerAppendInfo.checkProducerEpoch, ProducerStateManager",
        "evidence": f"producer {t['producer_id']}'s transaction at {t['first_offset']}..{t['last_offset']} holds data "
        f"at epoch {t['min_epoch']}, below the epoch {t['prev_marker_epoch']} of its previous marker on this "
        "partition: the leader rejects such a batch from a client (InvalidProducerEpochException), so it came "
        "from a zombie producer past a bypassed check, a replica that diverged, or a tool that wrote the log; "
        "under transaction version 2 every transaction bumps the epoch and this must never appear.",
        "advice": "find which producer instance wrote these batches (a fenced zombie) and whether its records "
        "belong to the stream; the broker only logs this when it loads the log, it does not repair it.",
    }
