"""Capture real client-written record batches as segment files (used by the live test and the script).

Real producers (librdkafka through confluent-kafka, and kafka-python) write to one topic on a
Kafka-protocol server (the real broker in tests; noida-db for the script) in committed, aborted and open transactions, plus
idempotent and plain non-transactional rounds. Each partition is then read with a raw Fetch
(:mod:`tests.live.raw_fetch`, read_uncommitted): the bytes are the producers' v2 batches and the
server's COMMIT/ABORT control batches, unmodified, which is what a broker keeps in a ``.log``
segment. They are written as ``<out>/<topic>-<p>/00000000000000000000.log`` with a ``manifest.json``
that says what was produced.

How the producers are driven (so that the bytes are predictable):

* ``linger.ms``/``linger_ms`` is long (5 s), and each producer flushes once per round, after
  producing all of that round's records: every (producer, round, partition) becomes exactly one
  batch. Values are compressible, so the clients keep the codec (both send a batch uncompressed when
  compression would not make it smaller).
* Rounds are interleaved: in round k every producer produces and flushes, and only then does each
  one commit or abort. So the transactions of different producers overlap in every partition, with
  the markers after all the data of the round, as on a busy broker.
* An aborted transaction is flushed before ``abort_transaction``. Without that flush librdkafka
  purges the unsent messages and, since it registers partitions only when it sends to them, nothing
  at all reaches the log: no data and no ABORT marker.
* A transactional.id is re-initialised in a later stage (same producer id, epoch + 1, sequences
  restart at 0), and one transaction is left open (a hanging transaction) until the capture is done.

Every record value is ``<producer name>|t<round>|p<partition>|r<index>|`` plus padding, so each data
batch can be traced back to its producer and round without trusting any decoder under test.
"""

from __future__ import annotations

import json
import platform
import struct
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cramjam

from tests.live import raw_fetch

__all__ = [
    "CODEC_IDS",
    "Capture",
    "ProducerPlan",
    "Round",
    "default_plans",
    "independent_records",
    "kafka_python_codecs",
    "run_capture",
    "segment_path",
]

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CONFLUENT = "confluent-kafka"
KAFKA_PYTHON = "kafka-python"
COMMIT, ABORT, OPEN, FLUSH = "commit", "abort", "open", "flush"  # FLUSH: a non-transactional round
LINGER_MS = 5000
SEGMENT_NAME = "00000000000000000000.log"
_PAD = "0123456789abcdef" * 8  # 128 compressible bytes per value


@dataclass(frozen=True)
class Round:
    """One transaction (or, for a non-transactional producer, one produce-and-flush round)."""

    outcome: str  # COMMIT | ABORT | OPEN | FLUSH
    partitions: tuple[int, ...]
    records: int  # records per partition


@dataclass
class ProducerPlan:
    name: str  # unique; prefix of every record value
    client: str  # CONFLUENT | KAFKA_PYTHON
    codec: str  # a key of CODEC_IDS
    mode: str  # "transactional" | "idempotent" | "plain"
    rounds: list[Round]
    transactional_id: str | None = None  # transactional mode: defaults to name
    stage: int = 0  # stages run one after the other; a re-initialised transactional.id needs a later stage
    client_version: str = ""

    def __post_init__(self) -> None:
        if self.mode == "transactional" and self.transactional_id is None:
            self.transactional_id = self.name
        assert self.codec in CODEC_IDS, self.codec
        assert all((r.outcome == FLUSH) == (self.mode != "transactional") for r in self.rounds), self.name
        # An open transaction is left behind by dropping the producer; only librdkafka is known to do
        # that without ending it (kafka-python's close() would have to be studied first).
        assert self.client == CONFLUENT or all(r.outcome != OPEN for r in self.rounds), self.name

    @property
    def codec_id(self) -> int:
        return CODEC_IDS[self.codec]

    @property
    def transactional(self) -> bool:
        return self.mode == "transactional"

    def value(self, round_index: int, partition: int, i: int) -> bytes:
        return f"{self.name}|t{round_index}|p{partition}|r{i}|{_PAD}".encode()

    def expected_sequence(self, partition: int) -> list[tuple[str, int]]:
        """This producer's batches in ``partition``, in log order: ("data", records) / ("COMMIT"|"ABORT", 1)."""
        out: list[tuple[str, int]] = []
        for r in self.rounds:
            if partition in r.partitions:
                out.append(("data", r.records))
                if r.outcome in (COMMIT, ABORT):
                    out.append((r.outcome.upper(), 1))
        return out

    def expected_counts(self, partition: int) -> dict[str, int]:
        seq = self.expected_sequence(partition)
        return {
            "data_batches": sum(1 for kind, _ in seq if kind == "data"),
            "records": sum(n for kind, n in seq if kind == "data"),
            "commit_markers": sum(1 for kind, _ in seq if kind == "COMMIT"),
            "abort_markers": sum(1 for kind, _ in seq if kind == "ABORT"),
        }


