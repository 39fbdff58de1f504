"""How this package compiles its per-batch loops (numba ``@njit``).

Every walk over batches or records is compiled: a Python loop per batch is
far slower than the disk delivers them. Compiled functions are cached
on disk (``cache=True``) so that a Spark worker pays the JIT once per machine,
not once per task — but only where numba can cache:

* the source must be a real file (not inside a zip shipped with ``--py-files``:
  numba has no cache locator for those and refuses to cache);
* every function that (transitively) calls the CRC must agree on the CRC
  backend, because numba's cache is keyed by source file, not by the globals a
  function closed over. Only the ``external`` backend is cached (see
  :mod:`txnlog.kafka.crc`); the fallbacks compile afresh in each process.

numba checks only the source of the file that defines a cached function, not
the modules it calls or the constants it froze (``wire.py``, the reason codes
of ``errors.py``). In a working tree where one module changes and another does
not, that would load stale machine code, so :func:`_drop_stale_caches` wipes
this package's cache files whenever the source of a module that compiled code
can depend on changed: the modules that import this one, and every module of
this package they import, transitively (:func:`jit_dependencies`). Editing a
module no compiled code can see (``dump_log_render.py``, ``consumed.py``) keeps
the cache: recompiling costs every Spark worker that starts before the cache is
written again (benchmarks/RESULTS.md E3).

A cache is *warm* when every kernel the Spark readers call has been compiled
for the current sources; ``scripts/bootstrap.sh`` checks that with
``python txnlog/kafka/jit.py --is-warm`` (stdlib only: this file runs as a script
without importing numba) and otherwise runs
``txnlog.pipeline.warm_decoders`` once, which calls :func:`mark_warm`.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: numba can place a cache next to (or, if read-only, in a user-wide dir for) real source files only.
SOURCE_IS_FILE = os.path.isfile(__file__)
_STAMP_NAME = "txnlog-kafka-jit.stamp"
_WARM_NAME = "txnlog-kafka-jit.warm"
_THIS_MODULE = "jit"

# Module-level imports of this package's modules (indented, function-level imports are not
# module globals, so compiled code cannot see them): "from txnlog.kafka.x import ...",
# "from txnlog.kafka import x, y" (also parenthesised over several lines), "import txnlog.kafka.x".
_IMPORT = re.compile(
    r"^from[ \t]+txnlog\.kafka(?:\.(?P<module>\w+))?[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n]*)"
    r"|^import[ \t]+txnlog\.kafka\.(?P<plain>\w+)",
    re.MULTILINE,
)


def _sources() -> dict[str, bytes]:
    out = {}
    for path in glob.glob(os.path.join(_PACKAGE_DIR, "*.py")):
        with open(path, "rb") as f:
            out[os.path.basename(path)[:-3]] = f.read()
    return out


def _package_imports(name: str, source: bytes, modules: set[str]) -> set[str]:
    found: set[str] = set()
    for m in _IMPORT.finditer(source.decode("utf-8", errors="replace")):
        if m.group("plain"):
            found.add(m.group("plain"))
        elif m.group("module"):
            found.add(m.group("module"))
        else:  # from txnlog.kafka import a, b: submodules, or names defined in __init__
            for raw in re.split(r"[\s,()]+", m.group("names")):
                word = raw.split(" as ")[0].strip()
                if word and not word.startswith("#"):
                    found.add(word if word in modules else "__init__")
    found.discard(name)
    return found & modules


def jit_dependencies(sources: dict[str, bytes] | None = None) -> list[str]:
    """The modules of this package that compiled code can depend on, sorted.

    The modules that import this one (they define compiled functions), this one, and every module of
    this package those import, transitively: compiled code sees their constants frozen and their
    compiled functions inlined.

    >>> kernels = {"binary", "crc", "errors", "jit", "record_batch", "segment_files", "txn_state_scan", "wire"}
    >>> kernels <= set(jit_dependencies())
    True
    """
    sources = _sources() if sources is None else sources
    modules = set(sources)
    imports = {name: _package_imports(name, text, modules) for name, text in sources.items()}
    todo = [name for name, deps in imports.items() if _THIS_MODULE in deps] + [_THIS_MODULE]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        todo.extend(imports[name])
    return sorted(seen)


def sources_fingerprint() -> str:
    """Content hash of :func:`jit_dependencies` (not mtimes: a copy or a ``touch`` keeps the cache, as numba does)."""
    sources = _sources()
    digest = hashlib.sha256()
    for name in jit_dependencies(sources):
        digest.update(f"{name}:{len(sources[name])}:".encode())
        digest.update(sources[name])
    return digest.hexdigest()


def cache_dir() -> str:
    """Where numba caches this package's compiled functions (``NUMBA_CACHE_DIR`` or ``__pycache__``)."""
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if user_dir:  # numba's UserProvidedCacheLocator: <dir>/<parent dir name>_<sha1 of the source dir>
        return os.path.join(
            user_dir, "_".join([os.path.basename(_PACKAGE_DIR), hashlib.sha1(_PACKAGE_DIR.encode()).hexdigest()])
        )
    return os.path.join(_PACKAGE_DIR, "__pycache__")


