"""``txnlog``: kafka-transactions.sh, offline, over the tables the job wrote.

This module holds the verbs' arguments and ``main``; what each verb does is txnlog.ops.commands (the tables)
and txnlog.ops.unblock (plan, abort, fence), how rows are printed txnlog.ops.cli_output.

    txnlog list [--duration-filter MS] [--state S]... [--producer-id PID]... [--transactional-id-pattern RE]
    txnlog describe --transactional-id ID         one id: latest state and its history
    txnlog describe-producers --topic T --partition P
    txnlog find-hanging [--topic T [--partition P]] [--replica R] [--verdict hanging|late|all] [--fail-on ...]
    txnlog timeline --topic T --partition P [--producer-id PID]
    txnlog audit [--topic T [--partition P]] [--check C]... [--fail-on error|warning|not-checked|never] [-v]
    txnlog blocked [--group G] [--topic T]        the consumer groups blocked behind a stuck transaction
    txnlog plan [--topic T] [--script FILE]       the ordered aborts that unblock consumers
    txnlog retain --keep-runs N [--execute]       drop old runs from the history
    txnlog abort --bootstrap-servers B --topic T --partition P --start-offset O [--execute]
    txnlog abort --bootstrap-servers B --topic T --partition P --producer-id PID
                 --producer-epoch E --coordinator-epoch CE [--execute]
    txnlog fence --bootstrap-server B --transactional-id ID [--producer-id PID --producer-epoch E] [--execute]

``abort`` and ``fence`` are the commands that talk to a live cluster: ``abort``
re-validates the transaction against the brokers (DescribeProducers,
ListTransactions, DescribeTransactions: still open at that offset, same producer
id and epoch, verdict still HANGING) and sends the ABORT marker only with
``--execute``; ``fence`` re-validates a transactional.id (DescribeTransactions:
still Ongoing, same producer id and epoch, past its timeout) and sends
InitProducerId (Admin.fenceProducers) only with ``--execute``.

The other commands read the Delta tables under ``--output`` (default ./out) with
delta-rs, no Spark start, and show the newest *complete* run of ``--cluster`` (its
``runs`` row says SUCCEEDED) unless ``--as-of`` picks another. The subcommand names,
columns and units follow ``kafka-transactions.sh`` so that operators read them the
same way; ``--format json`` prints one JSON object per row (for ``jq``), ``--format
csv`` a header and rows. ``find-hanging`` exits 1 when it lists a HANGING
transaction (``--fail-on late``: a LATE one too), else 0; ``audit`` exits 1 when it
lists an integrity anomaly (an ERROR or WARNING row; ``--fail-on`` moves the bar), else
0; a usage error exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from txnlog.model.errors import UsageError

#: the --format choices (txnlog.ops.cli_output prints each)
FORMATS = ("table", "json", "csv")


def _list_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--duration-filter",
        type=int,
        metavar="MS",
        help="only transactions running longer than MS milliseconds at as_of (KIP-994; < 0: all)",
    )
    s.add_argument("--state", action="append", metavar="STATE", help="only this state, e.g. Ongoing (repeatable)")
    s.add_argument("--producer-id", type=int, action="append", metavar="PID", help="only this producer id (repeatable)")
    s.add_argument(
        "--transactional-id-pattern", metavar="REGEX", help="only ids that this regular expression fully matches"
    )


def _describe_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--transactional-id", required=True, help="the transactional.id")


def _partition_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--topic", required=True, help="topic name")
    s.add_argument("--partition", type=int, required=True, help="partition number")


def _describe_producers_arguments(s: argparse.ArgumentParser) -> None:
    _partition_arguments(s)


def _timeline_arguments(s: argparse.ArgumentParser) -> None:
    _partition_arguments(s)
    s.add_argument("--producer-id", type=int, help="only this producer's transactions")


def _find_hanging_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--topic", help="only this topic")
    s.add_argument("--partition", type=int, help="only this partition (with --topic)")
    s.add_argument("--replica", metavar="NAME", help="only findings open on this replica (a broker dir's name)")
    s.add_argument(
        "--verdict", choices=["hanging", "late", "all"], default="all", help="which findings to list (default all)"
    )
    s.add_argument(
        "--fail-on",
        choices=["hanging", "late"],
        default="hanging",
        help="exit 1 when a HANGING finding is listed (default), or a LATE one too (late)",
    )
    s.add_argument("-v", "--verbose", action="store_true", help="print each finding's evidence and advice")


#: audit's --fail-on: exit 1 when a listed row has this severity or a worse one (txnlog.ops.audit.FAIL_ON)
AUDIT_FAIL_ON = ("error", "warning", "not-checked", "never")


def _audit_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--topic", help="only this topic")
    s.add_argument("--partition", type=int, help="only this partition (with --topic)")
    s.add_argument("--replica", metavar="NAME", help="only rows of this replica (a broker dir's name) or of every one")
    s.add_argument(
        "--check",
        action="append",
        metavar="CHECK",
        help="only this check, e.g. ABORTED_DATA_VISIBLE (repeatable; default: every check)",
    )
    s.add_argument(
        "--fail-on",
        choices=AUDIT_FAIL_ON,
        default="warning",
        help="exit 1 when a listed row is ERROR (error), ERROR or WARNING (warning, the default: every anomaly), "
        "any row, NOT_CHECKED too (not-checked), or never (never)",
    )
    s.add_argument("-v", "--verbose", action="store_true", help="print each row's evidence, advice and Kafka class")


def _blocked_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--group", help="only this consumer group (as Kafka reads its name)")
    s.add_argument("--topic", help="only this topic")


def _plan_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--topic", help="only this topic's partitions")
    s.add_argument("--script", metavar="FILE", help="write the SAFE aborts as a shell script of 'txnlog abort' calls")
    s.add_argument(
        "--bootstrap-servers",
        help="the cluster the script's commands talk to (default: $BOOTSTRAP_SERVERS at run time)",
    )


def _retain_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--keep-runs", type=int, metavar="N", help="keep each cluster's newest N complete runs")
    s.add_argument("--keep-days", type=float, metavar="D", help="keep each cluster's runs of its newest D days")
    s.add_argument("--vacuum-hours", type=int, metavar="H", help="then delete files unused for H hours (vacuum)")
    s.add_argument("--wait-s", type=float, default=900, help="wait this long for a run writing the output")
    s.add_argument("--execute", action="store_true", help="really delete (default: list what would go)")


def _abort_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--bootstrap-servers", help="the cluster (default: bootstrap_servers of --config)")
    s.add_argument("--config", help="YAML config (its kafka: settings are the client's SASL/SSL settings)")
    _partition_arguments(s)
    s.add_argument("--start-offset", type=int, help="first offset of the open transaction (brokers 3.0+)")
    s.add_argument("--producer-id", type=int, help="legacy form, with --producer-epoch and --coordinator-epoch")
    s.add_argument("--producer-epoch", type=int, help="legacy form: the producer's epoch")
    s.add_argument("--coordinator-epoch", type=int, help="legacy form: the coordinator epoch of its last marker")
    s.add_argument(
        "--max-transaction-timeout-ms",
        type=int,
        help="the brokers' transaction.max.timeout.ms (default: the config's, 900000)",
    )
    s.add_argument("--execute", action="store_true", help="really send the ABORT marker (default: dry run)")


def _fence_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_servers",
        help="the cluster (default: bootstrap_servers of --config)",
    )
    s.add_argument("--config", help="YAML config (its kafka: settings are the client's SASL/SSL settings)")
    s.add_argument("--transactional-id", required=True, help="the transactional.id to fence")
    s.add_argument("--producer-id", type=int, help="the finding's producer id: refuse if the coordinator shows another")
    s.add_argument("--producer-epoch", type=int, help="the finding's producer epoch: refuse if it moved on")
    s.add_argument(
        "--two-phase-decided",
        action="store_true",
        help="a two-phase-commit (KIP-939) id: its transaction manager has decided to abort (refused otherwise)",
    )
    s.add_argument(
        "--max-transaction-timeout-ms",
        type=int,
        help="the brokers' transaction.max.timeout.ms (caps the timeout InitProducerId sends; default the config's)",
    )
    s.add_argument("--execute", action="store_true", help="really send InitProducerId (default: dry run)")


@dataclass(frozen=True)
class Verb:
    """One subcommand: what it does (a paragraph for ``--help``) and a copy-paste example."""

    name: str
    summary: str
    description: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]  # adds the verb's own options
    reads_tables: bool = True


VERBS = (
    Verb(
        "list",
        "transactional.ids and their coordinator state",
        "Every transactional.id the coordinator held at the run's as_of (from __transaction_state), as "
        "kafka-transactions.sh list prints them, with ListTransactions' filters: --state and --producer-id "
        "(KIP-664), --duration-filter (KIP-994: only transactions running longer than MS, measured from the "
        "transaction's start to as_of; as on the broker an id with no transaction start passes) and "
        "--transactional-id-pattern (KIP-1152: a regular expression the whole id must match). Ids the "
        "coordinator expired (Dead, tombstoned) are not listed. The Coordinator column is the "
        "__transaction_state partition that holds the id; its leader broker is the coordinator.",
        "txnlog list --output ./out --state Ongoing --duration-filter 900000",
        _list_arguments,
    ),
    Verb(
        "describe",
        "one transactional.id, with its history",
        "The coordinator's latest state of one transactional.id (kafka-transactions.sh describe's columns: "
        "times in epoch ms, the duration only while a transaction is in flight; an expired id shows Dead), "
        "then, with the table format, every __transaction_state record of it in offset order.",
        "txnlog describe --output ./out --transactional-id payments-7",
        _describe_arguments,
    ),
    Verb(
        "describe-producers",
        "producers of one partition",
        "Every producer with state on one partition at the run's as_of, idempotent and transactional, as "
        "kafka-transactions.sh describe-producers prints them (what DescribeProducers would have answered, "
        "rebuilt from the logs and producer snapshots): epoch, the coordinator epoch of its last marker (-1: "
        "none), the last sequence (-1: none since its epoch changed), its last batch's or marker's timestamp "
        "(epoch ms) and the first offset of its open transaction (None: none; what abort --start-offset needs). "
        "The state is the most advanced replica's (the leader's); producers idle longer than "
        "producer.id.expiration.ms with nothing open are gone, as on the broker.",
        "txnlog describe-producers --output ./out --topic orders --partition 5",
        _describe_producers_arguments,
    ),
    Verb(
        "find-hanging",
        "late and hanging transactions (exit 1 if any is HANGING)",
        "The run's findings: transactions open past the transaction timeout, HANGING (nothing will ever end "
        "them: abort) or LATE (the coordinator is still working on them), with kafka-transactions.sh "
        "find-hanging's columns plus the verdict, the reason and the transactional.id; -v adds the evidence "
        "and the advice. Filters: --topic/--partition, --replica (the findings open on that replica), "
        "--verdict. Exit code: 1 when a listed finding is HANGING (--fail-on late: LATE too), 0 when none "
        "is, 2 on a usage error, so cron and CI checks can alert on it.",
        "txnlog find-hanging --output ./out --topic orders -v || page-oncall",
        _find_hanging_arguments,
    ),
    Verb(
        "timeline",
        "transactions of one partition in offset order",
        "Every transaction the run saw on one partition (optionally of one producer), in offset order: its "
        "offsets, its marker, outcome (COMMIT, ABORT, OPEN, or UNKNOWN when the input does not show the "
        "marker's type) and times.",
        "txnlog timeline --output ./out --topic orders --partition 5 --producer-id 40015",
        _timeline_arguments,
    ),
    Verb(
        "audit",
        "did exactly-once hold? the integrity audit's anomalies (exit 1 if any)",
        "The run's integrity table: per replica, the transactions a read_committed consumer receives although "
        "they aborted (ABORTED_DATA_VISIBLE: the segment's .txnindex lacks the abort) or drops although they "
        "committed (COMMITTED_DATA_HIDDEN: a .txnindex entry ending at no abort; WARNING where the records "
        "dropped depend on how fetches split), and the transactions the coordinator decided one way while a "
        "partition's marker says the other (SPLIT_OUTCOME) or shows none (MARKER_MISSING), data batches below "
        "the producer's marker epoch (EPOCH_REGRESSION), sequence gaps inside a transaction (SEQUENCE_GAP). "
        "NOT_CHECKED rows name the partitions a check could not run on (e.g. INDEX_NOT_CHECKED: no segment "
        "files in the input): listed, and no anomaly. Worst first; -v adds the evidence, the advice (what a "
        "restart of the leader repairs) and the Kafka class that decides. Exit code: 1 when a listed row is an "
        "anomaly, ERROR or WARNING (--fail-on error: ERROR only; not-checked: NOT_CHECKED rows too; never: "
        "always 0), else 0; 2 on a usage error.",
        "txnlog audit --output ./out --topic orders --check ABORTED_DATA_VISIBLE -v || page-oncall",
        _audit_arguments,
    ),
    Verb(
        "blocked",
        "who is blocked: the consumer groups waiting behind a stuck transaction",
        "The run's blocked_consumers rows (from the copy's __consumer_offsets, or a live run's group offsets), "
        "columns as kafka-consumer-groups.sh "
        "--describe prints them: BLOCKED groups, whose committed offset (CURRENT-OFFSET) equals an LSO below the "
        "high watermark held by a LATE or HANGING transaction (a read_committed group: inferred, "
        "__consumer_offsets does not record the isolation level), and UNSTABLE_OFFSET_COMMIT ones, whose pending "
        "transactional offset commit stalls every member at start-up or rebalance. WAITING counts offsets up to "
        "the high watermark (markers and aborted records included); SINCE is the later of the transaction's "
        "start and the group's commit (a live run knows no commit time: the transaction's start).",
        "txnlog blocked --output ./out --topic orders --format json",
        _blocked_arguments,
    ),
    Verb(
        "plan",
        "the ordered aborts that unblock consumers, with what each releases",
        "From the run: per partition, the HANGING transactions in the order they must be aborted (only the "
        "earliest open transaction pins the last stable offset), how far the LSO moves after each (to the next "
        "open transaction's first offset, or the log end) and how many offsets that releases to read_committed "
        "consumers, with the exact commands; partitions that release the most first. VERIFY_FIRST ones are "
        "listed apart. --script FILE writes a shell script calling 'txnlog abort' for each SAFE one, in order: "
        "every abort is re-validated live, and the script is a dry run unless run with --execute.",
        "txnlog plan --output ./out --script unblock.sh --bootstrap-servers kafka-1:9092",
        _plan_arguments,
    ),
    Verb(
        "retain",
        "drop old runs from the history (dry run unless --execute)",
        "Keeps, per cluster, the newest --keep-runs complete runs and every run of the last --keep-days days "
        "(counted back from the cluster's newest complete run), and deletes every older run's rows from every "
        "table, runs first (one Delta commit per table; a run never shows with rows missing). Without "
        "--execute it lists what it would delete. The deleted rows' files stay for time travel and readers "
        "still on an older version until a vacuum: --vacuum-hours H deletes the files no version of the last H "
        "hours uses (Delta's default retention is 168). The job does the same after each run with "
        "retain_runs/retain_days in its config.",
        "txnlog retain --output /data/txnlog --keep-runs 90 --keep-days 30 --vacuum-hours 168 --execute",
        _retain_arguments,
    ),
    Verb(
        "abort",
        "abort one hanging transaction on a live cluster (re-validated; needs --execute)",
        "The one verb that talks to a live cluster: it re-validates the transaction against the brokers "
        "(DescribeProducers, ListTransactions, DescribeTransactions: still open at that offset, same producer "
        "id and epoch, verdict still HANGING) and sends the ABORT marker (WriteTxnMarkers) only with "
        "--execute. Give --start-offset (brokers 3.0+) or the legacy --producer-id/--producer-epoch/"
        "--coordinator-epoch. Exit 2 when the re-validation refuses.",
        "txnlog abort --bootstrap-servers kafka-1:9092 --topic orders --partition 5 --start-offset 614",
        _abort_arguments,
        reads_tables=False,
    ),
    Verb(
        "fence",
        "fence a transactional.id whose transaction is overdue on a live cluster (re-validated; needs --execute)",
        "The remedy of a LATE finding the coordinator should have ended (remedy FENCE: "
        "COORDINATOR_TIMEOUT_OVERDUE, COORDINATOR_STUCK in Ongoing). It re-validates against the live cluster "
        "(DescribeTransactions: the id still Ongoing, owned by --producer-id/--producer-epoch when given, past "
        "its timeout; a two-phase-commit id only with --two-phase-decided) and then, only with --execute, does "
        "what Admin.fenceProducers does (KIP-618, Kafka 3.2+): FindCoordinator and InitProducerId for the id. The "
        "coordinator bumps its epoch and aborts the transaction on every partition it lists; the application "
        "using the id gets ProducerFencedException and must restart. On Kafka 4.1+ kafka-transactions.sh "
        "forceTerminateTransaction does the same. Exit 2 when the re-validation refuses or the cluster lacks the "
        "APIs.",
        "txnlog fence --bootstrap-server kafka-1:9092 --transactional-id cart-writer --producer-id 40017 "
        "--producer-epoch 0",
        _fence_arguments,
        reads_tables=False,
    ),
)


def _common() -> argparse.ArgumentParser:
    """The options of every verb that reads the tables."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--output", default="./out", help="the job's output directory (default ./out)")
    common.add_argument("--cluster", help="cluster name (needed when the tables hold several)")
    common.add_argument(
        "--as-of", help="which run to show, by its as_of (ISO-8601 or epoch ms; default: the newest complete run)"
    )
    common.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (as kafka-transactions.sh prints), json (one object per line, for jq) or csv",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    p = argparse.ArgumentParser(
        prog="txnlog", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        s = sub.add_parser(
            verb.name,
            parents=[common] if verb.reads_tables else [],
            help=verb.summary,
            description=verb.description,
            epilog=f"example:\n  {verb.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        verb.arguments(s)
    return p


def _verb_function(command: str) -> Callable[[argparse.Namespace, TextIO], int]:
    """The function that does ``command``."""
    # Lazy: the verbs load pyarrow and delta-rs, which `txnlog --help` and a usage error do not need.
    from txnlog.ops import audit, blocked, commands, unblock

    return {
        "list": commands.cmd_list,
        "describe": commands.cmd_describe,
        "describe-producers": commands.cmd_describe_producers,
        "find-hanging": commands.cmd_find_hanging,
        "timeline": commands.cmd_timeline,
        "audit": audit.cmd_audit,
        "blocked": blocked.cmd_blocked,
        "retain": commands.cmd_retain,
        "plan": unblock.cmd_plan,
        "abort": unblock.cmd_abort,
        "fence": unblock.cmd_fence,
    }[command]


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "partition", None) is not None and not getattr(args, "topic", None):
        print("txnlog: error: --partition needs --topic", file=sys.stderr)
        return 2
    try:
        return int(_verb_function(args.command)(args, out))
    except UsageError as e:
        print(f"txnlog: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `txnlog timeline ... | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 141  # what a shell reports for a command ended by SIGPIPE (128 + 13)


if __name__ == "__main__":
    sys.exit(main())
