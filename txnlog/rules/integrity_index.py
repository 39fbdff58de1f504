"""The ``.txnindex`` checks of the integrity audit (txnlog.rules.integrity): ``ABORTED_DATA_VISIBLE`` (an ABORT-ended
transaction no index entry lists: a read_committed consumer receives it), ``COMMITTED_DATA_HIDDEN`` (an entry that
ends at no ABORT marker: the consumer drops the producer's committed records) and ``INDEX_NOT_CHECKED`` (a
partition whose segment files the input does not hold). What a broker serves is Kafka's to say:
``LogSegment.collectAbortedTxns`` and ``TransactionIndex`` on the broker, ``CompletedFetch`` in the consumer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import ControlType
from txnlog.model import contract
from txnlog.model.arrow import key_codes
from txnlog.rules import integrity_producers as producers
from txnlog.rules import integrity_replicas as replicas

__all__ = ["ABORTED_DATA_VISIBLE", "COMMITTED_DATA_HIDDEN", "INDEX_NOT_CHECKED", "index_rows"]

ABORTED_DATA_VISIBLE = contract.IntegrityCheck.ABORTED_DATA_VISIBLE.value
COMMITTED_DATA_HIDDEN = contract.IntegrityCheck.COMMITTED_DATA_HIDDEN.value
INDEX_NOT_CHECKED = contract.IntegrityCheck.INDEX_NOT_CHECKED.value

ERROR, WARNING, NOT_CHECKED = producers.ERROR, producers.WARNING, producers.NOT_CHECKED
ALL, NONE, DEPENDS = producers.ALL, producers.NONE, "DEPENDS_ON_FETCH"
_INDEX_CLASSES = "LogSegment.collectAbortedTxns, TransactionIndex, CompletedFetch"
_RESTART_ADVICE = {
    "NO": "a restart does not repair it (LogLoader rebuilds a segment's indexes only for a missing offset index, "
    "a corrupt index or an unclean shutdown's recovery from the recovery point on): ",
    "UNCLEAN_RESTART": "an unclean restart of the leader would rebuild this segment's .txnindex (LogLoader.recoverLog "
    "recovers the segments from the recovery point on); a clean one would not: ",
}
_REPLICA = ["broker", "topic", "partition"]
#: the columns of the ended transactions the index checks compare (:func:`_held`)
_HELD = ["topic", "partition", "producer_id", "marker_offset", "control_type", "replicas", "open_replicas"]


def _held(ended: pa.Table) -> pa.Table:
    """One row per ended transaction and replica holding its marker (in ``replicas``, not in ``open_replicas``):
    the transaction's row number (``row``), the replica (``broker``) and the columns the checks compare."""
    replicas, opens = ended.column("replicas").combine_chunks(), ended.column("open_replicas").combine_chunks()
    held = pa.table({"row": pc.list_parent_indices(replicas).cast(pa.int64()), "broker": pc.list_flatten(replicas)})
    open_pairs = pa.table({"row": pc.list_parent_indices(opens).cast(pa.int64()), "broker": pc.list_flatten(opens)})
    if open_pairs.num_rows:  # a join keeps no order: back to the rows' order
        held = held.join(open_pairs, ["row", "broker"], join_type="left anti")
        held = held.sort_by([("row", "ascending"), ("broker", "ascending")])
    keys = ended.select(["topic", "partition", "producer_id", "marker_offset", "control_type"])
    flat = keys.take(held.column("row"))
    return flat.append_column("broker", held.column("broker")).append_column("row", held.column("row"))


def _whole(txns: pa.Table, picked: np.ndarray, held: pa.Table) -> pa.Table:
    """The transactions of ``held``'s rows (rows of ``txns``' rows ``picked``), whole but their lists, each with
    its ``held`` row's replica."""
    at = pa.array(picked[held.column("row").to_numpy()] if held.num_rows else np.zeros(0, np.int64))
    flat = txns.drop_columns(["replicas", "open_replicas"]).take(at)
    return flat.append_column("broker", held.column("broker")).append_column("row", held.column("row"))


