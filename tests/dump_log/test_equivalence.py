"""The text path equals the binary path: scenarios written by the broker-log writer, rendered
as kafka-dump-log.sh output of each version, read back, compared with the segment sources."""

from __future__ import annotations

import os

import pytest

from txnlog.kafka.dump_log_text import render_dump

pytestmark = pytest.mark.spark

SCENARIOS = ["deleted_segment_snapshot"]  # more scenarios: same code paths, minutes more
#: (version, deep_iteration, transaction_log_decoder)
VERSIONS = [("2.7", True, True), ("3.0", False, False), ("3.x", True, True), ("trunk", True, True)]
SUMMARY_COLS = [
    "kind", "broker", "topic", "partition", "file", "file_offset", "producer_id", "producer_epoch", "min_epoch",
    "first_offset", "last_offset", "first_timestamp", "last_timestamp", "batch_count", "record_count",
    "size_bytes", "control_type", "coordinator_epoch", "legacy_entries",
]
#: what a dump without deep iteration cannot show (module doc of txnlog.spark.dump_log)
NOT_SHOWN_WITHOUT_DEEP = {"control_type", "coordinator_epoch", "first_timestamp"}
RECORD_COLS_SCALA = [
    "coordinator_partition", "record_offset", "record_timestamp", "coordinator_epoch", "transactional_id",
    "is_tombstone", "producer_id", "producer_epoch", "timeout_ms", "state", "partitions", "last_update_timestamp",
]
RECORD_COLS_JSON = RECORD_COLS_SCALA + [
    "txn_start_timestamp", "value_version", "previous_producer_id", "next_producer_id", "next_producer_epoch",
    "client_transaction_version",
]


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.logdirs import discover
    from txnlog.spark.dump_log import read_dump_logs
    from txnlog.spark.sources import files_option, register_sources

    root = tmp_path_factory.mktemp("scenarios")
    dumps = tmp_path_factory.mktemp("dumps")
    register_sources(spark)
    inv_files, txn_files = [], []
    for name in SCENARIOS:
        write_scenario(name, root / name, 0)
        inv = discover([str(root / name)])
        inv_files += list(inv.segments) + list(inv.snapshots)
        txn_files += list(inv.txn_state_segments)
    for version, deep, decoder in VERSIONS:
        # one dump file per version holding every file (as --files a,b,c prints); the printed
        # path is prefixed with the version so rows say which dump they came from
        with open(dumps / f"dump-{version}.txt", "w") as out:
            for f in inv_files + txn_files:
                rel = os.path.relpath(f.path, root)
                out.write(render_dump(f.path, version, deep_iteration=deep, transaction_log_decoder=decoder,
                                      dumping_path=f"/v{version}/{rel}"))
    seg = spark.read.format("txnlog_segments").option("files", files_option(inv_files)).load().toPandas()
    txn = spark.read.format("txnlog_txn_state").option("files", files_option(txn_files)).load().toPandas()
    fr = read_dump_logs(spark, [str(dumps)])
    return root, seg, txn, fr.summary.toPandas(), fr.records.toPandas()


def _rows(df, cols):  # type: ignore[no-untyped-def]
    def norm(v):  # type: ignore[no-untyped-def]
        if v is None or (isinstance(v, float) and v != v):
            return None
        if hasattr(v, "tolist"):
            v = v.tolist()
        if isinstance(v, list):
            return tuple(sorted(v))
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    return sorted((tuple(norm(r[c]) for c in cols) for _, r in df.iterrows()), key=repr)


@pytest.mark.parametrize("version, deep, decoder", VERSIONS)
def test_summary_rows_equal(world, version, deep, decoder) -> None:  # type: ignore[no-untyped-def]
    root, seg, _, summary, _ = world
    prefix = f"/v{version}/"
    mine = summary[summary["file"].str.startswith(prefix) & (summary["kind"] != "quarantine")].copy()
    mine["file"] = mine["file"].str[len(prefix):]
    theirs = seg[seg["kind"] != "quarantine"].copy()
    theirs["file"] = theirs["file"].map(lambda p: os.path.relpath(p, root))
    # the binary path's broker is the log dir's basename: the same rule gives it from the path
    # first_timestamp (the batch *base* timestamp) is not printed; the first record's timestamp
    # stands in for it and differs by a few ms where the writer's base is not the first record's
    cols = [c for c in SUMMARY_COLS if (deep or c not in NOT_SHOWN_WITHOUT_DEEP) and c != "first_timestamp"]
    assert len(theirs) > 0 and (theirs["kind"] == "run").any() and (theirs["kind"] == "snapshot").any()
    assert _rows(mine, cols) == _rows(theirs, cols)


def test_no_quarantine_for_rendered_dumps(world) -> None:  # type: ignore[no-untyped-def]
    _, _, _, summary, records = world
    q = summary[summary["kind"] == "quarantine"]
    assert q.empty, q[["file", "position", "reason", "detail"]].head().to_string()
    # 3.0 dumps (no decoder) say so once per __transaction_state segment; decoded ones do not
    rq = records[records["kind"] == "quarantine"]
    assert set(rq["reason"]) <= {"dump_log_txn_state_not_decoded"}
    assert all("dump-3.0.txt" in f for f in rq["file"])


@pytest.mark.parametrize("version", ["2.7", "3.x", "trunk"])
def test_txn_state_records_equal(world, version) -> None:  # type: ignore[no-untyped-def]
    root, _, txn, _, records = world
    prefix = f"/v{version}/"
    mine = records[records["file"].str.startswith(prefix) & (records["kind"] == "record")].copy()
    theirs = txn[txn["kind"] == "record"].copy()
    for df in (mine, theirs):
        # Kafka's coordinator ignores the partition array of Empty records; the 3.x text prints []
        df["partitions"] = [
            [] if (p is None or (isinstance(p, float)) or s == 0) else list(p)
            for p, s in zip(df["partitions"], df["state"])
        ]
    cols = RECORD_COLS_JSON if version == "trunk" else RECORD_COLS_SCALA
    assert len(theirs) > 0
    assert _rows(mine, cols) == _rows(theirs, cols)
