"""The bulk of ``__consumer_offsets``, OffsetCommit records, read in compiled code into Arrow columns.

A partition holds one OffsetCommit record per group, topic and partition committed, so these are the records
whose number grows. :func:`decode_offset_commits` reads the well-formed ones (key type 0/1, value v0-v4 or a
tombstone, UTF-8 strings) the way ``OffsetCommitKey.read`` / ``OffsetCommitValue.read`` do, and marks every
other record for the one general reader (:mod:`txnlog.kafka.consumer_offsets_schema`): other record types,
a key or value that does not read, a version above 4, a string that is not UTF-8. So what the general reader
reports for a bad record is what is reported; the tests check both paths agree on every record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from txnlog.kafka.binary import be_i16, be_i32, be_i64, is_valid_utf8, read_uvarint
from txnlog.kafka.jit import jit
from txnlog.kafka.txn_state_scan import _gather_strings

# columns of the int64 matrix the walk fills, one row per record
_COLS = (
    "ok",
    "record_type",
    "group_start",
    "group_len",
    "topic_start",
    "topic_len",
    "partition",
    "is_tombstone",
    "value_version",
    "committed_offset",
    "leader_epoch",
    "metadata_start",
    "metadata_len",
    "commit_timestamp",
    "expire_timestamp",
)
_C = {name: i for i, name in enumerate(_COLS)}
(_OK, _TYPE, _GS, _GL, _TS, _TL, _PART, _TOMB, _VV, _OFF, _EPOCH, _MS, _ML, _CTS, _ETS) = range(len(_COLS))
#: The width of a row :func:`read_commit` fills, and the column a caller sets to 1 where it read the record.
WIDTH = len(_COLS)
OK = _OK


@jit(inline=True)
def _string(data, p, end, compact):
    """(start, length, next) of an int16-length (or compact) non-null UTF-8 string at data[p:end]; next -1 if not."""
    if compact:
        n, q = read_uvarint(data, p, end)
        if q < 0:
            return 0, 0, -1
        n -= 1
    else:
        if end - p < 2:
            return 0, 0, -1
        n = be_i16(data, p)
        q = p + 2
    if n < 0 or n > end - q or not is_valid_utf8(data, q, q + n):
        return 0, 0, -1
    return q, n, q + n


@jit(inline=True)
def _value(data, p, end, out, i, write):
    """OffsetCommitValue at data[p:end], into row i when ``write``; False if it is not a well-formed v0-v4."""
    if end - p < 2:
        return False
    v = be_i16(data, p)
    if v < 0 or v > 4:
        return False
    if write:
        out[i, _VV] = v
        out[i, _EPOCH] = -1
        out[i, _ETS] = -1
    p += 2
    if end - p < 8:
        return False
    if write:
        out[i, _OFF] = be_i64(data, p)
    p += 8
    if v >= 3:
        if end - p < 4:
            return False
        if write:
            out[i, _EPOCH] = be_i32(data, p)
        p += 4
    s, n, p = _string(data, p, end, v >= 4)
    if p < 0:
        return False
    if write:
        out[i, _MS] = s
        out[i, _ML] = n
    if end - p < 8:
        return False
    if write:
        out[i, _CTS] = be_i64(data, p)
    p += 8
    if v == 1:
        if end - p < 8:
            return False
        if write:
            out[i, _ETS] = be_i64(data, p)
        p += 8
    if v >= 4:  # tagged fields: none known, each skipped
        count, p = read_uvarint(data, p, end)
        for _ in range(count):
            if p < 0:
                return False
            _tag, p = read_uvarint(data, p, end)
            if p < 0:
                return False
            size, p = read_uvarint(data, p, end)
            if p < 0 or size > end - p:
                return False
            p += size
        if p < 0:
            return False
    return True


@jit(inline=True)
def _parse(kdata, kp, kend, vdata, vp, vend, value_valid, out, i, write):
    """The OffsetCommit record whose key is kdata[kp:kend] and value vdata[vp:vend] (a tombstone where not
    ``value_valid``) checked, and into row i of ``out`` (:data:`_COLS`) when ``write``: (well-formed, topic start,
    topic length, partition). Not well-formed: another record type, a key or value that does not read, a version
    above 4, a string that is not UTF-8."""
    if kend - kp < 2:
        return False, 0, 0, 0
    t = be_i16(kdata, kp)
    if t != 0 and t != 1:
        return False, 0, 0, 0
    gs, gl, q = _string(kdata, kp + 2, kend, False)
    if q < 0:
        return False, 0, 0, 0
    ts, tl, q = _string(kdata, q, kend, False)
    if q < 0 or kend - q < 4:
        return False, 0, 0, 0
    partition = be_i32(kdata, q)
    if write:
        out[i, _TYPE] = t
        out[i, _GS], out[i, _GL], out[i, _TS], out[i, _TL] = gs, gl, ts, tl
        out[i, _PART] = partition
        out[i, _TOMB] = 0 if value_valid else 1
    if not value_valid:
        return True, ts, tl, partition
    return _value(vdata, vp, vend, out, i, write), ts, tl, partition


@jit(inline=True)
def read_commit(kdata, kp, kend, vdata, vp, vend, value_valid, out, i):
    """The OffsetCommit record whose key is kdata[kp:kend] and value vdata[vp:vend] (a tombstone where not
    ``value_valid``) into row i of ``out`` (:data:`_COLS`); False if it is not a well-formed one (:func:`_parse`)."""
    return _parse(kdata, kp, kend, vdata, vp, vend, value_valid, out, i, True)[0]


@jit(inline=True)
def check_commit(kdata, kp, kend, vdata, vp, vend, value_valid, scratch):
    """:func:`read_commit`'s checks, nothing written (``scratch``: a row of :data:`_COLS`, untouched): (well-formed,
    topic start, topic length, partition), what deciding whether to keep the record needs."""
    return _parse(kdata, kp, kend, vdata, vp, vend, value_valid, scratch, 0, False)


@jit()
def _walk(kdata, koff, kvalid, vdata, voff, vvalid):
    n = koff.size - 1
    out = np.zeros((n, len(_COLS)), np.int64)
    for i in range(n):
        if kvalid[i] and read_commit(kdata, koff[i], koff[i + 1], vdata, voff[i], voff[i + 1], vvalid[i], out, i):
            out[i, _OK] = 1
    return out


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@jit(inline=True)
def tp_hash(data, start, length, partition):
    """The FNV-1a hash of the topic bytes data[start:start+length] and the partition's four bytes (little end
    first): :func:`topic_partition_hashes`' hash of one key."""
    h = _FNV_OFFSET
    for j in range(start, start + length):
        h = (h ^ np.uint64(data[j])) * _FNV_PRIME
    for k in range(4):
        h = (h ^ np.uint64((partition >> (8 * k)) & 0xFF)) * _FNV_PRIME
    return h


