"""The partitions' producer state (the ``producer_state`` table) from the segments source's rows.

Every segment leaves one ``producer`` row per producer id (:func:`txnlog.broker.producer_state.segment_producers`),
wherever it was decoded, and every producer snapshot its entries (``snapshot`` rows, or ``producer`` rows
with ``snapshot_offset`` set where the decode task merged the transactions itself). They are grouped by
partition — all replicas, whichever tasks decoded them — and reduced by
:func:`txnlog.broker.producer_state.leader_producers`: the state of the partition's most advanced replica, the
one whose offsets ``partition_health`` reports (the leader answers DescribeProducers:
``ReplicaManager.activeProducerState`` → ``Partition.activeProducerState`` → ``UnifiedLog.activeProducers``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.broker import classify
from txnlog.broker import producer_state as P
from txnlog.broker import reconstruct as R
from txnlog.model.arrow import Shaped, filled, is_true, left_join, validity
from txnlog.model.times import timestamps as _ts  # epoch ms → UTC timestamps, the tables' rule
from txnlog.rules.transactions import Checkpoints

#: one row per producer id of a partition, on its leader, before expiry (times in epoch ms)
PRODUCER_ROWS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("replica", pa.string()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("last_sequence", pa.int32()),
        ("last_timestamp_ms", pa.int64()),
        ("coordinator_epoch", pa.int32()),
        ("last_offset", pa.int64()),
        ("from_snapshot", pa.bool_()),
    ]
)

#: the summary rows the reduction reads
KINDS = ("producer", "snapshot", "segment")
SUMMARY_COLUMNS = (
    "kind",
    "broker",
    "topic",
    "partition",
    "file_offset",
    "snapshot_offset",
    "first_offset",  # a snapshot entry's CurrentTxnFirstOffset
    *P.PRODUCER_COLUMNS,
)


def producers_of_summary(table: pa.Table, checkpoints: Checkpoints, *, expiry_gap_ms: int | None = None) -> pa.Table:
    """``producer``, ``snapshot`` and ``segment`` rows of whole partitions (every replica) → their
    leaders' producer state (:data:`PRODUCER_ROWS`); other kinds are ignored. ``expiry_gap_ms``: the idle time
    after which a running leader's periodic check certainly removed a producer between two of its batches
    (:func:`txnlog.broker.producer_state.leader_producers`; None: never)."""
    table = table.filter(
        pc.and_(
            pc.is_in(table.column("kind"), pa.array(list(KINDS))),
            pc.and_(pc.is_valid(table.column("topic")), pc.is_valid(table.column("partition"))),
        )
    )
    if table.num_rows == 0:
        return PRODUCER_ROWS.empty_table()
    broker = table.column("broker").to_pylist()
    topic = table.column("topic").to_pylist()
    partition = table.column("partition").to_pylist()
    names = sorted({(t, int(p), b) for b, t, p in zip(broker, topic, partition, strict=True)})
    index = {key: i for i, key in enumerate(names)}
    partitions = sorted({(t, p) for t, p, _ in names})
    tp_index = {tp: i for i, tp in enumerate(partitions)}
    replica = np.array([index[(t, int(p), b)] for b, t, p in zip(broker, topic, partition, strict=True)], np.int64)
    kind = table.column("kind").to_numpy(zero_copy_only=False)
    snapshot_offset = R.arrow_col(table, "snapshot_offset", np.dtype(np.int64))
    seg = kind == "segment"
    event = (kind == "producer") & ~snapshot_offset[1]
    snap = (kind == "snapshot") | ((kind == "producer") & snapshot_offset[1])

    ck = [checkpoints.get((b, t, p), (None, False, None)) for t, p, b in names]
    base = R.arrow_col(table, "file_offset", np.dtype(np.int64))
    last = R.arrow_col(table, "last_offset", np.dtype(np.int64))
    replicas = R.replica_logs(
        np.array([tp_index[(t, p)] for t, p, _ in names], np.int32),
        replica[seg],
        base[0][seg],
        (last[0][seg], last[1][seg]),
        R.col(np.array([c[0] or 0 for c in ck], np.int64), np.array([c[0] is not None for c in ck], bool)),
        np.array([c[1] for c in ck], bool),
    )
    event_rows = table.filter(pa.array(event))
    events = {name: R.arrow_col(event_rows, name, dtype) for name, dtype in P.PRODUCER_COLUMNS.items()}
    events["replica"] = R.col(replica[event])
    snap_rows = table.filter(pa.array(snap))
    snaps = {
        name: R.arrow_col(snap_rows, name, np.dtype(dtype))
        for name, dtype in (
            ("file_offset", np.int64),
            ("producer_id", np.int64),
            ("producer_epoch", np.int32),
            ("last_sequence", np.int32),
            ("last_timestamp", np.int64),
            ("coordinator_epoch", np.int32),
            ("first_offset", np.int64),  # the entry's CurrentTxnFirstOffset
        )
    }
    # a snapshot entry printed without its sequence (an old kafka-dump-log.sh): none (-1)
    snaps["last_sequence"] = (
        np.where(snaps["last_sequence"][1], snaps["last_sequence"][0], -1),
        snaps["file_offset"][1],
    )
    snaps["replica"] = R.col(replica[snap])
    out = P.leader_producers(events, snaps, replicas, expiry_gap_ms=expiry_gap_ms)
    r = out["replica"][0].astype(np.int64)
    n = r.size
    columns = {
        "topic": pa.array([names[i][0] for i in r], pa.string()),
        "partition": pa.array([names[i][1] for i in r], pa.int32()),
        "replica": pa.array([names[i][2] for i in r], pa.string()),
        "last_timestamp_ms": pa.array(out["last_timestamp"][0], mask=~out["last_timestamp"][1]),
    }
    for name in ("producer_id", "producer_epoch", "last_sequence", "coordinator_epoch", "last_offset", "from_snapshot"):
        values, valid = out[name]
        columns[name] = pa.array(values, mask=~valid)
    if not n:
        return PRODUCER_ROWS.empty_table()
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in PRODUCER_ROWS], schema=PRODUCER_ROWS)


_renamed = {"first_offset_min": "current_txn_start_offset"}


def producer_state(txns: pa.Table, producers: pa.Table, health: pa.Table, thresholds: classify.Thresholds) -> Shaped:
    """The ``producer_state`` table: per partition, what DescribeProducers would have answered at as_of
    (txnlog.broker.producer_state), from the leaders' ``producers`` (:func:`producers_of_summary`), the ``txns``
    and the partitions' ``health`` (txnlog.rules.partitions.with_lso).

    The leader's producers (the most advanced replica's, as for ``partition_health``), each with the first
    offset of the transaction open on that replica (the transactions' merge's, so the same offset the
    findings and the LSO use), less the producers ``producer.id.expiration.ms`` removed: nothing open and
    ``last_timestamp + producer.id.expiration.ms ≤ as_of`` (``ProducerStateManager.isProducerExpired``; an
    unknown timestamp is Kafka's −1: expired)."""
    key = ["topic", "partition", "producer_id"]
    on_lead = txns.filter(is_true(txns.column("open_on_lead")))
    open_txn = on_lead.group_by(key, use_threads=False).aggregate([("first_offset", "min")])
    open_txn = open_txn.rename_columns([_renamed.get(c, c) for c in open_txn.column_names])
    rows = left_join(producers, open_txn, key)
    rows = left_join(rows, health, ["topic", "partition"], ["source"])

    gone = P.expired(
        filled(rows.column("last_timestamp_ms"), -1),  # unknown: Kafka's -1
        validity(rows.column("current_txn_start_offset")),
        thresholds.as_of_ms,
        thresholds.producer_id_expiration_ms,
    )
    rows = rows.filter(pa.array(~gone))
    return rows, {"last_timestamp": _ts(rows.column("last_timestamp_ms"))}
