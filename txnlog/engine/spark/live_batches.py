"""``txnlog_live_batches``: data partitions' record batches read from a live cluster (the Kafka source).

    spark.read.format("txnlog_live_batches").options(**batches_options(bootstrap, kafka, cut)).load()

Rows have :data:`~txnlog.model.rows.SEGMENT_SUMMARY_SCHEMA`, exactly as the segment reader gives
for a copied ``.log`` file: ``run`` and ``marker`` fragments, one ``segment`` row per range, and
``quarantine`` rows for damage. The range of a partition plays the segment: ``file`` is
``kafka://<topic>-<partition>``, ``broker`` is ``live`` (the leader answers; which broker that is may
change while the job runs), ``file_offset`` the first offset read, positions are byte positions in the
range as read.

* The driver captures every range once, before Spark reads anything (:func:`capture_cut`: ListOffsets
  for the log start, the last stable offset and the high watermark of every partition): that moment is
  the run's ``as_of`` (``runs.as_of_source = live_cut``) and no task reads past it.
* One InputPartition per range that has something to read (ranges are packed when there are far more
  than tasks); the ranges with nothing to read (LSO = high watermark under ``unstable``) share one
  task that only writes their ``segment`` rows, with no request to the cluster.
* A task fetches its ranges' raw batch bytes (:class:`txnlog.live.fetch.FetchClient`) and decodes them
  with the compiled walk of segment files (:func:`txnlog.kafka.record_batch.scan_segment`, compressed
  batches never decompressed) and the segment reader's summary (:func:`~txnlog.engine.segments.summarize_segment`).

Which offsets (``range``), per partition:

``unstable`` (default)
    [LSO, high watermark): every open transaction's batches and what was written after the first,
    plus ``lookback_bytes`` before the LSO (down to the log start) so that the open transactions'
    producers' previous markers are usually seen. Nothing when LSO = high watermark.
``since-last-run``
    what is new since the previous run of the same cluster in the same output (:func:`previous_cut`),
    for a nightly job: from min(the previous cut's LSO, the current LSO) to the high watermark. The
    history in ``transactions`` keeps every transaction once across runs: a run writes the transactions
    whose marker lies at or after the previous cut's high watermark, and those still open; a transaction
    open at the previous cut was written by that run as ``OPEN``, is read whole again (its first batch
    is at or after that cut's LSO) and written with its outcome now, and the previous run's ``OPEN`` row
    is dropped in the same Delta commit (txnlog.output.delta.Supersede). Each run stays the per-(cluster,
    as_of) replace of docs/design.md §5, and its findings are complete on their own (every transaction open now
    is read). A partition the previous run did not read (the first run, a new topic) is read as
    ``unstable``. (The issue's "from min(previous high watermark, current LSO)" misses a transaction
    that was open at the previous cut and has ended since: its first batch lies below that bound.)
``all``
    [log start, high watermark): the retained log (small topics, tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from txnlog.engine.segments import SegmentRows, limit_kwargs, summarize_segment
from txnlog.engine.settings import Decode, ReadSettings
from txnlog.engine.spark.sources import arrow_to_spark_schema
from txnlog.kafka.record_batch import scan_segment
from txnlog.live.admin import cut_offsets
from txnlog.live.fetch import FetchClient, FetchSettings, LiveRange
from txnlog.live.groups import consumer_groups
from txnlog.model.config import LIVE_RANGES
from txnlog.model.contract import LIVE_REPLICA, InputSource
from txnlog.model.errors import UsageError
from txnlog.model.rows import SEGMENT_SUMMARY_SCHEMA, Checkpoint
from txnlog.output.delta import read_table
from txnlog.sources.logdirs import LogFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from txnlog.live.fetch import RangeRead

LIVE_BATCHES_SOURCE = "txnlog_live_batches"
RANGE_UNSTABLE, RANGE_SINCE_LAST_RUN, RANGE_ALL = LIVE_RANGES
DEFAULT_LOOKBACK_BYTES = 2**20
#: the topic the coordinator source reads (txnlog.engine.spark.live_source); never read here as data
TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class PreviousCut:
    """What the previous live run of a cluster saw: its ``as_of`` and each partition's (LSO, high watermark)."""

    as_of: datetime
    offsets: Mapping[tuple[str, int], tuple[int, int]]


