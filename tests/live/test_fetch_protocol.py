"""The Kafka source's client (``txnlog.live.fetch.FetchClient``) on recorded protocol responses: no server.

``tests/live/test_kafka_source.py`` reads real ranges from a single-node broker, which cannot show a leader moving
mid-read, quotas, SASL/SSL, retention deleting the head of a range, an ACL refusing the read, a
response cut by the size limit or an old broker returning part of an oversized batch. These tests
stand in for those: every answer is a *recorded response*, a real kafka-python 3.0.12 message
(``FetchResponse``, ``MetadataResponse``, ``ListOffsetsResponse``) encoded to wire bytes at the
negotiated version and decoded back by kafka-python's own classes when the client asks, exactly as
``KafkaNetClient`` would hand it over. Only ``FetchClient._client`` (the ``KafkaNetClient``) is
replaced, by :class:`RecordedBroker`, which also encodes/decodes every request it is sent and
records (node id, fetch offset, partition_max_bytes, time on a fake clock). The records are real v2
batches from the broker-log writer (:mod:`txnlog.brokerlog.encode`): data batches of transactional
producers and their COMMIT markers.

What each test pins (Kafka behaviour, Java client classes in
``org.apache.kafka.clients.consumer.internals``; the broker in ``kafka.server.ReplicaManager``):

* leader moves: ``NOT_LEADER_OR_FOLLOWER`` / ``FENCED_LEADER_EPOCH`` in a Fetch make
  ``FetchCollector.handleInitializeErrors`` request a metadata update; the retry goes to the new
  leader the refreshed Metadata names, at the same offset (and a leader of -1 mid-election is waited
  out the same way);
* retries exhausted: one ``LiveReadError`` line naming topic-partition and offset;
* ``TOPIC_AUTHORIZATION_FAILED``: not retried (``FetchCollector`` throws ``TopicAuthorizationException``),
  the message says the job needs Read; in Metadata it says Describe;
* KIP-219 ``throttle_time_ms``: the broker answers at once and the client waits before the next
  request (``NetworkClient`` / ``KafkaChannel`` mute);
* size limit: the broker sends a byte range of the segment cut at ``partition_max_bytes``
  (``FileRecords.slice``); the partial last entry is dropped and fetched again from the next offset
  (``ByteBufferLogInputStream.nextBatch`` returns null for it), the bytes read are the whole batches;
* KIP-74: since Fetch v3 the first batch comes whole even when larger than the limit; a response
  holding only part of one batch (a broker before 0.10.1) stops with advice to raise
  ``live_fetch_partition_max_bytes``;
* ``OFFSET_OUT_OF_RANGE`` after retention: the broker's answer carries no log start
  (``ReplicaManager.createLogReadResult``: -1), so the client asks ListOffsets ``EARLIEST`` as the
  consumer's offset reset does (``FetchCollector`` -> ``OffsetFetcher``; without a reset policy it
  would be ``OffsetOutOfRangeException``) and continues from the log start, saying so in
  ``RangeRead.truncated_from``/``notes``; an offset beyond the log (recreated topic) stops the read;
* the look-back: windows read before the range do not overlap and stop at the log start
  (``reached_log_start``);
* SASL/SSL: the config's librdkafka names become ``KafkaNetClient`` keywords and reach it.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from txnlog.brokerlog.encode import RecordSpec, encode_end_txn_marker_batch, encode_record_batch
from txnlog.kafka.wire import ControlType
from txnlog.live import fetch as live_fetch
from txnlog.live.admin import kafka_python_settings
from txnlog.live.fetch import FetchClient, FetchSettings, LiveRange, LiveReadError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    import kafka.net
    from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

TOPIC = "orders"
PART = 3
#: the highest versions of a Kafka 3.9 broker (ApiVersions); the client caps them (Fetch v12: topic names)
BROKER_MAX_VERSIONS = {FetchRequest.API_KEY: 17, MetadataRequest.API_KEY: 12, ListOffsetsRequest.API_KEY: 9}
_RESPONSE_FOR = {
    FetchRequest.API_KEY: FetchResponse,
    MetadataRequest.API_KEY: MetadataResponse,
    ListOffsetsRequest.API_KEY: ListOffsetsResponse,
}


# --------------------------------------------------------------------------------------------
# A fake clock for txnlog.live.fetch (throttling and back-off are measured, never slept)
# --------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(live_fetch, "time", fake)
    return fake


# --------------------------------------------------------------------------------------------
# Record batches: real v2 batches, as a leader keeps them in its segment
# --------------------------------------------------------------------------------------------


def data_batch(base: int, count: int, pid: int = 4000, value_size: int = 60) -> bytes:
    records = [RecordSpec(i, i, b"k%d" % i, bytes([65 + (base + i) % 26]) * value_size) for i in range(count)]
    return encode_record_batch(
        base_offset=base,
        records=records,
        base_timestamp=1_700_000_000_000 + base,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=base,
        is_transactional=True,
    )


def commit_marker(offset: int, pid: int = 4000) -> bytes:
    return encode_end_txn_marker_batch(
        offset=offset,
        producer_id=pid,
        producer_epoch=0,
        control_type=ControlType.COMMIT,
        coordinator_epoch=1,
        timestamp=1_700_000_000_000 + offset,
    )


@dataclass
class Log:
    """A partition's log: (base offset, next offset, bytes) per batch, from ``log_start``."""

    batches: list[tuple[int, int, bytes]]

    @classmethod
    def build(cls, first: int, transactions: int, records: int = 4) -> Log:
        out = []
        offset = first
        for t in range(transactions):
            b = data_batch(offset, records, pid=4000 + t % 3)
            out.append((offset, offset + records, b))
            offset += records
            m = commit_marker(offset, pid=4000 + t % 3)
            out.append((offset, offset + 1, m))
            offset += 1
        return cls(out)

    @property
    def log_start(self) -> int:
        return self.batches[0][0]

    @property
    def end(self) -> int:
        return self.batches[-1][1]

    def bytes_between(self, lo: int, hi: int) -> bytes:
        """The whole batches holding offsets in [lo, hi)."""
        return b"".join(b for base, after, b in self.batches if after > lo and base < hi)

    def slice(self, offset: int, max_bytes: int, *, kip74: bool = True) -> bytes:
        """What a leader sends for a fetch at ``offset``: the segment from the batch holding it, cut at
        ``max_bytes`` (``FileRecords.slice``), the first batch whole (KIP-74) unless ``kip74`` is off."""
        tail = b"".join(b for base, after, b in self.batches if after > offset)
        first = next((b for base, after, b in self.batches if after > offset), b"")
        return tail[: max(max_bytes, len(first) if kip74 else 0)]


