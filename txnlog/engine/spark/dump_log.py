"""``--dump-log``: read ``kafka-dump-log.sh`` text into the same rows as the binary sources.

This module holds the plan that joins the steps (:func:`read_dump_logs`; the Data Source is
txnlog.engine.spark.dump_log_source); the steps
themselves are txnlog.sources.dump_log.lines, parse, assemble and rows, the same functions in both placements
(txnlog.engine.spark.placement):

1. **Lines**: one dump file read in chunks and split on ``\\n`` with numpy (no loop per line). Each line gets
   its true 1-based line number, plus two pieces of *context* that only a sequential reader can give
   cheaply: the ``Dumping <path>`` line that governs it (``section``/``section_header``) and whether the
   previous line is a batch line (``after_batch``).
2. **Parse**, chunk by chunk (``parse_lines``): each line's kind and typed fields (``PARSED_SCHEMA``) with
   ``pyarrow.compute`` - the patterns of ``txnlog.kafka.dump_log_text`` in RE2 form, token positions,
   Spark's ``try_cast`` rules, ``pyarrow.json`` for the 4.x JSON decoder output.
3. **Assemble** each dumped segment as soon as its lines are read (``file_rows``), the segments a chunk of text
   completes all at once (txnlog.engine.dump_log.assemble_many): the batch lines of each segment (and the few
   record lines needed: control markers and each batch's first record) become ``BATCH_COLUMNS`` arrays, and
   ``txnlog.broker.reconstruct.files_fragments`` - the function the segment reader uses for many segments -
   turns them into run/marker fragments. ``__transaction_state`` record lines get their batch's
   partitionLeaderEpoch the same way.

A dumped segment's lines never leave their file, so each reading task makes the rows of whole files: no
line crosses the JVM and nothing is shuffled. Only the replica names need the whole input: in the driver the one
pass over the files (output ``both``: txnlog.engine.dump_log.rows.BOTH_SCHEMA) gives each file's rows of both
sources with the broker as printed and its "Dumping" lines beside them, and the rows are renamed once those lines
name the replicas (txnlog.engine.dump_log.rows.named_outputs). Spark's read names them before it starts: the
driver finds each file's "Dumping" lines by a byte search (txnlog.engine.dump_log.names.listed_names, ~2 GB/s,
nothing else of a file parsed), ``replica_names`` names every (dump file, printed broker) from them, and the reading
tasks get the names and make named rows, the segment source's rows from every file and the txn-state source's from
the files that dump a ``__transaction_state`` segment: no pass is cached and nothing is joined.

What the text cannot give (documented, not guessed):

* without deep iteration a control batch's type and coordinator epoch are not
  printed: it still closes the producer's transaction (on a data partition only
  ABORT/COMMIT exist), with ``control_type`` -1 and ``coordinator_epoch`` -1;
* a batch's *base* timestamp is not printed: it is the first record's timestamp
  with deep iteration (exact for CreateTime), else the batch's max timestamp;
* the 3.x ``--transaction-log-decoder`` form shows no start timestamp, value
  version or tagged fields: those columns are null.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.engine.dump_log.names import listed_names
from txnlog.engine.dump_log.rows import BOTH, BOTH_SCHEMA, RECORDS, SUMMARY, named_outputs
from txnlog.engine.spark.dump_log_source import (
    DUMP_ROWS_SOURCE,
    dump_groups,
    located,
    options_of,
    register_dump_log_source,
)
from txnlog.engine.tasks import Task, dump_rows_task, run_here
from txnlog.sources.dump_log.lines import DEFAULT_CHUNK_BYTES, DumpInput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class DumpLogFrames:
    """What :func:`read_dump_logs` returns: the segment-source and txn-state-source shaped rows."""

    summary: DataFrame  # SEGMENT_SUMMARY_SCHEMA
    records: DataFrame  # TXN_STATE_SCHEMA
    files: list[str]


def _cores(spark: SparkSession) -> int:
    """The cores Spark's tasks share (its default parallelism), 1 where the session does not say (Spark Connect)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # a session without a SparkContext here
        return 1


def read_dump_logs_here(inputs: Sequence[DumpInput], threads: int = 1) -> tuple[pa.Table, pa.Table]:
    """``read_dump_logs(spark, inputs)`` in this process: (summary, records) as Arrow tables of
    SEGMENT_SUMMARY_SCHEMA and TXN_STATE_SCHEMA, ``broker`` the replica name. ``threads`` threads run the tasks of
    the one pass (txnlog.engine.tasks.run_here: the rows are those one thread gives)."""
    options = options_of(inputs, threads)
    locations = json.loads(options["locations"])
    tasks: list[Task] = [
        partial(dump_rows_task, located(group, locations), {}, BOTH, DEFAULT_CHUNK_BYTES)
        for group in dump_groups(json.loads(options["paths"]), threads)
    ]
    (rows,) = run_here([(tasks, BOTH_SCHEMA)], threads)
    return named_outputs(rows)


def read_dump_logs(spark: SparkSession, inputs: Sequence[DumpInput]) -> DumpLogFrames:
    """``kafka-dump-log.sh`` outputs ``inputs`` → the rows of the segment and txn-state sources.

    ``inputs`` are the dump files as listed from the ``--dump-log`` values (``PATH`` or ``NAME=PATH``:
    txnlog.sources.dump_log.lines.list_dump_inputs, which txnlog.sources.offline.resolve calls once). ``summary`` has
    SEGMENT_SUMMARY_SCHEMA (run/marker/segment/snapshot/quarantine), ``records`` has
    TXN_STATE_SCHEMA (record/quarantine, plus one ``segment`` row per dumped
    ``__transaction_state`` segment: the coordinator partitions the dumps hold). ``file`` of a
    fragment is the dumped segment's path as printed. Damage the dump shows in a segment
    (``isvalid: false``, invalid bytes at the end, ``...`` elisions, the tool's exceptions) is
    quarantined by that segment's path and byte position, the dump file and line in ``detail``;
    a line no format knows is quarantined by the dump file and its line number (``length`` 1).
    ``broker`` is the replica name (txnlog.engine.dump_log.names.replica_names), decided here from the files'
    "Dumping" lines alone (txnlog.engine.dump_log.names.listed_names) and given to the reading tasks, which name
    the rows they make: nothing is cached or joined. ``summary`` reads every file, ``records`` the files that dump
    a ``__transaction_state`` segment. A small input is read in the driver by :func:`read_dump_logs_here`
    instead, with the same task function.
    """
    cores = _cores(spark)
    names, coordinator_files = listed_names(inputs)
    coordinator = set(coordinator_files)
    register_dump_log_source(spark)
    named = json.dumps([[f, b, n] for (f, b), n in names.items()])
    frames = []
    for output, files in ((SUMMARY, inputs), (RECORDS, [i for i in inputs if i[0] in coordinator])):
        options = options_of(files, cores)
        frames.append(spark.read.format(DUMP_ROWS_SOURCE).options(**options, output=output, names=named).load())
    return DumpLogFrames(summary=frames[0], records=frames[1], files=[f for f, _, _ in inputs])
