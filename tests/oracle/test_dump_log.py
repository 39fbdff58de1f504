"""The real kafka-dump-log.sh: every scenario of the writer dumped by Kafka's own ``DumpLogSegments``.

For every scenario the writer makes (``scenario_names()`` but ``bulk``, whose size is a benchmark's
parameter), each broker's files are dumped as operators dump them: data segments with
``--deep-iteration``, ``__transaction_state`` segments with ``--transaction-log-decoder``, producer
snapshots as they are; one ``.txt`` per file, one directory per broker, every broker's log dir printed
as ``/var/lib/kafka/data`` (the dump's directory names the replica). The tool runs once per flag set over
every broker's files (one JVM, not one per file or broker); it prints ``Dumping <path>`` before each file,
which splits its output per file. What it writes to stderr goes where ``> file.txt 2>&1`` puts it: its end-of-run
report (``Non-consecutive offsets in <path>``) in the file it names, and an exception that stops it in
the file it was dumping, in the form ``kafka-dump-log.sh`` prints (the oracle calls ``main`` through
reflection, which wraps the exception in an ``InvocationTargetException``; the real tool does not).
The files the exception kept it from dumping are dumped by a new call, as an operator would.

Then txnlog reads the dumps (``dump_log``) and the segments themselves (``logs``: the run every scenario
module shares, the ``scenario_run`` fixture), in this process with the session's Spark, at the scenario's
``as_of`` and one cluster name: the tables must be equal in every
column but ``source`` and the columns naming an input file, except where a dump cannot carry what the
segments hold, each with its reason below: the high watermark (``_EXCLUDED``); the coordinator record's
fields the decoder's text form does not print, and the order it prints a record's partitions in
(``_TEXT_DECODER``, ``_UNORDERED``, ``_COORDINATOR_ONLY``); a log start that DeleteRecords moved inside a
segment (``_moved_log_start``); a clean shutdown's restart semantics (``_clean_copies``); and the rest of a
segment after a batch the tool stopped on (``_stopped``), whose dump says so in ``quarantine``.

And the project's own renderer (``txnlog.kafka.dump_log_render.render_dump``) must print, for Kafka 4.0,
what Kafka printed, byte for byte, for every file (``test_render_dump_4_0_is_kafka_byte_for_byte``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.dump_log.damage_view import assert_damage_equal, dump_lines, safety_by_id, without_regions
from tests.e2e.test_previous_pipeline import TABLES, differences, read_delta
from tests.oracle import kafka
from tests.oracle.judge import ScenarioRun

pytestmark = [pytest.mark.timeout(900)]

CLUSTER = ScenarioRun.CLUSTER  # the segments' run is the shared one (tests/conftest.py)
SHOWN_LOG_DIR = "/var/lib/kafka/data"  # every broker's log.dirs, as the dumps print it
DEEP = ("--deep-iteration",)
DECODER = ("--transaction-log-decoder",)


def _scenarios() -> list[str]:
    """Every scenario of the writer but ``bulk`` (its size is a benchmark's parameter, not a situation)."""
    from txnlog.brokerlog.scenarios import scenario_names

    return [n for n in scenario_names() if n != "bulk"]


SCENARIOS = _scenarios()


# --- the real tool, batched, split per file --------------------------------------------------------------


@dataclass
class Dumped:
    """One file as ``kafka-dump-log.sh --files <file> > <file>.txt 2>&1`` leaves it."""

    path: str  # as given to the tool (relative to the directory it ran in)
    stdout: str  # what the tool printed to stdout for it
    stderr: str  # what it printed to stderr about it (its report lines, or the exception that stopped it)


_DUMPING = re.compile(r"^Dumping (.*)$", re.M)


def _real_exception(stderr: str) -> str:
    """The oracle's ``InvocationTargetException`` (its reflective call of ``DumpLogSegments.main``) as the
    real tool's JVM prints the exception: ``Exception in thread "main" <cause>`` and the cause's trace."""
    lines = stderr.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("Caused by: ")), None)
    if start is None:
        return stderr
    return 'Exception in thread "main" ' + lines[start][len("Caused by: ") :] + "".join(lines[start + 1 :])


