"""Reading what the writer wrote with kafka-python's independent decoder (plus tiny spec parsers).

kafka-python 3.0.12 decodes magic 0/1/2 batches, checks CRCs, parses records,
headers and control records, and parses the xerial snappy framing itself. Its
optional codec libraries (python-snappy, lz4, zstandard) are not installed, so
:func:`install_codecs` plugs cramjam's *decompressors* into kafka-python's codec
hooks: framing is still checked by kafka-python (snappy) and by the LZ4/zstd
frame decoders, not by our encoder.

The __transaction_state value and producer-snapshot parsers below are written
from the spec (kafka-formats.md §3.3, §4.1), independently of
``txnlog.brokerlog.encode``.
"""

from __future__ import annotations

import struct
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import cramjam
import google_crc32c
import kafka.codec as kafka_codec
import kafka.record.default_records as kafka_default
import kafka.record.legacy_records as kafka_legacy
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch


def install_codecs() -> None:
    kafka_codec.snappy = types.SimpleNamespace(decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))))
    kafka_codec.has_snappy = lambda: True
    kafka_codec.has_lz4 = lambda: True
    kafka_codec.has_zstd = lambda: True
    kafka_default.lz4_decode = lambda b: bytes(cramjam.lz4.decompress(bytes(b)))
    kafka_default.zstd_decode = lambda b: bytes(cramjam.zstd.decompress(bytes(b)))
    kafka_legacy.lz4_decode = kafka_default.lz4_decode


install_codecs()


def iter_entries(data: bytes):
    """(position, batch) for every complete log entry; kafka-python decodes each entry.

    Framing per spec §1.2: int64 offset, int32 size; stops at a partial tail.
    """
    pos = 0
    n = len(data)
    while pos + 17 <= n:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + size
        if size < 14 or end > n:
            return
        magic = data[pos + 16]
        chunk = data[pos:end]
        if magic >= 2:
            yield pos, DefaultRecordBatch(chunk)
        else:
            yield pos, LegacyRecordBatch(chunk, magic)
        pos = end


def read_log(path: Path) -> list[tuple[int, object]]:
    return list(iter_entries(path.read_bytes()))


@dataclass
class Replay:
    """Producer state replayed from decoded batches (spec §4.3), independently of the writer."""

    open: dict[int, dict] = field(default_factory=dict)  # pid -> txn
    closed: list[dict] = field(default_factory=list)
    markers: Counter = field(default_factory=Counter)
    coordinator_epoch: dict[int, int] = field(default_factory=dict)
    max_timestamp: int = -1
    batches: int = 0
    legacy: int = 0
    last_offset: int = -1
    #: pid -> ProducerStateEntry as DescribeProducers shows it: epoch, last_sequence, last_timestamp,
    #: coordinator_epoch, current_txn_first_offset (-1: none)
    producers: dict[int, dict] = field(default_factory=dict)

    def seed_producers(self, entries: list[dict]) -> None:
        """A loaded snapshot's entries as the producer state (ProducerStateManager.loadFromSnapshot)."""
        for e in entries:
            self.producers[e["producer_id"]] = {
                "epoch": e["epoch"],
                "last_sequence": e["last_sequence"],
                "last_timestamp": e["timestamp"],
                "coordinator_epoch": e["coordinator_epoch"],
                "current_txn_first_offset": e["current_txn_first_offset"],
            }

    def _producer(self, pid: int, epoch: int) -> dict:
        """ProducerStateEntry.empty, then maybeUpdateProducerEpoch: a new epoch clears the batch metadata."""
        e = self.producers.setdefault(
            pid,
            {"epoch": -1, "last_sequence": -1, "last_timestamp": -1, "coordinator_epoch": -1,
             "current_txn_first_offset": -1},
        )  # fmt: skip
        if e["epoch"] != epoch:
            e["epoch"], e["last_sequence"] = epoch, -1
        return e

    def seed_from_snapshot(self, entries: list[dict]) -> None:
        for e in entries:
            if e["current_txn_first_offset"] >= 0:
                self.open[e["producer_id"]] = {
                    "producer_id": e["producer_id"],
                    "epoch": e["epoch"],
                    "first_offset": e["current_txn_first_offset"],
                    "first_timestamp": None,
                    "last_timestamp": e["timestamp"],
                    "last_offset": e["last_offset"],
                }
            self.coordinator_epoch[e["producer_id"]] = e["coordinator_epoch"]

    def feed(self, batch) -> None:
        if isinstance(batch, LegacyRecordBatch):
            self.legacy += 1
            return
        # kafka-python checks a CRC only before a batch's records are iterated.
        assert batch._decompressed or batch.validate_crc()
        self.batches += 1
        self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)
        self.last_offset = batch.last_offset
        pid = batch.producer_id
        if pid < 0:
            return
        if batch.is_control_batch:
            records = list(batch)
            if not records or records[0].type not in (0, 1):
                return
            rec = records[0]
            self.markers["ABORT" if rec.type == 0 else "COMMIT"] += 1
            self.coordinator_epoch[pid] = struct.unpack(">hi", rec.value)[1]
            # ProducerAppendInfo.appendEndTxnMarker: epoch, coordinator epoch, the record's timestamp
            p = self._producer(pid, batch.producer_epoch)
            p.update(coordinator_epoch=self.coordinator_epoch[pid], last_timestamp=rec.timestamp)
            p["current_txn_first_offset"] = -1
            txn = self.open.pop(pid, None)
            if txn is not None:
                txn["marker_offset"] = batch.base_offset
                txn["outcome"] = "ABORT" if rec.type == 0 else "COMMIT"
                txn["marker_epoch"] = batch.producer_epoch
                self.closed.append(txn)
            return
        # ProducerAppendInfo.appendDataBatch: every data batch of a producer id, idempotent or transactional
        p = self._producer(pid, batch.producer_epoch)
        p.update(last_sequence=batch.last_sequence, last_timestamp=batch.max_timestamp)
        if batch.is_transactional and p["current_txn_first_offset"] < 0:
            p["current_txn_first_offset"] = batch.base_offset
        if batch.is_transactional:
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = {
                    "producer_id": pid,
                    "epoch": batch.producer_epoch,
                    "first_offset": batch.base_offset,
                    "first_timestamp": batch.first_timestamp,
                }
            txn["last_timestamp"] = batch.max_timestamp
            txn["last_offset"] = batch.last_offset


