#!/usr/bin/env python
"""The path one run takes through txnlog's modules: how often it moves between them and comes back.

Runs the job on the embedded sample cluster in this process, the driver placement (``txnlog.pipeline.run``
without a Spark session, as ``./spark-submit.sh`` with no arguments decides for that small input), under
``sys.setprofile`` (and ``threading.setprofile`` for the decode's threads). Every call from a function of one
txnlog module into a function of another is a *move*; calls through other libraries (pyarrow, the thread pool)
count from the nearest txnlog frame below them. A move is named by the calling function and the module it
enters, and counts once however often and at however many lines that function calls into that module: the
figures describe the code's shape (which function reaches into which module), not the input's size.

Printed, in the order the run first takes them:

* modules entered: the distinct txnlog modules the run's calls enter (the entry module counted);
* moves: the distinct moves;
* come back: the moves into a module the path had already entered and left (a caller dipping into the same
  helper module at several separate points, or a helper calling back up into its caller's module); and, on
  its own line, how many of them enter ``model/``: the bottom layer's shared vocabulary (the Arrow helpers, the
  rows, the contract, times), which every layer uses and which calls nothing back, so a come back there is
  a word used again rather than a trip back up. The headline counts them all;
* climb back: the moves into a module still on the call stack below the caller (a helper calling back up into
  a module that called it: A → B → A);
* the module pairs with the most moves between them, both directions together ("back-and-forth").

Module-level code (imports) is not followed: every txnlog module is imported, the decoders compiled
(``txnlog.pipeline.warm_decoders``: numba's cache, so a fresh checkout does not compile them under the profiler)
and the sample written before the trace starts. The thread pool's order can move a come-back between pairs from one run to the next; the totals
vary by a move or two at most.

    python benchmarks/walk.py            # the figures and the top pairs
    python benchmarks/walk.py --path     # and the whole path, one move a line
"""

from __future__ import annotations

import argparse
import collections
import importlib
import pkgutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import txnlog

PACKAGE = "txnlog."
MODEL = PACKAGE + "model."


@dataclass
class Walk:
    """The distinct moves of one traced call, in the order they first happened."""

    entry: str
    moves: list[tuple[str, str, str, str]] = field(default_factory=list)  # caller module, caller, callee module, callee
    climbs: set[int] = field(default_factory=set)  # the indexes in ``moves`` of the climbs back
    _seen: set[tuple[str, str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    into_model: int = 0  # of the come backs, those into model/ (set by :meth:`figures`)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith(PACKAGE) or frame.f_code.co_name == "<module>":
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith(PACKAGE):
            caller = caller.f_back
        if caller is None or caller.f_code.co_name == "<module>":
            return  # a thread's first txnlog frame (its submitter is another thread's) or import-time code
        source = caller.f_globals["__name__"]
        if source == callee:
            return
        key = (caller.f_code.co_filename, caller.f_code.co_qualname, callee)
        with self._lock:
            if key not in self._seen:
                self._seen.add(key)
                if _on_stack(caller.f_back, callee):
                    self.climbs.add(len(self.moves))
                self.moves.append((source, caller.f_code.co_qualname, callee, frame.f_code.co_qualname))

    def figures(self) -> tuple[int, int, int, int, list[tuple[tuple[str, str], int]]]:
        """(modules entered, moves, come back, climb back, module pairs by moves between them)."""
        entered = {self.entry}
        come_back = into_model = 0
        pairs: collections.Counter[tuple[str, str]] = collections.Counter()
        for source, _, callee, _ in self.moves:
            if callee in entered:
                come_back += 1
                into_model += callee.startswith(MODEL)
            entered.add(callee)
            pairs[tuple(sorted((source, callee)))] += 1  # type: ignore[index]
        self.into_model = into_model
        return len(entered), len(self.moves), come_back, len(self.climbs), pairs.most_common()


def _on_stack(frame: FrameType | None, module: str) -> bool:
    while frame is not None:
        if frame.f_globals.get("__name__") == module:
            return True
        frame = frame.f_back
    return False


def trace(entry: str, call: Callable[[], object]) -> Walk:
    """``call()`` under the profiler, its moves recorded from module ``entry``."""
    walk = Walk(entry)
    threading.setprofile(walk.profile)
    sys.setprofile(walk.profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return walk


def import_all() -> None:
    """Every txnlog module imported, so that the trace follows calls and not module-level code."""
    for info in pkgutil.walk_packages(txnlog.__path__, PACKAGE):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency absent (the trace simply never enters that module)
            pass


def short(module: str) -> str:
    return module.removeprefix(PACKAGE).replace(".", "/") + ".py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", action="store_true", help="print every move, in order")
    parser.add_argument("--top", type=int, default=15, help="how many module pairs to list (default 15)")
    args = parser.parse_args(argv)

    import_all()
    from txnlog.model.config import load_config
    from txnlog.pipeline import run, warm_decoders
    from txnlog.sources.sample import sample_logs

    warm_decoders()  # compiled once, outside the trace
    sample_logs()  # written once, outside the trace
    with tempfile.TemporaryDirectory(prefix="txnlog-walk-") as out:
        config = load_config(None, {"output": out, "progress": False})
        walk = trace("txnlog.pipeline.run", lambda: run(config, progress=lambda _line: None))

    entered, moves, come_back, climbs, pairs = walk.figures()
    if args.path:
        seen = {walk.entry}
        for i, (source, caller, callee, name) in enumerate(walk.moves):
            mark = ("  (climb back)" if i in walk.climbs else "  (come back)") if callee in seen else ""
            seen.add(callee)
            print(f"{short(source)}::{caller} -> {short(callee)}::{name}{mark}")
        print()
    print("entry: txnlog/pipeline/run.py::run on the embedded sample, the driver placement")
    print(f"modules entered: {entered}")
    print(f"moves: {moves}")
    print(f"come back: {come_back} ({walk.into_model} of them into model/, the shared vocabulary)")
    print(f"climb back: {climbs}")
    print("back-and-forth (moves between two modules, both directions):")
    for (a, b), n in pairs[: args.top]:
        print(f"  {n:4d}  {short(a)} <-> {short(b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
