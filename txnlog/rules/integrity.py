"""The integrity audit: did read_committed consumers receive what the markers decided? (docs/integrity.md)

A read_committed consumer does not read markers to drop aborted data: it drops a transactional batch only when
its producer is in the fetch response's aborted-transaction list (``CompletedFetch.isBatchAborted``), which the
broker takes from the segments' ``.txnindex`` files (``LocalLog.collectAbortedTransactions`` ->
``LogSegment.collectAbortedTxns`` -> ``TransactionIndex.collectAbortedTxns``). So, per replica:

* an ABORT-ended transaction with no ``.txnindex`` entry (producer id, last offset = its marker's offset) is
  delivered as committed: ``ABORTED_DATA_VISIBLE``;
* an entry that ends at no ABORT marker of its producer hides that producer's committed batches from its first
  offset on (the consumer forgets the producer only at the producer's next ABORT marker,
  ``CompletedFetch``'s ``abortedProducerIds.remove``): ``COMMITTED_DATA_HIDDEN``. The batches up to the entry's
  last offset are hidden whatever the fetches; later ones only when the same fetch holds them, so those rows
  say ``DEPENDS_ON_FETCH`` rather than one number.

Across partitions: each PrepareCommit / PrepareAbort record of the coordinator lists the transaction's
partitions (the Complete* after it lists none); on every listed partition in the copy, the producer's
transaction there must end with that outcome's marker. Transactions are matched by order on the partition (the
coordinator's n-th Prepare* naming the partition and the producer's n-th ended transaction there, counted from
the newest), never by epoch: ``SPLIT_OUTCOME``.

Pure: Arrow tables in, the ``integrity`` table's rows out (txnlog.model.contract.INTEGRITY, without the run key).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

import pyarrow as pa

from txnlog.kafka.wire import ControlType
from txnlog.model import contract
from txnlog.rules.finish import timestamps  # epoch ms → UTC timestamps, the writer's rule

__all__ = [
    "ABORTED_DATA_VISIBLE",
    "COMMITTED_DATA_HIDDEN",
    "INDEX_NOT_CHECKED",
    "SPLIT_OUTCOME",
    "integrity",
]

ABORTED_DATA_VISIBLE = "ABORTED_DATA_VISIBLE"
COMMITTED_DATA_HIDDEN = "COMMITTED_DATA_HIDDEN"
SPLIT_OUTCOME = "SPLIT_OUTCOME"
INDEX_NOT_CHECKED = "INDEX_NOT_CHECKED"

ERROR, WARNING, NOT_CHECKED = "ERROR", "WARNING", "NOT_CHECKED"
ALL, NONE, DEPENDS = "ALL", "NONE", "DEPENDS_ON_FETCH"

_SCHEMA = pa.schema([f for f in contract.INTEGRITY if f.name not in ("cluster", "as_of")])
_INDEX_CLASSES = "LogSegment.collectAbortedTxns, TransactionIndex, CompletedFetch"
_RESTART_ADVICE = {
    "NO": "a restart does not repair it (LogLoader rebuilds a segment's indexes only for a missing offset index, "
    "a corrupt index or an unclean shutdown's recovery from the recovery point on): ",
    "UNCLEAN_RESTART": "an unclean restart of the leader would rebuild this segment's .txnindex (LogLoader.recoverLog "
    "recovers the segments from the recovery point on); a clean one would not: ",
}


def integrity(txns: pa.Table, index: pa.Table, segments: pa.Table, history: pa.Table) -> pa.Table:
    """The ``integrity`` rows: ``txns`` the partitions' transactions (the ``transactions`` rows' columns with
    ``control_type``, ``replicas``, ``open_replicas``, times in ms), ``index`` and ``segments`` as
    txnlog.model.rows.TXN_INDEX_SCHEMA / TXN_SEGMENT_SCHEMA, ``history`` the ``coordinator_history`` rows."""
    owners = _owners(history)
    ended = [t for t in txns.to_pylist() if t["marker_offset"] is not None and t["control_type"] is not None]
    rows = _index_rows(ended, index.to_pylist(), segments.to_pylist(), owners)
    rows += _split_rows(ended, history.to_pylist())
    ms = pa.schema([pa.field(f.name, pa.int64()) if f.type == contract.TS else f for f in _SCHEMA])
    table = pa.Table.from_pylist(rows, schema=ms)
    for name in ("from_time", "to_time"):
        table = table.set_column(ms.get_field_index(name), name, timestamps(table.column(name)))
    return table.cast(_SCHEMA)


def _owners(history: pa.Table) -> dict[int, str]:
    ids = history.column("producer_id").to_pylist()
    names = history.column("transactional_id").to_pylist()
    return {int(p): n for p, n in zip(ids, names, strict=True) if p is not None and n is not None}


def _holders(t: dict[str, Any]) -> list[str]:
    """The replicas holding the transaction's marker."""
    return [r for r in (t["replicas"] or []) if r not in set(t["open_replicas"] or [])]


