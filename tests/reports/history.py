"""A sample history: the job run in-process on the embedded sample at several as_of, plus one run after
the 3 a.m. abort of orders-5 (its ABORT marker appended to a copy of the sample's logs, as WriteTxnMarkers
makes the leader write it), so that the history holds a finding that is resolved."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

CLUSTER = "sample"
#: the sample's own as_of (its newest broker-written time); runs before it, and one after the abort
EARLY = datetime(2024, 6, 10, 10, 30, tzinfo=UTC)
MIDDLE = datetime(2024, 6, 10, 11, 50, tzinfo=UTC)
AFTER_ABORT = datetime(2024, 6, 10, 13, 0, tzinfo=UTC)
STUCK = ("orders", 5)


@dataclass(frozen=True)
class History:
    output: str
    natural: datetime  # the as_of of the run without --as-of (what ./spark-submit.sh gives on the sample)
    as_ofs: tuple[datetime, ...]  # every run, oldest first


def append_abort_marker(logs: Path, topic: str, partition: int, rec: dict, timestamp_ms: int) -> None:
    """Append the ABORT marker of ``rec`` (an abort_recommendations row) at the log end of every replica
    of the partition that holds the whole log (its high watermark), and move that high watermark past it."""
    from txnlog.brokerlog import encode
    from txnlog.kafka import wire

    ends: dict[Path, int] = {}
    for d in sorted(logs.glob(f"*/{topic}-{partition}")):
        for line in (d.parent / "replication-offset-checkpoint").read_text().splitlines()[2:]:
            if line.split()[:2] == [topic, str(partition)]:
                ends[d] = int(line.split()[2])
    end = max(ends.values())
    for d, hw in ends.items():
        if hw != end:
            continue
        epoch = int((d / "leader-epoch-checkpoint").read_text().split()[-2])
        batch = encode.encode_end_txn_marker_batch(
            offset=end,
            producer_id=rec["producer_id"],
            producer_epoch=rec["producer_epoch"],
            control_type=wire.ControlType.ABORT,
            coordinator_epoch=rec["coordinator_epoch"],
            timestamp=timestamp_ms,
            partition_leader_epoch=epoch,
        )
        with open(sorted(d.glob("*.log"))[-1], "ab") as f:
            f.write(batch)
        checkpoint = d.parent / "replication-offset-checkpoint"
        lines = checkpoint.read_text().splitlines()
        lines = [f"{topic} {partition} {end + 1}" if ln.split()[:2] == [topic, str(partition)] else ln for ln in lines]
        checkpoint.write_text("\n".join(lines) + "\n")


def build(spark, work: Path) -> History:
    """Four job runs into ``work/out``: EARLY, MIDDLE, the sample's own as_of, AFTER_ABORT (on the copy)."""
    from txnlog.model.config import load_config
    from txnlog.output.delta import read_table
    from txnlog.pipeline import run
    from txnlog.sources.sample import sample_logs

    output = str(work / "out")

    def job(as_of: datetime | None, logs: str | None = None) -> datetime:
        cfg = load_config(
            None, {"output": output, "cluster": CLUSTER, "as_of": as_of and as_of.isoformat(), "logs": logs and [logs]}
        )
        return run(cfg, spark=spark, progress=lambda _: None).as_of

    job(EARLY)
    job(MIDDLE)
    natural = job(None)
    rec = next(
        r
        for r in read_table(output, "abort_recommendations", cluster=CLUSTER, as_of=natural).to_pylist()
        if (r["topic"], r["partition"]) == STUCK
    )
    copy = work / "logs-after-abort"
    shutil.copytree(sample_logs(), copy)
    append_abort_marker(copy, *STUCK, rec, int(natural.timestamp() * 1000) + 30 * 60 * 1000)
    job(AFTER_ABORT, str(copy))
    return History(output, natural, (EARLY, MIDDLE, natural, AFTER_ABORT))
