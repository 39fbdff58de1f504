"""The text path equals the binary path: scenarios written by the broker-log writer, rendered as
``kafka-dump-log.sh`` output of each Kafka version (``txnlog.kafka.dump_log_render.render_dump``),
read back, compared with reading the same segments directly.

Two levels:

* **fragments** - the rows of the segment and ``__transaction_state`` sources (runs, markers,
  segment rows, snapshots; coordinator records) for every scenario x every format variant, read
  in one Spark job per group of scenarios;
* **tables** - the whole job (``txnlog.pipeline.run``) on the dumps against the job on the
  segments: every output table, row for row.

What a dump cannot show is compared the way the text allows, and nothing else is excused:

* without ``--deep-iteration`` (and in Kafka 2.8's broken record lines) a marker's type and
  coordinator epoch are not printed, and neither is a batch's *base* timestamp.
  ``DumpLogSegments.printBatchLevel`` prints ``batch.maxTimestamp`` only (apache/kafka
  ``core/src/main/scala/kafka/tools/DumpLogSegments.scala``; the Java port in trunk prints the
  same fields): the run's first timestamp is then its first batch's max timestamp, a few ms
  later (the writer's records are 1-2 ms apart). With ``--deep-iteration`` the first record's
  timestamp (``record.timestamp`` = base + delta 0) is printed and every timestamp is exact:
  no precision is lost, the values are printed as full epoch milliseconds. A LogAppendTime
  batch is the exception: its records read as the batch's max timestamp
  (``DefaultRecordBatch.RecordIterator``: ``logAppendTime = maxTimestamp()``), so its base
  timestamp is in no dump;
* the 2.x/3.x Scala ``--transaction-log-decoder`` does not print the start timestamp, the value
  version or the KIP-890 tagged fields (spec §5.4), and prints ``partitions=[]`` where an Empty
  record has no partition array.

``corrupt_and_truncated`` is left out: ``kafka-dump-log.sh`` stops at the first batch it cannot
frame (``FileRecords.batches`` throws), while the segment reader resynchronises after damage and
quarantines by byte range - the two are not meant to agree there (the golden tests cover the
dump's own quarantine). ``sample`` holds that damage too; ``bulk`` is a benchmark input.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tests.dump_log.damage_view import (
    UNBOUNDED_AFTER,
    assert_damage_equal,
    damage_clauses,
    dump_lines,
    safety_by_id,
    without_regions,
)
from tests.oracle.judge import ScenarioRun
from txnlog.kafka.dump_log_render import render_dump

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]


@dataclass(frozen=True)
class Variant:
    """How the operator ran kafka-dump-log.sh (``version`` as ``render_dump`` names it)."""

    version: str
    deep: bool  # --deep-iteration on the data segments
    decoder: bool  # --transaction-log-decoder on the __transaction_state segments
    print_data: bool = False  # --print-data-log on the data segments

    @property
    def id(self) -> str:
        return (
            f"{self.version}-{'deep' if self.deep else 'shallow'}{'-data' if self.print_data else ''}"
            f"{'-decoded' if self.decoder else ''}"
        )

    @property
    def shows_markers(self) -> bool:
        """Record lines say ABORT/COMMIT and the coordinator epoch (2.8's malformed ones do not)."""
        return (self.deep or self.print_data) and self.version != "2.8"

    @property
    def scala_decoder(self) -> bool:
        """The 2.x/3.x text decoder (4.0's Scala tool already prints JSON: KAFKA-18207)."""
        from txnlog.kafka.dump_log_render import JSON_DECODER_VERSIONS

        return self.version not in JSON_DECODER_VERSIONS


VARIANTS = [
    Variant("2.7", deep=True, decoder=True),  # Starting offset, NONE codec, keysize, None/Some snapshots
    Variant("2.8", deep=True, decoder=False),  # record lines with leaked batch fields: quarantined, batches read
    Variant("3.0", deep=False, decoder=False),  # shallow, __transaction_state undecoded: said so in quarantine
    Variant("3.x", deep=True, decoder=True, print_data=True),  # 3.5+: deleteHorizonMs, OptionalLong, payloads
    Variant("3.x", deep=False, decoder=True),  # shallow data segments, decoded state: a typical ticket
    Variant("trunk", deep=True, decoder=True),  # 4.x Java port: JSON --transaction-log-decoder
    Variant("4.0", deep=False, decoder=True),  # 4.0's Scala tool: JSON decoder (status ids), shallow data
    Variant("4.x", deep=True, decoder=True),  # Java port with KAFKA-20712: "transactionStatus":"CompleteCommit"
]
#: variants whose __transaction_state is readable: the whole job can run on them
TABLE_VARIANTS = [v for v in VARIANTS if v.decoder]

#: every scenario that renders (see the module doc for the ones left out)
SCENARIOS = [
    "healthy",
    "ongoing_within_timeout",
    "tv2_rollover",
    "no_transactional_id",
    "transactional_id_expired",
    "coordinator_completed",
    "partition_not_in_transaction",
    "markers_pending",
    "coordinator_timeout_overdue",
    "two_phase_in_doubt",
    "coordinator_stuck",
    "partial_txn_state",
    "replicas_disagree",
    "deleted_segment_snapshot",
]
#: run by default (the rest with -m slow): the KAFKA-14053 seed case, a snapshot-only start,
#: two replicas, TV2 epoch bumps and a producer-id rollover
FAST = ("coordinator_completed", "deleted_segment_snapshot", "replicas_disagree", "tv2_rollover")
#: whole-job comparisons run by default: the seed case, deep and shallow
FAST_TABLES = {("coordinator_completed", "3.x-shallow-decoded"), ("coordinator_completed", "trunk-deep-decoded")}

SUMMARY_COLS = [
    "kind",
    "broker",
    "topic",
    "partition",
    "file",
    "file_offset",
    "producer_id",
    "producer_epoch",
    "min_epoch",
    "first_offset",
    "last_offset",
    "first_timestamp",
    "last_timestamp",
    "batch_count",
    "record_count",
    "size_bytes",
    "control_type",
    "coordinator_epoch",
    "legacy_entries",
]
#: the writer's LogAppendTime topics (txnlog.brokerlog.workload.standard_workload)
LOG_APPEND_TIME_TOPICS = ("audit",)
#: what a dump without marker record lines cannot show (module doc)
NOT_SHOWN_WITHOUT_RECORDS = {"control_type", "coordinator_epoch", "first_timestamp"}
RECORD_COLS_SCALA = [
    "coordinator_partition",
    "record_offset",
    "record_timestamp",
    "coordinator_epoch",
    "transactional_id",
    "is_tombstone",
    "producer_id",
    "producer_epoch",
    "timeout_ms",
    "state",
    "partitions",
    "last_update_timestamp",
]
RECORD_COLS_JSON = RECORD_COLS_SCALA + [
    "txn_start_timestamp",
    "value_version",
    "previous_producer_id",
    "next_producer_id",
    "next_producer_epoch",
    "client_transaction_version",
]
#: columns the Scala decoder does not print (spec §5.4): null from the text
SCALA_UNPRINTED = {
    "txn_start_timestamp",
    "value_version",
    "previous_producer_id",
    "next_producer_id",
    "next_producer_epoch",
    "client_transaction_version",
}


def _params(ids: list[str], fast: Any) -> list[Any]:
    return [pytest.param(i, marks=() if fast(i) else pytest.mark.slow, id=i) for i in ids]


def _render(inv: Any, root: str, variant: Variant, out_path: str, prefix: str) -> None:
    """One dump file holding every file of the inventory (as ``--files a,b,c`` prints them)."""
    with open(out_path, "w") as out:
        for f in list(inv.segments) + list(inv.snapshots) + list(inv.txn_state_segments):
            txn = f in inv.txn_state_segments
            out.write(
                render_dump(
                    f.path,
                    variant.version,
                    deep_iteration=variant.deep and not txn,
                    transaction_log_decoder=variant.decoder and txn,
                    print_data_log=variant.print_data and not txn,
                    dumping_path=prefix + os.path.relpath(f.path, root),
                )
            )


# ============================================================================ fragments


class _Worlds:
    """Scenarios written, rendered in every variant and read (segments and dumps) once per group."""

    def __init__(self, spark: Any, tmp_path_factory: Any) -> None:
        self.spark = spark
        self.tmp = tmp_path_factory
        self.cache: dict[bool, Any] = {}

    def get(self, fast: bool) -> Any:
        if fast not in self.cache:
            self.cache[fast] = self._build([s for s in SCENARIOS if (s in FAST) == fast])
        return self.cache[fast]

    def _build(self, scenarios: list[str]) -> Any:
        from txnlog.brokerlog.scenarios import write_scenario
        from txnlog.engine.manifest import files_option
        from txnlog.engine.spark.dump_log import read_dump_logs
        from txnlog.engine.spark.sources import SegmentsSource
        from txnlog.engine.spark.txn_state_source import TxnStateSource
        from txnlog.sources.dump_log.lines import list_dump_inputs
        from txnlog.sources.logdirs import discover

        root = str(self.tmp.mktemp("scenarios"))
        dumps = str(self.tmp.mktemp("dumps"))
        for source in (SegmentsSource, TxnStateSource):
            self.spark.dataSource.register(source)
        inv_files, txn_files = [], []
        for name in scenarios:
            write_scenario(name, os.path.join(root, name), 0, internal_partitions=ScenarioRun.INTERNAL_PARTITIONS)
            inv = discover([os.path.join(root, name)])
            inv_files += list(inv.segments) + list(inv.snapshots)
            txn_files += list(inv.txn_state_segments)
            for v in VARIANTS:
                # the printed path says which variant it came from: /<variant>/<scenario>/broker-1/orders-0/...
                _render(inv, root, v, os.path.join(dumps, f"{name}-{v.id}.txt"), f"/{v.id}/")
        seg = self.spark.read.format("txnlog_segments").option("files", files_option(inv_files)).load().toPandas()
        txn = self.spark.read.format("txnlog_txn_state").option("files", files_option(txn_files)).load().toPandas()
        fr = read_dump_logs(self.spark, list_dump_inputs([dumps]))
        return root, seg, txn, fr.summary.toPandas(), fr.records.toPandas()


@pytest.fixture(scope="module")
def worlds(spark, tmp_path_factory) -> _Worlds:  # type: ignore[no-untyped-def]
    return _Worlds(spark, tmp_path_factory)


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

    return sorted((tuple(map(norm, row)) for row in zip(*(df[c] for c in cols), strict=True)), key=repr)


def _of(df, root: str, scenario: str, prefix: str | None = None):  # type: ignore[no-untyped-def]
    """Rows of one scenario (and, for dump rows, one variant), ``file`` relative to the scenario."""
    prefix = root + os.sep if prefix is None else prefix  # the sources' files: absolute paths under root
    rel = df["file"].map(lambda p: p[len(prefix) :] if p.startswith(prefix) else "")
    out = df[rel.str.startswith(scenario + "/")].copy()
    out["file"] = rel[out.index].str[len(scenario) + 1 :]
    return out


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
@pytest.mark.parametrize("scenario", _params(SCENARIOS, lambda s: s in FAST))
def test_fragments_equal(worlds, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    root, seg, _, summary, _ = worlds.get(scenario in FAST)
    mine = _of(summary[summary["kind"] != "quarantine"], root, scenario, f"/{variant.id}/")
    theirs = _of(seg[seg["kind"] != "quarantine"], root, scenario)
    assert len(theirs) > 0 and (theirs["kind"] == "run").any() and (theirs["kind"] == "snapshot").any()
    cols = [c for c in SUMMARY_COLS if variant.shows_markers or c not in NOT_SHOWN_WITHOUT_RECORDS]
    # a LogAppendTime batch's records all read as its max timestamp (DefaultRecordBatch.RecordIterator):
    # the base timestamp of such a segment's first batch is not in the text
    lat = lambda df: (df["kind"] == "segment") & df["topic"].isin(LOG_APPEND_TIME_TOPICS)  # noqa: E731
    exact = [c for c in cols if c != "first_timestamp"]
    if variant.version in ("2.7", "2.8"):
        # 2.x prints a snapshot entry's timestamp only inside its batch metadata
        # (DumpLogSegments.dumpProducerIdSnapshot: entry.batchMetadata.headOption), and readSnapshot keeps
        # none when lastOffset < 0: an entry whose metadata a marker with a new epoch cleared
        # (ProducerStateEntry.maybeUpdateProducerEpoch) shows no timestamp in that text
        cleared = (theirs["kind"] == "snapshot") & (theirs["last_offset"] < 0)
        theirs.loc[cleared, "last_timestamp"] = None
    assert _rows(mine[lat(mine)], exact) == _rows(theirs[lat(theirs)], exact)
    assert _rows(mine[~lat(mine)], cols) == _rows(theirs[~lat(theirs)], cols)
    by_file = lambda df: dict(zip(df["file"], df["first_timestamp"]))  # noqa: E731
    got, want = by_file(mine[lat(mine)]), by_file(theirs[lat(theirs)])
    assert all(want[f] <= got[f] for f in want if want[f] == want[f])
    if not variant.shows_markers:
        # what the text gives instead: the marker closes the transaction (type unknown), and the
        # first timestamp is the first batch's max timestamp, never earlier than the true one
        fr = mine[mine["kind"] == "marker"]
        assert (fr["control_type"] == -1).all() and (fr["coordinator_epoch"] == -1).all()
        key = ["kind", "file", "producer_id", "first_offset"]
        both = mine.merge(theirs, on=key, suffixes=("", "_bin"))
        runs = both[both["kind"] == "run"]
        assert (runs["first_timestamp"] >= runs["first_timestamp_bin"]).all()


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
@pytest.mark.parametrize("scenario", _params(SCENARIOS, lambda s: s in FAST))
def test_only_expected_quarantine(worlds, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    """Dumps of sound segments quarantine only what the format cannot carry, each line said why."""
    from txnlog.kafka import dump_log_text as D

    _, _, _, summary, records = worlds.get(scenario in FAST)
    dump = f"{scenario}-{variant.id}.txt"
    q = summary[(summary["kind"] == "quarantine") & summary["file"].str.endswith(dump)]
    allowed = set()
    if variant.version == "2.8":
        allowed.add(D.REASON_MALFORMED_2_8)  # every record line, never read as a record
    if variant.print_data:
        # a payload holding a newline byte continues on a line of its own, as the real tool prints it
        allowed.add(D.REASON_UNPARSED)
    assert set(q["reason"]) <= allowed, q[["position", "reason", "detail"]].head().to_string()
    if variant.version == "2.8":
        assert (q["reason"] == D.REASON_MALFORMED_2_8).any()
    rq = records[(records["kind"] == "quarantine") & records["file"].str.endswith(dump)]
    if variant.decoder:
        assert rq.empty, rq[["position", "reason", "detail"]].head().to_string()
    else:  # said once per undecoded __transaction_state segment
        assert set(rq["reason"]) == {D.REASON_TXN_UNDECODED}


@pytest.mark.parametrize("variant", TABLE_VARIANTS, ids=[v.id for v in TABLE_VARIANTS])
@pytest.mark.parametrize("scenario", _params(SCENARIOS, lambda s: s in FAST))
def test_txn_state_records_equal(worlds, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    root, _, txn, _, records = worlds.get(scenario in FAST)
    mine = _of(records[records["kind"] == "record"], root, scenario, f"/{variant.id}/")
    theirs = _of(txn[txn["kind"] == "record"], root, scenario)
    for df in (mine, theirs):
        # Kafka's coordinator ignores the partition array of Empty records; the 3.x text prints []
        df["partitions"] = [
            [] if (p is None or (isinstance(p, float)) or s == 0) else list(p)
            for p, s in zip(df["partitions"], df["state"])
        ]
    cols = RECORD_COLS_SCALA if variant.scala_decoder else RECORD_COLS_JSON
    assert len(theirs) > 0
    assert _rows(mine, cols) == _rows(theirs, cols)
    if variant.scala_decoder:
        assert mine[sorted(SCALA_UNPRINTED)].isna().all().all()


# ============================================================================ tables

TABLES = (
    "findings",
    "abort_recommendations",
    "transactions",
    "partition_health",
    "producer_state",
    "coordinator_state",
    "coordinator_history",
)
KEYS = {
    "findings": ("topic", "partition", "producer_id", "start_offset", "transactional_id", "reason"),
    "abort_recommendations": ("topic", "partition", "producer_id", "start_offset"),
    "transactions": ("topic", "partition", "producer_id", "first_offset"),
    "partition_health": ("topic", "partition"),
    "producer_state": ("topic", "partition", "producer_id"),
    "coordinator_state": ("transactional_id",),
    "coordinator_history": ("coordinator_partition", "record_offset"),
}


class _Runs:
    """The job on each scenario's segments (once) and on its dumps (once per variant)."""

    def __init__(self, spark: Any, tmp_path_factory: Any) -> None:
        self.spark = spark
        self.tmp = tmp_path_factory
        self.scenarios: dict[str, tuple[str, Any]] = {}
        self.rows: dict[str, Any] = {}

    def _run(self, config: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        from txnlog.model.config import load_config
        from txnlog.output.delta import read_table
        from txnlog.pipeline import run

        run(load_config(None, {"cluster": "eq", **config}), spark=self.spark, progress=lambda _m: None)
        return {t: read_table(config["output"], t).to_pylist() for t in (*TABLES, "quarantine")}

    def segments(self, scenario: str) -> tuple[str, Any, dict[str, list[dict[str, Any]]]]:
        if scenario not in self.scenarios:
            from txnlog.brokerlog.scenarios import write_scenario
            from txnlog.sources.logdirs import discover

            base = str(self.tmp.mktemp(scenario))
            logs = os.path.join(base, "logs")
            truth = write_scenario(scenario, logs, 0, internal_partitions=ScenarioRun.INTERNAL_PARTITIONS)
            options = {"output": os.path.join(base, "out-segments"), **ScenarioRun.options(truth)}
            tables = self._run({"logs": [logs], **options})
            self.scenarios[scenario] = (base, discover([logs]), truth, tables)
        base, inv, truth, tables = self.scenarios[scenario]
        return base, inv, tables

    def segment_rows(self, scenario: str) -> Any:
        """The segments source's rows of the scenario's data segments and snapshots, read in this process."""
        if scenario not in self.rows:
            from txnlog.engine.manifest import files_option
            from txnlog.engine.spark.placement import read_here
            from txnlog.engine.spark.sources import SegmentsSource
            from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA

            _, inv, _ = self.segments(scenario)
            files = files_option(list(inv.segments) + list(inv.snapshots))
            self.rows[scenario] = read_here(SegmentsSource, {"files": files}, SEGMENT_SUMMARY_SCHEMA)
        return self.rows[scenario]

    def dumps(self, scenario: str, variant: Variant) -> dict[str, list[dict[str, Any]]]:
        base, inv, _ = self.segments(scenario)
        truth = self.scenarios[scenario][2]
        d = os.path.join(base, f"dump-{variant.id}")
        os.makedirs(d)
        # as an operator copies it: /var/lib/kafka/<broker dir>/<topic>-<p>/<file>
        _render(inv, os.path.join(base, "logs"), variant, os.path.join(d, "dump.txt"), "/var/lib/kafka/")
        options = {"output": os.path.join(base, f"out-{variant.id}"), **ScenarioRun.options(truth)}
        return self._run({"dump_log": [d], **options})


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory) -> _Runs:  # type: ignore[no-untyped-def]
    return _Runs(spark, tmp_path_factory)


def _expected_from_segments(table: str, row: dict[str, Any], variant: Variant) -> dict[str, Any]:
    """What the dump can show of a segment-path row (module doc); every other column is kept."""
    row = {k: v for k, v in row.items() if k != "source"}
    if table == "partition_health":
        row["high_watermark"] = None  # replication-offset-checkpoint is a log-dir file: no dump shows it
    if table in ("findings", "abort_recommendations"):
        row["blocked_groups"] = None  # no consumer group is read from dump text: not known, rather than none
    if table in ("coordinator_state", "coordinator_history") and variant.scala_decoder:
        for c in SCALA_UNPRINTED & set(row):
            row[c] = None
        if table == "coordinator_history" and row["state"] == "Empty" and row["partitions"] is None:
            row["partitions"] = []
    if table == "findings" and variant.scala_decoder and row["reason"] == "COORDINATOR_STUCK":
        # a coordinator-only finding starts at the record's txnStartTimestamp, which the Scala decoder does
        # not print: when the transaction began, and so how long it has been open, is not in the dump
        row["first_timestamp"] = row["open_ms"] = None
    return row


#: columns that depend on what a dump without marker record lines loses (module doc)
_SHALLOW_LOSSES = {
    "transactions": {"outcome", "coordinator_epoch", "first_timestamp", "duration_ms"},
    # the coordinator epoch of a finding is the producer's last marker's (its legacy abort, the remedy's
    # fallback for brokers before 3.0, carries it too)
    "findings": {"first_timestamp", "open_ms", "evidence", "coordinator_epoch", "remedy_fallback_command"},
    "abort_recommendations": {"coordinator_epoch", "legacy_command"},
    "partition_health": {"max_open_ms", "stuck_since"},
    # a marker's coordinator epoch is in its record line
    "producer_state": {"coordinator_epoch"},
}


TABLE_CASES = [
    pytest.param(
        s,
        v,
        id=f"{s}-{v.id}",
        marks=[
            *(() if (s, v.id) in FAST_TABLES else (pytest.mark.slow,)),
        ],
    )
    for s in SCENARIOS
    for v in TABLE_VARIANTS
]


@pytest.mark.parametrize("scenario, variant", TABLE_CASES)
def test_job_tables_equal(runs, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    _, _, seg = runs.segments(scenario)
    dump = runs.dumps(scenario, variant)
    for table in TABLES:
        want = {tuple(r[k] for k in KEYS[table]): _expected_from_segments(table, r, variant) for r in seg[table]}
        got = {tuple(r[k] for k in KEYS[table]): {k: v for k, v in r.items() if k != "source"} for r in dump[table]}
        assert len(want) == len(seg[table]) and len(got) == len(dump[table]), f"{table}: duplicate keys"
        assert set(got) == set(want), table
        lost = set() if variant.shows_markers else _SHALLOW_LOSSES.get(table, set())
        for key, w in want.items():
            g = got[key]
            assert {c: g[c] for c in w if c not in lost} == {c: w[c] for c in w if c not in lost}, (table, key)
            if lost and table == "transactions" and w["outcome"] in ("COMMIT", "ABORT"):
                assert g["outcome"] == "UNKNOWN"  # a marker closed it; the dump does not say which
            if lost and table == "findings" and w["first_timestamp"] is not None:
                assert w["first_timestamp"] <= g["first_timestamp"]
    # rows say which input they came from
    assert {r["source"] for t in ("findings", "transactions", "partition_health") for r in dump[t]} <= {"dump_log"}
    assert {r["source"] for t in ("findings", "transactions", "partition_health") for r in seg[t]} <= {"segments"}
    assert {r["source"] for r in dump["abort_recommendations"]} <= {"dump_log"}
    # the dump names its own lines; nothing in a sound segment is quarantined by either path
    assert seg["quarantine"] == []
    q = {r["reason"] for r in dump["quarantine"]}
    assert q <= ({"dump_log_unparsed_line"} if variant.print_data else set()), q


# ============================================================================ damage

#: the writer's damage, every kind (crc_mismatch, bad_magic, bad_length, truncated_tail): a bad-CRC batch before
#: a hanging transaction and past its producer's earlier marker (SAFE), between two of its batches and after its
#: last (VERIFY_FIRST); and a segment with each kind of damage
DAMAGE_SCENARIOS = ("damage_around_transactions", "corrupt_and_truncated")
#: txnlog's 3.x (Scala) and 4.x (Java port) renderings, with and without --deep-iteration. Kafka 4.0's own output
#: is judged through the oracle (tests/oracle/test_dump_log.py), with what the tool prints to stderr when it stops
#: (the renderer gives stdout only, so a 4.0 rendering of a segment the tool stops on just ends)
DAMAGE_VARIANTS = [
    Variant("3.x", deep=False, decoder=True),
    Variant("3.x", deep=True, decoder=True),
    Variant("4.x", deep=False, decoder=True),
    Variant("4.x", deep=True, decoder=True),
]
#: a region's damage the dump cannot bound by a valid batch after it: the tool stops on a header it cannot frame
#: (``FileLogInputStream.nextBatch`` throws ``CorruptRecordException`` for a batch length below 14)
UNBOUNDED_IN_DUMPS = ("bad_length",)


def _unbounded(tables: dict[str, list[dict[str, Any]]]) -> set[tuple[str, int]]:
    return {(q["topic"], q["partition"]) for q in tables["quarantine"] if q["reason"] in UNBOUNDED_IN_DUMPS}


@pytest.mark.parametrize("variant", DAMAGE_VARIANTS, ids=[v.id for v in DAMAGE_VARIANTS])
@pytest.mark.parametrize("scenario", DAMAGE_SCENARIOS)
def test_damage_is_bounded_as_in_the_log_files(runs, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    """A dumped region is bounded by the one damage rule, from the batches the dump shows valid either side of
    it: the quarantine rows, the safety of every finding and the regions its evidence names (their offsets and
    how they were bounded) are those of the log files; the dump's evidence also names the dump line.

    Where the dump cannot show a valid batch after the region (the tool stopped on a header it cannot frame) the
    rule says so and stays conservative: its region runs on, and no finding there is safer than from the files."""
    _, _, seg = runs.segments(scenario)
    dump = runs.dumps(scenario, variant)
    unbounded = _unbounded(seg)
    assert_damage_equal(seg, dump, unbounded)
    if scenario == "damage_around_transactions":
        want = {"ledger-before": "SAFE", "ledger-inside": "VERIFY_FIRST", "ledger-after": "VERIFY_FIRST"}
        assert safety_by_id(seg, "ledger") == want and safety_by_id(dump, "ledger") == want
    # the dump line each region came from: the batch line that printed isvalid: false, the invalid bytes' line
    lines = [str(line) for f in dump["findings"] for line in dump_lines(f["evidence"])]
    shown = (
        r"baseOffset: \d+ .* isvalid: false$"
        if scenario == "damage_around_transactions"
        else r"Found \d+ invalid bytes"
    )
    assert lines and any(re.search(r"dump\.txt:\d+: " + shown, line) for line in lines), lines
    if variant.shows_markers:  # the whole evidence too, where the dump shows what the files show
        by_key = lambda t: {  # noqa: E731
            (f["topic"], f["partition"], f["producer_id"], f["start_offset"]): without_regions(f["evidence"])
            for f in t["findings"]
            if (f["topic"], f["partition"]) not in unbounded
        }
        assert by_key(dump) == by_key(seg)


@pytest.mark.parametrize("variant", DAMAGE_VARIANTS, ids=[v.id for v in DAMAGE_VARIANTS])
@pytest.mark.parametrize("scenario", DAMAGE_SCENARIOS)
def test_damage_ranges_equal(runs, tmp_path, scenario, variant) -> None:  # type: ignore[no-untyped-def]
    """The damage ranges the verdicts use (txnlog.rules.damage.ranges), read in this process from the log files
    and from their dump: the same offsets and bounds, but where the dump cannot bound a region (it runs on).
    The log files are the module's copy of the scenario (``runs``, seed 0), read once for every variant."""
    import pyarrow as pa

    from txnlog.engine.spark.dump_log import read_dump_logs_here
    from txnlog.rules import partitions as rules
    from txnlog.sources.dump_log.lines import list_dump_inputs

    base, inv, _ = runs.segments(scenario)
    logs = os.path.join(base, "logs")
    seg = runs.segment_rows(scenario)
    os.makedirs(tmp_path / "dump")
    _render(inv, logs, variant, str(tmp_path / "dump" / "dump.txt"), "/var/lib/kafka/")
    dumped, _ = read_dump_logs_here(list_dump_inputs([str(tmp_path / "dump")]))
    records = pa.table({"kind": pa.array([], pa.string()), "coordinator_partition": pa.array([], pa.int32())})

    def ranges(summary: pa.Table, source: str) -> dict[Any, set[tuple]]:
        summary = summary.append_column("input", pa.repeat(pa.scalar(source), summary.num_rows))
        found = rules.damage(summary, records).ranges
        return {
            k: {(lo, hi, damage_clauses(f"offsets 0-0 of {w}")[0][1:]) for lo, hi, w in v} for k, v in found.items()
        }

    want, got = ranges(seg, "segments"), ranges(dumped, "dump_log")
    assert want and set(got) == set(want)
    for tp, regions in want.items():
        if _reasons(seg, tp) & set(UNBOUNDED_IN_DUMPS):  # the dump runs each such region on, and says so
            lost = regions - got[tp]
            assert lost, tp
            for first, end, _ in lost:
                assert any(
                    lo == first and (hi is None or hi >= end) and UNBOUNDED_AFTER in w[1] for lo, hi, w in got[tp]
                ), (tp, got[tp])
            assert {r for r in got[tp] if r[0] not in {x[0] for x in lost}} == regions - lost
        else:
            assert got[tp] == regions, tp


def _reasons(summary: Any, tp: tuple[str, int]) -> set[str]:
    rows = summary.filter(summary.column("kind").to_numpy(zero_copy_only=False) == "quarantine").to_pylist()
    return {r["reason"] for r in rows if (r["topic"], r["partition"]) == tp}
