"""The Spark session txnlog runs in, and what it can find on its classpath.

``get_session`` reuses the active session (``spark-submit`` and notebooks that
already built one), otherwise builds a local one. It never asks Maven for
anything: ``configure_spark_with_delta_pip`` and ``spark.jars.packages`` would
try to download the Delta jars, which fails (or hangs until Ivy times out) on
machines without Maven access. Delta comes either
from jars someone put on the classpath (``--jars``, the cluster image), which
``txnlog.output.spark_base.delta_spark_available`` detects, or from ``deltalake`` (txnlog.output.delta).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

# the driver JVM's JIT and collector options, and its class archive (txnlog.engine.spark.jvm_archive says why)
from txnlog.engine.spark.jvm_archive import DRIVER_JAVA_OPTIONS, java_options

__all__ = ["get_session"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Correctness settings: applied to every session txnlog uses, including one it
# did not build. Timestamps are instants in UTC everywhere (docs/design.md §3), and
# Parquet timestamps must be INT64 micros: Spark's default INT96 is not
# something the deltalake commit path (or most readers) should be fed.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

# Defaults for a session txnlog builds. Under spark-submit, its --conf and
# spark-defaults.conf win over these; an explicit ``conf`` wins over all.
DEFAULT_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # each executor's Python daemon imports the readers and loads the compiled kernels once, before it forks the
    # workers (txnlog.engine.spark.worker_daemon)
    "spark.python.daemon.module": "txnlog.engine.spark.worker_daemon",
    # progress bars only for a person at a terminal, not in cron/CI logs
    "spark.ui.showConsoleProgress": "true" if sys.stderr.isatty() else "false",
}

# Local mode only: the host name may resolve to an address that is not up
# (a documentation-range address was seen), and a local driver needs no outside listener.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}

DEFAULT_MASTER = "local[*]"


def get_session(
    app_name: str = "txnlog",
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the active Spark session, or build a local one.

    With an active session (``spark-submit``, a notebook), that session is
    returned with txnlog's required settings (UTC session time zone, Parquet
    TIMESTAMP_MICROS) and any runtime-settable entries of ``conf`` applied;
    ``master`` is then ignored. Otherwise a session is built on ``master``
    (default: the master spark-submit / PYSPARK_SUBMIT_ARGS configured, else
    ``local[*]``) with the UI off, few shuffle partitions (8) and Arrow on;
    ``conf`` overrides any of these.

    >>> spark = get_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    >>> spark.conf.get("spark.sql.session.timeZone")
    'UTC'
    """
    # Lazy in this module: pyspark (and engine.spark, which imports it) loads only where a run uses Spark.
    from pyspark.sql import SparkSession

    extra = {str(k): str(v) for k, v in (conf or {}).items()}
    active = SparkSession.getActiveSession()
    if active is not None:
        _apply_runtime_conf(active, {**extra, **REQUIRED_CONF})
        return active

    # Python workers must run the interpreter that has txnlog's dependencies,
    # not whatever `python3` is on the PATH of the executor.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    if _launches_jvm():
        # The JVM starts with the settings below (pyspark passes them to
        # spark-submit), so spark.driver.memory and friends still take effect.
        preset: dict[str, str] = {}
        chosen_master = master or extra.get("spark.master") or _submit_args_master() or DEFAULT_MASTER
        if chosen_master.startswith("local"):
            # Spares the "hostname resolves to a loopback address" warning and
            # keeps every local listener on loopback.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    else:
        # spark-submit started this Python: its --conf / spark-defaults.conf win over our defaults.
        preset = _preset_conf()
        chosen_master = master or extra.get("spark.master") or preset.get("spark.master") or DEFAULT_MASTER
    settings: dict[str, str] = {k: v for k, v in DEFAULT_CONF.items() if k not in preset}
    if _launches_jvm() and "spark.driver.extraJavaOptions" not in extra:
        # the JVM about to start maps the archive of Spark's classes, when bootstrap recorded one
        settings["spark.driver.extraJavaOptions"] = f"{DRIVER_JAVA_OPTIONS} {java_options()}".strip()
    if chosen_master.startswith("local"):
        settings.update({k: v for k, v in LOCAL_CONF.items() if k not in preset})
    settings.update(extra)
    settings.update(REQUIRED_CONF)
    settings["spark.master"] = chosen_master

    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _launches_jvm() -> bool:
    """False under spark-submit, whose JVM is already running (and started this Python)."""
    from pyspark import SparkContext

    return SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ


def _submit_args_master() -> str | None:
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    return args[args.index("--master") + 1] if "--master" in args[:-1] else None


def _preset_conf() -> dict[str, str]:
    """Settings spark-submit already gave the running JVM (--conf, --master, spark-defaults.conf)."""
    from pyspark import SparkConf, SparkContext

    # Connects to spark-submit's JVM (PYSPARK_GATEWAY_PORT); SparkConf(loadDefaults=True)
    # then reads the spark.* system properties spark-submit set.
    SparkContext._ensure_initialized()
    return dict(SparkConf(loadDefaults=True).getAll())


def _apply_runtime_conf(spark: SparkSession, settings: Mapping[str, str]) -> None:
    for key, value in settings.items():
        if spark.conf.get(key, None) == value:
            continue
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
        # Static settings (spark.master, spark.ui.enabled, ...) of a session
        # someone else built are theirs; changing them needs a new session.
