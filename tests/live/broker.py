"""Run a real Apache Kafka broker (``../shared/kafka-broker``, built from Kafka's source) for live tests.

    kafka-broker start DIR [--config key=value]...   # builds on first use (~1.5 min), prints 127.0.0.1:PORT
    kafka-broker stop DIR                            # SIGTERM, clean shutdown (exit 3 if it had to SIGKILL)

Use from pytest through the session fixture :func:`kafka_broker` (tests/live/conftest.py re-exports it)::

    @pytest.mark.live
    def test_x(kafka_broker):
        Producer({"bootstrap.servers": kafka_broker.bootstrap})

or for a broker of one's own (a test that stops, SIGKILLs or restarts it)::

    with KafkaBroker(workdir, configs=[...]) as broker:
        ...

The build uses ``.venv``'s PySpark jars (``KAFKA_BROKER_JARS``, set here when unset, as ``.ci/run`` does for
the oracle's ``KAFKA_ORACLE_JARS``). The broker writes ``DIR/broker.log`` (log4j), ``DIR/broker.out`` (JVM
stdout/stderr) and keeps its log dir in ``DIR/logs``; when a test that used it fails, the conftest hook adds
the ends of those files and of the start/stop output to the report. If the broker cannot run here at all (no
``../shared/kafka-broker``, no ``java``) the fixture skips with the reason, unless ``TXNLOG_REQUIRE_LIVE=1``,
which turns the skip into a failure (CI).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.live.noida import require_live

__all__ = [
    "BROKER_SCRIPT",
    "SESSION_CONFIGS",
    "BrokerUnavailable",
    "KafkaBroker",
    "attach_broker_logs_on_failure",
    "kafka_broker",
]

ROOT = Path(__file__).resolve().parents[2]
BROKER_SCRIPT = ROOT.parent / "shared" / "kafka-broker" / "kafka-broker"

#: Broker settings of the session broker (on top of kafka-broker's single-node test defaults, README there).
SESSION_CONFIGS: tuple[str, ...] = (
    # Kafka's coordinator aborts a transaction past its timeout on its own, every
    # transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default; TransactionCoordinator
    # .abortTimedOutTransactions). The tests keep SIGKILLed producers' transactions open past short timeouts
    # - the COORDINATOR_TIMEOUT_OVERDUE state `txnlog fence` is for, a coordinator that has not aborted - so
    # the session broker checks once an hour. A test of the coordinator's own abort starts its own broker.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=3600000",
    # A transactional append whose partition no coordinator added (a hanging transaction, tests/live/orphan.py)
    # goes through, as on every broker before KIP-890's verification (3.6); clients' transactions are the same.
    "transaction.partition.verification.enable=false",
    # High watermarks checkpointed every second (ReplicaManager.checkpointHighWatermarks; 5 s by default), as the
    # stop-and-read broker does: a test that copies the running broker's log dir waits for the checkpoint.
    "replica.high.watermark.checkpoint.interval.ms=1000",
)

_TAIL = 4000


class BrokerUnavailable(RuntimeError):
    """The broker cannot run on this machine (no shared/kafka-broker, no java): a reason to skip."""


def _tail(path: Path, n: int = _TAIL) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text if len(text) <= n else "...\n" + text[-n:]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("KAFKA_BROKER_JARS"):
        try:
            import pyspark

            env["KAFKA_BROKER_JARS"] = str(Path(pyspark.__file__).resolve().parent / "jars")
        except ImportError:  # the script then looks for pyspark itself
            pass
    return env


# Stopped at interpreter exit if a caller forgot (or a crash skipped the fixture teardown).
_RUNNING: weakref.WeakSet[KafkaBroker] = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:
    for broker in list(_RUNNING):
        broker.stop(timeout=20)


class KafkaBroker:
    """One single-node KRaft broker on 127.0.0.1 with its files in ``workdir`` (log dir ``workdir/logs``)."""

    def __init__(self, workdir: str | os.PathLike[str], *, configs: Sequence[str] = ()) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.configs = list(configs)
        self.bootstrap = ""
        self.transcript: list[str] = []  # the start/stop commands and what they printed

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def pid(self) -> int | None:
        try:
            return int((self.workdir / "broker.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        if not BROKER_SCRIPT.is_file():
            raise BrokerUnavailable(f"no {BROKER_SCRIPT} (the real Kafka broker for live tests)")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise BrokerUnavailable("no java on PATH (the Kafka broker needs JDK 17+)")
        cmd = [str(BROKER_SCRIPT), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
        self.transcript.append(f"$ {' '.join(cmd)}  -> exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def start(self, timeout: float = 600) -> KafkaBroker:
        """Build if needed (the first start on a machine), format, start; ``bootstrap`` is ``127.0.0.1:PORT``."""
        args = ["start", str(self.workdir)]
        for kv in self.configs:
            args += ["--config", kv]
        r = self._run(args, timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kafka-broker start {self.workdir} failed (exit {r.returncode}):\n{self.report()}")
        self.bootstrap = r.stdout.strip().splitlines()[-1]
        _RUNNING.add(self)
        return self

    def cpu_seconds(self) -> float | None:
        """The broker JVM's CPU time so far (user + system), None when it does not run."""
        pid = self.pid
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 60) -> int:
        """Clean shutdown (SIGTERM, waits): 0, or 3 when the script had to SIGKILL the broker."""
        _RUNNING.discard(self)
        cpu = self.cpu_seconds()
        if cpu is not None:
            self.transcript.append(f"broker pid {self.pid}: {cpu:.1f} s of CPU before the stop")
        try:
            return self._run(["stop", str(self.workdir), "--timeout", str(int(timeout))], timeout + 30).returncode
        except BrokerUnavailable:
            return 0

    def kill(self) -> None:
        """SIGKILL the broker (a crash: no clean-shutdown marker); ``start`` again recovers the log dir."""
        pid = self.pid
        _RUNNING.discard(self)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._run(["stop", str(self.workdir)], 60)  # waits for the process to be gone, tidies broker.pid

    def report(self) -> str:
        """The start/stop transcript and the ends of the broker's logs (for a failed test's report)."""
        parts = ["\n".join(self.transcript)]
        for name in ("broker.log", "broker.out", "format.out"):
            text = _tail(self.workdir / name)
            if text:
                parts.append(f"--- {self.workdir / name} (tail)\n{text}")
        return "\n".join(parts)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"KafkaBroker({self.bootstrap or 'not started'}, {self.workdir})"


