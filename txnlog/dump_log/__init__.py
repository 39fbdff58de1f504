"""kafka-dump-log.sh output read without Spark: the lines (lines.py), their parse (parse.py) and one dumped
segment's rows assembled (assemble.py). txnlog.spark.dump_log runs them in Spark's tasks,
txnlog.spark.dump_log_arrow in this process."""
