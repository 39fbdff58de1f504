"""The ``txnlog`` verbs that read the Delta tables (txnlog.ops.cli parses the arguments and calls one of
these): the run a verb shows, list, describe, describe-producers, find-hanging, timeline, retain. The verbs
that unblock consumers (plan, abort, fence) are txnlog.ops.unblock."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from txnlog.broker.classify import IN_FLIGHT_STATES, Verdict
from txnlog.kafka.wire import TransactionState
from txnlog.model.config import parse_as_of
from txnlog.model.errors import UsageError
from txnlog.model.words import count
from txnlog.ops.cli_output import datetime_safe, emit, format_value
from txnlog.output import delta, retention
from txnlog.output.delta import read_table
from txnlog.output.delta_retention import drop_runs_before, vacuum
from txnlog.output.output_dir import output_lock

#: find-hanging's exit code when it lists what --fail-on names (0 otherwise; 2 is a usage error)
EXIT_FOUND = 1


@dataclass(frozen=True)
class Run:
    """The run a verb shows: its cluster and as_of (the newest complete one unless --as-of)."""

    output: str
    cluster: str
    as_of: datetime

    def rows(self, table: str, columns: list[str] | None = None, **where: Any) -> list[dict[str, Any]]:
        """The run's rows of one output table whose columns equal ``where`` (filtered in the scan), only
        ``columns`` when given."""

        data = read_table(self.output, table, cluster=self.cluster, as_of=self.as_of, where=where, columns=columns)
        return datetime_safe(data).to_pylist()


def shown_run(args: argparse.Namespace) -> Run:
    """The run to show: ``--cluster``/``--as-of`` if given, else the only cluster's newest complete run."""

    columns = ["cluster", "as_of", "status"]  # a year of runs rows holds a year of configs: not those
    runs = datetime_safe(read_table(args.output, "runs", cluster=args.cluster, columns=columns)).to_pylist()
    clusters = sorted({r["cluster"] for r in runs})
    if args.cluster is None and len(clusters) > 1:
        raise UsageError(
            f"--cluster: the tables hold several clusters ({', '.join(clusters)}); pick one with --cluster"
        )
    if not runs:
        which = f"cluster {args.cluster}" if args.cluster else "any cluster"
        raise UsageError(f"{args.output}: no run of {which} in the runs table; run the job first (./spark-submit.sh)")
    complete = [r for r in runs if r.get("status") == "SUCCEEDED"]
    if args.as_of is not None:
        wanted = parse_as_of(args.as_of)
        hit = [r for r in runs if abs((r["as_of"] - wanted).total_seconds()) < 0.001]
        if not hit:
            known = ", ".join(format_value(r["as_of"]) for r in sorted(runs, key=lambda r: r["as_of"])[-5:])
            raise UsageError(f"--as-of {args.as_of}: no run at that time; the newest runs are at {known}")
        return Run(args.output, hit[0]["cluster"], hit[0]["as_of"])
    if not complete:
        raise UsageError(f"{args.output}: no complete run yet (the runs table has no SUCCEEDED row); run the job again")
    newest = max(complete, key=lambda r: r["as_of"])
    return Run(args.output, newest["cluster"], newest["as_of"])


def known_partition(run: Run, topic: str | None, partition: int | None) -> None:
    """One clear line when the run has no such topic or partition (rather than an empty table)."""
    if topic is None:
        return
    seen: set[tuple[str, int]] = set()
    for table in ("partition_health", "transactions"):  # every partition read has a health row
        try:
            seen = {(r["topic"], r["partition"]) for r in run.rows(table, columns=["topic", "partition"])}
        except UsageError:  # a table this output does not have (written by hand, or by another tool)
            continue
        if seen:
            break
    topics = sorted({t for t, _ in seen if t})
    if topic not in topics:
        shown = ", ".join(topics[:10]) + (" ..." if len(topics) > 10 else "")
        raise UsageError(
            f"--topic {topic}: not in the run of {format_value(run.as_of)} (its topics: {shown or 'none'})"
        )
    if partition is not None and (topic, partition) not in seen:
        parts = sorted(p for t, p in seen if t == topic)
        raise UsageError(f"--partition {partition}: {topic} has no such partition in this run (it has {parts})")