# --------------------------------------------------------------------------------------------
# Recorded responses (real kafka-python messages as wire bytes) and the broker double
# --------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    """One recorded response: the message class, its version and its wire bytes."""

    cls: Any
    version: int
    wire: bytes

    @classmethod
    def of(cls, message: Any) -> Recorded:
        return cls(type(message)[None], message.version, bytes(message.encode()))

    def decode(self) -> Any:
        return self.cls.decode(self.wire, version=self.version)


FETCH_V = min(live_fetch.FETCH_MAX_VERSION, BROKER_MAX_VERSIONS[FetchRequest.API_KEY])
METADATA_V = min(live_fetch.METADATA_MAX_VERSION, BROKER_MAX_VERSIONS[MetadataRequest.API_KEY])
LIST_OFFSETS_V = min(live_fetch.LIST_OFFSETS_MAX_VERSION, BROKER_MAX_VERSIONS[ListOffsetsRequest.API_KEY])


def fetch_response(
    records: bytes = b"",
    *,
    error: int = 0,
    high_watermark: int = -1,
    log_start: int = -1,
    throttle_ms: int = 0,
    partition: int = PART,
) -> Recorded:
    P = FetchResponse.FetchableTopicResponse.PartitionData
    part = P(
        partition_index=partition,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=log_start,
        aborted_transactions=[],
        preferred_read_replica=-1,
        records=records,
    )
    topic = FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[part])
    message = FetchResponse(
        throttle_time_ms=throttle_ms, error_code=0, session_id=0, responses=[topic], version=FETCH_V
    )
    return Recorded.of(message)


def metadata_response(leader: int, *, topic_error: int = 0, partitions: int = 8) -> Recorded:
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    brokers = [
        MetadataResponse.MetadataResponseBroker(node_id=n, host=f"b{n}", port=9092, rack=None) for n in (1, 2, 3)
    ]
    parts = (
        []
        if topic_error
        else [
            P(
                error_code=0,
                partition_index=p,
                leader_id=leader if p == PART else 1,
                leader_epoch=7,
                replica_nodes=[1, 2, 3],
                isr_nodes=[1, 2, 3],
                offline_replicas=[],
            )
            for p in range(partitions)
        ]
    )
    topic = T(error_code=topic_error, name=TOPIC, topic_id=uuid.UUID(int=7), is_internal=False, partitions=parts)
    message = MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id="recorded", controller_id=1, topics=[topic], version=METADATA_V
    )
    return Recorded.of(message)