def _index_rows(
    ended: list[dict[str, Any]], entries: list[dict[str, Any]], segments: list[dict[str, Any]], owners: dict[int, str]
) -> list[dict[str, Any]]:
    bases: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    has_index: dict[tuple[str, str, int, int], bool] = {}
    recovery: dict[tuple[str, str, int], int | None] = {}
    for s in segments:
        key = (s["broker"], s["topic"], int(s["partition"]))
        bases[key].append(int(s["base_offset"]))
        has_index[(*key, int(s["base_offset"]))] = bool(s["has_txnindex"])
        recovery[key] = s["recovery_point"]
    for b in bases.values():
        b.sort()
    listed: dict[tuple[str, str, int], dict[tuple[int, int], dict[str, Any]]] = defaultdict(dict)
    for e in entries:
        listed[(e["broker"], e["topic"], int(e["partition"]))][(int(e["producer_id"]), int(e["last_offset"]))] = e
    by_replica: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    unchecked: set[tuple[str, int]] = set()
    for t in ended:
        for broker in _holders(t):
            key = (broker, t["topic"], int(t["partition"]))
            if key in bases:
                by_replica[key].append(t)
            else:
                unchecked.add(key[1:])
    rows: list[dict[str, Any]] = []
    for key, txns in by_replica.items():
        txns.sort(key=lambda t: t["marker_offset"])
        mine = listed.get(key, {})
        aborts = {
            (int(t["producer_id"]), int(t["marker_offset"])) for t in txns if t["control_type"] == ControlType.ABORT
        }
        for t in txns:
            if t["control_type"] != ControlType.ABORT or (int(t["producer_id"]), int(t["marker_offset"])) in mine:
                continue
            base = _segment_of(bases[key], int(t["marker_offset"]))
            missing_file = not has_index.get((*key, base), False)
            rows.append(_visible_row(key, t, base, missing_file, _restart(bases[key], recovery[key], base), owners))
        for (pid, last), e in sorted(mine.items(), key=lambda kv: kv[0][1]):
            if (pid, last) not in aborts:
                rows += _hidden_rows(key, e, txns, owners)
    for topic, partition in sorted(unchecked):
        rows.append(_not_checked_row(topic, partition))
    return rows


def _segment_of(bases: list[int], offset: int) -> int:
    i = bisect.bisect_right(bases, offset) - 1
    return bases[max(i, 0)]


def _restart(bases: list[int], recovery_point: int | None, base: int) -> str:
    """Whether a restart of the replica's broker may rebuild the segment's ``.txnindex``: LogLoader.recoverLog
    recovers, after an unclean shutdown only, the segments from the one holding the recovery point on; a clean
    restart keeps every ``.txnindex`` that passes TransactionIndex.sanityCheck (a missing one included)."""
    i = bisect.bisect_right(bases, base)
    following = bases[i] if i < len(bases) else None
    if recovery_point is not None and following is not None and following <= recovery_point:
        return "NO"
    return "UNCLEAN_RESTART"