def kafka_python_codecs() -> list[str]:
    """The codecs kafka-python can write here: it needs python-snappy / lz4 / zstandard (not cramjam)."""
    import importlib.util

    import kafka.codec as kc

    # Look for the libraries themselves: other tests patch kafka.codec.has_* to plug in
    # cramjam *decoders*, which does not let kafka-python's producer *encode*.
    def lib(name: str) -> bool:
        return importlib.util.find_spec(name) is not None

    have = {"none": True, "gzip": kc.has_gzip(), "snappy": lib("snappy"), "lz4": lib("lz4"), "zstd": lib("zstandard")}
    return [c for c, ok in have.items() if ok]


def default_plans(partitions: int = 3) -> list[ProducerPlan]:
    """Every librdkafka codec, every kafka-python codec available, idempotent/plain rounds, an epoch bump, an open txn."""
    assert partitions >= 3
    every = tuple(range(partitions))
    txns = [
        Round(COMMIT, every, 4),
        Round(ABORT, every, 3),
        Round(COMMIT, (0,), 5),
        Round(ABORT, (2,), 2),
        Round(COMMIT, (1, 2), 3),
    ]
    flushes = [Round(FLUSH, every, 4), Round(FLUSH, (0,), 2)]
    plans = [ProducerPlan(f"cfk-{c}", CONFLUENT, c, "transactional", list(txns)) for c in CODEC_IDS]
    plans += [ProducerPlan(f"kp-{c}", KAFKA_PYTHON, c, "transactional", list(txns)) for c in kafka_python_codecs()]
    plans += [
        ProducerPlan("cfk-idempotent-lz4", CONFLUENT, "lz4", "idempotent", list(flushes)),
        ProducerPlan("kp-idempotent-gzip", KAFKA_PYTHON, "gzip", "idempotent", list(flushes)),
        ProducerPlan("cfk-plain-snappy", CONFLUENT, "snappy", "plain", list(flushes)),
        # Stage 1: a second incarnation of cfk-zstd's transactional.id (InitProducerId bumps the epoch).
        ProducerPlan(
            "cfk-zstd-again",
            CONFLUENT,
            "zstd",
            "transactional",
            [Round(COMMIT, every, 2), Round(ABORT, (0,), 1)],
            transactional_id="cfk-zstd",
            stage=1,
        ),
        # Stage 1: the last transaction is never ended: a hanging transaction in partitions 1 and 2.
        ProducerPlan(
            "cfk-open-gzip",
            CONFLUENT,
            "gzip",
            "transactional",
            [Round(COMMIT, (0, 1), 2), Round(OPEN, (1, 2), 3)],
            stage=1,
        ),
    ]
    return plans


# --- driving the clients ---------------------------------------------------------------------------


