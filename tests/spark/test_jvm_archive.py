"""txnlog.engine.spark.jvm_archive: the driver JVM's class-data-sharing archive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from txnlog.engine.spark import jvm_archive

ROOT = Path(__file__).parents[2]


def test_no_archive_means_no_options(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path))
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path and not path.exists()
    assert jvm_archive.java_options() == ""
    assert jvm_archive.main(["--is-ready"]) == 1


def test_switched_off(monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, "0")
    assert jvm_archive.archive_path() is None
    assert jvm_archive.java_options() == ""
    assert jvm_archive.main(["--is-ready"]) == 0  # nothing to make: bootstrap does not try


def test_the_key_follows_the_spark_jars(tmp_path, monkeypatch):
    """Another Spark install (SPARK_HOME with other jars) gets another archive, never this one's."""
    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path / "archives"))
    ours = jvm_archive.archive_path()
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"PK")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    theirs = jvm_archive.archive_path()
    assert ours is not None and theirs is not None and ours != theirs


def test_options_name_an_existing_archive_and_silence_the_jvm(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path))
    path = jvm_archive.archive_path()
    assert path is not None
    path.write_bytes(b"not an archive")
    options = jvm_archive.java_options()
    assert f"-XX:SharedArchiveFile={path}" in options and "-Xlog:cds=off" in options


def test_spark_submit_sh_adds_the_archive_only_to_its_own_options():
    """A user's own --driver-java-options replace txnlog's, archive included (it may name its own)."""
    script = (ROOT / "spark-submit.sh").read_text()
    assert 'if [ "$own_java_options" = 0 ]; then' in script
    assert 'driver_java_options="$value"; own_java_options=1' in script


@pytest.mark.spark
def test_a_spark_jvm_maps_the_bootstrapped_archive(tmp_path):
    """scripts/bootstrap.sh recorded the archive (run-tests.sh sources it), and a driver JVM started with
    its options loads Spark's classes from it: thousands of classes from the shared objects file."""
    path = jvm_archive.archive_path()
    if path is None or os.environ.get("TXNLOG_NO_WARMUP") == "1":
        pytest.skip(f"{jvm_archive.ENV}=0, TXNLOG_NO_WARMUP=1 (bootstrap records none) or no java/Spark to key one by")
    assert path.is_file(), (
        f"scripts/bootstrap.sh did not record {path}; run txnlog/engine/spark/jvm_archive.py --create"
    )
    script = tmp_path / "session.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "print(s.range(3).count())\ns.stop()\n"
    )
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    options = f"{jvm_archive.java_options()} -Xlog:class+load=info"
    done = subprocess.run(
        [spark_submit, "--driver-java-options", options, str(script)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    shared = sum("source: shared objects file (top)" in line for line in done.stdout.splitlines())
    assert shared > 3000, f"only {shared} classes came from {path}"