def _runtime() -> str:
    """What else numba's cache depends on: the interpreter and numba's version (an upgrade invalidates it)."""
    try:
        numba_version = version("numba")
    except PackageNotFoundError:
        numba_version = "?"
    return f"python {sys.version.split()[0]} numba {numba_version}"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, path)


def _drop_stale_caches() -> None:
    directory = cache_dir()
    stamp = os.path.join(directory, _STAMP_NAME)
    try:
        fingerprint = sources_fingerprint()
        if _read(stamp) == fingerprint:
            return
        for path in glob.glob(os.path.join(directory, "*.nbi")) + glob.glob(os.path.join(directory, "*.nbc")):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass  # another process got there first
        _write_atomically(stamp, fingerprint)
    except OSError:
        pass  # read-only install: numba falls back to its user-wide cache, keyed per file


def is_warm() -> bool:
    """True when :func:`mark_warm` was called for the current sources, interpreter and numba."""
    return _read(os.path.join(cache_dir(), _WARM_NAME)) == f"{sources_fingerprint()} {_runtime()}"


def mark_warm(fingerprint: str) -> None:
    """Record that every kernel was compiled (and cached) for the sources whose fingerprint is given.

    Take the fingerprint *before* compiling: if a source changes meanwhile, the mark does not match.
    """
    try:
        _write_atomically(os.path.join(cache_dir(), _WARM_NAME), f"{fingerprint} {_runtime()}")
    except OSError:
        pass  # read-only install


def jit(*, cacheable: bool = True, inline: bool = False) -> Callable[[F], F]:
    """``numba.njit`` with this package's policy: nogil, cached when possible.

    ``inline=True`` inlines the function into its callers at numba IR level (for the
    tiny readers on the per-batch hot path, where a call costs as much as the work).
    """
    import numba  # deferred: this file also runs as a stdlib-only script (--is-warm)

    def wrap(fn: F) -> F:
        return numba.njit(  # type: ignore[return-value]  # a numba Dispatcher is called like the function it compiles
            cache=cacheable and SOURCE_IS_FILE, nogil=True, inline="always" if inline else "never"
        )(fn)

    return wrap


if __name__ == "__main__":
    # python txnlog/kafka/jit.py --is-warm | --dependencies  (scripts/bootstrap.sh; stdlib only, no numba import)
    if sys.argv[1:] == ["--is-warm"]:
        sys.exit(0 if is_warm() else 1)
    if sys.argv[1:] == ["--dependencies"]:
        print(" ".join(jit_dependencies()))
        sys.exit(0)
    print("usage: python txnlog/kafka/jit.py --is-warm | --dependencies", file=sys.stderr)
    sys.exit(2)
elif SOURCE_IS_FILE:
    _drop_stale_caches()
