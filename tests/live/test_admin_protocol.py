"""find-hanging, abort and the Kafka source on ``__consumer_offsets``, on recorded protocol responses: no server.

noida-db (``tests/live/noida.py``) answers DescribeProducers with no active producers, does not support
WriteTxnMarkers and has no group coordinator writing ``__consumer_offsets``. So the paths that matter most
for a real hanging transaction never run against it: :func:`txnlog.live.hanging.find_hanging_live` with an open
transaction, ``txnlog abort --execute`` (:func:`txnlog.live.abort.revalidate_abort` then
:func:`txnlog.live.abort.send_abort`), and the Kafka source reading the transactional offset commits of a
consume-transform-produce application. These tests stand in for those with **recorded responses**: every
answer is a real kafka-python 3.0.12 message (``DescribeProducersResponse``, ``ListTransactionsResponse``,
``DescribeTransactionsResponse``, ``FindCoordinatorResponse``, ``WriteTxnMarkersResponse``,
``MetadataResponse``, ``ApiVersionsResponse``, ``FetchResponse``) encoded to wire bytes, framed with the
request's correlation id, and parsed by kafka-python's own connection (``kafka.net.connection``,
``kafka.protocol.parser.KafkaProtocol``) exactly as it parses a socket's bytes.

The double, :class:`WireBrokers`, replaces the lowest layer there is short of a socket:
``KafkaConnectionManager._build_transport`` (the TCP/SSL transport). Everything above it is kafka-python's
and txnlog's own code: ``KafkaAdminClient`` and ``KafkaNetClient``, the ApiVersions handshake, version
negotiation against a Kafka 3.9 broker's ApiVersions (kafka-python's recording of one), Metadata and leader
routing, FindCoordinator, and every request's encoding. The double decodes each request from the bytes the
client wrote (so a test checks what a broker would read: producer id, epoch, coordinator epoch, the
transaction result) and records it. (The fetch double in ``tests/live/test_fetch_protocol.py`` stands in
for the whole ``KafkaNetClient``, whose ``send_and_receive`` the fetch client calls; the admin client does
not go through that method but through ``KafkaConnectionManager.send`` futures on its IO thread, so this
double sits one layer lower and serves both clients.)

What each test pins, against the Kafka classes that define the behaviour:

* find-hanging: ``org.apache.kafka.tools.TransactionsCommand.FindHangingTransactionsCommand``
  (DescribeProducers of the partitions -> candidates open longer than the max transaction timeout ->
  ListTransactions filtered by their producer ids -> DescribeTransactions -> ``filterHangingTransactions``:
  hanging unless the coordinator's transaction for that id lists the partition). The test transcribes
  that filter and runs it on the responses as decoded from the wire: txnlog's HANGING rows are exactly the
  tool's rows (topic, partition, producer id/epoch, coordinator epoch, start offset, last timestamp,
  duration), with txnlog's reason for each (Empty / CompleteAbort: COORDINATOR_COMPLETED; no listing:
  NO_TRANSACTIONAL_ID; TRANSACTIONAL_ID_NOT_FOUND: TRANSACTIONAL_ID_EXPIRED; Ongoing elsewhere:
  PARTITION_NOT_IN_TRANSACTION) and the abort command; an Ongoing transaction that lists the partition is
  no finding (the tool's too), and txnlog adds LATE where it is past its timeout.
* abort: ``AbortTransactionCommand`` (``--start-offset``: DescribeProducers, the producer whose
  ``currentTransactionStartOffset`` matches, ``coordinatorEpoch().orElse(0)``) and
  ``org.apache.kafka.clients.admin.internals.AbortTransactionHandler`` (one ``WriteTxnMarkersRequest``
  marker: producer id, producer epoch, coordinator epoch, ``transactionResult = false``, the one
  topic-partition, sent to the partition leader (``PartitionLeaderStrategy``)); an error code in the
  response (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, CLUSTER_AUTHORIZATION_FAILED,
  NOT_LEADER_OR_FOLLOWER) is an error of ``txnlog abort``, never "aborted".
* ``__consumer_offsets``: the group coordinator writes a transactional offset commit
  (``GroupMetadataManager.storeOffsets``: producer id/epoch, base sequence 0, transactional) as
  ``OffsetCommitKey`` v1 / ``OffsetCommitValue`` v3 records (``GroupCoordinatorRecordSerde``; schemas in
  ``group-coordinator/src/main/resources/common/message/``) and the transaction coordinator's
  WriteTxnMarkers ends it with a COMMIT/ABORT marker there. The Kafka source
  (:func:`txnlog.engine.spark.live_batches.read_ranges`) reads that partition like any topic: the same run and
  marker rows as for a data topic with the same batches, and the producer that never committed is an open
  transaction of ``__consumer_offsets-<n>`` (:func:`txnlog.rules.transactions.transactions_of_summary`).
"""

from __future__ import annotations

