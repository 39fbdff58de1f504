"""The local placement's walk over every ``__consumer_offsets`` record, started in the background beside the decode
(txnlog.engine.tasks.OffsetsJobs.indexed_now): the rows are those of the tasks run when asked, whether the background
thread walked a partition first or the request took its walk back."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from txnlog.brokerlog.consumer_offsets import write_every_kind
from txnlog.engine.consumer_offsets import index_partitions
from txnlog.engine.settings import Decode
from txnlog.engine.tasks import OffsetsJobs, _Walk, run_here
from txnlog.sources.logdirs import discover

WANTED = [None, [("orders", 0)], [("nothing", 9)]]


def _tasks(tmp_path) -> list[list]:
    for partition in (0, 1, 2):
        write_every_kind(tmp_path / "broker-1", partition)
    files = discover([str(tmp_path / "broker-1")]).consumer_offsets_segments
    return [[f for f in files if f.partition in (0, 1)], [f for f in files if f.partition == 2]]


def _rows(jobs) -> list[dict]:
    (table,) = run_here(jobs, threads=2)
    return sorted(table.to_pylist(), key=repr)


def test_rows_of_the_background_walk_are_the_tasks_rows(tmp_path):
    jobs = OffsetsJobs(_tasks(tmp_path), Decode())
    picked = jobs.indexed_now()
    for wanted in WANTED:
        assert _rows(picked(wanted)) == _rows(jobs(wanted))


def test_a_walk_not_begun_is_taken_back_and_kept(tmp_path):
    files = _tasks(tmp_path)[1]
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(gate.wait)  # the background thread busy: the walk below waits in its queue
        walk = _Walk(pool, files, Decode())
        taken = walk.indexed()
        assert walk._future.cancelled()
        assert walk.indexed() is taken  # a later request does not walk again
        gate.set()
    again = index_partitions([files], True, None)
    assert [ix.files for ix in taken] == [ix.files for ix in again]
    assert [len(ix.segments) for ix in taken] == [len(ix.segments) for ix in again]
