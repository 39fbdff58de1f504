"""Nightly job: find late and hanging Kafka transactions, write Delta tables.

Run it through ``./spark-submit.sh`` (which starts Spark and passes Spark's own
options to spark-submit); ``python jobs/find_hanging.py --help`` explains the
job options. Thin entry point: arguments → config → pipeline → exit code.
"""

from __future__ import annotations

import argparse
import gc
import sys

EPILOG = """\
examples:
  ./spark-submit.sh                                   # the embedded sample cluster -> ./out/
  ./spark-submit.sh --logs /backup/kafka-logs --cluster prod-eu --as-of 2026-11-21T03:00:00Z
  ./spark-submit.sh --master spark://host:7077 --executor-memory 4g --logs /mnt/brokers --output /data/txnlog
  ./spark-submit.sh --config conf/prod.example.yaml --bootstrap-servers kafka-1:9092
  ./spark-submit.sh --dump-log orders-7.txt --dump-log txn-state.txt --cluster ticket-4711
  ./spark-submit.sh --dump-log broker-1=b1/orders-7.txt --dump-log broker-2=b2/orders-7.txt
  ./spark-submit.sh --logs /backup/kafka-logs --bootstrap-servers kafka-1:9092 --verify-live
  ./spark-submit.sh --bootstrap-servers kafka-1:9092 --topic orders --topic payments
  ./spark-submit.sh --logs /backup/kafka-logs --metrics-file /var/lib/node_exporter/textfile/txnlog.prom

Every table gets one run per (cluster, as_of): re-running replaces that run's rows.
Exit codes: 0 done (findings or not), 2 bad input or configuration (one line says what to fix).
"""


