"""The committed offsets of one ``__consumer_offsets`` partition, replayed as the group coordinator replays them.

The rule is Kafka's ``OffsetMetadataManager.replay`` and ``OffsetMetadataManager.replayEndTransactionMarker``
(group-coordinator), applied in log order to the partition's decoded OffsetCommit records
(:func:`txnlog.kafka.consumer_offsets.decode_records`) and its COMMIT/ABORT markers:

* a commit from a batch without a producer (``producerId == NO_PRODUCER_ID``) sets the group's offset of the
  topic partition;
* a commit from a producer's batch (``TxnOffsetCommit``) is *pending* for that producer until its marker;
  a later pending commit of the same producer, group and partition replaces it;
* a tombstone removes the committed offset and the pending ones of every open transaction of the group;
* a COMMIT marker moves the producer's pending offsets to the committed ones, each only if its record offset
  is above the committed offset's record offset (so a plain commit written after the transactional one
  wins); an ABORT marker drops them; a marker of a producer with nothing pending does nothing.

Groups are told apart by their bytes as stored. One partition at a time: a marker ends only the pending
offsets of the partition it is written in, as each coordinator replays its own partition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The control types of the COMMIT/ABORT markers (``ControlRecordType``).
_ABORT, _COMMIT = 0, 1
_OFFSET_COMMIT_TYPES = (0, 1)

#: One row per committed offset (``state`` "committed", ``producer_id`` null) and per pending transactional
#: one (``state`` "pending", the producer whose transaction holds it), as of the partition's last record.
OFFSETS_SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("group_bytes", pa.large_binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("state", pa.string()),
        ("producer_id", pa.int64()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
        ("record_offset", pa.int64()),  # the offset of the OffsetCommit record in __consumer_offsets
    ]
)
_VALUE = ("group", "topic", "committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp")

Key = tuple[bytes, str, int]


Event = tuple[int, int, dict[str, Any] | None, int]


def _events(rows: pa.Table, markers: pa.Table) -> list[Event]:
    """(offset, producer, row, control type) in log order: a commit or tombstone has its row (control -1), a
    marker none."""
    out: list[Event] = [(r["offset"], r["producer_id"], r, -1) for r in rows.to_pylist()]
    for m in markers.to_pylist():
        if m["control_type"] in (_ABORT, _COMMIT):
            out.append((m["offset"], m["producer_id"], None, m["control_type"]))
    out.sort(key=lambda e: e[0])
    return out


_KEY = ["group_bytes", "topic", "partition"]
_SORT = [("group_bytes", "ascending"), ("topic", "ascending"), ("partition", "ascending"), ("state", "ascending")]


def replay_offsets(decoded: pa.Table, markers: pa.Table) -> pa.Table:
    """The committed and pending offsets (:data:`OFFSETS_SCHEMA`) of one ``__consumer_offsets`` partition from
    its decoded records (:data:`txnlog.kafka.consumer_offsets.DECODED_SCHEMA`) and its markers
    (:data:`txnlog.kafka.consumer_offsets_scan.MARKERS_SCHEMA`).

    A key (group, topic, partition) that no producer's batch commits has no pending offsets and no marker
    touches it: its state is its last record (a commit, or a tombstone: none), found at once for all such
    keys. The keys a producer committed are replayed record by record with the markers."""
    commits = decoded.filter(pc.is_in(decoded["record_type"], pa.array(_OFFSET_COMMIT_TYPES, pa.int16())))
    commits = commits.append_column("_i", pa.array(np.arange(commits.num_rows, dtype=np.int64)))
    txn_keys = commits.filter(pc.not_equal(commits["producer_id"], -1)).select(_KEY).group_by(_KEY).aggregate([])
    plain, mixed = commits.select([*_KEY, "_i"]), commits.slice(0, 0)
    if txn_keys.num_rows:
        mixed_rows = plain.join(txn_keys, _KEY, join_type="left semi")["_i"].to_numpy()
        plain = plain.join(txn_keys, _KEY, join_type="left anti")
        mixed = commits.take(pa.array(np.sort(mixed_rows)))
    last = commits.take(plain.group_by(_KEY, use_threads=False).aggregate([("_i", "max")])["_i_max"])
    last = last.filter(pc.invert(last["is_tombstone"]))
    n = last.num_rows
    fast = pa.table(
        {
            **{name: last[name] for name in ("group_bytes", "topic", "partition", *_VALUE)},
            "state": pa.array(["committed"] * n, pa.string()),
            "producer_id": pa.nulls(n, pa.int64()),
            "record_offset": last["offset"],
        }
    ).select(OFFSETS_SCHEMA.names)
    out = pa.concat_tables([fast.cast(OFFSETS_SCHEMA), _replay_each(mixed, markers)])
    return out.sort_by([*_SORT, ("producer_id", "ascending")])


def _replay_each(rows: pa.Table, markers: pa.Table) -> pa.Table:
    """:func:`replay_offsets` record by record, as ``OffsetMetadataManager`` does, over ``rows`` (commits in log
    order) and the markers."""
    committed: dict[Key, dict[str, Any]] = {}
    pending: dict[int, dict[Key, dict[str, Any]]] = {}  # producer id -> its pending offsets
    open_by_group: dict[bytes, set[int]] = {}  # group -> producers with pending offsets of it
    for offset, producer, row, control in _events(rows, markers):
        if row is None:
            offsets = pending.pop(producer, None)
            if offsets is None:
                continue  # "no pending offsets are present. Ignoring it."
            for group, _topic, _partition in offsets:
                producers = open_by_group.get(group)
                if producers is not None:
                    producers.discard(producer)
                    if not producers:
                        del open_by_group[group]
            if control == _COMMIT:
                for key, value in offsets.items():
                    existing = committed.get(key)
                    if existing is None or value["record_offset"] > existing["record_offset"]:
                        committed[key] = value
            continue
        key = (row["group_bytes"], row["topic"], row["partition"])
        if not row["is_tombstone"]:
            value = {name: row[name] for name in _VALUE}
            value["record_offset"] = offset
            if producer == -1:  # RecordBatch.NO_PRODUCER_ID
                committed[key] = value
            else:
                pending.setdefault(producer, {})[key] = value
                open_by_group.setdefault(key[0], set()).add(producer)
            continue
        committed.pop(key, None)
        for open_producer in open_by_group.get(key[0], ()):
            pending.get(open_producer, {}).pop(key, None)
    out = [_out(key, v, "committed", None) for key, v in committed.items()]
    out += [_out(key, v, "pending", producer) for producer, offsets in pending.items() for key, v in offsets.items()]
    return pa.Table.from_pylist(out, schema=OFFSETS_SCHEMA)


def _out(key: Key, value: dict[str, Any], state: str, producer: int | None) -> dict[str, Any]:
    return {
        **value,
        "group_bytes": key[0],
        "partition": key[2],
        "state": state,
        "producer_id": producer,
    }
