"""The verbs that unblock consumers: ``plan`` (which aborts and fences, in which order, and what each
releases), and ``abort`` and ``fence``, which re-validate against the live cluster before they act."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from txnlog.broker import classify
from txnlog.broker.classify import BOOTSTRAP_PLACEHOLDER, Safety
from txnlog.live import abort as live_abort
from txnlog.live import admin as live
from txnlog.live.abort import AbortRequest
from txnlog.model.config import load_config
from txnlog.model.errors import UsageError
from txnlog.model.words import count
from txnlog.ops import fence
from txnlog.ops.cli_output import emit, format_value
from txnlog.ops.commands import Run, known_partition, shown_run
from txnlog.rules.plan import fence_steps, plan_steps
from txnlog.rules.remedy import force_terminate_command

#: the config's ``admin_connect_timeout_s`` for ``abort`` and ``fence``, when set (conf/default.yaml)
ADMIN_CONNECT_TIMEOUT_ENV = "TXNLOG_ADMIN_CONNECT_TIMEOUT_S"


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

    run = shown_run(args)
    known_partition(run, args.topic, None)
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
            plan = live_abort.revalidate_abort(admin, request, thresholds)
        except live_abort.AbortRefused as e:
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
            live_abort.send_abort(admin, plan)
        except live_abort.AbortUnsupported as e:
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
        return live.admin_client(bootstrap, cfg.kafka, connect_timeout_s=cfg.admin_connect_timeout_s)
    except KafkaError as e:
        raise UsageError(f"{verb}: cannot reach {bootstrap}: {e}") from e


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


def _cluster_config(args: argparse.Namespace, verb: str, flag: str) -> Any:
    """The config ``verb`` talks to the cluster with: ``--config`` plus the command line's cluster and
    timeout; one line and exit 2 when it names no cluster."""

    overrides: dict[str, Any] = {}
    if args.bootstrap_servers:
        overrides["bootstrap_servers"] = args.bootstrap_servers
    if args.max_transaction_timeout_ms is not None:
        overrides["max_transaction_timeout_ms"] = args.max_transaction_timeout_ms
    # as a flag would: a generated unblock.sh passes its own arguments on, not a timeout
    overrides["admin_connect_timeout_s"] = os.environ.get(ADMIN_CONNECT_TIMEOUT_ENV)
    cfg = load_config(args.config, overrides)
    if not cfg.bootstrap_servers:
        raise UsageError(f"{verb}: no cluster to talk to; pass {flag} (or bootstrap_servers in --config)")
    return cfg