def list_offsets_response(offset: int, *, error: int = 0) -> Recorded:
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    part = T.ListOffsetsPartitionResponse(
        partition_index=PART, error_code=error, timestamp=-1, offset=offset, leader_epoch=7
    )
    message = ListOffsetsResponse(throttle_time_ms=0, topics=[T(name=TOPIC, partitions=[part])], version=LIST_OFFSETS_V)
    return Recorded.of(message)


@dataclass
class Sent:
    """One request the double was sent, as decoded from its wire bytes."""

    node: int
    api: str
    version: int
    at: float
    fetch_offset: int | None = None
    partition_max_bytes: int | None = None
    isolation_level: int | None = None
    timestamp: int | None = None  # ListOffsets


Responder = Callable[[Sent], "Recorded | Exception"]


@dataclass
class RecordedBroker:
    """Stands in for ``kafka.net.KafkaNetClient``: answers each request with the next recorded response
    (or a responder's), after checking it is the answer to that request, and records what was sent."""

    clock: FakeClock
    script: list[Recorded | Exception] = field(default_factory=list)
    responder: Responder | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    closed: bool = False
    bootstrap_node: str = "bootstrap-0"

    # the KafkaNetClient methods FetchClient uses
    def check_version(self, node_id: int | None = None, timeout_ms: int = 10000) -> tuple[int, ...]:
        return (3, 9)

    def api_version(self, operation: Any, max_version: int | None = None) -> int:
        broker = BROKER_MAX_VERSIONS[operation.API_KEY]
        return min(broker, operation.max_version, max_version if max_version is not None else broker)

    def least_loaded_node(self, bootstrap_fallback: bool = False) -> Any:
        return self.bootstrap_node

    def close(self, node_id: int | None = None) -> None:
        self.closed = True

    def send_and_receive(self, node_id: Any, request: Any, timeout_ms: int = 30000) -> Any:
        # the request as the broker would see it: kafka-python's own encoding, decoded back
        version = request.version
        wire = bytes(request.encode(version=version))
        decoded = type(request)[None].decode(wire, version=version)
        sent = Sent(node_id, type(request).__name__, version, self.clock.now)
        if isinstance(decoded, FetchRequest):
            (t,) = decoded.topics
            (p,) = t.partitions
            assert (t.topic, p.partition) == (TOPIC, PART)
            sent.fetch_offset, sent.partition_max_bytes = int(p.fetch_offset), int(p.partition_max_bytes)
            sent.isolation_level = int(decoded.isolation_level)
        elif isinstance(decoded, ListOffsetsRequest):
            (t,) = decoded.topics
            (p,) = t.partitions
            sent.timestamp = int(p.timestamp)
        self.sent.append(sent)
        answer = self.responder(sent) if self.responder is not None else self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert answer.cls is _RESPONSE_FOR[request.API_KEY], f"{answer.cls.__name__} recorded for {sent.api}"
        assert answer.version == version, f"recorded at v{answer.version}, asked at v{version}"
        return answer.decode()

    # views of what was sent
    def fetches(self) -> list[Sent]:
        return [s for s in self.sent if s.api == "FetchRequest"]

    def apis(self) -> list[str]:
        return [s.api.removesuffix("Request") for s in self.sent]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> RecordedBroker:
    """The double that ``FetchClient`` gets as its ``_client`` (the KafkaNetClient it constructs)."""
    double = RecordedBroker(clock)

    def construct(**kwargs: Any) -> RecordedBroker:
        double.kwargs = kwargs
        return double

    monkeypatch.setattr(kafka.net, "KafkaNetClient", construct)
    return double


def client(broker: RecordedBroker, conf: dict[str, Any] | None = None, **settings: Any) -> FetchClient:
    c = FetchClient("b1:9092,b2:9092", conf, FetchSettings(**settings))
    assert c._client is broker
    return c


def live_range(log: Log, start: int, end: int | None = None, lookback: int = 0) -> LiveRange:
    end = log.end if end is None else end
    return LiveRange(TOPIC, PART, start, end, log.log_start, end, end, lookback)