import io
import struct
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from txnlog.broker import classify
from txnlog.broker.classify import Reason, Verdict
from txnlog.brokerlog.encode import (
    RecordSpec,
    encode_end_txn_marker_batch,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_record_batch,
)
from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC, ControlType, transaction_state_partition_for
from txnlog.live import abort as live_abort
from txnlog.live import admin as live
from txnlog.live import hanging as live_hanging
from txnlog.live.fetch import READ_UNCOMMITTED, LiveRange
from txnlog.ops import cli

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    from kafka.net.manager import KafkaConnectionManager
    from kafka.protocol.admin.transactions import (
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse
    from kafka.record import MemoryRecords

#: the ApiVersions of a Kafka 3.9 broker, as kafka-python recorded them (``broker_version_data``)
KAFKA_3_9_API_VERSIONS = BROKER_API_VERSIONS[(3, 9)]
_MESSAGES = (
    (ApiVersionsRequest, ApiVersionsResponse),
    (MetadataRequest, MetadataResponse),
    (FindCoordinatorRequest, FindCoordinatorResponse),
    (DescribeProducersRequest, DescribeProducersResponse),
    (ListTransactionsRequest, ListTransactionsResponse),
    (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    (FetchRequest, FetchResponse),
)
REQUEST_FOR = {req.API_KEY: req for req, _ in _MESSAGES}
RESPONSE_FOR = {req.API_KEY: resp for req, resp in _MESSAGES}
BROKERS = (1, 2, 3)
BOOTSTRAP = "b1:9092"


# --------------------------------------------------------------------------------------------
# The double: brokers behind kafka-python's transport interface, speaking wire bytes
# --------------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request as the broker read it (decoded from the client's bytes) and the recorded answer
    (decoded back from the bytes the client was sent)."""

    node: int | str
    request: Any
    response: Any
    request_wire: bytes
    response_wire: bytes

    @property
    def api(self) -> str:
        return str(type(self.request).__name__).removesuffix("Request")

    @property
    def version(self) -> int:
        return int(self.request.version)


#: (node the request reached, the request as decoded from the wire) -> the response message, unencoded
Answer = Callable[[Any, Any], Any]


@dataclass
class WireBrokers:
    """The cluster a test scripts: ``answers`` maps an API name (``"Metadata"``) to an :data:`Answer`."""

    answers: dict[str, Answer]
    #: what every broker answers ApiVersions with: {api key: (min version, max version)}
    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=lambda: dict(KAFKA_3_9_API_VERSIONS))
    exchanges: list[Exchange] = field(default_factory=list)
    connections: list[int | str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, node: int | str, frame: bytes) -> bytes:
        api_key, version = struct.unpack_from(">hh", frame, 4)
        request_cls = REQUEST_FOR[api_key]
        request = request_cls.decode(frame, version=version, header=True, framed=True)
        api = str(request_cls.__name__).removesuffix("Request")
        response = (
            api_versions_response(self.api_versions) if api == "ApiVersions" else self.answers[api](node, request)
        )
        response_cls = RESPONSE_FOR[api_key]
        assert isinstance(response, response_cls), f"{type(response).__name__} recorded for {api}"
        response.API_VERSION = version
        response.with_header(correlation_id=request.header.correlation_id)
        wire = bytes(response.encode(header=True, framed=True))
        decoded = response_cls.decode(wire, version=version, header=True, framed=True)
        with self._lock:
            self.exchanges.append(Exchange(node, request, decoded, bytes(frame), wire))
        return wire

    def sent(self, api: str) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.api == api]

    def apis(self) -> list[str]:
        with self._lock:
            return [e.api for e in self.exchanges if e.api not in ("ApiVersions", "Metadata")]


class WireTransport:
    """kafka-python's transport interface (``kafka.net.transport.KafkaTCPTransport``) over :class:`WireBrokers`:
    frames the client writes are answered, the answers handed to ``data_received`` on the IO loop."""

    def __init__(self, net: Any, brokers: WireBrokers, node: Any):
        self._net, self._brokers = net, brokers
        self.node_id, self.host, self.port = node.node_id, node.host, node.port
        self._protocol: Any = None
        self._buffer = b""
        self._closed = False
        self.last_read = self.last_write = time.monotonic()

    @property
    def last_activity(self) -> float:
        return max(self.last_read, self.last_write)

    def get_protocol(self) -> Any:
        return self._protocol

    def set_protocol(self, protocol: Any) -> None:
        self._protocol = protocol

    def resume_reading(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self._closed

    def getPeer(self) -> tuple[str, int]:  # noqa: N802 - kafka-python's name
        return (self.host, self.port)

    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    def write(self, data: bytes) -> None:
        if self._closed:
            raise RuntimeError("Transport closed for writes")
        self.last_write = time.monotonic()
        self._buffer += bytes(data)
        while len(self._buffer) >= 4:
            (size,) = struct.unpack_from(">i", self._buffer)
            if len(self._buffer) < 4 + size:
                break
            frame, self._buffer = self._buffer[: 4 + size], self._buffer[4 + size :]
            wire = self._brokers.answer(self.node_id, frame)
            self._net.call_soon_threadsafe(lambda wire=wire: self._deliver(wire))

    def _deliver(self, wire: bytes) -> None:
        if not self._closed and self._protocol is not None:
            self.last_read = time.monotonic()
            self._protocol.data_received(wire)

    def close(self) -> None:
        self.abort(None)

    def abort(self, error: Exception | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.connection_lost(error)


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Callable[..., WireBrokers]:
    """Install a :class:`WireBrokers` as every connection's transport (admin and fetch clients alike)."""

    def install(answers: dict[str, Answer], **kw: Any) -> WireBrokers:
        brokers = WireBrokers(answers, **kw)

        async def build(manager: Any, node: Any, timeout_at: float | None = None) -> WireTransport:
            brokers.connections.append(node.node_id)
            return WireTransport(manager._net, brokers, node)

        monkeypatch.setattr(KafkaConnectionManager, "_build_transport", build)
        return brokers

    return install


@pytest.fixture
def admin_of() -> Iterator[Callable[[], Any]]:
    """txnlog's own admin client (:func:`txnlog.live.admin.admin_client`), closed after the test."""
    made: list[Any] = []

    def make() -> Any:
        made.append(live.admin_client(BOOTSTRAP))
        return made[-1]

    yield make
    for a in made:
        a.close()


# --------------------------------------------------------------------------------------------
# Recorded responses
# --------------------------------------------------------------------------------------------


def api_versions_response(versions: Mapping[int, tuple[int, int]]) -> Any:
    V = ApiVersionsResponse.ApiVersion
    keys = [V(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(versions.items())]
    return ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)


def metadata_answer(leaders: Mapping[tuple[str, int], int]) -> Answer:
    """Metadata of a 3-broker cluster whose partitions have the given leaders (the request's topics only)."""
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    topics = sorted({t for t, _ in leaders})

    def answer(node: Any, request: Any) -> Any:
        asked = topics if request.topics is None else [t.name for t in request.topics]
        out = [
            T(
                error_code=0 if name in topics else Errors.UnknownTopicOrPartitionError.errno,
                name=name,
                topic_id=uuid.UUID(int=1 + topics.index(name)) if name in topics else uuid.UUID(int=0),
                is_internal=name.startswith("__"),
                partitions=[
                    P(
                        error_code=0,
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=3,
                        replica_nodes=list(BROKERS),
                        isr_nodes=list(BROKERS),
                        offline_replicas=[],
                    )
                    for (t, p), leader in sorted(leaders.items())
                    if t == name
                ],
            )
            for name in asked
        ]
        brokers = [
            MetadataResponse.MetadataResponseBroker(node_id=n, host=f"b{n}", port=9092, rack=None) for n in BROKERS
        ]
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id="recorded", controller_id=1, topics=out)

    return answer


@dataclass(frozen=True)
class Producer:
    """One active producer of a partition, as ``ProducerStateManager`` reports it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_timestamp: int
    coordinator_epoch: int = -1
    txn_start_offset: int = -1  # -1: no open transaction
    last_sequence: int = 9


def describe_producers_answer(
    leaders: Mapping[tuple[str, int], int], producers: Mapping[tuple[str, int], list[Producer]]
) -> Answer:
    """DescribeProducers as ``ReplicaManager.activeProducerState``: a partition answered by another broker
    than its leader is NOT_LEADER_OR_FOLLOWER."""
    R = DescribeProducersResponse.TopicResponse
    P = R.PartitionResponse
    S = P.ProducerState

    def answer(node: Any, request: Any) -> Any:
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partition_indexes:
                if leaders.get((t.name, p)) != node:
                    parts.append(
                        P(partition_index=p, error_code=Errors.NotLeaderForPartitionError.errno, active_producers=[])
                    )
                    continue
                states = [
                    S(
                        producer_id=s.producer_id,
                        producer_epoch=s.producer_epoch,
                        last_sequence=s.last_sequence,
                        last_timestamp=s.last_timestamp,
                        coordinator_epoch=s.coordinator_epoch,
                        current_txn_start_offset=s.txn_start_offset,
                    )
                    for s in producers.get((t.name, p), [])
                ]
                parts.append(P(partition_index=p, error_code=0, error_message=None, active_producers=states))
            topics.append(R(name=t.name, partitions=parts))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)

    return answer


@dataclass(frozen=True)
class Txn:
    """One transactional.id's coordinator state (``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's name: Empty, Ongoing, CompleteAbort, ...
    coordinator: int
    partitions: tuple[tuple[str, int], ...] = ()
    timeout_ms: int = 60_000
    start_ms: int = -1
    #: the id expired between ListTransactions and DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND
    gone: bool = False


def coordinator_answers(txns: list[Txn]) -> dict[str, Answer]:
    """FindCoordinator (TRANSACTION keys, v4+ batched), ListTransactions (each broker its own ids, filtered
    by producer id as ``TransactionStateManager.listTransactionStates``) and DescribeTransactions (asked of
    the coordinator the client found)."""
    by_id = {t.transactional_id: t for t in txns}

    def find(node: Any, request: Any) -> Any:
        C = FindCoordinatorResponse.Coordinator
        assert request.key_type == 1  # CoordinatorType.TRANSACTION
        coords = [
            C(key=k, node_id=by_id[k].coordinator, host=f"b{by_id[k].coordinator}", port=9092, error_code=0)
            for k in request.coordinator_keys
        ]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coords)

    def listing(node: Any, request: Any) -> Any:
        S = ListTransactionsResponse.TransactionState
        pids = set(request.producer_id_filters)
        states = [
            S(transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state)
            for t in txns
            if t.coordinator == node and (not pids or t.producer_id in pids)
        ]
        return ListTransactionsResponse(
            throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=states
        )

    def describe(node: Any, request: Any) -> Any:
        S = DescribeTransactionsResponse.TransactionState
        D = S.TopicData
        out = []
        for tid in request.transactional_ids:
            t = by_id.get(tid)
            if t is None or t.gone:
                out.append(
                    S(
                        error_code=Errors.TransactionalIdNotFoundError.errno,
                        transactional_id=tid,
                        transaction_state="",
                        topics=[],
                    )
                )
                continue
            assert t.coordinator == node, f"{tid} asked of broker {node}, its coordinator is {t.coordinator}"
            topics = [
                D(topic=topic, partitions=sorted(p for tt, p in t.partitions if tt == topic))
                for topic in sorted({tt for tt, _ in t.partitions})
            ]
            out.append(
                S(
                    error_code=0,
                    transactional_id=tid,
                    transaction_state=t.state,
                    transaction_timeout_ms=t.timeout_ms,
                    transaction_start_time_ms=t.start_ms,
                    producer_id=t.producer_id,
                    producer_epoch=t.producer_epoch,
                    topics=topics,
                )
            )
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)

    return {"FindCoordinator": find, "ListTransactions": listing, "DescribeTransactions": describe}


