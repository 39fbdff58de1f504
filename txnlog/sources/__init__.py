"""Inputs found and read: storage (local paths or pyarrow.fs URIs), Kafka log dirs, split segments,
kafka-dump-log.sh text, the embedded sample. Knows neither the rules nor an engine."""
