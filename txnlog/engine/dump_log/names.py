"""The replica a dumped file's rows belong to: the rule that names every (dump file, printed broker) from the
input's "Dumping" lines (:func:`replica_names`), and the rows renamed by it (:func:`with_replica_names`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txnlog.kafka import dump_log_text as D
from txnlog.model.arrow import lookup
from txnlog.sources.dump_log.lines import DumpInput, dumping_lines
from txnlog.sources.dump_log.parse import K_DUMPING, parse_lines

#: (dump file, printed broker) → replica name
Names = dict[tuple[str | None, str | None], str | None]


def replica_names(lines: pa.Table) -> Names:
    """(dump file, printed broker) → replica name, for every dumped file (README, kafka-dump-log.sh), from
    the distinct "Dumping" lines (one per dumped file, so few). Deterministic, from the whole input:

    1. ``NAME=PATH`` names every dump under PATH: NAME, always.
    2. Otherwise the broker directory in the printed path (``.../<broker dir>/<topic>-<n>/``) names the
       replica - unless the printed paths cannot tell replicas apart: the same segment path printed by
       several dump files (every broker's log dir is /var/lib/kafka/data), or no broker directory at all.
       Then every dump of that *location* (the directory below the ``--dump-log`` directory, or the
       directory given) that prints that broker directory takes the location's name, so a replica's
       segments, snapshots and __transaction_state dumps stay together.
    3. Dump files that still print the same segment path under the same name (files given one by one, or
       lying side by side in one directory) are told apart by the dump file's name (``b1.txt`` → ``b1``;
       under a location ``dumps/b1``).
    """
    dumping = lines.filter(pc.fill_null(pc.equal(lines.column("kind_code"), K_DUMPING), False))
    seen = {
        (r["file"], r["loc"], bool(r["loc_named"]), r["broker"], r["dpath"], r["stem"])
        for r in dumping.select(["file", "loc", "loc_named", "broker", "dpath", "stem"]).to_pylist()
    }
    d = [dict(zip(("dump_file", "loc", "named", "pbroker", "dpath", "stem"), row, strict=True)) for row in seen]
    # the same printed path in several dump files: per printed broker, then per chosen base name
    files = _sets(d, ("pbroker", "dpath"))
    for r in d:
        r["clash"] = len(files[(r["pbroker"], r["dpath"])]) > 1
    clashing = {(r["loc"], r["pbroker"]) for r in d if r["clash"]}
    for r in d:
        r["use_loc"] = r["loc"] is not None and (
            r["named"] or (r["loc"], r["pbroker"]) in clashing or r["pbroker"] == D.UNKNOWN_BROKER
        )
        r["base"] = r["loc"] if r["use_loc"] else r["pbroker"]
    files = _sets(d, ("base", "dpath"))
    renamed = {(r["dump_file"], r["base"]) for r in d if len(files[(r["base"], r["dpath"])]) > 1 and not r["named"]}
    names: Names = {}
    for r in d:
        if (r["dump_file"], r["base"]) in renamed:
            stem = "/".join(x for x in (r["base"], r["stem"]) if x is not None) if r["use_loc"] else r["stem"]
            names[(r["dump_file"], r["pbroker"])] = stem
        else:
            names[(r["dump_file"], r["pbroker"])] = r["base"]
    return names


def listed_names(inputs: Sequence[DumpInput]) -> tuple[Names, list[str]]:
    """The replica names of the dump files ``inputs`` (:func:`replica_names`) and those of the files that dump a
    ``__transaction_state`` segment, in their listing order: from each file's "Dumping" lines alone
    (txnlog.sources.dump_log.lines.dumping_lines, a byte search), before the files are read, so that the reading
    tasks name the rows they make."""
    batches = [dumping_lines(path, loc, named) for path, loc, named in inputs]
    if not batches:
        return {}, []
    lines = parse_lines(pa.concat_batches(batches))
    coordinator = set(lines.filter(pc.fill_null(lines.column("is_txn_state"), False)).column("file").to_pylist())
    return replica_names(pa.table(lines)), [path for path, _, _ in inputs if path in coordinator]


def _sets(rows: list[dict[str, Any]], keys: tuple[str, str]) -> dict[tuple[Any, Any], set[str]]:
    """The dump files per value of ``keys`` (``collect_set(dump_file) OVER (PARTITION BY keys)``)."""
    out: dict[tuple[Any, Any], set[str]] = {}
    for r in rows:
        out.setdefault((r[keys[0]], r[keys[1]]), set()).add(r["dump_file"])
    return out


def with_replica_names(table: pa.Table, names: Names) -> pa.Table:
    """``table`` with ``broker`` replaced by the replica name of its (dump file, printed broker)."""
    if not names or not table.num_rows:
        return table
    named = lookup(table, ["dump_file", "broker"], names_table(names), "replica")
    broker = pc.coalesce(named, table.column("broker"))
    return table.set_column(table.column_names.index("broker"), "broker", broker)


def names_table(names: Names) -> pa.Table:
    """``names`` as a table: ``dump_file``, ``broker`` (as printed) and ``replica``, a row per key."""
    keys = list(names)
    return pa.table(
        {
            "dump_file": pa.array([f for f, _ in keys], pa.string()),
            "broker": pa.array([b for _, b in keys], pa.string()),
            "replica": pa.array([names[k] for k in keys], pa.string()),
        }
    )
