"""How this package compiles its per-batch loops (numba ``@njit``).

Every walk over batches or records is compiled: a Python loop per batch is
~20x slower than the disk (FEASIBILITY.md §6). Compiled functions are cached
on disk (``cache=True``) so that a Spark worker pays the JIT once per machine,
not once per task — but only where numba can cache:

* the source must be a real file (not inside a zip shipped with ``--py-files``:
  numba has no cache locator for those and refuses to cache);
* every function that (transitively) calls the CRC must agree on the CRC
  backend, because numba's cache is keyed by source file, not by the globals a
  function closed over. Only the ``external`` backend is cached (see
  :mod:`txnlog.kafka.crc`); the fallbacks compile afresh in each process.

numba checks only the timestamp of the file that defines a cached function,
not of the modules it calls or the constants it froze (``wire.py``). In a
working tree where one module changes and another does not, that would load
stale machine code, so :func:`_drop_stale_caches` wipes this package's cache
files whenever any of its sources changed. (An installed wheel rewrites every
file on upgrade, so numba's own check suffices there.)
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: numba can place a cache next to (or, if read-only, in a user-wide dir for) real source files only.
SOURCE_IS_FILE = os.path.isfile(__file__)
_STAMP_NAME = "txnlog-kafka-jit.stamp"


def _sources_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(_PACKAGE_DIR, "*.py"))):
        st = os.stat(path)
        digest.update(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


def _drop_stale_caches() -> None:
    cache_dir = os.path.join(_PACKAGE_DIR, "__pycache__")
    stamp = os.path.join(cache_dir, _STAMP_NAME)
    try:
        fingerprint = _sources_fingerprint()
        try:
            with open(stamp, encoding="ascii") as f:
                if f.read() == fingerprint:
                    return
        except FileNotFoundError:
            pass
        for path in glob.glob(os.path.join(cache_dir, "*.nbi")) + glob.glob(os.path.join(cache_dir, "*.nbc")):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass  # another process got there first
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{stamp}.{os.getpid()}"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(fingerprint)
        os.replace(tmp, stamp)
    except OSError:
        pass  # read-only install: numba falls back to its user-wide cache, keyed per file


if SOURCE_IS_FILE:
    _drop_stale_caches()


def jit(*, cacheable: bool = True, inline: bool = False) -> Callable[[F], F]:
    """``numba.njit`` with this package's policy: nogil, cached when possible.

    ``inline=True`` inlines the function into its callers at numba IR level (for the
    tiny readers on the per-batch hot path, where a call costs as much as the work).
    """

    def wrap(fn: F) -> F:
        return numba.njit(  # type: ignore[no-any-return]
            cache=cacheable and SOURCE_IS_FILE, nogil=True, inline="always" if inline else "never"
        )(fn)

    return wrap
