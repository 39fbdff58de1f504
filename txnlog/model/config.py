"""Configuration: YAML files in conf/ → one frozen :class:`Config`.

Layers, later wins: ``conf/default.yaml`` (always), then the file given with
``--config`` (an environment override such as ``conf/prod.yaml``), then
command-line flags. Mappings (``spark``, ``kafka``) merge key by key; every
other value replaces the one below it.

Any string value in a file may name an environment variable as ``${NAME}`` or
``${NAME:-fallback}``, so secrets (SASL passwords, key passwords) stay out of
the files: ``sasl.password: ${KAFKA_SASL_PASSWORD}``.

Mistakes stop the run with a one-line :class:`~txnlog.model.errors.ConfigError`
that names the file and the key, and says what to do.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import yaml

from txnlog.model.errors import ConfigError

__all__ = ["Config", "ConfigError", "DEFAULT_FILE", "DeltaWriter", "load_config", "parse_as_of"]

#: Always loaded first; its keys and values mirror the defaults of :class:`Config`.
DEFAULT_FILE = Path(__file__).resolve().parents[2] / "conf" / "default.yaml"

DeltaWriter = Literal["auto", "deltalake", "spark"]
DELTA_WRITERS: tuple[str, ...] = ("auto", "deltalake", "spark")

# Values of these settings are replaced by "***" in Config.to_dict() (the copy
# of the configuration that goes into the runs table and into logs).
_SECRET_WORDS = (
    "password", "secret", "token", "jaas", "credential", "private", "ssl.key.pem", "access.key", "access_key",
)  # fmt: skip


@dataclass(frozen=True, repr=False)
class Config:
    """The effective configuration of one run (see conf/default.yaml for each key).

    >>> cfg = load_config(None, {"cluster": "prod-eu", "as_of": "2026-11-02T00:00:00Z"})
    >>> cfg.cluster, cfg.as_of_datetime.isoformat()
    ('prod-eu', '2026-11-02T00:00:00+00:00')
    """

    #: None: named after the input when the run starts (txnlog.pipeline.cluster_name)
    cluster: str | None = None
    logs: list[str] = field(default_factory=list)
    dump_log: list[str] = field(default_factory=list)
    bootstrap_servers: str | None = None
    output: str = "./out"
    as_of: str | None = None
    max_transaction_timeout_ms: int = 900_000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    transaction_state_partitions: int = 50
    check_crc: bool = True
    max_decompressed_bytes: int = 64 * 2**20
    #: segments above it are read by several tasks, cut at their offset index (txnlog.sources.splits); 0: never
    split_segment_bytes: int = 128 * 2**20
    delta_writer: DeltaWriter = "auto"
    topics: list[str] = field(default_factory=list)
    verify_live: bool = False
    spark: dict[str, str] = field(default_factory=dict)
    kafka: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    #: inputs up to it run in the driver process (txnlog.engine.spark.placement); "auto": where the two placements
    #: cross for the cores Spark would have; 0: always Spark
    driver_max_bytes: int | Literal["auto"] = "auto"
    live_range: str = "unstable"
    live_lookback_bytes: int = 2**20
    live_fetch_max_bytes: int = 52_428_800
    live_fetch_partition_max_bytes: int = 1_048_576
    write_lock_wait_s: int = 900
    #: seconds ``txnlog abort`` and ``txnlog fence`` wait to first reach the cluster (conf/default.yaml)
    admin_connect_timeout_s: int = 30
    retain_runs: int = 0
    retain_days: int = 0
    #: shared storage of the inputs (txnlog.sources.storage): s3.endpoint, s3.region, s3.access_key, ...
    storage: dict[str, str] = field(default_factory=dict)
    #: the run's metrics: a node_exporter textfile collector file (``*.prom``) and a Pushgateway URL; None: none
    metrics_file: str | None = None
    pushgateway: str | None = None

    @property
    def as_of_datetime(self) -> datetime | None:
        """``as_of`` as an aware UTC datetime (None: take it from the inputs)."""
        return None if self.as_of is None else parse_as_of(self.as_of)

    def __repr__(self) -> str:  # never print a password into a log
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"Config({fields})"

    def to_dict(self, *, redact_secrets: bool = True) -> dict[str, Any]:
        """A JSON-ready copy; secret-looking ``kafka``/``spark``/``storage`` values become ``"***"``."""
        out = dataclasses.asdict(self)
        if redact_secrets:
            for key in ("kafka", "spark", "storage"):
                out[key] = {k: ("***" if _is_secret(k) else v) for k, v in out[key].items()}
        return out


def parse_as_of(value: str | int | datetime) -> datetime:
    """Parse an as_of: ISO-8601 or epoch milliseconds → aware UTC datetime.

    A time without an offset is taken as UTC. The result is truncated to
    milliseconds, Kafka's timestamp resolution, so the same instant written
    either way is the same run key.

    >>> parse_as_of("2026-11-02T01:00:00+01:00")
    datetime.datetime(2026, 11, 2, 0, 0, tzinfo=datetime.timezone.utc)
    >>> parse_as_of("1793577600000") == parse_as_of("2026-11-02T00:00:00Z")
    True
    """
    parsed = _parse_as_of(value)
    if parsed is None:
        raise ConfigError(
            f"as_of: cannot parse {value!r}; give ISO-8601 (2026-11-02T00:00:00Z) or epoch milliseconds (1793577600000)"
        )
    return parsed


def load_config(path: str | os.PathLike[str] | None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Load conf/default.yaml, then ``path`` (if given), then ``overrides``.

    ``overrides`` are command-line values by key (``-`` or ``_`` both work);
    a value of None means "flag not given" and is skipped.

    >>> load_config("conf/default.yaml", {"output": "/tmp/out"}).output
    '/tmp/out'
    """
    values: dict[str, Any] = {}
    if DEFAULT_FILE.is_file():
        _merge(values, _load_file(DEFAULT_FILE))
    if path is not None:
        _merge(values, _load_file(Path(path)))
    if overrides:
        given = {str(k).replace("-", "_"): v for k, v in overrides.items() if v is not None}
        _merge(values, _validate(given, source="command line", expand_env=False))
    return Config(**values)


