"""A transactional producer killed mid-transaction: the live tests' way to leave a transaction open."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys


def run_and_kill(script: str, *args: str) -> dict[int, list[int]]:
    """Run a producer ``script`` (``python -c``) with ``args``; once it prints its report line — a JSON list of
    ``[partition, offset, error]`` for what it flushed — SIGKILL it, so its transaction stays open.

    Returns partition → the offsets it wrote. Fails with the producer's exit code and stderr if it never reports.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        if not line:
            stderr = proc.stderr.read() if proc.poll() is not None else ""
            raise AssertionError(f"killed producer did not report: rc={proc.poll()} {stderr}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    out: dict[int, list[int]] = {}
    for partition, offset, err in json.loads(line):
        assert err is None, err
        out.setdefault(partition, []).append(offset)
    return out
