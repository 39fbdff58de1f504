"""The kafka-dump-log.sh parse in the lines reader (``txnlog.sources.dump_log.parse.parse_lines``), without Spark.

The parse replaced Spark SQL column expressions; what Spark did is the reference: Java regular
expressions (``.``, ``$`` and ``\\s`` differ from RE2's: ``dump_log_text.re2``), ``try_cast`` (null on a
bad or overflowing number) and ``from_json`` (partial results, trailing text ignored, single quotes).
The values marked "Spark:" below were read from Spark 4.2 itself.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from txnlog.kafka import dump_log_text as D
from txnlog.sources.dump_log import parse as M
from txnlog.sources.dump_log import spark_text as S
from txnlog.sources.dump_log import txn_text as T
from txnlog.sources.dump_log.lines import iter_line_batches

from .test_golden import SYNTHETIC
from .test_replicas_and_lines import KNOWN_LINES

KINDS = {
    "ignored": M.K_IGNORED,
    "snapshot_corrupt": M.K_SNAPSHOT_CORRUPT,
    "tool_error": M.K_TOOL_ERROR,
    "elided": M.K_ELIDED,
}


def _parse(text: str, tmp_path) -> pa.Table:  # type: ignore[no-untyped-def]
    path = tmp_path / "dump.txt"
    path.write_bytes(text.encode())
    return pa.Table.from_batches([M.parse_lines(b) for b in iter_line_batches(str(path))])


def test_every_pattern_runs_in_re2() -> None:
    import pyarrow.compute as pc

    for name in dir(D):
        value = getattr(D, name)
        if name.isupper() and isinstance(value, str) and ("^" in value or "$" in value or "\\" in value):
            pc.match_substring_regex(pa.array(["x"]), D.re2(value))
            if "(" in value:
                pc.extract_regex(pa.array(["x"]), D.re2(value, named=True))


def test_kinds_of_known_lines() -> None:
    lines = pa.array([line for line, _ in KNOWN_LINES])
    assert M._kinds(lines).tolist() == [KINDS[k] for _, k in KNOWN_LINES]


def test_java_dot_dollar_and_space() -> None:
    """Java's ``.`` stops at \\r, U+0085, U+2028, U+2029 and ``$`` matches before one of them at the end."""
    got = S.groups(pa.array(["Dumping /a/t-0/0.log\r", "Dumping /a/t\u2028-0/0.log", "Dumping x"]), D.DUMPING_LINE)
    assert got[0].to_pylist() == ["/a/t-0/0.log", "", "x"]  # Spark: the same
    assert S.match(pa.array(["Log starting offset: 5\x0b", "Log starting offset: 5\r"]), D.START_OFFSET_LINE).all()
    # Python's re (the tests' reference elsewhere) reads the plain patterns the same way on plain lines
    for line, _ in KNOWN_LINES:
        assert bool(re.match(D.IGNORED_LINES, line)) == bool(S.match(pa.array([line]), D.IGNORED_LINES)[0])


@pytest.mark.parametrize(
    "text, as_int, as_long",
    [  # Spark: try_cast(text AS int), try_cast(text AS bigint)
        (" 12 ", 12, 12),
        ("+5", 5, 5),
        ("1.5", None, None),
        ("1.", None, None),
        ("-", None, None),
        ("", None, None),
        ("\t7\x0b", 7, 7),
        ("99999999999", None, 99999999999),
        ("0x1", None, None),
        ("\u0661", None, None),
        ("12a", None, None),
        ("-0", 0, 0),
        ("00012", 12, 12),
        ("2147483647", 2147483647, 2147483647),
        ("-2147483648", -2147483648, -2147483648),
        ("2147483648", None, 2147483648),
        ("-9223372036854775808", None, -9223372036854775808),
        ("9223372036854775808", None, None),
        ("000000000000000000000000009", 9, 9),
        (None, None, None),
    ],
)
def test_try_cast(text: str | None, as_int: int | None, as_long: int | None) -> None:
    values = pa.array([text], pa.string())
    assert S.try_int(values, pa.int32()).to_pylist() == [as_int]
    assert S.try_int(values, pa.int64()).to_pylist() == [as_long]


