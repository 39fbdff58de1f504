"""``--dump-log``: read ``kafka-dump-log.sh`` text into the same rows as the binary sources.

This module holds the Data Source and the Spark plan that joins the steps (:func:`read_dump_logs`); the
steps themselves are txnlog.dump_log.lines, parse and assemble. Three steps:

1. **Lines** (``txnlog_dump_lines``, a Python Data Source): one input partition per
   dump file, read in chunks and split on ``\\n`` with numpy (no loop per line).
   Each line gets its true 1-based line number, plus two pieces of *context* that
   only a sequential reader can give cheaply: the ``Dumping <path>`` line that
   governs it (``section``/``section_header``) and whether the previous line is a
   batch line (``after_batch``). Detecting those is a fixed-prefix byte compare,
   vectorized.
2. **Parse**, in the same reader, chunk by chunk (:func:`parse_lines`): each line's
   kind and typed fields (``PARSED_SCHEMA``: batch, record, snapshot and
   ``__transaction_state`` fields, what the path says, the quarantine reason) with
   ``pyarrow.compute`` - the patterns of ``txnlog.kafka.dump_log_text`` in RE2 form,
   token positions, Spark's ``try_cast`` rules, ``pyarrow.json`` for the 4.x JSON
   decoder output. The reader is the same function in both placements
   (txnlog.spark.placement), so Spark plans no regular expression.
3. **Assemble** per dumped segment (txnlog.dump_log.rows, the same functions in
   both placements; Spark groups each segment's lines with ``groupBy(file, section)``):
   the batch lines of one segment (and the few record lines needed: control
   markers and each batch's first record) become ``BATCH_COLUMNS`` arrays, and
   ``txnlog.reconstruct.segment_fragments`` - the function the segment reader
   uses - turns them into run/marker fragments. ``__transaction_state`` record
   lines get their batch's partitionLeaderEpoch the same way. The replicas are
   named from the "Dumping" lines (``txnlog.dump_log.rows.replica_names``).

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
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog import storage
from txnlog.dump_log.lines import DEFAULT_CHUNK_BYTES, iter_line_batches, list_dump_inputs, split_dump_arg
from txnlog.dump_log.parse import (
    K_DUMPING,
    PARSED_SCHEMA,
    parse_lines,
)
from txnlog.dump_log.rows import (
    RECORD_LINE_COLUMNS,
    SUMMARY_LINE_COLUMNS,
    record_lines,
    record_rows,
    replica_names,
    summary_lines,
    summary_rows,
)
from txnlog.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA
from txnlog.spark.placement import read_here
from txnlog.spark.sources import arrow_to_spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DUMP_LINES_SOURCE = "txnlog_dump_lines"


@dataclass
class DumpLogFrames:
    """What :func:`read_dump_logs` returns: the segment-source and txn-state-source shaped rows."""

    summary: DataFrame  # SEGMENT_SUMMARY_SCHEMA
    records: DataFrame  # TXN_STATE_SCHEMA
    files: list[str]


def list_dump_files(paths: list[str]) -> list[str]:
    """Every regular, non-hidden file under ``paths`` (``NAME=PATH`` accepted; files as given)."""
    return [f for f, _loc, _named in list_dump_inputs(paths)]


def dump_arg_path(arg: str) -> str:
    """The path part of a ``--dump-log`` value (``NAME=PATH`` → PATH)."""
    return split_dump_arg(arg)[1]


class _DumpFilePartition(InputPartition):
    """Some dump files read by one task (small files packed together; a file is never split)."""

    def __init__(self, paths: list[str]):
        super().__init__(paths)


class _DumpLinesReader(DataSourceReader):
    def __init__(self, options: dict[str, str]):
        self.paths = json.loads(options.get("paths", "[]"))
        self.locations = json.loads(options.get("locations", "{}"))  # file → [loc, named]
        self.chunk_bytes = int(options.get("chunk_bytes", DEFAULT_CHUNK_BYTES))
        self.options = options

    def partitions(self) -> list[InputPartition]:
        target = int(self.options.get("target_partition_bytes", 64 * 2**20))
        groups: list[list[str]] = []
        size = 0
        for p in self.paths:
            try:
                n = os.path.getsize(p) if "://" not in p else target
            except OSError:
                n = 0
            if not groups or size + n > target:
                groups.append([])
                size = 0
            groups[-1].append(p)
            size += n
        return [_DumpFilePartition(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        storage.configure_from_options(self.options)
        for path in partition.value:
            loc, named = self.locations.get(path, (None, False))
            for batch in iter_line_batches(path, self.chunk_bytes, loc, bool(named)):
                yield parse_lines(batch)


class DumpLinesSource(DataSource):
    """``spark.read.format("txnlog_dump_lines").option("paths", json.dumps([...])).load()``: the
    parsed lines (``PARSED_SCHEMA``) of the dump files."""

    @classmethod
    def name(cls) -> str:
        return DUMP_LINES_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(PARSED_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _DumpLinesReader(dict(self.options))


# ============================================================================ the Spark plan


def register_dump_log_source(spark: SparkSession) -> None:
    spark.dataSource.register(DumpLinesSource)


#: what replica_names reads of the "Dumping" lines
_NAMING_COLUMNS = ("kind_code", "file", "loc", "loc_named", "broker", "dpath", "stem")


def _lines_of(rows: Any) -> Any:
    """A mapInArrow function applying ``rows`` (summary_lines or record_lines) to each batch of parsed lines."""

    def select(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from rows(pa.Table.from_batches([batch])).to_batches()

    return select


def read_dump_logs_here(paths: list[str]) -> tuple[pa.Table, pa.Table]:
    """``read_dump_logs(spark, paths)`` in this process: (summary, records) as Arrow tables of
    SEGMENT_SUMMARY_SCHEMA and TXN_STATE_SCHEMA, ``broker`` the replica name."""
    inputs = list_dump_inputs(paths)
    options = {
        "paths": json.dumps([f for f, _, _ in inputs]),
        "storage": storage.settings_option(),
        "locations": json.dumps({f: [loc, named] for f, loc, named in inputs}),
    }
    lines = read_here(DumpLinesSource, options, PARSED_SCHEMA)
    return summary_rows(lines, replica_names(lines)), record_rows(lines, replica_names(lines))


def read_dump_logs(spark: SparkSession, paths: list[str]) -> DumpLogFrames:
    """``kafka-dump-log.sh`` outputs under ``paths`` → the rows of the segment and txn-state sources.

    ``paths`` are ``--dump-log`` values (``PATH`` or ``NAME=PATH``). ``summary`` has
    SEGMENT_SUMMARY_SCHEMA (run/marker/segment/snapshot/quarantine), ``records`` has
    TXN_STATE_SCHEMA (record/quarantine, plus one ``segment`` row per dumped
    ``__transaction_state`` segment: the coordinator partitions the dumps hold). ``file`` of a
    fragment is the dumped segment's path as printed. Damage the dump shows in a segment
    (``isvalid: false``, invalid bytes at the end, ``...`` elisions, the tool's exceptions) is
    quarantined by that segment's path and byte position, the dump file and line in ``detail``;
    a line no format knows is quarantined by the dump file and its line number (``length`` 1).
    ``broker`` is the replica name (:func:`_replica_names`). A small input is read in the driver by
    :func:`read_dump_logs_here` instead, with the same functions.

    Spark filters the parsed lines in the reading tasks and groups each dumped segment's lines; the rows are
    made by the functions a small input's read calls (txnlog.dump_log.rows), with the replica names
    those give from the few "Dumping" lines, collected here.
    """

    inputs = list_dump_inputs(paths)
    files = [f for f, _, _ in inputs]
    options = {
        "paths": json.dumps(files),
        "storage": storage.settings_option(),
        "locations": json.dumps({f: [loc, named] for f, loc, named in inputs}),
    }
    register_dump_log_source(spark)
    lines = spark.read.format(DUMP_LINES_SOURCE).options(**options).load()
    names = replica_names(lines.filter(f"kind_code = {K_DUMPING}").select(*_NAMING_COLUMNS).distinct().toArrow())

    def segment_rows(group: pa.Table) -> pa.Table:  # typed: applyInArrow reads the hints
        return summary_rows(group, names)

    def txn_state_rows(group: pa.Table) -> pa.Table:
        return record_rows(group, names)

    groups = {}
    for name, rows, columns in (
        ("summary", summary_lines, SUMMARY_LINE_COLUMNS),
        ("records", record_lines, RECORD_LINE_COLUMNS),
    ):
        groups[name] = lines.mapInArrow(_lines_of(rows), lines.select(*columns).schema).groupBy("file", "section")
    summary = groups["summary"].applyInArrow(segment_rows, arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA))
    records = groups["records"].applyInArrow(txn_state_rows, arrow_to_spark_schema(TXN_STATE_SCHEMA))
    return DumpLogFrames(summary=summary, records=records, files=files)
