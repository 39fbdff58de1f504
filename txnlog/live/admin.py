"""Live cluster checks: KIP-664's admin APIs, offsets, ``find-hanging`` and a guarded ``abort``.

No Spark here. Two clients, each for what it does well:

* kafka-python's :class:`~kafka.admin.KafkaAdminClient` (3.0.12) for DescribeProducers,
  ListTransactions, DescribeTransactions and WriteTxnMarkers (``abort_transaction``);
* confluent-kafka's AdminClient for ListOffsets with an isolation level: the
  ``read_committed`` end offset is the last stable offset (LSO), the
  ``read_uncommitted`` one the high watermark.

Client settings come from the config's ``kafka`` mapping, written in librdkafka's names
(security.protocol, sasl.*, ssl.*); :func:`kafka_python_settings` translates them for
kafka-python and refuses a key it cannot translate (rather than silently dropping, say,
a CA file).

:func:`find_hanging_live` is ``kafka-transactions.sh find-hanging`` (``TransactionsCommand``, docs/formats.md §11) with
txnlog's verdicts (:func:`txnlog.broker.classify.verdicts`). :func:`validate_abort` is the
re-validation an abort must pass; nothing here aborts unless :func:`send_abort` is called.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from txnlog.broker import classify
from txnlog.broker.classify import Owner, Verdict
from txnlog.kafka.wire import DEFAULT_MAX_TRANSACTION_TIMEOUT_MS, TRANSACTION_STATE_TOPIC, TransactionState
from txnlog.model.contract import InputSource
from txnlog.model.errors import UsageError
from txnlog.model.times import duration_text, utc_text
from txnlog.rules.remedy import remedy_of

# librdkafka name -> kafka-python KafkaAdminClient keyword.
_KAFKA_PYTHON_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.principal": "sasl_kerberos_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
}
# librdkafka-only settings that do not change what kafka-python connects to.
_LIBRDKAFKA_ONLY = (
    "log_level",
    "debug",
    "socket.",
    "reconnect.",
    "statistics.interval.ms",
    "api.version.",
    "broker.version.fallback",
    "metadata.",
    "topic.metadata.",
    "enable.ssl.certificate.verification",
)


def kafka_python_settings(kafka_conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """KafkaAdminClient keywords for the config's ``kafka`` mapping (librdkafka names)."""
    out: dict[str, Any] = {}
    for key, value in (kafka_conf or {}).items():
        if key == "bootstrap.servers":
            continue
        if key in _KAFKA_PYTHON_KEYS:
            out[_KAFKA_PYTHON_KEYS[key]] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = str(value).lower() != "none"
        elif key == "sasl.mechanisms" or any(key.startswith(p) for p in _LIBRDKAFKA_ONLY):
            continue
        else:
            raise UsageError(
                f"kafka.{key}: not supported for the admin client (kafka-python); "
                f"supported: {', '.join(sorted(_KAFKA_PYTHON_KEYS))}, ssl.endpoint.identification.algorithm"
            )
    if str(out.get("security_protocol", "")).upper() in ("SSL", "SASL_SSL") and "ssl_check_hostname" not in out:
        out["ssl_check_hostname"] = True
    return out


def admin_client(bootstrap: str, kafka_conf: Mapping[str, Any] | None = None) -> Any:
    """A kafka-python KafkaAdminClient for ``bootstrap`` with the config's security settings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # Lazy in this module: the Kafka clients load only when a live cluster is asked.
        from kafka.admin import KafkaAdminClient

        kw = {"client_id": "txnlog", **kafka_python_settings(kafka_conf)}
        return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), **kw)


def _confluent_conf(bootstrap: str, kafka_conf: Mapping[str, Any] | None) -> dict[str, Any]:
    conf = {"log_level": 3, **dict(kafka_conf or {})}
    conf["bootstrap.servers"] = bootstrap
    return conf


def datetime_of_ms(ms: int | None) -> datetime | None:
    """The instant of a Kafka timestamp in ms (UTC); None for none or a negative one (Kafka's -1: unknown)."""
    return None if ms is None or ms < 0 else datetime.fromtimestamp(ms / 1000, tz=UTC)


# --------------------------------------------------------------------------------------------
# The admin APIs, as plain rows
# --------------------------------------------------------------------------------------------


def describe_producers(admin: Any, topic: str, partitions: Iterable[int]) -> list[dict[str, Any]]:
    """DescribeProducers (``Admin.describeProducers``): one row per active producer of each partition.

    ``current_transaction_start_offset`` is None when the producer has no open transaction
    (the wire's -1); ``coordinator_epoch`` -1 means unknown.
    """
    from kafka import TopicPartition

    tps = [TopicPartition(topic, int(p)) for p in partitions]
    rows = []
    for tp, state in sorted(admin.describe_producers(tps).items()):
        for p in state.active_producers:
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "producer_id": p.producer_id,
                    "producer_epoch": p.producer_epoch,
                    "last_sequence": p.last_sequence,
                    "last_timestamp": p.last_timestamp,
                    "coordinator_epoch": p.coordinator_epoch,
                    "current_transaction_start_offset": (
                        p.current_transaction_start_offset if p.current_transaction_start_offset >= 0 else None
                    ),
                }
            )
    return rows