def index_rows(
    txns: pa.Table, index: pa.Table, segments: pa.Table, owners: Callable[[], pa.Table]
) -> list[dict[str, Any]]:
    """``ABORTED_DATA_VISIBLE``, ``COMMITTED_DATA_HIDDEN`` and ``INDEX_NOT_CHECKED`` rows. Only the ended
    transactions an index check can name are taken whole: those ended by an ABORT marker (an entry must list
    them) and those of the producers the entries list (an entry may hide them)."""
    seg = segments.sort_by([(c, "ascending") for c in _REPLICA] + [("base_offset", "ascending")])
    is_ended = replicas.ended(txns)
    row_ok = replicas.copied_rows(txns, seg)
    rows = [_not_checked_row(t, p) for t, p in replicas.unchecked(txns, is_ended, seg, row_ok)]
    named = pc.is_in(replicas.producer_keys(txns), value_set=replicas.producer_keys(index))
    abort = pc.equal(txns.column("control_type"), int(ControlType.ABORT))
    wanted = np.asarray(pc.fill_null(pc.or_(abort, named), False).to_numpy(), bool) & is_ended
    picked = np.flatnonzero(wanted)
    held = _held(txns.select(_HELD).take(pa.array(picked)))
    # the replicas whose segment files the input holds (as key_codes(held, _REPLICA, seg) finds them)
    copied = row_ok[picked[held.column("row").to_numpy()]] & replicas.copied_brokers(held.column("broker"), seg)
    held = held.filter(pa.array(copied))
    is_abort = pc.equal(held.column("control_type"), int(ControlType.ABORT))
    aborts = held.filter(is_abort)
    ends = ["broker", "topic", "partition", "producer_id", "last_offset"]
    entries = index.select([*ends, "first_offset", "segment_offset"]).rename_columns(
        [*ends[:-1], "entry_last", "entry_first", "segment_offset"]
    )
    entries = entries.append_column("prior_lso", pa.array(_prior_lso(index), pa.int64()))
    abort_ends = aborts.select(ends[:-1] + ["marker_offset"]).rename_columns(ends[:-1] + ["entry_last"])
    unlisted = aborts.join(entries.select(ends[:-1] + ["entry_last"]), ends[:-1] + ["marker_offset"],
                           right_keys=ends[:-1] + ["entry_last"], join_type="left anti")  # fmt: skip
    if unlisted.num_rows:
        unlisted = _whole(txns, picked, unlisted.sort_by([("row", "ascending"), ("broker", "ascending")]))
        base, has_file, restart = _segments_of(seg, unlisted)
        names = _owner_names(unlisted, owners())
        for t, b, f, r, n in zip(unlisted.to_pylist(), base, has_file, restart, names, strict=True):
            rows.append(_visible_row(t, int(b), not f, r, n))
    false = entries.join(abort_ends, ends[:-1] + ["entry_last"], join_type="left anti")
    if false.num_rows:
        false = _read(false, seg)
    if false.num_rows:
        rows += _hidden_rows(false, txns, picked, held, owners())
    return rows


def _prior_lso(index: pa.Table) -> np.ndarray:
    """Per entry of ``index`` (each file's entries together, in file order): the highest last stable offset of
    the entries before it in its file, -1 for a file's first."""
    n = index.num_rows
    out = np.full(n, -1, np.int64)
    if n < 2:
        return out
    cols = ["broker", "topic", "partition", "segment_offset"]
    head, tail = index.select(cols).slice(0, n - 1), index.select(cols).slice(1)
    change = np.zeros(n - 1, bool)
    for c in cols:
        change |= np.asarray(pc.fill_null(pc.not_equal(head.column(c), tail.column(c)), True).to_numpy(), bool)
    lso = index.column("last_stable_offset").to_numpy().astype(np.int64)
    for group in np.split(np.arange(n), np.flatnonzero(change) + 1):
        if group.size > 1:
            out[group[1:]] = np.maximum.accumulate(lso[group[:-1]])
    return out


