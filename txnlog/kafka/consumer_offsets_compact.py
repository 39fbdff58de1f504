"""Which records of one ``__consumer_offsets`` segment the replay of committed offsets needs, found in compiled
code before any record is copied into Arrow.

The rule (:func:`keep_mask`), per segment and per OffsetCommit key (group bytes, topic, partition): of a key a
producer's batch touched in the segment, every record; of any other key, its last record and its last tombstone.
Why that is enough for :func:`txnlog.rules.consumer_offsets.replay_offsets` (``OffsetMetadataManager.replay``),
whatever the other segments hold:

* of a key's plain commits and tombstones, each replaces what came before, so a dropped plain commit is replaced
  by the later record of its key that is kept;
* a tombstone removes the key's committed offset and the pending transactional ones, so whatever a dropped
  tombstone removed, the kept last tombstone (later) removes too, and nothing written between the two survives
  it either;
* the transactional commits are all kept where they are written, so the markers that end them (never dropped:
  they are no records of a key) find them.

Records that are no well-formed OffsetCommit (other record types, a key or value that does not read) are all
kept, so the decode reports them as it does when nothing is dropped. Keys are found by a hash of their group and
topic bytes and partition, told apart by their bytes.
"""

from __future__ import annotations

import numpy as np

from txnlog.kafka.consumer_offsets_commits import (
    GROUP_LEN,
    GROUP_START,
    PARTITION,
    TOMBSTONE,
    TOPIC_LEN,
    TOPIC_START,
    WIDTH,
    read_commit,
)
from txnlog.kafka.jit import jit

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@jit(inline=True)
def _hash(data, row):
    """FNV-1a of the key's group bytes, its topic bytes and its partition (the lengths mixed in, so the split
    between group and topic counts)."""
    h = _FNV_OFFSET
    for start, length in ((row[GROUP_START], row[GROUP_LEN]), (row[TOPIC_START], row[TOPIC_LEN])):
        for j in range(start, start + length):
            h = (h ^ np.uint64(data[j])) * _FNV_PRIME
        h = (h ^ np.uint64(length + 0x100)) * _FNV_PRIME
    return (h ^ np.uint64(row[PARTITION] & 0xFFFFFFFF)) * _FNV_PRIME


@jit(inline=True)
def _same(a, ra, b, rb):
    """Whether two keys (rows of the walk, their bytes in ``a`` and ``b``) are the same key."""
    if ra[PARTITION] != rb[PARTITION] or ra[GROUP_LEN] != rb[GROUP_LEN] or ra[TOPIC_LEN] != rb[TOPIC_LEN]:
        return False
    for start, other, length in (
        (ra[GROUP_START], rb[GROUP_START], ra[GROUP_LEN]),
        (ra[TOPIC_START], rb[TOPIC_START], ra[TOPIC_LEN]),
    ):
        for j in range(length):
            if a[start + j] != b[other + j]:
                return False
    return True


@jit()
def keep_mask(buf, extra, src, key_start, key_len, value_start, value_len, producer_id):
    """Per record of a segment (its key and value at ``[start, start + len)`` of ``buf``, or of ``extra`` where
    ``src`` is 1; a length -1 for null), whether the replay needs it (the module's rule)."""
    n = key_start.size
    keep = np.ones(n, np.bool_)
    rows = np.zeros((n, WIDTH), np.int64)
    key = np.full(n, -1, np.int64)
    cap = 16
    while cap < 2 * n:
        cap *= 2
    slots = np.full(cap, -1, np.int64)  # a key id per slot
    first = np.empty(n, np.int64)  # per key id: its first record (its bytes)
    hashes = np.empty(n, np.uint64)
    touched = np.zeros(n, np.bool_)
    last = np.empty(n, np.int64)
    last_tomb = np.full(n, -1, np.int64)
    nk = 0
    for i in range(n):
        if key_len[i] < 0:
            continue
        data = buf if src[i] == 0 else extra
        k0, v0 = key_start[i], value_start[i]
        if not read_commit(data, k0, k0 + key_len[i], data, v0, v0 + max(value_len[i], 0), value_len[i] >= 0, rows, i):
            continue
        h = _hash(data, rows[i])
        s = np.int64(h & np.uint64(cap - 1))
        while True:
            k = slots[s]
            if k < 0:
                k = nk
                nk += 1
                slots[s] = k
                first[k], hashes[k] = i, h
                break
            f = first[k]
            if hashes[k] == h and _same(data, rows[i], buf if src[f] == 0 else extra, rows[f]):
                break
            s = (s + 1) & (cap - 1)
        key[i] = k
        last[k] = i
        if producer_id[i] != -1:  # RecordBatch.NO_PRODUCER_ID
            touched[k] = True
        if rows[i, TOMBSTONE]:
            last_tomb[k] = i
    for i in range(n):
        k = key[i]
        if k >= 0 and not touched[k]:
            keep[i] = i == last[k] or i == last_tomb[k]
    return keep
