"""The job's "who is blocked" step: the ``blocked_consumers`` table (txnlog.rules.blocked) from the decoded
``__consumer_offsets`` partitions and the built tables, the groups each remedy unblocks on ``findings`` and
``abort_recommendations``, and the ``__consumer_offsets`` records that did not read as quarantine rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka.wire import CONSUMER_OFFSETS_TOPIC
from txnlog.model.arrow import project
from txnlog.model.rows import KIND_QUARANTINE
from txnlog.rules.blocked import blocked_consumers, unblocked_groups

__all__ = ["with_blocked"]


def with_blocked(tables: dict[str, Any], offsets: pa.Table | None) -> dict[str, Any]:
    """``tables`` (``pipeline.build_tables``' answer) with ``blocked_consumers``, ``blocked_groups`` named on the
    findings and the plan (left null when the input holds no ``__consumer_offsets`` partition), and the quarantine
    rows of ``offsets`` (txnlog.engine.spark.consumer_offsets_source.SOURCE_SCHEMA)."""
    out = dict(tables)
    blocked = blocked_consumers(offsets, tables["partition_health"], tables["findings"])
    out["blocked_consumers"] = blocked
    if offsets is None:
        return out
    for name, lso_after in (("findings", None), ("abort_recommendations", "lso_after_abort")):
        table = out[name]
        groups = unblocked_groups(blocked, table, lso_after=lso_after)
        out[name] = table.set_column(table.schema.get_field_index("blocked_groups"), "blocked_groups", groups)
    bad = offsets.filter(pc.equal(offsets["kind"], KIND_QUARANTINE))
    if bad.num_rows:
        where = {"topic": CONSUMER_OFFSETS_TOPIC, "partition": bad["coordinator_partition"], "replica": bad["broker"]}
        rows = project(bad, "quarantine", **where)
        quarantine = out["quarantine"]
        out["quarantine"] = pa.concat_tables([quarantine, rows.cast(quarantine.schema)])
    return out