def serve(log: Log, *, leader: int = 1, kip74: bool = True, throttle_ms: int = 0) -> Responder:
    """A responder playing a leader over ``log`` (metadata: ``leader``; fetches cut as a broker does)."""

    def respond(sent: Sent) -> Recorded:
        if sent.api == "MetadataRequest":
            return metadata_response(leader)
        assert sent.api == "FetchRequest" and sent.node == leader
        assert sent.fetch_offset is not None and sent.partition_max_bytes is not None
        records = log.slice(sent.fetch_offset, sent.partition_max_bytes, kip74=kip74)
        return fetch_response(records, high_watermark=log.end, log_start=log.log_start, throttle_ms=throttle_ms)

    return respond


# --------------------------------------------------------------------------------------------
# Leader changes and errors (AbstractFetch / FetchCollector)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [Errors.NotLeaderForPartitionError, Errors.FencedLeaderEpochError], ids=lambda e: e.message
)
def test_leader_moves_mid_read_retry_goes_to_the_new_leader_at_the_same_offset(
    broker: RecordedBroker, clock: FakeClock, error: Any
) -> None:
    log = Log.build(100, 6)
    first, second = log.batches[0][2] + log.batches[1][2], b"".join(b for _, _, b in log.batches[2:])
    broker.script = [
        metadata_response(leader=1),
        fetch_response(first, high_watermark=log.end, log_start=100),
        fetch_response(error=error.errno),  # the leader moved between two fetches of the range
        metadata_response(leader=2),
        fetch_response(second, high_watermark=log.end, log_start=100),
    ]
    with client(broker) as c:
        read = c.read_range(live_range(log, 100))
    assert broker.apis() == ["Metadata", "Fetch", "Fetch", "Metadata", "Fetch"]
    assert broker.sent[0].node == "bootstrap-0" and broker.sent[3].node == "bootstrap-0"  # any broker answers Metadata
    assert [(s.node, s.fetch_offset) for s in broker.fetches()] == [(1, 100), (1, 105), (2, 105)]
    assert all(s.isolation_level == live_fetch.READ_UNCOMMITTED for s in broker.fetches())
    assert bytes(read.data) == log.bytes_between(100, log.end)
    assert (read.first_offset, read.next_offset, read.requests) == (100, log.end, 5)
    assert read.truncated_from is None and read.notes == []
    assert clock.sleeps == [pytest.approx(0.2)]  # one back-off before the retry
    assert broker.closed


def test_leader_election_in_progress_is_waited_out(broker: RecordedBroker) -> None:
    """Metadata naming no leader (-1, LEADER_NOT_AVAILABLE) mid-election: refreshed until one is named."""
    log = Log.build(0, 2)
    broker.script = [
        metadata_response(leader=1),
        fetch_response(error=Errors.NotLeaderForPartitionError.errno),
        metadata_response(leader=-1),
        metadata_response(leader=3),
        fetch_response(log.bytes_between(0, log.end), high_watermark=log.end, log_start=0),
    ]
    with client(broker) as c:
        read = c.read_range(live_range(log, 0))
    assert [(s.node, s.fetch_offset) for s in broker.fetches()] == [(1, 0), (3, 0)]
    assert bytes(read.data) == log.bytes_between(0, log.end)


def test_new_leader_with_a_lagging_high_watermark_is_waited_for(broker: RecordedBroker, clock: FakeClock) -> None:
    """After an election the new leader's high watermark can be below the cut's until its followers fetch
    (``Partition.maybeIncrementLeaderHW``): an empty answer below the range end is not its end."""
    log = Log.build(0, 4)
    head_end = log.batches[3][1]
    broker.script = [
        metadata_response(leader=1),
        fetch_response(log.bytes_between(0, head_end), high_watermark=log.end, log_start=0),
        fetch_response(error=Errors.NotLeaderForPartitionError.errno),
        metadata_response(leader=2),
        fetch_response(b"", high_watermark=head_end, log_start=0),  # the new leader: hw behind, nothing yet
        fetch_response(log.bytes_between(head_end, log.end), high_watermark=log.end, log_start=0),
    ]
    with client(broker) as c:
        read = c.read_range(live_range(log, 0))
    assert [(s.node, s.fetch_offset) for s in broker.fetches()] == [(1, 0), (1, head_end), (2, head_end), (2, head_end)]
    assert bytes(read.data) == log.bytes_between(0, log.end) and read.next_offset == log.end
    assert clock.sleeps == [pytest.approx(0.2), pytest.approx(0.2)]  # the retry's back-off, then the wait