def write_txn_markers_answer(error: int = 0, *, markers: bool = True) -> Answer:
    """WriteTxnMarkers as ``KafkaApis.handleWriteTxnMarkersRequest``: one result per marker and partition."""
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult

    def answer(node: Any, request: Any) -> Any:
        results = [
            R(
                producer_id=m.producer_id,
                topics=[
                    T(name=t.name, partitions=[P(partition_index=p, error_code=error) for p in t.partition_indexes])
                    for t in m.topics
                ],
            )
            for m in request.markers
        ]
        return WriteTxnMarkersResponse(markers=results if markers else [])

    return answer


# --------------------------------------------------------------------------------------------
# A cluster with open transactions (the find-hanging and abort scenes)
# --------------------------------------------------------------------------------------------

TOPIC = "orders"
MINUTE = 60_000
HOUR = 60 * MINUTE
MAX_TIMEOUT = 15 * MINUTE  # transaction.max.timeout.ms (the tool's --max-transaction-timeout 15)
LEADERS = {(TOPIC, p): BROKERS[p % 3] for p in range(7)}


def scene(now: int) -> tuple[dict[tuple[str, int], list[Producer]], list[Txn]]:
    """Seven partitions, each showing one way an open transaction relates to its coordinator."""
    producers = {
        # no transactional.id has producer 5001 any more: NO_TRANSACTIONAL_ID (and a producer with nothing open)
        (TOPIC, 0): [
            Producer(5001, 3, now - 2 * HOUR, coordinator_epoch=4, txn_start_offset=120),
            Producer(5006, 0, now - 3 * HOUR, coordinator_epoch=4),
        ],
        # the coordinator finished (CompleteAbort) without this partition's marker: COORDINATOR_COMPLETED
        (TOPIC, 1): [Producer(5002, 0, now - 3 * HOUR, coordinator_epoch=7, txn_start_offset=40)],
        # Ongoing and listing this partition, within its timeout: no finding (the tool's filter too)
        (TOPIC, 2): [Producer(5003, 1, now - 20 * MINUTE, coordinator_epoch=2, txn_start_offset=77)],
        # Empty: COORDINATOR_COMPLETED; and an open transaction idle for only a minute: no candidate
        (TOPIC, 3): [
            Producer(5004, 2, now - 90 * MINUTE, coordinator_epoch=-1, txn_start_offset=300),
            Producer(5005, 0, now - MINUTE, coordinator_epoch=1, txn_start_offset=310),
        ],
        # listed, then TRANSACTIONAL_ID_NOT_FOUND when described: TRANSACTIONAL_ID_EXPIRED
        (TOPIC, 4): [Producer(5007, 0, now - 5 * HOUR, coordinator_epoch=3, txn_start_offset=12)],
        # the id's Ongoing transaction is on another partition: PARTITION_NOT_IN_TRANSACTION
        (TOPIC, 5): [Producer(5008, 6, now - 4 * HOUR, coordinator_epoch=9, txn_start_offset=555)],
        # Ongoing and listing this partition but 30 min past its 15 min timeout: LATE (the tool: not hanging)
        (TOPIC, 6): [Producer(5009, 0, now - 40 * MINUTE, coordinator_epoch=2, txn_start_offset=900)],
    }
    txns = [
        Txn("billing-7", 5002, 0, "CompleteAbort", coordinator=2),
        Txn(
            "etl-3",
            5003,
            1,
            "Ongoing",
            coordinator=2,
            partitions=((TOPIC, 2),),
            timeout_ms=HOUR,
            start_ms=now - 20 * MINUTE,
        ),
        Txn("idle-4", 5004, 2, "Empty", coordinator=3),
        Txn("short-1", 5005, 0, "Ongoing", coordinator=1, partitions=((TOPIC, 3),), start_ms=now - MINUTE),
        Txn("gone-5", 5007, 0, "CompleteCommit", coordinator=3, gone=True),
        Txn(
            "mover-6",
            5008,
            6,
            "Ongoing",
            coordinator=1,
            partitions=((TOPIC, 0),),
            timeout_ms=HOUR,
            start_ms=now - 5 * MINUTE,
        ),
        Txn(
            "slow-8",
            5009,
            0,
            "Ongoing",
            coordinator=2,
            partitions=((TOPIC, 6),),
            timeout_ms=MAX_TIMEOUT,
            start_ms=now - 45 * MINUTE,
        ),
    ]
    return producers, txns


