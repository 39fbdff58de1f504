"""The driver JVM: its JIT and collector options, and a class-data-sharing archive of Spark's classes.

A txnlog run on a small input spends most of its time in a cold driver JVM: Spark's SQL engine loads,
verifies and links ~20,000 classes from its jars while it plans the run's first queries. A JDK 13+
*dynamic* class-data-sharing archive (JEP 350, ``-XX:ArchiveClassesAtExit``) records those classes as
the JVM holds them after a run; a later JVM started with ``-XX:SharedArchiveFile`` maps that file
instead of parsing and verifying the jars again. On this machine an 8-line kafka-dump-log.sh run went
from 18–19.5 s to 14.5–15.5 s (benchmarks/RESULTS.md, "Startup").

``scripts/bootstrap.sh`` makes the archive once per (JDK, Spark jars), after the decoders' warm-up,
with a training run of the job on the embedded sample and a kafka-dump-log.sh rendering of it
(``--create``, ~40 s). ``./spark-submit.sh`` and :func:`txnlog.engine.spark.session.get_session`
add :func:`java_options` to the driver's JVM options when the archive is there. The JVM checks the
archive against its own class path and silently runs without it when they differ (another
``SPARK_HOME``, ``--driver-class-path``): the options below switch its ``cds`` warnings off, so a stale
archive costs nothing but the speed-up.

Stdlib only at import: the shell wrapper calls ``--options`` before every run (~30 ms).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

# The driver JVM's JIT and garbage collector. txnlog's driver plans ~50 short Spark jobs over a few
# thousand summary rows (the bytes are decoded in Python workers), and in local mode it runs them too.
# The JVM's default tiered JIT spends most of its CPU compiling with C2, and G1 runs concurrent GC
# threads: on a 2-core machine that CPU is taken from the Python workers that decode. C1 alone and the
# serial collector cut the job's CPU and its time per extra GiB of input (benchmarks/RESULTS.md §2,
# "Driver JVM and balanced decode tasks"). ./spark-submit.sh passes the same options;
# a user's own spark.driver.extraJavaOptions replaces them.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: TXNLOG_JVM_ARCHIVE=0 never uses or makes one; a path uses that directory for the archives
ENV = "TXNLOG_JVM_ARCHIVE"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def _spark_jars() -> Path | None:
    """The jars spark-submit puts on the driver's class path: ``$SPARK_HOME/jars``, else pyspark's."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    spec = find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def archive_path() -> Path | None:
    """Where the archive for this JDK and these Spark jars lives (whether or not it exists yet); None
    when switched off (``TXNLOG_JVM_ARCHIVE=0``) or when there is no java or no Spark to key it by."""
    setting = os.environ.get(ENV, "")
    if setting == "0":
        return None
    java, jars = _java(), _spark_jars()
    if java is None or jars is None or not jars.is_dir():
        return None
    h = hashlib.sha256()
    stat = os.stat(java)
    h.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for jar in sorted(jars.iterdir()):
        s = jar.stat()
        h.update(f"{jar.name}\0{s.st_size}\0{s.st_mtime_ns}\0".encode())
    root = Path(setting) if setting else Path(sys.prefix) / ".txnlog-jvm"
    return root / f"driver-{h.hexdigest()[:16]}.jsa"


def java_options() -> str:
    """The driver JVM options that use the archive, or "" when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None and path.is_file() else ""


def create(progress: bool = True) -> Path | None:
    """Make the archive with a training run: the job itself (``jobs/find_hanging.py`` under
    ``spark-submit``) on the embedded sample plus a kafka-dump-log.sh rendering of some of its segments,
    its Python steps in the driver (the small inputs whose start this speeds up). Idempotent: an existing
    archive is kept; None when there is nothing to key one by or no job script beside the package."""
    path = archive_path()
    job = Path(__file__).resolve().parents[3] / "jobs" / "find_hanging.py"
    if path is None or path.is_file() or not job.is_file():
        return path if path is not None and path.is_file() else None
    # Lazy: this module imports the standard library only (the wrapper's --options call stays fast).
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover
    from txnlog.sources.sample import sample_logs

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    work = tempfile.mkdtemp(prefix="txnlog-jvm-archive-")
    try:
        logs = sample_logs()
        inventory = discover([logs])
        dump = os.path.join(work, "sample.txt")
        with open(dump, "w", encoding="utf-8") as f:
            for seg in [*inventory.segments[:8], *inventory.txn_state_segments[:2]]:
                f.write(render_dump(seg.path))
        command = [
            os.path.join(os.path.dirname(sys.executable), "spark-submit"),
            "--master", "local[2]",
            "--conf", "spark.ui.enabled=false",
            "--driver-java-options", f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={tmp} -Xlog:cds=off",
            str(job), "--logs", logs, "--dump-log", dump, "--output", os.path.join(work, "out"),
        ]  # fmt: skip
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not tmp.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"the training run exited {done.returncode}: {' | '.join(tail)}")
        os.replace(tmp, path)  # another bootstrap's archive of the same key is as good
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    if progress:
        print(f"txnlog: driver JVM classes archived in {path}", file=sys.stderr)
    return path


def main(argv: list[str]) -> int:
    if argv == ["--options"]:
        print(java_options())
        return 0
    if argv == ["--is-ready"]:
        path = archive_path()
        return 0 if path is None or path.is_file() else 1
    if argv == ["--create"]:
        create()
        return 0
    print("usage: jvm_archive.py --options | --is-ready | --create", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
