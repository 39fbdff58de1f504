"""The tables do not depend on the order in which the decode hands its rows over.

Spark's tasks finish in any order and a shuffle interleaves their rows, so the table build
(txnlog.rules.tables) must give the same tables for any permutation of the decoded summary and
coordinator records: every rule sorts its own input. Checked on writer scenarios with replicas,
damage, snapshots, checkpoints and coordinator records, decoded in this process (no Spark), and on
the same brokers' kafka-dump-log.sh output (rows still to merge into transactions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.oracle.judge import ScenarioRun

SCENARIOS = ("replicas_disagree", "corrupt_and_truncated", "damage_around_transactions", "clean_restart")


def _tables(config: Any, inputs: Any, decoded: Any, summary: pa.Table, records: pa.Table, scratch: Path) -> dict:
    from txnlog import pipeline
    from txnlog.engine import staging
    from txnlog.rules import tables

    as_of, _ = pipeline.resolve_as_of(config.as_of, decoded.times)
    thresholds = pipeline.thresholds_of(config, inputs, decoded, as_of)
    checkpoints = inputs.offline.inventory.checkpoints
    if inputs.offline.dump_files:  # rows of several tasks: merged and reduced as the local decode does
        summary, records = staging.merged_here(summary, records, checkpoints, str(scratch))
    built = tables.build(summary, records, thresholds, checkpoints=checkpoints, as_of=as_of)
    return {name: sorted(map(repr, t.to_pylist())) for name, t in built.items() if isinstance(t, pa.Table)}


def _read(inputs: Any, scratch: Path) -> tuple[pa.Table, pa.Table]:
    """The rows the local placement's tasks read of ``inputs`` (log dirs, kafka-dump-log.sh files), as they leave
    the tasks: a dump's still to merge into transactions and to reduce (txnlog.engine.tasks.decode_here)."""
    from txnlog.engine.settings import Decode
    from txnlog.engine.spark.dump_log import read_dump_logs_here
    from txnlog.engine.tasks import log_dir_jobs, run_here

    offline = inputs.offline
    shared = bool(offline.dump_files)
    jobs, _ = log_dir_jobs(offline.inventory, Decode(True, None), str(scratch), shared=shared, dumps=shared, threads=1)
    summary, records = run_here(jobs)
    if shared:
        dumped, dumped_records = read_dump_logs_here(offline.dump_inputs)
        summary = pa.concat_tables([summary, dumped], promote_options="default")
        records = pa.concat_tables([records, dumped_records], promote_options="default")
    return summary, records


def _shuffled(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    return table.take(pa.array(rng.permutation(table.num_rows)))


@pytest.mark.parametrize("kind", ["logs", "dumps"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_any_order_of_the_decoded_rows_gives_the_same_tables(tmp_path: Path, name: str, kind: str) -> None:
    from tests.e2e.shared import render_broker_dumps
    from txnlog import pipeline
    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.settings import Decode
    from txnlog.engine.tasks import decode_here
    from txnlog.model.config import load_config

    truth = write_scenario(name, tmp_path / "logs", seed=3, internal_partitions=ScenarioRun.INTERNAL_PARTITIONS)
    given: dict[str, Any] = {"logs": [str(tmp_path / "logs")], **ScenarioRun.options(truth)}
    if kind == "dumps":
        render_broker_dumps(tmp_path / "logs", tmp_path / "dumps")
        given = {"dump_log": [str(p) for p in sorted((tmp_path / "dumps").iterdir())], **ScenarioRun.options(truth)}
    config = load_config(None, {**given, "as_of": str(truth.as_of_ms), "output": str(tmp_path / "out")})
    inputs = pipeline.plan_inputs(config, sample=False)
    decoded = decode_here(inputs.offline, Decode(True, None), str(tmp_path / "scratch"))
    summary, records = _read(inputs, tmp_path / "read")  # the rows before the decode merges a dump's
    want = _tables(config, inputs, decoded, summary, records, tmp_path / "a")
    assert want["partition_health"], "the scenario's partitions were read"
    rng = np.random.default_rng(7)
    for attempt in range(3):
        summary, records = _shuffled(summary, rng), _shuffled(records, rng)
        got = _tables(config, inputs, decoded, summary, records, tmp_path / f"b{attempt}")
        assert got == want
