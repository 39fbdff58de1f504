"""The file lists and settings a run hands its per-partition tasks, as Spark Data Source options (strings) and back.

A run lists its files once (``txnlog.sources.logdirs``); Spark ships a source's options with every task, so a long
list travels as a manifest, an Arrow IPC file in the run's scratch directory that only planning reads
(:func:`write_manifest`), and the tasks get their own rows of it (txnlog.engine.plan). The local placement needs
none of this: it plans on the listed files directly (txnlog.engine.tasks)."""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict
from typing import Any

import pyarrow as pa
from pyarrow import ipc

from txnlog.model.arrow import python_values
from txnlog.sources import storage
from txnlog.sources.logdirs import LogFile


def files_option(files: list[LogFile] | tuple[LogFile, ...]) -> str:
    """The ``files`` option for a few files (tests, notebooks); a run passes a manifest (write_manifest)."""
    return json.dumps([asdict(f) for f in files])


#: the manifest's columns: LogFile's fields
MANIFEST_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("size", pa.int64()),
        ("kind", pa.string()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_start_offset", pa.int64()),
        ("clean_shutdown", pa.bool_()),
        ("high_watermark", pa.int64()),
    ]
)


def write_manifest(
    directory: str, name: str, files: list[LogFile] | tuple[LogFile, ...], checkpoints: Any = ()
) -> dict[str, str]:
    """Options that hand ``files`` (and the log-dir ``checkpoints``, ``txnlog.model.rows.Checkpoint``) to a
    source as one Arrow IPC file under ``directory`` (the run's scratch dir: local or shared storage),
    read once by the planning worker: the options stay a few bytes whatever the number of files."""

    table = files_table(files)
    cps = list(checkpoints)
    cp_table = pa.Table.from_arrays(
        [
            pa.array([c.broker for c in cps], pa.string()),
            pa.array([c.topic for c in cps], pa.string()),
            pa.array([c.partition for c in cps], pa.int32()),
            pa.array([c.log_start_offset for c in cps], pa.int64()),
            pa.array([c.clean_shutdown for c in cps], pa.bool_()),
            pa.array([c.high_watermark for c in cps], pa.int64()),
        ],
        schema=CHECKPOINT_SCHEMA,
    )
    filesystem, path = storage.filesystem(directory)
    filesystem.create_dir(path, recursive=True)
    out: dict[str, str] = {}
    for option, data in (("manifest", table), ("checkpoints_manifest", cp_table)):
        target = posixpath.join(path, f"{name}-{option}.arrow")
        with filesystem.open_output_stream(target) as sink, ipc.new_file(sink, data.schema) as writer:
            writer.write_table(data)
        out[option] = posixpath.join(directory, f"{name}-{option}.arrow")
    return out


def read_arrow(uri: str) -> pa.Table:

    filesystem, path = storage.filesystem(uri)
    with filesystem.open_input_file(path) as f:
        return ipc.open_file(f).read_all()


def files_table(files: list[LogFile] | tuple[LogFile, ...]) -> pa.Table:
    """``files`` as a table of ``MANIFEST_SCHEMA`` (repeated strings dictionary-encoded)."""
    return pa.Table.from_arrays(
        [
            pa.array([f.path for f in files], pa.string()),
            pa.array([f.broker for f in files], pa.string()).dictionary_encode(),
            pa.array([f.topic for f in files], pa.string()).dictionary_encode(),
            pa.array([f.partition for f in files], pa.int32()),
            pa.array([f.base_offset for f in files], pa.int64()),
            pa.array([f.size for f in files], pa.int64()),
            pa.array([f.kind for f in files], pa.string()).dictionary_encode(),
        ],
        names=MANIFEST_SCHEMA.names,
    )


def table_files(table: pa.Table) -> list[LogFile]:
    """The LogFiles of a ``files_table``."""
    cols = [python_values(table.column(name)) for name in MANIFEST_SCHEMA.names]
    return [LogFile(*row) for row in zip(*cols, strict=True)]


def manifest_table(options: dict[str, str]) -> pa.Table:
    """The files of the ``manifest`` option, else of the ``files`` option, as a ``files_table``."""
    uri = options.get("manifest")
    if not uri:
        return files_table([LogFile(**d) for d in json.loads(options.get("files", "[]"))])
    return read_arrow(uri)


def manifest_checkpoints(options: dict[str, str]) -> list[list[Any]]:
    """Rows of ``checkpoints_option`` from the ``checkpoints_manifest`` option, else the ``checkpoints`` one."""
    uri = options.get("checkpoints_manifest")
    if not uri:
        rows: list[list[Any]] = json.loads(options.get("checkpoints", "[]"))
        return rows
    t = read_arrow(uri)
    return [list(r) for r in zip(*(t.column(n).to_pylist() for n in CHECKPOINT_SCHEMA.names), strict=True)]


#: options that only planning reads: a reader drops them once its partitions are made
PLANNING_OPTIONS = ("files", "checkpoints", "manifest", "checkpoints_manifest")


def checkpoint_rows(checkpoints: Any) -> list[list[Any]]:
    """The log-dir checkpoints (``txnlog.model.rows.Checkpoint``) the transaction merge needs, as rows: (broker,
    topic, partition, checkpointed log start, clean shutdown, high watermark)."""
    return [
        [c.broker, c.topic, c.partition, c.log_start_offset, c.clean_shutdown, c.high_watermark] for c in checkpoints
    ]


def checkpoints_option(checkpoints: Any) -> str:
    """The ``checkpoints`` option: :func:`checkpoint_rows` of ``checkpoints``."""
    return json.dumps(checkpoint_rows(checkpoints))
