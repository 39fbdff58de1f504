"""Live verification rows for the output tables: ``source = "live"``.

For a handful of partitions of interest (the offline findings' partitions, or ``topics``) this
asks the live cluster, through :mod:`txnlog.live.admin`:

* ListOffsets read_committed / read_uncommitted → ``partition_health`` rows (LSO, high
  watermark as ``log_end_offset``, ``lso_lag``), with DescribeProducers for
  ``open_transactions`` / ``has_late_transaction`` when the broker answers it;
* DescribeProducers → ListTransactions → DescribeTransactions, i.e. ``find-hanging``
  (:func:`txnlog.live.hanging.findings_from_producers`) → ``findings`` rows, and for each HANGING one an
  ``abort_recommendations`` row with both command forms (:func:`txnlog.live.hanging.abort_recommendations`);
* ListTransactions + DescribeTransactions of the transactional.ids in flight (Ongoing /
  Prepare*) that list one of those partitions, or own a live finding's producer id →
  ``coordinator_state`` rows.

Every table is shaped exactly as :mod:`txnlog.model.contract` says; ``cluster``/``as_of`` are filled
with the given values and replaced by :func:`txnlog.output.delta.write_tables` anyway. Small data
only, no Spark import. Live state is the present: ``as_of_ms`` is "now" for the live ages
(idle_ms), normally the wall clock.

A cluster that cannot be reached (or refuses the client settings) is a one-line
:class:`~txnlog.model.errors.UsageError` naming the bootstrap servers and the fix; every call has a
bounded timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from txnlog.broker import classify
from txnlog.kafka.wire import transaction_state_partition_for
from txnlog.live import admin as live
from txnlog.live import hanging as live_hanging
from txnlog.model import contract
from txnlog.model.errors import UsageError
from txnlog.model.words import count

__all__ = ["LIVE_TABLES", "TIMEOUT_S", "live_rows"]

#: Tables :func:`live_rows` returns (always all four, possibly empty).
LIVE_TABLES = ("findings", "abort_recommendations", "partition_health", "coordinator_state")
#: Seconds for each metadata / ListOffsets call (the default of ``timeout_s``).
TIMEOUT_S = 15.0


def live_rows(
    config: Any,
    partitions: Iterable[tuple[str, int]],
    *,
    as_of_ms: int,
    cluster: str | None = None,
    progress: Any = None,
    timeout_s: float = TIMEOUT_S,
) -> dict[str, pa.Table]:
    """Live ``findings``, ``abort_recommendations``, ``partition_health`` and ``coordinator_state``
    rows (``source="live"`` where the table has the column) for ``partitions`` plus every
    partition of ``config.topics``.

    ``config`` needs ``bootstrap_servers``, ``kafka``, ``topics``, ``max_transaction_timeout_ms``,
    ``transaction_state_partitions`` and ``cluster``. Partitions the cluster does not have (an
    offline finding of a topic since deleted) are left out, and said so through ``progress``.
    """
    bootstrap = config.bootstrap_servers
    if not bootstrap:
        raise UsageError(
            "verify_live: needs bootstrap_servers (--bootstrap-servers host:9092); give it or drop --verify-live"
        )
    kafka_conf = {"log_level": 0, **dict(config.kafka or {})}  # errors come back as one UsageError, not log lines
    say = progress or (lambda _msg: None)
    wanted = {(str(t), int(p)) for t, p in partitions}
    as_of_ms = int(as_of_ms)

    with _translated_errors(bootstrap):
        existing = set(live.topic_partitions(bootstrap, kafka_conf, None, timeout_s=timeout_s))
        topics = list(config.topics or ())
        missing_topics = sorted(set(topics) - {t for t, _ in existing})
        if missing_topics:
            raise UsageError(
                f"--topic {', '.join(missing_topics)}: no such topic on {bootstrap}; "
                "check the name or drop it from topics"
            )
        wanted |= {tp for tp in existing if tp[0] in topics}
        gone = sorted(wanted - existing)
        if gone:
            say(
                f"verify-live: {count(len(gone), 'partition')} not on {bootstrap}, not checked: "
                + ", ".join(f"{t}-{p}" for t, p in gone[:5])
                + (" ..." if len(gone) > 5 else "")
            )
        tps = sorted(wanted & existing)
        if not tps:
            return {name: _table(name, [], config, cluster, as_of_ms) for name in LIVE_TABLES}

        offsets = live.partition_offsets(bootstrap, kafka_conf, tps, timeout_s=timeout_s)
        admin = live.admin_client(bootstrap, kafka_conf)
        try:
            producers = _describe_producers(admin, tps)
            findings = live_hanging.findings_from_producers(
                admin,
                [r for rows in (producers or {}).values() for r in rows],
                bootstrap=bootstrap,
                kafka_conf=kafka_conf,
                max_transaction_timeout_ms=config.max_transaction_timeout_ms,
                now_ms=as_of_ms,
            )
            coordinator = _coordinator_rows(
                admin, tps, {f["producer_id"] for f in findings}, config.transaction_state_partitions
            )
        finally:
            admin.close()

    health = _health_rows(offsets, producers, as_of_ms, config.max_transaction_timeout_ms)
    say(
        f"verify-live: {count(len(tps), 'partition')} on {bootstrap}: {count(len(findings), 'live finding')}, "
        f"{sum(1 for h in health if (h['lso_lag'] or 0) > 0)} with the LSO behind the high watermark, "
        f"{count(len(coordinator), 'transactional.id')} in flight"
    )
    return {
        "findings": _table("findings", findings, config, cluster, as_of_ms),
        "abort_recommendations": _table(
            "abort_recommendations", live_hanging.abort_recommendations(findings), config, cluster, as_of_ms
        ),
        "partition_health": _table("partition_health", health, config, cluster, as_of_ms),
        "coordinator_state": _table("coordinator_state", coordinator, config, cluster, as_of_ms),
    }


# --- rows ----------------------------------------------------------------------------------------


def _describe_producers(
    admin: Any, tps: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], list[dict[str, Any]]] | None:
    """DescribeProducers rows by partition; None when the brokers do not support it."""
    # Lazy in this module: the Kafka clients load only when a live cluster is asked.
    from kafka.errors import UnsupportedVersionError

    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    out: dict[tuple[str, int], list[dict[str, Any]]] = {tp: [] for tp in tps}
    try:
        for t, ps in sorted(by_topic.items()):
            for r in live.describe_producers(admin, t, ps):
                out.setdefault((r["topic"], r["partition"]), []).append(r)
    except UnsupportedVersionError:
        return None
    return out


def _health_rows(
    offsets: Sequence[Mapping[str, Any]],
    producers: Mapping[tuple[str, int], list[dict[str, Any]]] | None,
    now_ms: int,
    max_timeout_ms: int,
) -> list[dict[str, Any]]:
    """partition_health rows: offsets from ListOffsets; open transactions from DescribeProducers.

    ``open_transactions`` / ``has_late_transaction`` are left null when they cannot be known:
    DescribeProducers unsupported, or it lists no open transaction while the LSO is behind the
    high watermark (the two answers contradict each other, as some Kafka-protocol servers give them). With
    the LSO at the high watermark nothing is open: 0 / false. ``max_open_ms`` and ``stuck_since`` need the
    transaction's first timestamp, which these APIs do not give: null.
    """
    rows: list[dict[str, Any]] = []
    idle: dict[int, int] = {}  # row -> its oldest open transaction's idle ms, where lateness is to be decided
    for o in offsets:
        tp = (o["topic"], o["partition"])
        open_rows = [r for r in (producers or {}).get(tp, []) if r["current_transaction_start_offset"] is not None]
        lag = o["lso_lag"]
        if lag == 0:
            n_open: int | None = len(open_rows)
            late: bool | None = False
        elif producers is None or not open_rows:
            n_open, late = None, None
        else:
            n_open, late = len(open_rows), None
            oldest = min(open_rows, key=lambda r: r["current_transaction_start_offset"])
            idle[len(rows)] = now_ms - oldest["last_timestamp"]
        rows.append(
            {
                "topic": o["topic"],
                "partition": o["partition"],
                "log_start_offset": o["log_start_offset"],
                "log_end_offset": o["high_watermark"],
                "high_watermark": o["high_watermark"],
                "last_stable_offset": o["last_stable_offset"],
                "lso_lag": lag,
                "open_transactions": n_open,
                "max_open_ms": None,
                "has_late_transaction": late,
                "stuck_since": None,
                "replicas": None,
                "batch_count": None,
                "max_timestamp": None,
                "source": contract.InputSource.LIVE,
            }
        )
    flags = classify.has_late_transaction(pa.array(list(idle.values()), pa.int64()), max_timeout_ms).to_pylist()
    for i, flag in zip(idle, flags, strict=True):
        rows[i]["has_late_transaction"] = flag
    return rows


def _coordinator_rows(
    admin: Any, tps: Sequence[tuple[str, int]], finding_pids: set[int], txn_state_partitions: int
) -> list[dict[str, Any]]:
    """coordinator_state rows for the ids in flight on ``tps`` or owning a live finding's producer id."""

    listed = live.list_transactions(admin)
    ids = {
        v["transactional_id"]
        for pid, v in listed.items()
        if v["state"] in classify.IN_FLIGHT_STATES or pid in finding_pids
    }
    names = {f"{t}-{p}" for t, p in tps}
    rows = []
    for tid, d in sorted(live.describe_transactions(admin, ids).items()):
        if d is None or not (names & set(d["partitions"]) or d["producer_id"] in finding_pids):
            continue
        start = d["txn_start_timestamp"]
        rows.append(
            {
                "transactional_id": tid,
                "producer_id": d["producer_id"],
                "producer_epoch": d["producer_epoch"],
                "state": d["state"],
                "timeout_ms": d["timeout_ms"],
                "partitions": d["partitions"],
                "txn_start_timestamp": live.datetime_of_ms(start),
                "last_update_timestamp": None,
                "coordinator_partition": transaction_state_partition_for(tid, txn_state_partitions),
                "coordinator_epoch": None,
                "previous_producer_id": None,
                "next_producer_id": None,
                "client_transaction_version": None,
                "is_tombstoned": False,
                "next_producer_epoch": None,
                "record_offset": None,
                "transitions": None,
                "source": contract.InputSource.LIVE,
            }
        )
    return rows


