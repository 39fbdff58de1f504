"""The broker's semantics as functions over arrays (no files, no engine): transactions rebuilt from batch
headers (Kafka's ProducerAppendInfo), producer state (ProducerStateManager), the run's "now", and the verdicts."""
