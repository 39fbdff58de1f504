"""Counted nouns for the sentences txnlog prints ("1 broker", "3 brokers"): no "(s)" in finished English."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural`` when adding "s" is wrong).

    >>> count(1, "abort"), count(2, "abort"), count(0, "batch", "batches")
    ('1 abort', '2 aborts', '0 batches')
    """
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
