"""``txnlog``: kafka-transactions.sh, offline, over the tables the job wrote.

    txnlog list                                   transactional.ids and their coordinator state
    txnlog describe --transactional-id ID         one id: latest state and its history
    txnlog describe-producers --topic T --partition P
    txnlog find-hanging [--topic T [--partition P]]
    txnlog timeline --topic T --partition P [--producer-id PID]
    txnlog abort --bootstrap-servers B --topic T --partition P --start-offset O [--execute]
    txnlog abort --bootstrap-servers B --topic T --partition P --producer-id PID
                 --producer-epoch E --coordinator-epoch CE [--execute]

``abort`` is the one command that talks to a live cluster: it re-validates the
transaction against the brokers (DescribeProducers, ListTransactions,
DescribeTransactions: still open at that offset, same producer id and epoch,
verdict still HANGING) and sends the ABORT marker only with ``--execute``.

The other commands read the Delta tables under ``--output`` (default ./out) with
delta-rs — no Spark start — and shows the newest run of ``--cluster`` unless
``--as-of`` picks another. The subcommand names and columns follow
``kafka-transactions.sh`` so that operators read them the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from txnlog.errors import UsageError


def _read(output: str, table: str, cluster: str | None, as_of: str | None) -> list[dict[str, Any]]:
    """Rows of the newest run (or of ``as_of``) of one output table."""
    import pyarrow.compute as pc

    from txnlog.delta import read_table

    data = read_table(output, table, cluster=cluster, as_of=as_of)
    if data.num_rows == 0:
        return []
    if as_of is None:
        clusters = sorted(set(data["cluster"].to_pylist()))
        if len(clusters) > 1:
            raise UsageError(
                f"--cluster: the tables hold several clusters ({', '.join(clusters)}); pick one with --cluster"
            )
        data = data.filter(pc.equal(data["as_of"], pc.max(data["as_of"])))
    return _datetime_safe(data).to_pylist()


def _datetime_safe(data: Any) -> Any:
    """``data`` with timestamps a Python datetime cannot hold (past the year 9999, e.g. a client clock
    in µs, written by another tool) as null, so that reading the rows never fails."""
    import pyarrow as pa
    import pyarrow.compute as pc

    low, high = (
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )
    for i, f in enumerate(data.schema):
        if pa.types.is_timestamp(f.type):
            ticks = data.column(i).cast(pa.int64())  # in the column's unit
            per_s = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[f.type.unit]
            lo, hi = (
                max(
                    -(2**63),
                    min(2**63 - 1, int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * per_s),
                )
                for t in (low, high)
            )
            ok = pc.and_(pc.greater_equal(ticks, lo), pc.less_equal(ticks, hi))
            data = data.set_column(i, f, pc.if_else(ok, data.column(i), pa.scalar(None, f.type)))
    return data


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, list):
        return ",".join(map(str, value)) or "-"
    return str(value)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], out: TextIO) -> None:
    """Aligned columns like kafka-transactions.sh prints them: (header, key) pairs."""
    cells = [[_fmt(r.get(key)) for _, key in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, _) in enumerate(columns)]
    print("  ".join(h.ljust(w) for (h, _), w in zip(columns, widths, strict=True)).rstrip(), file=out)
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip(), file=out)


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    rows = _read(args.output, "coordinator_state", args.cluster, args.as_of)
    rows = sorted((r for r in rows if not r["is_tombstoned"]), key=lambda r: r["transactional_id"])
    print_table(
        rows,
        [
            ("TransactionalId", "transactional_id"),
            ("Coordinator", "coordinator_partition"),
            ("ProducerId", "producer_id"),
            ("TransactionState", "state"),
        ],
        out,
    )
    return 0


def cmd_describe(args: argparse.Namespace, out: TextIO) -> int:
    from txnlog.classify import IN_FLIGHT_STATES

    rows = [
        r
        for r in _read(args.output, "coordinator_state", args.cluster, args.as_of)
        if r["transactional_id"] == args.transactional_id
    ]
    if not rows:
        raise UsageError(f"--transactional-id {args.transactional_id}: not in coordinator_state; try 'txnlog list'")
    for r in rows:  # as kafka-transactions.sh: time since the transaction started, for one in flight
        start = r.get("txn_start_timestamp")
        busy = r.get("state") in IN_FLIGHT_STATES
        r["duration"] = int((r["as_of"] - start).total_seconds() * 1000) if start and busy else None
    print_table(
        rows,
        [
            ("CoordinatorId", "coordinator_partition"),
            ("TransactionalId", "transactional_id"),
            ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"),
            ("TransactionState", "state"),
            ("TransactionTimeoutMs", "timeout_ms"),
            ("CurrentTransactionStartTimeMs", "txn_start_timestamp"),
            ("TransactionDurationMs", "duration"),
            ("TopicPartitions", "partitions"),
        ],
        out,
    )
    history = [
        r
        for r in _read(args.output, "coordinator_history", args.cluster, args.as_of)
        if r["transactional_id"] == args.transactional_id
    ]
    if history:
        print(file=out)
        print_table(
            sorted(history, key=lambda r: (r["coordinator_partition"], r["record_offset"])),
            [
                ("Offset", "record_offset"),
                ("Time", "record_timestamp"),
                ("ProducerId", "producer_id"),
                ("Epoch", "producer_epoch"),
                ("State", "state"),
                ("Partitions", "partitions"),
            ],
            out,
        )
    return 0


def cmd_describe_producers(args: argparse.Namespace, out: TextIO) -> int:
    from txnlog.tables import Outcome

    rows = [
        r
        for r in _read(args.output, "transactions", args.cluster, args.as_of)
        if r["topic"] == args.topic and r["partition"] == args.partition
    ]
    latest: dict[int, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["first_offset"]):
        cur = latest.setdefault(r["producer_id"], {"producer_id": r["producer_id"], "current_start": None})
        cur["producer_epoch"] = r["producer_epoch"]
        cur["last_timestamp"] = r["marker_timestamp"] or r["last_timestamp"]
        cur["coordinator_epoch"] = (
            r["coordinator_epoch"] if r["coordinator_epoch"] is not None else cur.get("coordinator_epoch", -1)
        )
        cur["current_start"] = r["first_offset"] if r["outcome"] == Outcome.OPEN else None
    print_table(
        list(latest.values()),
        [
            ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"),
            ("LastTimestamp", "last_timestamp"),
            ("CoordinatorEpoch", "coordinator_epoch"),
            ("CurrentTransactionStartOffset", "current_start"),
        ],
        out,
    )
    return 0


def cmd_find_hanging(args: argparse.Namespace, out: TextIO) -> int:
    rows = _read(args.output, "findings", args.cluster, args.as_of)
    if args.topic:
        rows = [r for r in rows if r["topic"] == args.topic]
    if args.partition is not None:
        rows = [r for r in rows if r["partition"] == args.partition]
    for r in rows:
        r["duration_min"] = None if r["idle_ms"] is None else r["idle_ms"] // 60000
    rows.sort(key=lambda r: (r["verdict"], r["topic"] or "", r["partition"] or -1))
    print_table(
        rows,
        [
            ("Topic", "topic"),
            ("Partition", "partition"),
            ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"),
            ("CoordinatorEpoch", "coordinator_epoch"),
            ("StartOffset", "start_offset"),
            ("LastTimestamp", "last_timestamp"),
            ("Duration(min)", "duration_min"),
            ("Verdict", "verdict"),
            ("Reason", "reason"),
            ("TransactionalId", "transactional_id"),
        ],
        out,
    )
    if args.verbose:
        for r in rows:
            print(
                f"\n{r['topic']}-{r['partition']} @ {r['start_offset']}: {r['evidence']}\n  advice: {r['advice']}",
                file=out,
            )
    return 0


def cmd_timeline(args: argparse.Namespace, out: TextIO) -> int:
    rows = [
        r
        for r in _read(args.output, "transactions", args.cluster, args.as_of)
        if r["topic"] == args.topic
        and r["partition"] == args.partition
        and (args.producer_id is None or r["producer_id"] == args.producer_id)
    ]
    rows.sort(key=lambda r: r["first_offset"])
    print_table(
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
        out,
    )
    return 0


def _abort_request(args: argparse.Namespace) -> Any:
    from txnlog.live import AbortRequest

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
    import time

    from txnlog import classify, live
    from txnlog.config import load_config

    request = _abort_request(args)
    overrides: dict[str, Any] = {}
    if args.bootstrap_servers:
        overrides["bootstrap_servers"] = args.bootstrap_servers
    if args.max_transaction_timeout_ms is not None:
        overrides["max_transaction_timeout_ms"] = args.max_transaction_timeout_ms
    cfg = load_config(args.config, overrides)
    if not cfg.bootstrap_servers:
        raise UsageError("abort: no cluster to talk to; pass --bootstrap-servers (or bootstrap_servers in --config)")
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
    try:
        from kafka.errors import KafkaError

        admin = live.admin_client(bootstrap, cfg.kafka)
    except KafkaError as e:
        raise UsageError(f"abort: cannot reach {bootstrap}: {e}") from e
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


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--output", default="./out", help="the job's output directory (default ./out)")
    common.add_argument("--cluster", help="cluster name (needed when the tables hold several)")
    common.add_argument("--as-of", help="which run to show (default: the newest)")
    p = argparse.ArgumentParser(
        prog="txnlog", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", parents=[common], help="transactional.ids and their state")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("describe", parents=[common], help="one transactional.id, with its history")
    s.add_argument("--transactional-id", required=True)
    s.set_defaults(func=cmd_describe)
    s = sub.add_parser("describe-producers", parents=[common], help="producers of one partition")
    s.add_argument("--topic", required=True)
    s.add_argument("--partition", type=int, required=True)
    s.set_defaults(func=cmd_describe_producers)
    s = sub.add_parser("find-hanging", parents=[common], help="late and hanging transactions")
    s.add_argument("--topic")
    s.add_argument("--partition", type=int)
    s.add_argument("-v", "--verbose", action="store_true", help="print evidence and advice")
    s.set_defaults(func=cmd_find_hanging)
    s = sub.add_parser("timeline", parents=[common], help="transactions of one partition in offset order")
    s.add_argument("--topic", required=True)
    s.add_argument("--partition", type=int, required=True)
    s.add_argument("--producer-id", type=int)
    s.set_defaults(func=cmd_timeline)
    s = sub.add_parser("abort", help="abort one hanging transaction on a live cluster (re-validated; needs --execute)")
    s.add_argument("--bootstrap-servers", help="the cluster (default: bootstrap_servers of --config)")
    s.add_argument("--config", help="YAML config (its kafka: settings are the client's SASL/SSL settings)")
    s.add_argument("--topic", required=True)
    s.add_argument("--partition", type=int, required=True)
    s.add_argument("--start-offset", type=int, help="first offset of the open transaction (brokers 3.0+)")
    s.add_argument("--producer-id", type=int, help="legacy form, with --producer-epoch and --coordinator-epoch")
    s.add_argument("--producer-epoch", type=int)
    s.add_argument("--coordinator-epoch", type=int)
    s.add_argument(
        "--max-transaction-timeout-ms",
        type=int,
        help="the brokers' transaction.max.timeout.ms (default: the config's, 900000)",
    )
    s.add_argument("--execute", action="store_true", help="really send the ABORT marker (default: dry run)")
    s.set_defaults(func=cmd_abort)
    return p


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "partition", None) is not None and not getattr(args, "topic", None):
        print("txnlog: error: --partition needs --topic", file=sys.stderr)
        return 2
    try:
        return int(args.func(args, out))
    except UsageError as e:
        print(f"txnlog: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
