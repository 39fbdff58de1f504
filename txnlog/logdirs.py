"""Find Kafka log files under the paths an operator hands us.

``--logs <dir>`` (DESIGN.md §4a): if ``<dir>`` holds partition directories
(``<topic>-<n>``) it is one broker's log dir; otherwise every subdirectory
that holds partition directories is a broker log dir, and replicas of one
partition on several brokers are compared later.

What the broker itself ignores is skipped: ``*.deleted``, ``*.cleaned``,
``*.swap`` files, directories ending in ``-delete`` / ``-future`` and the KRaft
metadata log ``__cluster_metadata``. Pure module (stdlib only): listing a few
thousand directories is driver work; reading bytes happens in executors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from txnlog.kafka.wire import TRANSACTION_STATE_TOPIC

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_OFFSET_FILE = re.compile(r"^(?P<offset>\d{20})\.(?P<suffix>log|snapshot|index|timeindex|txnindex)$")
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
IGNORED_TOPICS = {"__cluster_metadata"}


@dataclass(frozen=True, slots=True)
class LogFile:
    """One segment (``.log``) or producer snapshot (``.snapshot``) of one replica."""

    path: str
    broker: str
    topic: str
    partition: int
    base_offset: int  # segment base offset, or the snapshot's offset
    size: int
    kind: str  # "log" or "snapshot"


#: Files a broker keeps at the root of each log dir (``LogManager``, ``ReplicaManager``): one line per
#: partition, ``<topic> <partition> <offset>``, after a version line (0) and a count line
#: (``OffsetCheckpointFile``). Written every few seconds, so they can lag the segments a little.
CHECKPOINT_FILES = {
    "replication-offset-checkpoint": "high_watermark",
    "log-start-offset-checkpoint": "log_start_offset",
    "recovery-point-offset-checkpoint": "recovery_point",
}
#: Written by a broker that shut down cleanly, deleted when it starts loading (``CleanShutdownFileHandler``).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One broker's checkpointed offsets of one partition (None where its file lacks the partition)."""

    broker: str
    topic: str
    partition: int
    high_watermark: int | None = None
    log_start_offset: int | None = None
    recovery_point: int | None = None
    clean_shutdown: bool = False


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset`` of an ``OffsetCheckpointFile``; {} when missing or unreadable.

    Format (``CheckpointFile``): ``0`` (version), the entry count, then ``topic partition offset``
    lines. A file in another version or with a short/garbled body is ignored as a whole, as the
    broker would fail to read it: no partial answer.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        return {}
    n = int(lines[1])
    out: dict[tuple[str, int], int] = {}
    for line in lines[2 : 2 + n]:
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or not re.fullmatch(r"-?\d+", parts[2]):
            return {}
        out[(parts[0], int(parts[1]))] = int(parts[2])
    return out if len(out) == n else {}


def read_checkpoints(broker: str, log_dir: str) -> list[Checkpoint]:
    """Every partition named in ``log_dir``'s checkpoint files, merged per partition."""
    files = {col: read_offset_checkpoint(os.path.join(log_dir, name)) for name, col in CHECKPOINT_FILES.items()}
    clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    keys = sorted(set().union(*files.values()))
    return [
        Checkpoint(
            broker, topic, partition, clean_shutdown=clean, **{col: files[col].get((topic, partition)) for col in files}
        )
        for topic, partition in keys
    ]


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything found under the input paths, ordered by (broker, topic, partition, offset)."""

    segments: tuple[LogFile, ...] = ()
    snapshots: tuple[LogFile, ...] = ()
    txn_state_segments: tuple[LogFile, ...] = ()
    brokers: tuple[str, ...] = ()
    skipped: tuple[str, ...] = field(default=())  # paths ignored on purpose, for the summary
    checkpoints: tuple[Checkpoint, ...] = ()
    clean_shutdown_brokers: tuple[str, ...] = ()

    @property
    def data_partitions(self) -> set[tuple[str, int]]:
        return {(f.topic, f.partition) for f in self.segments}

    @property
    def txn_state_partitions(self) -> set[int]:
        return {f.partition for f in self.txn_state_segments}

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.segments) + sum(f.size for f in self.txn_state_segments)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``orders-7`` -> ("orders", 7); None for what is not a live partition directory."""
    if name.endswith(_IGNORED_DIR_SUFFIXES):
        return None
    m = _PARTITION_DIR.match(name)
    if not m or m.group("topic") in IGNORED_TOPICS:
        return None
    return m.group("topic"), int(m.group("partition"))


