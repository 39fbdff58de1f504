"""``--dump-log``: read ``kafka-dump-log.sh`` text into the same rows as the binary sources.

This module holds the Data Source and the Spark plan that joins the steps (:func:`read_dump_logs`); the
steps themselves are txnlog.spark.dump_log_lines, dump_log_parse and dump_log_assemble. Three steps:

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
   (txnlog.spark.placement), so Spark plans no regular expression: it only filters
   the typed lines, unions them and names the replicas (:func:`_replica_names`).
3. **Assemble** per dumped segment with ``groupBy(file, section).applyInArrow``:
   the batch lines of one segment (and the few record lines needed: control
   markers and each batch's first record) become ``BATCH_COLUMNS`` arrays, and
   ``txnlog.reconstruct.segment_fragments`` - the function the segment reader
   uses - turns them into run/marker fragments. ``__transaction_state`` record
   lines get their batch's partitionLeaderEpoch the same way.

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
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog import storage
from txnlog.kafka import dump_log_text as D
from txnlog.rows import KIND_QUARANTINE, KIND_SEGMENT, KIND_SNAPSHOT, SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA
from txnlog.spark.dump_log_assemble import assemble_segment, assemble_txn_state
from txnlog.spark.dump_log_lines import DEFAULT_CHUNK_BYTES, iter_line_batches, list_dump_inputs, split_dump_arg
from txnlog.spark.dump_log_parse import (
    DAMAGE_KINDS,
    K_BATCH,
    K_DUMPING,
    K_LEGACY,
    K_RECORD,
    K_SNAPSHOT,
    K_SNAPSHOT_CORRUPT,
    K_START,
    PARSED_SCHEMA,
    parse_lines,
)
from txnlog.spark.schemas import quoted, shaped
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


def _sql(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _in(*kinds: int) -> str:
    return "kind_code IN (" + ", ".join(map(str, kinds)) + ")"


#: the parsed columns assemble_segment reads
SEGMENT_COLUMNS = (
    "file line_no section kind_code after_batch dpath broker topic partition file_offset damage_text invalid_bytes "
    "base_offset last_offset record_count base_sequence producer_id producer_epoch partition_leader_epoch "
    "is_transactional is_control delete_horizon position timestamp_type max_timestamp size magic compression crc "
    "crc_valid rec_offset rec_timestamp marker_type marker_epoch"
).split()
#: TXN_STATE columns a decoded record line carries as parsed (the rest are null or set by assemble_txn_state)
RECORD_COLUMNS = (
    "transactional_id is_tombstone key_version value_version producer_id producer_epoch timeout_ms state partitions "
    "last_update_timestamp txn_start_timestamp previous_producer_id next_producer_id next_producer_epoch "
    "client_transaction_version"
).split()


def _records(lines: DataFrame) -> DataFrame:
    """TXN_STATE rows of the ``__transaction_state`` lines: the decoded record lines (3.x Scala text
    and 4.x JSON, parsed by the reader) with their batch lines, assembled per dumped segment."""
    parsed = {"kind": _sql("record"), "broker": "broker", "coordinator_partition": "partition", "file": "dpath"}
    parsed |= {"record_offset": "rec_offset", "record_timestamp": "rec_timestamp"}
    parsed |= {c: quoted(c) for c in RECORD_COLUMNS}
    txn_fields = arrow_to_spark_schema(TXN_STATE_SCHEMA).fields
    decoded = lines.filter(f"is_txn_state AND kind_code = {K_RECORD} AND txn_decoded").selectExpr(
        *[f"CAST({parsed.get(f.name, 'NULL')} AS {f.dataType.simpleString()}) AS {quoted(f.name)}" for f in txn_fields],
        "line_no",
        "section",
        "file AS dump_file",
        "kind_code",
        "dpath",
        "CAST(NULL AS int) AS partition_leader_epoch",
        "CAST(NULL AS bigint) AS record_count",
        "partition",
        "CAST(NULL AS boolean) AS crc_valid",
        "CAST(NULL AS bigint) AS batch_position",
        "CAST(NULL AS bigint) AS batch_size",
        "CAST(NULL AS string) AS damage_text",
        "CAST(NULL AS bigint) AS invalid_bytes",
    )
    txn_batches = lines.filter(f"is_txn_state AND {_in(K_BATCH, K_LEGACY, *DAMAGE_KINDS)}").selectExpr(
        *[
            f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
            for f in txn_fields
            if f.name not in ("broker", "file")
        ],
        "`broker`",
        "`dpath` AS `file`",
        "`line_no`",
        "`section`",
        "`file` AS `dump_file`",
        "`kind_code`",
        "`dpath`",
        "`partition_leader_epoch`",
        "CAST(`record_count` AS bigint) AS `record_count`",
        "`partition`",
        "`crc_valid`",
        "`position` AS `batch_position`",
        "`size` AS `batch_size`",
        "`damage_text`",
        "`invalid_bytes`",
    )
    both = decoded.unionByName(txn_batches)
    out_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA.append(pa.field("dump_file", pa.string())))
    return both.groupBy("dump_file", "section").applyInArrow(assemble_txn_state, out_schema)


def _replica_names(lines: DataFrame) -> DataFrame:
    """(dump_file, path broker) → replica name, for every dumped file (README, kafka-dump-log.sh).

    Deterministic, from the whole input:

    1. ``NAME=PATH`` names every dump under PATH: NAME, always.
    2. Otherwise the broker directory in the printed path (``.../<broker dir>/<topic>-<n>/``) names
       the replica, as before - unless the printed paths cannot tell replicas apart: the same
       segment path printed by several dump files (every broker's log dir is /var/lib/kafka/data),
       or no broker directory at all. Then every dump of that *location* (the directory below the
       ``--dump-log`` directory, or the directory given) that prints that broker directory takes
       the location's name, so a replica's segments, snapshots and __transaction_state dumps stay
       together.
    3. Dump files that still print the same segment path under the same name (files given one by
       one, or lying side by side in one directory) are told apart by the dump file's name
       (``b1.txt`` → ``b1``; under a location ``dumps/b1``).
    """
    d = (
        lines.filter(f"kind_code = {K_DUMPING}")
        .selectExpr(
            "file AS dump_file", "loc", "coalesce(loc_named, false) AS named", "broker AS pbroker", "dpath", "stem"
        )
        .distinct()
    )
    # the same printed path in several dump files: per printed broker, then per chosen base name
    d = d.selectExpr("*", "CAST(size(collect_set(dump_file) OVER (PARTITION BY pbroker, dpath)) > 1 AS int) AS clash")
    d = d.selectExpr(
        "*",
        "loc IS NOT NULL AND (named OR max(clash) OVER (PARTITION BY loc, pbroker) > 0 "
        f"OR pbroker = {_sql(D.UNKNOWN_BROKER)}) AS use_loc",
    )
    d = d.selectExpr("*", "CASE WHEN use_loc THEN loc ELSE pbroker END AS base")
    d = d.selectExpr(
        "*", "CAST(size(collect_set(dump_file) OVER (PARTITION BY base, dpath)) > 1 AND NOT named AS int) AS clash2"
    )
    return d.selectExpr(
        "dump_file",
        "pbroker",
        "CASE WHEN max(clash2) OVER (PARTITION BY dump_file, base) > 0 "
        "THEN CASE WHEN use_loc THEN concat_ws('/', base, stem) ELSE stem END ELSE base END AS replica",
    ).distinct()


def _named(df: DataFrame, names: DataFrame, dump_col: str = "dump_file") -> DataFrame:
    """``df`` with ``broker`` replaced by the replica name of its (dump file, path broker)."""
    from pyspark.sql import functions as F

    j = df.alias("r").join(
        F.broadcast(names).alias("n"),
        (F.col(f"r.{dump_col}") == F.col("n.dump_file")) & (F.col("r.broker") == F.col("n.pbroker")),
        "left",
    )
    # SQL text: one call into the JVM for the whole projection (txnlog.spark.schemas.shaped)
    return j.selectExpr(
        *[
            "coalesce(n.`replica`, r.`broker`) AS `broker`" if c == "broker" else f"r.{quoted(c)} AS {quoted(c)}"
            for c in df.columns
        ]
    )


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
    txnlog.spark.dump_log_arrow instead, with the same steps in Arrow.

    Spark only filters the parsed lines on their typed columns, names the replicas and groups the
    lines of each dumped segment for ``assemble_*``; the parse happened in the reader.
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
    names = _replica_names(lines)

    # --- segments: the lines needed to rebuild each dumped data segment (the KRaft metadata log
    # and KRaft snapshots are no data partition: skipped as the log-dir reader skips them)
    seg_lines = lines.filter(
        f"data_section AND ({_in(K_DUMPING, K_START, K_BATCH, K_LEGACY, *DAMAGE_KINDS)} "
        f"OR (kind_code = {K_RECORD} AND (after_batch OR marker_type IS NOT NULL)))"
    ).select(*SEGMENT_COLUMNS)
    seg_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA.append(pa.field("dump_file", pa.string())))
    segments = seg_lines.groupBy("file", "section").applyInArrow(assemble_segment, seg_schema)

    # --- producer snapshots
    snapshots = lines.filter(
        f"kind_code = {K_SNAPSHOT} AND section > 0 AND NOT is_txn_state AND NOT ignored"
    ).selectExpr(
        f"{_sql(KIND_SNAPSHOT)} AS kind",
        "broker",
        "topic",
        "partition",
        "dpath AS file",
        "file_offset",
        "producer_id",
        "producer_epoch",
        "first_offset",
        "last_offset",
        "last_timestamp",
        "coordinator_epoch",
        "last_sequence",
        "file AS dump_file",
    )
    # --- quarantine: lines we cannot or must not read, by the dump file and line number (damage
    # inside a dumped segment is quarantined above, by the segment's own byte positions); a corrupt
    # producer snapshot (its entries are not printed: dumpProducerIdSnapshot prints the
    # CorruptSnapshotException message instead) by the whole file, as the segment reader does
    corrupt = f"kind_code = {K_SNAPSHOT_CORRUPT}"
    quarantine = lines.filter("reason IS NOT NULL").selectExpr(
        f"{_sql(KIND_QUARANTINE)} AS kind",
        "broker",
        "topic",
        "partition",
        f"CASE WHEN {corrupt} THEN dpath ELSE file END AS file",
        "file_offset",
        f"CASE WHEN {corrupt} THEN CAST(0 AS bigint) ELSE line_no END AS position",
        f"CASE WHEN {corrupt} THEN CAST(NULL AS bigint) ELSE CAST(1 AS bigint) END AS length",
        "reason",
        "detail",
        "file AS dump_file",
    )

    cols = [f.name for f in SEGMENT_SUMMARY_SCHEMA]
    summary_schema = arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)
    summary = (
        shaped(segments, summary_schema, "dump_file")
        .unionByName(shaped(snapshots, summary_schema, "dump_file"))
        .unionByName(shaped(quarantine, summary_schema, "dump_file"))
    )
    summary = _named(summary, names).select(*cols)

    records = _records(lines)
    # one row per dumped __transaction_state segment, records or not: which coordinator partitions
    # the dumps hold (an empty one too, as a copied empty __transaction_state-<n>/ directory counts)
    txn_schema = arrow_to_spark_schema(TXN_STATE_SCHEMA)
    dumped = lines.filter(f"is_txn_state AND kind_code = {K_DUMPING}").selectExpr(
        f"{_sql(KIND_SEGMENT)} AS kind",
        "broker",
        "partition AS coordinator_partition",
        "dpath AS file",
        "file AS dump_file",
    )
    records = records.unionByName(shaped(dumped, txn_schema, "dump_file"))
    records = _named(records, names).select(*txn_schema.fieldNames())
    return DumpLogFrames(summary=summary, records=records, files=files)
