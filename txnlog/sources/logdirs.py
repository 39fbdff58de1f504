"""Find Kafka log files under the paths an operator hands us.

``--logs <path>`` (docs/design.md §4a, ``locate``), in this order:

* a directory holding partition directories (``<topic>-<n>``) is one broker's log dir;
* a partition directory itself (named ``<topic>-<n>`` and holding ``<20-digit offset>.log`` /
  ``.snapshot`` / index files or ``partition.metadata``) is one replica of that partition, named
  after its parent directory as a log dir's partitions are after the log dir;
* a single ``<20-digit offset>.log`` segment or ``.snapshot`` file is read alone, its topic and
  partition from its parent directory's name, its replica named after the directory above that;
* otherwise every subdirectory that holds partition directories is a broker log dir.

Replicas of one partition on several brokers are compared later. A partition directory's name is
parsed as Kafka parses it (``LocalLog.parseTopicPartitionName``): the partition is what follows the
last ``-``, so topics may hold ``-`` and ``.``.

What the broker itself ignores is skipped: ``*.deleted``, ``*.cleaned``, ``*.swap`` files,
directories ending in ``-delete`` / ``-future`` / ``-stray`` (``LocalLog.DeleteDirSuffix`` /
``FutureDirSuffix`` / ``StrayDirSuffix``: ``<topic>-<n>.<uuid>-delete`` is being deleted, ``-future``
a replica still being copied to another log dir, ``-stray`` one the broker no longer hosts); given as a
``--logs`` path themselves, they are refused (``Located.problem``). The KRaft metadata log
``__cluster_metadata-0`` of a whole log dir holds no transactions but says what the cluster is (its segments
and ``.checkpoint`` snapshots are listed in ``Inventory.cluster_metadata``, read by
``txnlog.sources.cluster_metadata``); given alone, it is refused.

Listing is driver work, through ``txnlog.sources.storage`` (local paths with ``os``, ``s3a://…`` and other
shared storage with ``pyarrow.fs``); reading segment bytes happens in executors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from txnlog.kafka.wire import CLUSTER_METADATA_TOPIC, CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from txnlog.model.rows import Checkpoint
from txnlog.sources import storage
from txnlog.sources.logdir_files import CLEAN_SHUTDOWN_FILE, node_id, read_checkpoints

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_OFFSET_FILE = re.compile(r"^(?P<offset>\d{20})\.(?P<suffix>log|snapshot|index|timeindex|txnindex)$")
#: a KRaft snapshot of the metadata log (``Snapshots.filenameFromSnapshotId``: end offset, epoch)
_METADATA_SNAPSHOT = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
IGNORED_TOPICS = {CLUSTER_METADATA_TOPIC}
_SUFFIX_MEANING = {
    "-delete": "a partition directory Kafka has marked for deletion",
    "-future": "a replica Kafka is still copying to another log dir (it serves the original)",
    "-stray": "a replica the broker no longer hosts (marked stray)",
}


@dataclass(frozen=True, slots=True)
class LogFile:
    """One segment (``.log``) or producer snapshot (``.snapshot``) of one replica."""

    path: str
    broker: str
    topic: str
    partition: int
    base_offset: int  # segment base offset, or the snapshot's offset
    size: int
    kind: str  # "log" or "snapshot" (the metadata log's: "log" or "checkpoint")


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything found under the input paths, ordered by (broker, topic, partition, offset)."""

    segments: tuple[LogFile, ...] = ()
    snapshots: tuple[LogFile, ...] = ()
    txn_state_segments: tuple[LogFile, ...] = ()
    txn_indexes: tuple[LogFile, ...] = ()  # the data partitions' .txnindex files (kind "txnindex")
    brokers: tuple[str, ...] = ()
    skipped: tuple[str, ...] = field(default=())  # paths ignored on purpose, for the summary
    checkpoints: tuple[Checkpoint, ...] = ()
    clean_shutdown_brokers: tuple[str, ...] = ()
    #: the KRaft metadata log's segments ("log") and snapshots ("checkpoint") of each log dir given whole
    cluster_metadata: tuple[LogFile, ...] = ()
    #: (broker name, node.id) of each log dir given whole whose ``meta.properties`` names its node
    node_ids: tuple[tuple[str, int], ...] = ()

    @property
    def data_partitions(self) -> set[tuple[str, int]]:
        return {(f.topic, f.partition) for f in self.segments}

    @property
    def consumer_offsets_segments(self) -> tuple[LogFile, ...]:
        """The ``__consumer_offsets`` partitions' segments (among :attr:`segments`: their transactions are analysed
        as any data partition's; their groups' offsets are read by txnlog.engine.spark.consumer_offsets_source)."""
        return tuple(f for f in self.segments if f.topic == CONSUMER_OFFSETS_TOPIC)

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


