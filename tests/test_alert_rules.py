"""The alerting rules the README shows (dashboards/prometheus-alerts.yml): the YAML loads as Prometheus rule groups,
every expression names metrics, labels and label values the job writes (txnlog.rules.metrics on a run's tables),
and the README prints the file as it is."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.test_metrics import AS_OF, _tables
from txnlog.broker.classify import Verdict
from txnlog.rules import metrics

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "dashboards" / "prometheus-alerts.yml"


def _written() -> dict[str, set[str]]:
    """Every family the job writes -> its labels, from tables that give every family a series."""
    row = {"group": "g", "topic": "orders", "partition": 0, "status": "BLOCKED", "holding_producer_id": 7,
           "source": "segments", "offsets_to_high_watermark": 4, "blocked_since": AS_OF}  # fmt: skip
    families = metrics.metric_families(_tables(blocked=[row], integrity=True))
    return {f.name: {label for s in f.samples for label in s.labels} for f in families}


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_the_rules_load_and_each_has_what_prometheus_needs():
    rules = _rules()
    assert [r["alert"] for r in rules] == [
        "KafkaTransactionHanging", "KafkaTransactionLate", "KafkaConsumerGroupBlocked",
        "KafkaTransactionIntegrityAnomaly", "TxnlogRunStale", "TxnlogInputStale",
    ]  # fmt: skip
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r["alert"]
        assert isinstance(r["expr"], str) and r["annotations"]["summary"], r["alert"]


def test_the_expressions_name_what_the_job_writes():
    written = _written()
    values = {"verdict": {v.value for v in Verdict}, "status": set(metrics.STATUSES)}
    for r in _rules():
        expr = r["expr"]
        names = re.findall(r"\btxnlog_\w+", expr)
        assert names, r["alert"]
        for name in names:
            assert name in written, f"{r['alert']}: {name} is not a metric the job writes"
            for label, value in re.findall(rf"{name}\{{(\w+)=~?\"([^\"]+)\"\}}", expr):
                assert label in written[name], (r["alert"], label)
                assert set(value.split("|")) <= values[label], (r["alert"], value)
            for by in re.findall(r"by \(([\w, ]+)\)", expr):
                assert {b.strip() for b in by.split(",")} <= written[name], (r["alert"], by)
    hanging, late = (r["expr"] for r in _rules()[:2])
    assert 'verdict="HANGING"' in hanging and 'verdict="LATE"' in late  # what the broker's gauge cannot tell apart


def test_the_readme_shows_the_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"<!-- alerts -->\n```yaml\n(.*?)```", readme, flags=re.S)
    assert shown == [RULES.read_text(encoding="utf-8")]
