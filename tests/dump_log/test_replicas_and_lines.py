"""kafka-dump-log.sh input: replica identity and every line DumpLogSegments prints
(rule 7).

The lines below are written here from the format strings of ``DumpLogSegments`` (apache/kafka
``core/src/main/scala/kafka/tools/DumpLogSegments.scala`` and the Java port
``tools/src/main/java/org/apache/kafka/tools/DumpLogSegments.java``) and of the storage exceptions
it lets through (``OffsetIndex``/``TimeIndex``/``TransactionIndex.sanityCheck``,
``ProducerStateManager.readSnapshot``, ``FileLogInputStream``); none is copied from a real dump.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from txnlog.kafka import dump_log_text as D
from txnlog.kafka.dump_log_render import render_dump
from txnlog.sources.dump_log.lines import list_dump_inputs

SEG = "/var/lib/kafka/data/orders-7/00000000000000000000.log"


def _batch(base: int, last: int, pid: int, pos: int, size: int, valid: bool = True, control: bool = False) -> str:
    return (
        f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: {-1 if control else 0} "
        f"lastSequence: {-1 if control else last - base} producerId: {pid} producerEpoch: 0 partitionLeaderEpoch: 3 "
        f"isTransactional: true isControl: {str(control).lower()} deleteHorizonMs: OptionalLong.empty "
        f"position: {pos} CreateTime: {1700000000000 + base} size: {size} magic: 2 compresscodec: none "
        f"crc: 12345 isvalid: {str(valid).lower()}"
    )


#: (line, what it is) - every class of line the tool prints besides batches/records/snapshots
KNOWN_LINES = [
    ("offset: 120 position: 4096", "ignored"),  # dumpIndex entry
    ("timestamp: 1700000000120 offset: 120", "ignored"),  # dumpTimeIndex entry
    ("version: 1 producerId: 9 firstOffset: 3 lastOffset: 8 lastStableOffset: 3", "ignored"),  # dumpTxnIndex
    ("/var/lib/kafka/data/orders-7/00000000000000000000.index is empty.", "ignored"),  # dumpIndex, no entries
    ("/var/lib/kafka/data/orders-7/00000000000000000000.timeindex passed sanity check.", "ignored"),
    ("Mismatches in :/var/lib/kafka/data/orders-7/00000000000000000000.index", "ignored"),
    ("  Index offset: 120, log offset: 119", "ignored"),
    ("Non-consecutive offsets in /var/lib/kafka/data/orders-7/00000000000000000000.log", "ignored"),
    ("  119 is followed by 121", "ignored"),
    ("  -1 is followed by 100", "ignored"),  # the Java port starts from -1
    ("Found timestamp mismatch in :/var/lib/kafka/data/orders-7/00000000000000000000.timeindex", "ignored"),
    ("  Index timestamp: 1700000000120, log timestamp: 1700000000119", "ignored"),
    ("Found out of order timestamp in :/var/lib/kafka/data/orders-7/00000000000000000000.timeindex", "ignored"),
    ("  Index timestamp: 1700000000120, Previously indexed timestamp: 1700000000121", "ignored"),
    ("The following indexed offsets are not found in the log.", "ignored"),
    ("Indexed offset: 120, found log offset: 119", "ignored"),
    ("Snapshot end offset: 500, epoch: 2", "ignored"),
    ("KRaft bootstrap snapshot", "ignored"),
    ("Ignoring unknown file /var/lib/kafka/data/orders-7/leader-epoch-checkpoint", "ignored"),
    (
        'Exception in thread "main" org.apache.kafka.storage.internals.log.CorruptIndexException: Corrupt index found, '
        "index file (/d/orders-7/00000000000000000000.index) has non-zero size but the last offset is 1 which is less "
        "than the base offset 2.",
        "ignored",
    ),
    (
        "Corrupt time index found, time index file (/d/orders-7/00000000000000000000.timeindex) has non-zero size but "
        "the last timestamp is 1 which is less than the first timestamp 2",
        "ignored",
    ),
    (
        "Index file /d/orders-7/00000000000000000000.index is corrupt, found 13 bytes which is neither positive nor a "
        "multiple of 8",
        "ignored",
    ),
    ("\tat kafka.tools.DumpLogSegments$.main(DumpLogSegments.scala:93)", "ignored"),
    ("\t... 3 more", "ignored"),
    ("Snapshot is corrupt (CRC is no longer valid). Stored crc: 1. Computed crc: 2", "snapshot_corrupt"),
    ("Snapshot contained an unknown file version 7", "snapshot_corrupt"),
    (
        "org.apache.kafka.common.errors.CorruptRecordException: Found record size 0 smaller than minimum record "
        "overhead (14) in file /d/orders-7/00000000000000000000.log.",
        "tool_error",
    ),
    ("...", "elided"),
    ("…", "elided"),
    ("| ...", "elided"),
    ("[...]", "elided"),
]


def _kind(line: str) -> str:
    """What the patterns of dump_log_text make of ``line`` (the order of ``line_kind``)."""
    if line.startswith("| "):
        return "elided" if re.match(D.ELISION_LINE, line) else "record-ish"
    for name, pat in (
        ("batch", D.BATCH_LINE),
        ("snapshot", D.SNAPSHOT_LINE),
        ("legacy", D.LEGACY_LINE),
        ("invalid_bytes", D.INVALID_BYTES_LINE),
        ("ignored", D.IGNORED_LINES),
        ("snapshot_corrupt", D.SNAPSHOT_CORRUPT_LINE),
        ("tool_error", D.TOOL_ERROR_LINE),
        ("elided", D.ELISION_LINE),
    ):
        if re.match(pat, line):
            return name
    return "unparsed"


@pytest.mark.parametrize("line, kind", KNOWN_LINES, ids=[f"{k}-{i}" for i, (_, k) in enumerate(KNOWN_LINES)])
def test_line_class(line: str, kind: str) -> None:
    assert _kind(line) == kind


def test_other_lines_stay_unknown() -> None:
    for line in ("hello", "offset: 1 position: x", "baseOffset: 1 lastOffset: ... count: 2", "Snapshot is fine"):
        assert _kind(line) == "unparsed", line


# ============================================================================ Spark


DAMAGED = (
    "\n".join(
        [
            f"Dumping {SEG}",
            "Log starting offset: 0",
            _batch(0, 1, 7, 0, 100),
            "...",  # 4: a user cut lines here
            _batch(10, 11, 7, 1000, 100),
            _batch(12, 12, 8, 1100, 90, valid=False),  # 6
            _batch(13, 13, 7, 1190, 78, control=True),
            "Found 37 invalid bytes at the end of 00000000000000000000.log",  # 8
            "Dumping /var/lib/kafka/data/orders-7/00000000000000000000.index",
            "/var/lib/kafka/data/orders-7/00000000000000000000.index is empty.",
            "Dumping /var/lib/kafka/data/orders-7/00000000000000000013.snapshot",
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: 1. Computed crc: 2",
            "Non-consecutive offsets in /var/lib/kafka/data/orders-7/00000000000000000000.log",
            "  1 is followed by 10",
        ]
    )
    + "\n"
)


@pytest.mark.spark
def test_damage_is_quarantined_by_segment_position(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """isvalid: false, invalid trailing bytes, elisions: the segment file and byte range, as the segment
    reader names damage (reasons crc_mismatch / truncated_tail); the dump file and line in detail."""
    from txnlog.engine.spark.dump_log import read_dump_logs

    (tmp_path / "d.txt").write_text(DAMAGED)
    s = read_dump_logs(spark, list_dump_inputs([str(tmp_path / "d.txt")])).summary.toPandas()
    q = s[s["kind"] == "quarantine"].sort_values("position")
    got = [(r.file, int(r.position), None if r.length != r.length else int(r.length), r.reason) for r in q.itertuples()]
    snap = "/var/lib/kafka/data/orders-7/00000000000000000013.snapshot"
    assert sorted(got, key=repr) == sorted(
        [
            (SEG, 100, 900, D.REASON_ELIDED),  # from the end of the batch above to the next batch shown
            (SEG, 1100, 90, D.REASON_CRC),
            (SEG, 1268, 37, D.REASON_INVALID_BYTES),
            (snap, 0, None, D.REASON_SNAPSHOT_CRC),
        ],
        key=repr,
    )
    details = dict(zip(q["reason"], q["detail"]))
    assert details[D.REASON_CRC].startswith(f"{tmp_path / 'd.txt'}:6: baseOffset: 12 ")
    assert details[D.REASON_INVALID_BYTES].startswith(f"{tmp_path / 'd.txt'}:8: Found 37 invalid bytes")
    assert not (q["reason"] == D.REASON_UNPARSED).any()
    assert set(q["topic"]) == {"orders"} and set(q["partition"]) == {7}
    runs = s[(s["kind"] == "run")]
    # producer 7's batches form one run up to its marker; producer 8's invalid batch is not used
    assert runs["producer_id"].tolist() == [7] and int(runs["batch_count"].iloc[0]) == 2


def _segment(tmp_path_factory) -> tuple[str, int, int]:  # type: ignore[no-untyped-def]
    """A data segment written by the broker-log writer: (path, batches, records)."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.segments import scan_log_file
    from txnlog.sources.logdirs import discover

    root = str(tmp_path_factory.mktemp("seg"))
    write_scenario("coordinator_completed", root, 0)
    inv = discover([root])
    best = max((f for f in inv.segments if "__" not in f.topic), key=lambda f: os.path.getsize(f.path))
    b = scan_log_file(best.path, True).batches
    return best.path, int(b["base_offset"].size), int(b["record_count"].sum())


