"""txnlog/pipeline/ reads as the job: one module per step, each function, docstring included, under 60 lines
(the steps carry the work), and the package's face only hands names on."""

from __future__ import annotations

import ast
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[1] / "txnlog" / "pipeline"


def _functions(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        f"{path.name}:{node.name}": node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
    }


def test_every_function_in_the_pipeline_is_under_60_lines() -> None:
    lengths = {name: n for path in sorted(PIPELINE.glob("*.py")) for name, n in _functions(path).items()}
    steps = {name.split(":")[1] for name in lengths}
    assert {"run", "decode", "build_tables", "write", "summarize", "plan_inputs"} <= steps
    too_long = {name: n for name, n in lengths.items() if n >= 60}
    assert not too_long, f"functions of 60 lines or more in txnlog/pipeline/: {too_long}"


def test_the_package_face_defines_nothing() -> None:
    assert not _functions(PIPELINE / "__init__.py")