def test_high_watermark_stuck_below_the_range_end_is_an_error(broker: RecordedBroker) -> None:
    log = Log.build(0, 2)
    broker.responder = lambda s: (
        metadata_response(leader=1)
        if s.api == "MetadataRequest"
        else fetch_response(b"", high_watermark=3, log_start=0)
    )
    with client(broker, retries=2) as c, pytest.raises(LiveReadError) as e:
        c.read_range(live_range(log, 3))
    msg = str(e.value)
    assert "\n" not in msg and "orders-3 at offset 3" in msg and "high watermark 3" in msg
    assert len(broker.fetches()) == 3


def test_empty_answer_at_the_high_watermark_ends_the_range(broker: RecordedBroker) -> None:
    """Offsets below the end without batches (compacted away, or aborted and cleaned): nothing more to read."""
    broker.script = [metadata_response(leader=1), fetch_response(b"", high_watermark=20, log_start=0)]
    with client(broker) as c:
        read = c.read_range(LiveRange(TOPIC, PART, 12, 20, 0, 20, 20))
    assert read.data.size == 0 and read.first_offset is None and read.next_offset == 12
    assert len(broker.fetches()) == 1


def test_unknown_topic_in_metadata_is_retried_like_the_java_consumer(broker: RecordedBroker) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION in Metadata (a topic just created: not yet on every broker) is retriable."""
    log = Log.build(0, 1)
    broker.script = [
        metadata_response(leader=1, topic_error=Errors.UnknownTopicOrPartitionError.errno),
        metadata_response(leader=2),
        fetch_response(log.bytes_between(0, log.end), high_watermark=log.end, log_start=0),
    ]
    with client(broker) as c:
        read = c.read_range(live_range(log, 0))
    assert [s.node for s in broker.fetches()] == [2]
    assert bytes(read.data) == log.bytes_between(0, log.end)


def test_retries_exhausted_one_line_naming_partition_and_offset(broker: RecordedBroker, clock: FakeClock) -> None:
    broker.responder = lambda s: (
        metadata_response(leader=1 + len(broker.sent) % 3)
        if s.api == "MetadataRequest"
        else fetch_response(error=Errors.NotLeaderForPartitionError.errno)
    )
    with client(broker, retries=3, backoff_s=0.5) as c, pytest.raises(LiveReadError) as e:
        c.fetch(TOPIC, PART, 4242, 1 << 20)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{TOPIC}-{PART} at offset 4242" in msg
    assert "after 3 retries" in msg and "NotLeaderForPartitionError" in msg and "live_fetch_retries" in msg
    assert [s.fetch_offset for s in broker.fetches()] == [4242] * 4
    assert clock.sleeps == [pytest.approx(0.5), pytest.approx(1.0), pytest.approx(1.5)]  # growing back-off


def test_connection_errors_are_retried_then_reported(broker: RecordedBroker) -> None:
    """The client's own retriable errors (a broker restarting) count as retries too."""
    broker.responder = lambda s: (
        metadata_response(leader=2) if s.api == "MetadataRequest" else Errors.KafkaConnectionError("reset by peer")
    )
    with client(broker, retries=2) as c, pytest.raises(LiveReadError, match=r"orders-3 at offset 7: still failing"):
        c.fetch(TOPIC, PART, 7, 1 << 20)
    assert len(broker.fetches()) == 3


def test_topic_authorization_failed_is_not_retried_and_names_read(broker: RecordedBroker) -> None:
    broker.script = [metadata_response(leader=1), fetch_response(error=Errors.TopicAuthorizationFailedError.errno)]
    with client(broker) as c, pytest.raises(LiveReadError) as e:
        c.read_range(live_range(Log.build(0, 2), 0))
    msg = str(e.value)
    assert "\n" not in msg
    assert "orders-3 at offset 0" in msg and "TopicAuthorizationFailedError" in msg and "Read" in msg
    assert broker.apis() == ["Metadata", "Fetch"]  # no retry (FetchCollector: TopicAuthorizationException)


def test_topic_authorization_failed_in_metadata_names_describe(broker: RecordedBroker) -> None:
    """Without Describe the Metadata answer itself carries the error (no partitions): not a leader election."""
    broker.script = [metadata_response(leader=1, topic_error=Errors.TopicAuthorizationFailedError.errno)]
    with (
        client(broker) as c,
        pytest.raises(LiveReadError, match=r"orders-3: .*TopicAuthorizationFailedError.*Describe"),
    ):
        c.read_range(live_range(Log.build(0, 2), 0))
    assert broker.apis() == ["Metadata"]


