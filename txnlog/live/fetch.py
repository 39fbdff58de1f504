"""Raw record batches of a live cluster's data partitions: the client of the Kafka source (no Spark).

The Kafka source (``txnlog.engine.spark.live_batches``) reads each data partition's range as *batches*, the
bytes a Fetch response carries, and decodes them with the same compiled walk as segment files. The
requests go through kafka-python's protocol layer (``kafka.protocol.consumer.FetchRequest`` and
``MetadataRequest`` over ``kafka.net.KafkaNetClient``, which brings SASL/SSL from the config's
``kafka`` mapping, translated by :func:`txnlog.live.admin.kafka_python_settings`): no consumer API that
hides batch headers, no hand-written wire client.

How a range is read, following the Java consumer (``org.apache.kafka.clients.consumer.internals``
``AbstractFetch``/``CompletedFetch``) where it applies:

* ``isolation_level = READ_UNCOMMITTED``: nothing is filtered, so open transactions' batches and the
  markers come back as the leader keeps them (``Log.read`` with ``FetchIsolation.HIGH_WATERMARK``).
* one partition per Fetch request, so KIP-74 (Fetch v3+) guarantees at least one whole batch even
  when it is larger than ``partition_max_bytes``; the partial entry a size limit cuts at the end is
  dropped and fetched again from the next offset (:mod:`txnlog.kafka.framing`).
* Fetch v4-v12 (topic names; v13 names topics by id, KIP-516).
* errors: a leader change (``NOT_LEADER_OR_FOLLOWER``, ``FENCED_LEADER_EPOCH``, ``UNKNOWN_LEADER_EPOCH``,
  ``LEADER_NOT_AVAILABLE``, every error kafka-python marks retriable or invalid-metadata) refreshes
  the partition's leader from Metadata and retries the same offset, a bounded number of times; any
  other error stops the read with one line naming the partition, the offset and the error (a topic
  error in the Metadata answer too: ``TOPIC_AUTHORIZATION_FAILED`` there is not a leader election).
  Nothing returns a partial range silently: :class:`RangeRead` says what was read.
* retention: ``OFFSET_OUT_OF_RANGE`` carries no log start from a Kafka broker
  (``ReplicaManager.createLogReadResult``: -1), so it is asked with ListOffsets ``EARLIEST``, as the
  consumer's offset reset does; a log start inside the range continues the read from there
  (``RangeRead.truncated_from``).
* quotas: a response's ``throttle_time_ms`` is waited out before the next request (KIP-219: the
  broker answers at once and expects the client to back off).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from txnlog.kafka.framing import whole_entries
from txnlog.live.admin import kafka_python_settings

#: Fetch v13+ names topics by id (KIP-516); names are what the config and the tables use
FETCH_MAX_VERSION = 12
METADATA_MAX_VERSION = 12
LIST_OFFSETS_MAX_VERSION = 9
#: ListOffsets' timestamp for the log start offset (``ListOffsetsRequest.EARLIEST_TIMESTAMP``)
_EARLIEST = -2
READ_UNCOMMITTED = 0
#: the Java consumer's defaults: ``fetch.max.bytes`` and ``max.partition.fetch.bytes``
DEFAULT_FETCH_MAX_BYTES = 52_428_800
DEFAULT_PARTITION_MAX_BYTES = 1_048_576
#: the look-back's first window when nothing says how many bytes an offset takes
_FIRST_WINDOW_OFFSETS = 64


class LiveReadError(RuntimeError):
    """A range could not be read; the message names the partition, the offset and what to do."""


@dataclass(frozen=True)
class FetchSettings:
    """Bounds of the Fetch requests (the config's ``live_fetch_*`` keys)."""

    max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES
    timeout_s: float = 120.0
    retries: int = 8
    backoff_s: float = 0.2


@dataclass(frozen=True)
class LiveRange:
    """One data partition's range, captured by the driver (the consistent cut).

    ``[start, end)`` is read (``end`` = the high watermark at the cut); ``lookback_bytes`` more are read
    before ``start``, down to ``log_start`` at most, so that an open transaction's producer's previous
    marker is usually seen (the KAFKA-14053 signature).
    """

    topic: str
    partition: int
    start: int
    end: int
    log_start: int
    last_stable_offset: int
    high_watermark: int
    lookback_bytes: int = 0
    #: since-last-run: the previous run's high watermark; transactions whose marker lies below it were
    #: written by that run (-1: every transaction read is this run's)
    written_from: int = -1
    #: unstable: the transactions this run writes begin at or after this offset (the LSO): the look-back
    #: before it is evidence (previous markers), and a transaction seen there may have begun before the read
    first_from: int = -1

    @property
    def name(self) -> str:
        return f"kafka://{self.topic}-{self.partition}"


@dataclass
class RangeRead:
    """What :meth:`FetchClient.read_range` read: whole log entries in offset order, and the accounting."""

    data: np.ndarray  # uint8: the entries, as a segment file would hold them
    first_offset: int | None  # base offset of the first entry (None: nothing in the range)
    next_offset: int  # the offset after the last entry read (the range's start when none)
    bytes_fetched: int  # every byte the responses carried, dropped partial entries included
    requests: int
    lookback_reached: int | None  # the first offset the look-back read (None: no look-back read)
    reached_log_start: bool  # the look-back reached the log start offset: nothing earlier exists
    truncated_from: int | None = None  # retention deleted [start, truncated_from) before it was read
    notes: list[str] = field(default_factory=list)


class FetchClient:
    """One connection pool (a task's); ``read_range`` any number of ranges, then ``close``."""

    def __init__(
        self, bootstrap: str, kafka_conf: Mapping[str, Any] | None = None, settings: FetchSettings | None = None
    ):

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            # Lazy in this module: the Kafka clients load only when a live cluster is asked.
            from kafka.net import KafkaNetClient

            self.settings = settings or FetchSettings()
            kw = {"client_id": "txnlog-live-batches", **kafka_python_settings(kafka_conf)}
            # a Fetch response carries up to max_bytes of records (and one whole batch beyond, KIP-74) plus its
            # headers; kafka-python's connection refuses frames above 1,000,000 bytes by default
            frame = self.settings.max_bytes + self.settings.partition_max_bytes + 2**20
            kw.setdefault("receive_message_max_bytes", frame)
            self._client = KafkaNetClient(bootstrap_servers=bootstrap.split(","), **kw)
        try:
            self._client.check_version(timeout_ms=int(self.settings.timeout_s * 1000))
        except Exception as e:  # noqa: BLE001 - the client's own errors: unreachable, refused, auth
            self._client.close()
            raise LiveReadError(
                f"cannot reach {bootstrap} ({type(e).__name__}: {e}); check the address and the 'kafka' settings"
            ) from e
        self._leaders: dict[tuple[str, int], int] = {}
        self._throttled_until = 0.0
        self.requests = 0

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> FetchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests ---------------------------------------------------------------------------------

    def _send(self, node: int, request: Any) -> Any:
        wait = self._throttled_until - time.monotonic()
        if wait > 0:  # KIP-219: the broker muted this connection for throttle_time_ms
            time.sleep(wait)
        response = self._client.send_and_receive(node, request, timeout_ms=int(self.settings.timeout_s * 1000))
        self.requests += 1
        throttle = int(getattr(response, "throttle_time_ms", 0) or 0)
        if throttle > 0:
            self._throttled_until = time.monotonic() + throttle / 1000
        return response

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> int:
        """The partition's leader (Metadata), cached until a fetch says it moved."""
        key = (topic, partition)
        if not refresh and key in self._leaders:
            return self._leaders[key]
        from kafka.protocol.metadata import MetadataRequest

        node = self._client.least_loaded_node(bootstrap_fallback=True)
        version = self._client.api_version(MetadataRequest, max_version=METADATA_MAX_VERSION)
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False, version=version
        )
        response = self._send(node, request)
        for t in response.topics:
            if t.name != topic:
                continue
            code = int(t.error_code)
            if code:  # the topic's error: no partitions listed (Metadata's topic-level error)
                import kafka.errors as Errors

                err = Errors.for_code(code)
                if err.retriable or err.invalid_metadata:  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE
                    raise _Retry(f"{topic}: the metadata answered {err.__name__}")
                raise LiveReadError(
                    f"{topic}-{partition}: the metadata answered {err.__name__}"
                    + ("; the job needs Describe and Read on the topic" if "Authorization" in err.__name__ else "")
                )
            for p in t.partitions:
                self._leaders[(topic, p.partition_index)] = int(p.leader_id)
        leader = self._leaders.get(key, -1)
        if leader < 0:
            raise _Retry(f"{topic}-{partition} has no leader in the metadata")
        return leader

    def fetch(self, topic: str, partition: int, offset: int, partition_max_bytes: int) -> Any:
        """One Fetch of one partition from its leader (READ_UNCOMMITTED): the partition's response data.

        Retries leader changes and retriable errors ``settings.retries`` times; raises
        :class:`LiveReadError` otherwise. ``OFFSET_OUT_OF_RANGE`` is returned to the caller.
        """
        import kafka.errors as Errors
        from kafka.protocol.consumer import FetchRequest

        def request(version: int) -> Any:
            part = FetchRequest.FetchTopic.FetchPartition(
                partition=partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
            return FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=self.settings.max_bytes,
                isolation_level=READ_UNCOMMITTED,
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
                version=version,
            )

        return self._ask_leader(
            topic, partition, offset, FetchRequest, FETCH_MAX_VERSION, request, _partition_data,
            accept=(Errors.OffsetOutOfRangeError.errno,),
        )  # fmt: skip

    def log_start(self, topic: str, partition: int, offset: int) -> int:
        """The partition's log start offset now (ListOffsets ``EARLIEST`` from the leader).

        What the Java consumer does when a Fetch answers ``OFFSET_OUT_OF_RANGE`` with a reset policy
        (``FetchCollector`` requests an offset reset; ``OffsetFetcher`` sends ListOffsets): the broker's
        out-of-range answer itself carries no log start (``ReplicaManager.createLogReadResult``: -1).
        ``offset`` is the fetch offset that was out of range (for the messages).
        """
        from kafka.protocol.consumer import ListOffsetsRequest

        def request(version: int) -> Any:
            t = ListOffsetsRequest.ListOffsetsTopic
            part = t.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=_EARLIEST)
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=READ_UNCOMMITTED,
                topics=[t(name=topic, partitions=[part])],
                timeout_ms=int(self.settings.timeout_s * 1000),
                version=version,
            )

        data = self._ask_leader(
            topic, partition, offset, ListOffsetsRequest, LIST_OFFSETS_MAX_VERSION, request, _offsets_data
        )  # fmt: skip
        return int(data.offset)

    def _ask_leader(
        self,
        topic: str,
        partition: int,
        offset: int,
        api: Any,
        max_version: int,
        request_for: Any,
        partition_of: Any,
        accept: tuple[int, ...] = (),
    ) -> Any:
        """``request_for(version)`` sent to the partition's leader: the partition's part of the answer.

        Errors as ``AbstractFetch``/``FetchCollector`` handle them: a leader change or another retriable
        error refreshes the leader from Metadata and retries the same offset (``settings.retries``
        times, with a growing back-off); error codes in ``accept`` are returned; anything else raises
        :class:`LiveReadError` with one line naming the partition, the offset and the error.
        """
        import kafka.errors as Errors

        s = self.settings
        last: str = ""
        for attempt in range(s.retries + 1):
            if attempt:
                time.sleep(s.backoff_s * attempt)
            try:
                node = self.leader(topic, partition, refresh=attempt > 0)
                version = self._client.api_version(api, max_version=max_version)
                response = self._send(node, request_for(version))
            except _Retry as e:
                last = str(e)
                continue
            except Errors.KafkaError as e:
                if e.retriable or e.invalid_metadata:
                    last = f"{type(e).__name__}: {e}"
                    continue
                raise LiveReadError(f"{topic}-{partition} at offset {offset}: {type(e).__name__}: {e}") from e
            data = partition_of(response, topic, partition)
            code = int(data.error_code)
            if code == 0 or code in accept:
                return data
            err = Errors.for_code(code)
            if err.retriable or err.invalid_metadata:
                last = err.__name__
                continue
            raise LiveReadError(
                f"{topic}-{partition} at offset {offset}: the leader answered {err.__name__}"
                + ("; the job needs Read on the topic" if "Authorization" in err.__name__ else "")
            )
        raise LiveReadError(
            f"{topic}-{partition} at offset {offset}: still failing after {s.retries} retries ({last}); "
            "the leader may be moving: run again, or raise live_fetch_retries"
        )

    # --- ranges -----------------------------------------------------------------------------------

    def _read(self, topic: str, partition: int, start: int, stop: int, read: RangeRead) -> list[np.ndarray]:
        """Whole entries with base offsets in [.., stop), from the one holding ``start`` on."""
        import kafka.errors as Errors

        chunks: list[np.ndarray] = []
        offset = start
        limit = self.settings.partition_max_bytes
        behind = 0  # empty answers from a leader whose high watermark is below stop
        while offset < stop:
            data = self.fetch(topic, partition, offset, limit)
            if int(data.error_code) == Errors.OffsetOutOfRangeError.errno:
                log_start = int(getattr(data, "log_start_offset", -1))
                if log_start < 0:  # what a Kafka broker answers (the log start is unknown in the error)
                    log_start = self.log_start(topic, partition, offset)
                if offset < log_start <= stop:  # retention deleted the head after the cut
                    read.truncated_from = log_start if read.truncated_from is None else read.truncated_from
                    read.notes.append(f"offsets {offset}..{log_start - 1} were deleted by retention before the read")
                    offset = log_start
                    continue
                raise LiveReadError(
                    f"{topic}-{partition}: offset {offset} is out of range (log start {log_start}); "
                    "the partition was truncated or recreated while the job ran: run again"
                )
            records = bytes(data.records or b"")
            read.bytes_fetched += len(records)
            buf = np.frombuffer(records, np.uint8)
            used, after, count, _first = whole_entries(buf, stop)
            if count == 0:
                if used == 0 and buf.size >= 12 and int.from_bytes(records[:8], "big", signed=True) < stop:
                    raise LiveReadError(
                        f"{topic}-{partition} at offset {offset}: the leader returned part of one batch only "
                        f"({buf.size} bytes); raise live_fetch_partition_max_bytes (a broker before 0.10.1 "
                        "does not return an oversized batch whole, KIP-74)"
                    )
                hw = int(data.high_watermark)
                if buf.size == 0 and 0 <= hw < stop:
                    # a new leader's high watermark lags the cut's until its followers fetch again: the
                    # offsets exist, wait for them (an empty answer is not the end of the range here)
                    behind += 1
                    if behind > self.settings.retries:
                        raise LiveReadError(
                            f"{topic}-{partition} at offset {offset}: the leader's high watermark {hw} stayed "
                            f"below the range end {stop} after {self.settings.retries} retries; the leader "
                            "may be moving: run again, or raise live_fetch_retries"
                        )
                    time.sleep(self.settings.backoff_s * behind)
                    continue
                break  # at the end: nothing (more) below stop
            chunks.append(buf[:used].copy() if used < buf.size else buf)
            offset = after
            if buf.size - used >= 12 and int(buf[used : used + 8].view(">i8")[0]) >= stop:
                break  # the response already shows the next entry at or past stop: no request to learn it again
        return chunks

    def read_range(self, r: LiveRange) -> RangeRead:
        """The range's entries, its look-back first (whole entries, offset order, no overlap)."""
        read = RangeRead(np.empty(0, np.uint8), None, r.start, 0, 0, None, False)
        before = self.requests
        tail = self._read(r.topic, r.partition, r.start, r.end, read) if r.end > r.start else []
        tail_bytes = sum(c.size for c in tail)
        first_tail = _first_base(tail)
        back: list[np.ndarray] = []
        if r.lookback_bytes > 0 and r.end > r.start:
            upper = r.start if first_tail is None else min(first_tail, r.start)
            got = 0
            per_offset = tail_bytes / max(1, r.end - r.start) if tail_bytes else 0.0
            while got < r.lookback_bytes and upper > r.log_start:
                want = r.lookback_bytes - got
                step = max(1, int(want / per_offset) + 1) if per_offset > 0 else _FIRST_WINDOW_OFFSETS
                lo = max(r.log_start, upper - step)
                window = self._read(r.topic, r.partition, lo, upper, read)
                size = sum(c.size for c in window)
                first = _first_base(window)
                if window and first is not None:
                    back[:0] = window
                    got += size
                    per_offset = size / max(1, upper - first)
                    upper = min(first, lo)
                else:  # nothing below upper from lo on (compacted or aborted offsets): look further back
                    upper = lo
                    per_offset = 0.0
                read.lookback_reached = upper
            read.reached_log_start = upper <= r.log_start
        pieces = back + tail
        read.data = np.concatenate(pieces) if len(pieces) > 1 else (pieces[0] if pieces else read.data)
        read.first_offset = _first_base(pieces)
        if tail:
            read.next_offset = _next_after(tail[-1])
        read.requests = self.requests - before
        return read


class _Retry(Exception):
    """Metadata without a leader for the partition (yet): refresh and retry."""


def _partition_data(response: Any, topic: str, partition: int) -> Any:
    for t in response.responses:
        if t.topic != topic:
            continue
        for p in t.partitions:
            if int(p.partition_index) == partition:
                return p
    raise LiveReadError(f"{topic}-{partition}: the Fetch response does not mention the partition")


def _offsets_data(response: Any, topic: str, partition: int) -> Any:
    for t in response.topics:
        if t.name != topic:
            continue
        for p in t.partitions:
            if int(p.partition_index) == partition:
                return p
    raise LiveReadError(f"{topic}-{partition}: the ListOffsets response does not mention the partition")


def _first_base(chunks: list[np.ndarray]) -> int | None:
    return int(chunks[0][:8].view(">i8")[0]) if chunks and chunks[0].size >= 8 else None


def _next_after(chunk: np.ndarray) -> int:

    return whole_entries(chunk)[1]