def _report_blocks(stderr: str, cwd: Path) -> dict[str, str]:
    """DumpLogSegments' end-of-run reports (``Non-consecutive offsets in <absolute path>`` and its
    indented lines, ``Mismatches in :<path>``, ...) by the file they name (relative to ``cwd``)."""
    blocks: dict[str, str] = {}
    current: str | None = None
    prefix = str(cwd) + os.sep
    for line in stderr.splitlines(keepends=True):
        if not line.startswith((" ", "\t")):
            named = line.rstrip("\n").rsplit(" ", 1)[-1].lstrip(":")
            current = named[len(prefix) :] if named.startswith(prefix) else None
            if current is None:
                raise AssertionError(f"DumpLogSegments printed a line naming no dumped file: {line!r}")
        assert current is not None
        blocks[current] = blocks.get(current, "") + line
    return blocks


def dump_each(cwd: Path, paths: list[str], options: tuple[str, ...]) -> list[Dumped]:
    """The real ``kafka-dump-log.sh`` over ``paths`` (relative to ``cwd``, printed so), one JVM per
    call; a file the tool stops on ends the call and the rest go to the next call."""
    out: list[Dumped] = []
    todo = list(paths)
    while todo:
        proc = kafka.call("dump", *todo, *options, cwd=cwd)
        starts = [(m.start(), m.group(1)) for m in _DUMPING.finditer(proc.stdout)]
        done = [p for _, p in starts]
        if done != todo[: len(done)] or not done:
            raise RuntimeError(f"oracle dump printed {done[:3]}... for {todo[:3]}...: {proc.stderr[-3000:]}")
        stopped = proc.returncode != 0
        if stopped and "Exception in thread" not in proc.stderr:
            raise RuntimeError(f"oracle dump failed ({proc.returncode}): {proc.stderr[-3000:]}")
        reports = {} if stopped else _report_blocks(proc.stderr, cwd)
        ends = [s for s, _ in starts[1:]] + [len(proc.stdout)]
        for (start, path), end in zip(starts, ends, strict=True):
            out.append(Dumped(path, proc.stdout[start:end], reports.pop(path, "")))
        assert not reports, f"reports about files not dumped: {reports}"
        if stopped:
            out[-1].stderr = _real_exception(proc.stderr)
        todo = todo[len(done) :]
    return out


def dump_brokers(logs: Path, dumps: Path, data_options: tuple[str, ...] = DEEP) -> dict[str, list[Dumped]]:
    """Every broker's files under ``logs`` (those txnlog reads: ``txnlog.sources.logdirs.discover``) dumped into
    ``dumps/<broker>/<partition dir>-<file>.txt``: two calls for all the brokers (the data segments and
    snapshots with ``data_options``, then ``__transaction_state``), each file's output as the tool prints it when
    run in its broker's log dir (``Dumping <partition dir>/<file>``)."""
    from txnlog.sources.logdirs import discover

    inv = discover([str(logs)])
    rel = {
        txn: sorted(
            os.path.relpath(f.path, logs)
            for f in (*inv.segments, *inv.snapshots, *inv.txn_state_segments)
            if (f.topic == "__transaction_state") == txn
        )
        for txn in (False, True)
    }
    dumped: dict[str, list[Dumped]] = {broker: [] for broker in inv.brokers}
    for d in dump_each(logs, rel[False], data_options) + dump_each(logs, rel[True], DECODER):
        broker, _, path = d.path.partition(os.sep)
        text = d.stdout.replace(f"Dumping {d.path}\n", f"Dumping {path}\n", 1)
        # the exception that stopped the tool names the file as given ("... in file <path>."); report lines name it
        # by its absolute path, which stays as printed (written below with the log dir as shown)
        stderr = re.sub(r"(?<![\w/])" + re.escape(d.path), path, d.stderr)
        dumped[broker].append(Dumped(path, text, stderr))
    for broker, files in dumped.items():
        broker_dir = logs / broker
        (dumps / broker).mkdir(parents=True)
        for d in files:
            text = d.stdout.replace(f"Dumping {d.path}\n", f"Dumping {SHOWN_LOG_DIR}/{d.path}\n", 1)
            text += d.stderr.replace(str(broker_dir) + os.sep, SHOWN_LOG_DIR + "/")
            (dumps / broker / (d.path.replace("/", "-") + ".txt")).write_text(text)
    return dumped


