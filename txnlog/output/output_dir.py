"""What a run keeps under the output besides its tables: the write lock that makes two runs into one output
write in turn, and the run's scratch directory for intermediate files.
"""

from __future__ import annotations

import fcntl
import os
import posixpath
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from txnlog.model.errors import UsageError
from txnlog.output.delta_base import Location, delete_dir

#: the lock file under a local output while a run writes its tables (see :func:`output_lock`)
LOCK_FILE = "_txnlog_write.lock"


class OutputBusy(UsageError):
    """Another run held the output's write lock for longer than the wait allows (exit code 3)."""

    exit_code = 3


@contextmanager
def output_lock(
    output: str, run_id: str, *, wait_s: float, progress: Any = None, poll_s: float = 1.0
) -> Iterator[None]:
    """Hold the output's write lock while a run writes its tables, so two runs into one output write in
    turn, never interleaved (two first runs of one (cluster, as_of) would otherwise both append).

    A local output (a path or ``file://``) is locked with ``flock`` on ``<output>/_txnlog_write.lock``:
    the kernel releases it when the holder exits, however it exits (a killed driver leaves no stale
    lock). The file names the holder (run id, host, pid, since) for the one line a waiting run prints.
    A run that cannot take the lock within ``wait_s`` seconds raises :class:`OutputBusy`, having written
    nothing. An output on object storage is not locked here: Delta's optimistic concurrency rejects a
    commit whose files another commit removed, but two first runs of one (cluster, as_of) racing there
    could both append, so schedule one run per output at a time (README, "Running it every night").
    """

    location = Location.of(output)
    if not isinstance(location.fs, pafs.LocalFileSystem):
        yield
        return
    Path(location.fs_path).mkdir(parents=True, exist_ok=True)
    path = os.path.join(location.fs_path, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, told = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _lock_holder(path)
                if time.monotonic() >= deadline:
                    raise OutputBusy(
                        f"{output}: another run is writing this output ({holder}) and did not finish within "
                        f"{wait_s:g} s (write_lock_wait_s); wait for it, or give this run another --output"
                    ) from None
                if not told and progress is not None:
                    progress(f"waiting for the run writing {output} to finish ({holder})")
                    told = True
                time.sleep(poll_s)
        since = datetime.now(UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"run {run_id} on {socket.gethostname()} pid {os.getpid()} since {since}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_holder(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or "holder unknown"
    except OSError:
        return "holder unknown"


@contextmanager
def scratch(output: str, name: str) -> Iterator[str]:
    """A directory for one run's intermediate files under the output (``_txnlog_scratch/<name>``, where
    executors can write when the output is shared storage); deleted on every exit."""
    location = Location.of(output).child(SCRATCH_DIR).child(name)
    try:
        yield location.uri
    finally:
        delete_dir(location.fs, location.fs_path)
        parent = posixpath.dirname(location.fs_path)
        try:
            if not location.fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True)):
                location.fs.delete_dir(parent)  # the last run's scratch: leave the output as it was
        except OSError:  # another run's scratch appeared meanwhile: keep it
            pass


#: where runs keep intermediate files under the output (never a table: no ``_delta_log``)
SCRATCH_DIR = "_txnlog_scratch"
