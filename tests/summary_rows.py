"""Summary rows of one segment of partition t-0, as the segments source gives them, for tests that merge
fragments themselves (txnlog.rules.transactions)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.rows import SEGMENT_SUMMARY_SCHEMA, batch_of


def segment_summary(
    broker: str, b: dict[str, np.ndarray], frags: dict[str, np.ndarray], keep: np.ndarray | None = None
) -> list[pa.RecordBatch]:
    """The fragment rows of the segment with batch columns ``b`` (``frags``: its fragments; ``keep``: which of
    them, all by default) and its ``segment`` row."""
    base = int(b["base_offset"][0])
    common: dict[str, Any] = {"broker": broker, "topic": "t", "file": f"/{broker}/t-0/{base:020d}.log"}
    f = frags if keep is None else {c: v[keep] for c, v in frags.items()}
    n = len(f["kind"])
    out = []
    if n:
        out.append(
            batch_of(
                SEGMENT_SUMMARY_SCHEMA,
                n,
                {
                    **common,
                    "kind": pa.array(np.where(f["kind"] == 1, "marker", "run").tolist(), pa.string()),
                    "partition": np.zeros(n, np.int32),
                    "file_offset": np.full(n, base, np.int64),
                    **{c: v for c, v in f.items() if c not in ("kind", "control_type")},
                    "control_type": pa.array(f["control_type"].astype(np.int32)),
                },
            )
        )
    segment = {
        **common,
        "kind": "segment",
        "partition": np.zeros(1, np.int32),
        "file_offset": np.full(1, base, np.int64),
        "last_offset": np.array([int(b["last_offset"].max())]),
    }
    out.append(batch_of(SEGMENT_SUMMARY_SCHEMA, 1, segment))
    return out