class _Client:
    """The few operations a round needs, over either client."""

    def __init__(self, plan: ProducerPlan, bootstrap: str, topic: str) -> None:
        self.plan, self.topic = plan, topic
        if plan.client == CONFLUENT:
            import confluent_kafka

            plan.client_version = (
                f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
            )
            conf = {
                "bootstrap.servers": bootstrap,
                "compression.type": plan.codec,
                "linger.ms": LINGER_MS,
                "acks": "all",
                "client.id": plan.name,
                "log_level": 3,  # errors only: librdkafka logs every disconnect at teardown
            }
            if plan.transactional:
                conf["transactional.id"] = plan.transactional_id
            else:
                conf["enable.idempotence"] = plan.mode == "idempotent"
            self.p = confluent_kafka.Producer(conf)
            # The topic's leaders known before the first record: a record produced while librdkafka still waits for
            # them is sent as soon as they arrive, in a batch of its own, whatever linger.ms says.
            self.p.list_topics(topic, timeout=30)
        else:
            import kafka

            plan.client_version = f"kafka-python {kafka.__version__}"
            kw = {
                "bootstrap_servers": bootstrap,
                "compression_type": None if plan.codec == "none" else plan.codec,
                "linger_ms": LINGER_MS,
                "acks": "all",
                "client_id": plan.name,
            }
            if plan.transactional:
                kw["transactional_id"] = plan.transactional_id
            else:
                kw["enable_idempotence"] = plan.mode == "idempotent"
            self.p = kafka.KafkaProducer(**kw)
        self.errors: list[str] = []
        if plan.transactional:
            if plan.client == CONFLUENT:
                self.p.init_transactions(30)
            else:
                self.p.init_transactions()

    def _delivery(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def begin(self) -> None:
        if self.plan.transactional:
            self.p.begin_transaction()

    def produce(self, value: bytes, partition: int) -> None:
        if self.plan.client == CONFLUENT:
            self.p.produce(
                self.topic, value=value, key=self.plan.name.encode(), partition=partition, on_delivery=self._delivery
            )
        else:
            fut = self.p.send(self.topic, value=value, key=self.plan.name.encode(), partition=partition)
            fut.add_errback(lambda e: self.errors.append(repr(e)))

    def flush(self) -> None:
        if self.plan.client == CONFLUENT:
            left = self.p.flush(30)
            if left:
                raise RuntimeError(f"{self.plan.name}: {left} messages not delivered within 30 s")
        else:
            self.p.flush(30)
        if self.errors:
            raise RuntimeError(f"{self.plan.name}: delivery failed: {self.errors}")

    def end(self, outcome: str) -> None:
        if outcome == COMMIT:
            self.p.commit_transaction(30) if self.plan.client == CONFLUENT else self.p.commit_transaction()
        elif outcome == ABORT:
            self.p.abort_transaction(30) if self.plan.client == CONFLUENT else self.p.abort_transaction()

    def close(self) -> None:
        if self.plan.client == CONFLUENT:
            self.p.flush(10)
            if hasattr(self.p, "close"):
                self.p.close()
        else:
            self.p.close(timeout=10)
        self.p = None


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    deadline = time.monotonic() + 30
    while True:  # until Metadata shows every partition with a leader
        with raw_fetch.Connection.to(bootstrap) as conn:
            md = raw_fetch.metadata(conn, [topic])
        parts = md.partitions.get(topic, [])
        if len(parts) == partitions and all(p.leader >= 0 and p.error == 0 for p in parts):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready: {parts}")
        time.sleep(0.05)


def _run_stage(plans: list[ProducerPlan], bootstrap: str, topic: str, keep_open: list[_Client]) -> None:
    clients = [_Client(p, bootstrap, topic) for p in plans]
    for k in range(max(len(p.rounds) for p in plans)):
        active = [(c, c.plan.rounds[k]) for c in clients if k < len(c.plan.rounds)]
        for c, r in active:  # all data of round k first ...
            c.begin()
            for part in r.partitions:
                for i in range(r.records):
                    c.produce(c.plan.value(k, part, i), part)
            c.flush()
        for c, r in active:  # ... then every commit / abort
            c.end(r.outcome)
    for c in clients:
        if any(r.outcome == OPEN for r in c.plan.rounds):
            keep_open.append(c)  # closing could end the transaction; keep it hanging until the fetch is done
        else:
            c.close()


# --- reading records without the decoder under test --------------------------------------------------


def _decompress(codec: int, payload: bytes) -> bytes:
    if codec == 0:
        return payload
    if codec == 1:
        return bytes(cramjam.gzip.decompress(payload))
    if codec == 2:
        if payload.startswith(
            b"\x82SNAPPY\x00"
        ):  # xerial framing (the Java client): 16-byte header, int32-length blocks
            out, pos = bytearray(), 16
            while pos < len(payload):
                (n,) = struct.unpack_from(">i", payload, pos)
                out += bytes(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + n]))
                pos += 4 + n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(payload))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(payload))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(payload))
    raise ValueError(f"codec {codec}")


