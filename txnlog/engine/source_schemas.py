"""The rows the log-dir readers hand on, in a module that imports no reader: Spark's planning processes load a
Data Source's module to ask its schema and plan its tasks, and should not import the decoders to do so
(txnlog.engine.spark.sources)."""

from __future__ import annotations

from txnlog.model.rows import TXN_STATE_SCHEMA
from txnlog.rules.coordinator import TRANSITIONS

#: what the ``__transaction_state`` source yields: the records, plus ``transitions`` (set when the reader reduces them)
TXN_STATE_SOURCE_SCHEMA = TXN_STATE_SCHEMA.append(TRANSITIONS)
