"""The noida-db helper (used by scripts/capture_real_batches.py; the live tests run on a real Kafka broker):
start, readiness, stop, and the errors it reports when the server cannot run."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from tests.live import noida as nd
from tests.live import raw_fetch
from tests.live.noida import noida  # noqa: F401  (its session fixture, no longer the live tests')

pytestmark = pytest.mark.live


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_session_fixture_serves_kafka(noida: nd.NoidaServer) -> None:  # noqa: F811  (the fixture)
    host, port = noida.bootstrap.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == noida.port and noida.running()
    with raw_fetch.Connection.to(noida.bootstrap) as conn:
        versions = raw_fetch.api_versions(conn)
    assert versions[raw_fetch.API_FETCH][1] >= 4 and versions[raw_fetch.API_METADATA][1] >= 1


def test_start_and_stop_own_server(tmp_path: Path) -> None:
    try:
        server = nd.NoidaServer(tmp_path).start()
    except nd.NoidaUnavailable as exc:
        pytest.skip(str(exc))
    try:
        assert server.running() and _port_open(server.port)
        assert server.log_path.is_file() and "kafka" in server.log_text()
        pid = server.pid
    finally:
        code = server.stop()
    assert code in (0, -signal.SIGTERM), server.log_text()
    assert not server.running() and not _port_open(server.port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert server.stop() is None  # idempotent


def test_binary_that_cannot_execute_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "noida-db"
    fake.write_bytes(b"\x7fELF not really an executable")
    fake.chmod(0o755)
    monkeypatch.setattr(nd, "find_binary", lambda: fake)
    with pytest.raises(nd.NoidaUnavailable, match="cannot execute"):
        nd.NoidaServer(tmp_path / "w").start()


def test_server_that_exits_is_a_start_error_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "noida-db"
    fake.write_text("#!/bin/sh\necho 'bind: address already in use' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(nd, "find_binary", lambda: fake)
    with pytest.raises(nd.NoidaStartError, match="(?s)exited with code 3.*address already in use"):
        nd.NoidaServer(tmp_path / "w", start_timeout=5).start()
    # It tried a fresh port each time.
    assert (tmp_path / "w" / "noida-db.log").read_text().count("retrying on a new port") == nd.PORT_RETRIES - 1


def test_glibc_failure_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A required (not weak) glibc version missing: the loader refuses, the helper says why."""
    fake = tmp_path / "noida-db"
    fake.write_text(
        '#!/bin/sh\necho "$0: /lib/x86_64-linux-gnu/libc.so.6: version \\`GLIBC_2.99\' not found" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(nd, "find_binary", lambda: fake)
    with pytest.raises(nd.NoidaUnavailable, match="GLIBC_2.99"):
        nd.NoidaServer(tmp_path / "w", start_timeout=5).start()


def test_server_that_never_answers_is_stopped_and_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "noida-db"
    fake.write_text("#!/bin/sh\necho 'hanging'\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(nd, "find_binary", lambda: fake)
    server = nd.NoidaServer(tmp_path / "w", start_timeout=1)
    with pytest.raises(nd.NoidaStartError, match="(?s)did not answer ApiVersions.*hanging"):
        server.start()
    assert not server.running()
    assert "retrying" not in server.log_text()