def _common(key: tuple[str, str, int], t: dict[str, Any], owners: dict[int, str]) -> dict[str, Any]:
    pid = int(t["producer_id"])
    return {
        "topic": key[1],
        "partition": key[2],
        "replica": key[0],
        "producer_id": pid,
        "producer_epoch": t.get("producer_epoch"),
        "transactional_id": owners.get(pid),
        "first_offset": t["first_offset"],
        "last_offset": t["last_offset"],
        "marker_offset": t["marker_offset"],
        "marker_type": "ABORT" if t["control_type"] == ControlType.ABORT else "COMMIT",
        "records_affected": t.get("record_count"),
        "bytes_affected": t.get("size_bytes"),
        "from_time": t.get("first_timestamp"),
        "to_time": t.get("last_timestamp"),
        "kafka_class": _INDEX_CLASSES,
        "source": contract.InputSource.SEGMENTS.value,
    }


def _visible_row(
    key: tuple[str, str, int], t: dict[str, Any], base: int, missing_file: bool, restart: str, owners: dict[int, str]
) -> dict[str, Any]:
    where = (
        f"segment {base} of {key[0]} has no .txnindex file"
        if missing_file
        else f"the .txnindex of segment {base} on {key[0]} lists no aborted transaction ending at {t['marker_offset']}"
    )
    return {
        **_common(key, t, owners),
        "check": ABORTED_DATA_VISIBLE,
        "severity": ERROR,
        "consumers_received": ALL,
        "consumers_should_receive": NONE,
        "restart_repairs": restart,
        "evidence": f"producer {t['producer_id']}'s transaction at {t['first_offset']}..{t['last_offset']} ended with "
        f"an ABORT marker at {t['marker_offset']}, but {where}: a read_committed consumer fetching from this replica "
        "receives its records as committed.",
        "advice": _RESTART_ADVICE[restart] + "consumers that read this range from this replica consumed aborted "
        "records; check their output for these offsets, and rebuild the segment's indexes (stop the broker, "
        "remove the segment's index files, start it without a clean-shutdown file) before anyone re-reads it.",
    }


def _hidden_rows(
    key: tuple[str, str, int], e: dict[str, Any], txns: list[dict[str, Any]], owners: dict[int, str]
) -> list[dict[str, Any]]:
    """The producer's committed transactions an index entry that ends at no ABORT marker hides: up to the entry's
    last offset in every fetch, after it up to the producer's next ABORT marker only within the same fetch."""
    pid, first, last = int(e["producer_id"]), int(e["first_offset"]), int(e["last_offset"])
    mine = [t for t in txns if int(t["producer_id"]) == pid and t["marker_offset"] >= first]
    rows = []
    for t in mine:
        if t["control_type"] == ControlType.ABORT:
            break  # CompletedFetch forgets the producer at its ABORT marker
        certain = t["last_offset"] <= last
        rows.append(
            {
                **_common(key, t, owners),
                "check": COMMITTED_DATA_HIDDEN,
                "severity": ERROR if certain else WARNING,
                "consumers_received": NONE if certain else DEPENDS,
                "consumers_should_receive": ALL,
                "restart_repairs": "NO",
                "evidence": f"the .txnindex of segment {e['segment_offset']} on {key[0]} lists producer {pid} as "
                f"aborted over {first}..{last}, but its transaction at {t['first_offset']}..{t['last_offset']} ended "
                f"with a COMMIT marker at {t['marker_offset']}: "
                + (
                    "a read_committed consumer drops its records whatever its fetches."
                    if certain
                    else "a read_committed consumer drops its records when one fetch holds them and the entry's "
                    "range (the consumer forgets the producer only at its next ABORT marker)."
                ),
                "advice": "a restart does not repair it (LogLoader keeps a .txnindex that passes "
                "TransactionIndex.sanityCheck): consumers that read this range from this replica skipped committed "
                "records; re-read it once the index is rebuilt (remove the segment's index files and restart the "
                "broker without a clean-shutdown file).",
            }
        )
    return rows