# --------------------------------------------------------------------------------------------
# Quotas (KIP-219)
# --------------------------------------------------------------------------------------------


def test_throttle_time_is_waited_out_before_the_next_request(broker: RecordedBroker, clock: FakeClock) -> None:
    log = Log.build(0, 4)
    cut = len(log.bytes_between(0, 5))
    broker.script = [
        metadata_response(leader=1),
        fetch_response(log.bytes_between(0, 5), high_watermark=log.end, log_start=0, throttle_ms=1500),
        fetch_response(log.bytes_between(5, log.end), high_watermark=log.end, log_start=0),
    ]
    with client(broker) as c:
        read = c.read_range(live_range(log, 0))
    first, second = broker.fetches()
    assert second.at - first.at == pytest.approx(1.5)  # muted for throttle_time_ms, then asked again
    assert clock.sleeps == [pytest.approx(1.5)]
    assert read.bytes_fetched == len(log.bytes_between(0, log.end)) and cut < read.bytes_fetched


def test_no_throttle_no_wait(broker: RecordedBroker, clock: FakeClock) -> None:
    log = Log.build(0, 5)
    broker.responder = serve(log)
    with client(broker, partition_max_bytes=300) as c:
        read = c.read_range(live_range(log, 0))
    assert clock.sleeps == [] and len(broker.fetches()) > 2
    assert bytes(read.data) == log.bytes_between(0, log.end)


# --------------------------------------------------------------------------------------------
# Size limits: FileRecords.slice and KIP-74
# --------------------------------------------------------------------------------------------


def test_partial_last_batch_is_dropped_and_refetched_from_the_next_offset(broker: RecordedBroker) -> None:
    log = Log.build(50, 5)  # batches alternate: 4 records (~330 bytes) and a marker (78 bytes)
    sizes = [len(b) for _, _, b in log.batches]
    limit = sizes[0] + sizes[1] + sizes[2] // 2  # the third batch is cut in the middle
    broker.responder = serve(log)
    with client(broker, partition_max_bytes=limit) as c:
        read = c.read_range(live_range(log, 50))
    fetches = broker.fetches()
    assert all(s.partition_max_bytes == limit for s in fetches)
    assert fetches[0].fetch_offset == 50 and fetches[1].fetch_offset == log.batches[2][0]  # 55: the cut batch again
    whole = log.bytes_between(50, log.end)
    assert bytes(read.data) == whole  # the concatenation of whole batches, each once
    assert read.bytes_fetched > len(whole)  # the dropped partial entries were carried too
    assert (read.first_offset, read.next_offset) == (50, log.end)


def test_oversized_first_batch_comes_whole_kip74(broker: RecordedBroker) -> None:
    log = Log.build(0, 3, records=40)  # data batches of ~3 KB, above the 1 KB limit
    broker.responder = serve(log)
    with client(broker, partition_max_bytes=1024) as c:
        read = c.read_range(live_range(log, 0))
    assert bytes(read.data) == log.bytes_between(0, log.end)
    assert [s.fetch_offset for s in broker.fetches()][:3] == [0, 40, 41]


def test_part_of_one_batch_only_advises_partition_max_bytes(broker: RecordedBroker) -> None:
    """A broker before KIP-74 returns the first batch cut at the limit: nothing whole to read."""
    log = Log.build(0, 2, records=40)
    broker.responder = serve(log, kip74=False)
    with client(broker, partition_max_bytes=1024) as c, pytest.raises(LiveReadError) as e:
        c.read_range(live_range(log, 0))
    msg = str(e.value)
    assert "\n" not in msg
    assert "orders-3 at offset 0" in msg and "part of one batch" in msg and "live_fetch_partition_max_bytes" in msg
    assert len(broker.fetches()) == 1


def test_entries_at_or_after_the_range_end_are_not_returned(broker: RecordedBroker) -> None:
    log = Log.build(0, 6)
    end = log.batches[5][1]  # the range ends after the third marker; the leader has more
    broker.responder = serve(log)
    with client(broker) as c:
        read = c.read_range(live_range(log, 0, end))
    assert bytes(read.data) == log.bytes_between(0, end)
    assert read.next_offset == end