# --- one setup per scenario ----------------------------------------------------------------------------


@dataclass
class Judged:
    name: str
    logs: Path
    dumps: Path
    dumped: dict[str, list[Dumped]]
    out_logs: Path
    out_dumps: Path


def _run(spark, out: Path, as_of: str, **inputs) -> None:
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    config = load_config(None, {**inputs, "output": str(out), "as_of": as_of, "cluster": CLUSTER, "progress": False})
    run(config, spark=spark, progress=lambda _m: None)


@pytest.fixture(scope="module", params=SCENARIOS)
def judged(request, oracle, scenario_run, spark, tmp_path_factory) -> Judged:
    run = scenario_run(request.param)  # the copy and txnlog's run over its segments (tests/conftest.py)
    work = tmp_path_factory.mktemp(run.name)
    dumped = dump_brokers(run.logs, work / "dumps")
    # each broker's dumps named as that replica (NAME=PATH): every printed path is /var/lib/kafka/data/...
    named = [f"{p.name}={p}" for p in sorted((work / "dumps").iterdir())]
    _run(spark, work / "out-dumps", str(run.truth.as_of_ms), dump_log=named, **ScenarioRun.options(run.truth))
    return Judged(run.name, run.logs, work / "dumps", dumped, run.out, work / "out-dumps")


# --- the tests -----------------------------------------------------------------------------------------

#: columns never compared: where a row came from, and the input file it names
_NOT_COMPARED = {"source", "file", "detail", "dump_file"}

#: The 3.x text form of ``--transaction-log-decoder`` (``TransactionLog.formatRecordKeyAndValue``) is what the
#: oracle prints: its Kafka tree (2024-10-25) predates KAFKA-18207 (apache/kafka#18136), which made 4.0.0's
#: decoder print the record as JSON. The text form carries no start timestamp, value version or tagged
#: fields (txnlog.engine.spark.dump_log: those columns are null) and prints a null partition list as ``[]``.
_TEXT_DECODER = (
    "the transaction-log decoder's text form (the oracle's tree predates 4.0's JSON decoder) "
    "prints no start timestamp, value version or tagged fields, and a null partition list as []"
)
_TXN_TEXT_COLUMNS = (
    "txn_start_timestamp",
    "previous_producer_id",
    "next_producer_id",
    "next_producer_epoch",
    "client_transaction_version",
    "value_version",
)
#: (table, column) -> why a dump cannot give what the segments give, in every scenario
_EXCLUDED: dict[tuple[str, str], str] = {
    ("partition_health", "high_watermark"): (
        "the high watermark is the broker's replication-offset-checkpoint, a file kafka-dump-log.sh does not dump"
    ),
    **{("coordinator_state", c): _TEXT_DECODER for c in _TXN_TEXT_COLUMNS},
    **{("coordinator_history", c): _TEXT_DECODER for c in (*_TXN_TEXT_COLUMNS, "partitions")},
    **{
        (t, "blocked_groups"): "txnlog reads no consumer group from kafka-dump-log.sh text: the dumps' runs say null "
        "(not known), asserted below, where the log dirs' runs name the groups their __consumer_offsets holds"
        for t in ("findings", "abort_recommendations")
    },
}


#: the clause a finding's evidence gains where the run read the groups a transaction in __consumer_offsets holds
#: pending (txnlog.broker.evidence.with_pending_groups); dump text names no group, so it is taken off the segments' evidence
_PENDING_GROUPS = re.compile(
    r"; it holds the transactional offset commits of groups? .* pending: their members fail to fetch those "
    r"offsets with UNSTABLE_OFFSET_COMMIT at start-up and rebalance(?=\.$)"
)
#: the clause a finding's evidence gains where the run read the groups BLOCKED behind its transaction (their
#: committed offset is its LSO: txnlog.broker.evidence.with_blocked_groups); taken off as the clause above
_BLOCKED_GROUPS = re.compile(
    r"; consumer groups? .*? waits? behind it: (?:its|their) committed offset is this LSO \(\d+\), where a "
    r"read_committed fetch stops \(UnifiedLog\.read; read_committed is inferred\), so ending the transaction "
    r"unblocks (?:it|them)"
)


