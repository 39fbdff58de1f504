"""Shared helpers of the benchmarks: sizes, data sets (written once, reused), machine facts, RSS.

Not a product module: benchmarks/*.py import it as ``_common`` (they run as scripts).
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "benchmarks" / "data"  # gitignored
GiB = 1 << 30
MiB = 1 << 20

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``1GiB``, ``64MiB``, ``0.25GiB``, ``1048576`` -> bytes (K/M/G/T alone are binary)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (try 1GiB, 64MiB)")
    number, unit, suffix = float(m.group(1)), m.group(2).lower(), m.group(3).lower()
    power = "kmgt".index(unit) + 1 if unit else 0
    base = 1000 if suffix == "b" and unit else 1024
    return int(number * base**power)


def fmt_size(n: float) -> str:
    if n >= GiB:
        return f"{n / GiB:g} GiB"
    return f"{n / MiB:g} MiB"


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


# --- data sets ------------------------------------------------------------------------------


@dataclass
class DataSet:
    name: str
    root: Path
    params: dict[str, Any]
    truth_path: Path
    write_seconds: float | None  # None when reused

    def truth(self) -> dict[str, Any]:
        return json.loads(self.truth_path.read_text())

    def data_segments(self) -> list[Path]:
        """Every data-partition ``.log`` segment (not ``__transaction_state``), in log order."""
        out = []
        for broker in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for part in sorted(p for p in broker.iterdir() if p.is_dir() and not p.name.startswith("__")):
                out.extend(sorted(part.glob("*.log")))
        return out

    def all_segments(self) -> list[Path]:
        """Every ``.log`` segment, ``__transaction_state`` included (what the job reads, besides snapshots)."""
        return sorted(self.root.glob("*/*/*.log"))


def dataset(name: str, data_dir: Path, *, log=print, mix: str = "bulk", **kwargs: Any) -> DataSet:
    """A data set written to ``data_dir/name`` once and reused while the parameters match.

    ``mix="bulk"``: ``txnlog.brokerlog.scenarios.bulk(**kwargs)`` (few, large transactions);
    ``mix="dense"``: ``txnlog.brokerlog.dense.dense(**kwargs)`` (Kafka Streams exactly-once: ~400,000
    transactions per GiB over 685 partitions; its ground truth keeps every transaction in
    ``transactions.npz`` next to ``ground-truth.json``); ``mix="small"``:
    ``txnlog.brokerlog.small_segments.small_segments(**kwargs)`` (the same traffic over many partitions of small
    segments beside a few hot ones).
    """
    root = data_dir / name
    stamp = root / "bench-params.json"
    truth = root / "ground-truth.json"
    params = {"scenario": mix, **kwargs}
    if stamp.exists() and truth.exists():
        try:
            if json.loads(stamp.read_text()) == json.loads(json.dumps(params)):  # tuples as lists
                return DataSet(name, root, params, truth, None)
        except ValueError:
            pass
    if mix == "bulk":
        from txnlog.brokerlog.scenarios import bulk as writer
    elif mix == "dense":
        from txnlog.brokerlog.dense import dense as writer
    elif mix == "small":
        from txnlog.brokerlog.small_segments import small_segments as writer
    else:
        raise ValueError(f"unknown mix {mix!r} (bulk, dense or small)")

    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    size = f", {fmt_size(kwargs['total_bytes'])}" if "total_bytes" in kwargs else ""
    log(f"writing data set {name} ({mix}{size}) to {root} ...")
    t = time.perf_counter()
    result = writer(root, **kwargs)
    result.write_json(truth)
    elapsed = time.perf_counter() - t
    stamp.write_text(json.dumps(params))
    log(
        f"  {result.bytes_written / 1e6:.0f} MB in {result.files_written} files, {elapsed:.1f} s "
        f"({result.bytes_written / elapsed / 1e6:.0f} MB/s)"
    )
    return DataSet(name, root, params, truth, elapsed)


def drop_page_cache_hint() -> str:
    """The benchmarks read from the page cache (warm); say so instead of dropping caches.

    (Dropping them needs root and disturbs others.)
    """
    return "warm page cache (every measurement reads files the previous pass already read)"


# --- machine ------------------------------------------------------------------------------


def kafka_python_crc_backend() -> str:
    """Which CRC-32C kafka-python's ``validate_crc()`` uses: the C ``crc32c`` package, or its pure-Python fallback.

    The fallback is ~15x slower (96 s instead of ~7 s for a 1 GiB walk on this machine): a baseline
    measured with it would flatter txnlog, so the benchmarks refuse it (``require_fast_kafka_python_crc``).
    """
    try:
        from kafka.record import util

        return "C (crc32c package)" if getattr(util, "crc32c_c", None) is not None else "pure Python"
    except Exception:  # noqa: BLE001
        return "?"


def require_fast_kafka_python_crc() -> None:
    if kafka_python_crc_backend() == "pure Python":
        raise SystemExit(
            "kafka-python would check CRCs in pure Python (the 'crc32c' package is missing): "
            "an unfair baseline. Install the dev extra (pip install -e '.[dev]') and rerun."
        )


def machine_info() -> dict[str, Any]:
    import psutil

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        java = subprocess.run(
            ["java", "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stderr.splitlines()[0]
    except Exception:  # noqa: BLE001
        java = "?"
    versions = {}
    for mod in ("numpy", "numba", "pyspark", "pyarrow", "deltalake", "kafka", "psutil"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            versions[mod] = "?"
    try:
        from txnlog.kafka.crc import BACKEND

        versions["txnlog crc backend"] = BACKEND
    except Exception:  # noqa: BLE001, S110 - an optional fact about the machine
        pass
    versions["kafka-python crc32c"] = kafka_python_crc_backend()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / GiB, 1),
        "python": platform.python_version(),
        "java": java,
        "kernel": platform.release(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": versions,
    }


def peak_rss_mib() -> float:
    """This process's peak RSS so far: VmHWM of /proc/self/status.

    (Not ru_maxrss: it survives fork + exec, so a child started by a big parent reports the parent's peak.)
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / MiB


def run_python(
    code_args: list[str], env: dict[str, str] | None = None, timeout: float = 3600, cwd: Path | None = None
) -> dict[str, Any]:
    """Run ``python <args>`` (this interpreter, in ``cwd``) and parse the last stdout line as JSON."""
    proc = subprocess.run(
        [sys.executable, *code_args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{code_args} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


# --- measuring a fixed commit while others edit the working tree ------------------------------------


def snapshot_checkout(log=print) -> Path:
    """``git archive HEAD`` of this repo under /tmp (read-only for the repo), sharing its .venv.

    The venv's editable install points at this working tree; a ``PYTHONPATH`` entry for the
    snapshot comes first on ``sys.path`` (setuptools' editable finder is appended to
    ``sys.meta_path``), so the job, its Python workers and this process import the snapshot's txnlog.
    Its numba cache (txnlog/kafka/__pycache__) is its own: edits to the working tree cannot wipe it.
    """
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = Path(tempfile_dir()) / f"txnlog-bench-{sha}"
    if not (dest / "spark-submit.sh").exists():
        log(f"snapshot of HEAD {sha} -> {dest}")
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / ".venv").symlink_to(ROOT / ".venv")
        tmp.rename(dest)
    return dest


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def maybe_reexec_in_snapshot(enabled: bool, log=print, code: Path | None = None) -> Path:
    """With ``enabled`` (or a ``code`` checkout), re-run this script with PYTHONPATH = a snapshot of HEAD
    (or ``code``); returns the code root in use."""
    current = os.environ.get("TXNLOG_BENCH_CODE")
    if current:
        return Path(current)
    if code is not None and code.resolve() != ROOT:
        snap = code.resolve()
        if not (snap / "spark-submit.sh").exists() or not (snap / "txnlog").is_dir():
            raise SystemExit(f"--code {code}: not a txnlog checkout")
        if not (snap / ".venv").exists():
            (snap / ".venv").symlink_to(ROOT / ".venv")
    elif not enabled:
        return ROOT
    else:
        snap = snapshot_checkout(log=log)
    env = dict(os.environ)
    env["TXNLOG_BENCH_CODE"] = str(snap)
    env["PYTHONPATH"] = str(snap) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    os.execve(sys.executable, [sys.executable, *sys.argv], env)
    raise AssertionError("unreachable")


def code_version(code: Path) -> str:
    """What is being measured: the commit, and whether the working tree differs from it."""
    if code != ROOT:
        return f"snapshot of HEAD at {code}"
    try:
        sha = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--",
                "txnlog",
                "jobs",
                "conf",
                "spark-submit.sh",
            ],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return f"working tree at {sha}" + (" with uncommitted changes in txnlog/jobs/conf" if dirty else "")
    except Exception:  # noqa: BLE001
        return "working tree"
