"""How :mod:`txnlog.brokerlog.dense` lays one partition's rounds into its log: each round's data batches and
markers encoded at once (numpy, from pre-encoded payloads), whole rounds to a segment, each segment's
``.txnindex`` and the producers' state after its last round, as a broker's ``ProducerAppendInfo`` leaves it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import EncodedRecords, RecordSpec
from txnlog.brokerlog.partition import PartitionLog
from txnlog.kafka import wire
from txnlog.kafka.wire import ControlType


def marker_payload(control: ControlType, coordinator_epoch: int) -> EncodedRecords:
    """The one control record of an end-transaction marker (``encode_end_txn_marker_batch``'s record)."""
    key = encode.encode_control_record_key(control)
    value = encode.encode_end_txn_marker_value(coordinator_epoch)
    return encode.encode_records_payload([RecordSpec(0, 0, key, value)])


@dataclass
class Rounds:
    """One partition's rounds, [round, writer]: offsets, timestamps, epochs and outcome of each transaction."""

    ws: np.ndarray
    per: int
    base: np.ndarray
    first: np.ndarray
    marker: np.ndarray
    data_ts: np.ndarray
    marker_ts: np.ndarray
    epochs: np.ndarray
    m_epochs: np.ndarray
    committed: np.ndarray
    producer: np.ndarray
    coordinator_epochs: np.ndarray


def encode_rounds(
    log: PartitionLog, payload: EncodedRecords, r: Rounds, marker_payloads: dict[tuple[int, int], EncodedRecords]
) -> np.ndarray:
    """The rounds' bytes, one row per round: each writer's data batch, then each writer's marker."""
    k, m = r.first.shape
    data = encode.encode_data_batches(
        base_offsets=r.first.ravel(),
        payload=payload,
        base_timestamps=r.data_ts.ravel(),
        producer_ids=r.producer.ravel(),
        producer_epochs=r.epochs.ravel(),
        base_sequences=0,  # TV2: a new epoch per transaction, sequences start again at 0
        partition_leader_epoch=log.leader_epoch,
        is_transactional=True,
    )
    s = data.shape[1]
    markers: np.ndarray | None = None
    ce = np.broadcast_to(r.coordinator_epochs[r.ws], (k, m)).ravel()
    kind = np.where(r.committed.ravel(), int(ControlType.COMMIT), int(ControlType.ABORT))
    for control, epoch in sorted(set(zip(kind.tolist(), ce.tolist()))):
        pl = marker_payloads.get((control, epoch))
        if pl is None:
            pl = marker_payloads[(control, epoch)] = marker_payload(ControlType(control), epoch)
        sel = np.flatnonzero((kind == control) & (ce == epoch))
        rows = encode.encode_data_batches(
            base_offsets=r.marker.ravel()[sel],
            payload=pl,
            base_timestamps=r.marker_ts.ravel()[sel],
            producer_ids=r.producer.ravel()[sel],
            producer_epochs=r.m_epochs.ravel()[sel],
            base_sequences=wire.NO_SEQUENCE,
            partition_leader_epoch=log.leader_epoch,
            is_transactional=True,
            is_control=True,
        )
        if markers is None:
            markers = np.empty((k * m, rows.shape[1]), dtype=np.uint8)
        markers[sel] = rows
    assert markers is not None
    msize = markers.shape[1]
    units = np.empty((k, m * (s + msize)), dtype=np.uint8)
    units[:, : m * s] = data.reshape(k, m * s)
    units[:, m * s :] = markers.reshape(k, m * msize)
    return units


def append_rounds(log: PartitionLog, units: np.ndarray, r: Rounds, unit_last: np.ndarray) -> None:
    """The rounds' bytes into the log's segments, as many whole rounds to a segment as fit, each segment's
    .txnindex and the producers' state after its last round."""
    k, m = r.first.shape
    unit_size = units.shape[1]
    unit_max_ts = r.marker_ts[:, -1]
    done = 0
    while done < k:
        seg = log.active_segment
        room = (log.segment_bytes - seg.size) // unit_size
        if seg.size > 0 and room <= 0:
            log.roll(log.log_end_offset)  # snapshots the producer state of everything before it
            continue
        n = min(k - done, max(room, 1))
        end = done + n
        log._note_leader_epoch(log.leader_epoch, int(r.base[done]))
        log._bulk_index(seg, units[done:end], unit_last[done:end], unit_max_ts[done:end], unit_size)
        log.log_end_offset = int(unit_last[end - 1]) + 1
        log.max_timestamp = max(log.max_timestamp, int(unit_max_ts[end - 1]))
        log.batch_count += 2 * m * n
        seg.batches += 2 * m * n
        # .txnindex: every aborted transaction in this segment, in marker order; the LSO is the first
        # offset of the next writer's transaction of the round (still open), else the marker + 1
        for i_round, i in zip(*np.nonzero(~r.committed[done:end])):
            i_round += done
            lso = int(r.first[i_round, i + 1]) if i + 1 < m else int(r.marker[i_round, i]) + 1
            seg.txn_index += encode.encode_aborted_txn(
                producer_id=int(r.producer[i_round, i]),
                first_offset=int(r.first[i_round, i]),
                last_offset=int(r.marker[i_round, i]),
                last_stable_offset=lso,
            )
        note_producers(log, r, end - 1)
        done = end


def note_producers(log: PartitionLog, r: Rounds, last: int) -> None:
    """The producers' state after round ``last`` (ProducerAppendInfo.appendEndTxnMarker)."""
    for i in range(r.first.shape[1]):
        state = log._producer(int(r.producer[last, i]))
        state.producer_epoch = int(r.m_epochs[last, i])
        state.last_sequence = r.per - 1
        state.last_offset = int(r.first[last, i]) + r.per - 1
        state.offset_delta = r.per - 1
        state.last_timestamp = int(r.marker_ts[last, i])
        state.coordinator_epoch = int(r.coordinator_epochs[r.ws[i]])
        state.current_txn_first_offset = -1