def independent_records(batch: bytes) -> list:
    """The records of one v2 batch, via cramjam (decompression) and kafka-python (record parsing).

    kafka-python can only decompress what its optional codec libraries allow, so the batch is
    rewritten uncompressed (codec bits cleared, length fixed; the CRC is not checked by iteration).
    """
    from kafka.record.default_records import DefaultRecordBatch

    codec = batch[22] & 0x07
    if codec:
        records = _decompress(codec, batch[61:])
        head = bytearray(batch[:61])
        head[22] &= 0xF8
        struct.pack_into(">i", head, 8, 61 + len(records) - 12)
        batch = bytes(head) + records
    return list(DefaultRecordBatch(batch))


# --- the capture -----------------------------------------------------------------------------------


def segment_path(out: Path, topic: str, partition: int) -> Path:
    return out / f"{topic}-{partition}" / SEGMENT_NAME


@dataclass
class Capture:
    topic: str
    partitions: int
    plans: list[ProducerPlan]
    segments: dict[int, Path]  # partition -> .log path
    fetches: dict[int, raw_fetch.FetchResult]  # read_uncommitted, from offset 0
    committed_fetches: dict[int, raw_fetch.FetchResult]  # read_committed (aborted list, LSO), while the open txn hangs
    manifest: dict = field(default_factory=dict)
    manifest_path: Path | None = None


def _observed(plans: list[ProducerPlan], segments: dict[int, bytes]) -> dict[str, dict]:
    """Per plan: producer id/epoch and counts per partition, read from the bytes (kafka-python + cramjam)."""
    from kafka.record.default_records import DefaultRecordBatch

    by_name = {p.name: p for p in plans}
    out = {p.name: {"producer_ids": set(), "producer_epochs": set(), "partitions": {}} for p in plans}
    owner_of: dict[tuple[int, int], str] = {}  # (producer id, epoch) -> plan name, from data batches
    pending_markers: list[tuple[int, int, int, int]] = []
    for part, raw in segments.items():
        entries, _ = raw_fetch.split_entries(raw)
        for pos, size, _next in entries:
            batch = DefaultRecordBatch(raw[pos : pos + size])
            if batch.is_control_batch:
                (ctl,) = list(batch)
                pending_markers.append((part, batch.producer_id, batch.producer_epoch, ctl.type))
                continue
            name = independent_records(raw[pos : pos + size])[0].value.split(b"|", 1)[0].decode()
            o = out[name]
            o["producer_ids"].add(batch.producer_id)
            o["producer_epochs"].add(batch.producer_epoch)
            counts = o["partitions"].setdefault(
                part, {"data_batches": 0, "records": 0, "commit_markers": 0, "abort_markers": 0}
            )
            counts["data_batches"] += 1
            counts["records"] += batch.records_count
            if by_name[name].transactional:
                owner_of[(batch.producer_id, batch.producer_epoch)] = name
    for part, pid, epoch, ctl_type in pending_markers:
        name = owner_of.get((pid, epoch), f"unknown producer {pid}/{epoch}")
        o = out.setdefault(name, {"producer_ids": {pid}, "producer_epochs": {epoch}, "partitions": {}})
        counts = o["partitions"].setdefault(
            part, {"data_batches": 0, "records": 0, "commit_markers": 0, "abort_markers": 0}
        )
        counts["commit_markers" if ctl_type == 1 else "abort_markers"] += 1
    return out


