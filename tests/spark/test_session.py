"""txnlog.engine.spark.session against the shared local session."""

from __future__ import annotations

import sys

import pytest

from txnlog.engine.spark.session import get_session
from txnlog.output.spark_base import delta_spark_available

pytestmark = pytest.mark.spark


def test_session_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert conf.get("spark.sql.shuffle.partitions") == "4"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.sparkContext.master == "local[2]"
    assert spark.sparkContext.pythonExec == sys.executable


def test_get_session_reuses_the_active_session(spark):
    again = get_session(conf={"spark.sql.shuffle.partitions": "4"})
    assert again is spark


def test_no_delta_jars_here(spark):
    assert delta_spark_available(spark) is False


def test_spark_submit_sh_passes_the_same_driver_jvm_options() -> None:
    """./spark-submit.sh (bash) and sessions built by get_session (Python) tune the driver JVM alike."""
    from pathlib import Path

    from txnlog.engine.spark.session import DEFAULT_CONF, DRIVER_JAVA_OPTIONS

    script = (Path(__file__).parents[2] / "spark-submit.sh").read_text()
    assert f'driver_java_options="{DRIVER_JAVA_OPTIONS}"' in script
    assert DEFAULT_CONF["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS


def test_task_workers_start_with_the_readers_and_kernels_loaded(spark):
    """A task's Python worker is forked from txnlog's daemon, which imported the readers and loaded the compiled
    kernels from numba's cache before it forked: the worker finds them loaded, none of them compiled."""

    def probe(batches):  # runs in the worker; nothing of txnlog imported by this function itself
        import sys as worker_sys

        import pyarrow as worker_pa

        main = getattr(worker_sys.modules["__main__"].__spec__, "name", None)
        loaded = compiled = 0
        for name, module in list(worker_sys.modules.items()):
            if name.startswith("txnlog.kafka.") and module is not None:
                for value in vars(module).values():
                    stats = getattr(value, "stats", None)
                    if stats is not None and hasattr(stats, "cache_hits"):
                        loaded += sum(stats.cache_hits.values())
                        compiled += sum(stats.cache_misses.values())
        preloaded = "txnlog.engine.spark.sources" in worker_sys.modules and "pandas" in worker_sys.modules
        for _ in batches:
            pass
        yield worker_pa.RecordBatch.from_pydict(
            {"main": [main], "preloaded": [preloaded], "loaded": [loaded], "compiled": [compiled]}
        )

    schema = "main string, preloaded boolean, loaded long, compiled long"
    rows = spark.range(2, numPartitions=2).mapInArrow(probe, schema).collect()
    assert spark.conf.get("spark.python.daemon.module") == "txnlog.engine.spark.worker_daemon"
    for row in rows:
        assert row.main == "txnlog.engine.spark.worker_daemon"
        assert row.preloaded
        assert row.loaded > 0  # the kernels the install-time warm-up cached (scripts/bootstrap.sh)
        assert row.compiled == 0
