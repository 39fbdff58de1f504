"""What a dump file's reading task returns (txnlog.engine.dump_log.rows), named in a module that imports no reader:
Spark's planning processes load the Data Source's module (txnlog.engine.spark.dump_log_source) to ask its schema."""

from __future__ import annotations

import pyarrow as pa

from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, TXN_STATE_SCHEMA

DUMP_FILE = pa.field("dump_file", pa.string())

#: what a dump file is read into: the rows of the segment source, or of the txn-state source, or in one pass
#: (:data:`BOTH`) both sources' rows and the "Dumping" lines that name their replicas
SUMMARY, RECORDS, BOTH = "summary", "records", "both"
#: what a row of :data:`BOTH_SCHEMA` is, in its ``output`` column: SUMMARY, RECORDS or a "Dumping" line
DUMPING_LINE = "dumping"

#: :data:`BOTH`'s rows: ``output``, the columns of SEGMENT_SUMMARY_SCHEMA and of TXN_STATE_SCHEMA (those both have
#: are of one type), the dump file, and what txnlog.engine.dump_log.names.replica_names reads of a "Dumping" line
#: beside the dump file and the printed ``broker``
BOTH_SCHEMA = pa.schema(
    [
        pa.field("output", pa.string()),
        *SEGMENT_SUMMARY_SCHEMA,
        *(f for f in TXN_STATE_SCHEMA if f.name not in SEGMENT_SUMMARY_SCHEMA.names),
        DUMP_FILE,
        pa.field("loc", pa.string()),
        pa.field("loc_named", pa.bool_()),
        pa.field("dpath", pa.string()),
        pa.field("stem", pa.string()),
    ]
)
#: the columns of :data:`BOTH_SCHEMA` a "Dumping" line fills
NAMING_COLUMNS = ("dump_file", "broker", "loc", "loc_named", "dpath", "stem")
