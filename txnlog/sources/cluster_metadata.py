"""The KRaft metadata log of the copied log dirs, read for the cluster's image (txnlog.broker.cluster_image).

Each log dir of a KRaft broker or controller holds ``__cluster_metadata-0``: segments (``<offset>.log``) and,
once the log has grown, snapshots (``<end offset>-<epoch>.checkpoint``, ``Snapshots``) after which older
segments are deleted. A node loads the newest snapshot and then the log from the snapshot's end offset on
(``KafkaRaftClient``, ``MetadataLoader``); so is the copy read here. Of several log dirs, the one whose
metadata reaches furthest is used (every node holds the same log, some further along). The files are small
(the cluster's metadata, not its data) and read in the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.cluster_metadata import METADATA_COLUMNS, scan_metadata_log
from txnlog.kafka.errors import UNREADABLE_FILE, QuarantineEntry
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile

__all__ = ["read_metadata_log", "read_metadata_logs"]


def read_metadata_log(files: Sequence[LogFile]) -> tuple[pa.Table, list[QuarantineEntry], str]:
    """The records of one node's metadata log (``files``: its segments and snapshots) from its newest snapshot
    on, in offset order; the quarantined byte ranges; and why the records do not reach back to the cluster's
    beginning ("" when they do)."""
    snapshots = [f for f in files if f.kind == "checkpoint"]
    start = max((f.base_offset for f in snapshots), default=0)
    chosen = [f for f in snapshots if f.base_offset == start][-1:]
    logs = [f for f in files if f.kind == "log"]
    # the segments holding offsets at or after the snapshot's end: the last one starting at or below it, and later
    first = max((i for i, f in enumerate(logs) if f.base_offset <= start), default=0)
    chosen += logs[first:]
    gap = ""
    if not snapshots and logs and logs[0].base_offset > 0:
        gap = f"the metadata log starts at offset {logs[0].base_offset} and no snapshot covers the offsets before"
    tables, quarantine = [], []
    for f in chosen:
        try:
            scan = scan_metadata_log(storage.read_bytes(f.path), file=f.path)
        except OSError as e:
            quarantine.append(QuarantineEntry(f.path, 0, f.size, UNREADABLE_FILE, str(e)))
            continue
        t = scan.records
        if f.kind == "log":
            t = t.filter(pc.greater_equal(t.column("offset"), start))
        tables.append(t)
        quarantine.extend(scan.quarantine)
    records = pa.concat_tables(tables) if tables else METADATA_COLUMNS.empty_table()
    return records, quarantine, gap


def read_metadata_logs(files: Sequence[LogFile]) -> list[tuple[str, pa.Table, str]]:
    """Per log dir (broker) holding a metadata log: its records (:func:`read_metadata_log`) and why they are not
    to be trusted whole ("" when they are: no damage, no gap)."""
    out = []
    for broker, group in groupby(sorted(files, key=lambda f: f.broker), key=lambda f: f.broker):
        records, quarantine, gap = read_metadata_log(list(group))
        q = quarantine[0] if quarantine else None
        out.append((broker, records, f"{q.file} is damaged at byte {q.position} ({q.reason})" if q else gap))
    return out