#: Brokers started in this session (for the failure-report hook).
SESSION_BROKERS: list[KafkaBroker] = []


def start_or_skip(broker: KafkaBroker) -> KafkaBroker:
    """Start ``broker``; skip (or fail, with ``TXNLOG_REQUIRE_LIVE=1``) where it cannot run."""
    SESSION_BROKERS.append(broker)
    try:
        return broker.start()
    except BrokerUnavailable as exc:
        if require_live():
            pytest.fail(f"Kafka broker unavailable: {exc} (TXNLOG_REQUIRE_LIVE=1)", pytrace=False)
        pytest.skip(f"Kafka broker unavailable: {exc}")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        broker.stop(timeout=20)
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real Kafka broker for the whole session; ``.bootstrap`` is ``"127.0.0.1:PORT"``.

    Tests share it: give each test (module) its own topic and transactional.ids.
    """
    broker = start_or_skip(KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), configs=SESSION_CONFIGS))
    try:
        yield broker
    finally:
        code = broker.stop()
        if code != 0:
            print(f"kafka-broker stop: exit {code} (not a clean shutdown)\n{broker.report()}")


def attach_broker_logs_on_failure(item: pytest.Item, report: pytest.TestReport) -> None:
    """For a conftest's ``pytest_runtest_makereport``: add the brokers' logs to a failed test's report."""
    if report.failed:
        for broker in SESSION_BROKERS:
            report.sections.append((f"kafka broker {broker.bootstrap} ({broker.workdir})", broker.report()))
