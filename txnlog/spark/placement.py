"""Where a run's Python work runs: in Spark's tasks, or in the driver process without Spark.

Every Python step of the job (the Data Sources' readers, the Arrow functions of ``applyInArrow`` and
``mapInArrow``) is a plain function over Arrow tables. On a large input Spark runs them in Python
tasks, in parallel, near the data, and plans the joins and aggregates between them. On a small one,
Spark's part costs far more than the work: a Python Data Source is planned in a Python process of its
own, every Python stage starts or wakes Python workers, and a cold JVM plans and compiles each of
~70 queries. An 8-line kafka-dump-log.sh file took 15 s that way against a 5 s floor, of which well
under a second was the work (benchmarks/RESULTS.md, "Startup").

So with :attr:`Placement.driver` (the input is at most ``driver_max_bytes``: what this process holds is
bounded by it) the run calls the sources' readers here (:func:`read_here`, and for the dumps
txnlog.spark.dump_log.read_dump_logs_here), no Spark query; the Delta writer takes the Arrow tables. Such a
run needs no Spark session at all (``txnlog.pipeline.runs_without_spark``): ``./spark-submit.sh`` without
Spark options runs it in its Python process, and no JVM starts. Either
way the tables are built by txnlog.rules.tables in this process; in Spark, the tasks hand it only the rows
left once every partition is merged and reduced where it was decoded (txnlog.spark.collect). Both placements
give the same tables (tests/e2e/test_placement.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource


@dataclass(frozen=True)
class Placement:
    """Run the job in Spark (``driver`` false) or, for a small input, in this driver process (``driver`` true)."""

    driver: bool = False

    @classmethod
    def for_input(cls, input_bytes: int, max_bytes: int, *, live: bool = False) -> Placement:
        """The driver when the input is known and at most ``max_bytes`` (0: never); a live read is
        not bounded by a size known in advance, so it stays in tasks."""
        return cls(driver=not live and max_bytes > 0 and input_bytes <= max_bytes)


def read_here(source: type[DataSource], options: dict[str, str], schema: pa.Schema) -> pa.Table:
    """Every batch a Data Source's reader yields for ``options``, read in this process, as one Arrow table of
    ``schema`` (the source's own, in Arrow): the driver placement's read without a DataFrame."""
    reader = source(options).reader(None)  # type: ignore[arg-type]  # txnlog's readers take their schema as known
    tables = [pa.Table.from_batches([b]) for part in reader.partitions() for b in reader.read(part)]
    tables = [_conform(t, schema) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table``'s columns in ``target``'s order and types (a step may yield them in its own order)."""
    columns: list[Any] = [table.column(f.name).cast(f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)
