"""Bytes Kafka wrote: partitions written by Kafka's own classes (``oracle write-sample``: ``MemoryRecords``
builders, ``LogSegment.append``, ``ProducerStateManager`` with ``takeSnapshot``), read by txnlog, give what
Kafka's ``LogLoader`` gives for them (``oracle load-partition``), and the ``.snapshot`` files Kafka's
``ProducerStateManager`` wrote decode with txnlog's decoder to the entries Kafka's ``DumpLogSegments`` prints.

write-sample's partition: transactional producers 1000 (two committed transactions), 2000 (epoch 3, one
aborted, one committed), 3000 (a transaction never completed, in the second segment: LSO 14), idempotent
4000 and a plain batch; two segments (0, 14), snapshots at 14 (the roll) and 24 (the log end, clean close).
Variations, each its own ``TOPIC-0`` dir, in two log dirs read as two brokers in one run:

* ``broker-a`` (no ``.kafka_cleanshutdown``: Kafka loads as after an unclean shutdown)
  - ``sample``: as written;
  - ``nofinal``: ``--no-final-snapshot`` (state rebuilt from the snapshot at 14 and segment 14);
  - ``expiring``: ``--base-ts`` a day before ``as_of``, so that the idempotent producer 4000 (last written at
    base + 18 s) is past ``producer.id.expiration.ms`` at ``as_of`` and the others not (``--apply-expiration``);
  - ``rebuilt``: ``sample``'s files without any snapshot (producer state rebuilt from the segments alone);
  - ``capped``: ``sample``'s files with a high watermark of 10 in the log dir's ``replication-offset-checkpoint``
    (below the open transaction). Kafka's load answers LSO = HW = 10 as the restarted broker would; the
    running leader this copy speaks for served 3, and txnlog says 3 (:data:`LIVE_LSO` says why, by Kafka's rules).
* ``broker-b`` (``.kafka_cleanshutdown``: a clean load)
  - ``clean``: ``sample``'s files; ``cleannofinal``: ``nofinal``'s; ``cappedclean``: ``capped``'s, high watermark 10.

``load-partition`` runs with ``--now as_of --apply-expiration`` (txnlog's ``producer_state`` drops producers
expired at ``as_of``), once for every dir; the snapshots are dumped in one ``dump`` call.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.truth import rows
from tests.oracle.test_coordinator import run_txnlog

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CLUSTER = "oracle-kafka-written"
BASE_TS = 1_800_000_000_000
AS_OF = BASE_TS + 120_000
DAY_MS = 86_400_000
#: the idempotent producer's last batch is at base + 18 s, the next-oldest producer's last write at base + 20 s
EXPIRING_BASE_TS = AS_OF - DAY_MS - 19_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Written:
    """The Kafka-written log dirs, txnlog's run over them, and Kafka's answers."""

    def __init__(self, root: Path, spark: Any, oracle: Any) -> None:
        logs = root / "logs"
        a, b = logs / "broker-a", logs / "broker-b"
        a.mkdir(parents=True)
        b.mkdir(parents=True)
        oracle.write_sample(a / "sample-0", "--base-ts", str(BASE_TS))
        oracle.write_sample(a / "nofinal-0", "--base-ts", str(BASE_TS), "--no-final-snapshot")
        oracle.write_sample(a / "expiring-0", "--base-ts", str(EXPIRING_BASE_TS))
        shutil.copytree(a / "sample-0", a / "rebuilt-0")
        for snapshot in (a / "rebuilt-0").glob("*.snapshot"):
            snapshot.unlink()
        shutil.copytree(a / "sample-0", a / "capped-0")
        (a / "replication-offset-checkpoint").write_text("0\n1\ncapped 0 10\n")
        shutil.copytree(a / "sample-0", b / "clean-0")
        shutil.copytree(a / "sample-0", b / "cappedclean-0")
        (b / "replication-offset-checkpoint").write_text("0\n1\ncappedclean 0 10\n")
        shutil.copytree(a / "nofinal-0", b / "cleannofinal-0")
        (b / ".kafka_cleanshutdown").touch()
        self.dirs = sorted(d for d in logs.glob("broker-*/*-0"))
        self.snapshots = sorted(
            s for d in (a / "sample-0", a / "nofinal-0", a / "expiring-0") for s in d.glob("*.snapshot")
        )
        self.loaded = {
            d.name.rsplit("-", 1)[0]: r
            for d, r in zip(
                self.dirs,
                oracle.load_partitions(self.dirs, "--now", str(AS_OF), "--apply-expiration"),
                strict=True,
            )
        }
        self.dumped = parse_snapshot_dump(oracle.dump(*self.snapshots))
        self.out = root / "out"
        run_txnlog(spark, self.out, as_of=AS_OF, cluster=CLUSTER, logs=[str(logs)])

    def rows(self, table: str, topic: str) -> list[dict[str, Any]]:
        return [r for r in rows(str(self.out), table, cluster=CLUSTER) if r["topic"] == topic]


@pytest.fixture(scope="module")
def written(spark, oracle, tmp_path_factory) -> Written:
    return Written(tmp_path_factory.mktemp("kafka-written"), spark, oracle)


TOPICS = ["sample", "nofinal", "expiring", "rebuilt", "capped", "clean", "cleannofinal", "cappedclean"]

#: A copy of a *running* broker's log dir (no ``.kafka_cleanshutdown``) shows what its leader served, while
#: ``load-partition`` answers as that broker after a restart; by Kafka's own rules the two differ for ``capped``.
#: Live: producer 2000's aborted transaction (offsets 3-4, WriteSample.java) has its ABORT marker at 11, not below
#: the high watermark 10, so ``ProducerStateManager.completeTxn`` left it in ``unreplicatedTxns`` and
#: ``firstUnstableOffset`` is 3: ``UnifiedLog.lastStableOffset`` = 3. Restarted: ``UnifiedLog.rebuildProducerState``
#: reloads the snapshot at the log end (24), which holds only ongoing transactions (producer 3000's at 14), so
#: the first unstable offset is 14, above the high watermark, and the LSO is the high watermark, 10. txnlog gives
#: the live answer for such a copy (README, "How txnlog decides" 2) and the restart's for the clean copy
#: (``cappedclean``, compared with Kafka's load as it is).
LIVE_LSO = {"capped": 3}
RESTART_LSO = 10

_ENTRY = re.compile(
    r"^producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) "
    r"currentTxnFirstOffset: OptionalLong(?:\.empty|\[(-?\d+)\]) lastTimestamp: (-?\d+) ?"
    r"(?:firstSequence: (-?\d+) lastSequence: (-?\d+) lastOffset: (-?\d+) offsetDelta: (-?\d+) timestamp: (-?\d+))?$"
)


def parse_snapshot_dump(text: str) -> dict[str, list[dict[str, Any]]]:
    """``kafka-dump-log.sh`` of ``.snapshot`` files (``DumpLogSegments.dumpProducerIdSnapshot``): per file, its
    entries in file order (``ProducerStateManager.readSnapshot``)."""
    files: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = files.setdefault(line[len("Dumping ") :], [])
            continue
        m = _ENTRY.match(line)
        if not m:
            assert not line.startswith("producerId"), f"unparsed snapshot entry: {line!r}"
            continue
        entry: dict[str, Any] = {
            "producer_id": int(m[1]),
            "producer_epoch": int(m[2]),
            "coordinator_epoch": int(m[3]),
            "current_txn_first_offset": None if m[4] is None else int(m[4]),
            "last_timestamp": int(m[5]),
            "batch": None,
        }
        if m[6] is not None:  # readSnapshot keeps batch metadata only where lastOffset >= 0
            entry["batch"] = {
                "last_sequence": int(m[7]),
                "last_offset": int(m[8]),
                "offset_delta": int(m[9]),
                "timestamp": int(m[10]),
            }
        current.append(entry)
    return files


def _ms(value: datetime | None) -> int | None:
    return None if value is None else (value - _EPOCH) // timedelta(milliseconds=1)


def test_kafka_loaded_every_variation(written: Written):
    """Not vacuous: Kafka loaded each dir, with the open transaction and the expiry the variations are for."""
    assert sorted(written.loaded) == sorted(TOPICS)
    for topic, k in written.loaded.items():
        assert "error" not in k, f"{topic}: {k}"
    assert {p["producerId"] for p in written.loaded["sample"]["producers"]} == {1000, 2000, 3000, 4000}
    assert 4000 not in {p["producerId"] for p in written.loaded["expiring"]["producers"]}
    assert written.loaded["capped"]["lastStableOffset"] == written.loaded["cappedclean"]["lastStableOffset"] == 10
    assert written.loaded["clean"]["shutdown"] == "clean" and written.loaded["sample"]["shutdown"] == "unclean"


@pytest.mark.parametrize("topic", TOPICS)
def test_partition_health_is_what_kafka_loads(written: Written, topic: str):
    k = written.loaded[topic]
    (h,) = written.rows("partition_health", topic)
    got = {
        "log_start_offset": h["log_start_offset"],
        "log_end_offset": h["log_end_offset"],
        "last_stable_offset": h["last_stable_offset"],
        "open_transactions": h["open_transactions"],
        "has_late_transaction": h["has_late_transaction"],
    }
    want = {
        "log_start_offset": k["logStartOffset"],
        "log_end_offset": k["logEndOffset"],
        "last_stable_offset": k["lastStableOffset"],
        "open_transactions": sum(p["currentTxnStartOffset"] >= 0 for p in k["producers"]),
        "has_late_transaction": k["hasLateTransaction"],
    }
    if topic in LIVE_LSO:
        assert k["lastStableOffset"] == RESTART_LSO, "Kafka's load: the restart's answer"
        want["last_stable_offset"] = LIVE_LSO[topic]
    assert got == want
    # txnlog's high watermark is the checkpoint's (null without one); Kafka's defaults to the log end
    if h["high_watermark"] is not None or k["hwSource"] != "default: log end offset (all replicas caught up)":
        assert h["high_watermark"] == k["highWatermark"]


@pytest.mark.parametrize("topic", TOPICS)
def test_producer_state_is_what_kafka_loads(written: Written, topic: str):
    want = sorted(
        (
            p["producerId"],
            p["producerEpoch"],
            p["lastSequence"],
            p["lastTimestamp"],
            p["coordinatorEpoch"],
            p["currentTxnStartOffset"],
        )
        for p in written.loaded[topic]["producers"]
    )
    got = sorted(
        (
            r["producer_id"],
            r["producer_epoch"],
            r["last_sequence"],
            r["last_timestamp_ms"],
            r["coordinator_epoch"],
            -1 if r["current_txn_start_offset"] is None else r["current_txn_start_offset"],
        )
        for r in written.rows("producer_state", topic)
    )
    assert got == want


@pytest.mark.parametrize("topic", TOPICS)
def test_open_transactions_are_what_kafka_loads(written: Written, topic: str):
    want = sorted(
        (p["producerId"], p["producerEpoch"], p["currentTxnStartOffset"])
        for p in written.loaded[topic]["producers"]
        if p["currentTxnStartOffset"] >= 0
    )
    got = sorted(
        (t["producer_id"], t["producer_epoch"], t["first_offset"])
        for t in written.rows("transactions", topic)
        if t["outcome"] == "OPEN"
    )
    assert want, "the sample leaves producer 3000's transaction open"
    assert got == want


def test_snapshots_decode_to_what_kafka_reads(written: Written):
    from txnlog.kafka.producer_snapshot import decode_producer_snapshot_file

    assert len(written.snapshots) == 5  # 14 and 24 of sample and expiring, 14 of nofinal
    for path in written.snapshots:
        snap = decode_producer_snapshot_file(path)
        assert snap.crc_valid and snap.trailing_bytes == 0, path
        e = {k: v.tolist() for k, v in snap.entries.items()}
        got = [
            {
                "producer_id": e["producer_id"][i],
                "producer_epoch": e["producer_epoch"][i],
                "coordinator_epoch": e["coordinator_epoch"][i],
                "current_txn_first_offset": None
                if e["current_txn_first_offset"][i] < 0
                else e["current_txn_first_offset"][i],
                "last_timestamp": e["timestamp"][i],
                "batch": None
                if e["last_offset"][i] < 0
                else {
                    "last_sequence": e["last_sequence"][i],
                    "last_offset": e["last_offset"][i],
                    "offset_delta": e["offset_delta"][i],
                    "timestamp": e["timestamp"][i],
                },
            }
            for i in range(snap.entry_count)
        ]
        want = written.dumped[str(path)]
        assert want, f"Kafka read no entry from {path}"
        assert got == want, path
