"""txnlog.model.config: layers, validation messages, as_of parsing."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from txnlog.model.config import DEFAULT_FILE, Config, load_config, parse_as_of
from txnlog.model.errors import ConfigError, UsageError

UTC = UTC
REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "env.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults():
    cfg = load_config(None, {})
    assert cfg == Config(
        cluster=None,
        logs=[],
        dump_log=[],
        bootstrap_servers=None,
        output="./out",
        as_of=None,
        max_transaction_timeout_ms=900_000,
        transaction_state_partitions=50,
        check_crc=True,
        delta_writer="auto",
        topics=[],
        verify_live=False,
        spark={},
        kafka={},
        progress=True,
    )
    assert cfg.as_of_datetime is None


def test_default_yaml_sets_and_documents_every_key():
    text = DEFAULT_FILE.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    fields = [f.name for f in dataclasses.fields(Config)]
    assert list(data) == fields
    # ...with the same values as the dataclass, so an install without conf/ behaves the same
    assert Config(**dict(data.items())) == Config()
    # ...and a comment right above each key
    lines = text.splitlines()
    for key in fields:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        assert lines[at - 1].startswith("#"), f"{key} has no comment"


def test_override_file_replaces_values_and_merges_mappings(tmp_path):
    path = write(
        tmp_path,
        "cluster: prod-eu-1\n"
        "logs: [/data/broker-1, /data/broker-2]\n"
        "max_transaction_timeout_ms: 60000\n"
        "check_crc: false\n"
        "delta_writer: deltalake\n"
        "spark:\n  spark.sql.shuffle.partitions: 64\n  spark.sql.adaptive.enabled: true\n"
        "kafka:\n  security.protocol: SASL_SSL\n",
    )
    cfg = load_config(str(path), {})
    assert cfg.cluster == "prod-eu-1"
    assert cfg.logs == ["/data/broker-1", "/data/broker-2"]
    assert cfg.max_transaction_timeout_ms == 60000
    assert cfg.check_crc is False
    assert cfg.delta_writer == "deltalake"
    assert cfg.spark == {"spark.sql.shuffle.partitions": "64", "spark.sql.adaptive.enabled": "true"}
    assert cfg.kafka == {"security.protocol": "SASL_SSL"}
    assert cfg.output == "./out"  # untouched keys keep the default


def test_command_line_wins_over_file_and_none_means_not_given(tmp_path):
    path = write(tmp_path, "cluster: from-file\noutput: /file/out\nbootstrap_servers: file:9092\n")
    cfg = load_config(
        path,
        {"cluster": "from-flag", "output": None, "max-transaction-timeout-ms": 5000, "as_of": "1793577600000"},
    )
    assert cfg.cluster == "from-flag"
    assert cfg.output == "/file/out"
    assert cfg.bootstrap_servers == "file:9092"
    assert cfg.max_transaction_timeout_ms == 5000
    assert cfg.as_of_datetime == datetime(2026, 11, 2, tzinfo=UTC)


def test_unknown_key_names_key_file_and_valid_keys(tmp_path):
    path = write(tmp_path, "cluster: x\nbootstrap_server: kafka:9092\n")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message
    assert "unknown key 'bootstrap_server'" in message
    assert "did you mean 'bootstrap_servers'" in message
    assert "valid keys: cluster, logs, dump_log, bootstrap_servers" in message


def test_unknown_command_line_key():
    with pytest.raises(ConfigError, match="command line: unknown key 'clusters'"):
        load_config(None, {"clusters": "x"})


def test_config_error_is_a_usage_error_with_exit_code_2():
    assert issubclass(ConfigError, UsageError)
    assert ConfigError("x").exit_code == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "max_transaction_timeout_ms: fifteen minutes\n",
            "max_transaction_timeout_ms: expected an integer, got str 'fifteen minutes'",
        ),
        ("check_crc: maybe\n", "check_crc: expected true or false"),
        ("logs: {a: 1}\n", "logs: expected a list of strings"),
        ("transaction_state_partitions: 0\n", "transaction_state_partitions: must be at least 1"),
        ("delta_writer: delta\n", "delta_writer: expected one of auto, deltalake, spark"),
        ("spark: [a]\n", "spark: expected a mapping of Spark settings"),
        ("as_of: yesterday\n", "as_of: cannot parse 'yesterday'"),
        ("- cluster: x\n", "expected 'key: value' lines at the top level, got a YAML list"),
    ],
    ids=["int", "bool", "list", "minimum", "choice", "mapping", "as_of", "top-level"],
)
def test_wrong_type_names_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})
    assert str(caught.value).startswith(f"{path}: ")
    assert expected in str(caught.value)


def test_bad_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "cluster: prod\nlogs: [/a, /b\noutput: /x\n")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:")
    assert "not valid YAML" in message and "fix the syntax" in message


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"nope\.yaml: config file not found; give --config an existing YAML file"):
        load_config(str(missing), {})


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path), {})


def test_empty_file_changes_nothing(tmp_path):
    assert load_config(write(tmp_path, "# nothing yet\n"), {}) == Config()


def test_environment_variables_fill_secrets(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        "kafka:\n  sasl.username: ${TXNLOG_TEST_USER}\n  sasl.password: ${TXNLOG_TEST_PASSWORD}\n"
        "  ssl.ca.location: ${TXNLOG_TEST_CA:-/etc/ca.pem}\n",
    )
    monkeypatch.setenv("TXNLOG_TEST_USER", "txnlog")
    monkeypatch.setenv("TXNLOG_TEST_PASSWORD", "s3cret")
    monkeypatch.delenv("TXNLOG_TEST_CA", raising=False)
    cfg = load_config(path, {})
    assert cfg.kafka == {"sasl.username": "txnlog", "sasl.password": "s3cret", "ssl.ca.location": "/etc/ca.pem"}
    # ...and never shown again
    assert cfg.to_dict()["kafka"]["sasl.password"] == "***"
    assert "s3cret" not in repr(cfg)

    monkeypatch.delenv("TXNLOG_TEST_PASSWORD")
    with pytest.raises(ConfigError, match="kafka.sasl.password: environment variable TXNLOG_TEST_PASSWORD is not set"):
        load_config(path, {})


def test_storage_settings_are_checked_and_their_secrets_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("TXNLOG_TEST_S3_SECRET", "s3-planted-secret")
    path = write(
        tmp_path,
        "storage:\n  s3.endpoint: http://127.0.0.1:9000\n  s3.region: eu-west-1\n  s3.access_key: AKIA-TEST\n"
        "  s3.secret_key: ${TXNLOG_TEST_S3_SECRET}\n  s3.anonymous: false\n",
    )
    cfg = load_config(path, {})
    assert cfg.storage == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
        "s3.access_key": "AKIA-TEST",
        "s3.secret_key": "s3-planted-secret",
        "s3.anonymous": "false",
    }
    shown = cfg.to_dict()["storage"]
    assert shown["s3.secret_key"] == "***" and shown["s3.access_key"] == "***"
    assert shown["s3.endpoint"] == "http://127.0.0.1:9000"
    assert "s3-planted-secret" not in repr(cfg) and "AKIA-TEST" not in repr(cfg)
    with pytest.raises(ConfigError, match="storage: unknown setting 's3.endpoint_url'; valid settings: s3.endpoint"):
        load_config(write(tmp_path, "storage:\n  s3.endpoint_url: http://x\n", "bad.yaml"), {})


def test_prod_example_loads(monkeypatch):
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "txnlog")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "x")
    cfg = load_config(REPO / "conf" / "prod.example.yaml", {})
    assert cfg.cluster == "prod-eu-1"
    assert cfg.kafka["security.protocol"] == "SASL_SSL"
    assert cfg.spark == {"spark.sql.shuffle.partitions": "64"}


# --- as_of -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-02T00:00:00Z", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02T02:30:00+02:30", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-01T19:00:00-05:00", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02T00:00:00", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02T00:00:00.123456Z", datetime(2026, 11, 2, 0, 0, 0, 123000, tzinfo=UTC)),
        ("1793577600000", datetime(2026, 11, 2, tzinfo=UTC)),
        (1793577600123, datetime(2026, 11, 2, 0, 0, 0, 123000, tzinfo=UTC)),
        ("0", datetime(1970, 1, 1, tzinfo=UTC)),
    ],
    ids=[
        "Z",
        "offset+",
        "offset-",
        "naive-is-utc",
        "date",
        "micros-truncated",
        "epoch-ms-str",
        "epoch-ms-int",
        "epoch",
    ],
)
def test_parse_as_of(value, expected):
    parsed = parse_as_of(value)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "", "1.5e12", True])
def test_parse_as_of_rejects(value):
    with pytest.raises(ConfigError, match="as_of: cannot parse .*; give ISO-8601 .* or epoch milliseconds"):
        parse_as_of(value)


def test_as_of_from_yaml_timestamp_and_int(tmp_path):
    # YAML turns an unquoted timestamp into a datetime, and epoch ms into an int.
    assert load_config(write(tmp_path, "as_of: 2026-11-02T01:00:00+01:00\n"), {}).as_of_datetime == datetime(
        2026, 11, 2, tzinfo=UTC
    )
    cfg = load_config(write(tmp_path, "as_of: 1793577600000\n", "b.yaml"), {})
    assert cfg.as_of == "1793577600000"
    assert cfg.as_of_datetime == datetime(2026, 11, 2, tzinfo=UTC)
