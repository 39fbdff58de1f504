"""What two scans of the same bytes must share, whichever way they were walked."""

from __future__ import annotations

import numpy as np

from txnlog.kafka.record_batch import BATCH_COLUMNS, SegmentScan


def assert_same_scan(a: SegmentScan, b: SegmentScan) -> None:
    assert a.quarantine == b.quarantine
    assert (a.size, a.legacy_entries, a.legacy_bytes, a.zero_padding_bytes, a.overlap_bytes, a.crc_checked) == (
        b.size,
        b.legacy_entries,
        b.legacy_bytes,
        b.zero_padding_bytes,
        b.overlap_bytes,
        b.crc_checked,
    )
    assert list(a.batches) == list(b.batches) == list(BATCH_COLUMNS)
    for name, dtype in BATCH_COLUMNS.items():
        assert a.batches[name].dtype == b.batches[name].dtype == dtype, name
        np.testing.assert_array_equal(a.batches[name], b.batches[name], err_msg=name)
