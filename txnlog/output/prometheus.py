"""The run's metrics where Prometheus finds them: a file for node_exporter's textfile collector, and a push to a
Pushgateway. The families are txnlog.rules.metrics'; this module only writes and sends them, with the Prometheus
client library's own exposition.

* The file is written whole to a temporary name beside it and renamed over the old one (``write_to_textfile``), as
  the textfile collector asks, so a scrape never reads half a file. The collector reads ``*.prom`` files only.
* The push is a PUT of the run's registry to ``<gateway>/metrics/job/txnlog/cluster/<cluster>``: it replaces that
  cluster's previous push whole, so a partition no longer late is gone from it, and two clusters' runs do not
  overwrite each other. Scrape the Pushgateway with ``honor_labels: true`` so the ``job`` and ``cluster`` labels
  stay as pushed.
"""

from __future__ import annotations

import os
from urllib.error import URLError

from prometheus_client.exposition import push_to_gateway, write_to_textfile
from prometheus_client.registry import CollectorRegistry

__all__ = ["JOB", "PUSH_TIMEOUT_S", "publish", "push", "write_textfile"]

#: the Pushgateway's ``job`` grouping label
JOB = "txnlog"
#: seconds a push may take before it is given up
PUSH_TIMEOUT_S = 30.0


def write_textfile(target: str, registry: CollectorRegistry) -> None:
    """``registry`` in Prometheus' text format at ``target``, atomically (a temporary file in the same directory,
    renamed over it)."""
    write_to_textfile(target, registry)


def push(gateway: str, registry: CollectorRegistry, *, cluster: str, timeout_s: float = PUSH_TIMEOUT_S) -> None:
    """``registry`` PUT to the Pushgateway at ``gateway`` (``http://host:9091``), grouped by job and cluster."""
    push_to_gateway(gateway, job=JOB, registry=registry, grouping_key={"cluster": cluster}, timeout=timeout_s)


def publish(
    registry: CollectorRegistry, *, cluster: str, textfile: str | None, pushgateway: str | None
) -> tuple[list[str], list[str]]:
    """Write the file and push, each where configured: what was done, and the problems, one line each naming the
    setting and the fix (a run whose tables are written does not fail on its metrics)."""
    done: list[str] = []
    problems: list[str] = []
    if textfile:
        try:
            write_textfile(textfile, registry)
            done.append(f"written to {textfile}")
        except OSError as e:
            where = os.path.dirname(os.path.abspath(textfile))
            problems.append(
                f"metrics_file {textfile}: not written ({e.strerror or e}); give a writable path in an existing "
                f"directory ({where}), e.g. node_exporter's --collector.textfile.directory"
            )
    if pushgateway:
        try:
            push(pushgateway, registry, cluster=cluster)
            done.append(f"pushed to {pushgateway}")
        except (OSError, URLError, ValueError) as e:  # HTTPError is a URLError; a refused connection an OSError
            problems.append(
                f"pushgateway {pushgateway}: push failed ({' '.join(str(e).split())}); check the URL "
                "(http://host:9091) and that the Pushgateway is up"
            )
    return done, problems
