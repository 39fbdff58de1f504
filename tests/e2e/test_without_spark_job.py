"""A small input's run starts no JVM: ``./spark-submit.sh`` given no Spark option runs the job in its own Python
process (txnlog.pipeline.inputs.Inputs.without_spark) and writes the tables a run with a Spark session writes.

The proof that no JVM starts: the run is given a ``JAVA_HOME`` that does not exist and a ``PATH`` without
``java``, under which the same command with ``--driver-max-bytes 0`` (always Spark) fails to start.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.jobrun import SUBMIT
from tests.e2e.shared import MESSY_AS_OF, MESSY_CLUSTER
from tests.e2e.test_previous_pipeline import TABLES, differences, read_delta

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def _no_java_env(tmp_path: Path) -> dict[str, str]:
    """The environment with no way to start a JVM: ``JAVA_HOME`` a directory that does not exist, and a
    ``java`` first on the ``PATH`` that only fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    fake = tmp_path / "no-java-bin"
    fake.mkdir()
    (fake / "java").write_text("#!/bin/sh\necho 'no JVM may start in this test' >&2\nexit 97\n")
    (fake / "java").chmod(0o755)
    env["PATH"] = os.pathsep.join([str(fake), env.get("PATH", "")])
    env["JAVA_HOME"] = str(tmp_path / "no-such-jdk")
    return env


def _submit(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SUBMIT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_small_input_runs_without_a_jvm_and_writes_the_session_runs_tables(  # type: ignore[no-untyped-def]
    messy_incident, messy_dumps_run, tmp_path
) -> None:
    env = _no_java_env(tmp_path)
    common = [*messy_incident.dump_args(), "--cluster", MESSY_CLUSTER, "--as-of", MESSY_AS_OF]

    spark = _submit(*common, "--output", str(tmp_path / "spark"), "--driver-max-bytes", "0", env=env, cwd=tmp_path)
    assert spark.returncode != 0 and "here (a small input)" not in spark.stderr, "Spark must not start here"

    proc = _submit(*common, "--output", str(tmp_path / "here"), env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "here (a small input)" in proc.stderr
    assert "findings by verdict" in proc.stdout
    problems: list[str] = []
    for table in TABLES:  # the same dumps' run with a Spark session (tests/e2e/shared.py), driver-placed too
        want = read_delta(Path(messy_dumps_run.out), table, {})
        problems += differences(table, want, read_delta(tmp_path / "here", table, {}))
    assert not problems, "\n".join(problems)