def list_transactions(admin: Any, producer_ids: Iterable[int] | None = None) -> dict[int, dict[str, Any]]:
    """ListTransactions on every broker: producer id → {transactional_id, producer_id, state}.

    With ``producer_ids`` only those (the broker matches each id's *current* producer id and
    skips Dead ones, as find-hanging does: docs/formats.md §11); an empty list asks nothing and returns {}.
    """
    if producer_ids is not None:
        producer_ids = sorted({int(p) for p in producer_ids})
        if not producer_ids:
            return {}
    listings = admin.list_transactions(producer_id_filters=producer_ids)
    out: dict[int, dict[str, Any]] = {}
    for broker in sorted(listings):
        for t in listings[broker]:
            out[t.producer_id] = {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": getattr(t.state, "value", str(t.state)),
                "coordinator_id": broker,
            }
    return out


def _description_row(tid: str, d: Any) -> dict[str, Any]:
    return {
        "transactional_id": tid,
        "coordinator_id": d.coordinator_id,
        "state": getattr(d.state, "value", str(d.state)),
        "producer_id": d.producer_id,
        "producer_epoch": d.producer_epoch,
        "timeout_ms": d.transaction_timeout_ms,
        "txn_start_timestamp": d.transaction_start_time_ms,
        "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions),
    }