def _without_groups(evidence: str | None) -> str | None:
    """``evidence`` without the clauses that name consumer groups (a dump's run reads none)."""
    return None if evidence is None else _PENDING_GROUPS.sub("", _BLOCKED_GROUPS.sub("", evidence))


#: (table, column) -> why a list column is compared as a set: its order is not what the dump prints
_UNORDERED = {
    ("coordinator_state", "partitions"): (
        "the text decoder prints a record's partitions in the iteration order of the Scala mutable.HashSet "
        "TransactionLog.readTxnRecordValue puts them in, not the record's order"
    ),
}


def _columns(data, table: str, drop: set[str]):
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - pa.compute

    data = data.select([c for c in data.schema.names if c not in drop])
    if table == "findings":  # a damaged region's file and dump line name an input file (_NOT_COMPARED); the rest is
        evidence = [_without_groups(without_regions(e)) for e in data.column("evidence").to_pylist()]
        data = data.set_column(data.schema.names.index("evidence"), "evidence", pa.array(evidence, pa.string()))
    for c in _COORDINATOR_ONLY.get(table, ()):
        nulls = pa.array([None] * data.num_rows, data.schema.field(c).type)
        no_topic = pa.compute.is_null(data.column("topic"))
        data = data.set_column(data.schema.names.index(c), c, pa.compute.if_else(no_topic, nulls, data.column(c)))
    for t, c in _UNORDERED:
        if t == table and c in data.schema.names:
            values = [None if v is None else sorted(v) for v in data.column(c).to_pylist()]
            data = data.set_column(data.schema.names.index(c), c, pa.array(values, data.schema.field(c).type))
    return data


def _stopped(judged: Judged) -> set[tuple[str, int]]:
    """The partitions whose dump the tool stopped: deep iteration met a batch whose records it could not
    read (``DefaultRecordBatch``'s record iterator throws ``InvalidRecordException``, uncaught by
    ``DumpLogSegments.dumpLog``), so nothing after that batch in the segment is in the dump, where the
    segment reader quarantines the batch and reads on. Those partitions' rows are not compared."""
    stopped = set()
    for files in judged.dumped.values():
        for d in files:
            if "Exception in thread" in d.stderr:
                topic, _, partition = d.path.split("/")[0].rpartition("-")
                stopped.add((topic, int(partition)))
    return stopped


