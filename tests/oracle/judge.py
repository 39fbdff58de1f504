"""Kafka's answer for a written scenario, and where the ground truth and txnlog's tables differ from it.

Shared by the oracle's tests (every writer scenario, random workloads). Which broker a copy speaks for,
and the two ways a running broker's copy differs from a restart's load, are said in
tests/oracle/test_scenarios.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.e2e import truth as T

_Drawn = TypeVar("_Drawn")

INTERNAL = ("__transaction_state", "__cluster_metadata")


def draw_distinct(strategy: st.SearchStrategy[_Drawn], count: int, at_seed: int) -> list[_Drawn]:
    """Up to ``count`` distinct values of ``strategy``, the same ones for the same seed: examples drawn once for a
    module (each then judged by its own test) rather than a hypothesis test running the job per example."""
    out: list[_Drawn] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(at_seed)
    @given(strategy)
    def draw(value: _Drawn) -> None:
        if value not in out:
            out.append(value)

    draw()
    return out


def run_txnlog(spark, logs: Path, out: Path, as_of_ms: int, cluster: str, **options: Any) -> list[str]:
    """txnlog over the log dirs under ``logs`` into ``out``, with ``options`` besides; the run's progress lines."""
    from txnlog.model.config import load_config
    from txnlog.pipeline import run

    config = load_config(
        None,
        {"logs": [str(logs)], "output": str(out), "as_of": str(as_of_ms), "cluster": cluster, "progress": False}
        | options,
    )
    lines: list[str] = []
    run(config, spark=spark, progress=lines.append)
    return lines


@dataclass(frozen=True)
class ScenarioRun:
    """A writer scenario's copy (``logs``, the writer's ``truth``) and txnlog's tables over it (``out``; the
    run's ``progress`` lines), made once per test session by the ``scenario_run`` fixture (tests/conftest.py)."""

    SEED: ClassVar[int] = 3
    CLUSTER: ClassVar[str] = "oracle-scenarios"
    #: the partitions of ``__transaction_state`` and ``__consumer_offsets`` (the brokers' default: 50 each) in
    #: every scenario that does not name its own count (``partial_txn_state`` keeps 50): a smaller copy, every
    #: coordinator partition computed from the count (txnlog.brokerlog.cluster.internal_partitions); txnlog's
    #: runs over a copy are given its count (:meth:`options`)
    INTERNAL_PARTITIONS: ClassVar[int] = 4

    name: str
    truth: Any
    logs: Path
    out: Path
    progress: tuple[str, ...] = ()

    @staticmethod
    def options(truth: Any) -> dict[str, Any]:
        """The config a run of txnlog over ``truth``'s copy needs besides its inputs: the cluster's
        ``__transaction_state`` partition count (``transaction.state.log.num.partitions``)."""
        return {"transaction_state_partitions": truth.txn_state_partitions}