def _read(false: pa.Table, seg: pa.Table) -> pa.Table:
    """The entries of ``false`` some read_committed fetch reads, with ``partial`` where some fetches do not.
    ``TransactionIndex.collectAbortedTxns`` stops at the first entry whose last stable offset is at or above the
    fetch's upper bound, which is at most the next segment's base offset (``LocalLog.addAbortedTransactions``):
    an entry after one whose last stable offset reaches that is never read; after one above the entry's first
    offset, it is read or not depending on where the fetch ends."""
    nxt: dict[tuple[str, str, int, int], int] = {}
    wanted = set(zip(*(false.column(c).to_pylist() for c in _REPLICA), strict=True))
    for replica, bases in _bases(seg, wanted).items():
        nxt.update({(*replica, a): b for a, b in zip(bases, bases[1:], strict=False)})
    ends = [
        nxt.get((b, t, p, o), -1)
        for b, t, p, o in zip(*(false.column(c).to_pylist() for c in [*_REPLICA, "segment_offset"]), strict=True)
    ]
    prior = false.column("prior_lso").to_numpy().astype(np.int64)
    shadowed = (np.asarray(ends, np.int64) >= 0) & (prior >= np.asarray(ends, np.int64))
    first = false.column("entry_first").to_numpy().astype(np.int64)
    return false.append_column("partial", pa.array(prior > first)).filter(pa.array(~shadowed))


