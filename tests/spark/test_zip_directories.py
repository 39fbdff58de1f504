"""Spark's worker invalidates the import caches at every task; txnlog's daemon has zip importers re-read their
archive's directory only when the file changed (txnlog.engine.spark.worker_daemon.zip_directories_read_once)."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from txnlog.engine.spark import worker_daemon


def _write(archive: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(archive, "w") as zf:
        for name, text in modules.items():
            zf.writestr(name, text)


def test_a_zip_directory_is_read_again_only_when_the_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "pkgs.zip"
    _write(archive, {"zpkg/__init__.py": "", "zpkg/a.py": "X = 1\n"})
    monkeypatch.syspath_prepend(str(archive))
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    importlib.import_module("zpkg.a")
    reads: list[str] = []
    read_directory = zipimport._read_directory  # type: ignore[attr-defined]

    def counted(path: str) -> dict:
        reads.append(path)
        return read_directory(path)

    monkeypatch.setattr(zipimport, "_read_directory", counted)
    try:
        worker_daemon.zip_directories_read_once()
        first = len(reads)
        assert first >= 2  # the archive's importer and its package's, read once here
        importlib.invalidate_caches()
        importlib.invalidate_caches()
        assert len(reads) == first  # unchanged: not read again
        _write(archive, {"zpkg/__init__.py": "", "zpkg/a.py": "X = 1\n", "zpkg/b.py": "Y = 2\n"})
        importlib.invalidate_caches()
        assert len(reads) >= first + 2  # a new file: every importer of it reads it again
        assert importlib.import_module("zpkg.b").Y == 2
    finally:
        for name in ("zpkg", "zpkg.a", "zpkg.b"):
            sys.modules.pop(name, None)
