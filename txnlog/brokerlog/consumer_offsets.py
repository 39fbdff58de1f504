"""A ``__consumer_offsets`` partition as Kafka's group coordinator writes it, and one of every kind.

:class:`OffsetsPartitionWriter` appends plain and transactional batches of coordinator records
(:mod:`txnlog.brokerlog.consumer_offsets_encode`) and COMMIT/ABORT markers to a :class:`PartitionLog`;
:func:`write_every_kind` writes one ``__consumer_offsets-N`` directory holding every key and value version,
tombstones, compressed batches and transactional offset commits ended by COMMIT and ABORT markers (and one
left open), and returns what it wrote in the order it wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from txnlog.brokerlog.consumer_offsets_encode import (
    Member,
    consumer_assignment,
    consumer_subscription,
    current_assignment_value,
    epoch_value,
    group_key,
    group_metadata_key,
    group_metadata_value,
    member_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_metadata_value,
    target_assignment_member_value,
)
from txnlog.brokerlog.encode_batches import RecordSpec, encode_record_batch
from txnlog.brokerlog.partition import PartitionLog
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, Compression, ControlType

# ---------------------------------------------------------------- a partition of every kind


@dataclass(slots=True)
class WrittenBatch:
    """One batch the writer appended: its records' (key, value), or the marker it is."""

    base_offset: int
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    producer_id: int = -1
    compression: Compression = Compression.NONE
    marker: ControlType | None = None


class OffsetsPartitionWriter:
    """Appends ``__consumer_offsets`` batches to a :class:`PartitionLog` as the group coordinator does: plain
    batches (no producer), transactional ones (``TxnOffsetCommit``: the producer's id and epoch) and their
    COMMIT/ABORT markers."""

    def __init__(self, log_dir: str | Path, partition: int = 0, *, now: int = 1_700_000_000_000) -> None:
        self.log = PartitionLog(log_dir, CONSUMER_OFFSETS_TOPIC, partition)
        self.now = now
        self.written: list[WrittenBatch] = []

    def append(
        self,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        compression: Compression = Compression.NONE,
        producer: tuple[int, int] | None = None,
    ) -> WrittenBatch:
        self.now += 10
        pid, epoch = producer if producer is not None else (-1, -1)
        specs = [RecordSpec(i, 0, k, v) for i, (k, v) in enumerate(records)]
        batch = encode_record_batch(
            base_offset=0,
            records=specs,
            base_timestamp=self.now,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0 if producer is not None else -1,
            is_transactional=producer is not None,
            compression=compression,
        )
        info = self.log.append(batch)
        written = WrittenBatch(info.base_offset, list(records), pid, compression)
        self.written.append(written)
        return written

    def end_transaction(self, producer: tuple[int, int], commit: bool) -> WrittenBatch:
        self.now += 10
        control = ControlType.COMMIT if commit else ControlType.ABORT
        info = self.log.append_end_txn_marker(
            producer_id=producer[0],
            producer_epoch=producer[1],
            control_type=control,
            coordinator_epoch=0,
            timestamp=self.now,
        )
        written = WrittenBatch(info.base_offset, producer_id=producer[0], marker=control)
        self.written.append(written)
        return written

    def close(self) -> Path:
        self.log.close()
        return self.log.dir


#: Groups with unusual names: every one must come back byte for byte.
ODD_GROUPS = ("grüße-☃", "with space\tand tab", "nul\x00inside", "", "x" * 300)
_TOPIC_ID = bytes(range(1, 17))


def _classic_member(n: int, version: int) -> Member:
    return Member(
        member_id=f"consumer-{n}-5f1c",
        group_instance_id=f"instance-{n}" if n % 2 else None,
        client_id=f"client-{n}",
        client_host=f"/10.0.0.{n}",
        session_timeout=45_000,
        rebalance_timeout=300_000,
        subscription=consumer_subscription(["orders", "payments"], version=version % 4, owned=[("orders", [n])]),
        assignment=consumer_assignment([("orders", [n, n + 2])], version=version % 4, user_data=b"\x01" * n),
    )


def _every_offset_commit_version(w: OffsetsPartitionWriter) -> None:
    """A plain commit per OffsetCommitValue version, with key types 0 and 1."""
    for version in range(5):  # a plain commit per value version, key v0 and v1
        w.append(
            [
                (
                    offset_commit_key("plain", "orders", version, record_type=version % 2),
                    offset_commit_value(
                        100 + version,
                        version=version,
                        leader_epoch=7,
                        metadata=f"m{version}",
                        commit_timestamp=w.now,
                        expire_timestamp=w.now + 86_400_000,
                        unknown_tags={5: b"\xab\xcd"} if version == 4 else None,
                    ),
                )
            ]
        )