def _producers(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(
        (
            p["producerId"],
            p["producerEpoch"],
            p["lastSequence"],
            p["lastTimestamp"],
            p["coordinatorEpoch"],
            None if p["currentTxnStartOffset"] < 0 else p["currentTxnStartOffset"],
        )
        for p in rows
    )


def kafka_answers(oracle, truth) -> dict[tuple[int, str, int], dict[str, Any]]:
    """Per replica: Kafka's answer for the broker the copy speaks for (see the module's docstring)."""
    keys = [k for k in sorted(truth.replica_partitions) if not k[1].startswith(INTERNAL)]
    dirs = [truth.root / f"broker-{b}" / f"{t}-{p}" for b, t, p in keys]
    keys, dirs = [k for k, d in zip(keys, dirs, strict=True) if d.exists()], [d for d in dirs if d.exists()]
    options = ("--now", str(truth.as_of_ms), "--apply-expiration")
    restarted = oracle.load_partitions(dirs, *options)
    as_stored = oracle.load_partitions(dirs, *options, "--shutdown", "clean")
    damage: dict[str, list[tuple[int, int | None]]] = {}
    for q in truth.quarantine:
        if q.first_offset is not None:
            damage.setdefault(str(Path(q.file).parent), []).append((q.first_offset, q.last_offset))
    out = {}
    for key, d, restart, stored in zip(keys, dirs, restarted, as_stored, strict=True):
        assert "error" not in restart and "error" not in stored, (d, restart, stored)
        if restart["logEndOffset"] < stored["logEndOffset"]:  # an unclean restart truncates at the damage
            assert restart["shutdown"] == "unclean"
            regions = damage.get(str(d.relative_to(truth.root)), [])
            assert restart["logEndOffset"] in [lo for lo, _ in regions], (d, restart["logEndOffset"], regions)
            tail = any(hi is not None and hi + 1 == stored["logEndOffset"] for _, hi in regions)
            out[key] = {**stored, "restarted": restart, "tail_damaged": tail}
        else:
            out[key] = restart
    return out


def truth_differences(truth, kafka: dict[tuple[int, str, int], dict[str, Any]]) -> list[str]:
    """Where the writer's ground truth differs from Kafka's answer: every replica's offsets, the reference
    replicas' producers."""
    problems: list[str] = []
    for key, k in kafka.items():
        ep = truth.replica_partitions[key]
        want = (k["logStartOffset"], k["logEndOffset"], k["highWatermark"], k["lastStableOffset"])
        got = (ep.log_start_offset, ep.log_end_offset, ep.high_watermark, ep.last_stable_offset)
        if ep.held_by_unreplicated:  # the live LSO: a restart would not hold it (module docstring)
            # the restart holds only the ongoing transactions: the oldest of them, bounded by HW and log start
            ongoing = [p["currentTxnStartOffset"] for p in k["producers"] if p["currentTxnStartOffset"] >= 0]
            restart = max(min([*ongoing, k["highWatermark"]]), k["logStartOffset"])
            assert k["lastStableOffset"] == restart > ep.last_stable_offset, (key, k, ep)
            want = (*want[:3], ep.last_stable_offset)
        if got != want:
            problems.append(f"truth {key}: (start, end, hw, lso) {got} != Kafka's {want}")
    by_replica: dict[tuple[int, str, int], list] = {}
    for p in truth.producers:
        by_replica.setdefault((p.broker, p.topic, p.partition), []).append(
            (
                p.producer_id,
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        )
    references = {(ep.broker, ep.topic, ep.partition) for ep in truth.partitions.values()}
    for key in sorted(references & set(kafka)):
        if sorted(by_replica.get(key, [])) != _producers(kafka[key]["producers"]):
            problems.append(
                f"truth {key}: producers {sorted(by_replica.get(key, []))} != Kafka's {_producers(kafka[key]['producers'])}"
            )

    return problems


def txnlog_differences(truth, kafka: dict[tuple[int, str, int], dict[str, Any]], out: Path) -> list[str]:
    """Where txnlog's ``partition_health``, ``producer_state`` and OPEN ``transactions`` in ``out`` (one run
    over the copy) differ from Kafka's answer for each partition's most advanced replica."""
    problems: list[str] = []
    references = {(ep.broker, ep.topic, ep.partition) for ep in truth.partitions.values()}
    health = {(r["topic"], r["partition"]): r for r in T.rows(str(out), "partition_health")}
    producers: dict[tuple[str, int], list] = {}
    for r in T.rows(str(out), "producer_state"):
        producers.setdefault((r["topic"], r["partition"]), []).append(
            (
                r["producer_id"],
                r["producer_epoch"],
                r["last_sequence"],
                r["last_timestamp_ms"],
                r["coordinator_epoch"],
                r["current_txn_start_offset"],
            )
        )
    open_on: dict[tuple[str, int], set[int]] = {}
    for t in T.rows(str(out), "transactions"):
        if t["outcome"] == "OPEN":
            open_on.setdefault((t["topic"], t["partition"]), set()).add((t["first_offset"], *t["open_replicas"]))
    for key in sorted(references & set(kafka)):
        k, ep, tp = kafka[key], truth.replica_partitions[key], key[1:]
        if k.get("tail_damaged"):  # the log's last batch unreadable: txnlog says what its restart loads
            k = k["restarted"]
        h = health.get(tp)
        if h is None:
            problems.append(f"txnlog {tp}: no partition_health row")
            continue
        lso = ep.last_stable_offset if ep.held_by_unreplicated else k["lastStableOffset"]
        want = (k["logStartOffset"], k["logEndOffset"], k["highWatermark"], lso)
        got = (h["log_start_offset"], h["log_end_offset"], h["high_watermark"], h["last_stable_offset"])
        if got != want:
            problems.append(f"txnlog {tp}: partition_health (start, end, hw, lso) {got} != Kafka's {want}")
        if sorted(producers.get(tp, [])) != _producers(k["producers"]):
            problems.append(
                f"txnlog {tp}: producer_state {sorted(producers.get(tp, []))} != Kafka's {_producers(k['producers'])}"
            )
        lead = T.broker_name(key[0])
        txnlog_open = sorted(o[0] for o in open_on.get(tp, set()) if lead in o[1:])
        kafka_open = sorted(p["currentTxnStartOffset"] for p in k["producers"] if p["currentTxnStartOffset"] >= 0)
        if txnlog_open != kafka_open:
            problems.append(f"txnlog {tp}: OPEN transactions at {txnlog_open} != Kafka's ongoing {kafka_open}")
    return problems