def list_filter(
    rows: Sequence[dict[str, Any]],
    *,
    as_of: datetime,
    duration_ms: int | None = None,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    pattern: str | None = None,
) -> list[dict[str, Any]]:
    """ListTransactions' filters, as the coordinator applies them (``TransactionStateManager.
    listTransactionStates``): never ``Dead`` (an expiring id); a producer id in ``producer_ids`` (KIP-664);
    a state in ``states`` (KIP-664); running longer than ``duration_ms``, i.e. ``now - txnStartTimestamp >
    duration_ms``, with -1 for an id that never started one (KIP-994: such an id passes the filter, as on
    the broker); the id fully matching the regular expression ``pattern`` (KIP-1152)."""
    regex = re.compile(pattern) if pattern is not None else None
    out = []
    for r in rows:
        state = r.get("state") or ("Dead" if r.get("is_tombstoned") else None)
        if state == "Dead" or r.get("is_tombstoned"):
            continue
        if producer_ids and r.get("producer_id") not in producer_ids:
            continue
        if states and state not in states:
            continue
        if duration_ms is not None and duration_ms >= 0:
            start = r.get("txn_start_timestamp")
            start_ms = int(start.timestamp() * 1000) if start is not None else -1
            if int(as_of.timestamp() * 1000) - start_ms <= duration_ms:
                continue
        if regex is not None and not regex.fullmatch(r.get("transactional_id") or ""):
            continue
        out.append(r)
    return out


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:

    names = [s.kafka_name for s in TransactionState]
    unknown = [s for s in args.state or () if s not in names]
    if unknown:
        raise UsageError(f"--state {unknown[0]}: not a transaction state; one of {', '.join(names)}")
    if args.transactional_id_pattern is not None:
        try:
            re.compile(args.transactional_id_pattern)
        except re.error as e:
            raise UsageError(f"--transactional-id-pattern {args.transactional_id_pattern!r}: {e}") from e
    run = shown_run(args)
    rows = list_filter(
        run.rows("coordinator_state"),
        as_of=run.as_of,
        duration_ms=args.duration_filter,
        states=args.state or (),
        producer_ids=args.producer_id or (),
        pattern=args.transactional_id_pattern,
    )
    for r in rows:
        r["coordinator"] = _coordinator(r)
    rows.sort(key=lambda r: r["transactional_id"])
    emit(
        rows,
        [
            ("TransactionalId", "transactional_id"),
            ("Coordinator", "coordinator"),
            ("ProducerId", "producer_id"),
            ("TransactionState", "state"),
        ],
        args.format,
        out,
    )
    return 0


def _coordinator(r: dict[str, Any]) -> str | None:
    """kafka-transactions.sh prints the coordinator's broker id; offline the partition that holds the id's
    state is what the logs show: ``__transaction_state-N`` (the leader of that partition is the coordinator)."""
    p = r.get("coordinator_partition")
    return None if p is None else f"__transaction_state-{p}"


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:

    run = shown_run(args)
    rows = run.rows("coordinator_state", transactional_id=args.transactional_id)
    if not rows:
        raise UsageError(f"--transactional-id {args.transactional_id}: not in coordinator_state; try 'txnlog list'")
    for r in rows:  # as kafka-transactions.sh: time since the transaction started, for one in flight
        if r.get("state") is None and r.get("is_tombstoned"):
            r["state"] = "Dead"  # expired: the coordinator wrote its tombstone (TransactionStateManager)
        start = r.get("txn_start_timestamp")
        busy = r.get("state") in IN_FLIGHT_STATES
        r["duration"] = int((r["as_of"] - start).total_seconds() * 1000) if start and busy else None
        r["coordinator"] = _coordinator(r)
    for r in rows:
        start = r.get("txn_start_timestamp")
        r["txn_start_ms"] = int(start.timestamp() * 1000) if start is not None else None
    emit(
        rows,
        [
            ("CoordinatorId", "coordinator"),
            ("TransactionalId", "transactional_id"),
            ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"),
            ("TransactionState", "state"),
            ("TransactionTimeoutMs", "timeout_ms"),
            ("CurrentTransactionStartTimeMs", "txn_start_ms"),
            ("TransactionDurationMs", "duration"),
            ("TopicPartitions", "partitions"),
        ],
        args.format,
        out,
    )
    history = run.rows("coordinator_history", transactional_id=args.transactional_id)
    if history and args.format == "table":
        print(file=out)
        emit(
            sorted(history, key=lambda r: (r["coordinator_partition"], r["record_offset"])),
            [
                ("Offset", "record_offset"),
                ("Time", "record_timestamp"),
                ("ProducerId", "producer_id"),
                ("Epoch", "producer_epoch"),
                ("State", "state"),
                ("Partitions", "partitions"),
            ],
            "table",
            out,
        )
    return 0


