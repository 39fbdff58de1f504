"""``txnlog blocked``: who is blocked, the run's ``blocked_consumers`` rows (txnlog.rules.blocked) with the columns of
``kafka-consumer-groups.sh --describe`` where they mean the same: the groups BLOCKED behind a LATE or HANGING
transaction holding the LSO, and those whose pending transactional offset commit (UNSTABLE_OFFSET_COMMIT) stalls
every member at start-up or rebalance."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from txnlog.model.errors import UsageError
from txnlog.ops.cli_output import emit
from txnlog.ops.commands import Run, shown_run
from txnlog.rules.blocked import BLOCKED, UNSTABLE_OFFSET_COMMIT

COLUMNS = (
    ("GROUP", "group"),
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("CURRENT-OFFSET", "committed_offset"),  # the group's stable committed offset
    ("LSO", "last_stable_offset"),
    ("HW", "high_watermark"),
    ("WAITING", "offsets_to_high_watermark"),  # offsets up to the HW, markers and aborted records included
    ("SINCE", "blocked_since"),
    ("STATUS", "status"),
)
_SHOWN = (BLOCKED, UNSTABLE_OFFSET_COMMIT)


def _blocked_rows(run: Run, where: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return run.rows("blocked_consumers", **where)
    except UsageError as e:  # an output written before the table existed
        raise UsageError(
            f"{run.output}: no blocked_consumers table ({e}); the job writes it from the copy's __consumer_offsets "
            "partitions: run it again with them in the input"
        ) from e


def cmd_blocked(args: argparse.Namespace, out: TextIO) -> int:
    """The groups blocked in the run, by group, topic and partition; ``--group``/``--topic`` filter."""
    run = shown_run(args)
    where = {k: v for k, v in {"group": args.group, "topic": args.topic}.items() if v is not None}
    rows = [r for r in _blocked_rows(run, where) if r["status"] in _SHOWN]
    rows.sort(key=lambda r: (r["group_bytes"] or b"", r["topic"] or "", r["partition"] or 0, r["status"]))
    emit(rows, COLUMNS, args.format, out)
    return 0
