"""Golden tests: real kafka-dump-log.sh outputs (realdata/dump-log, from tombentley/klog).

Every expected value below was written by hand from reading the files, not computed by the code.
"""

from __future__ import annotations

import os

import pytest

from txnlog.kafka import dump_log_text as D

REALDATA = os.environ.get(
    "TXNLOG_REALDATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "realdata")
)
DUMPS = os.path.abspath(os.path.join(REALDATA, "dump-log"))

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not os.path.isdir(DUMPS), reason=f"realdata dump-log not found at {DUMPS}"),
]

SYNTHETIC = (
    "Dumping /data/kafka-logs/orders-3/00000000000000000100.log\n"  # 1
    "Log starting offset: 100\r\n"  # 2  (CRLF)
    "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 producerEpoch: 2 "
    "partitionLeaderEpoch: 1 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 1700000000500 size: 100 magic: 2 compresscodec: ZSTD crc: 1 isvalid: true\n"  # 3
    "this line is garbage\n"  # 4
    "baseOffset: 102 lastOffset: 102 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 2 "
    "partitionLeaderEpoch: 1 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
    "position: 100 CreateTime: 1700000000900 size: 78 magic: 2 compresscodec: none crc: 2 isvalid: true\n"  # 5
    "baseOffset: 103 lastOffset: 103 count: 1 baseSequence: 2 lastSequence: 2 producerId: 8 producerEpoch: 0 "
    "partitionLeaderEpoch: 1 isTransactional: true isControl: false "
    "position: 178 LogAppendTime: 1700000001000 size: 80 magic: 2 compresscodec: none crc: 3 isvalid: false\n"  # 6
    "Dumping /data/kafka-logs/__transaction_state-7/00000000000000000000.log\n"  # 7
    "Log starting offset: 0\n"  # 8
    "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 9 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 1700000002000 size: 150 magic: 2 compresscodec: none crc: 4 isvalid: true\n"  # 9
    "| offset: 5 CreateTime: 1700000002000 keySize: 9 valueSize: 60 sequence: -1 headerKeys: [] "
    'key: {"type":"0","data":{"transactionalId":"tx-a"}} payload: {"version":"1","data":{"producerId":7,'
    '"previousProducerId":6,"producerEpoch":3,"transactionTimeoutMs":60000,"transactionStatus":2,'
    '"transactionPartitions":[{"topic":"orders","partitionIds":[3,4]}],"transactionLastUpdateTimestampMs":1700000001990,'
    '"transactionStartTimestampMs":1700000000400,"clientTransactionVersion":2}}\n'  # 10
    "baseOffset: 6 lastOffset: 6 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 10 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 150 CreateTime: 1700000003000 size: 80 magic: 2 compresscodec: none crc: 5 isvalid: true\n"  # 11
    "| offset: 6 CreateTime: 1700000003000 keySize: 9 valueSize: -1 sequence: -1 headerKeys: [] "
    'key: {"type":"0","data":{"transactionalId":"tx-b"}} payload: <DELETE>\n'  # 12
)