def describe_transactions(admin: Any, ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """DescribeTransactions: transactional.id → description, or None when the coordinator says
    TRANSACTIONAL_ID_NOT_FOUND (unknown or Dead, docs/formats.md §11)."""
    from kafka.errors import TransactionalIdNotFoundError

    ids = sorted(set(ids))
    if not ids:
        return {}
    try:
        found = admin.describe_transactions(ids)
        return {tid: (_description_row(tid, found[tid]) if tid in found else None) for tid in ids}
    except TransactionalIdNotFoundError:
        pass  # kafka-python raises for the whole request: ask one id at a time
    out: dict[str, dict[str, Any] | None] = {}
    for tid in ids:
        try:
            out[tid] = _description_row(tid, admin.describe_transactions([tid])[tid])
        except TransactionalIdNotFoundError:
            out[tid] = None
    return out


def check_cluster(bootstrap: str, kafka_conf: Mapping[str, Any] | None = None, timeout_s: float = 30.0) -> int:
    """How many ``__transaction_state`` partitions the cluster has (0: no such topic), or a :class:`UsageError`
    saying in one line what to fix.

    A cluster no transactional producer has used a coordinator of has no ``__transaction_state``: the broker
    creates it on the first FindCoordinator for a transactional.id (``AutoTopicCreationManager``), so a run then
    goes on without coordinator state, as an offline run of a log dir without it does. Asking does not create
    it (the Metadata request goes with ``allow.auto.create.topics`` off). Live mode calls this before Spark
    starts, so an unreachable cluster fails in seconds with the address in the message rather than in a Spark
    task's traceback.
    """
    from confluent_kafka import KafkaError

    # asked by name: a topic the client may not Describe is TOPIC_AUTHORIZATION_FAILED then, not left out
    conf = {"log_level": 0, **dict(kafka_conf or {}), "allow.auto.create.topics": False}
    try:
        md = cluster_metadata(bootstrap, conf, timeout_s, topic=TRANSACTION_STATE_TOPIC)
    except Exception as e:  # noqa: BLE001 - the client's own errors: unreachable, refused, timed out
        raise UsageError(
            f"--bootstrap-servers {bootstrap}: cannot reach the cluster "
            f"({type(e).__name__}: {e}); check the address and the 'kafka' client settings in the config"
        ) from e
    t = md.topics.get(TRANSACTION_STATE_TOPIC)
    if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return 0
    if t.error is not None:
        raise UsageError(
            f"--bootstrap-servers {bootstrap}: cannot read {TRANSACTION_STATE_TOPIC} ({t.error.str()}); "
            "the job needs Describe and Read on that topic"
        )
    return len(t.partitions)


#: how long every bootstrap broker may stay unreachable (refused, unresolved) before the metadata request gives
#: up, well before its timeout: a broker restarting comes back within it, a wrong address never does
ALL_DOWN_GRACE_S = 3.0


def cluster_metadata(
    bootstrap: str, kafka_conf: Mapping[str, Any] | None, timeout_s: float, topic: str | None = None
) -> Any:
    """The cluster's metadata (``AdminClient.list_topics``; of ``topic`` alone when given), asked again each second
    for up to ``timeout_s``; once librdkafka has said for :data:`ALL_DOWN_GRACE_S` that every broker is down
    (``_ALL_BROKERS_DOWN``: connections refused, names that do not resolve), the last error is raised at once
    instead of waiting out the timeout."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    conf = _confluent_conf(bootstrap, kafka_conf)
    given = conf.get("error_cb")

    def on_error(e: Any) -> None:
        errors.append(e)
        if given is not None:
            given(e)

    conf["error_cb"] = on_error
    admin = AdminClient(conf)
    deadline, down_since = time.monotonic() + timeout_s, None
    while True:
        try:
            return admin.list_topics(topic, timeout=max(min(1.0, deadline - time.monotonic()), 0.1))
        except KafkaException:
            admin.poll(0)  # serves the error callbacks
            now = time.monotonic()
            if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
                down_since = down_since if down_since is not None else now
            if now >= deadline or (down_since is not None and now - down_since >= ALL_DOWN_GRACE_S):
                raise
            errors.clear()


def topic_partitions(
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None = None,
    topics: Sequence[str] | None = None,
    timeout_s: float = 30.0,
) -> list[tuple[str, int]]:
    """(topic, partition) of the given topics, or of every topic including internal ones."""
    md = cluster_metadata(bootstrap, kafka_conf, timeout_s)
    out: list[tuple[str, int]] = []
    for name, t in md.topics.items():
        if topics is not None and name not in topics:
            continue
        if t.error is not None:
            raise UsageError(f"--topic {name}: {t.error.str()}")
        out.extend((name, p) for p in t.partitions)
    missing = set(topics or ()) - {t for t, _ in out}
    if missing:
        raise UsageError(f"--topic {', '.join(sorted(missing))}: no such topic on the cluster")
    return sorted(out)


def partition_offsets(
    bootstrap: str, kafka_conf: Mapping[str, Any] | None, tps: Iterable[tuple[str, int]], timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """ListOffsets for each (topic, partition): log start, LSO (read_committed end offset),
    high watermark (read_uncommitted end offset) and ``lso_lag`` = high watermark − LSO."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    tps = sorted({(str(t), int(p)) for t, p in tps})
    if not tps:
        return []
    admin = AdminClient(_confluent_conf(bootstrap, kafka_conf))

    def ask(spec: Any, level: Any) -> dict[tuple[str, int], int]:
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in tps}, isolation_level=level, request_timeout=timeout_s
        )
        return {(tp.topic, tp.partition): int(f.result(timeout_s).offset) for tp, f in futures.items()}

    start = ask(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    stable = ask(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = ask(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return [
        {
            "topic": t,
            "partition": p,
            "log_start_offset": start[(t, p)],
            "last_stable_offset": stable[(t, p)],
            "high_watermark": high[(t, p)],
            "lso_lag": high[(t, p)] - stable[(t, p)],
        }
        for t, p in tps
    ]


# --------------------------------------------------------------------------------------------
# Verdicts on live state
# --------------------------------------------------------------------------------------------


def _owner_columns(
    row: Mapping[str, Any], listing: Mapping[str, Any] | None, description: Mapping[str, Any] | None
) -> dict[str, Any]:
    """classify's owner_* columns for one open transaction, from ListTransactions/DescribeTransactions."""
    if listing is None:
        match = Owner.NONE  # find-hanging's first case (TransactionsCommand): no transactional.id has it
    elif description is None:
        match = Owner.EXPIRED  # (b): described as not found (Dead or gone)
    else:
        match = Owner.CURRENT
    d = description or {}
    dead = TransactionState.DEAD.kafka_name  # listed, but not found when described
    return {
        "topic": row["topic"],
        "partition": row["partition"],
        "owner_match": match,
        "owner_state": d.get("state") if description is not None else (dead if listing is not None else None),
        "owner_partitions": d.get("partitions"),
        "owner_timeout_ms": d.get("timeout_ms"),
        "owner_txn_start_ms": (d.get("txn_start_timestamp") if (d.get("txn_start_timestamp") or -1) >= 0 else None),
    }


def live_verdicts(
    rows: Sequence[Mapping[str, Any]],
    listings: Mapping[int, Mapping[str, Any]],
    descriptions: Mapping[str, Mapping[str, Any] | None],
    thresholds: classify.Thresholds,
) -> list[tuple[str, str, str]]:
    """(verdict, reason, safety) per DescribeProducers row with an open transaction ('' = no finding)."""
    if not rows:
        return []
    cols = []
    for r in rows:
        listing = listings.get(r["producer_id"])
        desc = descriptions.get(listing["transactional_id"]) if listing else None
        cols.append(_owner_columns(r, listing, desc))
    table = pa.table(
        {
            "topic": pa.array([c["topic"] for c in cols], pa.string()),
            "partition": pa.array([c["partition"] for c in cols], pa.int32()),
            "owner_match": pa.array([c["owner_match"] for c in cols], pa.string()),
            "owner_state": pa.array([c["owner_state"] for c in cols], pa.string()),
            "owner_partitions": pa.array([c["owner_partitions"] for c in cols], pa.list_(pa.string())),
            "owner_timeout_ms": pa.array([c["owner_timeout_ms"] for c in cols], pa.int64()),
            "owner_txn_start_ms": pa.array([c["owner_txn_start_ms"] for c in cols], pa.int64()),
        }
    )
    verdict, reason, safety = classify.verdicts(table, thresholds)
    return list(zip(verdict.tolist(), reason.tolist(), safety.tolist(), strict=True))


def _evidence(
    row: Mapping[str, Any],
    listing: Mapping[str, Any] | None,
    desc: Mapping[str, Any] | None,
    idle_ms: int,
    lso_lag: int | None,
) -> str:
    tp = f"{row['topic']}-{row['partition']}"
    what = (
        f"DescribeProducers on {tp}: producer {row['producer_id']} epoch {row['producer_epoch']} has a "
        f"transaction open since offset {row['current_transaction_start_offset']}, last written "
        f"{utc_text(row['last_timestamp'])} (idle {duration_text(idle_ms)})"
    )
    if lso_lag is not None:
        what += f", holding the LSO {lso_lag} offsets behind the high watermark"
    if listing is None:
        coord = f"ListTransactions shows no transactional.id with producer id {row['producer_id']}"
    elif desc is None:
        coord = f"DescribeTransactions says {listing['transactional_id']} is not found (expired or Dead)"
    else:
        parts = ", ".join(desc["partitions"]) or "no partitions"
        coord = f"DescribeTransactions shows {desc['transactional_id']} {desc['state']} listing {parts}"
    return f"{what}; {coord}."


def find_hanging_live(
    admin: Any,
    tps: Iterable[tuple[str, int]],
    *,
    bootstrap: str | None = None,
    kafka_conf: Mapping[str, Any] | None = None,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """``find-hanging`` against live brokers (``TransactionsCommand``, docs/formats.md §11) with txnlog's verdicts.

    DescribeProducers of ``tps``, then :func:`findings_from_producers`. Rows are shaped like
    the ``findings`` table (plus safety/command/legacy_command) with ``source="live"``.
    ``now_ms`` defaults to the wall clock: this is a live check of the present, unlike the
    offline job.
    """
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(int(p))
    producers = [r for t, ps in sorted(by_topic.items()) for r in describe_producers(admin, t, ps)]
    return findings_from_producers(
        admin,
        producers,
        bootstrap=bootstrap,
        kafka_conf=kafka_conf,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        now_ms=now_ms,
    )


def findings_from_producers(
    admin: Any,
    producers: Sequence[Mapping[str, Any]],
    *,
    bootstrap: str | None = None,
    kafka_conf: Mapping[str, Any] | None = None,
    max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """find-hanging's steps after DescribeProducers (docs/formats.md §11), on :func:`describe_producers` rows.

    Candidates: rows with an open transaction idle longer than ``max_transaction_timeout_ms``
    (no 5-minute padding, as the tool). Their producer ids go to ListTransactions, the ids
    found to DescribeTransactions, and :func:`txnlog.broker.classify.verdicts` decides HANGING / LATE;
    ``lso_lag`` comes from ListOffsets when ``bootstrap`` is given. A HANGING row carries
    ``safety``, ``command`` and ``legacy_command`` (:func:`abort_recommendations`).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    candidates = [
        r
        for r in producers
        if r["current_transaction_start_offset"] is not None
        and now_ms - r["last_timestamp"] > max_transaction_timeout_ms
    ]
    if not candidates:
        return []
    listings = list_transactions(admin, {r["producer_id"] for r in candidates})
    descriptions = describe_transactions(admin, {x["transactional_id"] for x in listings.values()})
    thresholds = classify.Thresholds(
        as_of_ms=now_ms,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        all_txn_state_partitions_read=True,
        bootstrap_servers=bootstrap,
    )
    lags = _lso_lags(bootstrap, kafka_conf, candidates)
    out = []
    for r, (verdict, reason, safety) in zip(
        candidates, live_verdicts(candidates, listings, descriptions, thresholds), strict=True
    ):
        if verdict:
            listing = listings.get(r["producer_id"])
            desc = descriptions.get(listing["transactional_id"]) if listing else None
            lag = lags.get((r["topic"], r["partition"]))
            out.append(_live_finding(r, (verdict, reason, safety), listing, desc, lag, thresholds, bootstrap))
    return out


def _lso_lags(
    bootstrap: str | None, kafka_conf: Mapping[str, Any] | None, candidates: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, int], int]:
    """Each candidate partition's ``lso_lag`` from ListOffsets (none without ``bootstrap``)."""
    if not bootstrap:
        return {}
    partitions = {(r["topic"], r["partition"]) for r in candidates}
    return {(o["topic"], o["partition"]): o["lso_lag"] for o in partition_offsets(bootstrap, kafka_conf, partitions)}


def _live_finding(
    r: Mapping[str, Any],
    decided: tuple[Any, Any, Any],
    listing: Mapping[str, Any] | None,
    desc: Mapping[str, Any] | None,
    lag: int | None,
    thresholds: classify.Thresholds,
    bootstrap: str | None,
) -> dict[str, Any]:
    """One findings row for a candidate ``r`` (a DescribeProducers row) with its verdict, reason and safety."""
    verdict, reason, safety = decided
    idle = thresholds.as_of_ms - r["last_timestamp"]
    advice_row = {
        **r,
        "start_offset": r["current_transaction_start_offset"],
        "transactional_id": listing["transactional_id"] if listing else None,
        "owner_state": desc["state"] if desc else None,
        "owner_partitions": desc["partitions"] if desc else None,
        "owner_timeout_ms": desc["timeout_ms"] if desc else None,
    }
    advice = remedy_of({**advice_row, "reason": str(reason)}, thresholds.bootstrap_servers).advice
    remedy = remedy_of({**advice_row, "reason": reason, "safety": safety or None}, bootstrap)
    ce = r["coordinator_epoch"]
    hanging = verdict == Verdict.HANGING
    return {
        "topic": r["topic"],
        "partition": r["partition"],
        "producer_id": r["producer_id"],
        "producer_epoch": r["producer_epoch"],
        "start_offset": r["current_transaction_start_offset"],
        "first_timestamp": None,
        "last_timestamp": datetime_of_ms(r["last_timestamp"]),
        "open_ms": None,
        "idle_ms": idle,
        "lso_lag": lag,
        "verdict": verdict,
        "reason": reason,
        "transactional_id": listing["transactional_id"] if listing else None,
        "coordinator_state": desc["state"] if desc else None,
        "coordinator_partition": None,
        "coordinator_epoch": ce,
        "evidence": _evidence(r, listing, desc, idle, lag),
        "advice": advice,
        **remedy.columns(),
        "source": InputSource.LIVE,
        "safety": (safety or None) if hanging else None,
        "command": classify.abort_command(bootstrap, r["topic"], r["partition"], r["current_transaction_start_offset"])
        if hanging
        else None,
        "legacy_command": classify.legacy_abort_command(
            bootstrap, r["topic"], r["partition"], r["producer_id"], r["producer_epoch"], ce
        )
        if hanging
        else None,
    }


def abort_recommendations(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``abort_recommendations`` rows (both command forms) for the HANGING rows of
    :func:`findings_from_producers`, as the offline job writes them: the coordinator epoch
    is DescribeProducers' (−1, unknown, becomes 0 as ``kafka-transactions.sh`` sends it)."""
    return [
        {
            "topic": f["topic"],
            "partition": f["partition"],
            "start_offset": f["start_offset"],
            "producer_id": f["producer_id"],
            "producer_epoch": f["producer_epoch"],
            "coordinator_epoch": max(int(f["coordinator_epoch"] if f["coordinator_epoch"] is not None else -1), 0),
            "transactional_id": f["transactional_id"],
            "reason": f["reason"],
            "safety": f["safety"],
            "command": f["command"],
            "legacy_command": f["legacy_command"],
            "source": InputSource.LIVE,
        }
        for f in findings
        if f["verdict"] == Verdict.HANGING
    ]


# --------------------------------------------------------------------------------------------
# abort: re-validate, then (only on request) WriteTxnMarkers
# --------------------------------------------------------------------------------------------


class AbortRefused(Exception):
    """The transaction failed re-validation against live state; the message says why (one line)."""


@dataclass(frozen=True)
class AbortRequest:
    topic: str
    partition: int
    start_offset: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    coordinator_epoch: int | None = None

    def describe(self) -> str:
        if self.start_offset is not None:
            return f"the open transaction starting at offset {self.start_offset} on {self.topic}-{self.partition}"
        return (
            f"the open transaction of producer {self.producer_id} epoch {self.producer_epoch} "
            f"on {self.topic}-{self.partition}"
        )


@dataclass(frozen=True)
class AbortPlan:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # as sent: a negative one becomes 0, as kafka-transactions.sh does
    start_offset: int
    verdict: str
    reason: str
    transactional_id: str | None
    evidence: str


def validate_abort(
    request: AbortRequest,
    producers: Sequence[Mapping[str, Any]],
    listings: Mapping[int, Mapping[str, Any]],
    descriptions: Mapping[str, Mapping[str, Any] | None],
    thresholds: classify.Thresholds,
) -> AbortPlan:
    """Check live state (DescribeProducers of the partition, ListTransactions/DescribeTransactions
    of the producer id) still shows a HANGING transaction; raise :class:`AbortRefused` if not."""
    tp = f"{request.topic}-{request.partition}"
    mine = [p for p in producers if p["topic"] == request.topic and p["partition"] == request.partition]
    open_at = sorted(
        p["current_transaction_start_offset"] for p in mine if p["current_transaction_start_offset"] is not None
    )
    seen = f"DescribeProducers lists {len(mine)} active producer{'s' if len(mine) != 1 else ''}" + (
        f", open transactions at offsets {', '.join(map(str, open_at))}" if open_at else ", none in a transaction"
    )
    if request.start_offset is not None:
        match = [p for p in mine if p["current_transaction_start_offset"] == request.start_offset]
        if not match:
            raise AbortRefused(
                f"Could not find any open transactions starting at offset {request.start_offset} "
                f"on partition {tp} ({seen}); nothing to abort"
            )
        row = match[0]
    else:
        match = [p for p in mine if p["producer_id"] == request.producer_id]
        if not match:
            raise AbortRefused(f"producer {request.producer_id} has no state on {tp} ({seen}); nothing to abort")
        row = match[0]
        if row["current_transaction_start_offset"] is None:
            raise AbortRefused(
                f"producer {request.producer_id} has no open transaction on {tp} ({seen}); nothing to abort"
            )
        if row["producer_epoch"] != request.producer_epoch:
            raise AbortRefused(
                f"producer {request.producer_id} is at epoch {row['producer_epoch']} on {tp}, "
                f"not {request.producer_epoch}: the transaction changed; look again"
            )
    idle = thresholds.as_of_ms - row["last_timestamp"]
    if idle <= thresholds.max_transaction_timeout_ms:
        raise AbortRefused(
            f"producer {row['producer_id']}'s transaction on {tp} was last written {idle} ms ago, not more than "
            f"transaction.max.timeout.ms={thresholds.max_transaction_timeout_ms}: not a hanging candidate"
        )
    ((verdict, reason, _),) = live_verdicts([row], listings, descriptions, thresholds)
    listing = listings.get(row["producer_id"])
    desc = descriptions.get(listing["transactional_id"]) if listing else None
    evidence = _evidence(row, listing, desc, idle, None)
    if verdict != Verdict.HANGING:
        why = f"{verdict} ({reason})" if verdict else "not hanging (the coordinator still owns this transaction)"
        raise AbortRefused(f"{tp} @ {row['current_transaction_start_offset']}: verdict is {why}: {evidence}")
    ce = request.coordinator_epoch if request.coordinator_epoch is not None else row["coordinator_epoch"]
    return AbortPlan(
        topic=request.topic,
        partition=request.partition,
        producer_id=row["producer_id"],
        producer_epoch=row["producer_epoch"],
        coordinator_epoch=max(int(ce), 0),
        start_offset=row["current_transaction_start_offset"],
        verdict=verdict,
        reason=reason,
        transactional_id=listing["transactional_id"] if listing else None,
        evidence=evidence,
    )


def revalidate_abort(admin: Any, request: AbortRequest, thresholds: classify.Thresholds) -> AbortPlan:
    """:func:`validate_abort` over state asked from the cluster now."""
    producers = describe_producers(admin, request.topic, [request.partition])
    pids = {p["producer_id"] for p in producers}
    listings = list_transactions(admin, pids)
    descriptions = describe_transactions(admin, {x["transactional_id"] for x in listings.values()})
    return validate_abort(request, producers, listings, descriptions, thresholds)


class AbortUnsupported(Exception):
    """The cluster cannot abort (no WriteTxnMarkers); the message says so."""


def send_abort(admin: Any, plan: AbortPlan) -> None:
    """WriteTxnMarkers ABORT for ``plan`` to the partition leader (kafka-python ``abort_transaction``)."""
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec
    from kafka.errors import IncompatibleBrokerVersion

    spec = AbortTransactionSpec(
        TopicPartition(plan.topic, plan.partition), plan.producer_id, plan.producer_epoch, plan.coordinator_epoch
    )

    # kafka-python's abort_transaction, with the response read as Kafka's Admin reads it: its own check
    # passes a response that lacks the partition's result (no error code to look at). The steps are
    # kafka-python 3.0's (_async_abort_transaction), pinned in pyproject.toml.
    async def write_marker() -> Any:
        leaders = await admin._async_get_leader_for_partitions([spec.topic_partition])
        return await admin._manager.send(admin._abort_transaction_request(spec), node_id=next(iter(leaders)))

    try:
        response = admin._manager.run(write_marker)
    except IncompatibleBrokerVersion as e:
        raise AbortUnsupported(f"the broker does not support WriteTxnMarkers (admin abort): {e}") from e
    check_abort_response(response, plan)


def check_abort_response(response: Any, plan: AbortPlan) -> None:
    """Raise unless the WriteTxnMarkers response holds exactly one result, for the plan's producer, topic and
    partition, without error: ``AbortTransactionHandler.handleResponse`` (clients/.../admin/internals)."""
    from kafka import errors as kafka_errors

    def unexpected(what: str) -> Exception:
        return kafka_errors.KafkaError(
            f"WriteTxnMarkers response included unexpected {what} (expected exactly one entry for producer "
            f"{plan.producer_id} on {plan.topic}-{plan.partition}): the marker may not have been written; "
            f"check with 'txnlog find-hanging' before retrying"
        )

    markers = list(response.markers)
    if len(markers) != 1 or markers[0].producer_id != plan.producer_id:
        raise unexpected("marker entries")
    topics = list(markers[0].topics)
    if len(topics) != 1 or topics[0].name != plan.topic:
        raise unexpected("topic entries")
    partitions = list(topics[0].partitions)
    if len(partitions) != 1 or partitions[0].partition_index != plan.partition:
        raise unexpected("partition entries")
    error = kafka_errors.for_code(partitions[0].error_code)
    if error is not kafka_errors.NoError:
        raise error(f"WriteTxnMarkers (abort) failed for {plan.topic}-{plan.partition}")