# --- helpers -------------------------------------------------------------------------------------


def _table(name: str, rows: Sequence[Mapping[str, Any]], config: Any, cluster: str | None, as_of_ms: int) -> pa.Table:
    """``rows`` as exactly the contract schema of ``name`` (extra keys dropped, missing ones null)."""
    schema = contract.TABLES[name]
    keys = {"cluster": cluster or config.cluster, "as_of": live.datetime_of_ms(as_of_ms)}
    return pa.Table.from_pylist([{**{f.name: r.get(f.name) for f in schema}, **keys} for r in rows], schema=schema)


class _translated_errors:
    """Turn client failures (unreachable, timed out, refused) into one UsageError naming ``bootstrap``."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None or isinstance(exc, UsageError) or not isinstance(exc, Exception):
            return False
        if not _is_client_error(exc):
            return False
        what = str(exc).strip() or type(exc).__name__
        raise UsageError(
            f"--bootstrap-servers {self.bootstrap}: cannot verify live ({type(exc).__name__}: {what}); check that the "
            "brokers are reachable from here and the 'kafka' client settings in the config, or drop --verify-live"
        ) from exc


def _is_client_error(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, ConnectionError, OSError)):
        return True
    mod = type(exc).__module__ or ""
    return mod.startswith(("kafka", "cimpl", "confluent_kafka"))