_PARTITION_MARKERS = ("partition.metadata", "leader-epoch-checkpoint")


def _is_partition_dir(entry: os.DirEntry[str]) -> bool:
    """A ``<topic>-<n>`` directory that holds Kafka files (a broker dir may be named ``broker-1``)."""
    if not (entry.is_dir() and _PARTITION_DIR.match(entry.name)):
        return False
    try:
        with os.scandir(entry.path) as it:
            return any(_OFFSET_FILE.match(f.name) or f.name in _PARTITION_MARKERS for f in it)
    except OSError:
        return False


def _holds_partition_dirs(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(_is_partition_dir(e) for e in it)
    except OSError:
        return False


def broker_dirs(root: str) -> list[tuple[str, str]]:
    """(broker name, log dir) pairs under ``root`` per the ``--logs`` rule."""
    root = os.path.abspath(root)
    if _holds_partition_dirs(root):
        return [(os.path.basename(root.rstrip(os.sep)) or root, root)]
    found = []
    with os.scandir(root) as it:
        for e in sorted(it, key=lambda e: e.name):
            if e.is_dir() and _holds_partition_dirs(e.path):
                found.append((e.name, e.path))
    return found


def discover(paths: list[str] | tuple[str, ...]) -> Inventory:
    """List every segment and snapshot below ``paths`` (see module doc)."""
    segments: list[LogFile] = []
    snapshots: list[LogFile] = []
    txn_state: list[LogFile] = []
    brokers: list[str] = []
    skipped: list[str] = []
    checkpoints: list[Checkpoint] = []
    clean: list[str] = []
    for root in paths:
        for broker, log_dir in broker_dirs(root):
            if broker in brokers:  # two roots with the same basename: keep them apart
                broker = f"{broker}@{log_dir}"
            brokers.append(broker)
            checkpoints.extend(read_checkpoints(broker, log_dir))
            if os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)):
                clean.append(broker)
            with os.scandir(log_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                if not entry.is_dir():
                    continue
                tp = parse_partition_dir(entry.name)
                if tp is None:
                    if _PARTITION_DIR.match(entry.name) or entry.name.endswith(_IGNORED_DIR_SUFFIXES):
                        skipped.append(entry.path)
                    continue
                topic, partition = tp
                with os.scandir(entry.path) as files:
                    names = sorted(files, key=lambda f: f.name)
                for f in names:
                    m = _OFFSET_FILE.match(f.name)
                    if not m:
                        if f.name.endswith((".deleted", ".cleaned", ".swap")):
                            skipped.append(f.path)
                        continue
                    suffix = m.group("suffix")
                    if suffix not in ("log", "snapshot"):
                        continue
                    lf = LogFile(
                        path=f.path,
                        broker=broker,
                        topic=topic,
                        partition=partition,
                        base_offset=int(m.group("offset")),
                        size=f.stat().st_size,
                        kind=suffix,
                    )
                    if suffix == "snapshot":
                        if topic != TRANSACTION_STATE_TOPIC:
                            snapshots.append(lf)
                    elif topic == TRANSACTION_STATE_TOPIC:
                        txn_state.append(lf)
                    else:
                        segments.append(lf)
    return Inventory(
        segments=tuple(segments),
        snapshots=tuple(snapshots),
        txn_state_segments=tuple(txn_state),
        brokers=tuple(brokers),
        skipped=tuple(skipped),
        checkpoints=tuple(checkpoints),
        clean_shutdown_brokers=tuple(clean),
    )
