"""``--logs`` discovery (txnlog.sources.logdirs): every form an operator copies Kafka's logs in, on the broker-log
writer's directories; and the one-line messages of ``check_inputs`` for what is none of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from txnlog.brokerlog.scenarios import write_scenario
from txnlog.kafka.dump_log_render import render_dump
from txnlog.model.config import load_config
from txnlog.model.errors import UsageError
from txnlog.pipeline import check_inputs, plan_inputs
from txnlog.sources.logdirs import LOG_DIRS, LOG_FILE, NOTHING, PARTITION_DIR, discover, locate, parse_partition_dir
from txnlog.sources.sample import SAMPLE_SEED

#: what Kafka names the directory of a partition it is deleting / still copying / no longer hosts
#: (LocalLog.logDeleteDirName, logFutureDirName, logStrayDirName: <topic>-<n>.<uuid><suffix>)
UUID = "4f5b2a1c9d8e4b7fa0c1d2e3f4a5b6c7"


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("logdirs") / "logs"
    write_scenario("sample", root, seed=SAMPLE_SEED)
    return root


def _files(inv) -> list[tuple[str, str, int, int, str]]:  # type: ignore[no-untyped-def]
    return [(f.broker, f.topic, f.partition, f.base_offset, f.kind) for f in (*inv.segments, *inv.snapshots)]


def test_partition_dir_names_are_parsed_as_kafka_does() -> None:
    """LocalLog.parseTopicPartitionName: the partition follows the last '-'; topics hold '-' and '.'."""
    assert parse_partition_dir("audit-log-2") == ("audit-log", 2)
    assert parse_partition_dir("payments.eu-west-1-12") == ("payments.eu-west-1", 12)
    assert parse_partition_dir("__transaction_state-49") == ("__transaction_state", 49)
    for name in (
        f"orders-7.{UUID}-delete",
        f"orders-7.{UUID}-future",
        f"orders-7.{UUID}-stray",
        "__cluster_metadata-0",
    ):
        assert parse_partition_dir(name) is None
    assert parse_partition_dir("orders") is None and parse_partition_dir("orders-") is None


def test_partition_directory_is_one_replica(logs, tmp_path) -> None:
    """The stuck partition's directory, copied alone (trailing slash as a shell completes it): its
    segments and snapshots, one replica named after the parent directory; no checkpoint is read."""
    copies = tmp_path / "copies"
    shutil.copytree(logs / "broker-1" / "metrics-0", copies / "audit.log-v2-3")
    found = locate(f"{copies}/audit.log-v2-3/")
    assert (found.kind, found.topic, found.partition) == (PARTITION_DIR, "audit.log-v2", 3)
    inv = check_inputs([f"{copies}/audit.log-v2-3/"])
    assert inv.brokers == ("copies",)
    assert _files(inv) == [
        ("copies", "audit.log-v2", 3, 268, "log"),
        ("copies", "audit.log-v2", 3, 539, "log"),
        ("copies", "audit.log-v2", 3, 799, "log"),
        *[("copies", "audit.log-v2", 3, f.base_offset, "snapshot") for f in inv.snapshots],
    ]
    assert len(inv.snapshots) == len(list((copies / "audit.log-v2-3").glob("*.snapshot"))) > 0
    assert inv.txn_state_segments == () and inv.checkpoints == ()
    # in place inside a broker's log dir: the replica is that broker, as when the log dir is given
    inv = discover([str(logs / "broker-1" / "metrics-0")])
    assert inv.brokers == ("broker-1",)
    assert [f.path for f in inv.segments] == [
        f.path for f in discover([str(logs / "broker-1")]).segments if f.topic == "metrics"
    ]


def test_single_segment_and_snapshot_files(logs) -> None:
    """A segment (or snapshot) file alone: topic and partition from its directory, the base offset from
    its name, the replica from the directory above."""
    part = logs / "broker-1" / "metrics-0"
    seg = part / "00000000000000000799.log"
    found = locate(str(seg))
    assert (found.kind, found.topic, found.partition) == (LOG_FILE, "metrics", 0)
    inv = check_inputs([str(seg)])
    assert _files(inv) == [("broker-1", "metrics", 0, 799, "log")]
    assert inv.segments[0].path == str(seg) and inv.segments[0].size == seg.stat().st_size
    snap = sorted(part.glob("*.snapshot"))[-1]
    inv = discover([str(snap)])
    assert _files(inv) == [("broker-1", "metrics", 0, int(snap.name[:20]), "snapshot")]
    txn = sorted((logs / "broker-1").glob("__transaction_state-*/*.log"))[0]
    inv = check_inputs([str(txn)])
    assert inv.segments == () and [f.path for f in inv.txn_state_segments] == [str(txn)]


def test_mixed_paths(logs) -> None:
    """A log dir, another broker's partition directory and a third broker's segment file, in any order:
    one replica per broker, each file listed once, in the log dir's order."""
    b1, b2, b3 = (logs / f"broker-{n}" for n in (1, 2, 3))
    seg3 = next(iter(sorted((b3 / "orders-5").glob("*.log"))))
    paths = [
        str(seg3),
        str(b2 / "orders-5"),
        str(b1),
        str(b1 / "metrics-0"),
        str(b1 / "metrics-0" / "00000000000000000799.log"),
    ]
    inv = check_inputs(paths)
    assert inv.brokers == ("broker-3", "broker-2", "broker-1")
    whole = discover([str(b1)])
    assert [f for f in inv.segments if f.broker == "broker-1"] == list(whole.segments)
    assert [f for f in inv.snapshots if f.broker == "broker-1"] == list(whole.snapshots)
    assert inv.txn_state_segments == whole.txn_state_segments and inv.checkpoints == whole.checkpoints
    assert [(f.topic, f.partition) for f in inv.segments if f.broker != "broker-1"] == [("orders", 5)] * 2
    listed = [f.path for f in (*inv.segments, *inv.snapshots, *inv.txn_state_segments)]
    assert len(listed) == len(set(listed))  # metrics-0's 799 segment: given alone and in broker-1
    # a log dir given twice is one replica, not two
    assert discover([str(b1), str(b1)]).segments == whole.segments