def parse_producer_snapshot(data: bytes) -> list[dict]:
    """ProducerSnapshot v1 (spec §4.1); checks version and CRC-32C over [6, end)."""
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == google_crc32c.value(data[6:]), "snapshot CRC"
    (count,) = struct.unpack_from(">i", data, 6)
    assert len(data) == 10 + 46 * count
    names = (
        "producer_id",
        "epoch",
        "last_sequence",
        "last_offset",
        "offset_delta",
        "timestamp",
        "coordinator_epoch",
        "current_txn_first_offset",
    )
    return [dict(zip(names, struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i))) for i in range(count)]


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def parse_txn_log_key(key: bytes) -> str:
    version, n = struct.unpack_from(">hh", key, 0)
    assert version == 0
    return key[4 : 4 + n].decode()


def parse_txn_log_value(value: bytes) -> dict:
    """TransactionLogValue v0/v1 (spec §3.3), unknown tags collected in ``unknown_tags``."""
    version, pid, epoch, timeout, status = struct.unpack_from(">hqhib", value, 0)
    pos = 17
    out = {
        "version": version,
        "producer_id": pid,
        "producer_epoch": epoch,
        "timeout_ms": timeout,
        "state": status,
        "previous_producer_id": -1,
        "next_producer_id": -1,
        "next_producer_epoch": -1,
        "client_transaction_version": 0,
        "unknown_tags": {},
    }
    partitions: list[tuple[str, int]] | None = []
    if version == 0:
        (n,) = struct.unpack_from(">i", value, pos)
        pos += 4
        if n < 0:
            partitions = None
        for _ in range(max(n, 0)):
            (tlen,) = struct.unpack_from(">h", value, pos)
            topic = value[pos + 2 : pos + 2 + tlen].decode()
            pos += 2 + tlen
            (k,) = struct.unpack_from(">i", value, pos)
            ids = struct.unpack_from(f">{k}i", value, pos + 4)
            pos += 4 + 4 * k
            partitions += [(topic, i) for i in ids]
    else:
        n1, pos = _uvarint(value, pos)
        if n1 == 0:
            partitions = None
        for _ in range(max(n1 - 1, 0)):
            t1, pos = _uvarint(value, pos)
            topic = value[pos : pos + t1 - 1].decode()
            pos += t1 - 1
            k1, pos = _uvarint(value, pos)
            ids = struct.unpack_from(f">{k1 - 1}i", value, pos)
            pos += 4 * (k1 - 1)
            tagged, pos = _uvarint(value, pos)
            assert tagged == 0
            partitions += [(topic, i) for i in ids]
    out["partitions"] = partitions
    out["last_update_timestamp"], out["start_timestamp"] = struct.unpack_from(">qq", value, pos)
    pos += 16
    if version >= 1:
        ntags, pos = _uvarint(value, pos)
        last_tag = -1
        for _ in range(ntags):
            tag, pos = _uvarint(value, pos)
            size, pos = _uvarint(value, pos)
            assert tag > last_tag, "tags ascending"
            last_tag = tag
            payload = value[pos : pos + size]
            pos += size
            if tag == 0:
                out["previous_producer_id"] = struct.unpack(">q", payload)[0]
            elif tag == 1:
                out["next_producer_id"] = struct.unpack(">q", payload)[0]
            elif tag == 2:
                out["client_transaction_version"] = struct.unpack(">h", payload)[0]
            elif tag == 3:
                out["next_producer_epoch"] = struct.unpack(">h", payload)[0]
            else:
                out["unknown_tags"][tag] = payload
    assert pos == len(value), "value fully consumed"
    return out


def read_txn_state(log_dirs, partitions=None) -> list[tuple[int, int, str, dict | None]]:
    """(partition, offset, transactional id, value or None) for every record in __transaction_state copies."""
    out = []
    seen = set()
    for d in log_dirs:
        for pdir in sorted(Path(d).glob("__transaction_state-*")):
            p = int(pdir.name.rsplit("-", 1)[1])
            if p in seen:
                continue  # replicas hold the same records
            seen.add(p)
            for seg in sorted(pdir.glob("*.log")):
                for _, batch in read_log(seg):
                    assert batch.validate_crc()
                    for rec in batch:
                        out.append(
                            (
                                p,
                                rec.offset,
                                parse_txn_log_key(rec.key),
                                None if rec.value is None else parse_txn_log_value(rec.value),
                            )
                        )
    return out
