"""Where the per-partition work runs: the decode of one log file with its merge and staging (segments),
the dump-log rows, and the Spark placement (spark/: Data Sources, applyInArrow, the session)."""
