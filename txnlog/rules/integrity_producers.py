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
* ``SEQUENCE_GAP``: a data batch of a transaction whose base sequence is not the one after the previous batch's
  last sequence at the same epoch, the two batches adjacent in one segment (``ProducerAppendInfo.checkSequence``
  rejects it from a client with ``OutOfOrderSequenceException``; a follower's fetch and the log's load append
  with ``AppendOrigin.REPLICATION``, which checks no sequence, so such a batch stays in the log and loads).

Pure and vectorized: Arrow tables in, anomaly rows out (as dicts: only the anomalies are formatted one by one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.pairing import rank_and_pair
from txnlog.kafka.wire import ControlType, TransactionState
from txnlog.model import contract
from txnlog.model.arrow import group_starts, lex_order, per_run, runs

__all__ = [
    "EPOCH_REGRESSION",
    "SEQUENCE_GAP",
    "SPLIT_OUTCOME",
    "Decisions",
    "coordinator_rows",
    "decisions_by",
    "joined",
    "keyed",
    "txn_columns",
    "paired",
    "decisions",
    "epoch_rows",
    "sequence_rows",
]

SPLIT_OUTCOME = contract.IntegrityCheck.SPLIT_OUTCOME.value
EPOCH_REGRESSION = contract.IntegrityCheck.EPOCH_REGRESSION.value
SEQUENCE_GAP = contract.IntegrityCheck.SEQUENCE_GAP.value

ERROR = contract.IntegritySeverity.ERROR.value
WARNING = contract.IntegritySeverity.WARNING.value
NOT_CHECKED = contract.IntegritySeverity.NOT_CHECKED.value
ALL, NONE = "ALL", "NONE"

_PREPARES = (int(TransactionState.PREPARE_COMMIT), int(TransactionState.PREPARE_ABORT))
_COMPLETES = (int(TransactionState.COMPLETE_COMMIT), int(TransactionState.COMPLETE_ABORT))
_DECISION_SCHEMA = pa.schema(
    [
        ("key", pa.int64()),  # transactional id's code * partitions + the partition's row of Decisions.partitions
        ("rank", pa.int64()),  # 0: the newest decision naming the partition
        ("decided", pa.int32()),  # the marker's ControlType
        ("prepare", pa.int64()),  # the row of Decisions.prepares
    ]
)
_PREPARES_SCHEMA = pa.schema(
    [
        ("transactional_id", pa.string()),
        ("coordinator_partition", pa.int32()),
        ("record_offset", pa.int64()),
        ("partitions", pa.list_(pa.string())),
        ("producer_epoch", pa.int32()),  # the Prepare* record's: the markers' epoch (every transaction version)
    ]
)
_OWNERS_SCHEMA = pa.schema([("producer_id", pa.int64()), ("transactional_id", pa.string()), ("code", pa.int64())])
#: a partition as the Prepare* records name it (``name``) and parsed (null where the name does not parse)
_PARTITIONS_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("name", pa.string())])


@dataclass(frozen=True)
class Decisions:
    """What the coordinator decided, per partition (:func:`decisions`), keyed by integer codes: ``decided`` one row
    per completed Prepare* record and partition it lists, ranked from the newest; ``owners`` producer id ->
    transactional id and its code; ``partitions`` the partitions named (their row is their code); ``prepares``
    the completed Prepare* records (for the evidence). Small next to the transactions: the engine hands it to every
    partition's task. ``lists``, where ``prepares`` holds no ``partitions`` (:func:`decisions_by` without them):
    the partitions each of some rows of ``prepares`` lists, asked only for the anomalies' evidence."""

    decided: pa.Table
    owners: pa.Table
    partitions: pa.Table
    prepares: pa.Table
    lists: Callable[[pa.Table], pa.Array | pa.ChunkedArray] | None = None

    def listed(self, rows: pa.Table) -> pa.Array | pa.ChunkedArray:
        """The partitions each of ``rows`` (rows of ``prepares``) lists, joined by ", " (the evidence's words)."""
        lists = rows.column("partitions") if self.lists is None else self.lists(rows)
        return pc.binary_join(lists, ", ")


_NONE = Decisions(
    _DECISION_SCHEMA.empty_table(),
    _OWNERS_SCHEMA.empty_table(),
    _PARTITIONS_SCHEMA.empty_table(),
    _PREPARES_SCHEMA.empty_table(),
)


