"""The nightly job as a library call: inputs → decode → tables → Delta tables.

``jobs/find_hanging.py``, the ``txnlog`` CLI and the notebooks call :func:`run`, or the steps it is made
of, so what a notebook shows is what the nightly job writes. One module per step, in the order a run
takes them: ``inputs`` (every check that needs no Spark), ``decode``, ``build`` (``as_of``, the tables),
``write`` (the Delta tables, retention), ``runs`` (the run's result and its ``runs`` row), ``run``.

Example::

    from txnlog.model.config import load_config
    from txnlog.pipeline import run
    result = run(load_config(None, {"logs": ["/data/kafka-logs"]}))
    print(result.summary_text())
"""

from txnlog.output.spark_base import job_description
from txnlog.pipeline.build import build_tables, resolve_as_of, thresholds_of, verify_live
from txnlog.pipeline.decode import Decoded, capture_live, decode
from txnlog.pipeline.inputs import (
    Inputs,
    cluster_name,
    placement_of,
    plan_inputs,
)
from txnlog.pipeline.run import run
from txnlog.pipeline.runs import RunResult, summarize
from txnlog.pipeline.scope import Progress, run_scope, stderr_progress
from txnlog.pipeline.warm import warm_decoders
from txnlog.pipeline.write import retain, write
from txnlog.sources.offline import check_inputs

__all__ = [
    "Decoded",
    "Inputs",
    "Progress",
    "RunResult",
    "build_tables",
    "capture_live",
    "check_inputs",
    "cluster_name",
    "decode",
    "job_description",
    "placement_of",
    "plan_inputs",
    "resolve_as_of",
    "retain",
    "run",
    "run_scope",
    "stderr_progress",
    "summarize",
    "thresholds_of",
    "verify_live",
    "warm_decoders",
    "write",
]
