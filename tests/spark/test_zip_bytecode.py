"""pyspark.zip's bytecode (txnlog.engine.spark.zip_bytecode): zipimport takes the compiled module, and the module
behaves as its source does."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from txnlog.engine.spark.zip_bytecode import add_bytecode, has_bytecode


def _import_from(archive: Path) -> str:
    code = "import zipped.inner as m; print(m.__file__, m.answer(), m.__name__)"
    env = {"PYTHONPATH": str(archive), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_zipimport_takes_the_compiled_module(tmp_path: Path) -> None:
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped/__init__.py", "")
        zf.writestr("zipped/inner.py", "def answer():\n    return 6 * 7\n")
        zf.writestr("zipped/data.txt", "kept as it is")
    before = _import_from(archive)
    assert not has_bytecode(archive)
    assert add_bytecode(archive) == 2
    assert has_bytecode(archive)
    after = _import_from(archive)
    assert before.split()[1:] == after.split()[1:] == ["42", "zipped.inner"]
    assert before.split()[0].endswith("inner.py") and after.split()[0].endswith("inner.pyc")
    with zipfile.ZipFile(archive) as zf:
        assert zf.read("zipped/data.txt") == b"kept as it is"
