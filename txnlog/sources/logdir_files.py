"""What a broker's log dir says of itself, at its root: the offset checkpoint files (high watermark, log start,
recovery point of each partition), the clean-shutdown file and the node id in ``meta.properties``."""

from __future__ import annotations

import re

from txnlog.model.rows import Checkpoint
from txnlog.sources import storage

#: Files a broker keeps at the root of each log dir (``LogManager``, ``ReplicaManager``): one line per
#: partition, ``<topic> <partition> <offset>``, after a version line (0) and a count line
#: (``OffsetCheckpointFile``). Written every few seconds, so they can lag the segments a little.
CHECKPOINT_FILES = {
    "replication-offset-checkpoint": "high_watermark",
    "log-start-offset-checkpoint": "log_start_offset",
    "recovery-point-offset-checkpoint": "recovery_point",
    "cleaner-offset-checkpoint": "cleaner_offset",
}
#: Written by a broker that shut down cleanly, deleted when it starts loading (``CleanShutdownFileHandler``).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset`` of an ``OffsetCheckpointFile``; {} when missing or unreadable.

    Format (``CheckpointFile``): ``0`` (version), the entry count, then ``topic partition offset``
    lines. A file in another version or with a short/garbled body is ignored as a whole, as the
    broker would fail to read it: no partial answer.
    """
    try:
        lines = storage.read_bytes(path).decode("utf-8").splitlines()
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
    present = {e.name for e in storage.scandir(log_dir)}
    files = {
        col: read_offset_checkpoint(storage.join(log_dir, name)) if name in present else {}
        for name, col in CHECKPOINT_FILES.items()
    }
    clean = CLEAN_SHUTDOWN_FILE in present
    keys = sorted(set().union(*files.values()))
    hw, start, recovery = files["high_watermark"], files["log_start_offset"], files["recovery_point"]
    cleaned = files["cleaner_offset"]
    return [
        Checkpoint(broker, *tp, hw.get(tp), start.get(tp), recovery.get(tp), clean, cleaner_offset=cleaned.get(tp))
        for tp in keys
    ]


META_PROPERTIES = "meta.properties"


def node_id(log_dir: str) -> int | None:
    """The ``node.id`` a KRaft log dir's ``meta.properties`` names (``MetaProperties``; ``broker.id`` in a ZooKeeper
    broker's), None where the file is absent, unreadable or names none."""
    path = storage.join(log_dir, META_PROPERTIES)
    try:
        text = storage.read_bytes(path).decode("utf-8", "replace") if storage.exists(path) else ""
    except (OSError, storage.StorageError):
        return None
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    for key in ("node.id", "broker.id"):
        try:
            return int(props[key].strip())
        except (KeyError, ValueError):
            continue
    return None