def decisions(history: pa.Table) -> Decisions:
    """:class:`Decisions` of the ``coordinator_history`` rows (any order; ``state`` the state's name, or its code
    as staged)."""
    if not history.num_rows or "transactional_id" not in history.column_names:
        return _NONE
    tids = history.column("transactional_id")
    h = history if not tids.null_count else history.filter(pc.is_valid(tids))
    if not h.num_rows:
        return _NONE
    state = h.column("state")
    if not pa.types.is_integer(state.type):  # names, as a dump's text gives them: their codes
        names = pa.array([s.kafka_name for s in TransactionState], pa.string())
        state = pa.array([int(s) for s in TransactionState], pa.int32()).take(pc.index_in(state, value_set=names))
    ids = pc.dictionary_encode(h.column("transactional_id").combine_chunks())
    tid = ids.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    cp = np.asarray(pc.fill_null(h.column("coordinator_partition"), -1).to_numpy(zero_copy_only=False), np.int64)
    at = np.lexsort((h.column("record_offset").to_numpy(zero_copy_only=False), cp, tid))
    tid = tid[at]
    states = np.asarray(pc.fill_null(state, -1).to_numpy(zero_copy_only=False), np.int64)[at]
    owners = _owners(h.column("producer_id").take(pa.array(at)), tid, ids.dictionary)
    same_next = np.zeros(tid.size, bool)
    same_next[:-1] = tid[1:] == tid[:-1]
    next_state = np.append(states[1:], -1)
    completed = np.isin(states, _PREPARES) & same_next & np.isin(next_state, _COMPLETES)
    kept = ["transactional_id", "coordinator_partition", "record_offset", "partitions"]
    kept += ["producer_epoch"] if "producer_epoch" in h.column_names else []
    prep = h.select(kept).take(pa.array(at[completed]))
    epoch = prep.column("producer_epoch") if "producer_epoch" in kept else pa.nulls(prep.num_rows, pa.int32())
    prepares = pa.table(
        [
            prep.column("transactional_id"),
            prep.column("coordinator_partition").cast(pa.int32()),
            prep.column("record_offset").cast(pa.int64()),
            prep.column("partitions"),
            epoch.cast(pa.int32()),
        ],
        schema=_PREPARES_SCHEMA,
    )
    listed = prep.column("partitions").combine_chunks()
    named = pc.dictionary_encode(pc.list_flatten(listed))
    parsed = pc.extract_regex(named.dictionary, r"^(?P<topic>.*)-(?P<partition>[0-9]+)$")  # few: one per partition
    partitions = pa.table(
        [pc.struct_field(parsed, "topic"), pc.struct_field(parsed, "partition").cast(pa.int32()), named.dictionary],
        schema=_PARTITIONS_SCHEMA,
    )
    parent = pc.list_parent_indices(listed).to_numpy(zero_copy_only=False).astype(np.int64)
    tp = named.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    ok = np.asarray(pc.is_valid(parsed).to_numpy(zero_copy_only=False), bool)[tp] if tp.size else np.zeros(0, bool)
    parent, tp = parent[ok], tp[ok]
    key = tid[completed][parent] * max(len(partitions), 1) + tp
    order = lex_order(key, -parent)
    key, parent = key[order], parent[order]
    starts = group_starts(key)
    rank = np.arange(key.size) - np.repeat(starts, np.diff(np.append(starts, key.size)))
    commit = states[completed] == TransactionState.PREPARE_COMMIT
    outcome = np.where(commit, int(ControlType.COMMIT), int(ControlType.ABORT))
    decided = pa.table(
        [pa.array(key), pa.array(rank, pa.int64()), pa.array(outcome[parent], pa.int32()), pa.array(parent)],
        schema=_DECISION_SCHEMA,
    )
    return Decisions(decided, owners, partitions, prepares)


def _owners(pid: pa.ChunkedArray, tid: np.ndarray, names: pa.Array) -> pa.Table:
    """Producer id -> transactional id (and its code) of the history's records (``pid`` and ``tid`` in the
    records' order): a producer id's last record's."""
    has = np.asarray(pc.is_valid(pid).to_numpy(zero_copy_only=False), bool)
    pids = np.asarray(pc.fill_null(pid, -1).to_numpy(zero_copy_only=False), np.int64)[has][::-1]
    codes = tid[has][::-1]
    pids, first = np.unique(pids, return_index=True)
    codes = codes[first]
    return pa.table(
        [pa.array(pids, pa.int64()), names.take(pa.array(codes)), pa.array(codes, pa.int64())], schema=_OWNERS_SCHEMA
    )