#: ``--here-if-small``'s answer for an input that is not small: spark-submit.sh then starts Spark
NEEDS_SPARK = 10


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="./spark-submit.sh",
        description=(
            "Read Kafka broker logs (data partitions, __transaction_state, producer snapshots), rebuild every "
            "transaction, and write Delta tables of late and hanging transactions with reasons, evidence and "
            "exact abort commands. With no input, analyse the embedded sample cluster."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="YAML", help="environment config layered over conf/default.yaml")
    p.add_argument(
        "--logs",
        metavar="DIR",
        action="append",
        help="a broker log dir (holding <topic>-<n>/ dirs) or a dir of broker log dirs; repeatable",
    )
    p.add_argument(
        "--dump-log",
        metavar="[BROKER=]FILE|DIR",
        action="append",
        help="kafka-dump-log.sh output (data segments, __transaction_state with --transaction-log-decoder, "
        ".snapshot files; Kafka 2.x-4.x); repeatable. One dir per broker (dumps/broker-1/) or "
        "BROKER=PATH names the replica a dump holds when brokers print the same paths",
    )
    p.add_argument(
        "--bootstrap-servers",
        metavar="LIST",
        help="used in the abort commands; with no --logs/--dump-log, __transaction_state is read live "
        "from this cluster (client settings: 'kafka' in the config)",
    )
    p.add_argument("--output", metavar="DIR", help="where the Delta tables go (default ./out)")
    p.add_argument(
        "--as-of",
        metavar="TIME",
        help="'now' for every age: ISO-8601 (2026-11-21T03:00:00Z) or epoch ms; default: newest timestamp in the input",
    )
    p.add_argument(
        "--max-transaction-timeout-ms",
        type=int,
        metavar="MS",
        help="the cluster's transaction.max.timeout.ms (default 900000)",
    )
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="cluster name written in every row (default: named after the input, the same name for the same "
        "input: 'sample', 'live-<bootstrap servers>', or '<first input>-<8 hex digits>')",
    )
    p.add_argument(
        "--transaction-state-partitions",
        type=int,
        metavar="N",
        help="transaction.state.log.num.partitions (default 50)",
    )
    p.add_argument("--no-crc", action="store_true", help="skip CRC-32C checks (faster; damage found by structure only)")
    p.add_argument(
        "--verify-live",
        action="store_true",
        help="also ask the live cluster (--bootstrap-servers) about the findings' partitions and the config's "
        "topics: LSO and its lag, find-hanging, coordinator state; added as rows with source=live",
    )
    p.add_argument(
        "--topic",
        metavar="TOPIC",
        action="append",
        help="also check every partition of TOPIC on the live cluster (--bootstrap-servers; implies "
        "--verify-live): LSO and its lag, find-hanging, coordinator state; repeatable "
        "(config key 'topics')",
    )
    p.add_argument("--delta-writer", choices=["auto", "deltalake", "spark"], help="Delta writer (default auto)")
    p.add_argument(
        "--driver-max-bytes",
        metavar="BYTES|auto",
        help="inputs up to this size are read, built and written in the driver process with pyarrow and "
        "deltalake; with no Spark option given, ./spark-submit.sh then starts no JVM at all. auto (the default): "
        "where that and Spark are measured to take the same time for the cores Spark would use (this machine's, "
        "or the cluster's under spark-submit), so no input takes much longer than one a byte smaller; on a few "
        "cores that is many GiB. 0 = always with Spark",
    )
    p.add_argument(
        "--split-segment-bytes",
        type=int,
        metavar="BYTES",
        help="local segments larger than this, of a partition holding more than an even share of the input "
        "over the cores, are read by several tasks, cut at their offset index, and stitched back exactly "
        "(default 134217728 = 128 MiB; 0 = never split)",
    )
    p.add_argument(
        "--live-range",
        choices=["unstable", "since-last-run", "all"],
        help="with --bootstrap-servers and no offline input, which offsets of each data partition to read: "
        "'unstable' (default) from the last stable offset to the high watermark plus --live-lookback-bytes "
        "before it (every open transaction, a tiny part of the log); 'since-last-run' what is new since the "
        "previous run of the same --cluster in --output (a nightly job: the history keeps every transaction "
        "once; the first run reads as 'unstable'); 'all' the retained log",
    )
    p.add_argument(
        "--live-lookback-bytes",
        type=int,
        metavar="BYTES",
        help="bytes read before each unstable partition's LSO, so the open transaction's producer's previous "
        "marker is seen (default 1048576; 0 = none)",
    )
    p.add_argument(
        "--metrics-file",
        metavar="FILE.prom",
        help="also write the run's metrics (findings by verdict and reason, LSO lag, blocked consumer groups, "
        "integrity anomalies, the run's as_of and duration) to this file for node_exporter's textfile collector, "
        "atomically (config key 'metrics_file')",
    )
    p.add_argument(
        "--pushgateway",
        metavar="URL",
        help="also push the run's metrics to this Prometheus Pushgateway (http://host:9091), grouped by "
        "job=txnlog and cluster (config key 'pushgateway')",
    )
    # spark-submit.sh checks the input before it starts a JVM, so that a typo fails in a second
    p.add_argument("--validate-only", action="store_true", help=argparse.SUPPRESS)
    # ... and runs a small input's job right there, starting no JVM at all (exit NEEDS_SPARK: a large one)
    p.add_argument("--here-if-small", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from txnlog.model.config import load_config
    from txnlog.model.errors import UsageError

    overrides = {
        "logs": args.logs,
        "dump_log": args.dump_log,
        "bootstrap_servers": args.bootstrap_servers,
        "output": args.output,
        "as_of": args.as_of,
        "max_transaction_timeout_ms": args.max_transaction_timeout_ms,
        "cluster": args.cluster,
        "transaction_state_partitions": args.transaction_state_partitions,
        "check_crc": False if args.no_crc else None,
        "delta_writer": args.delta_writer,
        "verify_live": True if (args.verify_live or args.topic) else None,
        "topics": args.topic,
        "driver_max_bytes": args.driver_max_bytes,
        "split_segment_bytes": args.split_segment_bytes,
        "live_range": args.live_range,
        "live_lookback_bytes": args.live_lookback_bytes,
        "metrics_file": args.metrics_file,
        "pushgateway": args.pushgateway,
    }
    try:
        config = load_config(args.config, overrides)
        from txnlog.pipeline import plan_inputs, run

        if args.validate_only or args.here_if_small:  # every check that needs no Spark, before a JVM starts
            inputs = plan_inputs(config, sample=False)
            if args.validate_only:
                return 0
            if not inputs.without_spark:
                return NEEDS_SPARK
            result = run(config, planned=inputs)  # a small input: no Spark session, no JVM
        else:  # under spark-submit, with the user's Spark options: the session they configure, whatever the input
            result = run(config, without_spark=False)
    except UsageError as e:
        print(f"txnlog: error: {e}", file=sys.stderr)
        return e.exit_code
    print(result.summary_text())
    return 0


if __name__ == "__main__":
    code = main()
    # Everything the run left alive out of the interpreter's exit: its final collections would walk it all, on the
    # run's wall time after the tables are written (benchmarks/RESULTS.md §2).
    gc.freeze()
    sys.exit(code)