@pytest.mark.spark
def test_same_segment_path_in_two_broker_dirs_is_two_replicas(spark, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """Every broker's log dir is /var/lib/kafka/data: the dump's place names the replica, counts are not doubled."""
    from txnlog.engine.spark.dump_log import read_dump_logs

    path, n_batches, n_records = _segment(tmp_path_factory)
    shown = "/var/lib/kafka/data/orders-7/" + os.path.basename(path)
    text = render_dump(path, "3.x", deep_iteration=True, dumping_path=shown)
    assert text.count("Dumping ") == 1
    work = tmp_path_factory.mktemp("dumps")
    for b in ("broker-1", "broker-2"):
        (work / "dumps" / b).mkdir(parents=True)
        (work / "dumps" / b / "orders-7.txt").write_text(text)
    (work / "b1.txt").write_text(text)
    (work / "b2.txt").write_text(text)

    def segments(paths: list[str]):  # type: ignore[no-untyped-def]
        s = read_dump_logs(spark, list_dump_inputs(paths)).summary.toPandas()
        seg = s[s["kind"] == "segment"]
        assert not (s["kind"] == "quarantine").any()
        return {r.broker: (int(r.batch_count), int(r.record_count)) for r in seg.itertuples()}, len(seg)

    want = (n_batches, n_records)
    # one --dump-log per broker dir: the directory given names the replica
    d1, d2 = str(work / "dumps" / "broker-1"), str(work / "dumps" / "broker-2")
    assert [loc for _, loc, _ in list_dump_inputs([d1 + "/", d2])] == ["broker-1", "broker-2"]
    assert segments([d1 + "/", d2]) == ({"broker-1": want, "broker-2": want}, 2)
    # the dumps root: the directory below it names the replica
    assert segments([str(work / "dumps")]) == ({"broker-1": want, "broker-2": want}, 2)
    # NAME=PATH
    assert segments([f"b-10={work / 'b1.txt'}", f"b-11={work / 'b2.txt'}"]) == ({"b-10": want, "b-11": want}, 2)
    # files given one by one, no other clue: the dump file's name
    assert segments([str(work / "b1.txt"), str(work / "b2.txt")]) == ({"b1": want, "b2": want}, 2)


def test_dump_arg() -> None:
    from txnlog.sources.dump_log.lines import split_dump_arg

    assert split_dump_arg("broker-1=dumps/b1.txt") == ("broker-1", "dumps/b1.txt")
    assert split_dump_arg("dumps/x=y.txt") == (None, "dumps/x=y.txt")  # a name holds no "/"
    assert split_dump_arg("=a.txt") == (None, "=a.txt")


@pytest.mark.spark
def test_4x_json_status_names_are_read(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """KAFKA-20712 prints transactionStatus as the state's name; 4.0 printed its id: both read."""
    from txnlog.engine.spark.dump_log import read_dump_logs

    head = (
        "baseOffset: {o} lastOffset: {o} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 4 isTransactional: false isControl: false deleteHorizonMs: "
        "OptionalLong.empty position: {p} CreateTime: 1700000000000 size: 150 magic: 2 compresscodec: none "
        "crc: 1 isvalid: true"
    )
    rec = (
        "| offset: {o} CreateTime: 1700000000000 keySize: 9 valueSize: 60 sequence: -1 headerKeys: [] "
        'key: {{"type":"0","data":{{"transactionalId":"t{o}"}}}} payload: {{"version":"1","data":{{"producerId":5,'
        '"producerEpoch":1,"transactionTimeoutMs":60000,"transactionStatus":{s},"transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":1700000000000,"transactionStartTimestampMs":-1}}}}'
    )
    text = (
        "\n".join(
            [
                "Dumping /var/lib/kafka/data/__transaction_state-3/00000000000000000000.log",
                "Log starting offset: 0",
                head.format(o=0, p=0),
                rec.format(o=0, s='"CompleteCommit"'),
                head.format(o=1, p=150),
                rec.format(o=1, s="5"),
            ]
        )
        + "\n"
    )
    (tmp_path / "t.txt").write_text(text)
    r = read_dump_logs(spark, list_dump_inputs([str(tmp_path / "t.txt")])).records.toPandas()
    r = r[r["kind"] == "record"].sort_values("record_offset")
    assert r["state"].tolist() == [4, 5] and r["value_version"].tolist() == [1, 1]
