"""What damage decides, as the log files and their kafka-dump-log.sh text must both give it: the data partitions'
quarantine rows, each finding's safety and the regions its evidence names (offsets and how the one damage rule,
txnlog.rules.damage, bounded them), and the dump line a dumped region came from. Shared by the dump equivalence
tests (txnlog's renderings) and the oracle's (Kafka's own DumpLogSegments)."""

from __future__ import annotations

import re
from typing import Any

#: a region as a finding's evidence names it (txnlog.broker.classify.region_text, txnlog.rules.damage.region_source)
_REGION = re.compile(r"offsets (\d+(?:-\d+| to the log end)) of (\S+) \(([^;)]*)(?:; ([^)]*))?\)")
#: how the rule says it could not bound a region after (no valid batch after it in the file)
UNBOUNDED_AFTER = "no valid batch after it"

Tables = dict[str, list[dict[str, Any]]]


def partition_file(path: str) -> str:
    """``<topic>-<n>/<segment>``: a segment as both inputs name it (a dump prints the broker's own path)."""
    return "/".join(path.split("/")[-2:])


def damage_clauses(evidence: str | None) -> list[tuple[str, str, str]]:
    """The damaged regions a finding's evidence names: (offsets, ``<topic>-<n>/<segment>``, how they were
    bounded); the dump line each came from is :func:`dump_lines`'."""
    return [(m[1], partition_file(m[2]), m[3]) for m in _REGION.finditer(evidence or "")]


def dump_lines(evidence: str | None) -> list[str | None]:
    """The dump line each damaged region of a finding's evidence came from (None: named by its file only)."""
    return [m[4] for m in _REGION.finditer(evidence or "")]


def without_regions(evidence: str | None) -> str | None:
    """The evidence with each region's file named alike and its dump line left out (the rest as written)."""
    if evidence is None:
        return None
    return _REGION.sub(lambda m: f"offsets {m[1]} of {partition_file(m[2])} ({m[3]})", evidence)


def quarantine_rows(tables: Tables) -> set[tuple]:
    """The data partitions' quarantine rows: (topic, partition, position, length, reason)."""
    return {
        (q["topic"], q["partition"], q["position"], q["length"], q["reason"])
        for q in tables["quarantine"]
        if q["topic"] not in (None, "__transaction_state") and q["reason"] != "dump_log_unparsed_line"
    }


def safety(tables: Tables, finding: dict[str, Any]) -> str | None:
    """A finding's abort safety (its ``abort_recommendations`` row's; None: no abort recommended)."""
    key = (finding["topic"], finding["partition"], finding["producer_id"], finding["start_offset"])
    by_key = {
        (r["topic"], r["partition"], r["producer_id"], r["start_offset"]): r for r in tables["abort_recommendations"]
    }
    return by_key[key]["safety"] if key in by_key else None


def safety_by_id(tables: Tables, topic: str) -> dict[str, str | None]:
    """The abort safety of each finding on ``topic``, by transactional.id."""
    return {f["transactional_id"]: safety(tables, f) for f in tables["findings"] if f["topic"] == topic}


def finding_damage(tables: Tables) -> dict[tuple, tuple]:
    """Per finding (topic, partition, producer id, start offset, reason): its safety and its evidence's regions."""
    return {
        (f["topic"], f["partition"], f["producer_id"], f["start_offset"], f["reason"]): (
            safety(tables, f),
            tuple(damage_clauses(f["evidence"])),
        )
        for f in tables["findings"]
    }


def assert_damage_equal(files: Tables, dump: Tables, unbounded: set[tuple[str, int]]) -> None:
    """The quarantine rows, the findings' safety and the regions their evidence names are those of the log files,
    and every region of the dump's evidence names the dump line it came from.

    ``unbounded``: the partitions whose dump cannot show a valid batch after a region (the tool stopped on a header
    it cannot frame, or on records it cannot read): there the dump must say so - a quarantine row from the lost
    region's position on, the evidence saying no valid batch bounds it after - and no finding may be safer."""
    want_q, got_q = quarantine_rows(files), quarantine_rows(dump)
    want_f, got_f = finding_damage(files), finding_damage(dump)
    assert want_q and want_f, "not vacuous: the scenario has damage and findings"
    for tp in unbounded:
        lost = {q for q in want_q if q[:2] == tp} - got_q
        for q in lost:
            said = [g for g in got_q if g[:2] == tp and g[2] <= q[2] and (g[3] is None or g[2] + g[3] >= q[2] + q[3])]
            assert said, (q, sorted(g for g in got_q if g[:2] == tp))
        for key, (safety, clauses) in got_f.items():
            if key[:2] == tp:
                assert safety != "SAFE" or want_f.get(key, ("",))[0] == "SAFE", key
                assert not clauses or any(UNBOUNDED_AFTER in bound for _, _, bound in clauses), clauses
    bounded = lambda rows: {k: v for k, v in rows.items() if k[:2] not in unbounded}  # noqa: E731
    assert {q for q in got_q if q[:2] not in unbounded} == {q for q in want_q if q[:2] not in unbounded}
    assert bounded(got_f) == bounded(want_f)
    for f in dump["findings"]:
        for line in dump_lines(f["evidence"]):
            assert line is not None and re.match(r"\S+:\d+: ", line), f["evidence"]
    assert all(line is None for f in files["findings"] for line in dump_lines(f["evidence"]))
