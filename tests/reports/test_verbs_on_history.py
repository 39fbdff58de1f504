"""Every ``txnlog`` verb in every format on the sample history: the printed table,
json lines and csv are parsed back into rows, and those rows equal the Delta tables' rows of the run shown,
normalised as the verbs print them (epoch ms, minutes of idle time, second-precision ISO times, ``-``/null
for none, lists joined by commas). The expectations come from the tables read with pyarrow
(txnlog.output.delta.read_table), not from the command's code; each verb is asked about the newest complete run
and, with ``--as-of``, about an older one."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.reports.history import CLUSTER, EARLY
from txnlog.ops.cli import main
from txnlog.output.delta import read_table

FORMATS = ("table", "json", "csv")


def _printed(output: str, fmt: str, *argv: str, code: int = 0) -> list[dict[str, str]]:
    out = io.StringIO()
    assert main([*argv, "--output", output, "--format", fmt], out=out) == code, argv
    text = out.getvalue()
    if fmt == "json":
        return [{k: _as_printed(v) for k, v in json.loads(line).items()} for line in text.splitlines() if line]
    if fmt == "csv":
        return [{k: v if v != "" else "-" for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
    lines = text.split("\n\n")[0].splitlines()  # the first table (describe prints the id's history after it)
    head, *body = [[c.strip() for c in line.split("\t")[:-1]] for line in lines]
    return [dict(zip(head, r, strict=True)) for r in body]


def _as_printed(v: Any) -> str:
    """A json value as the table prints it (json keeps ISO times with milliseconds; the table, seconds)."""
    if v is None:
        return "-"
    if isinstance(v, str) and len(v) >= 20 and v[10:11] == "T" and v.endswith("Z"):
        return v[:19] + "Z"
    if isinstance(v, list):
        return ",".join(map(str, v)) or "-"
    return str(v)


def _s(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(v, list):
        return ",".join(map(str, v)) or "-"
    return str(v)


def _ms(v: datetime | None) -> str:
    return "-" if v is None else str(round(v.timestamp() * 1000))


def _rows(output: str, table: str, as_of: datetime) -> list[dict[str, Any]]:
    return read_table(output, table, cluster=CLUSTER, as_of=as_of).to_pylist()


def _bag(rows: list[dict[str, str]]) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple(sorted(r.items())) for r in rows)


@pytest.fixture(params=["newest", "older"])
def shown(request, sample_history) -> tuple[list[str], datetime]:
    """The run a verb shows: the newest complete one (no --as-of) or an older one (--as-of)."""
    if request.param == "newest":
        return [], sample_history.as_ofs[-1]
    return ["--as-of", EARLY.isoformat()], EARLY


@pytest.mark.parametrize("fmt", FORMATS)
def test_list(sample_history, shown, fmt):
    pick, as_of = shown
    want = [
        {"TransactionalId": r["transactional_id"], "Coordinator": f"__transaction_state-{r['coordinator_partition']}",
         "ProducerId": _s(r["producer_id"]), "TransactionState": _s(r["state"])}
        for r in _rows(sample_history.output, "coordinator_state", as_of)
        if not r["is_tombstoned"] and r["state"] != "Dead"
    ]  # fmt: skip
    assert want
    assert _bag(_printed(sample_history.output, fmt, "list", *pick)) == _bag(want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_find_hanging(sample_history, shown, fmt):
    pick, as_of = shown
    findings = _rows(sample_history.output, "findings", as_of)
    want = [
        {"Topic": _s(r["topic"]), "Partition": _s(r["partition"]), "ProducerId": _s(r["producer_id"]),
         "ProducerEpoch": _s(r["producer_epoch"]), "CoordinatorEpoch": _s(r["coordinator_epoch"]),
         "StartOffset": _s(r["start_offset"]), "LastTimestamp": _ms(r["last_timestamp"]),
         "Duration(min)": _s(None if r["idle_ms"] is None else r["idle_ms"] // 60_000), "Verdict": r["verdict"],
         "Reason": r["reason"], "TransactionalId": _s(r["transactional_id"])}
        for r in findings
    ]  # fmt: skip
    assert want
    hanging = any(r["verdict"] == "HANGING" for r in findings)
    assert _bag(_printed(sample_history.output, fmt, "find-hanging", *pick, code=1 if hanging else 0)) == _bag(want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_timeline_of_each_stuck_partition(sample_history, shown, fmt):
    pick, as_of = shown
    transactions = _rows(sample_history.output, "transactions", as_of)
    partitions = sorted({(r["topic"], r["partition"]) for r in _rows(sample_history.output, "findings", as_of)
                         if r["topic"] is not None})  # fmt: skip
    assert partitions
    for topic, partition in partitions[:3]:
        want = [
            {"FirstOffset": _s(r["first_offset"]), "LastOffset": _s(r["last_offset"]),
             "Marker": _s(r["marker_offset"]), "Outcome": r["outcome"], "ProducerId": _s(r["producer_id"]),
             "Epoch": _s(r["producer_epoch"]), "MarkerEpoch": _s(r["marker_epoch"]),
             "Start": _s(r["first_timestamp"]), "End": _s(r["marker_timestamp"]), "Batches": _s(r["batch_count"]),
             "TransactionalId": _s(r["transactional_id"])}
            for r in transactions
            if (r["topic"], r["partition"]) == (topic, partition)
        ]  # fmt: skip
        got = _printed(sample_history.output, fmt, "timeline", "--topic", topic, "--partition", str(partition), *pick)
        assert _bag(got) == _bag(want), (topic, partition)


@pytest.mark.parametrize("fmt", FORMATS)
def test_describe_producers_of_each_stuck_partition(sample_history, shown, fmt):
    """kafka-transactions.sh's columns: epoch ms, -1 for none; None (table) / null / empty for no open
    transaction, read back here as '-'."""
    pick, as_of = shown
    producers = _rows(sample_history.output, "producer_state", as_of)
    partitions = sorted({(r["topic"], r["partition"]) for r in _rows(sample_history.output, "findings", as_of)
                         if r["topic"] is not None})  # fmt: skip
    assert partitions and producers
    for topic, partition in partitions[:3]:
        want = [
            {"ProducerId": _s(r["producer_id"]), "ProducerEpoch": _s(r["producer_epoch"]),
             "LatestCoordinatorEpoch": _s(r["coordinator_epoch"]), "LastSequence": _s(r["last_sequence"]),
             "LastTimestamp": _ms(r["last_timestamp"]), "CurrentTransactionStartOffset": _s(r["current_txn_start_offset"])}
            for r in producers
            if (r["topic"], r["partition"]) == (topic, partition)
        ]  # fmt: skip
        assert any(w["CurrentTransactionStartOffset"] != "-" for w in want)  # the stuck transaction's producer
        argv = ("describe-producers", "--topic", topic, "--partition", str(partition), *pick)
        got = [
            {k: "-" if v == "None" else v for k, v in r.items()} for r in _printed(sample_history.output, fmt, *argv)
        ]
        assert _bag(got) == _bag(want), (topic, partition)


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_plan(sample_history, shown, fmt):
    """The plan's rows are the run's abort_recommendations, with the LSO before each step: the partition's
    LSO for its first, the previous step's LSO after the abort for the next; and its fences (findings whose
    remedy is FENCE), one per partition."""
    pick, as_of = shown
    recs = _rows(sample_history.output, "abort_recommendations", as_of)
    lso = {(h["topic"], h["partition"]): h["last_stable_offset"]
           for h in _rows(sample_history.output, "partition_health", as_of) if h["source"] != "live"}  # fmt: skip
    want = []
    for key in sorted({(r["topic"], r["partition"]) for r in recs}):
        before = lso[key]
        steps = sorted((r for r in recs if (r["topic"], r["partition"]) == key), key=lambda r: r["start_offset"])
        for i, r in enumerate(steps, start=1):
            want.append(
                {"Topic": r["topic"], "Partition": _s(r["partition"]), "Step": str(i),
                 "StartOffset": _s(r["start_offset"]), "ProducerId": _s(r["producer_id"]),
                 "ProducerEpoch": _s(r["producer_epoch"]), "Remedy": "ABORT", "Reason": r["reason"], "LsoBefore": _s(before),
                 "LsoAfter": _s(r["lso_after_abort"]), "OffsetsReleased": _s(r["offsets_released"]),
                 "Safety": r["safety"], "Command": r["command"]}
            )  # fmt: skip
            before = r["lso_after_abort"]
    # the fences (findings whose remedy is FENCE), each on a partition with no abort: the fence moves the LSO
    # to the first transaction still open there (an earlier one keeps it where it is), else to the log end
    health = {(h["topic"], h["partition"]): h for h in _rows(sample_history.output, "partition_health", as_of)
              if h["source"] != "live"}  # fmt: skip
    fences = [f for f in _rows(sample_history.output, "findings", as_of) if f["remedy"] == "FENCE"]
    assert not {(f["topic"], f["partition"]) for f in fences} & {(r["topic"], r["partition"]) for r in recs}
    txns = _rows(sample_history.output, "transactions", as_of)
    for f in fences:
        h = health[(f["topic"], f["partition"])]
        others = [t["first_offset"] for t in txns if (t["topic"], t["partition"]) == (f["topic"], f["partition"])
                  and t["outcome"] == "OPEN" and t["open_replicas"]
                  and (t["producer_id"], t["first_offset"]) != (f["producer_id"], f["start_offset"])]  # fmt: skip
        after = max(min([*others, h["log_end_offset"]]), h["log_start_offset"])
        want.append(
            {"Topic": f["topic"], "Partition": _s(f["partition"]), "Step": "1", "StartOffset": _s(f["start_offset"]),
             "ProducerId": _s(f["producer_id"]), "ProducerEpoch": _s(f["producer_epoch"]), "Remedy": "FENCE",
             "Reason": f["reason"], "LsoBefore": _s(h["last_stable_offset"]), "LsoAfter": _s(after),
             "OffsetsReleased": _s(after - h["last_stable_offset"]), "Safety": "SAFE",
             "Command": f["remedy_command"]}
        )  # fmt: skip
    assert want
    assert _bag(_printed(sample_history.output, fmt, "plan", *pick)) == _bag(want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_describe_each_transactional_id(sample_history, shown, fmt):
    pick, as_of = shown
    states = _rows(sample_history.output, "coordinator_state", as_of)
    in_flight = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
    for r in states[:6]:
        start = r["txn_start_timestamp"]
        busy = r["state"] in in_flight
        want = {
            "CoordinatorId": f"__transaction_state-{r['coordinator_partition']}",
            "TransactionalId": r["transactional_id"],
            "ProducerId": _s(r["producer_id"]),
            "ProducerEpoch": _s(r["producer_epoch"]),
            "TransactionState": _s(r["state"] or ("Dead" if r["is_tombstoned"] else None)),
            "TransactionTimeoutMs": _s(r["timeout_ms"]),
            "CurrentTransactionStartTimeMs": _ms(start),
            "TransactionDurationMs": _s(round((as_of - start).total_seconds() * 1000) if start and busy else None),
            "TopicPartitions": _s(r["partitions"]),
        }
        got = _printed(sample_history.output, fmt, "describe", "--transactional-id", r["transactional_id"], *pick)
        assert got == [want], r["transactional_id"]