def previous_cut(output: str, cluster: str) -> PreviousCut | None:
    """The newest complete run of ``cluster`` under ``output`` that read data partitions live, or None.

    Its ``partition_health`` rows with ``source = live_log`` hold the cut's LSO and high watermark
    (txnlog.engine.spark.live_batches.LiveCut.checkpoints). Runs that are not ``SUCCEEDED`` are ignored.
    """

    try:
        runs = read_table(output, "runs", cluster=cluster)
    except UsageError:  # no table yet: the first run
        return None
    for run in sorted(runs.to_pylist(), key=lambda r: r["as_of"], reverse=True):
        if run.get("status") != "SUCCEEDED":
            continue
        health = read_table(output, "partition_health", cluster=cluster, as_of=run["as_of"])
        health = health.filter(pc.equal(health.column("source"), InputSource.LIVE_LOG.value))
        if not health.num_rows:
            continue  # an offline run of the same cluster
        offsets = {
            (r["topic"], int(r["partition"])): (int(r["last_stable_offset"]), int(r["high_watermark"]))
            for r in health.select(["topic", "partition", "last_stable_offset", "high_watermark"]).to_pylist()
            if r["last_stable_offset"] is not None and r["high_watermark"] is not None
        }
        return PreviousCut(run["as_of"], offsets)
    return None


@dataclass(frozen=True)
class LiveCut:
    """Every range to read, captured at one moment (``as_of_ms``) by the driver; ``previous``: the run a
    ``since-last-run`` cut continues."""

    as_of_ms: int
    ranges: tuple[LiveRange, ...]
    previous: PreviousCut | None = None
    #: the consumer groups' offsets and members asked right after the cut (txnlog.live.groups.GROUPS_SCHEMA)
    groups: pa.Table | None = None

    def history_bounds(self) -> pa.Table:
        """Which transactions read this run writes to ``transactions``, per partition (the others are
        history a previous run wrote, or were only partly read): ``marker_from`` (the previous cut's
        high watermark, ``since-last-run``) and ``first_from`` (the LSO, ``unstable``); -1: no bound."""
        rows = [r for r in self.ranges if r.written_from >= 0 or r.first_from >= 0]
        return pa.table(
            {
                "topic": pa.array([r.topic for r in rows], pa.string()),
                "partition": pa.array([r.partition for r in rows], pa.int32()),
                "marker_from": pa.array([r.written_from for r in rows], pa.int64()),
                "first_from": pa.array([r.first_from for r in rows], pa.int64()),
            }
        )

    def supersede(self) -> tuple[datetime, tuple[str, ...]] | None:
        """(the previous run's as_of, the topics re-read): whose OPEN rows this run's rows replace."""
        topics = sorted({r.topic for r in self.ranges if r.written_from >= 0})
        return (self.previous.as_of, tuple(topics)) if self.previous is not None and topics else None

    @property
    def partitions(self) -> int:
        return len(self.ranges)

    def checkpoints(self) -> list[Checkpoint]:
        """The cut's offsets as the replica ``live``'s checkpoints: its log start and high watermark (what a
        copied log dir's checkpoint files give), so the range read is not taken for the whole log."""
        return [
            Checkpoint(LIVE_REPLICA, r.topic, r.partition, r.high_watermark, log_start_offset=r.log_start)
            for r in self.ranges
        ]

    @property
    def unstable(self) -> int:
        """Partitions whose LSO is behind the high watermark (an open transaction pins them)."""
        return sum(1 for r in self.ranges if r.last_stable_offset < r.high_watermark)