def _is_partition_dir(entry: Any) -> bool:
    """A ``<topic>-<n>`` directory that holds Kafka files (a broker dir may be named ``broker-1``)."""
    if not (_PARTITION_DIR.match(entry.name) and entry.is_dir()):
        return False
    return _holds_kafka_files(entry.path)


def _holds_partition_dirs(path: str) -> bool:
    try:
        return any(_is_partition_dir(e) for e in storage.scandir(path))
    except OSError:
        return False


def broker_dirs(root: str) -> list[tuple[str, str]]:
    """(broker name, log dir) pairs under ``root`` per the ``--logs`` rule (whole log dirs only)."""
    root = storage.abspath(root)
    if _holds_partition_dirs(root):
        return [(_dir_name(root), root)]
    return [(e.name, e.path) for e in storage.scandir(root) if e.is_dir() and _holds_partition_dirs(e.path)]


def _dir_name(path: str) -> str:
    return storage.basename(path) or path


#: ``Located.kind``
LOG_DIRS, PARTITION_DIR, LOG_FILE, NOTHING = "log_dirs", "partition_dir", "file", "nothing"


@dataclass(frozen=True, slots=True)
class Located:
    """What one ``--logs`` path is (``locate``).

    ``log_dirs``: (broker name, log dir) of whole log dirs (LOG_DIRS), or the one replica a partition
    directory or file belongs to (its parent log dir). ``topic``/``partition``: of a PARTITION_DIR or
    LOG_FILE. ``problem`` (NOTHING): what the path is instead, one clause naming what was expected.
    """

    path: str
    kind: str
    log_dirs: tuple[tuple[str, str], ...] = ()
    topic: str = ""
    partition: int = -1
    problem: str = ""


def _holds_kafka_files(path: str) -> bool:
    try:
        if not storage.is_remote(path):  # stops at the first Kafka file (a partition may hold thousands)
            with os.scandir(storage.local_path(path)) as it:
                return any(_OFFSET_FILE.match(f.name) or f.name in _PARTITION_MARKERS for f in it)
        return any(_OFFSET_FILE.match(f.name) or f.name in _PARTITION_MARKERS for f in storage.scandir(path))
    except OSError:
        return False


#: what ``--logs`` accepts, for messages
LOGS_EXPECTED = (
    "give a broker log dir (log.dirs), a directory of them, a partition directory (<topic>-<partition>/) "
    "or a segment file (<topic>-<partition>/<20-digit base offset>.log)"
)


def _partition_of(dir_path: str, subject: str) -> tuple[tuple[str, int] | None, str]:
    """(topic, partition) of a partition directory, as Kafka parses its name; else None and why not
    (``subject``: how the message names the directory's name, e.g. "its directory")."""
    name = _dir_name(dir_path)
    suffix = next((x for x in _IGNORED_DIR_SUFFIXES if name.endswith(x)), None)
    if suffix is not None:
        return None, (
            f"{name} is {_SUFFIX_MEANING[suffix]} (Kafka's {suffix} suffix), which txnlog skips as the broker does; "
            "give the <topic>-<partition>/ directory the broker serves"
        )
    tp = parse_partition_dir(name)
    if tp is None and _PARTITION_DIR.match(name):
        return None, f"{name} is the KRaft metadata log, which holds no transactions"
    if tp is None:
        return None, (
            f"{subject} {name!r} is not <topic>-<partition> as Kafka names a partition directory, so the topic and "
            "partition are unknown; copy the files into a directory named after their partition (e.g. orders-7/)"
        )
    return tp, ""


def locate(path: str) -> Located:
    """What the ``--logs`` path ``path`` is (module doc); NOTHING with a ``problem`` when none of them."""
    storage.check_scheme(path)
    path = storage.abspath(path)
    if storage.is_remote(path):
        storage.prefetch(path)
    if storage.isfile(path):
        name = storage.basename(path)
        m = _OFFSET_FILE.match(name)
        if m and m.group("suffix") not in ("log", "snapshot"):
            return Located(path, NOTHING, problem=f"an index file; give the segment {m.group('offset')}.log beside it")
        if not m:
            return Located(
                path,
                NOTHING,
                problem="not a Kafka segment or producer snapshot (<20-digit base offset>.log or .snapshot); "
                + LOGS_EXPECTED,
            )
        part_dir = storage.dirname(path)
        tp, why = _partition_of(part_dir, "its directory")
        if tp is None:
            return Located(path, NOTHING, problem=why)
        log_dir = storage.dirname(part_dir)
        return Located(path, LOG_FILE, ((_dir_name(log_dir), log_dir),), *tp)
    if not storage.isdir(path):
        return Located(path, NOTHING, problem=f"{storage.missing_reason(path)}; {LOGS_EXPECTED}")
    if _holds_partition_dirs(path):  # one broker's log dir (what broker_dirs would list again)
        return Located(path, LOG_DIRS, ((_dir_name(path), path),))
    if _holds_kafka_files(path):
        tp, why = _partition_of(path, "it holds Kafka log files, but its name")
        if tp is None:
            return Located(path, NOTHING, problem=why)
        log_dir = storage.dirname(path)
        return Located(path, PARTITION_DIR, ((_dir_name(log_dir), log_dir),), *tp)
    found = broker_dirs(path)
    if not found:
        return Located(
            path,
            NOTHING,
            problem="no Kafka logs found (expected <topic>-<partition>/ directories holding 0000….log segments, "
            f"or the segments themselves); {LOGS_EXPECTED}",
        )
    return Located(path, LOG_DIRS, tuple(found))


