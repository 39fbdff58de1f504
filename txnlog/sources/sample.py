"""The embedded sample cluster: what the job analyses when given no input.

Written once by the broker-log writer (``txnlog.brokerlog``) into a cache
directory and reused: healthy traffic plus every verdict class of docs/design.md §4.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from txnlog import __version__

SAMPLE_SEED = 20261122


def cache_root() -> Path:
    """``$TXNLOG_CACHE``, else ``$XDG_CACHE_HOME/txnlog``, else ``~/.cache/txnlog``."""
    if os.environ.get("TXNLOG_CACHE"):
        return Path(os.environ["TXNLOG_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "txnlog"


def _writer_fingerprint() -> str:
    """Short hash of the writer's sources: a changed writer writes a new sample."""

    # Lazy in this module: the broker-log writer loads only when a run uses the sample.
    import txnlog.brokerlog as brokerlog

    h = hashlib.sha256()
    for path in sorted(Path(brokerlog.__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:10]


def sample_logs(*, root: Path | None = None, progress: Callable[[str], None] | None = None) -> str:
    """Path of the sample cluster's log dirs, writing it first if needed (atomic, idempotent)."""

    root = root or cache_root()
    target = root / f"sample-{__version__}-seed{SAMPLE_SEED}-{_writer_fingerprint()}"
    if (target / ".complete").exists():
        return str(target / "logs")
    root.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(f"writing the embedded sample cluster to {target} (first run only)")
    from txnlog.brokerlog.scenarios import write_scenario

    tmp = Path(tempfile.mkdtemp(prefix=".sample-", dir=root))
    try:
        write_scenario("sample", tmp / "logs", seed=SAMPLE_SEED)
        (tmp / ".complete").write_text(__version__)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race: use its copy
            if not (target / ".complete").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target / "logs")