def _ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def cmd_describe_producers(args: argparse.Namespace, out: TextIO) -> int:
    """kafka-transactions.sh describe-producers (``TransactionsCommand.DescribeProducersCommand``), offline:
    the ``producer_state`` rows of one partition, with its columns and the values it prints for none —
    LatestCoordinatorEpoch −1 (``coordinatorEpoch().orElse(-1)``), LastSequence −1, LastTimestamp in epoch ms,
    CurrentTransactionStartOffset ``None`` in the table (null in json, empty in csv)."""
    run = shown_run(args)
    known_partition(run, args.topic, args.partition)
    rows = run.rows("producer_state", topic=args.topic, partition=args.partition)
    for r in rows:
        if r.get("last_timestamp_ms") is None:  # a table written before the column: from the timestamp
            r["last_timestamp_ms"] = _ms(r.get("last_timestamp"))
        if r["last_timestamp_ms"] is None:
            r["last_timestamp_ms"] = -1  # RecordBatch.NO_TIMESTAMP, as the broker would answer
        if r.get("coordinator_epoch") is None:
            r["coordinator_epoch"] = -1
        if args.format == "table" and r.get("current_txn_start_offset") is None:
            r["current_txn_start_offset"] = "None"  # as kafka-transactions.sh prints an empty Optional
    emit(
        sorted(rows, key=lambda r: r["producer_id"]),
        DESCRIBE_PRODUCERS_COLUMNS,
        args.format,
        out,
    )
    return 0


#: kafka-transactions.sh describe-producers' headers (``DescribeProducersCommand.HEADERS``) → producer_state
DESCRIBE_PRODUCERS_COLUMNS = (
    ("ProducerId", "producer_id"),
    ("ProducerEpoch", "producer_epoch"),
    ("LatestCoordinatorEpoch", "coordinator_epoch"),
    ("LastSequence", "last_sequence"),
    ("LastTimestamp", "last_timestamp_ms"),
    ("CurrentTransactionStartOffset", "current_txn_start_offset"),
)


def cmd_find_hanging(args: argparse.Namespace, out: TextIO) -> int:

    run = shown_run(args)
    known_partition(run, args.topic, args.partition)
    where = {"topic": args.topic, "partition": args.partition}
    rows = run.rows("findings", **{k: v for k, v in where.items() if v is not None})
    if args.replica:
        rows = [r for r in rows if args.replica in (r.get("open_replicas") or [])]
    if args.verdict != "all":
        rows = [r for r in rows if r["verdict"] == args.verdict.upper()]
    for r in rows:
        r["duration_min"] = None if r["idle_ms"] is None else r["idle_ms"] // 60000
        r["last_timestamp_ms"] = _ms(r.get("last_timestamp"))
    rows.sort(key=lambda r: (r["verdict"], r["topic"] or "", r["partition"] or -1, r["start_offset"] or -1))
    emit(
        rows,
        [
            ("Topic", "topic"),
            ("Partition", "partition"),
            ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"),
            ("CoordinatorEpoch", "coordinator_epoch"),
            ("StartOffset", "start_offset"),
            ("LastTimestamp", "last_timestamp_ms"),
            ("Duration(min)", "duration_min"),
            ("Verdict", "verdict"),
            ("Reason", "reason"),
            ("TransactionalId", "transactional_id"),
            *([("Evidence", "evidence"), ("Advice", "advice")] if args.verbose and args.format != "table" else []),
        ],
        args.format,
        out,
    )
    if args.verbose and args.format == "table":
        for r in rows:
            print(f"\n{_finding_name(r)}: {r['evidence']}\n  advice: {r['advice']}", file=out)
    failing = {Verdict.HANGING.value} | ({Verdict.LATE.value} if args.fail_on == "late" else set())
    return EXIT_FOUND if any(r["verdict"] in failing for r in rows) else 0


