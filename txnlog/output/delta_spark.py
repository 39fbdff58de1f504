"""The ``spark`` writer: delta-spark's overwrite with ``replaceWhere`` on the run key (only where the Delta
jars are already on the classpath)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from txnlog.model import contract
from txnlog.output.delta_base import (
    Location,
    ParquetTable,
    Supersede,
    conform_arrow,
    conform_dataframe,
    iso_ms,
    sql_string,
)
from txnlog.output.spark_base import spark_struct, temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_with_delta_spark(
    spark: SparkSession,
    table: Location,
    name: str,
    data: DataFrame | pa.Table | ParquetTable,
    cluster: str,
    as_of: datetime,
    supersede: Supersede | None = None,
) -> int:

    schema = contract.TABLES[name]
    if isinstance(data, pa.Table):
        df = spark.createDataFrame(conform_arrow(data, schema, name, cluster, as_of), schema=spark_struct(schema))
    elif isinstance(data, ParquetTable):
        df = data.dataframe(cluster, as_of)
    else:
        df = data
    conformed = conform_dataframe(df, schema, name, cluster, as_of)
    predicate = f"cluster = {sql_string(cluster)} AND as_of = TIMESTAMP '{iso_ms(as_of)}'"
    if supersede is not None:
        predicate = f"({predicate}) OR {supersede.sql(cluster)}"
    metadata = json.dumps({"txnlog.cluster": cluster, "txnlog.broker.as_of": iso_ms(as_of), "txnlog.writer": "spark"})
    with temporary_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        (
            conformed.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", predicate)
            .option("userMetadata", metadata)
            .save(table.spark_path)
        )
    last = table.table().history(1)[0]
    return int(last.get("operationMetrics", {}).get("numOutputRows", 0))