def looks_like_dump_log(path: str, *, max_files: int = 20, head_bytes: int = 8192) -> bool:
    """Whether ``path`` (a file, or a few files under a directory) is kafka-dump-log.sh output: text
    that starts with ``Dumping `` or has ``baseOffset: `` lines within its first ``head_bytes``."""
    if storage.isdir(path):
        files: list[str] = []
        for dirpath, dirs, names in storage.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files.extend(storage.join(dirpath, n) for n in sorted(names) if not n.startswith("."))
            if len(files) >= max_files:
                break
        return any(looks_like_dump_log(f) for f in files[:max_files])
    try:
        head = storage.read_bytes(path, head_bytes)
    except OSError:
        return False
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return text.startswith(("Dumping ", "baseOffset: ")) or "\nbaseOffset: " in text


def discover(paths: list[str] | tuple[str, ...], located: dict[str, Located] | None = None) -> Inventory:
    """List every segment and snapshot below ``paths`` (see module doc); a path that ``locate`` finds
    nothing in adds nothing. A file reached twice (a segment given inside a partition directory also
    given) is listed once; one log dir reached twice is one replica. ``located``: what ``locate`` already
    said of some of the paths (the input check), not asked again.

    Costs one directory listing per partition and one ``stat`` per kept file (a file's identity is its
    directory's real path and its name; only a symlinked file is resolved itself): 300,000 files are a
    few seconds of driver time (benchmarks/RESULTS.md, "Planning 100,000 partitions")."""
    found_files = _Discovery()
    for root in paths:
        found = (located or {}).get(root) or locate(root)
        if found.kind == LOG_DIRS:
            for name, log_dir in found.log_dirs:
                found_files.add_log_dir(name, log_dir)
        elif found.kind in (PARTITION_DIR, LOG_FILE):
            ((name, log_dir),) = found.log_dirs
            broker = found_files.replica(name, log_dir, whole_dir=False)
            if found.kind == PARTITION_DIR:
                found_files.add_partition(
                    broker, found.topic, found.partition, found.path, storage.realpath(found.path)
                )
            else:
                path = found.path
                dir_name = _dir_name(storage.dirname(path))
                found_files.add(
                    broker,
                    found.topic,
                    found.partition,
                    path,
                    storage.basename(path),
                    storage.realpath(path),
                    None,
                    dir_name,
                )
    return found_files.inventory()


_Keyed = list[tuple[tuple[int, str, str], LogFile]]


