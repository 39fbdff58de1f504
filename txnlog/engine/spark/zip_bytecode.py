"""Compiled bytecode inside the pyspark.zip of a pip-installed pyspark, written once per install.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process it starts (the data
sources' planners, the workers' daemons), and Python's zipimport compiles a zip's ``.py`` files from source on every
import when the zip holds no ``.pyc``: each such process paid for compiling pyspark again (benchmarks/RESULTS.md,
"Startup"). zipimport uses a ``.pyc`` beside its ``.py`` in the zip when the ``.pyc`` records the ``.py`` entry's
time and size (``zipimport._unmarshal_code``), else it falls back to the source: the file written here can only make
an import faster. Stdlib only: the bootstrap (scripts/bootstrap.sh) runs it before anything else is imported.

    python txnlog/engine/spark/zip_bytecode.py --is-ready   # exit 0 when the zip holds bytecode (or there is none)
    python txnlog/engine/spark/zip_bytecode.py --create     # add it
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import time
import zipfile
from pathlib import Path


def pyspark_zip() -> Path | None:
    """The pyspark.zip of the installed pyspark (found without importing it), or None."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(next(iter(spec.submodule_search_locations))) / "python" / "lib" / "pyspark.zip"
    return found if found.is_file() else None


def has_bytecode(archive: Path) -> bool:
    """Whether ``archive`` holds compiled modules already."""
    with zipfile.ZipFile(archive) as zf:
        return any(name.endswith(".pyc") for name in zf.namelist())


def _pyc(archive: Path, info: zipfile.ZipInfo, source: bytes) -> bytes:
    """The ``.pyc`` zipimport accepts for ``info``'s source: its time as zipimport reads a zip entry's DOS time (in
    local time, ``zipimport._parse_dostime``) and its size."""
    mtime = int(time.mktime((*info.date_time, 0, 0, -1))) & 0xFFFFFFFF
    code = compile(source, os.path.join(archive, info.filename), "exec", dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    return header + mtime.to_bytes(4, "little") + (len(source) & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code)


def add_bytecode(archive: Path) -> int:
    """Rewrite ``archive`` with a ``.pyc`` beside each ``.py`` (atomically: a new file renamed over it); the count."""
    tmp = archive.with_name(archive.name + ".tmp")
    count = 0
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data)
            if info.filename.endswith(".py"):
                try:
                    pyc = _pyc(archive, info, data)
                except SyntaxError:  # left to the source, as before
                    continue
                entry = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
                entry.compress_type = zipfile.ZIP_DEFLATED
                dst.writestr(entry, pyc)
                count += 1
    os.replace(tmp, archive)
    return count


def main(argv: list[str]) -> int:
    archive = pyspark_zip()
    if argv[1:] == ["--is-ready"]:
        return 0 if archive is None or has_bytecode(archive) else 1
    if argv[1:] == ["--create"]:
        if archive is not None and not has_bytecode(archive):
            print(f"txnlog: {add_bytecode(archive)} modules compiled into {archive}", file=sys.stderr)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