def _not_checked_row(topic: str, partition: int) -> dict[str, Any]:
    return {
        "check": INDEX_NOT_CHECKED,
        "severity": NOT_CHECKED,
        "topic": topic,
        "partition": partition,
        "kafka_class": _INDEX_CLASSES,
        "evidence": "the input holds this partition's transactions but not its segment files and their .txnindex "
        "(kafka-dump-log.sh text, a live cluster): what its read_committed consumers received was not checked.",
        "advice": "copy the partition's log directory (segments with their .txnindex files) to check it.",
    }


def _split_rows(ended: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per transactional id and partition: the coordinator's Prepare* records naming the partition and the
    producer ids' ended transactions there, paired from the newest back (the oldest may be gone from either)."""
    prepares: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    pids: dict[str, set[int]] = defaultdict(set)
    completed = _completed(history)
    for h in sorted(history, key=lambda h: (h["coordinator_partition"], h["record_offset"])):
        if h["producer_id"] is not None and h["transactional_id"] is not None:
            pids[h["transactional_id"]].add(int(h["producer_id"]))
        if h["state"] in ("PrepareCommit", "PrepareAbort") and _key(h) in completed:
            for tp in h["partitions"] or []:
                prepares[(h["transactional_id"], tp)].append(h)
    by_tp: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for t in ended:
        by_tp[(t["topic"], int(t["partition"]), int(t["producer_id"]))].append(t)
    rows: list[dict[str, Any]] = []
    for (txn_id, tp), preps in prepares.items():
        topic, _, part = tp.rpartition("-")
        mine = sorted(
            (t for pid in pids[txn_id] for t in by_tp.get((topic, int(part), pid), [])),
            key=lambda t: t["marker_offset"],
        )
        for h, t in zip(reversed(preps), reversed(mine), strict=False):
            decided = ControlType.COMMIT if h["state"] == "PrepareCommit" else ControlType.ABORT
            if t["control_type"] != decided:
                rows.append(_split_row(txn_id, h, t))
    return rows


def _key(h: dict[str, Any]) -> tuple[Any, ...]:
    return (h["transactional_id"], h["coordinator_partition"], h["record_offset"])


def _completed(history: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The Prepare* records a Complete* follows (the next record of the same transactional id)."""
    done: set[tuple[Any, ...]] = set()
    last: dict[str, dict[str, Any]] = {}
    for h in sorted(history, key=lambda h: (h["coordinator_partition"], h["record_offset"])):
        prev = last.get(h["transactional_id"])
        if prev is not None and prev["state"] in ("PrepareCommit", "PrepareAbort"):
            if h["state"] in ("CompleteCommit", "CompleteAbort"):
                done.add(_key(prev))
        last[h["transactional_id"]] = h
    return done


def _split_row(txn_id: str, h: dict[str, Any], t: dict[str, Any]) -> dict[str, Any]:
    decided = "COMMIT" if h["state"] == "PrepareCommit" else "ABORT"
    got = "ABORT" if t["control_type"] == ControlType.ABORT else "COMMIT"
    key = ("", t["topic"], int(t["partition"]))
    return {
        **_common(key, t, {int(t["producer_id"]): txn_id}),
        "replica": None,
        "check": SPLIT_OUTCOME,
        "severity": ERROR,
        "consumers_received": ALL if got == "COMMIT" else NONE,
        "consumers_should_receive": ALL if decided == "COMMIT" else NONE,
        "restart_repairs": "NOT_APPLICABLE",
        "kafka_class": "TransactionMetadata (PrepareCommit/PrepareAbort partitions), ControlRecordType",
        "evidence": f"the coordinator ({txn_id}, __transaction_state-{h['coordinator_partition']} offset "
        f"{h['record_offset']}) decided {decided} for {', '.join(h['partitions'] or [])}, but this partition's "
        f"transaction of producer {t['producer_id']} at {t['first_offset']}..{t['last_offset']} ended with "
        f"{got} at {t['marker_offset']}: the transaction is not atomic.",
        "advice": "a marker written by hand (kafka-transactions.sh abort) on one partition of a transaction the "
        "coordinator then committed is the likely cause; reconcile the consumers of this partition with those of "
        "the transaction's other partitions.",
    }