def test_same_named_parents_stay_apart(logs, tmp_path) -> None:
    for n in (2, 3):
        shutil.copytree(logs / f"broker-{n}" / "orders-5", tmp_path / f"case-{n}" / "copies" / "orders-5")
    a, b = (tmp_path / f"case-{n}" / "copies" / "orders-5" for n in (2, 3))
    inv = discover([str(a), str(b)])
    assert inv.brokers == ("copies", f"copies@{tmp_path}/case-3/copies")
    assert {f.broker for f in inv.segments} == set(inv.brokers)


@pytest.mark.parametrize(
    "suffix,meaning",
    [
        ("-delete", "marked for deletion"),
        ("-future", "still copying to another log dir"),
        ("-stray", "no longer hosts"),
    ],
)
def test_kafka_suffixed_dirs_are_skipped_and_refused_alone(logs, tmp_path, suffix, meaning) -> None:
    """LocalLog's -delete/-future/-stray directories: skipped inside a log dir (as before), and given
    themselves (or a segment in one) a one-line error saying what they are."""
    broker = tmp_path / "broker-9"
    shutil.copytree(logs / "broker-2" / "orders-5", broker / "orders-5")
    shutil.copytree(logs / "broker-2" / "orders-5", broker / f"orders-5.{UUID}{suffix}")
    inv = discover([str(broker)])
    assert {f.path.split("/")[-2] for f in inv.segments} == {"orders-5"}
    assert str(broker / f"orders-5.{UUID}{suffix}") in inv.skipped
    odd = broker / f"orders-5.{UUID}{suffix}"
    for path in (odd, next(iter(odd.glob("*.log")))):
        with pytest.raises(UsageError) as e:
            check_inputs([str(path)])
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"--logs {path}: orders-5.{UUID}{suffix} is ")
        assert meaning in msg and f"Kafka's {suffix} suffix" in msg