def scene_answers(now: int, *, markers: Answer | None = None) -> dict[str, Answer]:
    producers, txns = scene(now)
    return {
        "Metadata": metadata_answer(LEADERS),
        "DescribeProducers": describe_producers_answer(LEADERS, producers),
        **coordinator_answers(txns),
        "WriteTxnMarkers": markers or write_txn_markers_answer(),
    }


# --------------------------------------------------------------------------------------------
# kafka-transactions.sh find-hanging, transcribed (the oracle)
# --------------------------------------------------------------------------------------------


def tool_find_hanging(brokers: WireBrokers, now: int, max_timeout_ms: int) -> set[tuple[Any, ...]]:
    """``FindHangingTransactionsCommand`` (``collectCandidateOpenTransactions``, ``lookupTransactionalIds``,
    ``describeTransactions``, ``filterHangingTransactions``) over the responses as the client decoded them;
    the printed columns: Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch, StartOffset,
    LastTimestamp, Duration(min)."""
    candidates = [
        (t.name, p.partition_index, s)
        for e in brokers.sent("DescribeProducers")
        for t in e.response.topics
        for p in t.partitions
        for s in p.active_producers
        if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms
    ]
    pids = {s.producer_id for _, _, s in candidates}
    tids = {
        ts.producer_id: ts.transactional_id
        for e in brokers.sent("ListTransactions")
        for ts in e.response.transaction_states
        if ts.producer_id in pids
    }
    descriptions: dict[str, set[str] | None] = {}
    for e in brokers.sent("DescribeTransactions"):
        for ts in e.response.transaction_states:
            if ts.error_code == Errors.TransactionalIdNotFoundError.errno:
                descriptions[ts.transactional_id] = None
            elif ts.error_code == 0:
                descriptions[ts.transactional_id] = {f"{d.topic}-{p}" for d in ts.topics for p in d.partitions}
    hanging = set()
    for topic, partition, s in candidates:
        tid = tids.get(s.producer_id)
        listed = descriptions.get(tid) if tid is not None else None
        if listed is None or f"{topic}-{partition}" not in listed:
            hanging.add(
                (
                    topic,
                    partition,
                    s.producer_id,
                    s.producer_epoch,
                    s.coordinator_epoch,  # coordinatorEpoch().orElse(-1): -1 on the wire is empty
                    s.current_txn_start_offset,
                    s.last_timestamp,
                    (now - s.last_timestamp) // MINUTE,  # TimeUnit.MILLISECONDS.toMinutes
                )
            )
    return hanging


def tool_columns(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        row["topic"],
        row["partition"],
        row["producer_id"],
        row["producer_epoch"],
        row["coordinator_epoch"],
        row["start_offset"],
        int(row["last_timestamp"].timestamp() * 1000),
        row["idle_ms"] // MINUTE,
    )


# --------------------------------------------------------------------------------------------
# DescribeProducers -> find-hanging (KIP-664)
# --------------------------------------------------------------------------------------------

NOW = 1_760_000_000_000


def test_find_hanging_is_what_kafka_transactions_sh_would_print(wire: Any, admin_of: Any) -> None:
    brokers = wire(scene_answers(NOW))
    rows = live_hanging.find_hanging_live(
        admin_of(), [(TOPIC, p) for p in range(7)], now_ms=NOW, max_transaction_timeout_ms=MAX_TIMEOUT
    )

    hanging = {tool_columns(r) for r in rows if r["verdict"] == Verdict.HANGING}
    assert hanging == tool_find_hanging(brokers, NOW, MAX_TIMEOUT)
    assert {(r["partition"], r["producer_id"]): (r["verdict"], r["reason"]) for r in rows} == {
        (0, 5001): (Verdict.HANGING, Reason.NO_TRANSACTIONAL_ID),
        (1, 5002): (Verdict.HANGING, Reason.COORDINATOR_COMPLETED),  # CompleteAbort
        (3, 5004): (Verdict.HANGING, Reason.COORDINATOR_COMPLETED),  # Empty
        (4, 5007): (Verdict.HANGING, Reason.TRANSACTIONAL_ID_EXPIRED),
        (5, 5008): (Verdict.HANGING, Reason.PARTITION_NOT_IN_TRANSACTION),
        (6, 5009): (Verdict.LATE, Reason.COORDINATOR_TIMEOUT_OVERDUE),  # not in the tool's output
    }  # orders-2 (Ongoing, lists the partition, within its timeout): no row; 5005 idle 1 min; 5006 nothing open