@jit()
def _topic_partition_hashes(data, extra, src, m):
    """Per row of ``m`` read as an OffsetCommit (its ``OK`` column 1), the FNV-1a hash of its topic's bytes (in
    ``data`` where ``src`` is 0, else in ``extra``) and its partition's four bytes; 0 for the other rows."""
    n = m.shape[0]
    out = np.zeros(n, np.uint64)
    for i in range(n):
        if m[i, _OK] != 1:
            continue
        out[i] = tp_hash(data if src[i] == 0 else extra, m[i, _TS], m[i, _TL], m[i, _PART])
    return out


@jit(inline=True)
def _moved(data, out, j, start, length, strings, used):
    """The string at column ``start`` (``length`` its bytes) of row j of ``out``, in ``data``, copied to
    strings[used:] and the column pointed there; the bytes used after it."""
    s, n = out[j, start], out[j, length]
    strings[used : used + n] = data[s : s + n]
    out[j, start] = used
    return used + n


@jit(inline=True)
def keep_commit(data, row, out, j, strings, used):
    """The commit :func:`read_commit` read into row 0 of ``row`` (from ``data``) as row j of ``out``, ``OK`` set,
    a tombstone's value columns 0 (a fresh row's), its strings copied to strings[used:] (which has room for
    them) and their starts pointing there: :func:`commit_columns` builds the rows
    from ``strings`` alone. Returns the bytes of ``strings`` used after them."""
    for c in range(WIDTH):
        out[j, c] = row[0, c]
    out[j, _OK] = 1
    if row[0, _TOMB] != 0:
        for c in range(_VV, WIDTH):
            out[j, c] = 0
    used = _moved(data, out, j, _GS, _GL, strings, used)
    used = _moved(data, out, j, _TS, _TL, strings, used)
    return _moved(data, out, j, _MS, _ML, strings, used)


