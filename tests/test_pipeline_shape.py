"""txnlog/pipeline/__init__.py reads as the job in one screen: every function, docstring included, is
under 60 lines; the steps carry the work."""

from __future__ import annotations

import ast
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[1] / "txnlog" / "pipeline" / "__init__.py"


def test_every_function_in_the_pipeline_is_under_60_lines() -> None:
    tree = ast.parse(PIPELINE.read_text(encoding="utf-8"))
    lengths = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
    }
    assert {"run", "decode", "build_tables", "write", "summarize", "plan_inputs"} <= set(lengths)
    too_long = {name: n for name, n in lengths.items() if n >= 60}
    assert not too_long, f"functions of 60 lines or more in {PIPELINE.name}: {too_long}"
