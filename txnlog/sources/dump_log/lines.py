"""``--dump-log`` step 1, the lines: which dump files the arguments name (``NAME=PATH``, directories), and
each file read in chunks and split into lines with numpy, each line with its number and the context only a
sequential reader gives cheaply (its ``Dumping`` section, whether a batch line precedes it).
txnlog.engine.spark.dump_log says how the three steps fit."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from txnlog.model.errors import UsageError
from txnlog.sources import storage

DEFAULT_CHUNK_BYTES = 16 * 2**20

#: the lines as read, before the parse (what :func:`iter_line_batches` yields to :func:`parse_lines`)
DUMP_LINES_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("line_no", pa.int64()),
        ("line", pa.string()),
        ("section", pa.int64()),  # line number of the governing "Dumping" line, 0 before any
        ("section_header", pa.string()),  # that line's text, null before any
        ("after_batch", pa.bool_()),  # the previous line is a batch line ("baseOffset: ...")
        ("loc", pa.string()),  # the replica name the dump file's location gives (list_dump_inputs), null if none
        ("loc_named", pa.bool_()),  # that name was given explicitly (--dump-log NAME=PATH)
    ]
)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def split_dump_arg(arg: str) -> tuple[str | None, str]:
    """``--dump-log`` value → (replica name or None, path).

    ``NAME=PATH`` names the replica every dump under PATH belongs to. An existing path is
    always a path (a file name may hold ``=``), and NAME must be a plain name (letters, digits,
    ``._-``; no ``/``), so ``a/b=c.txt`` is a path.

    >>> split_dump_arg("broker-1=dumps/b1.txt")
    ('broker-1', 'dumps/b1.txt')
    >>> split_dump_arg("dumps/b1.txt")
    (None, 'dumps/b1.txt')
    """
    if "=" in arg and not (storage.is_remote(arg) or os.path.exists(arg)):
        name, path = arg.split("=", 1)
        if _NAME.fullmatch(name) and path:
            return name, path
    return None, arg


#: a dump file as listed: (file, location name, named) (:func:`list_dump_inputs`)
DumpInput = tuple[str, str | None, bool]


def list_dump_inputs(paths: list[str]) -> list[DumpInput]:
    """(file, location name, named) of every dump file under ``paths``, in a fixed order (:func:`dump_listing`)."""
    return dump_listing(paths)[0]


def dump_listing(args: list[str]) -> tuple[list[DumpInput], int]:
    """(file, location name, named) of every regular, non-hidden dump file under the ``--dump-log`` values
    ``args``, in a fixed order, and their bytes (a remote file's are not looked up: such an input counts as
    unbounded); or a one-line UsageError: a path that is not there, nothing found.

    The location name is the replica the file's place says it holds (README, kafka-dump-log.sh):
    ``NAME=PATH`` → NAME (``named``); a file under a directory given → the first directory below
    it (``dumps/`` holding ``broker-1/*.txt``), or, lying directly in it, the directory's own name
    (``--dump-log dumps/broker-1/``); a file given directly → None (the printed path decides).
    Hidden files and directories are skipped; a file listed twice is read once.
    """
    if not args:
        return [], 0
    found: list[DumpInput] = []
    seen: set[str] = set()
    try:
        for arg in args:
            name, p = split_dump_arg(arg)
            if not storage.exists(p):
                raise UsageError(
                    f"--dump-log {arg}: {storage.missing_reason(p)}; "
                    "give kafka-dump-log.sh output files or a directory of them"
                )
            listed = _files_under(p, name) if storage.isdir(p) else [(p, name)]
            for f, loc in listed:
                if f not in seen:
                    seen.add(f)
                    found.append((f, loc, name is not None))
        size = sum(sys.maxsize if storage.is_remote(f) else os.path.getsize(storage.local_path(f)) for f, _, _ in found)
    except storage.StorageError as e:
        raise UsageError(f"--dump-log {e}") from e
    if not found:
        raise UsageError(
            f"--dump-log {', '.join(args)}: no files found; give kafka-dump-log.sh output files or a directory of them"
        )
    return found, size


def _files_under(p: str, name: str | None) -> Iterator[tuple[str, str | None]]:
    """(file, location name) of the non-hidden files under the directory ``p`` (:func:`dump_listing`)."""
    root = storage.abspath(p)
    own = storage.basename(root) or None
    for dirpath, dirs, names in storage.walk(p):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            if n.startswith("."):
                continue
            f = storage.join(dirpath, n)
            if storage.is_remote(f):
                rel = f[len(root) :].strip("/").split("/")
            else:
                rel = os.path.relpath(os.path.abspath(f), root).split(os.sep)
            yield f, name or (rel[0] if len(rel) > 1 else own)


def _prefix_mask(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray, prefix: bytes) -> np.ndarray:
    """Lines (given by starts/lens into ``arr``) that begin with ``prefix``; vectorized."""
    k = len(prefix)
    ok = lens >= k
    if not ok.any() or arr.size == 0:
        return ok
    idx = np.minimum(starts[:, None] + np.arange(k), arr.size - 1)
    return ok & (arr[idx] == np.frombuffer(prefix, np.uint8)).all(axis=1)


def iter_line_batches(
    path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES, loc: str | None = None, loc_named: bool = False
) -> Iterator[pa.RecordBatch]:
    """``DUMP_LINES_SCHEMA`` batches of one dump file, read ``chunk_bytes`` at a time."""
    line_no = 0
    section = 0
    header: str | None = None
    prev_batch = False
    carry = b""
    with storage.open_input(path) as f:  # local paths with open(); s3a://, hdfs://, ... through pyarrow.fs
        while True:
            data = f.read(chunk_bytes)
            eof = not data
            buf = carry + data if carry else data
            arr = np.frombuffer(buf, np.uint8)
            nl = np.flatnonzero(arr == 10)
            if eof:
                ends = np.append(nl, arr.size) if arr.size and (nl.size == 0 or nl[-1] != arr.size - 1) else nl
                carry = b""
            else:
                if nl.size == 0:
                    carry = buf
                    continue
                ends = nl
                carry = buf[nl[-1] + 1 :]
            n = ends.size
            if n:
                starts = np.empty(n, np.int64)
                starts[0] = 0
                starts[1:] = ends[:-1] + 1
                lens = ends - starts
                # strip one trailing \r (CRLF dumps)
                cr = (lens > 0) & (arr[np.maximum(ends - 1, 0)] == 13)
                lens = lens - cr
                keep = np.zeros(arr.size + 1, np.int32)
                np.add.at(keep, starts, 1)
                np.add.at(keep, starts + lens, -1)
                mask = np.cumsum(keep[:-1]) > 0
                data_buf = arr[mask]
                offsets = np.zeros(n + 1, np.int64)
                np.cumsum(lens, out=offsets[1:])
                lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data_buf)).cast(
                    pa.string()
                )
                numbers = np.arange(line_no + 1, line_no + n + 1, dtype=np.int64)
                dumping = _prefix_mask(arr, starts, lens, b"Dumping ")
                is_batch = _prefix_mask(arr, starts, lens, b"baseOffset: ")
                after = np.empty(n, bool)
                after[0] = prev_batch
                after[1:] = is_batch[:-1]
                prev_batch = bool(is_batch[-1])
                sec = np.maximum.accumulate(np.where(dumping, numbers, section))
                # header text: the latest Dumping line in this chunk, else the one carried in
                hdr_idx = np.maximum.accumulate(np.where(dumping, np.arange(n), -1))
                carried = pa.array([header], pa.string())
                pool = pa.concat_arrays([lines, carried])
                headers = pool.take(pa.array(np.where(hdr_idx >= 0, hdr_idx, n)))
                if dumping.any():
                    header = lines[int(np.flatnonzero(dumping)[-1])].as_py()
                section = int(sec[-1])
                line_no += n
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([path] * n, pa.string()),
                        pa.array(numbers),
                        lines,
                        pa.array(sec),
                        headers,
                        pa.array(after),
                        pa.array([loc] * n, pa.string()),
                        pa.array([loc_named] * n, pa.bool_()),
                    ],
                    schema=DUMP_LINES_SCHEMA,
                )
            if eof:
                return


def dumping_lines(
    path: str, loc: str | None = None, loc_named: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> pa.RecordBatch:
    """The ``Dumping <path>`` lines of one dump file alone, as ``DUMP_LINES_SCHEMA`` rows, each its own section
    (``line_no`` and ``section`` number them in the file's order, not by its lines): the few lines that name the
    file's replicas, found by a byte search without splitting the other lines (a trailing ``\\r`` stripped, as
    :func:`iter_line_batches` does)."""
    found: list[bytes] = []
    carry = b""
    with storage.open_input(path) as f:
        while True:
            data = f.read(chunk_bytes)
            buf = carry + data if carry else data
            end = len(buf) if not data else buf.rfind(b"\n") + 1  # whole lines only, until the file ends
            if data and end == 0:
                carry = buf
                continue
            starts = [0] if buf.startswith(b"Dumping ") else []  # buf begins at a line's start
            at = buf.find(b"\nDumping ", 0, end)
            while at >= 0:
                starts.append(at + 1)
                at = buf.find(b"\nDumping ", at + 1, end)
            for at in starts:
                stop = buf.find(b"\n", at, end)
                line = buf[at : end if stop < 0 else stop]
                found.append(line[:-1] if line.endswith(b"\r") else line)
            if not data:
                break
            carry = buf[end:]
    n = len(found)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(x) for x in found], out=offsets[1:])
    lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b"".join(found))).cast(pa.string())
    numbers = pa.array(np.arange(1, n + 1, dtype=np.int64))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([path] * n, pa.string()),
            numbers,
            lines,
            numbers,
            lines,
            pa.array(np.zeros(n, bool)),
            pa.array([loc] * n, pa.string()),
            pa.array([loc_named] * n, pa.bool_()),
        ],
        schema=DUMP_LINES_SCHEMA,
    )