def _finding_name(r: dict[str, Any]) -> str:
    """What a finding is about: its partition and start offset, or (coordinator-only) its transactional.id."""
    if r.get("topic") is not None and r.get("partition") is not None:
        return f"{r['topic']}-{r['partition']} at offset {r['start_offset']}"
    return f"transactional.id {r.get('transactional_id')} (coordinator state only, no open batch in the logs read)"


def cmd_timeline(args: argparse.Namespace, out: TextIO) -> int:
    run = shown_run(args)
    known_partition(run, args.topic, args.partition)
    producer = {} if args.producer_id is None else {"producer_id": args.producer_id}
    rows = run.rows("transactions", topic=args.topic, partition=args.partition, **producer)
    rows.sort(key=lambda r: r["first_offset"])
    emit(
        rows,
        [
            ("FirstOffset", "first_offset"),
            ("LastOffset", "last_offset"),
            ("Marker", "marker_offset"),
            ("Outcome", "outcome"),
            ("ProducerId", "producer_id"),
            ("Epoch", "producer_epoch"),
            ("MarkerEpoch", "marker_epoch"),
            ("Start", "first_timestamp"),
            ("End", "marker_timestamp"),
            ("Batches", "batch_count"),
            ("TransactionalId", "transactional_id"),
        ],
        args.format,
        out,
    )
    return 0


def cmd_retain(args: argparse.Namespace, out: TextIO) -> int:

    if args.keep_runs is None and args.keep_days is None:
        raise UsageError("retain: give --keep-runs N, --keep-days D or both")
    if args.keep_runs is not None and args.keep_runs < 1:
        raise UsageError(f"--keep-runs {args.keep_runs}: keep at least 1 run (the newest complete run is always kept)")
    if args.keep_days is not None and args.keep_days < 0:
        raise UsageError(f"--keep-days {args.keep_days}: must not be negative")
    runs = delta.read_table(args.output, "runs", columns=["cluster", "as_of", "status"]).to_pylist()
    if args.cluster is not None and args.cluster not in {r["cluster"] for r in runs}:
        raise UsageError(f"--cluster {args.cluster}: no run of that cluster in {args.output}")
    chosen = retention.plan(
        runs,
        keep_runs=args.keep_runs,
        keep_days=args.keep_days,
        clusters=None if args.cluster is None else [args.cluster],
    )
    rows = [
        {
            "cluster": c,
            "cutoff": cut,
            "dropped": len(chosen.dropped[c]),
            "kept": chosen.kept[c],
            "oldest": chosen.dropped[c][0] if chosen.dropped[c] else None,
            "newest": chosen.dropped[c][-1] if chosen.dropped[c] else None,
        }
        for c, cut in chosen.cutoffs.items()
    ]
    columns = [
        ("Cluster", "cluster"),
        ("KeepFrom", "cutoff"),
        ("RunsDropped", "dropped"),
        ("RunsKept", "kept"),
        ("OldestDropped", "oldest"),
        ("NewestDropped", "newest"),
    ]
    emit(rows, columns, args.format, out)
    cutoffs = {c: cut for c, cut in chosen.cutoffs.items() if chosen.dropped[c]}
    if not args.execute:
        print("dry run: nothing deleted; --execute deletes the runs listed", file=sys.stderr)
        return 0

    with output_lock(args.output, "retain", wait_s=args.wait_s, progress=lambda m: print(m, file=sys.stderr)):
        deleted = drop_runs_before(args.output, cutoffs) if cutoffs else {}
        files = vacuum(args.output, retention_hours=args.vacuum_hours) if args.vacuum_hours is not None else {}
    print(
        f"deleted {count(sum(deleted.values()), 'row')} of {count(sum(len(v) for v in chosen.dropped.values()), 'run')}"
        + (f"; vacuum removed {count(sum(files.values()), 'file')}" if args.vacuum_hours is not None else ""),
        file=sys.stderr,
    )
    return 0
