"""The local placement's tasks on threads (txnlog.engine.tasks.run_here): the rows in the tasks' order whatever
thread ran them, no two big tasks at once while another is left, a task's error raised."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import pyarrow as pa
import pytest

from txnlog.engine.tasks import BigTask, run_here

SCHEMA = pa.schema([("n", pa.int64())])


class _Watch:
    """Counts the big tasks running at once."""

    def __init__(self) -> None:
        self.lock, self.running, self.most = threading.Lock(), 0, 0

    def task(self, n: int, big: bool, seconds: float) -> Callable[[], Iterable[pa.RecordBatch]]:
        def call() -> Iterable[pa.RecordBatch]:
            with self.lock:
                self.running += big
                self.most = max(self.most, self.running)
            time.sleep(seconds)
            with self.lock:
                self.running -= big
            return [pa.record_batch([pa.array([n], pa.int64())], schema=SCHEMA)]

        return BigTask(call) if big else call


def test_big_tasks_never_side_by_side_and_rows_in_order() -> None:
    watch = _Watch()
    # the big ones first, as a plan of the largest units first deals them
    kinds = [True, True, True, False, False, False, False, False, False]
    tasks = [watch.task(n, big, 0.02) for n, big in enumerate(kinds)]
    (table,) = run_here([(tasks, SCHEMA)], threads=2)
    assert table.column("n").to_pylist() == list(range(len(kinds)))
    assert watch.most == 1


def test_only_big_tasks_left_run_one_at_a_time() -> None:
    watch = _Watch()
    tasks = [watch.task(n, True, 0.01) for n in range(4)]
    (table,) = run_here([(tasks, SCHEMA)], threads=3)
    assert table.column("n").to_pylist() == [0, 1, 2, 3] and watch.most == 1


def test_a_task_that_fails_raises() -> None:
    def broken() -> Iterable[pa.RecordBatch]:
        raise OSError("gone")

    watch = _Watch()
    tasks = [watch.task(0, False, 0.01), BigTask(broken), watch.task(2, True, 0.01), watch.task(3, False, 0.01)]
    with pytest.raises(OSError, match="gone"):
        run_here([(tasks, SCHEMA)], threads=2)