def joined(commits: list[np.ndarray], strings: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of :func:`keep_commit` from several walks, each with its own strings, as one (rows, strings) for
    :func:`commit_columns`: each walk's string starts moved past the strings of the walks before it."""
    if len(commits) == 1:
        return commits[0], strings[0]
    if not commits:
        return np.zeros((0, WIDTH), np.int64), np.zeros(0, np.uint8)
    m = np.concatenate(commits)
    shift = np.repeat(np.cumsum([0, *(len(s) for s in strings[:-1])]), [len(c) for c in commits])
    for column in (_GS, _TS, _MS):
        m[:, column] += shift
    return m, np.concatenate(strings)


def topic_partition_hashes(m: np.ndarray, data: np.ndarray, extra: np.ndarray, key_src: np.ndarray) -> np.ndarray:
    """Per row of ``m`` (:func:`read_commit`'s rows, their keys' bytes as :func:`commit_columns` finds them), a
    hash of the OffsetCommit key's topic and partition (uint64; 0 where the row is not a well-formed commit):
    equal topic partitions hash equal, so a filter on these hashes keeps every record of a key or none."""
    return _topic_partition_hashes(data, extra, np.ascontiguousarray(key_src), m)


def hashes_of(topic_partitions: list[tuple[str, int]]) -> np.ndarray:
    """The :func:`topic_partition_hashes` of ``topic_partitions`` (topic, partition)."""
    n = len(topic_partitions)
    names = [t.encode() for t, _ in topic_partitions]
    m = np.zeros((n, WIDTH), np.int64)
    lengths = np.array([len(b) for b in names], np.int64)
    m[:, _TS] = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if n else 0
    m[:, _TL] = lengths
    m[:, _PART] = [p for _, p in topic_partitions]
    m[:, _OK] = 1
    data = np.frombuffer(b"".join(names), np.uint8).copy() if n else np.zeros(0, np.uint8)
    return _topic_partition_hashes(data, data, np.zeros(n, np.int64), m)


def _buffers(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, offsets, valid) of a large_binary column, without copying the data."""
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    n = len(arr)
    _, offs, data = arr.buffers()
    offsets = (
        np.frombuffer(offs, np.int64)[arr.offset : arr.offset + n + 1] if offs is not None else np.zeros(1, np.int64)
    )
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return raw, offsets, valid


def _strings(
    data: np.ndarray, extra: np.ndarray, src: np.ndarray, start: np.ndarray, length: np.ndarray, valid=None
) -> tuple[pa.Array, pa.Array]:
    """The byte ranges (in ``data`` where ``src`` is 0, else in ``extra``) as a string column and a large_binary
    one sharing its bytes, null where not ``valid``. The walk checked the strings are UTF-8: not checked again."""
    out, offsets = _gather_strings(data, extra, src, np.ascontiguousarray(start), np.ascontiguousarray(length))
    n = start.size
    bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = 0 if bitmap is None else int(n - valid.sum())
    data_buffer = pa.py_buffer(out)
    binary = pa.Array.from_buffers(
        pa.large_binary(), n, [bitmap, pa.py_buffer(offsets), data_buffer], null_count=nulls
    )  # fmt: skip
    if offsets[-1] >= 2**31:
        return binary.view(pa.large_string()).cast(pa.string()), binary
    text = pa.Array.from_buffers(
        pa.string(), n, [bitmap, pa.py_buffer(offsets.astype(np.int32)), data_buffer], null_count=nulls
    )  # fmt: skip
    return text, binary


def commit_columns(
    m: np.ndarray, data: np.ndarray, extra: np.ndarray, key_src: np.ndarray, value_src: np.ndarray
) -> dict[str, pa.Array]:
    """The columns (by :data:`~txnlog.kafka.consumer_offsets.DECODED_SCHEMA` name) of the OffsetCommit records
    read into the rows of ``m`` by :func:`read_commit`, their keys' bytes in ``data`` where ``key_src`` is 0 (else
    in ``extra``), their values' likewise by ``value_src``."""
    live = m[:, _TOMB] == 0
    group, group_bytes = _strings(data, extra, key_src, m[:, _GS], m[:, _GL])
    topic, _ = _strings(data, extra, key_src, m[:, _TS], m[:, _TL])
    metadata, _ = _strings(data, extra, value_src, m[:, _MS], m[:, _ML], live)
    cols: dict[str, pa.Array] = {
        "record_type": pa.array(m[:, _TYPE].astype(np.int16)),
        "group": group,
        "group_bytes": group_bytes,
        "topic": topic,
        "partition": pa.array(m[:, _PART].astype(np.int32)),
        "is_tombstone": pa.array(~live),
        "metadata": metadata,
    }
    for name, typ in (
        ("value_version", pa.int16()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
    ):
        cols[name] = pa.array(m[:, _C[name]].astype(typ.to_pandas_dtype()), mask=~live)
    return cols


def decode_offset_commits(records: pa.Table) -> tuple[np.ndarray, dict[str, pa.Array]]:
    """(mask of the records read here, their columns by :data:`~txnlog.kafka.consumer_offsets.DECODED_SCHEMA`
    name: the rows of the masked records, in order; the caller adds the batch columns and the others)."""
    kdata, koff, kvalid = _buffers(records.column("key"))
    vdata, voff, vvalid = _buffers(records.column("value"))
    m = _walk(kdata, koff, kvalid, vdata, voff, vvalid)
    ok = m[:, _OK] == 1
    m = m if ok.all() else m[ok]
    n = len(m)
    return ok, commit_columns(m, kdata, vdata, np.zeros(n, np.int64), np.ones(n, np.int64))