def test_from_json_as_spark() -> None:
    typ = T._VALUE_JSON
    rows = [
        '{"version":"1","data":{"producerId":5,"transactionStatus":4}}',  # a number read as text
        '{"version":1,"data":{"producerId":5,"transactionStatus":"CompleteCommit"}}',
        '{"version":"1","data":{"producerId":"5","producerEpoch":3}}',  # Spark: producerId null, the rest kept
        '{"data":{"producerEpoch":1,"producerEpoch":2}}',  # Spark: the last one
        '{"version":"2"} trailing',  # Spark: what follows the value is ignored
        "{'version':'3'}",  # Spark: single quotes allowed
        '{"data":{"transactionPartitions":[{"topic":"a","partitionIds":["1"]}]}}',  # Spark: partitionIds null
        "not json {",
    ]
    got = S.from_json(pa.array(rows), typ).to_pylist()
    data = [r and r["data"] for r in got]
    assert [r and r["version"] for r in got] == ["1", "1", "1", None, "2", "3", None, None]
    assert data[0]["transactionStatus"] == "4" and data[1]["transactionStatus"] == "CompleteCommit"
    assert (data[2]["producerId"], data[2]["producerEpoch"]) == (None, 3)
    assert data[3]["producerEpoch"] == 2
    assert data[6]["transactionPartitions"] == [{"topic": "a", "partitionIds": None}]
    # the fast path (pyarrow.json) and the line-by-line one agree where both apply
    clean = rows[:2]
    assert S.from_json(pa.array(clean), typ).to_pylist() == got[:2]


def test_json_partitions() -> None:
    parts = pa.array(
        [
            [{"topic": "a", "partitionIds": [1, 2]}, {"topic": "b", "partitionIds": []}],
            [],
            None,
            [{"topic": "a", "partitionIds": None}],  # Spark: flatten over a null array is null
            [{"topic": None, "partitionIds": [3]}],
        ],
        T._PARTITIONS_JSON,
    )
    assert T._json_partitions(parts).to_pylist() == [["a-1", "a-2"], [], None, None, [None]]


def test_parse_synthetic(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = _parse(SYNTHETIC, tmp_path).to_pylist()
    by_line = {r["line_no"]: r for r in t}
    assert [r["kind_code"] for r in t] == [0, 1, 2, 7, 2, 2, 0, 1, 2, 4, 2, 4]
    b = by_line[3]
    assert (b["base_offset"], b["last_offset"], b["record_count"], b["producer_id"], b["compression"]) == (
        100,
        101,
        2,
        7,
        4,
    )
    assert (b["broker"], b["topic"], b["partition"], b["file_offset"], b["data_section"]) == (
        "kafka-logs",
        "orders",
        3,
        100,
        True,
    )
    assert by_line[6]["timestamp_type"] == 1 and by_line[6]["crc_valid"] is False
    assert by_line[6]["damage_text"].startswith("baseOffset: 103 ")
    assert by_line[4]["reason"] == D.REASON_UNPARSED and by_line[4]["detail"] == "this line is garbage"
    r = by_line[10]
    assert (r["transactional_id"], r["state"], r["partitions"], r["previous_producer_id"]) == (
        "tx-a",
        2,
        ["orders-3", "orders-4"],
        6,
    )
    assert (r["next_producer_id"], r["client_transaction_version"], r["value_version"]) == (-1, 2, 1)
    assert by_line[12]["is_tombstone"] is True and by_line[12]["transactional_id"] == "tx-b"
    assert all(r["is_txn_state"] for r in t[6:]) and not any(r["is_txn_state"] for r in t[:6])
