"""Run a notebook as a user's Jupyter does: a real kernel (nbclient), parameters injected after the cell
tagged ``parameters`` (papermill's convention), figures saved as PNG next to the executed notebook."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VALUES_MARK = "__txnlog_test_values__"


@dataclass
class Executed:
    path: Path  # the executed notebook
    cells: list[Any]  # its code cells, executed
    values: dict[str, Any]  # what the test's last cell printed (removed from the saved notebook)
    figures: list[Path]  # every image/png output, saved as a file

    def text(self) -> str:
        """Everything the cells printed or displayed as text."""
        parts = []
        for c in self.cells:
            for o in c.get("outputs", []):
                parts.append(
                    o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", "")
                )
        return "\n".join(parts)

    def pngs_of(self, source_fragment: str) -> int:
        """How many figures the cell whose source holds ``source_fragment`` displayed."""
        (cell,) = [c for c in self.cells if source_fragment in c.source]
        return sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def execute(notebook: Path, out_dir: Path, params: dict[str, Any], collect: str) -> Executed:
    """Execute ``notebook`` in a python3 kernel with ``params``; ``collect`` is a code cell appended for the
    test whose ``print(json.dumps(...))`` the test gets back as ``values``."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in params.items()))
    injected.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(at + 1, injected)
    nb.cells.append(
        nbformat.v4.new_code_cell(f"import json as _json\nprint({VALUES_MARK!r}, _json.dumps({collect}, default=str))")
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    # the kernel imports this checkout's txnlog, whatever the environment's install points at
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(out_dir)}})
    client.execute(env=env)
    last = nb.cells.pop()
    printed = "".join(o.get("text", "") for o in last.outputs if o["output_type"] == "stream")
    values = json.loads(printed.split(VALUES_MARK, 1)[1])
    path = out_dir / notebook.name
    nbformat.write(nb, path)
    figures = []
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        for j, o in enumerate(cell.get("outputs", [])):
            if "image/png" in o.get("data", {}):
                png = out_dir / f"{notebook.stem}-cell{i:02d}-{j}.png"
                png.write_bytes(base64.b64decode(o["data"]["image/png"]))
                figures.append(png)
    print(f"executed notebook: {path}; figures: {', '.join(str(p) for p in figures)}")
    return Executed(path, [c for c in nb.cells if c.cell_type == "code"], values, figures)
