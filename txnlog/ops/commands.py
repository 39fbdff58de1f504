"""What each ``txnlog`` verb does (txnlog.ops.cli parses the arguments and calls one of these): the run a verb
shows, the verbs over the Delta tables, and ``abort``/``fence``, which re-validate against the live cluster."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from txnlog.broker import classify
from txnlog.broker.classify import BOOTSTRAP_PLACEHOLDER, IN_FLIGHT_STATES, Safety, Verdict
from txnlog.kafka.wire import TransactionState
from txnlog.live import admin as live
from txnlog.live.admin import AbortRequest
from txnlog.model.config import load_config, parse_as_of
from txnlog.model.errors import UsageError
from txnlog.model.words import count
from txnlog.ops import fence
from txnlog.ops.cli_output import datetime_safe, emit, format_value
from txnlog.output import delta, retention
from txnlog.output.delta import read_table
from txnlog.output.delta_retention import drop_runs_before, vacuum
from txnlog.output.output_dir import output_lock
from txnlog.rules.plan import fence_steps, plan_steps
from txnlog.rules.remedy import force_terminate_command

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


def _run(args: argparse.Namespace) -> Run:
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


def _known_partition(run: Run, topic: str | None, partition: int | None) -> None:
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


# --- list -------------------------------------------------------------------------------------------


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
    run = _run(args)
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


# --- describe ---------------------------------------------------------------------------------------


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:

    run = _run(args)
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


# --- describe-producers -----------------------------------------------------------------------------


def cmd_describe_producers(args: argparse.Namespace, out: TextIO) -> int:
    """kafka-transactions.sh describe-producers (``TransactionsCommand.DescribeProducersCommand``), offline:
    the ``producer_state`` rows of one partition, with its columns and the values it prints for none —
    LatestCoordinatorEpoch −1 (``coordinatorEpoch().orElse(-1)``), LastSequence −1, LastTimestamp in epoch ms,
    CurrentTransactionStartOffset ``None`` in the table (null in json, empty in csv)."""
    run = _run(args)
    _known_partition(run, args.topic, args.partition)
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


# --- find-hanging -----------------------------------------------------------------------------------


def cmd_find_hanging(args: argparse.Namespace, out: TextIO) -> int:

    run = _run(args)
    _known_partition(run, args.topic, args.partition)
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


# --- timeline ---------------------------------------------------------------------------------------


def cmd_timeline(args: argparse.Namespace, out: TextIO) -> int:
    run = _run(args)
    _known_partition(run, args.topic, args.partition)
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


# --- plan -------------------------------------------------------------------------------------------


def plan_script(steps: Sequence[dict[str, Any]], run: Run, bootstrap: str | None) -> str:
    """A shell script that calls ``txnlog abort`` for each SAFE abort and ``txnlog fence`` for each fence, in
    order (a fence once, where it first appears): a dry run (each re-validated live) unless it is run with
    ``--execute``, which it passes on."""

    target = bootstrap or '"${BOOTSTRAP_SERVERS:?set BOOTSTRAP_SERVERS to the cluster}"'
    fences = [s for s in steps if s.get("remedy") == "FENCE"]
    lines = [
        "#!/bin/sh",
        f"# txnlog plan for cluster {run.cluster}, run of {format_value(run.as_of)} ({run.output}).",
        "# Every abort is re-validated against the live cluster by 'txnlog abort' (still open, same producer,",
        "# still HANGING) before anything is sent. As written this is a dry run; 'sh <this file> --execute'",
        "# sends the aborts. VERIFY_FIRST transactions are not here: check them first (txnlog plan).",
    ]
    if fences:
        lines[-1] = lines[-1].replace("sends the aborts.", "sends the aborts and fences.")
        lines += [
            "# Every fence is re-validated by 'txnlog fence' (still Ongoing, same producer id and epoch, past its",
            "# timeout) before InitProducerId is sent; the application using the id must restart after it.",
        ]
    lines.append("set -e")
    safe = [s for s in steps if s.get("safety") == Safety.SAFE]
    fenced: set[str] = set()
    for s in safe:
        if s.get("remedy") == "FENCE":
            tid = s["transactional_id"]
            if tid in fenced:
                continue
            fenced.add(tid)
            mine = [f for f in fences if f["transactional_id"] == tid and f.get("topic") is not None]
            what = "; ".join(
                f"{f['topic']}-{f['partition']}: LSO {format_value(f.get('lso_before'))} -> "
                f"{format_value(f.get('lso_after_abort'))}, "
                f"{format_value(f.get('offsets_released'))} offsets released"
                for f in mine
            )
            lines.append(
                f"txnlog fence --bootstrap-server {target} --transactional-id {tid} --producer-id {s['producer_id']} "
                f'--producer-epoch {s["producer_epoch"]} "$@"  # {what or "its partitions are not in the input"}'
            )
            continue
        lines.append(
            f"txnlog abort --bootstrap-servers {target} --topic {s['topic']} --partition {s['partition']} "
            f'--start-offset {s["start_offset"]} "$@"  '
            f"# LSO {format_value(s.get('lso_before'))} -> {format_value(s.get('lso_after_abort'))}, "
            f"{format_value(s.get('offsets_released'))} offsets released"
        )
    if not safe:
        lines.append("echo 'txnlog plan: nothing is SAFE to abort in this run'")
    text = "\n".join(lines) + "\n"
    return text.replace(BOOTSTRAP_PLACEHOLDER, target)


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:

    run = _run(args)
    _known_partition(run, args.topic, None)
    topic = {} if args.topic is None else {"topic": args.topic}
    fences = fence_steps(run.rows("findings", **topic))
    fenced_tps = sorted({(f["topic"], f["partition"]) for f in fences if f["topic"] is not None})
    open_txns = [
        o
        for t, p in fenced_tps
        for o in run.rows("transactions", ["topic", "partition", "producer_id", "first_offset", "open_replicas"],
                          topic=t, partition=p, outcome="OPEN")
        if o.get("open_replicas")
    ]  # fmt: skip
    steps = plan_steps(
        run.rows("abort_recommendations", **topic), run.rows("partition_health", **topic), fences, open_txns
    )
    columns = [
        ("Topic", "topic"),
        ("Partition", "partition"),
        ("Step", "step"),
        ("StartOffset", "start_offset"),
        ("ProducerId", "producer_id"),
        ("ProducerEpoch", "producer_epoch"),
        ("Reason", "reason"),
        ("LsoBefore", "lso_before"),
        ("LsoAfter", "lso_after_abort"),
        ("OffsetsReleased", "offsets_released"),
        ("Safety", "safety"),
        ("Command", "command"),
    ]
    if args.format != "table":
        emit(steps, [*columns[:6], ("Remedy", "remedy"), *columns[6:]], args.format, out)
    else:
        safe = [s for s in steps if s.get("safety") == Safety.SAFE]
        verify = [s for s in steps if s.get("safety") != Safety.SAFE]
        released = sum(s.get("offsets_released") or 0 for s in safe)
        n_aborts = sum(1 for s in safe if s.get("remedy") != "FENCE")
        n_fences = len({s["transactional_id"] for s in safe if s.get("remedy") == "FENCE"})
        what = count(n_aborts, "abort") + (f" and {count(n_fences, 'fence')}" if n_fences else "")
        print(
            f"{what}, in this order, release{'s' if n_aborts + n_fences == 1 else ''} "
            f"{count(released, 'offset')} to read_committed consumers "
            f"(run of {format_value(run.as_of)}, cluster {run.cluster}):",
            file=out,
        )
        emit(safe, columns, "table", out)
        if n_fences:
            print(
                "\na fence ends its transactional.id's transaction on every partition the coordinator lists (one "
                "row each above); the application using the id gets ProducerFencedException and must restart",
                file=out,
            )
        if verify:
            print(
                f"\n{len(verify)} VERIFY_FIRST: check these before aborting (evidence: 'txnlog find-hanging -v'); "
                "a step after one of them releases its offsets only once it is resolved:",
                file=out,
            )
            emit(verify, columns, "table", out)
    if args.script:
        with open(args.script, "w", encoding="utf-8") as f:
            f.write(plan_script(steps, run, args.bootstrap_servers))
        os.chmod(args.script, 0o755)
        sends = "the aborts and fences" if any(s.get("remedy") == "FENCE" for s in steps) else "the aborts"
        print(f"\nwrote {args.script}: a dry run as written; 'sh {args.script} --execute' sends {sends}", file=out)
    return 0


def _abort_request(args: argparse.Namespace) -> Any:

    if args.start_offset is not None:
        if any(v is not None for v in (args.producer_id, args.producer_epoch, args.coordinator_epoch)):
            raise UsageError(
                "abort: give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, not both"
            )
        return AbortRequest(args.topic, args.partition, start_offset=args.start_offset)
    if args.producer_id is None:
        raise UsageError(
            "abort: the transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
            "or later) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    for flag, value in (("--producer-epoch", args.producer_epoch), ("--coordinator-epoch", args.coordinator_epoch)):
        if value is None:
            raise UsageError(f"abort: missing required argument {flag}")
    return AbortRequest(
        args.topic,
        args.partition,
        producer_id=args.producer_id,
        producer_epoch=args.producer_epoch,
        coordinator_epoch=args.coordinator_epoch,
    )


def cmd_abort(args: argparse.Namespace, out: TextIO) -> int:
    """Re-validate one transaction against live state, then abort it only with --execute."""

    request = _abort_request(args)
    cfg = _cluster_config(args, "abort", "--bootstrap-servers")
    bootstrap = cfg.bootstrap_servers
    mode = "EXECUTE" if args.execute else "DRY RUN (pass --execute to send the abort)"
    print(f"txnlog abort [{mode}] on {bootstrap}", file=out)
    print(f"  target: {request.describe()}", file=out)
    print(
        f"  1. re-validate against live state: DescribeProducers {request.topic}-{request.partition}, "
        f"ListTransactions and DescribeTransactions for its producer id; the verdict must still be "
        f"{classify.Verdict.HANGING} "
        f"(idle > transaction.max.timeout.ms={cfg.max_transaction_timeout_ms})",
        file=out,
    )
    print(f"  2. then: WriteTxnMarkers ABORT to the leader of {request.topic}-{request.partition}", file=out)
    out.flush()
    thresholds = classify.Thresholds(
        as_of_ms=int(time.time() * 1000),
        max_transaction_timeout_ms=cfg.max_transaction_timeout_ms,
        bootstrap_servers=bootstrap,
    )
    # Lazy in this module: the Kafka clients load only when a live cluster is asked.
    from kafka.errors import KafkaError

    admin = _admin_of("abort", bootstrap, cfg)
    try:
        try:
            plan = live.revalidate_abort(admin, request, thresholds)
        except live.AbortRefused as e:
            print(f"txnlog: refused: {e}", file=sys.stderr)
            return 2
        except KafkaError as e:
            print(f"txnlog: refused: cannot re-validate against {bootstrap}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        print(f"  validated: {plan.verdict} {plan.reason}: {plan.evidence}", file=out)
        spec = (
            f"producer_id={plan.producer_id} producer_epoch={plan.producer_epoch} "
            f"coordinator_epoch={plan.coordinator_epoch} start_offset={plan.start_offset}"
        )
        if not args.execute:
            print(f"  would abort {request.topic}-{request.partition}: {spec}", file=out)
            print(
                f"  same as: {classify.abort_command(bootstrap, plan.topic, plan.partition, plan.start_offset)}",
                file=out,
            )
            return 0
        try:
            live.send_abort(admin, plan)
        except live.AbortUnsupported as e:
            print(f"txnlog: error: {e}; nothing was aborted", file=sys.stderr)
            return 2
        except KafkaError as e:
            print(f"txnlog: error: abort failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        print(f"  aborted {request.topic}-{request.partition}: {spec}", file=out)
        return 0
    finally:
        admin.close()


def _admin_of(verb: str, bootstrap: str, cfg: Any) -> Any:
    """An admin client of ``bootstrap`` for a live action; one line (exit 2) when it cannot be reached."""
    from kafka.errors import KafkaError

    try:
        return live.admin_client(bootstrap, cfg.kafka)
    except KafkaError as e:
        raise UsageError(f"{verb}: cannot reach {bootstrap}: {e}") from e


# --- fence ------------------------------------------------------------------------------------------


def cmd_fence(args: argparse.Namespace, out: TextIO) -> int:
    """Re-validate a transactional.id's overdue transaction live, then fence it only with --execute."""

    if (args.producer_id is None) != (args.producer_epoch is None):
        raise UsageError("fence: give --producer-id and --producer-epoch together (the finding's), or neither")
    cfg = _cluster_config(args, "fence", "--bootstrap-server")
    bootstrap = cfg.bootstrap_servers
    request = fence.FenceRequest(args.transactional_id, args.producer_id, args.producer_epoch, args.two_phase_decided)
    mode = "EXECUTE" if args.execute else "DRY RUN (pass --execute to send InitProducerId)"
    print(f"txnlog fence [{mode}] on {bootstrap}", file=out)
    print(f"  target: {request.describe()}", file=out)
    print(
        f"  1. re-validate against live state: DescribeTransactions {request.transactional_id} must show it Ongoing"
        + (" with that producer id and epoch" if request.producer_id is not None else "")
        + ", past its timeout"
        + ("" if request.two_phase_decided else ", not a two-phase-commit transaction"),
        file=out,
    )
    print(
        "  2. then: FindCoordinator + InitProducerId for it (as Admin.fenceProducers): the epoch is bumped and the "
        "coordinator aborts the transaction on every partition it lists; the application using the id gets "
        "ProducerFencedException and must restart",
        file=out,
    )
    out.flush()
    from kafka.errors import KafkaError

    admin = _admin_of("fence", bootstrap, cfg)
    try:
        try:
            plan = fence.revalidate_fence(admin, request)
        except fence.FenceRefused as e:
            print(f"txnlog: refused: {e}", file=sys.stderr)
            return 2
        except fence.FenceUnsupported as e:
            print(f"txnlog: error: {e}", file=sys.stderr)
            return 2
        except KafkaError as e:
            print(f"txnlog: refused: cannot re-validate against {bootstrap}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        now_ms = int(time.time() * 1000)
        print(f"  validated: {plan.evidence(now_ms)}", file=out)
        listed = ", ".join(plan.partitions) or "no partitions"
        if not args.execute:
            print(
                f"  would fence {plan.transactional_id}: producer_id={plan.producer_id} "
                f"producer_epoch={plan.producer_epoch}; the coordinator aborts its transaction on {listed}",
                file=out,
            )
            print(f"  same as (Kafka 4.1+): {force_terminate_command(bootstrap, plan.transactional_id)}", file=out)
            return 0
        try:
            result = fence.send_fence(admin, plan, max_transaction_timeout_ms=cfg.max_transaction_timeout_ms)
        except fence.FenceUnsupported as e:
            print(f"txnlog: error: {e}; nothing was fenced", file=sys.stderr)
            return 2
        except KafkaError as e:
            print(f"txnlog: error: fence failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        print(
            f"  fenced {plan.transactional_id}: producer {result.producer_id} is now at epoch {result.producer_epoch} "
            f"(was {plan.producer_epoch}); its transaction on {listed} is aborted"
            + (f" (DescribeTransactions now: {result.state_after})" if result.state_after else ""),
            file=out,
        )
        return 0
    finally:
        admin.close()


# --- retain -----------------------------------------------------------------------------------------


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


def _cluster_config(args: argparse.Namespace, verb: str, flag: str) -> Any:
    """The config ``verb`` talks to the cluster with: ``--config`` plus the command line's cluster and
    timeout; one line and exit 2 when it names no cluster."""

    overrides: dict[str, Any] = {}
    if args.bootstrap_servers:
        overrides["bootstrap_servers"] = args.bootstrap_servers
    if args.max_transaction_timeout_ms is not None:
        overrides["max_transaction_timeout_ms"] = args.max_transaction_timeout_ms
    cfg = load_config(args.config, overrides)
    if not cfg.bootstrap_servers:
        raise UsageError(f"{verb}: no cluster to talk to; pass {flag} (or bootstrap_servers in --config)")
    return cfg