# --- internals -------------------------------------------------------------------------------


def _load_file(path: Path) -> dict[str, Any]:
    source = str(path)
    fix = "give --config an existing YAML file (see conf/prod.example.yaml)"
    if not path.exists():
        raise ConfigError(f"{source}: config file not found; {fix}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise ConfigError(f"{source}: cannot read config file ({why}); {fix}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(
            f"{where}: not valid YAML ({problem}); "
            "fix the syntax (indent with spaces, quote values that contain ': ' or '#')"
        ) from e
    if data is None:  # an empty file (or only comments) changes nothing
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected 'key: value' lines at the top level, got a YAML {type(data).__name__}")
    return _validate(data, source=source, expand_env=True)


def _validate(data: Mapping[Any, Any], *, source: str, expand_env: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in data.items():
        if key not in _KEYS:
            hint = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ConfigError(f"{source}: unknown key '{key}'{did_you_mean}; valid keys: {', '.join(_KEYS)}")
        value = _expand_env(raw, source=source, key=key) if expand_env else raw
        out[key] = _KEYS[key](value, f"{source}: {key}")
    return out


def _merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            into[key] = {**into[key], **value}
        else:
            into[key] = value


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(value: Any, *, source: str, key: str) -> Any:
    if isinstance(value, str):

        def replace(m: re.Match[str]) -> str:
            name, fallback = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if fallback is not None:
                return fallback
            raise ConfigError(
                f"{source}: {key}: environment variable {name} is not set; export it, or write ${{{name}:-fallback}}"
            )

        return _ENV_REF.sub(replace, value)
    if isinstance(value, list):
        return [_expand_env(v, source=source, key=key) for v in value]
    if isinstance(value, dict):
        return {k: _expand_env(v, source=source, key=f"{key}.{k}") for k, v in value.items()}
    return value


def _wrong(where: str, want: str, value: Any) -> ConfigError:
    return ConfigError(f"{where}: expected {want}, got {type(value).__name__} {value!r}")


def _str(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _wrong(where, "a non-empty string", value)
    return value


def _as_str(value: Any, where: str) -> str:
    return _str(where, value)


def _as_optional_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(where, value)


def _as_str_list(value: Any, where: str) -> list[str]:
    if value is None:  # `topics:` with nothing after it
        return []
    if isinstance(value, str):  # `logs: /data/broker-1` means a list of one
        value = [value]
    if not isinstance(value, list):
        raise _wrong(where, "a list of strings", value)
    return [_str(f"{where}[{i}]", v) for i, v in enumerate(value)]


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d[\d_]*\s*", value):
        value = int(value.replace("_", ""))
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(where, "an integer", value)
    if value < minimum:
        raise ConfigError(f"{where}: must be at least {minimum}, got {value}")
    return value


def _as_auto_or_bytes(value: Any, where: str) -> int | Literal["auto"]:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and not re.fullmatch(r"\s*-?\d[\d_]*\s*", value):
        raise _wrong(where, "a number of bytes or auto", value)
    return _int(value, where, minimum=0)


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise _wrong(where, "true or false", value)
    return value


#: keys of the config's ``storage`` mapping (read by txnlog.sources.storage)
SETTING_KEYS = ("s3.endpoint", "s3.region", "s3.access_key", "s3.secret_key", "s3.session_token", "s3.anonymous")
#: which offsets of each data partition a live run reads (txnlog.engine.spark.live_batches)
LIVE_RANGES = ("unstable", "since-last-run", "all")


def _as_choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    text = _as_str(value, where)
    if text not in choices:
        raise _wrong(where, " or ".join(repr(c) for c in choices), value)
    return text


def _as_delta_writer(value: Any, where: str) -> str:
    if value not in DELTA_WRITERS:
        raise ConfigError(f"{where}: expected one of {', '.join(DELTA_WRITERS)}, got {value!r}")
    return str(value)


def _as_as_of(value: Any, where: str) -> str | None:
    if value is None:
        return None
    # YAML reads an unquoted 2026-11-02T00:00:00Z as a datetime and 2026-11-02 as a date.
    if isinstance(value, datetime):
        value = value.isoformat()
    elif isinstance(value, date):
        value = datetime(value.year, value.month, value.day).isoformat()
    elif isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or _parse_as_of(value) is None:
        raise ConfigError(
            f"{where}: cannot parse {value!r}; "
            "give ISO-8601 (2026-11-02T00:00:00Z) or epoch milliseconds (1793577600000)"
        )
    return value.strip()


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _as_spark_conf(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and _scalar(v) for k, v in value.items()):
        raise _wrong(where, "a mapping of Spark settings (spark.x.y: value)", value)
    # Spark settings are strings; YAML's true/16 become "true"/"16".
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()}


def _as_kafka_conf(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and _scalar(v) for k, v in value.items()):
        raise _wrong(where, "a mapping of Kafka client settings (security.protocol: SASL_SSL, ...)", value)
    return dict(value)


def _as_storage_conf(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and _scalar(v) for k, v in value.items()):
        raise _wrong(where, "a mapping of storage settings (s3.endpoint: http://host:9000, ...)", value)
    unknown = [k for k in value if k not in SETTING_KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown setting '{unknown[0]}'; valid settings: {', '.join(SETTING_KEYS)}")
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items() if v is not None}


def _parse_as_of(value: Any) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, int):
        return _datetime_of_ms(value)
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+", text):
            return _datetime_of_ms(int(text))
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    parsed = parsed.astimezone(UTC)
    return parsed.replace(microsecond=parsed.microsecond // 1000 * 1000)


def _datetime_of_ms(ms: int) -> datetime | None:
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    except OverflowError:
        return None


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "cluster": _as_optional_str,
    "logs": _as_str_list,
    "dump_log": _as_str_list,
    "bootstrap_servers": _as_optional_str,
    "output": _as_str,
    "as_of": _as_as_of,
    "max_transaction_timeout_ms": lambda v, w: _int(v, w, minimum=0),
    "producer_id_expiration_ms": lambda v, w: _int(v, w, minimum=0),
    "producer_id_expiration_check_interval_ms": lambda v, w: _int(v, w, minimum=1),
    "transaction_state_partitions": lambda v, w: _int(v, w, minimum=1),
    "check_crc": _as_bool,
    "max_decompressed_bytes": lambda v, w: _int(v, w, minimum=1),
    "split_segment_bytes": lambda v, w: _int(v, w, minimum=0),
    "delta_writer": _as_delta_writer,
    "topics": _as_str_list,
    "verify_live": _as_bool,
    "spark": _as_spark_conf,
    "kafka": _as_kafka_conf,
    "progress": _as_bool,
    "driver_max_bytes": lambda v, w: _as_auto_or_bytes(v, w),
    "live_range": lambda v, w: _as_choice(v, w, LIVE_RANGES),
    "live_lookback_bytes": lambda v, w: _int(v, w, minimum=0),
    "live_fetch_max_bytes": lambda v, w: _int(v, w, minimum=1024),
    "live_fetch_partition_max_bytes": lambda v, w: _int(v, w, minimum=1024),
    "write_lock_wait_s": lambda v, w: _int(v, w, minimum=0),
    "admin_connect_timeout_s": lambda v, w: _int(v, w, minimum=1),
    "retain_runs": lambda v, w: _int(v, w, minimum=0),
    "retain_days": lambda v, w: _int(v, w, minimum=0),
    "storage": _as_storage_conf,
    "metrics_file": _as_optional_str,
    "pushgateway": _as_optional_str,
}
assert list(_KEYS) == [f.name for f in dataclasses.fields(Config)], "every Config field needs a validator"
