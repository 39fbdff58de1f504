"""Hot-partition segments written by the project's broker-log writer (txnlog.brokerlog), for the split
tests: one partition, many small transactional batches of a few producers, markers, some
non-transactional batches, realistic ``.index`` files (a small ``index.interval.bytes`` so that a small
segment has many split points), and damage where asked."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from txnlog.brokerlog import encode
from txnlog.brokerlog.encode import RecordSpec
from txnlog.brokerlog.partition import AppendInfo, PartitionLog
from txnlog.kafka.wire import ControlType

BASE_TS = 1_700_000_000_000
DAMAGE_KINDS = ("crc_mismatch", "bad_magic", "bad_length")


@dataclass
class HotSegment:
    log: PartitionLog
    infos: list[AppendInfo] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.log.segment_path(self.log.segments[0].base_offset)


def write_hot_segment(
    directory: Path,
    seed: int,
    *,
    batches: int = 400,
    producers: int = 4,
    damage: int = 0,
    damage_at: list[int] | None = None,
    truncated_tail: bool = False,
    index_interval_bytes: int = 512,
    topic: str = "hot",
    partition: int = 0,
    log_start_offset: int = 0,
) -> HotSegment:
    """One segment (never rolled) of ``batches`` appends; ``damage`` random batches (or those at
    ``damage_at``, indexes into the appends) damaged in place, and a cut last batch if asked."""
    rng = random.Random(seed)
    log = PartitionLog(
        directory,
        topic,
        partition,
        segment_bytes=1 << 30,
        index_interval_bytes=index_interval_bytes,
        log_start_offset=log_start_offset,
    )
    hot = HotSegment(log)
    open_: set[int] = set()
    seq = dict.fromkeys(range(1, producers + 1), 0)
    for i in range(batches):
        ts = BASE_TS + i * 10
        pid = rng.randint(1, producers)
        roll = rng.random()
        if roll < 0.2 and pid in open_:
            info = log.append_end_txn_marker(
                producer_id=pid,
                producer_epoch=0,
                control_type=rng.choice((ControlType.COMMIT, ControlType.ABORT)),
                coordinator_epoch=rng.randint(0, 3),
                timestamp=ts + 5,
            )
            open_.discard(pid)
        elif roll < 0.27:
            info = log.append(_batch(rng, ts))
        else:
            n = rng.randint(1, 4)
            info = log.append(_batch(rng, ts, pid=pid, seq=seq[pid], n=n))
            seq[pid] += n
            open_.add(pid)
        hot.infos.append(info)
    chosen = list(damage_at or []) + rng.sample(range(len(hot.infos)), min(damage, len(hot.infos)))
    for k in sorted(set(chosen)):
        log.corrupt_batch(hot.infos[k], rng.choice(DAMAGE_KINDS))
    if truncated_tail:
        log.append_truncated_tail(_batch(rng, BASE_TS + batches * 10, n=3), rng.randint(5, 80))
    log.close()
    return hot


def _batch(rng: random.Random, ts: int, *, pid: int = -1, seq: int = -1, n: int = 1) -> bytes:
    records = [
        RecordSpec(i, i, b"k%d" % i, bytes(rng.randrange(256) for _ in range(rng.randint(10, 120)))) for i in range(n)
    ]
    return encode.encode_record_batch(
        base_offset=0,
        records=records,
        base_timestamp=ts,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=pid >= 0,
    )
