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