class _Discovery:
    """What :func:`discover` has found so far: the files of each kind keyed by their log dir's listing order,
    the replicas (one per log dir's real path) and what their log dirs say of themselves."""

    def __init__(self) -> None:
        self.segments: _Keyed = []
        self.snapshots: _Keyed = []
        self.txn_state: _Keyed = []
        self.txn_indexes: _Keyed = []
        self.brokers: list[str] = []
        self.order: dict[str, int] = {}  # broker name -> its place in ``brokers``
        self.skipped: list[str] = []
        self.metadata: list[LogFile] = []
        self.checkpoints: list[Checkpoint] = []
        self.clean: list[str] = []
        self.nodes: list[tuple[str, int]] = []
        self.replicas: dict[str, str] = {}  # log dir (real path) -> broker name
        self.whole: set[str] = set()  # log dirs (real paths) given whole: their checkpoints are read
        self.seen: set[str] = set()  # files listed (real paths)

    def replica(self, name: str, log_dir: str, *, whole_dir: bool) -> str:
        """The broker name of the replica in ``log_dir`` (one per real path); of a log dir given whole, its
        checkpoints, clean-shutdown file and node id are read once."""
        key = storage.realpath(log_dir)
        if key not in self.replicas:
            if name in self.order:  # two roots with the same basename: keep them apart
                name = f"{name}@{log_dir}"
            self.replicas[key] = name
            self.order[name] = len(self.brokers)
            self.brokers.append(name)
        name = self.replicas[key]
        if whole_dir and key not in self.whole:  # the log dir's checkpoints and clean-shutdown file
            self.whole.add(key)
            self.checkpoints.extend(read_checkpoints(name, log_dir))
            if storage.exists(storage.join(log_dir, CLEAN_SHUTDOWN_FILE)):
                self.clean.append(name)
            node = node_id(log_dir)
            if node is not None:
                self.nodes.append((name, node))
        return name

    def add_log_dir(self, name: str, log_dir: str) -> None:
        """A whole log dir: each of its partition directories, the cluster metadata's files; directories
        Kafka is deleting or moving are skipped (named)."""
        broker = self.replica(name, log_dir, whole_dir=True)
        real_log_dir = storage.realpath(log_dir)
        for entry in storage.scandir(log_dir):
            if not entry.is_dir():
                continue
            tp = parse_partition_dir(entry.name)
            if entry.name == f"{CLUSTER_METADATA_TOPIC}-0":
                self.metadata.extend(_metadata_files(broker, entry.path))
                continue
            if tp is None:
                if _PARTITION_DIR.match(entry.name) or entry.name.endswith(_IGNORED_DIR_SUFFIXES):
                    self.skipped.append(entry.path)
                continue
            real = storage.realpath(entry.path) if entry.is_symlink() else f"{real_log_dir}/{entry.name}"
            self.add_partition(broker, *tp, entry.path, real)

    def add_partition(self, broker: str, topic: str, partition: int, part_dir: str, real_dir: str) -> None:
        """Every file of a partition directory (:meth:`add`)."""
        dir_name = _dir_name(part_dir)
        for f in storage.scandir(part_dir, sort=False):  # sorted once at the end
            # a file's identity without resolving every path (lstat per component): its directory's real path
            real = storage.realpath(f.path) if f.is_symlink() else f"{real_dir}/{f.name}"
            self.add(broker, topic, partition, f.path, f.name, real, f, dir_name)

    def add(
        self, broker: str, topic: str, partition: int, fpath: str, fname: str, real: str, entry: Any, dir_name: str
    ) -> None:
        """One file, kept when it is a segment, snapshot or .txnindex not seen before."""
        m = _OFFSET_FILE.match(fname)
        if not m:
            if fname.endswith((".deleted", ".cleaned", ".swap")):
                self.skipped.append(fpath)
            return
        suffix = m.group("suffix")
        # .txnindex: the aborted transactions a read_committed fetch is served (txnlog.sources.txnindex)
        if suffix not in ("log", "snapshot", "txnindex") or (suffix == "txnindex" and topic == TRANSACTION_STATE_TOPIC):
            return
        if real in self.seen:
            return
        self.seen.add(real)
        lf = LogFile(
            path=fpath,
            broker=broker,
            topic=topic,
            partition=partition,
            base_offset=int(m.group("offset")),
            size=storage.getsize(fpath) if entry is None else entry.stat().st_size,
            kind=suffix,
        )
        # a log dir's listing order, whatever order paths came in
        key = (self.order[broker], dir_name, fname)
        if suffix == "txnindex":
            self.txn_indexes.append((key, lf))
        elif suffix == "snapshot":
            if topic != TRANSACTION_STATE_TOPIC:
                self.snapshots.append((key, lf))
        elif topic == TRANSACTION_STATE_TOPIC:
            self.txn_state.append((key, lf))
        else:
            self.segments.append((key, lf))

    def inventory(self) -> Inventory:
        """What was found, each kind of file in its log dir's listing order."""

        def ordered(files: _Keyed) -> tuple[LogFile, ...]:
            files.sort(key=lambda kf: kf[0])
            return tuple(f for _, f in files)

        return Inventory(
            segments=ordered(self.segments),
            snapshots=ordered(self.snapshots),
            txn_state_segments=ordered(self.txn_state),
            txn_indexes=ordered(self.txn_indexes),
            brokers=tuple(self.brokers),
            skipped=tuple(self.skipped),
            checkpoints=tuple(self.checkpoints),
            clean_shutdown_brokers=tuple(self.clean),
            cluster_metadata=tuple(self.metadata),
            node_ids=tuple(self.nodes),
        )


def _metadata_files(broker: str, part_dir: str) -> list[LogFile]:
    """The metadata log's segments and KRaft snapshots in ``part_dir``, by offset."""
    out = []
    for f in storage.scandir(part_dir):
        m = _OFFSET_FILE.match(f.name) or _METADATA_SNAPSHOT.match(f.name)
        kind = "checkpoint" if f.name.endswith(".checkpoint") else "log" if f.name.endswith(".log") else ""
        if m and kind:
            size = f.stat().st_size
            out.append(LogFile(f.path, broker, CLUSTER_METADATA_TOPIC, 0, int(m.group("offset")), size, kind))
    return sorted(out, key=lambda f: (f.base_offset, f.kind))
