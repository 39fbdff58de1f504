"""The broker-log writer's KRaft metadata log reads in Kafka's own decoder (``kafka-dump-log.sh
--cluster-metadata-decoder``, ``DumpLogSegments.ClusterMetadataLogMessageParser``) record for record: every record
a known type at the version txnlog reads, none that Kafka fails to deserialize."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from txnlog.brokerlog.scenarios import write_scenario
from txnlog.kafka.cluster_metadata import scan_metadata_log

_PAYLOAD = re.compile(r"^\| offset: (\d+) .*? payload: (.*)$")


@pytest.mark.parametrize("name", ["healthy", "replicas_disagree", "tv2_rollover"])
def test_the_writers_metadata_log_decodes_in_kafka(oracle, tmp_path: Path, name: str) -> None:
    write_scenario(name, tmp_path, seed=1)
    logs = sorted(tmp_path.glob("*/__cluster_metadata-0/*.log"))
    assert logs, "the writer wrote a metadata log per broker"
    for path in logs:
        out = oracle.dump(path, options=("--cluster-metadata-decoder",))
        payloads = [(int(m.group(1)), m.group(2)) for m in map(_PAYLOAD.match, out.splitlines()) if m]
        assert payloads and not [p for _, p in payloads if p.startswith("Error at")], out
        kafka = [(offset, json.loads(p)) for offset, p in payloads]
        scan = scan_metadata_log(path.read_bytes(), file=str(path))
        assert scan.quarantine == [], path
        ours = [(r["offset"], r["record_type"], r["version"]) for r in scan.records.to_pylist()]
        assert ours == [(o, k["type"], k["version"]) for o, k in kafka], path
        features = {
            k["data"]["name"]: k["data"]["featureLevel"] for _, k in kafka if k["type"] == "FEATURE_LEVEL_RECORD"
        }
        assert features["metadata.version"] == 22  # Kafka 4.0-IV0