def test_find_hanging_asks_what_the_tool_asks_where_it_asks_it(wire: Any, admin_of: Any) -> None:
    brokers = wire(scene_answers(NOW))
    live_hanging.find_hanging_live(
        admin_of(), [(TOPIC, p) for p in range(7)], now_ms=NOW, max_transaction_timeout_ms=MAX_TIMEOUT
    )

    # DescribeProducers: each partition asked of its leader (PartitionLeaderStrategy), v0 of a 3.9 broker
    asked = {
        (e.node, t.name, p)
        for e in brokers.sent("DescribeProducers")
        for t in e.request.topics
        for p in t.partition_indexes
    }
    assert asked == {(LEADERS[(TOPIC, p)], TOPIC, p) for p in range(7)}
    assert all(e.response.topics[0].partitions[0].error_code == 0 for e in brokers.sent("DescribeProducers"))
    # ListTransactions on every broker, filtered by the candidates' producer ids (ListTransactionsOptions.filterProducerIds)
    listings = brokers.sent("ListTransactions")
    assert sorted(e.node for e in listings) == list(BROKERS)
    assert all(sorted(e.request.producer_id_filters) == [5001, 5002, 5003, 5004, 5007, 5008, 5009] for e in listings)
    # FindCoordinator (TRANSACTION) then DescribeTransactions at each id's coordinator; kafka-python raises for
    # the whole request on TRANSACTIONAL_ID_NOT_FOUND, so txnlog asks again one id at a time
    (find,) = brokers.sent("FindCoordinator")
    assert find.version >= 4 and sorted(find.request.coordinator_keys) == [
        "billing-7",
        "etl-3",
        "gone-5",
        "idle-4",
        "mover-6",
        "slow-8",
    ]
    described = [(e.node, sorted(e.request.transactional_ids)) for e in brokers.sent("DescribeTransactions")]
    assert (3, ["gone-5"]) in described and (2, ["billing-7"]) in described and (1, ["mover-6"]) in described
    assert brokers.sent("WriteTxnMarkers") == []


def test_find_hanging_rows_carry_the_evidence_and_both_abort_commands(wire: Any, admin_of: Any) -> None:
    wire(scene_answers(NOW))
    rows = live_hanging.find_hanging_live(
        admin_of(), [(TOPIC, 1), (TOPIC, 3)], now_ms=NOW, max_transaction_timeout_ms=MAX_TIMEOUT
    )
    by_pid = {r["producer_id"]: r for r in rows}
    assert sorted(by_pid) == [5002, 5004]
    r = by_pid[5002]
    assert (r["start_offset"], r["producer_epoch"], r["coordinator_epoch"]) == (40, 0, 7)
    assert r["transactional_id"] == "billing-7" and r["coordinator_state"] == "CompleteAbort"
    assert r["idle_ms"] == 3 * HOUR and r["source"] == "live" and r["safety"] == classify.Safety.SAFE
    assert r["command"] == classify.abort_command(None, TOPIC, 1, 40)
    assert r["command"].endswith("abort --topic orders --partition 1 --start-offset 40")
    assert r["legacy_command"].endswith("--producer-id 5002 --producer-epoch 0 --coordinator-epoch 7")
    assert (
        "DescribeProducers on orders-1: producer 5002 epoch 0 has a transaction open since offset 40" in r["evidence"]
    )
    assert "DescribeTransactions shows billing-7 CompleteAbort listing no partitions" in r["evidence"]
    # DescribeProducers' coordinator epoch -1 (unknown) prints as 0, as kafka-transactions.sh sends it
    e = by_pid[5004]
    assert e["coordinator_epoch"] == -1 and e["legacy_command"].endswith("--coordinator-epoch 0")
    recs = {a["producer_id"]: a for a in live_hanging.abort_recommendations(rows)}
    assert recs[5004]["coordinator_epoch"] == 0 and recs[5002]["coordinator_epoch"] == 7


def test_no_open_transaction_no_coordinator_request(wire: Any, admin_of: Any) -> None:
    """Active producers, nothing open: the tool stops after DescribeProducers."""
    producers = {
        (TOPIC, 0): [Producer(1, 0, NOW - 5 * HOUR)],
        (TOPIC, 1): [Producer(2, 0, NOW - MINUTE, txn_start_offset=3)],
    }
    brokers = wire(
        {"Metadata": metadata_answer(LEADERS), "DescribeProducers": describe_producers_answer(LEADERS, producers)}
    )
    assert live_hanging.find_hanging_live(admin_of(), [(TOPIC, 0), (TOPIC, 1)], now_ms=NOW) == []
    assert brokers.apis() == ["DescribeProducers", "DescribeProducers"]


@pytest.mark.parametrize(
    "error", [Errors.NotLeaderForPartitionError, Errors.TopicAuthorizationFailedError], ids=lambda e: e.message
)
def test_describe_producers_partition_error_is_raised_not_read_as_no_producers(
    wire: Any, admin_of: Any, error: Any
) -> None:
    """A partition error in DescribeProducers must not read as "no open transaction" (find-hanging would then
    report nothing). ``DescribeProducersHandler.handlePartitionError`` fails TOPIC_AUTHORIZATION_FAILED and
    re-finds the leader on NOT_LEADER_OR_FOLLOWER; kafka-python raises either for the whole call."""
    producers, _ = scene(NOW)
    answer = describe_producers_answer(LEADERS, producers)

    def refuse(node: Any, request: Any) -> Any:
        response = answer(node, request)
        for t in response.topics:
            for p in t.partitions:
                if p.partition_index == 1:
                    p.error_code, p.active_producers = error.errno, []
        return response

    brokers = wire({"Metadata": metadata_answer(LEADERS), "DescribeProducers": refuse})
    with pytest.raises(error, match=r"orders.*1"):
        live_hanging.find_hanging_live(admin_of(), [(TOPIC, p) for p in range(3)], now_ms=NOW)
    assert "ListTransactions" not in brokers.apis()


# --------------------------------------------------------------------------------------------
# abort: re-validation (DescribeProducers etc.), then WriteTxnMarkers (AbortTransactionHandler)
# --------------------------------------------------------------------------------------------


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = cli.main(["abort", "--bootstrap-servers", BOOTSTRAP, "--topic", TOPIC, *argv], out)
    return code, out.getvalue(), err.getvalue()


def now_ms() -> int:
    return int(time.time() * 1000)  # txnlog abort judges against the wall clock