@pytest.fixture(scope="module")
def frames(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from txnlog.engine.spark.dump_log import read_dump_logs
    from txnlog.sources.dump_log.lines import list_dump_inputs

    d = tmp_path_factory.mktemp("synthetic")
    (d / "synthetic.txt").write_bytes(SYNTHETIC.encode())
    fr = read_dump_logs(spark, list_dump_inputs([DUMPS, str(d / "synthetic.txt")]))
    return fr, fr.summary.toPandas(), fr.records.toPandas()


def _of(df, name):  # type: ignore[no-untyped-def]
    """Rows whose dump file (quarantine) or dumped path (others) belongs to ``name``."""
    return df[df["file"].str.endswith(name)]


def _q(summary, dump_file):  # type: ignore[no-untyped-def]
    q = summary[(summary["kind"] == "quarantine") & summary["file"].str.endswith(dump_file)]
    return sorted(zip(q["position"].astype(int), q["reason"]))


def test_every_file_is_listed(frames) -> None:  # type: ignore[no-untyped-def]
    fr, _, _ = frames
    names = {os.path.basename(f) for f in fr.files}
    assert set(os.listdir(DUMPS)) <= names


def test_no_real_line_is_unparsed(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    q = s[(s["kind"] == "quarantine") & s["file"].str.startswith(DUMPS)]
    assert set(q["reason"]) <= {D.REASON_MALFORMED_2_8, D.REASON_NO_PARTITION}


@pytest.mark.spark
@pytest.mark.parametrize(
    "name, first, last, records, first_ts",
    [
        ("klog-format-2.7.txt", 933607637, 933607638, 2, 1655761268674),
        ("klog-format-2.8-invalid.txt", 933607637, 933607637, 1, 1655761268674),
        ("klog-format-3.x.txt", 933607637, 933607637, 2, 1655761268674),
    ],
)
def test_format_versions(frames, name, first, last, records, first_ts) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    seg = s[
        (s["kind"] == "segment")
        & (s["first_offset"] == first)
        & (s["last_offset"] == last)
        & (s["record_count"] == records)
    ]
    assert len(seg) >= 1
    row = seg.iloc[0]
    # every klog file dumps /tmp/kafka-logs/foo-0/00000000000000000000.log: the same path printed by
    # several dump files lying side by side is several replicas, told apart by the dump file (README)
    assert (row["topic"], row["partition"], row["broker"], row["file_offset"]) == ("foo", 0, f"dump-log/{name[:-4]}", 0)
    assert (row["last_offset"], row["batch_count"], row["size_bytes"]) == (last, 1, 165)
    assert row["first_timestamp"] == first_ts and row["last_timestamp"] == 1655761268674
    assert row["legacy_entries"] == 0


def test_2_8_record_lines_are_reported_not_parsed(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    assert _q(s, "klog-format-2.8-invalid.txt") == [(4, D.REASON_MALFORMED_2_8)]
    q = s[(s["kind"] == "quarantine") & s["file"].str.endswith("klog-format-2.8-invalid.txt")].iloc[0]
    assert q["length"] == 1 and q["detail"].startswith("| offset: 933607637 isValid: true crc: null")
    for name in ("klog-format-2.7.txt", "klog-format-3.x.txt"):
        assert _q(s, name) == []


def test_deep_iteration_segments(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    seg = s[
        (s["kind"] == "segment")
        & (s["file"] == "/tmp/kafka-logs/foo-0/00000000000000000000.log")
        & (s["first_offset"] == 0)
    ]
    # testWithDeepIteration, ...AndPayload, ...LineNumbers: identical batches
    assert len(seg) == 3
    for _, row in seg.iterrows():
        assert (row["last_offset"], row["batch_count"], row["record_count"], row["size_bytes"]) == (3, 3, 4, 242)
        assert row["first_timestamp"] == 1632815303637  # first record of the first batch
        assert row["last_timestamp"] == 1632815307188
    assert not ((s["kind"].isin(["run", "marker"])) & (s["topic"] == "foo")).any()  # producerId -1


def test_without_deep_iteration(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    seg = s[(s["kind"] == "segment") & (s["file"] == "./00000000000000000000.log")]
    assert len(seg) == 2
    for _, row in seg.iterrows():
        # no broker dir in the printed path: the dump's place names the replica (several klog files dump ./000.log)
        assert row["topic"] is None and row["broker"].startswith("dump-log/") and row["file_offset"] == 0
        assert (row["first_offset"], row["last_offset"], row["batch_count"], row["record_count"]) == (0, 3, 3, 4)
        assert row["first_timestamp"] == 1632815304456  # no record lines: the batch max timestamp
    for name in ("klog-testWithoutDeepIteration.txt", "klog-testWithoutDeepIterationLineNumbers.txt"):
        assert _q(s, name) == [(1, D.REASON_NO_PARTITION)]


def test_control_records(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    f = s[s["topic"] == "transactional-foo"]
    assert set(f["broker"]) == {"kafka-0-logs"}
    runs = f[f["kind"] == "run"].sort_values("first_offset")
    assert runs[
        ["producer_id", "producer_epoch", "first_offset", "last_offset", "batch_count", "record_count", "size_bytes"]
    ].values.tolist() == [
        [0, 0, 0, 3, 3, 4, 95 + 78 + 78],
        [0, 0, 5, 5, 1, 1, 78],
    ]
    assert runs["first_timestamp"].tolist() == [1632840910484, 1632840912091]
    assert runs["last_timestamp"].tolist() == [1632840911503, 1632840912091]
    markers = f[f["kind"] == "marker"].sort_values("first_offset")
    assert markers[["first_offset", "control_type", "coordinator_epoch", "last_timestamp"]].values.tolist() == [
        [4, 1, 4, 1632840911601],
        [6, 1, 4, 1632840912595],
    ]
    seg = f[f["kind"] == "segment"].iloc[0]
    assert (seg["first_offset"], seg["last_offset"], seg["batch_count"], seg["record_count"]) == (0, 6, 6, 7)
    assert seg["size_bytes"] == 407 + 78


@pytest.mark.parametrize("name", ["klog-readSnapshotFromKafka2Dump.txt", "klog-readSnapshotFromKafka3Dump.txt"])
def test_snapshots(frames, name) -> None:  # type: ignore[no-untyped-def]
    _, s, _ = frames
    assert _q(s, name) == [(1, D.REASON_NO_PARTITION)]
    snap = s[s["kind"] == "snapshot"]
    cols = ["producer_id", "producer_epoch", "first_offset", "last_offset", "last_timestamp", "coordinator_epoch"]
    expected = [
        [171101, 12, -1, 932442537, 1655628030307, 54],
        [173102, 16, -1, 933203854, 1655704254875, 59],
        [199398, 0, 933607621, 933607621, 1655761267833, 57],
    ]
    got = sorted(snap[cols].astype("int64").values.tolist())
    assert got == sorted(expected * 2)  # both files hold the same three producers
    assert set(snap["file_offset"]) == {933607637}


def test_transaction_log_decoder(frames) -> None:  # type: ignore[no-untyped-def]
    _, _, r = frames
    r = r[r["file"] == "/tmp/kafka-0-logs/__transaction_state-4/00000000000000000000.log"]
    # one row says the segment was dumped (the coordinator partitions read), then its records
    assert r[r["kind"] == "segment"][["broker", "coordinator_partition"]].values.tolist() == [["kafka-0-logs", 4]]
    r = r[r["kind"] == "record"].sort_values("record_offset")
    assert r["record_offset"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert r["state"].tolist() == [0, 1, 2, 4, 1, 2, 4]  # Empty Ongoing PrepareCommit CompleteCommit ...
    assert set(r["transactional_id"]) == {"my-txnal-id"}
    assert set(r["coordinator_partition"]) == {4} and set(r["coordinator_epoch"]) == {4}
    assert set(r["producer_id"]) == {0} and set(r["producer_epoch"]) == {0} and set(r["timeout_ms"]) == {60000}
    assert [list(p) for p in r["partitions"]] == [
        [],
        ["transactional-foo-0"],
        ["transactional-foo-0"],
        [],
        ["transactional-foo-0"],
        ["transactional-foo-0"],
        [],
    ]
    assert r["last_update_timestamp"].tolist() == [
        1632840910282,
        1632840910510,
        1632840911585,
        1632840911588,
        1632840912092,
        1632840912592,
        1632840912593,
    ]
    assert r["record_timestamp"].tolist()[0] == 1632840910297
    assert r["txn_start_timestamp"].isna().all()  # not printed by the 3.x decoder
    assert not r["is_tombstone"].any()


def test_synthetic_lines(frames) -> None:  # type: ignore[no-untyped-def]
    _, s, r = frames
    assert _q(s, "synthetic.txt") == [(4, D.REASON_UNPARSED)]
    # isvalid: false: quarantined as the segment reader would - the segment file, the batch's byte range
    crc = s[(s["kind"] == "quarantine") & (s["reason"] == D.REASON_CRC) & (s["topic"] == "orders")]
    assert crc[["file", "position", "length", "partition", "file_offset", "broker"]].values.tolist() == [
        ["/data/kafka-logs/orders-3/00000000000000000100.log", 178, 80, 3, 100, "kafka-logs"]
    ]
    assert crc["detail"].iloc[0].split("synthetic.txt:6: ")[1].startswith("baseOffset: 103 ")
    detail = s[(s["kind"] == "quarantine") & (s["position"] == 4) & s["file"].str.endswith("synthetic.txt")][
        "detail"
    ].iloc[0]
    assert detail == "this line is garbage"
    o = s[s["topic"] == "orders"]
    assert set(o["broker"]) == {"kafka-logs"} and set(o["partition"]) == {3} and set(o["file_offset"]) == {100}
    run = o[o["kind"] == "run"]
    # producer 8's batch has isvalid: false: quarantined, not used
    assert run[["producer_id", "first_offset", "last_offset", "first_timestamp"]].values.tolist() == [
        [7, 100, 101, 1700000000500]
    ]
    marker = o[o["kind"] == "marker"]
    # no record line: the marker closes the transaction, type and coordinator epoch unknown
    assert marker[["first_offset", "control_type", "coordinator_epoch", "last_timestamp"]].values.tolist() == [
        [102, -1, -1, 1700000000900]
    ]
    seg = o[o["kind"] == "segment"].iloc[0]
    assert (seg["batch_count"], seg["last_offset"], seg["size_bytes"]) == (2, 102, 258)
    t = r[(r["coordinator_partition"] == 7) & (r["kind"] == "record")].sort_values("record_offset")
    assert t["transactional_id"].tolist() == ["tx-a", "tx-b"]
    assert t["coordinator_epoch"].tolist() == [9, 10]
    a, b = t.iloc[0], t.iloc[1]
    assert (a["producer_id"], a["producer_epoch"], a["state"], a["timeout_ms"]) == (7, 3, 2, 60000)
    assert list(a["partitions"]) == ["orders-3", "orders-4"]
    assert (
        a["txn_start_timestamp"],
        a["previous_producer_id"],
        a["next_producer_id"],
        a["client_transaction_version"],
    ) == (1700000000400, 6, -1, 2)
    assert a["value_version"] == 1 and not a["is_tombstone"]
    assert b["is_tombstone"] and b["producer_id"] != b["producer_id"]  # NaN: no value


def test_split_dump_path() -> None:
    assert D.split_dump_path("/tmp/kafka-0-logs/__transaction_state-4/00000000000000000000.log") == (
        "kafka-0-logs",
        "__transaction_state",
        4,
        0,
        "log",
    )
    assert D.split_dump_path("my-topic-12/00000000000000000042.snapshot") == ("dump", "my-topic", 12, 42, "snapshot")
    assert D.split_dump_path("/srv/x/my-topic-1/00000000000000000000.log")[0] == "dump"