def capture_cut(
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None,
    topics: Sequence[str] | None,
    *,
    mode: str = RANGE_UNSTABLE,
    lookback_bytes: int = DEFAULT_LOOKBACK_BYTES,
    previous: PreviousCut | None = None,
    output: str | None = None,
    cluster: str = "",
    groups: bool = False,
    timeout_s: float = 30.0,
) -> LiveCut:
    """The consistent cut: each data partition's range under ``mode``, from one metadata request and one round
    of ListOffsets (txnlog.live.admin.cut_offsets).

    ``topics``: the topics to read, or None for every topic the credentials can describe
    (``__consumer_offsets`` included; ``__transaction_state`` is the coordinator source's).
    ``previous`` (``since-last-run``): the previous run's cut, or where it is read (:func:`previous_cut`: the run of
    ``cluster`` under ``output``); a partition it does not know is read as ``unstable``. ``groups``: the consumer
    groups' offsets asked right after the cut, with the cut's metadata (txnlog.live.groups.consumer_groups).
    """

    if mode not in LIVE_RANGES:
        raise UsageError(f"--live-range {mode}: must be one of {', '.join(LIVE_RANGES)}")
    if output is not None and mode == RANGE_SINCE_LAST_RUN:
        previous = previous_cut(output, cluster)
    given = list(topics) if topics else None
    admin, md, offsets = cut_offsets(bootstrap, kafka_conf, given, timeout_s, without=TRANSACTION_STATE_TOPIC)
    as_of_ms = int(time.time() * 1000)  # the cut: every offset above was answered before this moment
    ranges = []
    for o in offsets:
        lso, hw, log_start = o["last_stable_offset"], o["high_watermark"], o["log_start_offset"]
        before = previous.offsets.get((o["topic"], o["partition"])) if previous is not None else None
        written_from = -1
        if mode == RANGE_ALL:
            start, back = log_start, 0
        elif mode == RANGE_SINCE_LAST_RUN and before is not None:
            # From the previous cut's LSO: every transaction open then is read whole again (its first
            # batch is at or after that LSO: UnifiedLog.lastStableOffset is the first offset of the
            # earliest open transaction, ProducerStateManager.firstUnstableOffset), and what came after.
            # Transactions that had ended before the previous cut's high watermark are its rows already.
            prev_lso, prev_hw = before
            start, back = max(log_start, min(prev_lso, lso)), 0
            written_from = prev_hw
        else:
            start, back = lso, (lookback_bytes if lso < hw else 0)
        first_from = lso if mode != RANGE_ALL and written_from < 0 else -1
        ranges.append(
            LiveRange(o["topic"], o["partition"], start, hw, log_start, lso, hw, back, written_from, first_from)
        )
    asked = consumer_groups(admin, md, given) if groups else None
    return LiveCut(as_of_ms, tuple(ranges), previous if mode == RANGE_SINCE_LAST_RUN else None, asked)


def batches_options(
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None,
    cut: LiveCut,
    *,
    settings: FetchSettings | None = None,
    check_crc: bool = True,
    min_partitions: int = 2,
    max_decompressed_bytes: int | None = None,
) -> dict[str, str]:
    """Reader options: the cluster, the client settings and the captured ranges; ``max_decompressed_bytes``
    bounds what one range's compressed control batches may expand to (None: the decoders' default)."""
    limit = {} if max_decompressed_bytes is None else {"max_decompressed_bytes": str(max_decompressed_bytes)}
    return {
        **limit,
        "bootstrap_servers": bootstrap,
        "conf": json.dumps(dict(kafka_conf or {})),
        "ranges": json.dumps([asdict(r) for r in cut.ranges]),
        "settings": json.dumps(asdict(settings or FetchSettings())),
        "check_crc": str(check_crc).lower(),
        "min_partitions": str(min_partitions),
    }


def read_live_batches(spark: SparkSession, bootstrap: str, cut: LiveCut, settings: ReadSettings) -> DataFrame:
    """The live data partitions' batches in ``cut`` (this source), as segment-summary rows labelled with their
    input; ``settings``: the client settings, the Fetch bounds and how the batches are decoded."""
    spark.dataSource.register(LiveBatchesSource)
    options = batches_options(
        bootstrap, settings.kafka, cut, settings=settings.fetch, check_crc=settings.decode.check_crc,
        min_partitions=max(2, spark.sparkContext.defaultParallelism),
        max_decompressed_bytes=settings.decode.max_decompressed_bytes,
    )  # fmt: skip
    df = spark.read.format(LiveBatchesSource.name()).options(**options).load()
    return df.withColumn("input", F.lit(InputSource.LIVE_LOG))


