"""The integrity audit's rank-and-pair, compiled (txnlog.rules.integrity_producers): a producer's transactions on a
partition ranked from the newest and paired with the coordinator's decisions of the same rank, by one walk over two
sorted integer arrays. Kafka matches a marker to its transaction by order on the partition, never by epoch
(``TransactionMetadata``, ``WriteTxnMarkers``); docs/integrity.md says why the audit pairs by rank."""

from __future__ import annotations

import numpy as np

from txnlog.kafka.jit import jit

__all__ = ["rank_and_pair"]


@jit()
def rank_and_pair(key: np.ndarray, shift: np.ndarray, their_key: np.ndarray, their_rank: np.ndarray) -> np.ndarray:
    """For each row of ``key`` (sorted so that equal keys are adjacent and ascending, newest first within a key):
    its rank within its key plus ``shift`` (the same for every row of a key), and the row of the decisions
    (``their_key``, ``their_rank``: sorted by key, then rank) with that key and rank, or -1."""
    n, m = key.size, their_key.size
    found = np.full(n, -1, np.int64)
    j, rank = 0, 0
    for i in range(n):
        rank = rank + 1 if i > 0 and key[i] == key[i - 1] else 0
        k, r = key[i], rank + shift[i]
        while j < m and (their_key[j] < k or (their_key[j] == k and their_rank[j] < r)):
            j += 1
        if j < m and their_key[j] == k and their_rank[j] == r:
            found[i] = j
    return found
