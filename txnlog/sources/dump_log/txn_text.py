"""``__transaction_state`` record lines of ``kafka-dump-log.sh --transaction-log-decoder`` → the TXN_STATE
fields: the Scala text of Kafka 3.x and the JSON of 4.x (``TransactionLogMessageFormatter``), tombstones
included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka import dump_log_text as D
from txnlog.sources.dump_log.spark_text import from_json, groups, match, np_bool, pick, spread, try_int

_KEY_JSON = pa.struct([("type", pa.string()), ("data", pa.struct([("transactionalId", pa.string())]))])
_PARTITIONS_JSON = pa.list_(pa.struct([("topic", pa.string()), ("partitionIds", pa.list_(pa.int32()))]))
_VALUE_JSON = pa.struct(
    [
        ("version", pa.string()),
        ("type", pa.string()),
        (
            "data",
            pa.struct(
                [
                    ("producerId", pa.int64()),
                    ("previousProducerId", pa.int64()),
                    ("nextProducerId", pa.int64()),
                    ("producerEpoch", pa.int32()),
                    ("nextProducerEpoch", pa.int32()),
                    ("transactionTimeoutMs", pa.int64()),
                    ("transactionStatus", pa.string()),
                    ("transactionPartitions", _PARTITIONS_JSON),
                    ("transactionLastUpdateTimestampMs", pa.int64()),
                    ("transactionStartTimestampMs", pa.int64()),
                    ("clientTransactionVersion", pa.int32()),
                ]
            ),
        ),
    ]
)


def _state_ids(names: pa.Array) -> pa.Array:
    """The TransactionStatus id of each state name (null for any other text)."""
    found = pc.index_in(names, pa.array(list(D.STATE_IDS), pa.string()))
    return pa.array(list(D.STATE_IDS.values()), pa.int32()).take(found)


def _json_partitions(parts: pa.Array) -> pa.Array:
    """``transactionPartitions`` → ``["topic-p", ..]`` (null when it or any entry's partitionIds is null)."""
    n = len(parts)
    entries = parts.flatten()
    entry_row = np.asarray(pc.list_parent_indices(parts).to_numpy(zero_copy_only=False), np.int64)
    topic, ids = entries.flatten()
    bad = np.zeros(n, bool)
    bad[entry_row[np_bool(ids.is_null())]] = True
    id_entry = np.asarray(pc.list_parent_indices(ids).to_numpy(zero_copy_only=False), np.int64)
    names = pc.binary_join_element_wise(
        topic.take(pa.array(id_entry, pa.int64())), pc.cast(ids.flatten(), pa.string()), "-"
    )
    counts = np.bincount(entry_row[id_entry], minlength=n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    valid = np_bool(parts.is_valid()) & ~bad
    return pa.ListArray.from_arrays(pa.array(offsets), names, mask=pa.array(~valid))


def txn_fields(lines: pa.Array) -> dict[str, pa.Array]:
    """``__transaction_state`` record lines → TXN_STATE fields (the 3.x Scala text or the 4.x JSON)."""
    n = len(lines)
    scala_key, scala_val = groups(lines, D.TXN_SCALA)
    is_scala = match(lines, D.TXN_SCALA)
    json_key, json_val = groups(lines, D.TXN_JSON)
    is_json = ~is_scala & match(lines, D.TXN_JSON)
    tomb = np.where(is_scala, np_bool(pc.equal(scala_val, "<DELETE>")), np_bool(pc.equal(json_val, "<DELETE>")))
    sc = is_scala & ~tomb
    js = is_json & ~tomb
    sv = groups(scala_val, D.TXN_SCALA_VALUE)
    ji = np.flatnonzero(is_json)
    jv_i = np.flatnonzero(js)
    key_full = spread(from_json(json_key.take(pa.array(ji, pa.int64())), _KEY_JSON), ji, n)
    value_full = spread(from_json(json_val.take(pa.array(jv_i, pa.int64())), _VALUE_JSON), jv_i, n)
    kf = key_full.flatten()  # type, data
    vf = dict(zip(["version", "type", "data"], value_full.flatten(), strict=True))
    data = dict(zip([f.name for f in _VALUE_JSON["data"].type], vf["data"].flatten(), strict=True))

    def field(name: str, typ: pa.DataType, default: int | None = None) -> pa.Array:
        """The JSON value's ``data.<name>`` (or ``default`` when it is absent: a tagged field)."""
        value = data[name] if default is None else pc.coalesce(data[name], pa.scalar(default, data[name].type))
        return pick(n, typ, (js, value))

    def coalesce(typ: pa.DataType, *values: pa.Array) -> pa.Array:
        return pc.coalesce(*[v.cast(typ) for v in values])

    status = data["transactionStatus"]
    scala_parts = sv[3]
    scala_list = pick(
        n,
        pa.list_(pa.string()),
        (np_bool(pc.equal(scala_parts, "")), pa.array([[]] * n, pa.list_(pa.string()))),
        (np.ones(n, bool), pc.split_pattern(scala_parts, ",")),
    )
    return {
        "txn_decoded": pa.array(is_scala | is_json),
        "transactional_id": pick(n, pa.string(), (is_scala, scala_key), (is_json, kf[1].flatten()[0])),
        "is_tombstone": pa.array(tomb),
        "key_version": pick(
            n, pa.int32(), (is_scala, pa.array(np.zeros(n, np.int32))), (is_json, try_int(kf[0], pa.int32()))
        ),
        "value_version": pick(n, pa.int32(), (js, try_int(pc.coalesce(vf["version"], vf["type"]), pa.int32()))),
        "producer_id": coalesce(
            pa.int64(), pick(n, pa.int64(), (sc, try_int(sv[0], pa.int64()))), field("producerId", pa.int64())
        ),
        "producer_epoch": coalesce(
            pa.int32(), pick(n, pa.int32(), (sc, try_int(sv[1], pa.int32()))), field("producerEpoch", pa.int32())
        ),
        "timeout_ms": coalesce(
            pa.int64(),
            pick(n, pa.int64(), (sc, try_int(sv[5], pa.int64()))),
            field("transactionTimeoutMs", pa.int64()),
        ),
        "state": coalesce(
            pa.int32(),
            pick(n, pa.int32(), (sc, _state_ids(sv[2]))),
            pick(n, pa.int32(), (js, try_int(status, pa.int32()))),
            pick(n, pa.int32(), (js, _state_ids(status))),
        ),
        "partitions": pick(
            n, pa.list_(pa.string()), (sc, scala_list), (js, _json_partitions(data["transactionPartitions"]))
        ),
        "last_update_timestamp": coalesce(
            pa.int64(),
            pick(n, pa.int64(), (sc, try_int(sv[4], pa.int64()))),
            field("transactionLastUpdateTimestampMs", pa.int64()),
        ),
        "txn_start_timestamp": field("transactionStartTimestampMs", pa.int64()),
        "previous_producer_id": field("previousProducerId", pa.int64(), default=-1),
        "next_producer_id": field("nextProducerId", pa.int64(), default=-1),
        "next_producer_epoch": field("nextProducerEpoch", pa.int32(), default=-1),
        "client_transaction_version": field("clientTransactionVersion", pa.int32(), default=0),
    }