class _RangesPartition(InputPartition):
    """The ranges one task reads; ``fetch`` false: none has anything to read (segment rows only)."""

    def __init__(self, ranges: list[LiveRange], fetch: bool):
        super().__init__({"ranges": [asdict(r) for r in ranges], "fetch": fetch})

    def ranges(self) -> list[LiveRange]:
        return [LiveRange(**d) for d in self.value["ranges"]]


def pack_ranges(ranges: Sequence[LiveRange], tasks: int) -> list[_RangesPartition]:
    """One partition per range to read (packed into ``tasks`` by offsets when there are more), and one
    for all the ranges with nothing to read."""
    busy = [r for r in ranges if r.end > r.start]
    idle = [r for r in ranges if r.end <= r.start]
    out: list[_RangesPartition] = []
    if len(busy) <= tasks:
        out.extend(_RangesPartition([r], True) for r in busy)
    else:  # greedy by offsets to read (the bytes are not known before the read)
        bins: list[list[LiveRange]] = [[] for _ in range(tasks)]
        load = [0] * tasks
        for r in sorted(busy, key=lambda r: r.end - r.start, reverse=True):
            i = load.index(min(load))
            bins[i].append(r)
            load[i] += r.end - r.start + 1
        out.extend(_RangesPartition(b, True) for b in bins if b)
    if idle:
        out.append(_RangesPartition(idle, False))
    return out


def range_file(r: LiveRange, read: RangeRead | None) -> LogFile:
    """The range as the segment it plays (see the module docstring)."""
    first = read.first_offset if read is not None and read.first_offset is not None else r.start
    size = int(read.data.size) if read is not None else 0
    return LogFile(r.name, LIVE_REPLICA, r.topic, r.partition, first, size, "log")


def read_ranges(
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None,
    ranges: Sequence[LiveRange],
    *,
    settings: FetchSettings | None = None,
    check_crc: bool = True,
    fetch: bool = True,
    reads: list[RangeRead] | None = None,
    max_decompressed_bytes: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """SEGMENT_SUMMARY rows of ``ranges``, read now (``reads`` collects what each read cost); a range whose
    compressed batches expand past ``max_decompressed_bytes`` is quarantined there, as a segment file is."""

    segments = SegmentRows()
    if not fetch:
        for r in ranges:
            yield from summarize_segment(range_file(r, None), check_crc, segments, scan=scan_segment(b"", file=r.name))
        yield from segments.batches()
        return
    with FetchClient(bootstrap, kafka_conf, settings) as client:
        for r in ranges:
            read = client.read_range(r)
            if reads is not None:
                reads.append(read)
            file = range_file(r, read)
            scan = scan_segment(read.data, file=r.name, check_crc=check_crc, **limit_kwargs(max_decompressed_bytes))
            for batch in summarize_segment(file, check_crc, segments, scan=scan):
                yield from segments.batches()
                yield batch
    yield from segments.batches()


class _LiveBatchesReader(DataSourceReader):
    def __init__(self, options: dict[str, str]):
        self.options = options
        self.ranges = [LiveRange(**d) for d in json.loads(options.get("ranges", "[]"))]
        self.settings = FetchSettings(**json.loads(options.get("settings", "{}")))
        self.decode = Decode.from_options(options)

    def partitions(self) -> list[InputPartition]:
        tasks = max(1, int(self.options.get("min_partitions", "2"))) * 4
        return list(pack_ranges(self.ranges, tasks))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _RangesPartition)
        yield from read_ranges(
            self.options["bootstrap_servers"],
            json.loads(self.options.get("conf") or "{}"),
            partition.ranges(),
            settings=self.settings,
            check_crc=self.decode.check_crc,
            fetch=bool(partition.value["fetch"]),
            max_decompressed_bytes=self.decode.max_decompressed_bytes,
        )


class LiveBatchesSource(DataSource):
    """``spark.read.format("txnlog_live_batches").options(**batches_options(...)).load()``"""

    @classmethod
    def name(cls) -> str:
        return LIVE_BATCHES_SOURCE

    def schema(self) -> StructType:
        return arrow_to_spark_schema(SEGMENT_SUMMARY_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _LiveBatchesReader(dict(self.options))
