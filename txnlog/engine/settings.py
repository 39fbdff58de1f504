"""What a per-partition task is told besides its files (txnlog.engine.tasks), as typed values; and the same values
as the string options of Spark's Data Sources, each way in one place (:meth:`options`, :meth:`from_options`). What a
run's decode is told, resolved once from its config: :class:`ReadSettings`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txnlog.live.fetch import FetchSettings

#: The smallest segment of a partition read whole that finishes its own inner transactions (the
#: ``edge_segment_bytes`` option). Its fragments otherwise stay in the task's merge until the task ends, and a
#: hot partition's big segments then hold the reading process's peak memory up; a segment that finishes its own
#: costs a merge and a staged file, which small segments (whose fragments weigh little) are not worth
#: (benchmarks/RESULTS.md §2, "As a user runs it").
EDGE_SEGMENT_BYTES = 64 << 20

#: The bytes of whole partitions a task merges before it finishes their transactions and starts a new merge
#: (at a partition's end; the ``merge_bytes`` option). A task's group of small partitions grows with the input
#: (its share of the bytes); merged all at once it holds memory in proportion, in merges of this size it holds
#: little, at no cost in time (benchmarks/RESULTS.md §2, "Flat memory with threads: merges of 16 MiB"). Every
#: merge of a task stages into the task's one file.
MERGE_BYTES = 16 << 20

#: the scratch directory's subdirectory where a split partition's fragments are staged for its merge
#: (txnlog.engine.spark.collect)
FRAGMENTS_STAGE = "fragments"


def option_flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes")


def option_limit(options: dict[str, str]) -> int | None:
    """The ``max_decompressed_bytes`` option (None: the decoders' default)."""
    value = options.get("max_decompressed_bytes")
    return None if value is None else int(value)


@dataclass(frozen=True)
class Decode:
    """How a file is decoded: its CRCs checked or not, and what the compressed control and
    ``__transaction_state`` batches of one file may expand to (None: the decoders' default,
    ``txnlog.kafka.compression``)."""

    check_crc: bool = True
    max_decompressed_bytes: int | None = None

    def options(self) -> dict[str, str]:
        out = {"check_crc": str(self.check_crc).lower()}
        if self.max_decompressed_bytes is not None:
            out["max_decompressed_bytes"] = str(self.max_decompressed_bytes)
        return out

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Decode:
        return cls(option_flag(options, "check_crc", True), option_limit(options))


@dataclass(frozen=True)
class LogDirSettings:
    """The data partitions' task (txnlog.engine.tasks.log_dir_task). ``transactions``: the task holds whole
    partitions and finishes their transactions, staged under ``stage``, instead of handing on fragments; a split
    partition's fragments staged under ``fragments_stage``, one directory per partition; ``edge_segment_bytes``
    (:data:`EDGE_SEGMENT_BYTES`) and ``merge_bytes`` (:data:`MERGE_BYTES`) bound what a task's merge holds."""

    decode: Decode = Decode()
    transactions: bool = False
    stage: str | None = None
    fragments_stage: str | None = None
    edge_segment_bytes: int = EDGE_SEGMENT_BYTES
    merge_bytes: int = MERGE_BYTES

    def options(self) -> dict[str, str]:
        out = {**self.decode.options(), "transactions": str(self.transactions).lower()}
        for name, value in (("stage", self.stage), ("fragments_stage", self.fragments_stage)):
            if value is not None:
                out[name] = value
        if self.edge_segment_bytes != EDGE_SEGMENT_BYTES:
            out["edge_segment_bytes"] = str(self.edge_segment_bytes)
        if self.merge_bytes != MERGE_BYTES:
            out["merge_bytes"] = str(self.merge_bytes)
        return out

    @classmethod
    def from_options(cls, options: dict[str, str]) -> LogDirSettings:
        return cls(
            Decode.from_options(options),
            option_flag(options, "transactions", False),
            options.get("stage"),
            options.get("fragments_stage"),
            int(options.get("edge_segment_bytes") or EDGE_SEGMENT_BYTES),
            int(options.get("merge_bytes") or MERGE_BYTES),
        )


@dataclass(frozen=True)
class TxnStateSettings:
    """The ``__transaction_state`` partitions' task (txnlog.engine.tasks.txn_state_task). ``reduce``: the task
    holds every replica of its coordinator partitions and hands on only the records the verdicts need
    (txnlog.rules.coordinator), every record staged under ``stage``; else every record decoded."""

    decode: Decode = Decode()
    reduce: bool = False
    stage: str | None = None

    def options(self) -> dict[str, str]:
        out = {**self.decode.options(), "reduce": str(self.reduce).lower()}
        return out if self.stage is None else {**out, "stage": self.stage}

    @classmethod
    def from_options(cls, options: dict[str, str]) -> TxnStateSettings:
        return cls(Decode.from_options(options), option_flag(options, "reduce", False), options.get("stage"))


def log_dir_settings(
    decode: Decode, scratch: str, *, shared: bool, dumps: bool
) -> tuple[LogDirSettings, TxnStateSettings]:
    """The settings of a run's data and ``__transaction_state`` tasks over its log dirs, staging under ``scratch``.
    ``shared``: other inputs may hold the same coordinator partitions (the records are reduced later, not where
    decoded); ``dumps``: kafka-dump-log.sh files may hold replicas too (transactions are merged later, not per
    task)."""
    segments = LogDirSettings(
        decode,
        transactions=not dumps,  # whole partitions per task, merged into transactions there
        stage=f"{scratch}/transactions",
        fragments_stage=f"{scratch}/{FRAGMENTS_STAGE}",  # a split partition's fragments, per partition
    )
    return segments, TxnStateSettings(decode, reduce=not shared, stage=f"{scratch}/coordinator_history")


@dataclass(frozen=True)
class ReadSettings:
    """What a run's decode is told besides its inputs, resolved once from the config (txnlog.pipeline.decode):
    how each file is decoded, the segments read in pieces (above ``split_segment_bytes``, in Spark's tasks;
    txnlog.sources.splits; 0: never), and a live cluster's client settings and Fetch bounds."""

    decode: Decode = Decode()
    split_segment_bytes: int = 0
    kafka: dict[str, Any] = field(default_factory=dict)
    fetch: FetchSettings | None = None
