"""``MARKER_MISSING``: a transaction the coordinator completed whose marker one of its partitions never received,
the partition's log going on past it (docs/integrity.md).

The coordinator writes Complete* only after every partition its Prepare* lists acknowledged the marker
(``TransactionMarkerChannelManager``, ``TransactionMetadata.prepareComplete``), so such a partition lost it: the
producer's data there stays open, pins the last stable offset, and read_committed consumers of the partition
receive nothing from its first offset on.

The pairing is the coordinator pairing of txnlog.rules.integrity_producers (the decisions naming the partition
ranked from the newest), here with the producer's open transaction on the partition, which is always its newest
there. Producer id and epoch do not identify a transaction, but a marker carries its Prepare*'s epoch under
every transaction version, and the data the epoch before it (transaction version 2, and a coordinator's
fencing abort) or the same epoch (versions 0 and 1). So the open transaction is the newest decision's, its
marker missing, when

* its data epoch is the decision's or the one before it, and
* the producer's previous marker on the partition carries an epoch below the decision's, or there is none: a
  marker at the decision's epoch may be the decision's own, and then the open data came after it (a late batch,
  KAFKA-14053: the coordinator knows nothing of it; the findings report it as hanging);
* the partition's log goes on past it (a later marker of any producer).

Under versions 0 and 1 consecutive transactions share the epoch, so a lost marker whose producer wrote the same
partition in its previous transaction cannot be told from a late batch: no row, the findings report the hanging
transaction. A lost marker whose producer wrote the partition again before the coordinator's records end merges
the two transactions' data into one transaction the next marker ends: not told either.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import ControlType
from txnlog.model import contract
from txnlog.rules.integrity_producers import ALL, ERROR, NONE, Decisions, keyed, paired, txn_columns

__all__ = ["MARKER_MISSING", "marker_rows"]

MARKER_MISSING = contract.IntegrityCheck.MARKER_MISSING.value


def marker_rows(
    txns: pa.Table, decided: Decisions, coded: tuple[Any, Any] | None = None
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """``MARKER_MISSING`` rows of ``txns`` (the transactions of whole partitions) against ``decided``, and the
    decisions' keys they name (their ended transactions pair from the second newest decision); ``coded``:
    txnlog.rules.integrity_producers.codes of ``txns``, if known."""
    d = decided.decided
    none = np.zeros(0, np.int64)
    if not d.num_rows or not txns.num_rows:
        return [], none
    kept, key = keyed(txns, decided, ended=False, coded=coded)
    hit, found = paired(d, key, np.zeros(key.size, np.int64))
    kept, key, found = kept[hit], key[hit], found[hit]
    if not kept.size:
        return [], none
    prepare = d.column("prepare").to_numpy().astype(np.int64)[found]
    decided_epoch = decided.prepares.column("producer_epoch").take(pa.array(prepare))
    known = np.asarray(pc.is_valid(decided_epoch).to_numpy(zero_copy_only=False), bool)
    e_d = np.asarray(pc.fill_null(decided_epoch, -1).to_numpy(zero_copy_only=False), np.int64)
    e_o = _values(txns.column("producer_epoch"), kept, -2)
    e_m = _values(txns.column("prev_marker_epoch"), kept, -1)
    after = _last_marker(txns, kept)
    past = after > _values(txns.column("last_offset"), kept, 0)
    lost = known & (e_o >= e_d - 1) & (e_o <= e_d) & (e_m < e_d) & past
    if not lost.any():
        return [], none
    rows = txns.take(pa.array(kept[lost]))
    rows = rows.append_column("decided", d.column("decided").take(pa.array(found[lost])))
    where = decided.prepares.take(pa.array(prepare[lost]))
    for name in ("transactional_id", "coordinator_partition", "record_offset"):
        rows = rows.append_column(name, where.column(name))
    rows = rows.append_column("decided_epoch", where.column("producer_epoch"))
    rows = rows.append_column("listed", decided.listed(where))
    rows = rows.append_column("after", pa.array(after[lost], pa.int64()))
    rows = rows.sort_by([("topic", "ascending"), ("partition", "ascending"), ("first_offset", "ascending")])
    return [_missing_row(r) for r in rows.to_pylist()], np.unique(key[lost])


def _values(column: pa.ChunkedArray | pa.Array, rows: np.ndarray, null: int) -> np.ndarray:
    """``column``'s values at ``rows`` as int64, ``null`` where it is null."""
    return np.asarray(pc.fill_null(column, null).to_numpy(zero_copy_only=False), np.int64)[rows]


def _last_marker(txns: pa.Table, rows: np.ndarray) -> np.ndarray:
    """For ``rows`` of ``txns``: the offset of the last marker (any producer's) on their partition, -1 if none."""
    on = ["topic", "partition"]
    last = txns.group_by(on).aggregate([("marker_offset", "max")])
    codes = pc.binary_join_element_wise(
        txns.column("topic"), pc.cast(txns.column("partition"), pa.string()), "\x00"
    ).take(pa.array(rows))
    theirs = pc.binary_join_element_wise(last.column("topic"), pc.cast(last.column("partition"), pa.string()), "\x00")
    at = pc.index_in(codes, value_set=theirs)
    return np.asarray(pc.fill_null(last.column("marker_offset_max").take(at), -1).to_numpy(zero_copy_only=False))


def _missing_row(r: dict[str, Any]) -> dict[str, Any]:
    decided = "COMMIT" if r["decided"] == ControlType.COMMIT else "ABORT"
    if decided == "ABORT":
        advice = (
            "write the missing ABORT marker: kafka-transactions.sh abort --topic {t} --partition {p} --producer-id "
            "{pid} --producer-epoch {e} --coordinator-epoch <the coordinator's epoch> (what the coordinator decided: "
            "the partitions agree again and the last stable offset moves on)."
        )
    else:
        advice = (
            "no tool writes a COMMIT marker: aborting it (kafka-transactions.sh abort --topic {t} --partition {p} "
            "--producer-id {pid} --producer-epoch {e} ...) releases the partition's read_committed consumers but "
            "drops records the transaction's other partitions committed; re-produce them from the source first."
        )
    epoch = r["decided_epoch"]
    return {
        **txn_columns(r, r["transactional_id"]),
        "check": MARKER_MISSING,
        "severity": ERROR,
        "consumers_received": NONE,
        "consumers_should_receive": ALL if decided == "COMMIT" else NONE,
        "restart_repairs": "NO",
        "kafka_class": "TransactionMetadata.prepareComplete, TransactionMarkerChannelManager, ProducerStateManager",
        "evidence": f"the coordinator ({r['transactional_id']}, __transaction_state-{r['coordinator_partition']} "
        f"offset {r['record_offset']}) decided {decided} at epoch {epoch} for {r['listed']} and completed it, but "
        f"this partition holds producer {r['producer_id']}'s data at {r['first_offset']}..{r['last_offset']} "
        f"(epoch {r['producer_epoch']}) with no marker, while its log goes on to offset {r['after']}: the marker "
        "was lost, the transaction stays open here and pins the last stable offset, so read_committed consumers "
        "receive nothing of this partition from its first offset on.",
        "advice": advice.format(t=r["topic"], p=r["partition"], pid=r["producer_id"], e=r["producer_epoch"]),
    }
