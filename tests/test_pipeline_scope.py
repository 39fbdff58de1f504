"""A run's scope for Python's cyclic collector (txnlog.pipeline.scope.collected_young): fewer young passes and the
run's long-lived objects frozen while it runs, the process's collector as it was afterwards."""

from __future__ import annotations

import gc

import pytest

from txnlog.pipeline.scope import YOUNG_OBJECTS, collected_young


def test_a_run_collects_less_often_and_leaves_the_collector_as_it_was() -> None:
    before = gc.get_threshold()
    gc.unfreeze()  # nothing frozen before the run (another test's process may have frozen objects)
    with collected_young() as keep:
        assert gc.get_threshold() == (YOUNG_OBJECTS, *before[1:])
        kept = [object() for _ in range(3)]
        keep()
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert kept


def test_a_failed_run_restores_it_too_and_an_earlier_freeze_stays() -> None:
    before = gc.get_threshold()
    gc.freeze()  # as a forked server does before its work
    try:
        frozen = gc.get_freeze_count()
        with pytest.raises(RuntimeError), collected_young() as keep:
            keep()
            raise RuntimeError("the run failed")
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
