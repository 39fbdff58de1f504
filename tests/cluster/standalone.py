"""A Spark standalone cluster on 127.0.0.1 from pip's pyspark: one master, N workers, stopped exactly.

pip's pyspark has no ``start-master.sh``/``start-worker.sh`` (FEASIBILITY.md §4), so each daemon is
``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``, started in a session of its
own (``start_new_session``: ``spark-class`` execs java, so the child's pid is the JVM's and its process
group holds whatever it starts); :meth:`StandaloneCluster.stop` kills exactly those process groups, the
workers first, and waits for them. Readiness: the master's ``/json/`` lists every worker ``ALIVE``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLASS = ROOT / ".venv" / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    def __init__(self, work: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.work = work
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(self.work / "work"))
        return env

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.work / f"{name}.out", "w")  # noqa: SIM115 - closed with the process in stop()
        proc = subprocess.Popen(
            [str(SPARK_CLASS), *args], stdout=log, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
            return json.loads(r.read())

    def start(self, timeout_s: float = 90.0) -> StandaloneCluster:
        """Start the daemons and wait until every worker is ALIVE; on any failure (an interrupt too) stop
        whatever was started before raising: ``__exit__`` does not run when ``__enter__`` raises."""
        try:
            return self._start_all(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start_all(self, timeout_s: float) -> StandaloneCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        for w in range(1, self.workers + 1):
            self._start(
                f"worker{w}",
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(free_port()), "--work-dir", str(self.work / "work" / f"w{w}"),
                self.master_url,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited ({p.returncode}): {(self.work / f'{name}.out').read_text()[-2000:]}"
                    )
            try:
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return self
            except (OSError, ValueError):  # not up yet: refused, or an empty / partial answer while it starts
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the standalone cluster did not come up within {timeout_s:.0f} s (logs in {self.work})")

    def alive_workers(self) -> int:
        """How many workers the master lists ``ALIVE``."""
        return sum(w.get("state") == "ALIVE" for w in self.state().get("workers", []))

    def wait_alive_workers(self, n: int, timeout_s: float = 120.0) -> None:
        """Until the master lists exactly ``n`` workers ``ALIVE`` (a killed worker's connection drops at once,
        and the master removes it then, telling each application that its executors there are lost)."""
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() != n:
            assert time.monotonic() < deadline, f"the master did not list {n} workers alive within {timeout_s:.0f} s"
            time.sleep(0.2)

    def kill_worker(self, n: int) -> int:
        """SIGKILL worker ``n``'s JVM (the pid this class started); returns that pid."""
        p = self.procs[f"worker{n}"]
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        return p.pid

    def stop(self) -> None:
        """Stop exactly the processes started here (their process groups), workers before the master."""
        for name in sorted(self.procs, key=lambda n: n == "master"):
            p = self.procs[name]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(10)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
