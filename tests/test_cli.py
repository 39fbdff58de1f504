"""The ``txnlog`` verbs over tables written by hand with delta-rs (no Spark): the columns that depend on a
coordinator state or a transaction outcome, the filters, the formats, the exit codes, --help."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from txnlog.model import contract as tables
from txnlog.ops.cli import main
from txnlog.output.delta import write_tables

AS_OF = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)


def _table(schema: pa.Schema, rows: list[dict]) -> pa.Table:
    keys = {"cluster": "c1", "as_of": AS_OF}
    return pa.Table.from_pylist([{**{f.name: None for f in schema}, **keys, **r} for r in rows], schema=schema)


def _write(output: Path, data: dict[str, pa.Table], *, as_of: datetime = AS_OF, status: str = "SUCCEEDED") -> None:
    """``data`` as the run (c1, as_of), with its ``runs`` row (the verbs show complete runs only)."""
    runs = pa.Table.from_pylist(
        [{**{f.name: None for f in tables.RUNS}, "cluster": "c1", "as_of": as_of, "run_id": "r", "status": status}],
        schema=tables.RUNS,
    )
    write_tables(None, str(output), {**data, "runs": runs}, cluster="c1", as_of=as_of)


def _cli(output: Path, *argv: str, code: int = 0) -> list[list[str]]:
    out = io.StringIO()
    assert main([*argv, "--output", str(output)], out=out) == code
    return [line.split("\t")[:-1] for line in out.getvalue().splitlines() if line]


def test_describe_shows_a_duration_only_while_in_flight(tmp_path: Path) -> None:
    start = AS_OF - timedelta(minutes=5)
    state = {"producer_id": 7, "producer_epoch": 0, "coordinator_partition": 3, "is_tombstoned": False}
    coordinator = _table(
        tables.COORDINATOR_STATE,
        [
            {**state, "transactional_id": "busy", "state": "PrepareCommit", "txn_start_timestamp": start},
            {**state, "transactional_id": "done", "state": "CompleteCommit", "txn_start_timestamp": start},
        ],
    )
    history = _table(tables.COORDINATOR_HISTORY, [])
    _write(tmp_path, {"coordinator_state": coordinator, "coordinator_history": history})
    header, busy = _cli(tmp_path, "describe", "--transactional-id", "busy")
    assert dict(zip(header, busy, strict=True))["TransactionDurationMs"].strip() == "300000"
    header, done = _cli(tmp_path, "describe", "--transactional-id", "done")
    assert dict(zip(header, done, strict=True))["TransactionDurationMs"].strip() == "-"


def _printed(text: str, fmt: str) -> list[dict[str, str]]:
    """A verb's output parsed back into rows of header → value as printed (none: '-' in every format)."""
    if fmt == "table":
        head, *body = [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines() if line]
        return [dict(zip(head, r, strict=True)) for r in body]
    if fmt == "json":
        return [{k: "-" if v is None else str(v) for k, v in json.loads(line).items()} for line in text.splitlines()]
    return [{k: v or "-" for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]


MICROS_CLOCK = 1_793_577_600_000_000  # 2026-11-02 in µs: a year past 9999 read as ms


def test_describe_producers_prints_producer_state_as_kafka_transactions_does(tmp_path: Path) -> None:
    """Every producer_state row of the partition, kafka-transactions.sh's columns and spellings: epoch ms,
    -1 for no coordinator epoch / sequence, None for no open transaction (null in json, empty in csv)."""
    t0 = datetime(2026, 11, 1, 23, 0, 0, 123000, tzinfo=UTC)
    key = {"topic": "orders", "partition": 0, "replica": "broker-1", "source": "segments"}
    state = _table(
        tables.PRODUCER_STATE,
        [
            {**key, "producer_id": 9, "producer_epoch": 4, "last_sequence": -1, "last_timestamp": t0,
             "coordinator_epoch": 2, "current_txn_start_offset": None, "from_snapshot": False},
            {**key, "producer_id": 3, "producer_epoch": 0, "last_sequence": 41, "last_timestamp": t0,
             "coordinator_epoch": -1, "current_txn_start_offset": None, "from_snapshot": True},
            {**key, "producer_id": 5, "producer_epoch": 1, "last_sequence": 7, "last_timestamp": t0,
             "coordinator_epoch": 0, "current_txn_start_offset": 120, "from_snapshot": False},
            {**key, "partition": 1, "producer_id": 6, "producer_epoch": 1, "last_sequence": 7, "last_timestamp": None,
             "last_timestamp_ms": MICROS_CLOCK,
             "coordinator_epoch": 0, "current_txn_start_offset": None, "from_snapshot": False},
        ],
    )  # fmt: skip
    health = _table(tables.PARTITION_HEALTH, [{"topic": "orders", "partition": p} for p in (0, 1, 2)])
    _write(tmp_path, {"producer_state": state, "partition_health": health})
    from txnlog.output.delta import read_table

    written = read_table(str(tmp_path), "producer_state", where={"topic": "orders", "partition": 0}).to_pylist()
    epoch_ms = 1_793_577_600_000 - 3_600_000 + 123  # t0: 2026-11-02T00:00Z is 1793577600000 (txnlog.model.config)
    want = [
        {
            "ProducerId": str(r["producer_id"]),
            "ProducerEpoch": str(r["producer_epoch"]),
            "LatestCoordinatorEpoch": str(r["coordinator_epoch"]),
            "LastSequence": str(r["last_sequence"]),
            "LastTimestamp": str(epoch_ms),
            "CurrentTransactionStartOffset": "-"
            if r["current_txn_start_offset"] is None
            else str(r["current_txn_start_offset"]),
        }
        for r in sorted(written, key=lambda r: r["producer_id"])
    ]
    assert [w["ProducerId"] for w in want] == ["3", "5", "9"]
    printed = {}
    for fmt in ("table", "json", "csv"):
        out = io.StringIO()
        argv = [
            "describe-producers",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--format",
            fmt,
            "--output",
            str(tmp_path),
        ]
        assert main(argv, out=out) == 0
        printed[fmt] = _printed(out.getvalue(), fmt)
    # the table prints None as kafka-transactions.sh does; json null and csv empty read back as '-'
    table = [{k: "-" if v == "None" else v for k, v in r.items()} for r in printed["table"]]
    assert table == printed["json"] == printed["csv"] == want
    assert list(printed["table"][0]) == [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]  # fmt: skip
    assert {r["CurrentTransactionStartOffset"] for r in printed["table"]} == {"None", "120"}
    # a client clock in microseconds: no timestamp a reader holds, but the broker's value is printed as it is
    (_, row) = _cli(tmp_path, "describe-producers", "--topic", "orders", "--partition", "1")
    assert row[4].strip() == str(MICROS_CLOCK)
    # a known partition without producers: the header only; an unknown one: one line, exit 2
    assert _cli(tmp_path, "describe-producers", "--topic", "orders", "--partition", "2")[1:] == []
    _cli(tmp_path, "describe-producers", "--topic", "orders", "--partition", "7", code=2)
    _cli(tmp_path, "describe-producers", "--topic", "nope", "--partition", "0", code=2)


def _findings(tmp_path: Path) -> None:
    f = {"producer_epoch": 0, "idle_ms": 3_600_000, "last_timestamp": AS_OF - timedelta(hours=1)}
    findings = _table(
        tables.FINDINGS,
        [
            {**f, "topic": "orders", "partition": 1, "producer_id": 11, "start_offset": 100, "verdict": "HANGING",
             "reason": "COORDINATOR_COMPLETED", "open_replicas": ["b1"], "evidence": "e1", "advice": "a1"},
            {**f, "topic": "orders", "partition": 2, "producer_id": 12, "start_offset": 200, "verdict": "LATE",
             "reason": "MARKERS_PENDING", "open_replicas": ["b2"], "evidence": "e2", "advice": "a2"},
            {**f, "topic": None, "partition": None, "producer_id": 13, "start_offset": None, "verdict": "HANGING",
             "reason": "COORDINATOR_STUCK", "transactional_id": "stuck-1", "evidence": "e3", "advice": "a3"},
        ],
    )  # fmt: skip
    health = _table(tables.PARTITION_HEALTH, [{"topic": "orders", "partition": p} for p in (0, 1, 2)])
    _write(tmp_path, {"findings": findings, "partition_health": health})


def test_find_hanging_exit_codes_and_filters(tmp_path: Path) -> None:
    """Exit 1 when a listed finding is HANGING (--fail-on late: LATE too), else 0; 2 for a usage error."""
    _findings(tmp_path)
    header, *rows = _cli(tmp_path, "find-hanging", code=1)
    assert [h.strip() for h in header][:3] == ["Topic", "Partition", "ProducerId"] and len(rows) == 3
    assert len(_cli(tmp_path, "find-hanging", "--verdict", "late")) == 2  # header + the LATE one, exit 0
    _cli(tmp_path, "find-hanging", "--verdict", "late", "--fail-on", "late", code=1)
    _cli(tmp_path, "find-hanging", "--topic", "orders", "--partition", "2")
    _cli(tmp_path, "find-hanging", "--topic", "orders", "--partition", "0")  # nothing there: exit 0
    header, only = _cli(tmp_path, "find-hanging", "--replica", "b1", code=1)
    assert only[0].strip() == "orders" and only[2].strip() == "11"
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        assert main(["find-hanging", "--topic", "payments", "--output", str(tmp_path)], out=io.StringIO()) == 2
    assert err.getvalue().count("\n") == 1 and "--topic payments: not in the run" in err.getvalue()


def test_find_hanging_verbose_names_coordinator_only_findings(tmp_path: Path) -> None:
    _findings(tmp_path)
    out = io.StringIO()
    assert main(["find-hanging", "-v", "--output", str(tmp_path)], out=out) == 1
    text = out.getvalue()
    assert "None" not in text
    assert "orders-1 at offset 100: e1" in text
    assert "transactional.id stuck-1 (coordinator state only, no open batch in the logs read): e3" in text


@pytest.mark.parametrize("verb", ["find-hanging", "list"])
def test_formats_print_the_same_rows(tmp_path: Path, verb: str) -> None:
    """table, json lines and csv: the same rows and values, as printed (none is '-', null or empty)."""
    _findings(tmp_path)
    state = {"coordinator_partition": 7, "is_tombstoned": False, "producer_epoch": 0}
    coordinator = _table(
        tables.COORDINATOR_STATE,
        [
            {**state, "transactional_id": "a", "producer_id": 1, "state": "Ongoing"},
            {**state, "transactional_id": "b", "producer_id": 2, "state": "CompleteCommit"},
        ],
    )
    _write(tmp_path, {"coordinator_state": coordinator})
    runs: dict[str, list[dict[str, str]]] = {}
    for fmt in ("table", "json", "csv"):
        out = io.StringIO()
        main([verb, "--format", fmt, "--output", str(tmp_path)], out=out)
        text = out.getvalue()
        if fmt == "table":
            head, *body = [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines() if line]
            runs[fmt] = [dict(zip(head, r, strict=True)) for r in body]
        elif fmt == "json":
            runs[fmt] = [
                {k: "-" if v is None else str(v) for k, v in json.loads(line).items()} for line in text.splitlines()
            ]
        else:
            runs[fmt] = [{k: v or "-" for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
    assert runs["table"] and runs["table"] == runs["csv"] == runs["json"]
    # and they are the rows written above, as printed
    if verb == "list":
        want = [
            {"TransactionalId": "a", "Coordinator": "__transaction_state-7", "ProducerId": "1",
             "TransactionState": "Ongoing"},
            {"TransactionalId": "b", "Coordinator": "__transaction_state-7", "ProducerId": "2",
             "TransactionState": "CompleteCommit"},
        ]  # fmt: skip
        assert runs["table"] == want
    else:
        got = {(r["Topic"], r["Partition"], r["ProducerId"], r["Verdict"], r["Duration(min)"]) for r in runs["table"]}
        assert got == {("orders", "1", "11", "HANGING", "60"), ("orders", "2", "12", "LATE", "60"),
                       ("-", "-", "13", "HANGING", "60")}  # fmt: skip


def test_list_filters_as_the_coordinator_applies_them() -> None:
    """TransactionStateManager.listTransactionStates: Dead never; producer ids; states; now - start > duration
    (an id with no start, -1, passes); KIP-1152's pattern matches the whole id."""
    from txnlog.ops.commands import list_filter

    def row(tid: str, pid: int, state: str | None, start_min: int | None, tomb: bool = False) -> dict:
        start = None if start_min is None else AS_OF - timedelta(minutes=start_min)
        return {"transactional_id": tid, "producer_id": pid, "state": state, "txn_start_timestamp": start,
                "is_tombstoned": tomb}  # fmt: skip

    rows = [
        row("orders-app-1", 1, "Ongoing", 20),
        row("orders-app-2", 2, "Ongoing", 5),
        row("payments", 3, "CompleteCommit", 60),
        row("never-started", 4, "Empty", None),
        row("expired", 5, "Dead", 90),
        row("gone", 6, None, 90, tomb=True),
    ]

    def ids(**kw) -> list[str]:
        return [r["transactional_id"] for r in list_filter(rows, as_of=AS_OF, **kw)]

    assert ids() == ["orders-app-1", "orders-app-2", "payments", "never-started"]
    assert ids(states=["Ongoing"]) == ["orders-app-1", "orders-app-2"]
    assert ids(producer_ids=[2, 3]) == ["orders-app-2", "payments"]
    assert ids(duration_ms=15 * 60_000) == ["orders-app-1", "payments", "never-started"]
    assert ids(duration_ms=20 * 60_000) == ["payments", "never-started"]  # 20 min is not longer than 20 min
    assert ids(duration_ms=-1) == ids()
    assert ids(pattern=r"orders-app-\d") == ["orders-app-1", "orders-app-2"]
    assert ids(pattern="orders") == []  # the whole id must match


def test_verbs_show_the_newest_complete_run(tmp_path: Path) -> None:
    """A run whose runs row does not say SUCCEEDED is never shown unless asked for by --as-of."""
    state = {"coordinator_partition": 0, "is_tombstoned": False, "producer_epoch": 0, "producer_id": 1}
    _write(tmp_path, {"coordinator_state": _table(tables.COORDINATOR_STATE, [{**state, "transactional_id": "old",
                                                                             "state": "Ongoing"}])})  # fmt: skip
    later = AS_OF + timedelta(hours=1)
    partial = pa.Table.from_pylist(
        [{**{f.name: None for f in tables.COORDINATOR_STATE}, **state, "cluster": "c1", "as_of": later,
          "transactional_id": "partial", "state": "Ongoing"}],
        schema=tables.COORDINATOR_STATE,
    )  # fmt: skip
    _write(tmp_path, {"coordinator_state": partial}, as_of=later, status="FAILED")
    assert [r[0].strip() for r in _cli(tmp_path, "list")[1:]] == ["old"]
    assert [r[0].strip() for r in _cli(tmp_path, "list", "--as-of", later.isoformat())[1:]] == ["partial"]


@pytest.mark.parametrize(
    "verb", ["list", "describe", "describe-producers", "find-hanging", "timeline", "audit", "plan", "abort"]
)
def test_every_verb_explains_itself(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--help: a paragraph saying what the verb does, a copy-paste example, and every option described."""
    from txnlog.ops.cli import VERBS, build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args([verb, "--help"])
    text = capsys.readouterr().out
    spec = next(v for v in VERBS if v.name == verb)
    assert f"example:\n  {spec.example}" in text and spec.example.startswith(f"txnlog {verb} ")
    assert len(spec.description) > 120
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    for action in sub.choices[verb]._actions:
        assert action.help, f"{verb} {action.option_strings} has no help"


def test_plan_orders_the_aborts_and_writes_a_dry_run_script(tmp_path: Path) -> None:
    """Per partition in start-offset order, the partition that releases most first; VERIFY_FIRST apart and
    never in the script; the script calls 'txnlog abort' for each SAFE step and passes --execute on."""
    import os
    import subprocess

    rec = {"producer_epoch": 0, "reason": "COORDINATOR_COMPLETED", "command": "kafka-transactions.sh ..."}
    recs = _table(
        tables.ABORT_RECOMMENDATIONS,
        [
            {**rec, "topic": "orders", "partition": 5, "start_offset": 900, "producer_id": 2, "safety": "SAFE",
             "lso_after_abort": 1500, "offsets_released": 600},
            {**rec, "topic": "orders", "partition": 5, "start_offset": 614, "producer_id": 1, "safety": "SAFE",
             "lso_after_abort": 900, "offsets_released": 286},
            {**rec, "topic": "audit", "partition": 0, "start_offset": 10, "producer_id": 3, "safety": "SAFE",
             "lso_after_abort": 20, "offsets_released": 10},
            {**rec, "topic": "audit", "partition": 1, "start_offset": 7, "producer_id": 4, "safety": "VERIFY_FIRST",
             "lso_after_abort": 50, "offsets_released": 43},
        ],
    )  # fmt: skip
    health = _table(
        tables.PARTITION_HEALTH,
        [
            {"topic": "orders", "partition": 5, "last_stable_offset": 614, "source": "segments"},
            {"topic": "audit", "partition": 0, "last_stable_offset": 10, "source": "segments"},
            {"topic": "audit", "partition": 1, "last_stable_offset": 7, "source": "segments"},
        ],
    )
    findings = _table(tables.FINDINGS, [])  # no LATE finding with a fence: the plan is the aborts alone
    _write(tmp_path, {"abort_recommendations": recs, "partition_health": health, "findings": findings})
    script = tmp_path / "unblock.sh"
    out = io.StringIO()
    argv = ["plan", "--output", str(tmp_path), "--script", str(script), "--bootstrap-servers", "k1:9092"]
    assert main(argv, out=out) == 0
    text = out.getvalue()
    assert text.startswith("3 aborts, in this order, release 896 offsets")
    table = [[c.strip() for c in line.split("\t")[:-1]] for line in text.splitlines() if "\t" in line]
    head = table[0]
    steps = [dict(zip(head, r, strict=True)) for r in table[1:] if r != head]
    assert [
        (s["Topic"], s["Partition"], s["Step"], s["StartOffset"], s["LsoBefore"], s["LsoAfter"]) for s in steps
    ] == [
        ("orders", "5", "1", "614", "614", "900"),
        ("orders", "5", "2", "900", "900", "1500"),
        ("audit", "0", "1", "10", "10", "20"),
        ("audit", "1", "1", "7", "7", "50"),  # the VERIFY_FIRST table, after the SAFE one
    ]
    assert "1 VERIFY_FIRST" in text
    # the script: the SAFE steps in order, each a re-validated 'txnlog abort', dry run unless --execute
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls.txt"
    (fake / "txnlog").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (fake / "txnlog").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    subprocess.run(["sh", str(script), "--execute"], check=True, env=env)
    assert calls.read_text().splitlines() == [
        "abort --bootstrap-servers k1:9092 --topic orders --partition 5 --start-offset 614 --execute",
        "abort --bootstrap-servers k1:9092 --topic orders --partition 5 --start-offset 900 --execute",
        "abort --bootstrap-servers k1:9092 --topic audit --partition 0 --start-offset 10 --execute",
    ]


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`txnlog find-hanging | head -c 10` on more rows than a pipe holds: exit 141 (a shell's SIGPIPE), no
    traceback, nothing printed at interpreter exit."""
    import subprocess
    import sys

    f = {"producer_epoch": 0, "idle_ms": 3_600_000, "last_timestamp": AS_OF - timedelta(hours=1)}
    rows = [
        {**f, "topic": "orders", "partition": 1, "producer_id": i, "start_offset": i, "verdict": "LATE",
         "reason": "MARKERS_PENDING", "evidence": "e" * 200, "advice": "a"}
        for i in range(2000)
    ]  # fmt: skip
    health = _table(tables.PARTITION_HEALTH, [{"topic": "orders", "partition": 1}])
    _write(tmp_path, {"findings": _table(tables.FINDINGS, rows), "partition_health": health})
    script = "import sys; from txnlog.ops.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        f"{sys.executable} -c {script!r} find-hanging --output {tmp_path} -v | head -c 10; exit ${{PIPESTATUS[0]}}",
        shell=True, capture_output=True, text=True, executable="/bin/bash", timeout=120,
    )  # fmt: skip
    assert proc.stderr == "", proc.stderr
    assert len(proc.stdout) == 10 and proc.returncode == 141


def test_blocked_lists_the_groups_waiting_as_kafka_consumer_groups_describes_them(tmp_path: Path) -> None:
    since = AS_OF - timedelta(hours=2)
    row = {"topic": "orders", "partition": 0, "last_stable_offset": 100, "high_watermark": 130, "source": "segments"}
    blocked = _table(
        tables.BLOCKED_CONSUMERS,
        [
            {**row, "group": "billing", "group_bytes": b"billing", "committed_offset": 100,
             "offsets_to_high_watermark": 30, "blocked_since": since, "status": "BLOCKED"},
            {**row, "group": "bad\ufffd", "group_bytes": b"bad\xff", "committed_offset": 100,
             "offsets_to_high_watermark": 30, "blocked_since": since, "status": "BLOCKED"},
            {**row, "group": "fast", "group_bytes": b"fast", "committed_offset": 120,
             "offsets_to_high_watermark": 10, "status": "NOT_BLOCKED_INFERRED"},
            {**row, "topic": "payments", "group": "etl", "group_bytes": b"etl", "committed_offset": 7,
             "last_stable_offset": 9, "high_watermark": 9, "offsets_to_high_watermark": 2, "blocked_since": since,
             "status": "UNSTABLE_OFFSET_COMMIT"},
        ],
    )  # fmt: skip
    _write(tmp_path, {"blocked_consumers": blocked})
    header, *rows = _cli(tmp_path, "blocked")
    assert [h.strip() for h in header] == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LSO", "HW", "WAITING", "SINCE", "STATUS"
    ]  # fmt: skip
    assert [[c.strip() for c in r] for r in rows] == [
        ["bad\ufffd", "orders", "0", "100", "100", "130", "30", "2026-11-01T22:00:00Z", "BLOCKED"],
        ["billing", "orders", "0", "100", "100", "130", "30", "2026-11-01T22:00:00Z", "BLOCKED"],
        ["etl", "payments", "0", "7", "9", "9", "2", "2026-11-01T22:00:00Z", "UNSTABLE_OFFSET_COMMIT"],
    ]  # the group above the LSO (read_uncommitted, or a reset) is not listed
    out = io.StringIO()
    assert main(["blocked", "--output", str(tmp_path), "--group", "billing", "--format", "json"], out=out) == 0
    (only,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (only["GROUP"], only["CURRENT-OFFSET"], only["SINCE"]) == ("billing", 100, "2026-11-01T22:00:00Z")
    out = io.StringIO()
    assert main(["blocked", "--output", str(tmp_path), "--topic", "payments", "--format", "csv"], out=out) == 0
    assert [r["GROUP"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ["etl"]


def test_abort_and_fence_give_up_on_a_silent_cluster_after_admin_connect_timeout_s(tmp_path, monkeypatch, capsys):
    """``abort`` and ``fence`` wait ``admin_connect_timeout_s`` for the cluster's first answer (the config's,
    or TXNLOG_ADMIN_CONNECT_TIMEOUT_S's, which wins over it as a flag would), then stop in one line, exit 2."""
    import socket
    import time

    from txnlog.model.config import load_config
    from txnlog.ops.unblock import ADMIN_CONNECT_TIMEOUT_ENV

    monkeypatch.delenv(ADMIN_CONNECT_TIMEOUT_ENV, raising=False)
    assert load_config(None).admin_connect_timeout_s == 30
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        bootstrap = f"127.0.0.1:{sock.getsockname()[1]}"
    (tmp_path / "one.yaml").write_text("admin_connect_timeout_s: 1\n")
    (tmp_path / "long.yaml").write_text("admin_connect_timeout_s: 600\n")
    abort = ["abort", "--bootstrap-servers", bootstrap, "--topic", "t", "--partition", "0", "--start-offset", "5"]
    fence = ["fence", "--bootstrap-server", bootstrap, "--transactional-id", "etl"]
    for argv, env in ((abort, None), (fence, None), (abort, "1"), (fence, "1")):
        if env is None:
            monkeypatch.delenv(ADMIN_CONNECT_TIMEOUT_ENV, raising=False)
        else:
            monkeypatch.setenv(ADMIN_CONNECT_TIMEOUT_ENV, env)
        started = time.monotonic()
        assert main([*argv, "--config", str(tmp_path / ("one.yaml" if env is None else "long.yaml"))]) == 2
        assert time.monotonic() - started < 15, argv
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("txnlog: ")]
        assert len(errors) == 1 and errors[0].startswith(f"txnlog: error: {argv[0]}: cannot reach {bootstrap}: "), (
            errors
        )
