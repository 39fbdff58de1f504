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

find-hanging on these calls is :mod:`txnlog.live.hanging`; the guarded abort :mod:`txnlog.live.abort`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from txnlog.kafka.wire import TRANSACTION_STATE_TOPIC
from txnlog.model.errors import UsageError

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


def admin_client(bootstrap: str, kafka_conf: Mapping[str, Any] | None = None, connect_timeout_s: float = 30.0) -> Any:
    """A kafka-python KafkaAdminClient for ``bootstrap`` with the config's security settings; it raises
    ``KafkaTimeoutError`` when no broker has answered within ``connect_timeout_s`` (its bootstrap)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # Lazy in this module: the Kafka clients load only when a live cluster is asked.
        from kafka.admin import KafkaAdminClient

        kw = {
            "client_id": "txnlog",
            "bootstrap_timeout_ms": int(connect_timeout_s * 1000),
            **kafka_python_settings(kafka_conf),
        }
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
    return partitions_of(cluster_metadata(bootstrap, kafka_conf, timeout_s), topics)


def cut_offsets(
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None,
    topics: Sequence[str] | None,
    timeout_s: float = 30.0,
    *,
    without: str | None = None,
) -> tuple[Any, Any, list[dict[str, Any]]]:
    """A live cut's questions to the cluster, in one admin session: (its ``AdminClient``, for what is asked next;
    its metadata, one request for every topic; :func:`partition_offsets` of the partitions of ``topics``
    (:func:`partitions_of`), those of topic ``without`` left out)."""
    from confluent_kafka.admin import AdminClient

    md = cluster_metadata(bootstrap, kafka_conf, timeout_s)
    tps = [(t, p) for t, p in partitions_of(md, topics) if t != without]
    admin = AdminClient(_confluent_conf(bootstrap, kafka_conf))
    return admin, md, partition_offsets(bootstrap, kafka_conf, tps, timeout_s=timeout_s, admin=admin)


def partitions_of(md: Any, topics: Sequence[str] | None) -> list[tuple[str, int]]:
    """(topic, partition) of the given topics in the cluster's metadata ``md``, or of every topic it lists."""
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
    bootstrap: str,
    kafka_conf: Mapping[str, Any] | None,
    tps: Iterable[tuple[str, int]],
    timeout_s: float = 30.0,
    admin: Any = None,
) -> list[dict[str, Any]]:
    """ListOffsets for each (topic, partition): log start, LSO (read_committed end offset),
    high watermark (read_uncommitted end offset) and ``lso_lag`` = high watermark − LSO; asked with ``admin`` (an
    ``AdminClient``) when given."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    tps = sorted({(str(t), int(p)) for t, p in tps})
    if not tps:
        return []
    admin = admin if admin is not None else AdminClient(_confluent_conf(bootstrap, kafka_conf))

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
