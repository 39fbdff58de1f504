"""Two ways to run the job with a user's arguments: ``./spark-submit.sh`` in a shell (:func:`run_job`), and
``jobs/find_hanging.py``'s ``main`` in this process with the shared Spark session (:func:`run_in_process`).

Each ``./spark-submit.sh`` start costs 15-25 s (a JVM, a Spark session, the job). Tests of what the wrapper
itself does -- exit codes, the lines it prints, the README's commands, a driver killed, a real cluster -- run
it; tests of what the job writes run the same ``main`` (argument parsing, configuration, the summary) in
process. Both return a ``subprocess.CompletedProcess``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = ROOT / "spark-submit.sh"


def run_job(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    return finish_job(start_job(*args, cwd=cwd, env=env), timeout=timeout)


def start_job(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """:func:`run_job` started, not waited for: :func:`finish_job` waits for it. Runs that do not depend on
    each other (one mostly waiting for a timeout, say) can go side by side."""
    full_env = {**os.environ, **(env or {})}
    # the job must find its own venv through spark-submit.sh, not ours
    full_env.pop("PYSPARK_PYTHON", None)
    full_env.pop("PYSPARK_DRIVER_PYTHON", None)
    return subprocess.Popen(
        [str(SUBMIT), "--driver-memory", "1g", *args],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_job(popen: subprocess.Popen, timeout: int = 600) -> subprocess.CompletedProcess:
    """Wait for a :func:`start_job` run (killed after ``timeout`` s, as ``subprocess.run`` does)."""
    try:
        stdout, stderr = popen.communicate(timeout=timeout)
    except BaseException:
        popen.kill()
        popen.wait()
        raise
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, stdout, stderr)
    if proc.returncode not in (0, 2):
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-10000:])
    return proc


_JOB: ModuleType | None = None


def job_module() -> ModuleType:
    """``jobs/find_hanging.py``, the script spark-submit runs, imported once."""
    global _JOB
    if _JOB is None:
        spec = importlib.util.spec_from_file_location("find_hanging", ROOT / "jobs" / "find_hanging.py")
        assert spec and spec.loader
        _JOB = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_JOB)
    return _JOB


def run_in_process(spark: Any, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``./spark-submit.sh ARGS`` without the JVM start: the job script's ``main(ARGS)`` in ``cwd`` (relative
    paths as the user wrote them), with ``env`` added to the environment, on the shared session.

    Job options only (Spark's own options are the wrapper's). As under spark-submit, whose PythonRunner joins
    the Python driver's stderr to its stdout, the progress lines and the summary are both in ``stdout``
    (``stderr`` holds the same text, for the failure messages that show it). An exception propagates.

    A relative output is made absolute in ``cwd``: Spark's Python workers, which may write the run's scratch
    files under it, run in this process's directory, not in ``cwd`` (under spark-submit they are the same).
    """
    import txnlog.pipeline as pipeline

    real_run = pipeline.run

    def run(config: Any, **kw: Any) -> Any:
        if "://" not in config.output:
            config = dataclasses.replace(config, output=os.path.abspath(config.output))
        return real_run(config, spark=spark, **kw)

    printed = io.StringIO()
    with (
        contextlib.chdir(cwd),
        mock.patch.dict(os.environ, env or {}),
        mock.patch.object(pipeline, "run", run),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(printed),
    ):
        code = job_module().main(list(args))
    text = printed.getvalue()
    return subprocess.CompletedProcess(["find_hanging.main", *args], code, text, text)