def _bases(seg: pa.Table, wanted: set[tuple[Any, ...]]) -> dict[tuple[Any, ...], list[int]]:
    """The sorted segment base offsets of the ``wanted`` replicas (``seg`` sorted by replica, base offset)."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for b, t, p, base in zip(*(seg.column(c).to_pylist() for c in [*_REPLICA, "base_offset"]), strict=True):
        if (b, t, p) in wanted:
            out.setdefault((b, t, p), []).append(base)
    return out


def _owner_names(rows: pa.Table, owners: pa.Table) -> list[str | None]:
    if not rows.num_rows or not owners.num_rows:
        return [None] * rows.num_rows
    found = pc.index_in(rows.column("producer_id"), value_set=owners.column("producer_id"))
    return owners.column("transactional_id").take(found).to_pylist()


def _segments_of(seg: pa.Table, rows: pa.Table) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """For each row of ``rows`` (a replica's ABORT marker at ``marker_offset``): the base offset of the segment
    of its replica that holds the marker (the last one starting at or before it, else the first), whether a
    ``.txnindex`` is beside it, and :func:`_restart`'s answer."""
    replica = np.asarray(key_codes(seg, _REPLICA, seg).to_numpy(zero_copy_only=False), np.int64)
    wanted = np.asarray(key_codes(rows, _REPLICA, seg).to_numpy(zero_copy_only=False), np.int64)
    bases = seg.column("base_offset").to_numpy().astype(np.int64)
    offsets = rows.column("marker_offset").to_numpy().astype(np.int64)
    ranks = np.unique(np.concatenate([bases, offsets]))
    width = ranks.size + 1
    keys = replica * width + np.searchsorted(ranks, bases)  # sorted: seg is by replica then base offset
    first = np.searchsorted(replica, wanted, "left")
    last = np.searchsorted(replica, wanted, "right") - 1
    at = np.clip(np.searchsorted(keys, wanted * width + np.searchsorted(ranks, offsets), "right") - 1, first, last)
    has_file = np.asarray(pc.fill_null(seg.column("has_txnindex"), False).to_numpy(zero_copy_only=False), bool)[at]
    following = np.where(at < last, bases[np.minimum(at + 1, bases.size - 1)], -1)
    recovery = seg.column("recovery_point").take(pa.array(at)).to_pylist()
    restart = [
        "NO" if point is not None and nxt >= 0 and nxt <= point else "UNCLEAN_RESTART"
        for point, nxt in zip(recovery, following.tolist(), strict=True)
    ]
    return bases[at], has_file, restart


def _hidden_rows(
    false: pa.Table, txns: pa.Table, picked: np.ndarray, held: pa.Table, owners: pa.Table
) -> list[dict[str, Any]]:
    """The producer's committed transactions an index entry that ends at no ABORT marker hides: up to the entry's
    last offset in every fetch, after it up to the producer's next ABORT marker only within the same fetch."""
    on = ["broker", "topic", "partition", "producer_id"]
    false = false.append_column("entry", pa.array(np.arange(false.num_rows, dtype=np.int64)))
    pairs = false.join(held.select([*on, "row", "marker_offset", "control_type"]), on, join_type="inner")
    pairs = pairs.filter(pc.greater_equal(pairs.column("marker_offset"), pairs.column("entry_first")))
    is_abort = pc.equal(pairs.column("control_type"), int(ControlType.ABORT))
    stop = pc.if_else(is_abort, pairs.column("marker_offset"), pa.scalar(None, pa.int64()))
    cut = pairs.append_column("stop", stop).group_by("entry").aggregate([("stop", "min")])
    cutoff = cut.column("stop_min").take(pc.index_in(pairs.column("entry"), value_set=cut.column("entry")))
    keep = pc.and_(pc.invert(is_abort), pc.fill_null(pc.less(pairs.column("marker_offset"), cutoff), True))
    order = [("entry_last", "ascending"), ("entry", "ascending"), ("marker_offset", "ascending")]
    pairs = pairs.filter(keep).sort_by(order)
    if not pairs.num_rows:
        return []
    whole = _whole(txns, picked, held.filter(pc.is_in(held.column("row"), value_set=pairs.column("row"))))
    lookup = {(t["row"], t["broker"]): t for t in whole.to_pylist()}
    names = dict(zip(owners.column("producer_id").to_pylist(), owners.column("transactional_id").to_pylist()))
    return [_hidden_row(e, lookup[(e["row"], e["broker"])], names.get(e["producer_id"])) for e in pairs.to_pylist()]


def _common(t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
    return {
        "topic": t["topic"],
        "partition": t["partition"],
        "replica": t["broker"],
        "producer_id": t["producer_id"],
        "producer_epoch": t.get("producer_epoch"),
        "transactional_id": txn_id,
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


def _visible_row(t: dict[str, Any], base: int, missing_file: bool, restart: str, txn_id: str | None) -> dict[str, Any]:
    broker = t["broker"]
    where = (
        f"segment {base} of {broker} has no .txnindex file"
        if missing_file
        else f"the .txnindex of segment {base} on {broker} lists no aborted transaction ending at {t['marker_offset']}"
    )
    return {
        **_common(t, txn_id),
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


def _hidden_row(e: dict[str, Any], t: dict[str, Any], txn_id: str | None) -> dict[str, Any]:
    pid, first, last = e["producer_id"], e["entry_first"], e["entry_last"]
    certain = t["last_offset"] <= last and not e["partial"]
    return {
        **_common(t, txn_id),
        "check": COMMITTED_DATA_HIDDEN,
        "severity": ERROR if certain else WARNING,
        "consumers_received": NONE if certain else DEPENDS,
        "consumers_should_receive": ALL,
        "restart_repairs": "NO",
        "evidence": f"the .txnindex of segment {e['segment_offset']} on {t['broker']} lists producer {pid} as "
        f"aborted over {first}..{last}, but its transaction at {t['first_offset']}..{t['last_offset']} ended "
        f"with a COMMIT marker at {t['marker_offset']}: "
        + (
            "a read_committed consumer drops its records whatever its fetches."
            if certain
            else "a read_committed consumer drops its records when one fetch holds them and the entry's "
            "range (the consumer forgets the producer only at its next ABORT marker)."
        )
        + (
            " An entry before it in the file has a higher last stable offset: the broker's scan stops there for a "
            "fetch ending at or below it (TransactionIndex.collectAbortedTxns), so it depends on where fetches end."
            if e["partial"]
            else ""
        ),
        "advice": "a restart does not repair it (LogLoader keeps a .txnindex that passes "
        "TransactionIndex.sanityCheck): consumers that read this range from this replica skipped committed "
        "records; re-read it once the index is rebuilt (remove the segment's index files and restart the "
        "broker without a clean-shutdown file).",
    }


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
