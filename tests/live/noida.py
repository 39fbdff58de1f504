"""Run noida-db (a Kafka-protocol server shipped in the ``noida-db`` wheel) for live tests.

    $N start --only kafka --kafka-port PORT --host 127.0.0.1 --data-dir DIR

(shared/FEASIBILITY.md §1). The server binds loopback only, keeps its data in ``DIR`` and stops on
SIGTERM. On Debian 12 it prints ``weak version `GLIBC_2.39' not found`` and works anyway.

Use from pytest through the session fixture :func:`noida` (tests/live/conftest.py re-exports it)::

    @pytest.mark.live
    def test_x(noida):
        Producer({"bootstrap.servers": noida.bootstrap})

or without pytest (scripts)::

    with NoidaServer(workdir) as server:
        print(server.bootstrap)

The server's stdout and stderr go to ``<workdir>/noida-db.log``. When the server cannot start the
error carries the end of that log; when a test that used the fixture fails, the conftest hook adds the
log to the report. If the binary cannot run on this machine at all (not installed, wrong glibc, wrong
architecture) the fixture skips with the reason, unless ``TXNLOG_REQUIRE_LIVE=1`` is set, which
turns that skip into a failure (for CI jobs that must run the live tests).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "NoidaServer",
    "NoidaStartError",
    "NoidaUnavailable",
    "attach_log_on_failure",
    "find_binary",
    "noida",
    "require_live",
]

#: Seconds to wait for the Kafka port to answer ApiVersions.
START_TIMEOUT = 20.0
#: Seconds between SIGTERM and SIGKILL at shutdown.
STOP_TIMEOUT = 10.0
#: Times to try again on a new port when the chosen port was taken before the server bound it.
PORT_RETRIES = 3

_LOG_TAIL = 4000


class NoidaUnavailable(RuntimeError):
    """The noida-db binary is missing or cannot run on this machine (a reason to skip, not a test failure)."""


class NoidaStartError(RuntimeError):
    """The binary ran but the server did not come up (a real failure)."""


def require_live() -> bool:
    """True if live tests must not be skipped (``TXNLOG_REQUIRE_LIVE=1``)."""
    return os.environ.get("TXNLOG_REQUIRE_LIVE", "").strip().lower() in ("1", "true", "yes")


def find_binary() -> Path:
    """The noida-db executable inside the installed ``noida_db`` package, made executable if needed."""
    try:
        import noida_db
    except ImportError as exc:
        raise NoidaUnavailable(f"the noida-db package is not installed ({exc}); pip install noida-db==0.2.3") from exc
    path = Path(noida_db.__file__).resolve().parent / ("noida-db.exe" if os.name == "nt" else "noida-db")
    if not path.is_file():
        raise NoidaUnavailable(f"noida-db binary not found at {path}")
    if not os.access(path, os.X_OK):
        try:
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError:
            # A read-only site-packages: run a private copy instead.
            copy = Path(tempfile.mkdtemp(prefix="noida-bin-")) / path.name
            shutil.copy2(path, copy)
            copy.chmod(0o755)
            path = copy
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers_api_versions(port: int, timeout: float = 1.0) -> bool:
    """True when a Kafka ApiVersions v0 request on ``port`` gets a well-formed answer."""
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(request)) + request)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
            size, correlation, error = struct.unpack(">iih", head)
            return correlation == 1 and error == 0 and size >= 10
    except OSError:
        return False


#: Servers started by the :func:`noida` fixture in this session (for the failure-report hook).
SESSION_SERVERS: list[NoidaServer] = []

# Stopped at interpreter exit if a caller forgot (or a crash skipped the fixture teardown).
_RUNNING: weakref.WeakSet[NoidaServer] = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        server.stop()


class NoidaServer:
    """One noida-db process serving Kafka on 127.0.0.1:<free port>, data in ``workdir/data``."""

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="noida-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "noida-db.log"
        self.port = port
        self.start_timeout = start_timeout
        self.binary: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._attempt_offset = 0
        self._exited_early = False

    # -- facts ------------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` for bootstrap.servers / bootstrap_servers."""
        if self.port is None:
            raise RuntimeError("server not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_text(self, tail: int | None = _LOG_TAIL) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text if tail is None or len(text) <= tail else "...\n" + text[-tail:]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> NoidaServer:
        self.binary = find_binary()
        fixed_port = self.port is not None
        attempts = 1 if fixed_port else PORT_RETRIES
        for attempt in range(1, attempts + 1):
            if not fixed_port:
                self.port = _free_port()
            try:
                self._start_once()
                return self
            except NoidaStartError:
                if attempt == attempts or not self._exited_early:  # a hang is not a port clash: no retry
                    raise
                # Most likely someone took the port between _free_port() and the bind: try another.
                with open(self.log_path, "a") as log:
                    log.write(f"\n--- attempt {attempt} failed; retrying on a new port ---\n")
        raise AssertionError("unreachable")

    def _command(self) -> list[str]:
        return [
            str(self.binary),
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(self.port),
            "--host",
            self.host,
            "--data-dir",
            str(self.data_dir),
        ]

    def _attempt_log(self) -> str:
        """The log written since the current start attempt began."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._attempt_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _log_says_cannot_run(self) -> bool:
        """The dynamic loader or the kernel refused the binary (this attempt's log)."""
        for line in self._attempt_log().splitlines():
            if any(s in line for s in ("error while loading shared libraries", "cannot execute", "Exec format error")):
                return True
            # "weak version `GLIBC_2.39' not found" is only a warning (the binary runs on glibc 2.36);
            # a non-weak missing version is fatal.
            if "version `GLIBC" in line and "not found" in line and "weak version" not in line:
                return True
        return False

    def _start_once(self) -> None:
        cmd = self._command()
        self._attempt_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._exited_early = False
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    start_new_session=True,
                )
            except OSError as exc:  # ENOEXEC, EACCES, a missing loader ...
                raise NoidaUnavailable(f"cannot execute {self.binary}: {exc}") from exc
        _RUNNING.add(self)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                self._exited_early = True
                _RUNNING.discard(self)
                reason = f"noida-db exited with code {code} before serving Kafka on {self.bootstrap}"
                if self._log_says_cannot_run():
                    # Runtime linker failures (e.g. a GLIBC symbol that is required, not weak) land here.
                    raise NoidaUnavailable(f"{reason}; the binary cannot run on this machine:\n{self.log_text()}")
                raise NoidaStartError(f"{reason}. Log {self.log_path}:\n{self.log_text()}")
            if _answers_api_versions(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise NoidaStartError(
            f"noida-db did not answer ApiVersions on {self.bootstrap} within {self.start_timeout:.0f} s. "
            f"Log {self.log_path}:\n{self.log_text()}"
        )

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``STOP_TIMEOUT`` s. Returns the exit code (None if not running)."""
        proc, self.proc = self.proc, None
        _RUNNING.discard(self)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with open(self.log_path, "a") as log:
                    log.write(f"\n--- no exit {STOP_TIMEOUT:.0f} s after SIGTERM: SIGKILL ---\n")
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        # noida-db 0.2.3 runs as one process (no children), so there is nothing else to stop.
        return proc.returncode

    def cleanup(self) -> None:
        """Stop, and remove the working directory if this object created it."""
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> NoidaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running() else "stopped"
        return f"NoidaServer({self.bootstrap if self.port else 'no port'}, {state}, log={self.log_path})"


def start_or_skip(workdir: Path) -> NoidaServer:
    """Start a server; skip the test (or fail, with ``TXNLOG_REQUIRE_LIVE=1``) if noida-db cannot run here."""
    server = NoidaServer(workdir)
    try:
        return server.start()
    except NoidaUnavailable as exc:
        message = f"noida-db unavailable: {exc}"
        if require_live():
            pytest.fail(message + " (TXNLOG_REQUIRE_LIVE=1)", pytrace=False)
        pytest.skip(message)
    except NoidaStartError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoidaServer]:
    """A noida-db Kafka server for the whole session; ``.bootstrap`` is ``"127.0.0.1:PORT"``.

    Tests share it: give each test its own topic and transactional.ids.
    """
    server = start_or_skip(tmp_path_factory.mktemp("noida"))
    SESSION_SERVERS.append(server)
    try:
        yield server
    finally:
        code = server.stop()
        # SIGTERM is the documented way to stop it; anything else means it had died or hung.
        if code not in (0, -signal.SIGTERM, None):
            print(f"noida-db exited with code {code}; log {server.log_path}:\n{server.log_text()}")


def attach_log_on_failure(item: pytest.Item, report: pytest.TestReport) -> None:
    """For a conftest's ``pytest_runtest_makereport``: add the server log to a failed test's report."""
    if report.failed and "noida" in getattr(item, "fixturenames", ()):
        for server in SESSION_SERVERS:
            report.sections.append((f"noida-db log ({server.log_path})", server.log_text()))
