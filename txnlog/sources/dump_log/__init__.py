"""kafka-dump-log.sh output read without Spark: the lines (lines.py), their parse (parse.py), one dumped
segment's rows assembled (assemble.py) and the rows of whole dumps (rows.py). txnlog.engine.spark.dump_log runs them
in Spark's tasks, or in this process for a small input (read_dump_logs_here)."""