def test_abort_sends_one_abort_marker_to_the_partition_leader(wire: Any) -> None:
    brokers = wire(scene_answers(now_ms()))
    code, out, err = run_cli("--partition", "1", "--start-offset", "40", "--execute")
    assert code == 0, err
    assert "validated: HANGING COORDINATOR_COMPLETED" in out
    assert "aborted orders-1: producer_id=5002 producer_epoch=0 coordinator_epoch=7 start_offset=40" in out
    (w,) = brokers.sent("WriteTxnMarkers")
    assert w.node == LEADERS[(TOPIC, 1)] == 2  # the partition leader, from Metadata
    assert w.version == 1  # a 3.9 broker's highest
    (m,) = w.request.markers  # AbortTransactionHandler.buildBatchedRequest: one marker, one topic, one partition
    assert (m.producer_id, m.producer_epoch, m.coordinator_epoch) == (5002, 0, 7)
    assert m.transaction_result is False  # ABORT
    assert [(t.name, list(t.partition_indexes)) for t in m.topics] == [(TOPIC, [1])]
    # re-validated against live state first, the marker last
    assert brokers.apis() == ["DescribeProducers", "ListTransactions", "ListTransactions", "ListTransactions",
                              "FindCoordinator", "DescribeTransactions", "WriteTxnMarkers"]  # fmt: skip
    # the marker request as the broker reads it: WriteTxnMarkers v1, the header's api key 27
    assert struct.unpack_from(">hh", w.request_wire, 4) == (27, 1)


def test_abort_with_an_unknown_coordinator_epoch_sends_zero(wire: Any) -> None:
    """DescribeProducers' -1 (``ProducerState.coordinatorEpoch()`` empty) is sent as 0, ``orElse(0)``."""
    brokers = wire(scene_answers(now_ms()))
    code, out, err = run_cli("--partition", "3", "--start-offset", "300", "--execute")
    assert code == 0, err
    (w,) = brokers.sent("WriteTxnMarkers")
    (m,) = w.request.markers
    assert (w.node, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result) == (
        1,
        5004,
        2,
        0,
        False,
    )


def test_legacy_abort_sends_the_given_coordinator_epoch(wire: Any) -> None:
    brokers = wire(scene_answers(now_ms()))
    argv = ("--partition", "5", "--producer-id", "5008", "--producer-epoch", "6", "--coordinator-epoch", "11")
    code, out, err = run_cli(*argv, "--execute")
    assert code == 0, err
    (m,) = brokers.sent("WriteTxnMarkers")[0].request.markers
    assert (m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result) == (5008, 6, 11, False)
    assert brokers.sent("WriteTxnMarkers")[0].node == LEADERS[(TOPIC, 5)]


def test_dry_run_sends_no_marker(wire: Any) -> None:
    brokers = wire(scene_answers(now_ms()))
    code, out, _ = run_cli("--partition", "1", "--start-offset", "40")
    assert code == 0 and "would abort orders-1: producer_id=5002" in out and "aborted" not in out
    assert brokers.sent("WriteTxnMarkers") == []


@pytest.mark.parametrize(
    ("partition", "start", "why"),
    [
        (2, 77, "not hanging (the coordinator still owns this transaction)"),
        (1, 41, "Could not find any open transactions starting at offset 41 on partition orders-1"),
        (3, 310, "not a hanging candidate"),
        (6, 900, "verdict is LATE (COORDINATOR_TIMEOUT_OVERDUE)"),
    ],
    ids=["ongoing-owner", "no-such-start-offset", "idle-one-minute", "late"],
)
def test_abort_refused_by_live_state_sends_no_marker(wire: Any, partition: int, start: int, why: str) -> None:
    brokers = wire(scene_answers(now_ms()))
    code, out, err = run_cli("--partition", str(partition), "--start-offset", str(start), "--execute")
    assert code == 2 and "txnlog: refused:" in err and why in err
    assert brokers.sent("WriteTxnMarkers") == [] and "aborted" not in out


@pytest.mark.parametrize(
    "error",
    [
        Errors.InvalidProducerEpochError,  # the producer bumped its epoch since DescribeProducers
        Errors.TransactionCoordinatorFencedError,  # a coordinator epoch below the partition's
        Errors.ClusterAuthorizationFailedError,  # WriteTxnMarkers needs ClusterAction
        Errors.NotLeaderForPartitionError,  # the leader moved between Metadata and the marker
    ],
    ids=lambda e: e.message,
)
def test_abort_error_in_the_response_is_an_error_not_a_success(wire: Any, admin_of: Any, error: Any) -> None:
    brokers = wire(scene_answers(now_ms(), markers=write_txn_markers_answer(error.errno)))
    code, out, err = run_cli("--partition", "1", "--start-offset", "40", "--execute")
    assert code == 2 and "aborted" not in out
    assert f"txnlog: error: abort failed: {error.__name__}: " in err and "orders" in err
    (w,) = brokers.sent("WriteTxnMarkers")
    assert w.response.markers[0].topics[0].partitions[0].error_code == error.errno
    # the library call raises the error class kafka-python maps the code to. NOT_LEADER_OR_FOLLOWER: the
    # Java handler re-finds the leader and retries (ApiResult.unmapped); kafka-python's abort_transaction
    # does not: one request, one error, and the user runs the abort again
    admin = admin_of()
    plan = live_abort.revalidate_abort(
        admin, live_abort.AbortRequest(TOPIC, 1, start_offset=40), classify.Thresholds(now_ms())
    )
    with pytest.raises(error):
        live_abort.send_abort(admin, plan)
    assert len(brokers.sent("WriteTxnMarkers")) == 2  # one per attempt (the CLI's, the call's): no retry


@pytest.mark.parametrize("shape", ["no markers", "another partition", "another producer"])
def test_abort_response_without_the_partition_is_not_a_success(wire: Any, shape: str) -> None:
    """kafka-python's abort_transaction checks only the error codes present, so a response without this
    partition's result would pass as a success; txnlog reads it as AbortTransactionHandler.handleResponse
    does: a failure, one line, exit 1, never 'aborted'."""
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult

    def answer(node: Any, request: Any) -> Any:
        ((m,),) = [request.markers]
        pid = m.producer_id + (1 if shape == "another producer" else 0)
        index = 1 + (1 if shape == "another partition" else 0)
        result = R(producer_id=pid, topics=[T(name=TOPIC, partitions=[P(partition_index=index, error_code=0)])])
        return WriteTxnMarkersResponse(markers=[] if shape == "no markers" else [result])

    brokers = wire(scene_answers(now_ms(), markers=answer))
    code, out, err = run_cli("--partition", "1", "--start-offset", "40", "--execute")
    assert code != 0 and "aborted" not in out
    assert "WriteTxnMarkers response included unexpected" in err and "\n" not in err.strip()
    assert len(brokers.sent("WriteTxnMarkers")) == 1