def decisions_by(decided: Decisions, partitions: pa.Table, groups: int, lists: bool = True) -> list[Decisions]:
    """``decided`` split by the groups of the partitions that its decisions name (``partitions``: topic, partition
    and ``group``, from 0 to ``groups`` - 1, a partition once; a decision that names none of them is in no group):
    each group's decisions, with which the checks of its partitions' transactions (:func:`coordinator_rows`,
    txnlog.rules.integrity_markers) give the same rows as with ``decided``. The owners stay whole. Without
    ``lists``, each group's ``prepares`` holds, instead of the partitions each lists (the most of its bytes, and
    every group naming one of them would hold a copy), the ``row`` of ``decided.prepares`` it is: give the group's
    :class:`Decisions` the ``lists`` that read them."""
    parts = decided.partitions
    prepares = decided.prepares
    if not lists:
        prepares = prepares.drop_columns(["partitions"]).append_column("row", pa.array(np.arange(prepares.num_rows)))
    width = max(parts.num_rows, 1)
    at = pc.index_in(_tp_names(parts), value_set=_tp_names(partitions).combine_chunks())
    group_of = np.full(width, -1, np.int64)
    group_of[: parts.num_rows] = np.asarray(
        pc.fill_null(partitions.column("group").take(at), -1).to_numpy(zero_copy_only=False), np.int64
    )
    d = decided.decided
    key = np.asarray(d.column("key").to_numpy(), np.int64)
    in_group, prepare_of = group_of[key % width], np.asarray(d.column("prepare").to_numpy(), np.int64)
    order = np.argsort(in_group, kind="stable")  # each group's rows in their order: by key, then rank
    bounds = np.searchsorted(in_group[order], np.arange(groups + 1))
    out = []
    for g in range(groups):
        rows, kept_tp = order[bounds[g] : bounds[g + 1]], np.flatnonzero(group_of == g)
        new_tp = np.full(width, -1, np.int64)
        new_tp[kept_tp] = np.arange(kept_tp.size)
        used, prepare = np.unique(prepare_of[rows], return_inverse=True)
        keys = key[rows] // width * max(kept_tp.size, 1) + new_tp[key[rows] % width]  # the order kept
        taken = pa.array(rows, pa.int64())
        table = pa.table(
            [
                pa.array(keys),
                d.column("rank").take(taken),
                d.column("decided").take(taken),
                pa.array(prepare.reshape(-1)),
            ],
            schema=_DECISION_SCHEMA,
        )
        out.append(Decisions(table, decided.owners, parts.take(pa.array(kept_tp)), prepares.take(pa.array(used))))
    return out


def joined(parts: Sequence[Decisions]) -> Decisions:
    """The :class:`Decisions` of several histories whose transactional ids are disjoint (a transactional id's records
    are all in its one ``__transaction_state`` partition, ``TransactionStateManager.partitionFor``) from each one's
    (:func:`decisions`, or a group's of :func:`decisions_by`), in the histories' order: what :func:`decisions` of the
    histories concatenated in that order gives, but for the integer codes, which only pair rows."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _NONE
    names = pc.dictionary_encode(pa.concat_tables([p.partitions for p in parts]).column("name").combine_chunks())
    index = np.asarray(names.indices.to_numpy(zero_copy_only=False), np.int64)
    _, first = np.unique(index, return_index=True)  # the dictionary is in order of first appearance
    partitions = pa.concat_tables([p.partitions for p in parts]).take(pa.array(first))
    width = max(partitions.num_rows, 1)
    keys, prepares, owner_codes = [], [], []
    tid_at = name_at = prepare_at = 0
    for p in parts:  # each part's codes after the previous parts': the histories' order kept
        n = p.partitions.num_rows
        key, codes_here = _values_of(p.decided, "key"), _values_of(p.owners, "code")
        tid = key // max(n, 1)
        keys.append((tid + tid_at) * width + index[name_at : name_at + n][key % max(n, 1)])
        prepares.append(_values_of(p.decided, "prepare") + prepare_at)
        owner_codes.append(codes_here + tid_at)
        tid_at += int(max(codes_here.max(initial=-1), tid.max(initial=-1))) + 1
        name_at, prepare_at = name_at + n, prepare_at + p.prepares.num_rows
    key, prepare, code = np.concatenate(keys), np.concatenate(prepares), np.concatenate(owner_codes)
    rank = pa.concat_tables([p.decided for p in parts]).select(["rank", "decided"])
    at = lex_order(key, _values_of(rank, "rank"))
    order = pa.array(at)
    decided = pa.table(
        [pa.array(key[at]), rank.column("rank").take(order), rank.column("decided").take(order), pa.array(prepare[at])],
        schema=_DECISION_SCHEMA,
    )
    owners = pa.concat_tables([p.owners for p in parts])
    pid = _values_of(owners, "producer_id")
    last = lex_order(pid, code)
    newest = last[np.append(pid[last][1:] != pid[last][:-1], True)] if pid.size else last  # a producer's newest
    owners = pa.table(
        [owners.column("producer_id").take(pa.array(newest)), owners.column("transactional_id").take(pa.array(newest)),
         pa.array(code[newest], pa.int64())],
        schema=_OWNERS_SCHEMA,
    )  # fmt: skip
    prepares = pa.concat_tables([p.prepares for p in parts], promote_options="permissive")
    return Decisions(decided, owners, partitions, prepares, next((p.lists for p in parts if p.lists), None))


def _values_of(table: pa.Table, name: str) -> np.ndarray:
    """``table``'s column ``name`` (no nulls) as int64."""
    return np.asarray(table.column(name).to_numpy(), np.int64)