# --------------------------------------------------------------------------------------------
# Retention: OFFSET_OUT_OF_RANGE
# --------------------------------------------------------------------------------------------


def test_offset_out_of_range_after_retention_continues_from_the_log_start(broker: RecordedBroker) -> None:
    """Kafka's OFFSET_OUT_OF_RANGE carries log_start_offset -1: the log start comes from ListOffsets EARLIEST."""
    log = Log.build(0, 8)
    deleted_to = log.batches[6][0]  # retention deleted the first three transactions after the cut
    kept = Log([b for b in log.batches if b[0] >= deleted_to])
    broker.script = [
        metadata_response(leader=2),
        fetch_response(error=Errors.OffsetOutOfRangeError.errno),  # ReplicaManager.createLogReadResult: hw/log start -1
        list_offsets_response(deleted_to),
        fetch_response(kept.bytes_between(deleted_to, kept.end), high_watermark=kept.end, log_start=deleted_to),
    ]
    r = LiveRange(TOPIC, PART, 5, log.end, 0, log.end, log.end)
    with client(broker) as c:
        read = c.read_range(r)
    assert broker.apis() == ["Metadata", "Fetch", "ListOffsets", "Fetch"]
    (lo,) = [s for s in broker.sent if s.api == "ListOffsetsRequest"]
    assert lo.node == 2 and lo.timestamp == -2  # EARLIEST, from the leader
    assert [s.fetch_offset for s in broker.fetches()] == [5, deleted_to]
    assert read.truncated_from == deleted_to
    assert read.notes == [f"offsets 5..{deleted_to - 1} were deleted by retention before the read"]
    assert bytes(read.data) == kept.bytes_between(deleted_to, kept.end)
    assert (read.first_offset, read.next_offset) == (deleted_to, log.end)


def test_offset_out_of_range_with_the_log_start_in_the_answer(broker: RecordedBroker) -> None:
    """A server that does send the log start with the error is taken at its word (no ListOffsets)."""
    log = Log.build(0, 4)
    kept = Log(log.batches[4:])
    broker.script = [
        metadata_response(leader=1),
        fetch_response(error=Errors.OffsetOutOfRangeError.errno, log_start=kept.log_start),
        fetch_response(kept.bytes_between(kept.log_start, kept.end), high_watermark=kept.end, log_start=kept.log_start),
    ]
    with client(broker) as c:
        read = c.read_range(LiveRange(TOPIC, PART, 0, log.end, 0, log.end, log.end))
    assert broker.apis() == ["Metadata", "Fetch", "Fetch"]
    assert read.truncated_from == kept.log_start and len(read.notes) == 1


def test_offset_out_of_range_beyond_the_log_stops_the_read(broker: RecordedBroker) -> None:
    """The log start is not after the offset: the partition was truncated or recreated, not retained."""
    broker.script = [
        metadata_response(leader=1),
        fetch_response(error=Errors.OffsetOutOfRangeError.errno),
        list_offsets_response(0),
    ]
    with (
        client(broker) as c,
        pytest.raises(LiveReadError, match=r"orders-3: offset 900 is out of range \(log start 0\)"),
    ):
        c.read_range(LiveRange(TOPIC, PART, 900, 1000, 0, 1000, 1000))


# --------------------------------------------------------------------------------------------
# The look-back before the range
# --------------------------------------------------------------------------------------------


def test_lookback_windows_do_not_overlap_and_stop_at_the_log_start(broker: RecordedBroker) -> None:
    log = Log.build(1000, 30)  # 150 offsets from 1000; the range is the last 10
    start = log.end - 10
    broker.responder = serve(log)
    with client(broker, partition_max_bytes=700) as c:
        read = c.read_range(live_range(log, start, lookback=10_000_000))  # more than the whole log
    assert bytes(read.data) == log.bytes_between(log.log_start, log.end)  # every batch exactly once, in order
    assert read.reached_log_start and read.lookback_reached == log.log_start
    assert read.first_offset == log.log_start and read.next_offset == log.end
    offsets = [s.fetch_offset for s in broker.fetches()]
    assert min(o for o in offsets if o is not None) == log.log_start  # never below the log start
    assert read.requests == len(broker.sent)