def test_abort_unsupported_by_the_broker_says_so(wire: Any) -> None:
    """A broker without WriteTxnMarkers in its ApiVersions (noida-db): AbortUnsupported, nothing sent."""
    versions = {k: v for k, v in KAFKA_3_9_API_VERSIONS.items() if k != WriteTxnMarkersRequest.API_KEY}
    brokers = wire(scene_answers(now_ms()), api_versions=versions)
    code, out, err = run_cli("--partition", "1", "--start-offset", "40", "--execute")
    assert code == 2 and "does not support WriteTxnMarkers" in err and "nothing was aborted" in err
    assert brokers.sent("WriteTxnMarkers") == []


# --------------------------------------------------------------------------------------------
# __consumer_offsets: transactional offset commits read by the Kafka source
# --------------------------------------------------------------------------------------------

GROUP = "payments-app"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions
GROUP_PARTITION = transaction_state_partition_for(GROUP, OFFSETS_PARTITIONS)  # GroupCoordinator.partitionFor
T0 = 1_760_000_000_000


def offset_commits(base: int, commits: list[tuple[str, int, int]]) -> list[RecordSpec]:
    """OffsetCommitKey v1 (group, topic, partition) / OffsetCommitValue v3 records, one per committed offset."""
    return [
        RecordSpec(
            i, 0, encode_offset_commit_key(GROUP, t, p, version=1), encode_offset_commit_value(o, -1, "", T0 + base)
        )
        for i, (t, p, o) in enumerate(commits)
    ]


def txn_batch(base: int, records: list[RecordSpec], pid: int, epoch: int, *, transactional: bool = True) -> bytes:
    """A batch as ``GroupMetadataManager.storeOffsets`` builds it: producer id/epoch, base sequence 0."""
    return encode_record_batch(
        base_offset=base,
        records=records,
        base_timestamp=T0 + base,
        producer_id=pid if transactional else -1,
        producer_epoch=epoch if transactional else -1,
        base_sequence=0 if transactional else -1,
        is_transactional=transactional,
    )


def marker(offset: int, pid: int, epoch: int, control: ControlType, coordinator_epoch: int) -> bytes:
    return encode_end_txn_marker_batch(
        offset=offset,
        producer_id=pid,
        producer_epoch=epoch,
        control_type=control,
        coordinator_epoch=coordinator_epoch,
        timestamp=T0 + offset,
    )


def offsets_log(records_of: Callable[[int, list[tuple[str, int, int]]], list[RecordSpec]]) -> list[tuple[int, bytes]]:
    """The group's partition: a committed transactional offset commit (TxnOffsetCommit + COMMIT marker), a
    plain OffsetCommit of another consumer, and a transactional one whose producer died (no marker)."""
    return [
        (0, txn_batch(0, records_of(0, [("orders", 0, 1200), ("orders", 1, 877)]), 7001, 2)),
        (2, marker(2, 7001, 2, ControlType.COMMIT, 5)),
        (3, txn_batch(3, records_of(3, [("audit", 0, 42)]), -1, -1, transactional=False)),
        (4, txn_batch(4, records_of(4, [("orders", 0, 1260)]), 7002, 0)),
    ]


def data_records(base: int, commits: list[tuple[str, int, int]]) -> list[RecordSpec]:
    """The same batches' shape on a data topic: as many records, ordinary keys and values."""
    return [RecordSpec(i, 0, b"k%d" % (base + i), b"v" * 40) for i in range(len(commits))]


def fetch_answer(topic: str, partition: int, batches: list[tuple[int, bytes]], end: int, leader: int) -> Answer:
    """A leader's Fetch (``Log.read`` under HIGH_WATERMARK isolation): the batches from the one holding the offset."""

    def answer(node: Any, request: Any) -> Any:
        assert node == leader and request.isolation_level == READ_UNCOMMITTED
        ((t, p),) = [(t.topic, q) for t in request.topics for q in t.partitions]
        assert (t, p.partition) == (topic, partition)
        records = b"".join(
            b
            for base, b in batches
            if base >= p.fetch_offset or base == max(x for x, _ in batches if x <= p.fetch_offset)
        )
        P = FetchResponse.FetchableTopicResponse.PartitionData
        part = P(
            partition_index=partition,
            error_code=0,
            high_watermark=end,
            last_stable_offset=4,  # the open offset commit at 4 pins it
            log_start_offset=0,
            aborted_transactions=[],
            preferred_read_replica=-1,
            records=records,
        )
        return FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            session_id=0,
            responses=[FetchResponse.FetchableTopicResponse(topic=topic, partitions=[part])],
        )

    return answer


def read_partition(
    wire: Any, topic: str, batches: list[tuple[int, bytes]], max_decompressed_bytes: int | None = None
) -> tuple[pa.Table, WireBrokers, list[Any]]:
    from txnlog.engine.spark.live_batches import read_ranges
    from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA

    partition = GROUP_PARTITION
    leaders = {(topic, p): BROKERS[p % 3] for p in range(OFFSETS_PARTITIONS if topic == CONSUMER_OFFSETS_TOPIC else 1)}
    leaders[(topic, partition)] = 2
    brokers = wire({"Metadata": metadata_answer(leaders), "Fetch": fetch_answer(topic, partition, batches, 5, 2)})
    r = LiveRange(topic, partition, 0, 5, 0, 4, 5)  # [log start, high watermark); the LSO pinned at 4
    reads: list[Any] = []
    rows = list(read_ranges(BOOTSTRAP, {}, [r], reads=reads, max_decompressed_bytes=max_decompressed_bytes))
    return pa.Table.from_batches(rows, schema=SEGMENT_SUMMARY_SCHEMA), brokers, reads


FRAGMENT = ["kind", "producer_id", "producer_epoch", "min_epoch", "first_offset", "last_offset", "batch_count",
            "record_count", "control_type", "coordinator_epoch"]  # fmt: skip


