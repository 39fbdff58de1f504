#!/usr/bin/env python
"""Capture real client-written Kafka record batches as segment files, with a manifest.

    .venv/bin/python scripts/capture_real_batches.py OUT_DIR [--bootstrap HOST:PORT] [--topic T] [--partitions N]

Starts noida-db (from the installed noida-db wheel) on 127.0.0.1 in a temporary directory, unless
--bootstrap names a running Kafka-protocol server. Producers (librdkafka via confluent-kafka with
every codec, kafka-python with the codecs it can write here, idempotent and plain producers, an
epoch bump and one transaction left open) write to a new topic; each partition is then read with a
raw Fetch v4 (read_uncommitted) and written unchanged as

    OUT_DIR/<topic>-<p>/00000000000000000000.log
    OUT_DIR/manifest.json      what was produced (client, codec, committed/aborted/open transactions,
                               expected and observed batch/record/marker counts per partition)

Inspect with Kafka's tool, e.g.
    kafka-dump-log.sh --files OUT_DIR/<topic>-0/00000000000000000000.log --deep-iteration --print-data-log

The bytes are not committed to the repository; tests/live/test_real_client_batches.py captures at run time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live.capture import run_capture  # noqa: E402
from tests.live.noida import NoidaServer, NoidaStartError, NoidaUnavailable  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="directory for <topic>-<p>/00000000000000000000.log and manifest.json")
    ap.add_argument("--bootstrap", help="use this running server instead of starting noida-db")
    ap.add_argument("--topic", default="txnlog-real-batches", help="topic to create (must not exist yet)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions (at least 3)")
    args = ap.parse_args(argv)

    if args.partitions < 3:
        ap.error("--partitions must be at least 3")
    existing = [args.out / f"{args.topic}-{p}" for p in range(args.partitions)]
    if any(d.exists() for d in existing):
        ap.error(f"{args.out} already holds segments for topic {args.topic}; pick another directory or --topic")
    args.out.mkdir(parents=True, exist_ok=True)

    if args.bootstrap:
        cap = run_capture(
            args.bootstrap,
            args.out,
            topic=args.topic,
            partitions=args.partitions,
            server=f"Kafka-protocol server at {args.bootstrap}",
        )
    else:
        with tempfile.TemporaryDirectory(prefix="noida-capture-") as work:
            server = NoidaServer(work)
            try:
                server.start()
            except (NoidaUnavailable, NoidaStartError) as exc:
                print(f"cannot start noida-db: {exc}", file=sys.stderr)
                return 2
            try:
                cap = run_capture(
                    server.bootstrap,
                    args.out,
                    topic=args.topic,
                    partitions=args.partitions,
                    server="noida-db 0.2.3 (started by this script)",
                )
            except BaseException:
                print(f"capture failed; noida-db log:\n{server.log_text()}", file=sys.stderr)
                raise
            finally:
                server.stop()

    for seg in cap.manifest["segments"]:
        print(
            f"{args.out / seg['path']}: {seg['bytes']} bytes, offsets 0..{seg['high_watermark'] - 1}, "
            f"last stable offset {seg['last_stable_offset']}"
        )
    for p in cap.manifest["producers"]:
        print(
            f"  {p['name']:<20} {p['client']:<16} codec={p['codec']:<6} {p['mode']:<13} "
            f"committed={p['committed_transactions']} aborted={p['aborted_transactions']} open={p['open_transactions']} "
            f"producer_id={p['observed']['producer_ids']} epoch={p['observed']['producer_epochs']}"
        )
    print(f"manifest: {cap.manifest_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
