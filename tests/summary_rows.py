"""Summary rows of one segment of partition t-0, as the segments source gives them, for tests that merge
fragments themselves (txnlog.rules.transactions)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from txnlog.broker.reconstruct import SUMMARY_FRAGMENT_COLUMNS
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, batch_of, fragment_kinds


def fragment_batch(common: dict[str, Any], frags: dict[str, np.ndarray], file_offset: int) -> pa.RecordBatch:
    """The fragment rows of one segment of partition 0 (``common``: broker, topic, file) that starts at
    ``file_offset``, as the segments source yields them when it does not merge them itself."""
    return batch_of(
        SEGMENT_SUMMARY_SCHEMA,
        len(frags["kind"]),
        {
            **common,
            "kind": fragment_kinds(frags["kind"]),
            "partition": 0,
            "file_offset": file_offset,
            **{c: frags[c] for c in SUMMARY_FRAGMENT_COLUMNS},
            "control_type": frags["control_type"].astype(np.int32),
        },
    )


def segment_summary(
    broker: str, b: dict[str, np.ndarray], frags: dict[str, np.ndarray], keep: np.ndarray | None = None
) -> list[pa.RecordBatch]:
    """The fragment rows of the segment with batch columns ``b`` (``frags``: its fragments; ``keep``: which of
    them, all by default) and its ``segment`` row."""
    base = int(b["base_offset"][0])
    common: dict[str, Any] = {"broker": broker, "topic": "t", "file": f"/{broker}/t-0/{base:020d}.log"}
    f = frags if keep is None else {c: v[keep] for c, v in frags.items()}
    out = [fragment_batch(common, f, base)] if len(f["kind"]) else []
    segment = {
        **common,
        "kind": "segment",
        "partition": np.zeros(1, np.int32),
        "file_offset": np.full(1, base, np.int64),
        "last_offset": np.array([int(b["last_offset"].max())]),
    }
    out.append(batch_of(SEGMENT_SUMMARY_SCHEMA, 1, segment))
    return out
