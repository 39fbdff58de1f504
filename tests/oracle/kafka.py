"""Apache Kafka's own code as the judge: a thin runner over ``shared/kafka-oracle/oracle``.

The oracle (``shared/kafka-oracle``, checked out beside the repository; provenance in its NOTICE.md) runs
Kafka 4.0's unmodified ``LogLoader`` + ``ProducerStateManager`` (``load-partition``), ``DumpLogSegments``
(``dump``, the real ``kafka-dump-log.sh``), ``TransactionLog`` (``txn-state``) and the ``MemoryRecords``
builders (``write-sample``) from the command line. Every call here is one JVM (~0.6 s): batch the
directories of a scenario into one :func:`load_partitions` call. Each JVM maps an archive of the classes the
first call of its command loaded (:func:`call`).

It builds itself once (35-90 s) into ``/tmp/kafka-oracle`` on first use; ``KAFKA_ORACLE_JARS`` is pointed at
this venv's ``pyspark/jars`` so that the build needs no pip install. Tests skip with a reason only where the
oracle or ``java`` is absent (:func:`skip_reason`).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("TXNLOG_KAFKA_ORACLE", ROOT.parent / "shared" / "kafka-oracle" / "oracle"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    if "KAFKA_ORACLE_JARS" not in env:
        import pyspark

        env["KAFKA_ORACLE_JARS"] = str(Path(pyspark.__file__).parent / "jars")
    return env


@functools.cache
def skip_reason() -> str | None:
    """Why the oracle cannot run here (None: it can). Builds it on first use."""
    if not ORACLE.exists():
        return f"the Kafka oracle is not at {ORACLE} (shared/ is checked out beside the repository in CI)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no java on PATH (the Kafka oracle runs Kafka's own classes on Java 17)"
    proc = subprocess.run([str(ORACLE), "--help"], env=_env(), capture_output=True, text=True, timeout=900)
    if "usage: oracle" not in proc.stdout + proc.stderr:
        raise RuntimeError(f"the Kafka oracle did not build: {proc.stderr[-3000:]}")
    return None


#: the line a JVM prints first on stderr when JAVA_TOOL_OPTIONS is set (the launcher takes no options of its own)
_PICKED_UP = "Picked up JAVA_TOOL_OPTIONS: "


@functools.cache
def _archives() -> Path:
    """This process's class-data archives, one per oracle command, removed when it exits."""
    where = Path(tempfile.mkdtemp(prefix="txnlog-oracle-classes-"))
    atexit.register(shutil.rmtree, where, True)
    return where


def call(*args: str, cwd: Path | str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``oracle ARGS...`` in one JVM, whatever its exit status: its stdout and stderr as it printed them.

    The JVM maps a class-data archive of the classes the first call of the same command in this process loaded
    (JDK 17's dynamic CDS: that call runs with ``-XX:ArchiveClassesAtExit``, the later ones with
    ``-XX:SharedArchiveFile``), so that Kafka's and Scala's classes are loaded and verified once per command, not
    in every JVM; the classes and what they print are the same. A missing or stale archive is not used (the JVM's
    CDS log lines, which would go to stdout, are off); the line the JVM prints about JAVA_TOOL_OPTIONS is taken
    off stderr."""
    skip_reason()  # the oracle is built first, without the options (its build runs JVMs of its own)
    archive = _archives() / f"{args[0]}.jsa"
    making = archive.with_name(f"{archive.stem}-{uuid.uuid4().hex}.jsa")
    use = f"-XX:SharedArchiveFile={archive}" if archive.exists() else f"-XX:ArchiveClassesAtExit={making}"
    env = _env()
    options = " ".join(o for o in (env.get("JAVA_TOOL_OPTIONS", ""), "-Xlog:cds=off,cds+dynamic=off", use) if o)
    env["JAVA_TOOL_OPTIONS"] = options
    proc = subprocess.run(
        [str(ORACLE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )  # fmt: skip
    if making.exists():
        os.replace(making, archive)
    proc.stderr = proc.stderr.replace(f"{_PICKED_UP}{options}\n", "", 1)
    return proc


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``oracle ARGS...``; raises with its stderr when it fails."""
    proc = call(*args, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"oracle {' '.join(args[:3])} ... failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return proc


def load_partitions(dirs: list[Path] | list[str], *options: str) -> list[dict[str, Any]]:
    """``load-partition`` over every directory in one JVM: one dict per directory, in order. A directory
    Kafka cannot load comes back as ``{"dir", "error"}`` (the oracle's exit status is then 1)."""
    if not dirs:
        return []
    proc = call("load-partition", *map(str, dirs), *options, "--jsonl", timeout=900)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(dirs):
        raise RuntimeError(f"load-partition gave {len(rows)} answers for {len(dirs)} dirs: {proc.stderr[-3000:]}")
    return rows


def txn_state(directory: Path | str, *options: str) -> list[dict[str, Any]]:
    """``txn-state``: the newest state of every transactional.id of a ``__transaction_state`` partition,
    as ``TransactionStateManager.loadTransactionMetadata`` leaves it (sorted by id)."""
    out = run("txn-state", str(directory), *options).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def txn_state_merged(dirs: list[Path] | list[str], work: Path | str) -> list[dict[str, Any]]:
    """``txn-state`` over several ``__transaction_state`` partition dirs in one JVM.

    ``txn-state`` takes one directory and replays every ``.log`` file in it in the order of their names
    (``LogFileUtils.offsetFromFile``), keeping one entry per transactional.id. Here the segments of
    ``dirs`` are hard-linked (copied where links fail) into ``work`` under sequence numbers, in the order
    given (each dir's segments by base offset), and replayed in one call. Record offsets come from the
    batches, not the file names, so each row equals that dir's own ``txn-state`` answer **only when no
    transactional.id has records in two of the dirs** (Kafka hashes an id to one partition,
    ``TransactionStateManager.partitionFor``; replicas of one partition must go to separate calls): the
    caller checks that, e.g. from ``dump --transaction-log-decoder``. The log start offset is 0 for all.
    """
    work = Path(work)
    work.mkdir(parents=True)
    n = 0
    for d in map(Path, dirs):
        for seg in sorted(Path(d).glob("*.log"), key=lambda p: int(p.stem)):
            target = work / f"{n:020d}.log"
            try:
                os.link(seg, target)
            except OSError:
                shutil.copyfile(seg, target)
            n += 1
    return txn_state(work)


def dump(*paths: Path | str, options: tuple[str, ...] = ()) -> str:
    """The real ``kafka-dump-log.sh`` (``DumpLogSegments.main``) over ``paths``: its standard output."""
    return run("dump", *map(str, paths), *options).stdout


def write_sample(directory: Path | str, *options: str) -> str:
    """``write-sample``: a partition written by Kafka's own builders (``directory`` named TOPIC-PARTITION)."""
    return run("write-sample", str(directory), *options).stdout