def _moved_log_start(judged: Judged) -> set[tuple[str, int]]:
    """The partitions whose log start a broker's ``log-start-offset-checkpoint`` puts inside a segment
    (DeleteRecords): the checkpoint is not a file kafka-dump-log.sh dumps, so from a dump the log start is the
    first segment's base offset, and the LSO, the lag and "started before the log start" follow from it.
    Those partitions' rows are not compared."""
    moved = set()
    for checkpoint in judged.logs.glob("*/log-start-offset-checkpoint"):
        for line in checkpoint.read_text().splitlines()[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            bases = [int(f.stem) for f in (checkpoint.parent / f"{topic}-{partition}").glob("*.log")]
            if bases and int(offset) > min(bases):
                moved.add((topic, int(partition)))
    return moved


def _clean_copies(judged: Judged) -> bool:
    """A broker's copy taken after a clean shutdown (``.kafka_cleanshutdown``) is read as the restarted
    broker will serve it (LogManager, ``ProducerStateManager.truncateAndReload``); a dump carries neither the
    marker file nor the high-watermark checkpoint, so its LSO is the running broker's."""
    return any(judged.logs.glob("*/.kafka_cleanshutdown"))


#: columns a clean copy's segments give by restart semantics, which its dump cannot
_RESTART_COLUMNS = {"partition_health": {"last_stable_offset", "lso_lag"}}

#: a coordinator-only finding (no topic) measures its age from the record's transaction start timestamp,
#: which the text decoder does not print (_TEXT_DECODER)
_COORDINATOR_ONLY = {"findings": ("first_timestamp", "open_ms")}


def _without(data, partitions: set[tuple[str, int]]):
    import pyarrow as pa

    if not partitions or "topic" not in data.schema.names or "partition" not in data.schema.names:
        return data
    keep = [
        (t, p) not in partitions for t, p in zip(data.column("topic").to_pylist(), data.column("partition").to_pylist())
    ]
    return data.filter(pa.array(keep, pa.bool_()))


def test_dumps_give_the_tables_of_the_segments(judged: Judged) -> None:
    skipped = _stopped(judged) | _moved_log_start(judged)
    problems: list[str] = []
    for table in TABLES:
        if table == "integrity":
            continue  # a dump carries no .txnindex: checked below, not compared
        drop = _NOT_COMPARED | {c for t, c in _EXCLUDED if t == table}
        if _clean_copies(judged):
            drop |= _RESTART_COLUMNS.get(table, set())
        want = _columns(_without(read_delta(judged.out_logs, table, {}), skipped), table, drop)
        got = _columns(_without(read_delta(judged.out_dumps, table, {}), skipped), table, drop)
        problems += differences(table, want, got)
    assert not problems, "\n".join(problems)
    assert read_delta(judged.out_dumps, "transactions", {}).num_rows > 0  # not vacuous
    # kafka-dump-log.sh text holds no .txnindex, so the audit cannot say what read_committed consumers received
    # from a dumped partition: it says NOT_CHECKED there, never that aborted data was visible or committed hidden
    checks = set(read_delta(judged.out_dumps, "integrity", {}).column("check").to_pylist())
    for table in ("findings", "abort_recommendations"):
        assert set(read_delta(judged.out_dumps, table, {}).column("blocked_groups").to_pylist()) <= {None}, table
    dumped = read_delta(judged.out_dumps, "findings", {}).column("evidence").to_pylist()
    assert not [e for e in dumped if e != _without_groups(e)], "a dump named a group it cannot read"
    assert not checks & {"ABORTED_DATA_VISIBLE", "COMMITTED_DATA_HIDDEN"}, checks
    # where the tool stopped, the dump says so: its partition has a dump_log_tool_error quarantine row
    quarantine = read_delta(judged.out_dumps, "quarantine", {}).to_pylist()
    told = {(q["topic"], q["partition"]) for q in quarantine if q["reason"] == "dump_log_tool_error"}
    assert _stopped(judged) <= told, (_stopped(judged), told)


#: the writer's damage, every kind: a bad-CRC batch before a hanging transaction and past its producer's earlier
#: marker (SAFE), between two of its batches and after its last (VERIFY_FIRST); a segment with every kind
DAMAGE_SCENARIOS = ("damage_around_transactions", "corrupt_and_truncated")


@pytest.fixture(scope="module")
def damaged(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """``damaged(scenario)``: the scenario written (seed 1) and txnlog's run over its log files (``out-logs``), made
    once for both ways of dumping it: (work dir, the writer's truth)."""
    from txnlog.brokerlog.scenarios import write_scenario

    made: dict[str, tuple[Path, Any]] = {}

    def get(scenario: str) -> tuple[Path, Any]:
        if scenario not in made:
            work = tmp_path_factory.mktemp(f"damaged-{scenario}")
            truth = write_scenario(scenario, work / "logs", seed=1)
            _run(spark, work / "out-logs", str(truth.as_of_ms), logs=[str(work / "logs")])
            made[scenario] = work, truth
        return made[scenario]

    return get


@pytest.mark.parametrize("options", [DEEP, ()], ids=["deep-iteration", "shallow"])
@pytest.mark.parametrize("scenario", DAMAGE_SCENARIOS)
def test_damage_dumped_by_kafka_is_bounded_as_in_the_log_files(
    oracle, spark, damaged, tmp_path, scenario, options
) -> None:
    """Kafka's DumpLogSegments, with and without ``--deep-iteration``: a region it shows (``isvalid: false``, a
    batch of another magic) is bounded by the one damage rule from the batches it prints valid either side, so the
    quarantine rows, the findings' safety and the regions their evidence names are those of the log files, and the
    evidence names the dump line. Where the tool stopped (a header it cannot frame, records it cannot read: the
    exception in the file, ``dump_log_tool_error``) no valid batch bounds the region after: the rule says so and
    no finding there is safer than from the files."""
    from txnlog.output.delta import read_table

    work, truth = damaged(scenario)  # the copy and the run over its log files, shared by both ways of dumping
    dumped = dump_brokers(work / "logs", tmp_path / "dumps", options)
    named = [f"{p.name}={p}" for p in sorted((tmp_path / "dumps").iterdir())]
    _run(spark, tmp_path / "out-dumps", str(truth.as_of_ms), dump_log=named)
    tables = ("findings", "abort_recommendations", "quarantine")
    files = {t: read_table(str(work / "out-logs"), t).to_pylist() for t in tables}
    dump = {t: read_table(str(tmp_path / "out-dumps"), t).to_pylist() for t in tables}
    stopped = _stopped(Judged(scenario, work / "logs", tmp_path / "dumps", dumped, work, tmp_path))
    assert_damage_equal(files, dump, stopped)
    told = {(q["topic"], q["partition"]) for q in dump["quarantine"] if q["reason"] == "dump_log_tool_error"}
    assert stopped <= told
    # the dump line of each region named: where the dump shows the partition whole, as the files' evidence names it
    lines = [str(line) for f in dump["findings"] for line in dump_lines(f["evidence"])]
    shown = r"baseOffset: \d+ .* isvalid: false$" if scenario == "damage_around_transactions" else ""
    if any(dump_lines(f["evidence"]) and (f["topic"], f["partition"]) not in stopped for f in files["findings"]):
        assert any(re.search(r"\.txt:\d+: " + shown, line) for line in lines), lines
    if scenario == "damage_around_transactions":
        safety, want = safety_by_id(dump, "ledger"), safety_by_id(files, "ledger")
        assert want == {"ledger-before": "SAFE", "ledger-inside": "VERIFY_FIRST", "ledger-after": "VERIFY_FIRST"}
        partition = {"ledger-before": 0, "ledger-inside": 1, "ledger-after": 2}  # the scenario's placement
        bounded = {t for t in want if ("ledger", partition[t]) not in stopped}
        assert {t: safety[t] for t in bounded} == {t: want[t] for t in bounded}


def test_every_line_kafka_prints_is_read(judged: Judged) -> None:
    """txnlog's dump-log parser knows every line the real tool printed: none is quarantined as unparsed."""
    quarantine = read_delta(judged.out_dumps, "quarantine", {}).to_pylist()
    unparsed = [q for q in quarantine if q["reason"] == "dump_log_unparsed_line"]
    assert not unparsed, unparsed[:5]


def test_render_dump_4_0_is_kafka_byte_for_byte(judged: Judged) -> None:
    """``render_dump(..., "4.0")`` prints every file as Kafka 4.0's DumpLogSegments does (its stdout).

    But the ``--transaction-log-decoder`` part of a ``__transaction_state`` record line (`` key: ... payload:
    ...``): the oracle's Kafka tree (2024-10-25) prints it with ``TransactionLog.formatRecordKeyAndValue``,
    the text form of 2.x and 3.x, where 4.0.0 prints JSON (KAFKA-18207, apache/kafka#18136, shipped in
    4.0.0; the renderer's "4.0"). That part is held to the renderer's text form ("3.x"), byte for byte too."""
    from txnlog.kafka.dump_log_render import render_dump

    problems: list[str] = []
    for broker, files in judged.dumped.items():
        for d in files:
            path = str(judged.logs / broker / d.path)
            if d.path.startswith("__transaction_state-"):
                text_form = render_dump(path, "3.x", False, True, dumping_path=d.path, scala_set_order=True)
                if text_form != d.stdout:
                    problems.append(f"{broker}/{d.path} (3.x text decoder): {_first_difference(d.stdout, text_form)}")
                mine = _DECODED.sub(r"\1", render_dump(path, "4.0", False, True, dumping_path=d.path))
                kafka_text = _DECODED.sub(r"\1", d.stdout)
            else:
                mine, kafka_text = render_dump(path, "4.0", True, dumping_path=d.path), d.stdout
            if mine != kafka_text:
                problems.append(f"{broker}/{d.path}: {_first_difference(kafka_text, mine)}")
    assert not problems, "\n".join(problems[:10])


#: the --transaction-log-decoder part of a record line (both forms: text and JSON)
_DECODED = re.compile(r"(?m)^(\| offset: [^\n]*?) key: [^\n]*$")


def _first_difference(kafka_text: str, mine: str) -> str:
    a, b = kafka_text.splitlines(keepends=True), mine.splitlines(keepends=True)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}:\n  kafka: {x!r}\n  mine:  {y!r}"
    return f"kafka {len(a)} lines, mine {len(b)}; first extra: {(a[len(b) :] or b[len(a) :])[0]!r}"
