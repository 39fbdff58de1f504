"""The newest broker-written time per source is the same whether Spark's tasks or this process compute it: Spark
applies txnlog.broker.as_of.broker_times_of to each Arrow batch (txnlog.engine.spark.collect.broker_times), and a
run's ``as_of_source`` is read from what comes back."""

from __future__ import annotations

import pyarrow as pa

from txnlog.broker import as_of
from txnlog.engine.spark import collect


def test_spark_gives_each_source_its_own_newest_time(spark) -> None:
    summary = pa.table(
        {
            "kind": ["segment", "segment", "piece", "transaction"],
            "marker_timestamp": pa.array([100, None, 150, 999], pa.int64()),
            "log_append_timestamp": pa.array([None, 300, 250, 999], pa.int64()),
        }
    )
    records = pa.table({"kind": ["record", "record", "quarantine"], "record_timestamp": pa.array([200, 220, 999])})
    here = as_of.broker_times_of(summary, records)
    assert here == {as_of.MARKERS: 150, as_of.LOG_APPEND_TIME: 300, as_of.TRANSACTION_STATE: 220}  # all distinct

    in_spark = collect.broker_times(spark.createDataFrame(summary), spark.createDataFrame(records))
    assert in_spark == here
    assert as_of.choose(None, in_spark)[1] == as_of.LOG_APPEND_TIME