def _tp_names(partitions: pa.Table) -> pa.ChunkedArray:
    """Each (topic, partition) of ``partitions`` as one string, to match them."""
    text = pc.cast(partitions.column("partition"), pa.string())
    return pc.binary_join_element_wise(partitions.column("topic"), text, "\x00")


def codes(txns: pa.Table, decided: Decisions) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray]:
    """Per row of ``txns``: the code of its producer's transactional id and of its partition in ``decided`` (null:
    unknown there). Computed once per call of the audit and shared by its checks (:func:`keyed`)."""
    owners, parts = decided.owners, decided.partitions
    tid = owners.column("code").take(pc.index_in(txns.column("producer_id"), value_set=owners.column("producer_id")))
    on = ["topic", "partition"]
    named: dict[tuple[Any, ...], int] = {}
    for row, key in enumerate(zip(*(parts.column(c).to_pylist() for c in on), strict=True)):
        if None not in key:
            named.setdefault(key, row)  # the first of the partitions two names give (``t-01``, ``t-1``)
    starts, values = runs(txns, on)  # a partition's transactions are together: a lookup per run
    tp = per_run(starts, txns.num_rows, np.array([named.get(v, -1) for v in values], np.int64))
    return tid, pa.array(tp, mask=tp < 0)


def keyed(
    txns: pa.Table, decided: Decisions, ended: bool, coded: tuple[Any, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``txns`` whose producer's transactional id and partition ``decided`` knows, ended with a marker
    (``ended``) or open, and their keys (as :class:`Decisions`' ``key``); ``coded``: :func:`codes`, if known."""
    tid, tp = coded if coded is not None else codes(txns, decided)
    state = _ended(txns) if ended else pc.invert(pc.is_valid(txns.column("marker_offset")))
    known = pc.and_(pc.and_(pc.is_valid(tid), pc.is_valid(tp)), state)
    kept = np.flatnonzero(np.asarray(pc.fill_null(known, False).to_numpy(zero_copy_only=False), bool))
    return kept, _ints(tid, kept) * max(len(decided.partitions), 1) + _ints(tp, kept)


def paired(d: pa.Table, key: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each (``key``, ``rank``): whether the decisions ``d`` hold it, and the row of ``d`` that does (the
    decisions' keys and ranks are sorted, so a binary search pairs them)."""
    width = max(int(rank.max(initial=0)) + 1, d.num_rows) + 1  # a rank is below it
    theirs = d.column("key").to_numpy().astype(np.int64) * width + d.column("rank").to_numpy().astype(np.int64)
    ours = key * width + rank
    found = np.minimum(np.searchsorted(theirs, ours), max(theirs.size - 1, 0))
    return (theirs[found] == ours) if theirs.size else np.zeros(key.size, bool), found


def coordinator_rows(
    txns: pa.Table, decided: Decisions, shifted: np.ndarray | None = None, coded: tuple[Any, Any] | None = None
) -> list[dict[str, Any]]:
    """``SPLIT_OUTCOME`` rows of ``txns`` (the transactions of whole partitions) against ``decided``: the
    producer's ended transactions on a partition ranked from the newest, paired with the decisions' ranks (only
    narrow integer columns are touched until the split transactions are known). ``shifted``: the keys whose
    newest decision lost its marker on the partition (``MARKER_MISSING``, txnlog.rules.integrity_markers): their
    ended transactions pair from the second newest decision. ``coded``: :func:`codes` of ``txns``, if known."""
    d = decided.decided
    if not d.num_rows or not txns.num_rows:
        return []
    kept, key = keyed(txns, decided, ended=True, coded=coded)
    if not kept.size:
        return []
    at = lex_order(key, -_ints(txns.column("marker_offset"), kept))
    key, kept = key[at], kept[at]
    shift = np.isin(key, shifted if shifted is not None else np.zeros(0, np.int64)).astype(np.int64)
    their_key, their_rank = (np.asarray(d.column(c).to_numpy(), np.int64) for c in ("key", "rank"))
    found = rank_and_pair(key, shift, their_key, their_rank)  # compiled: txnlog.kafka.pairing
    hit = found >= 0
    found, kept = found[hit], kept[hit]
    outcome = d.column("decided").to_numpy().astype(np.int64)[found]
    split = _ints(txns.column("control_type"), kept) != outcome
    if not split.any():
        return []
    found = pa.array(found[split])
    pairs = txns.take(pa.array(kept[split]))
    pairs = pairs.append_column("decided", d.column("decided").take(found))
    pairs = pairs.append_column("prepare", d.column("prepare").take(found))
    where = decided.prepares.take(pairs.column("prepare"))
    pairs = pairs.append_column("transactional_id", where.column("transactional_id"))
    pairs = pairs.append_column("coordinator_partition", where.column("coordinator_partition"))
    pairs = pairs.append_column("record_offset", where.column("record_offset"))
    pairs = pairs.append_column("listed", decided.listed(where))
    pairs = pairs.sort_by([("topic", "ascending"), ("partition", "ascending"), ("marker_offset", "ascending")])
    return [_split_row(p) for p in pairs.to_pylist()]


def _ended(txns: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Whether each transaction of ``txns`` ended with a marker (its offset and type known)."""
    return pc.and_(pc.is_valid(txns.column("marker_offset")), pc.is_valid(txns.column("control_type")))


def _ints(column: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> np.ndarray:
    """``column``'s values at ``rows`` (non-null there) as int64."""
    values = column.to_numpy() if column.null_count == 0 else pc.fill_null(column, 0).to_numpy()
    return np.asarray(values, np.int64)[rows]


def _split_row(p: dict[str, Any]) -> dict[str, Any]:
    decided = "COMMIT" if p["decided"] == ControlType.COMMIT else "ABORT"
    got = "ABORT" if p["control_type"] == ControlType.ABORT else "COMMIT"
    return {
        **txn_columns(p, p["transactional_id"]),
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


def txn_columns(t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
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
        **txn_columns(t, txn_id),
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


def sequence_rows(txns: pa.Table, owners: pa.Table) -> list[dict[str, Any]]:
    """``SEQUENCE_GAP`` rows: transactions with a batch out of sequence (``sequence_gap`` known)."""
    if "sequence_gap" not in txns.column_names:
        return []
    bad = txns.filter(pc.is_valid(txns.column("sequence_gap")))
    if not bad.num_rows:
        return []
    names = dict(zip(owners.column("producer_id").to_pylist(), owners.column("transactional_id").to_pylist()))
    return [_sequence_row(t, names.get(t["producer_id"])) for t in bad.to_pylist()]


def _sequence_row(t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
    return {
        **txn_columns(t, txn_id),
        "check": SEQUENCE_GAP,
        "severity": ERROR,
        "consumers_received": None,
        "consumers_should_receive": None,
        "restart_repairs": "NO",
        "kafka_class": "ProducerAppendInfo.checkSequence, AppendOrigin",
        "evidence": f"producer {t['producer_id']}'s transaction at {t['first_offset']}..{t['last_offset']} has a "
        f"batch at offset {t['sequence_gap']} whose base sequence does not follow the previous batch's last "
        "sequence at the same epoch: the leader rejects such a batch from a client (OutOfOrderSequenceException), "
        "so records of this transaction were lost before the leader's log, or the batch came past that check (a "
        "follower's or a tool's append, which checks no sequence); a compacted topic's cleaner also removes "
        "batches.",
        "advice": "compare the producer's sent records with the partition's records over this range; the broker "
        "neither checks sequences when it loads the log nor repairs them.",
    }
