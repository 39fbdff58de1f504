"""The many-small-segments writer: its hot partitions as transaction-dense per byte as its small ones on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnlog.brokerlog.small_segments import small_segments

KiB = 1024


def _transactions_per_byte(root: Path, partitions: dict[str, dict[str, int]]) -> tuple[float, float]:
    """(hot, small): the ground truth's transactions over the ``.log`` bytes on disk, per kind of partition."""
    txns = {"hot": 0, "small": 0}
    size = {"hot": 0, "small": 0}
    for name, counts in partitions.items():
        kind = "hot" if name.startswith("dense-hot") else "small"
        txns[kind] += counts["COMMIT"] + counts["ABORT"]
        size[kind] += sum(f.stat().st_size for f in (root / "broker-1" / name).glob("*.log"))
    return txns["hot"] / size["hot"], txns["small"] / size["small"]


@pytest.mark.parametrize("hot_batch_bytes", [2 * KiB, None])
def test_hot_batches_of_the_small_size(tmp_path: Path, hot_batch_bytes: int | None) -> None:
    """``hot_batch_bytes=None``: both kinds of partition hold the same transactions per byte (the default's hot
    partitions, 2 KiB batches, fewer than the small ones)."""
    r = small_segments(
        tmp_path, partitions=16, segment_bytes=(16 * KiB, 64 * KiB), hot_bytes=2 << 20, hot_segment_bytes=1 << 20,
        hot_batch_bytes=hot_batch_bytes,
    )  # fmt: skip
    hot, small = _transactions_per_byte(tmp_path, r.partitions)
    assert r.open_transactions == 0
    if hot_batch_bytes is None:
        assert 0.9 <= hot / small <= 1.1
    else:
        assert hot / small < 0.85