def _manifest(cap: Capture, server: str, elapsed: float) -> dict:
    raws = {p: path.read_bytes() for p, path in cap.segments.items()}
    observed = _observed(cap.plans, raws)
    producers = []
    for plan in cap.plans:
        obs = observed[plan.name]
        producers.append(
            {
                "name": plan.name,
                "client": plan.client,
                "client_version": plan.client_version,
                "codec": plan.codec,
                "codec_id": plan.codec_id,
                "mode": plan.mode,
                "transactional_id": plan.transactional_id,
                "stage": plan.stage,
                "rounds": [asdict(r) | {"index": k} for k, r in enumerate(plan.rounds)],
                "committed_transactions": sum(r.outcome == COMMIT for r in plan.rounds),
                "aborted_transactions": sum(r.outcome == ABORT for r in plan.rounds),
                "open_transactions": sum(r.outcome == OPEN for r in plan.rounds),
                "expected": {str(p): plan.expected_counts(p) for p in range(cap.partitions)},
                "observed": {
                    "producer_ids": sorted(obs["producer_ids"]),
                    "producer_epochs": sorted(obs["producer_epochs"]),
                    "per_partition": {str(p): c for p, c in sorted(obs["partitions"].items())},
                },
            }
        )
    unknown = sorted(set(observed) - {p.name for p in cap.plans})
    return {
        "what": "Kafka v2 record batches written by real clients, fetched raw (Fetch v4, read_uncommitted) "
        "from a Kafka-protocol server; each .log is one partition from offset 0 to the high watermark.",
        "server": server,
        "python": platform.python_version(),
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "capture_seconds": round(elapsed, 2),
        "topic": cap.topic,
        "partitions": cap.partitions,
        "kafka_python_codecs": kafka_python_codecs(),
        "value_format": "<producer name>|t<round>|p<partition>|r<index>|<128 bytes padding>; key = producer name",
        "segments": [
            {
                "partition": p,
                "path": str(path.relative_to(path.parents[1])),
                "bytes": len(raws[p]),
                "high_watermark": cap.fetches[p].high_watermark,
                "last_stable_offset": cap.committed_fetches[p].last_stable_offset,
                "aborted_transactions_read_committed": [list(a) for a in cap.committed_fetches[p].aborted_transactions],
            }
            for p, path in sorted(cap.segments.items())
        ],
        "producers": producers,
        "unattributed_batches": unknown,
    }


def _await_markers(bootstrap: str, topic: str, partitions: int, plans: list[ProducerPlan]) -> None:
    """Wait until every ended transaction's marker is in its partitions.

    A producer's commit or abort returns once the coordinator has written PrepareCommit / PrepareAbort; the
    markers follow asynchronously (TransactionMarkerChannelManager), so a fetch right after the last stage can
    miss them on a real broker.
    """
    expected = [0] * partitions
    for plan in plans:
        for r in plan.rounds:
            if plan.transactional and r.outcome in (COMMIT, ABORT):
                for part in r.partitions:
                    expected[part] += 1
    deadline = time.monotonic() + 30
    while True:
        seen = []
        for part in range(partitions):
            records = raw_fetch.fetch_partition(bootstrap, topic, part).records
            entries, _ = raw_fetch.split_entries(records)
            # the attributes' low byte (offset 22 of a v2 batch) carries the control flag, 0x20
            seen.append(sum(1 for pos, _, _ in entries if records[pos + 16] >= 2 and records[pos + 22] & 0x20))
        if all(s >= e for s, e in zip(seen, expected, strict=True)):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: markers per partition {seen}, expected {expected}")
        time.sleep(0.1)


def run_capture(
    bootstrap: str,
    out: str | Path,
    *,
    topic: str = "txnlog-real-batches",
    partitions: int = 3,
    plans: Iterable[ProducerPlan] | None = None,
    server: str = "",
    write_manifest: bool = True,
) -> Capture:
    """Produce ``plans`` to a new ``topic``, raw-fetch every partition, write the segments (and manifest)."""
    out = Path(out)
    plans = list(plans) if plans is not None else default_plans(partitions)
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python 3.0's importlib.resources use
        _create_topic(bootstrap, topic, partitions)
        keep_open: list[_Client] = []
        try:
            for stage in sorted({p.stage for p in plans}):
                _run_stage([p for p in plans if p.stage == stage], bootstrap, topic, keep_open)
            _await_markers(bootstrap, topic, partitions, plans)
            fetches = {p: raw_fetch.fetch_partition(bootstrap, topic, p) for p in range(partitions)}
            committed = {
                p: raw_fetch.fetch_partition(bootstrap, topic, p, isolation_level=raw_fetch.READ_COMMITTED)
                for p in range(partitions)
            }
        finally:
            for c in keep_open:  # the open transaction stays open on the server: nothing ends it
                c.p = None
    segments = {}
    for p, f in fetches.items():
        path = segment_path(out, topic, p)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.records)
        segments[p] = path
    cap = Capture(topic, partitions, plans, segments, fetches, committed)
    cap.manifest = _manifest(cap, server, time.monotonic() - started)
    if write_manifest:
        cap.manifest_path = out / "manifest.json"
        cap.manifest_path.write_text(json.dumps(cap.manifest, indent=2) + "\n")
    return cap
