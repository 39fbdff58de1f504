"""The output tables from the decoded rows: the run's ``as_of``, the thresholds its verdicts weigh, every
table by txnlog.rules.tables, and the live cluster's rows for --verify-live."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from txnlog.broker import as_of as as_of_rule
from txnlog.broker import classify
from txnlog.engine.decoded import Decoded
from txnlog.engine.spark.placement import Placement
from txnlog.engine.spark.staged_table import StagedTable
from txnlog.engine.staging import STAGED
from txnlog.live.verify import live_rows
from txnlog.model.words import count
from txnlog.pipeline.blocked import with_blocked
from txnlog.pipeline.inputs import Inputs
from txnlog.pipeline.scope import Progress, stderr_progress
from txnlog.rules import tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txnlog.engine.spark.live_batches import LiveCut
    from txnlog.model.config import Config


def resolve_as_of(
    option: str | None, times: dict[str, int | None], live_cut: LiveCut | None = None
) -> tuple[datetime, str]:
    """(as_of, where it came from): ``--as-of``, else the moment of a live run's cut, else the newest time a broker's
    clock wrote (txnlog.broker.as_of.choose)."""

    return as_of_rule.choose(option, times, None if live_cut is None else live_cut.as_of_ms)


def thresholds_of(config: Config, inputs: Inputs, decoded: Decoded, as_of: datetime) -> classify.Thresholds:
    """What the verdicts of this run weigh: its ``as_of``, the configured limits, and how much of
    ``__transaction_state`` the input holds (a live run reads all of it)."""
    partitions, decided = inputs.said.txn_state_partitions, inputs.said.decided
    live_read = bool(inputs.live) and inputs.live_txn_state  # a live cluster's __transaction_state is read whole
    return classify.Thresholds(
        as_of_ms=as_of_rule.to_ms(as_of),
        max_transaction_timeout_ms=config.max_transaction_timeout_ms,
        all_txn_state_partitions_read=live_read or len(decoded.txn_state_read) >= partitions,
        txn_state_partitions_read=None if live_read else len(decoded.txn_state_read),
        txn_state_partitions=partitions,
        # the evidence names the metadata log only where it decided the count; the input note says the rest
        txn_state_partitions_from=decided if inputs.said.counted else "",
        bootstrap_servers=config.bootstrap_servers,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=config.producer_id_expiration_check_interval_ms,
    )


def build_tables(
    spark: SparkSession | None,
    decoded: Decoded,
    thresholds: classify.Thresholds,
    *,
    scratch: str,
    as_of: datetime | None = None,
    as_of_source: str = "",
    placement: Placement | None = None,
    metadata: tuple[pa.Table, pa.Table] | None = None,
) -> dict[str, Any]:
    """Every output table (txnlog.rules.tables) from ``decoded``: Arrow tables, and ``transactions`` /
    ``coordinator_history`` as ``txnlog.engine.spark.staged_table.StagedTable`` values (staged under ``scratch``,
    finished by the writer: in Spark tasks, or in this process with ``placement.driver``). ``as_of`` adds the
    quarantine's warning rows for client clocks far past it; ``metadata``: the copy's KRaft metadata log's word on
    its partitions (``Inputs.said.notes``). The run key (cluster, as_of) is set by the writer."""

    built = tables.build(
        decoded.summary, decoded.records, thresholds, checkpoints=decoded.checkpoints, as_of=as_of,
        as_of_source=as_of_source, history_bounds=decoded.history_bounds, metadata=metadata,
    )  # fmt: skip
    driver = placement is not None and placement.driver
    threads = placement.threads if placement is not None and driver else 1
    for name in STAGED:
        built[name] = StagedTable(spark, f"{scratch}/{name}", built[name], name, driver=driver, threads=threads)
    return with_blocked(built, decoded.offsets)  # who is blocked (txnlog.pipeline.blocked)


def verify_live(
    tables: dict[str, Any],
    config: Config,
    *,
    progress: Progress = stderr_progress,
) -> dict[str, Any]:
    """``tables`` plus :func:`txnlog.live.verify.live_rows` for the offline findings' partitions and
    ``config.topics`` (rows with source = live). Live state is the present, so live ages use the wall clock."""

    found = tables["findings"]
    rows = found.select(["topic", "partition"]).to_pylist()
    partitions = sorted({(r["topic"], int(r["partition"])) for r in rows if r["topic"] is not None})
    progress(
        f"verify-live: asking {config.bootstrap_servers} about {count(len(partitions), 'finding partition')}"
        + (f" and topics {', '.join(config.topics)}" if config.topics else "")
    )
    live = live_rows(config, partitions, as_of_ms=int(time.time() * 1000), cluster=config.cluster, progress=progress)
    out = dict(tables)
    for name, table in live.items():
        if table.num_rows:
            mine = out[name]
            out[name] = pa.concat_tables([mine, table.select(mine.column_names).cast(mine.schema)])
    return out