def test_consumer_offsets_batches_are_real_offset_commits() -> None:
    """The recorded batches decode with kafka-python's reader; keys and values follow OffsetCommitKey v1 /
    OffsetCommitValue v3 (group-coordinator/src/main/resources/common/message/), read here field by field."""

    def string(b: bytes, at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from(">h", b, at)
        return b[at + 2 : at + 2 + n].decode(), at + 2 + n

    records = MemoryRecords(b"".join(b for _, b in offsets_log(offset_commits)))
    seen = []
    while (batch := records.next_batch()) is not None:
        for rec in batch:
            if batch.is_control_batch:
                seen.append(("marker", batch.producer_id, batch.producer_epoch, rec.offset))
                continue
            (key_version,) = struct.unpack_from(">h", rec.key)
            group, at = string(rec.key, 2)
            topic, at = string(rec.key, at)
            (partition,) = struct.unpack_from(">i", rec.key, at)
            value_version, offset, leader_epoch = struct.unpack_from(">hqi", rec.value)
            metadata, at = string(rec.value, 14)
            (commit_ts,) = struct.unpack_from(">q", rec.value, at)
            assert (key_version, value_version, group, metadata, leader_epoch) == (1, 3, GROUP, "", -1)
            assert at + 8 == len(rec.value) and commit_ts >= T0
            seen.append((topic, partition, offset, batch.producer_id, batch.is_transactional, rec.offset))
    assert seen == [
        ("orders", 0, 1200, 7001, True, 0),
        ("orders", 1, 877, 7001, True, 1),
        ("marker", 7001, 2, 2),
        ("audit", 0, 42, -1, False, 3),
        ("orders", 0, 1260, 7002, True, 4),
    ]


def test_consumer_offsets_reads_like_a_data_topic(wire: Any) -> None:
    offsets, brokers, reads = read_partition(wire, CONSUMER_OFFSETS_TOPIC, offsets_log(offset_commits))
    data, _, _ = read_partition(wire, "orders", offsets_log(data_records))
    assert offsets.filter(pa.compute.equal(offsets["kind"], "quarantine")).num_rows == 0
    frags = offsets.filter(pa.compute.is_in(offsets["kind"], pa.array(["run", "marker"])))
    assert frags.select(FRAGMENT).to_pylist() == [
        {"kind": "run", "producer_id": 7001, "producer_epoch": 2, "min_epoch": 2, "first_offset": 0, "last_offset": 1,
         "batch_count": 1, "record_count": 2, "control_type": -1, "coordinator_epoch": -1},
        {"kind": "run", "producer_id": 7002, "producer_epoch": 0, "min_epoch": 0, "first_offset": 4, "last_offset": 4,
         "batch_count": 1, "record_count": 1, "control_type": -1, "coordinator_epoch": -1},
        {"kind": "marker", "producer_id": 7001, "producer_epoch": 2, "min_epoch": 2, "first_offset": 2, "last_offset": 2,
         "batch_count": 1, "record_count": 1, "control_type": int(ControlType.COMMIT), "coordinator_epoch": 5},
    ]  # fmt: skip
    # exactly the rows of a data topic holding the same batches (headers equal, keys and values aside)
    data_frags = data.filter(pa.compute.is_in(data["kind"], pa.array(["run", "marker"])))
    assert frags.select(FRAGMENT).to_pylist() == data_frags.select(FRAGMENT).to_pylist()
    (seg,) = offsets.filter(pa.compute.equal(offsets["kind"], "segment")).to_pylist()
    assert seg["file"] == f"kafka://{CONSUMER_OFFSETS_TOPIC}-{GROUP_PARTITION}" and seg["broker"] == "live"
    assert {(r["topic"], r["partition"]) for r in offsets.to_pylist()} == {(CONSUMER_OFFSETS_TOPIC, GROUP_PARTITION)}
    # one Fetch, read_uncommitted (asserted by the leader), from the range start, to the leader of the group's partition
    (f,) = brokers.sent("Fetch")
    assert f.node == 2 and f.request.topics[0].partitions[0].fetch_offset == 0
    assert reads[0].first_offset == 0 and reads[0].next_offset == 5


def test_consumer_offsets_open_commit_is_an_open_transaction(wire: Any) -> None:
    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.rules.transactions import checkpoints_of, transactions_of_summary

    table, _, _ = read_partition(wire, CONSUMER_OFFSETS_TOPIC, offsets_log(offset_commits))
    cut = LiveCut(T0 + 10_000, (LiveRange(CONSUMER_OFFSETS_TOPIC, GROUP_PARTITION, 0, 5, 0, 4, 5),))
    txns = transactions_of_summary(table, checkpoints_of(cut.checkpoints())).to_pylist()
    got = [
        (t["topic"], t["partition"], t["producer_id"], t["first_offset"], t["marker_offset"], t["control_type"])
        for t in txns
    ]
    assert sorted(got) == [
        (CONSUMER_OFFSETS_TOPIC, GROUP_PARTITION, 7001, 0, 2, int(ControlType.COMMIT)),
        (CONSUMER_OFFSETS_TOPIC, GROUP_PARTITION, 7002, 4, None, None),  # open: pins the LSO at 4
    ]
    (open_txn,) = [t for t in txns if t["marker_offset"] is None]
    assert open_txn["open_on_lead"] is True and open_txn["replicas"] == ["live"]


def test_a_fetched_compression_bomb_is_quarantined_not_expanded(wire: Any) -> None:
    """A control batch whose zstd records expand to 16 MiB, fetched with a 1 MiB limit: the range's rows
    quarantine it as decompressed_too_large (as the segment reader does) and keep every other batch."""
    from tests.kafka.bombs import bomb
    from tests.kafka.encoders import Batch

    log = offsets_log(data_records)
    base, marker_bytes = log[1]  # the COMMIT marker of producer 7001 at offset 2
    (attrs,) = struct.unpack_from(">h", marker_bytes, 21)
    bombed = Batch(
        base_offset=base, attributes=attrs | 4, producer_id=7001, producer_epoch=2, record_count=1,
        base_timestamp=T0 + base, body=bomb(4, 16 * 2**20),
    ).encode()  # fmt: skip
    rows, _, _ = read_partition(wire, "orders", [log[0], (base, bombed), *log[2:]], max_decompressed_bytes=2**20)
    quarantined = rows.filter(pa.compute.equal(rows["kind"], "quarantine")).to_pylist()
    assert [(q["reason"], q["position"]) for q in quarantined] == [("decompressed_too_large", len(log[0][1]))]
    runs = rows.filter(pa.compute.equal(rows["kind"], "run")).to_pylist()
    assert {(r["producer_id"], r["first_offset"]) for r in runs} == {(7001, 0), (7002, 4)}
    unlimited, _, _ = read_partition(wire, "orders", [log[0], (base, bombed), *log[2:]])
    assert "decompressed_too_large" not in unlimited["reason"].to_pylist()  # 16 MiB is under the 64 MiB default