def _every_group_metadata_version(w: OffsetsPartitionWriter) -> None:
    """GroupMetadata per value version: a consumer-protocol group, an empty "connect" one."""
    for version in range(5):  # group metadata per version: consumer protocol, then an empty "connect" group
        members = [_classic_member(n, version) for n in range(1, 3)]
        w.append(
            [
                (
                    group_metadata_key(f"classic-{version}"),
                    group_metadata_value(
                        version=version,
                        protocol_type="consumer",
                        generation=3 + version,
                        protocol="range",
                        leader=members[0].member_id,
                        current_state_timestamp=w.now,
                        members=members,
                    ),
                ),
                (
                    group_metadata_key(f"empty-{version}"),
                    group_metadata_value(
                        version=version, protocol_type="connect", generation=0, protocol=None, leader=None
                    ),
                ),
            ]
        )


def _consumer_protocol_group(w: OffsetsPartitionWriter) -> None:
    """The records of a KIP-848 consumer group (types 3-8)."""
    g = "modern"
    w.append(
        [
            (group_key(3, g), epoch_value(12)),
            (group_key(4, g), partition_metadata_value([(_TOPIC_ID, "orders", 6)])),
            (
                group_key(5, g, "m-1"),
                member_metadata_value(
                    client_id="c1",
                    client_host="/10.0.0.9",
                    subscribed=["orders"],
                    rebalance_timeout_ms=60_000,
                    server_assignor="uniform",
                    instance_id="i-1",
                    rack_id="r1",
                ),
            ),
            (
                group_key(5, g, "m-2"),
                member_metadata_value(
                    client_id="c2",
                    client_host="/10.0.0.8",
                    subscribed=[],
                    regex="ord.*",
                    classic_session_timeout_ms=45_000,
                ),
            ),
            (group_key(6, g), epoch_value(12)),
            (group_key(7, g, "m-1"), target_assignment_member_value([(_TOPIC_ID, [0, 1, 2])])),
            (
                group_key(8, g, "m-1"),
                current_assignment_value(
                    member_epoch=12,
                    previous_member_epoch=11,
                    state=0,
                    assigned=[(_TOPIC_ID, [0, 1])],
                    pending_revocation=[(_TOPIC_ID, [2])],
                ),
            ),
        ]
    )


def _compressed_and_odd_groups(w: OffsetsPartitionWriter) -> None:
    """A batch of commits per codec, and a commit per odd group name."""
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        w.append(
            [
                (
                    offset_commit_key(f"compressed-{codec.name}", "orders", p),
                    offset_commit_value(10 * p + codec, commit_timestamp=w.now),
                )
                for p in range(3)
            ],
            compression=codec,
        )
    for n, group in enumerate(ODD_GROUPS):
        w.append([(offset_commit_key(group, "orders", 0), offset_commit_value(n, commit_timestamp=w.now))])


def _tombstones_and_transactions(w: OffsetsPartitionWriter) -> None:
    """Tombstones, then transactional commits: one committed, one aborted, one left open."""
    # tombstones: an offset, a classic group, a consumer-protocol member
    w.append([(offset_commit_key("plain", "orders", 0), None), (group_metadata_key("empty-0"), None)])
    w.append([(group_key(5, "modern", "m-2"), None)])
    # transactional offset commits (TxnOffsetCommit), over a plain commit of the same partitions
    w.append(
        [(offset_commit_key("txn", "orders", p), offset_commit_value(50, commit_timestamp=w.now)) for p in range(3)]
    )
    committed, aborted, open_ = (4000, 0), (4001, 2), (4002, 0)
    w.append(
        [(offset_commit_key("txn", "orders", 0), offset_commit_value(60, commit_timestamp=w.now))], producer=committed
    )
    w.append(
        [(offset_commit_key("txn", "orders", 1), offset_commit_value(61, commit_timestamp=w.now))], producer=aborted
    )
    w.append(
        [(offset_commit_key("txn", "orders", 2), offset_commit_value(62, commit_timestamp=w.now))],
        producer=open_,
        compression=Compression.SNAPPY,
    )
    w.end_transaction(committed, commit=True)
    w.end_transaction(aborted, commit=False)


def write_every_kind(log_dir: str | Path, partition: int = 0) -> OffsetsPartitionWriter:
    """A ``__consumer_offsets-<partition>`` with every key and value version the group coordinator has written
    (OffsetCommit v0-v4, GroupMetadata v0-v4, the consumer-protocol records), tombstones, a batch per codec,
    and transactional offset commits: one committed, one aborted, one left open. Returns the closed writer
    (``written``: what it appended, in order)."""
    w = OffsetsPartitionWriter(log_dir, partition)
    for part in (
        _every_offset_commit_version,
        _every_group_metadata_version,
        _consumer_protocol_group,
        _compressed_and_odd_groups,
        _tombstones_and_transactions,
    ):
        part(w)
    w.close()
    return w
