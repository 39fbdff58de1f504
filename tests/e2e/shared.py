"""Inputs and job runs that several test modules read, made once per test session (fixtures in tests/conftest.py).

* :func:`readme_run`: the README's run command, verbatim (no arguments: the embedded sample cluster, cluster
  ``sample``, its natural ``as_of``) in a fresh working directory: tests/e2e/test_job.py and the ``sample``
  input of tests/e2e/test_previous_pipeline.py.
* :func:`messy_incident`: the writer's ``messy_incident`` scenario (seed 3) and the same brokers' files as
  kafka-dump-log.sh output (:func:`render_broker_dumps`): tests/e2e/test_messy.py, test_placement.py,
  test_previous_pipeline.py, tests/cluster/test_standalone.py.
* :func:`messy_dumps_run`: ``./spark-submit.sh --dump-log <broker dir>...`` over those dumps, ``--cluster
  messy-dumps --as-of`` the scenario's ``as_of``: the dumps' findings (test_messy.py), the previous pipeline's
  tables (test_previous_pipeline.py) and the local tables a standalone cluster must write (test_standalone.py).

No test writes into these outputs or inputs: one that adds runs to an output works on a copy of it
(test_job.py's rerun).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.jobrun import run_job

#: the messy dumps' run: what tests/fixtures/previous_pipeline/messy_dumps was written with
MESSY_AS_OF = "1717404903421"  # 2024-06-03T08:55:03.421Z (= write_scenario("messy_incident", seed=3).as_of_ms)
MESSY_CLUSTER = "messy-dumps"


@dataclass
class Run:
    proc: subprocess.CompletedProcess
    out: str
    truth: Any
    workdir: Path


@dataclass
class MessyInput:
    work: Path  # holds logs/ and dumps/ only
    truth: Any

    @property
    def logs(self) -> Path:
        return self.work / "logs"

    @property
    def dumps(self) -> Path:
        return self.work / "dumps"

    def dump_args(self) -> list[str]:
        """``--dump-log <broker dir>`` for each broker, in broker order."""
        return [a for b in sorted(p.name for p in self.dumps.iterdir()) for a in ("--dump-log", str(self.dumps / b))]


def render_broker_dumps(logs: Path, dumps: Path) -> None:
    """Each broker's files dumped where operators keep them: one directory per broker, every broker's
    log dir printed as /var/lib/kafka/data (identical paths, rule 2); brokers 1 and 2 run Kafka 3.x's
    Scala tool, broker 3 the 4.x Java tool (a rolling upgrade); --deep-iteration on data segments,
    --transaction-log-decoder on __transaction_state."""
    from txnlog.kafka.dump_log_render import render_dump
    from txnlog.sources.logdirs import discover

    inv = discover([str(logs)])
    for f in list(inv.segments) + list(inv.snapshots) + list(inv.txn_state_segments):
        version = "4.x" if f.broker == "broker-3" else "3.x"
        txn = f.topic == "__transaction_state"
        out = dumps / f.broker / ("txn-state.txt" if txn else f"{f.topic}-{f.partition}.txt")
        out.parent.mkdir(parents=True, exist_ok=True)
        shown = "/var/lib/kafka/data/" + "/".join(Path(f.path).parts[-2:])
        with open(out, "a") as fh:
            fh.write(
                render_dump(f.path, version, deep_iteration=not txn, transaction_log_decoder=txn, dumping_path=shown)
            )


def readme_run(work: Path) -> Run:
    """The README's run command, verbatim, in ``work`` (fresh); the sample's ground truth beside it."""
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.sources.sample import SAMPLE_SEED

    proc = run_job(cwd=work, env={"TXNLOG_CACHE": str(work / "cache")})
    truth = write_scenario("sample", work / "truth", seed=SAMPLE_SEED)
    return Run(proc, str(work / "out"), truth, work)


def messy_incident(work: Path) -> MessyInput:
    from txnlog.brokerlog.scenarios import write_scenario

    truth = write_scenario("messy_incident", work / "logs", seed=3)
    assert str(truth.as_of_ms) == MESSY_AS_OF
    render_broker_dumps(work / "logs", work / "dumps")
    return MessyInput(work, truth)


def messy_dumps_run(messy: MessyInput, work: Path) -> Run:
    out = str(work / "out")
    proc = run_job(*messy.dump_args(), "--output", out, "--cluster", MESSY_CLUSTER, "--as-of", MESSY_AS_OF, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Run(proc, out, messy.truth, work)
