"""kafka-dump-log.sh text turned into the sources' rows: one dumped segment assembled (assemble) and whole
dumps' rows (rows). The lines and their parse are txnlog.sources.dump_log."""
