"""The Kafka oracle's tests skip, with the reason, only where the oracle or java is absent.

``scenario_run`` writes each scenario of the writer once per test session and runs txnlog over it once: the
modules that judge every scenario (test_scenarios, test_coordinator, test_dump_log, test_integrity) read the
same copy and the same tables, each with its own comparisons against Kafka's code (tests/conftest.py sends them
to one worker).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.oracle import kafka
from tests.oracle.judge import ScenarioRun, run_txnlog


@pytest.fixture(scope="session")
def oracle():  # type: ignore[no-untyped-def]
    reason = kafka.skip_reason()
    if reason:
        pytest.skip(reason)
    return kafka


@pytest.fixture(scope="session")
def scenario_run(spark, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ScenarioRun]:  # type: ignore[no-untyped-def]
    """``scenario_run(name)``: scenario ``name`` written (seed :data:`ScenarioRun.SEED`) and txnlog's tables
    over it (cluster :data:`ScenarioRun.CLUSTER`, the shared ``spark`` session), made on first use. The copy
    and the tables are read only."""
    from txnlog.brokerlog.scenarios import write_scenario

    made: dict[str, ScenarioRun] = {}

    def get(name: str) -> ScenarioRun:
        if name not in made:
            work = tmp_path_factory.mktemp(f"scenario-{name}")
            truth = write_scenario(name, work / "logs", seed=ScenarioRun.SEED)
            run_txnlog(spark, truth.root, work / "out", truth.as_of_ms, ScenarioRun.CLUSTER)
            made[name] = ScenarioRun(name, truth, work / "logs", work / "out")
        return made[name]

    return get
