"""Decoder tests are pure (no Spark). kafka-python is their independent reference decoder."""

from __future__ import annotations

import warnings

# kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls, at import
# time (during collection): import it once here with those warnings silenced.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.record.default_records  # noqa: F401
    import kafka.record.memory_records  # noqa: F401