def _refused(path: Path | str) -> str:
    with pytest.raises(UsageError) as e:
        check_inputs([str(path)])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"--logs {path}: ")
    return msg[len(f"--logs {path}: ") :]


def test_what_is_none_of_them_is_one_line_naming_what_is_expected(logs, tmp_path) -> None:
    expected = "give a broker log dir (log.dirs), a directory of them, a partition directory"
    assert _refused(tmp_path / "nope").startswith("no such file or directory; " + expected)
    (tmp_path / "empty").mkdir()
    assert _refused(tmp_path / "empty").startswith("no Kafka logs found (expected <topic>-<partition>/")
    assert expected in _refused(tmp_path / "empty")
    part = logs / "broker-1" / "metrics-0"
    assert (
        _refused(part / "00000000000000000799.index")
        == "an index file; give the segment 00000000000000000799.log beside it"
    )
    assert _refused(part / "partition.metadata").startswith("not a Kafka segment or producer snapshot")
    assert _refused(logs / "broker-1" / "__cluster_metadata-0") == (
        "__cluster_metadata-0 is the KRaft metadata log, which holds no transactions"
    )
    # segments whose directory does not say which partition they are
    stuck = tmp_path / "stuck"
    shutil.copytree(part, stuck)
    assert _refused(stuck).startswith(
        "it holds Kafka log files, but its name 'stuck' is not <topic>-<partition> as Kafka names a partition "
        "directory, so the topic and partition are unknown; copy the files into a directory named after"
    )
    assert _refused(stuck / "00000000000000000799.log").startswith("its directory 'stuck' is not <topic>-<partition>")
    assert locate(str(stuck)).kind == NOTHING and locate(str(logs)).kind == LOG_DIRS


def test_dump_log_output_given_to_logs_says_use_dump_log(logs, tmp_path) -> None:
    """kafka-dump-log.sh text (a directory of .txt, a file, one named .log, one without --deep-iteration)."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for part in ("orders-5", "metrics-0"):
        with open(dumps / f"{part}.txt", "w") as o:
            for f in sorted((logs / "broker-2" / part).glob("*.log")) or sorted(
                (logs / "broker-1" / part).glob("*.log")
            ):
                o.write(render_dump(str(f), "3.x", deep_iteration=True))
    msg = _refused(dumps)
    assert msg == f"holds kafka-dump-log.sh output, not Kafka's log files; use --dump-log {dumps}"
    assert _refused(dumps / "orders-5.txt") == (
        f"is kafka-dump-log.sh output, not Kafka's log files; use --dump-log {dumps / 'orders-5.txt'}"
    )
    shallow = tmp_path / "orders-5.log"  # `kafka-dump-log.sh --files … > orders-5.log`
    shallow.write_text(
        "".join(
            render_dump(str(f), "3.x", deep_iteration=False) for f in (logs / "broker-2" / "orders-5").glob("*.log")
        )
    )
    assert _refused(shallow).endswith(f"use --dump-log {shallow}")
    nested = tmp_path / "nested"  # dumps/broker-1/*.txt, as the README suggests laying them out
    shutil.copytree(dumps, nested / "broker-1")
    assert _refused(nested).endswith(f"use --dump-log {nested}")
    (tmp_path / "notes.txt").write_text("the consumers are stuck since 03:00\n")
    assert _refused(tmp_path / "notes.txt").startswith("not a Kafka segment or producer snapshot")


def test_partition_dir_run_says_transaction_state_was_not_read(logs, tmp_path) -> None:
    """The run's input line (summary, progress) says so; a full log dir's does not."""
    config = load_config(None, {"logs": [str(logs / "broker-3" / "orders-2")], "output": str(tmp_path / "out")})
    note = plan_inputs(config).note
    assert note.startswith("1 segment and 1 snapshot of 1 partition, 0 __transaction_state segments")
    assert "; __transaction_state was not read (no __transaction_state-<n>/ in the input)" in note
    assert "NO_TRANSACTIONAL_ID with a VERIFY_FIRST abort" in note
    config = load_config(None, {"logs": [str(logs)], "output": str(tmp_path / "out")})
    assert "was not read" not in plan_inputs(config).note
