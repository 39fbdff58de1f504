"""The rules and the broker's semantics are tables in, tables out: no module under txnlog/rules or txnlog/broker
imports pyarrow's file modules or calls ``open``, and no function there takes a path or a staging target. The
engine stages and reads files (txnlog.engine.staging); the import contracts in pyproject.toml keep the engine,
Spark and Delta out (import-linter forbids only an external package's top level, hence this test)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "txnlog"
PURE = sorted([*(ROOT / "rules").glob("*.py"), *(ROOT / "broker").glob("*.py")])
FILE_MODULES = ("pyarrow.parquet", "pyarrow.ipc", "pyarrow.fs", "pyarrow.dataset", "pyarrow.csv", "pyarrow.feather")
#: parameter names that say a function reads or writes files, or knows what an engine did
IO_PARAMETERS = {
    "path",
    "uri",
    "scratch",
    "stage",
    "stage_file",
    "writer",
    "sink",
    "records_reduced",
    "fragment_partitions",
}


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


@pytest.mark.parametrize("module", PURE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_rule_opens_no_file_and_takes_no_path(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    imported = {name for name in _imports(tree) if name.startswith(FILE_MODULES)}
    assert not imported, f"{module.name} imports {sorted(imported)}: file I/O belongs to txnlog.engine.staging"
    opens = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "open"]
    assert not opens, f"{module.name} calls open() at lines {opens}"
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            assert not names & IO_PARAMETERS, f"{module.name}:{node.name} takes {sorted(names & IO_PARAMETERS)}"
