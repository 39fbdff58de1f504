"""``txnlog audit``: the run's ``integrity`` rows (txnlog.rules.integrity), as the other verbs print rows, with an
exit code for cron and CI. What each check means, and the Kafka class that decides it: docs/integrity.md."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from txnlog.model.contract import IntegrityCheck, IntegritySeverity
from txnlog.model.errors import UsageError
from txnlog.ops.cli_output import emit
from txnlog.ops.commands import EXIT_FOUND, Run, known_partition, shown_run

#: --fail-on: the severities that make ``audit`` exit 1 when it lists a row of one of them
FAIL_ON = {
    "error": {IntegritySeverity.ERROR},
    "warning": {IntegritySeverity.ERROR, IntegritySeverity.WARNING},
    "not-checked": {IntegritySeverity.ERROR, IntegritySeverity.WARNING, IntegritySeverity.NOT_CHECKED},
    "never": set(),
}
#: the order rows are listed in: the worst first
_SEVERITY_ORDER = {s.value: i for i, s in enumerate(IntegritySeverity)}

COLUMNS = (
    ("Check", "check"),
    ("Severity", "severity"),
    ("Topic", "topic"),
    ("Partition", "partition"),
    ("Replica", "replica"),
    ("ProducerId", "producer_id"),
    ("ProducerEpoch", "producer_epoch"),
    ("FirstOffset", "first_offset"),
    ("LastOffset", "last_offset"),
    ("MarkerOffset", "marker_offset"),
    ("Marker", "marker_type"),
    ("Records", "records_affected"),
    ("Bytes", "bytes_affected"),
    ("From", "from_time"),
    ("To", "to_time"),
    ("ConsumersReceived", "consumers_received"),
    ("ShouldReceive", "consumers_should_receive"),
    ("RestartRepairs", "restart_repairs"),
    ("TransactionalId", "transactional_id"),
)
#: what -v adds (json, csv: as columns; table: a paragraph per row after the table)
VERBOSE_COLUMNS = (("KafkaClass", "kafka_class"), ("Evidence", "evidence"), ("Advice", "advice"))


def _integrity_rows(run: Run, where: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return run.rows("integrity", **where)
    except UsageError as e:  # an output written before the audit: it has the other tables, not this one
        raise UsageError(
            f"{run.output}: no integrity table ({e}); the job writes it since the integrity audit: run it again"
        ) from e


def _check_filter(asked: list[str], rows: list[dict[str, Any]]) -> set[str]:
    """The checks ``--check`` names, upper-cased; one line for a name that is no check."""
    known = {c.value for c in IntegrityCheck} | {r["check"] for r in rows}
    wanted = {c.upper() for c in asked}
    unknown = sorted(wanted - known)
    if unknown:
        raise UsageError(f"--check {unknown[0]}: not an integrity check; one of {', '.join(sorted(known))}")
    return wanted


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    """The run's ``integrity`` rows, filtered, worst first; exit 1 when one listed has a --fail-on severity."""
    run = shown_run(args)
    known_partition(run, args.topic, args.partition)
    where = {k: v for k, v in {"topic": args.topic, "partition": args.partition}.items() if v is not None}
    rows = _integrity_rows(run, where)
    checks = _check_filter(args.check or [], rows)
    if checks:
        rows = [r for r in rows if r["check"] in checks]
    if args.replica:
        rows = [r for r in rows if r.get("replica") in (args.replica, None)]  # null: every replica
    rows.sort(
        key=lambda r: (
            _SEVERITY_ORDER.get(r["severity"], len(_SEVERITY_ORDER)),
            r["check"],
            r.get("topic") or "",
            r.get("partition") if r.get("partition") is not None else -1,
            r.get("replica") or "",
            r.get("first_offset") if r.get("first_offset") is not None else -1,
        )
    )
    verbose = args.verbose and args.format != "table"
    emit(rows, [*COLUMNS, *(VERBOSE_COLUMNS if verbose else ())], args.format, out)
    if args.verbose and args.format == "table":
        for r in rows:
            print(f"\n{_row_name(r)}: {r.get('evidence')}\n  advice: {r.get('advice')}", file=out)
    failing = FAIL_ON[args.fail_on]
    return EXIT_FOUND if any(r["severity"] in failing for r in rows) else 0


def _row_name(r: dict[str, Any]) -> str:
    """What a row is about: its check, partition and replica, and the transaction's offsets when it has one."""
    where = f"{r.get('topic')}-{r.get('partition')}"
    replica = f" on {r['replica']}" if r.get("replica") else ""
    end = r["marker_offset"] if r.get("marker_offset") is not None else r.get("last_offset")
    offsets = f" offsets {r['first_offset']}..{end}" if r.get("first_offset") is not None else ""
    return f"{r['check']} {where}{replica}{offsets}"
