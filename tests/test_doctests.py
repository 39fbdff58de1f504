"""The examples in txnlog's docstrings run and show what they say (a stale example misleads the reader it is for).
Examples that need a segment file or a Spark session are marked ``+SKIP`` where they stand."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import txnlog

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(m.name for m in pkgutil.walk_packages(txnlog.__path__, "txnlog.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_hold(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples name files relative to the repository (conf/default.yaml)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, (
        f"{name}: {result.failed} of {result.attempted} examples fail; run pytest --doctest-modules on it"
    )