def test_bounded_lookback_stops_early_on_a_batch_boundary(broker: RecordedBroker) -> None:
    log = Log.build(0, 40)
    start = log.batches[-6][0]
    broker.responder = serve(log)
    want = 1200
    with client(broker) as c:
        read = c.read_range(live_range(log, start, lookback=want))
    tail = log.bytes_between(start, log.end)
    back = bytes(read.data)[: len(read.data) - len(tail)]
    assert bytes(read.data).endswith(tail)
    assert len(back) >= want and not read.reached_log_start
    assert read.first_offset is not None and read.first_offset > 0
    assert bytes(read.data) == log.bytes_between(read.first_offset, log.end)  # whole batches, no overlap
    assert read.lookback_reached is not None and 0 < read.lookback_reached <= read.first_offset


def test_range_starting_inside_a_batch_reads_it_whole(broker: RecordedBroker) -> None:
    """The leader returns the batch holding the fetch offset; the look-back continues below its base."""
    log = Log.build(0, 6)
    start = log.batches[4][0] + 2  # inside the third data batch
    broker.responder = serve(log)
    with client(broker) as c:
        read = c.read_range(live_range(log, start, lookback=1))
    assert read.first_offset is not None and read.first_offset < log.batches[4][0]
    assert bytes(read.data) == log.bytes_between(read.first_offset, log.end)


# --------------------------------------------------------------------------------------------
# SASL/SSL settings reach the KafkaNetClient
# --------------------------------------------------------------------------------------------

SECURE = {
    "bootstrap.servers": "ignored:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "txnlog",
    "sasl.password": "s3cret",
    "ssl.ca.location": "/etc/kafka/ca.pem",
    "ssl.certificate.location": "/etc/kafka/client.pem",
    "ssl.key.location": "/etc/kafka/client.key",
    "ssl.key.password": "keypass",
    "request.timeout.ms": 45000,
    "socket.keepalive.enable": True,  # librdkafka-only: dropped
}

SECURE_KW = {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_plain_username": "txnlog",
    "sasl_plain_password": "s3cret",
    "ssl_cafile": "/etc/kafka/ca.pem",
    "ssl_certfile": "/etc/kafka/client.pem",
    "ssl_keyfile": "/etc/kafka/client.key",
    "ssl_password": "keypass",
    "request_timeout_ms": 45000,
    "ssl_check_hostname": True,  # librdkafka's default (https) for SSL listeners
}


def test_kafka_python_settings_maps_sasl_ssl_names() -> None:
    assert kafka_python_settings(SECURE) == SECURE_KW
    plain = kafka_python_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"})
    assert plain == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
    off = kafka_python_settings({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"})
    assert off == {"security_protocol": "SSL", "ssl_check_hostname": False}


def test_fetch_client_passes_the_settings_to_kafka_net_client(broker: RecordedBroker) -> None:
    with client(broker, SECURE):
        pass
    # frames up to a whole Fetch response (kafka-python refuses frames above 1,000,000 bytes by default)
    settings = FetchSettings()
    assert broker.kwargs == {
        "bootstrap_servers": ["b1:9092", "b2:9092"],
        "client_id": "txnlog-live-batches",
        "receive_message_max_bytes": settings.max_bytes + settings.partition_max_bytes + 2**20,
        **SECURE_KW,
    }
    with client(broker, {**SECURE, "client.id": "etl-7"}):
        pass
    assert broker.kwargs["client_id"] == "etl-7"


def test_sasl_failure_at_connect_is_one_error_and_the_client_is_closed(
    broker: RecordedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(node_id: Any = None, timeout_ms: int = 10000) -> Any:
        raise Errors.SaslAuthenticationFailedError(
            "Authentication failed during authentication due to invalid credentials"
        )

    monkeypatch.setattr(broker, "check_version", refuse)
    with pytest.raises(
        LiveReadError, match=r"cannot reach b1:9092,b2:9092 \(SaslAuthenticationFailedError: .*'kafka' settings"
    ):
        FetchClient("b1:9092,b2:9092", SECURE)
    assert broker.closed


def test_recorded_batches_are_what_kafka_python_decodes() -> None:
    """The batches in the recordings are real v2 batches: kafka-python's own reader walks them."""
    from kafka.record import MemoryRecords

    log = Log.build(10, 3)
    records = MemoryRecords(log.bytes_between(10, log.end))
    seen = []
    while (batch := records.next_batch()) is not None:
        seen.append((batch.base_offset, batch.is_transactional, batch.is_control_batch, len(list(batch))))
    assert seen == [(10, True, False, 4), (14, True, True, 1)] * 1 + [
        (15, True, False, 4),
        (19, True, True, 1),
        (20, True, False, 4),
        (24, True, True, 1),
    ]
