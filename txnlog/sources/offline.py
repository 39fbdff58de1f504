"""A run's offline inputs resolved once, before anything is decoded: the log dirs' files (``--logs``) and the
kafka-dump-log.sh files (``--dump-log``), with the shared-storage settings every later listing and read uses.
Each problem is one line saying what to do (a :class:`~txnlog.model.errors.UsageError`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from txnlog.model.errors import UsageError
from txnlog.sources import storage
from txnlog.sources.dump_log.lines import DumpInput, dump_listing
from txnlog.sources.logdirs import LOGS_EXPECTED, NOTHING, Inventory, discover, locate, looks_like_dump_log


@dataclass(frozen=True)
class Offline:
    """The offline inputs, checked: the log dirs' inventory and the kafka-dump-log.sh files under the arguments."""

    logs: tuple[str, ...] = ()
    inventory: Inventory = field(default_factory=Inventory)
    dump_log: tuple[str, ...] = ()  # the --dump-log values (NAME=PATH kept)
    #: the kafka-dump-log.sh files under them, listed once: (file, location name, named) each
    #: (txnlog.sources.dump_log.lines.list_dump_inputs), the readers' input
    dump_inputs: tuple[DumpInput, ...] = ()
    #: the kafka-dump-log.sh files' size; a remote file's is not looked up: such an input counts as unbounded
    dump_bytes: int = 0

    @property
    def dump_files(self) -> tuple[str, ...]:
        """The kafka-dump-log.sh files, as listed."""
        return tuple(f for f, _loc, _named in self.dump_inputs)


def resolve(settings: storage.Settings | Mapping[str, Any] | None, logs: list[str], dump_log: list[str]) -> Offline:
    """``--logs`` and ``--dump-log`` checked and listed, with ``settings`` (``storage:`` in the config) used for
    every later open in this process."""
    storage.configure(settings)
    inventory = check_inputs(logs) if logs else Inventory()
    listed, size = dump_listing(dump_log)
    return Offline(tuple(logs), inventory, tuple(dump_log), tuple(listed), size)


def check_inputs(paths: list[str]) -> Inventory:
    """Discover logs under ``paths`` or raise a one-line UsageError saying what to do: each path is a log
    dir, a directory of them, a partition directory or a segment/snapshot file (txnlog.sources.logdirs.locate);
    kafka-dump-log.sh text is pointed at --dump-log."""

    located = {}
    try:
        for p in paths:
            try:
                found = located[p] = locate(p)
            except OSError as e:  # a symlink loop, a directory without read permission, a vanished file
                raise _unreadable(p, e) from e
            if found.kind != NOTHING:
                continue
            if storage.exists(p) and looks_like_dump_log(p):
                raise UsageError(
                    f"--logs {p}: {'holds ' if storage.isdir(p) else 'is '}kafka-dump-log.sh output, not Kafka's "
                    f"log files; use --dump-log {p}"
                )
            raise UsageError(f"--logs {p}: {found.problem}")
        try:
            inventory = discover(paths, located)
        except OSError as e:
            raise _unreadable(", ".join(paths), e) from e
    except storage.StorageError as e:  # shared storage refused or lacks the path (txnlog.sources.storage)
        raise UsageError(f"--logs {e}") from e
    if not inventory.segments and not inventory.txn_state_segments:
        raise UsageError(
            f"--logs {', '.join(paths)}: no Kafka logs found (expected <topic>-<partition>/ directories holding "
            f"0000….log segments); {LOGS_EXPECTED}"
        )
    return inventory


def _unreadable(given: str, e: OSError) -> UsageError:
    where = e.filename or given
    return UsageError(
        f"--logs {given}: cannot read {where}: {e.strerror or e}; fix that path (a symlink loop, missing read "
        "permission) or give --logs the directories to read without it"
    )
