"""txnlog.sources.storage without a server: which paths are remote, URI arithmetic, local parity with ``os``,
the settings' redaction; listing, reading and the Delta output on moto's S3 server (the job on it:
tests/e2e/test_shared_storage_job.py)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from txnlog.sources import storage


@pytest.mark.parametrize(
    ("path", "remote", "scheme"),
    [
        pytest.param("/data/kafka-logs", False, None, id="absolute"),
        pytest.param("kafka-logs/broker-1", False, None, id="relative"),
        pytest.param("file:///data/kafka-logs", False, "file", id="file-uri"),
        pytest.param("s3://b/logs", True, "s3", id="s3"),
        pytest.param("s3a://b/logs", True, "s3a", id="s3a"),
        pytest.param("S3N://b/logs", True, "s3n", id="s3n-upper"),
        pytest.param("gs://b/logs", True, "gs", id="gs"),
        pytest.param("hdfs://nn:8020/logs", True, "hdfs", id="hdfs"),
        pytest.param("abfss://c@acct.dfs.core.windows.net/logs", True, "abfss", id="abfss"),
        pytest.param("broker-1=dumps/b1.txt", False, None, id="named-dump-arg"),
    ],
)
def test_remote_or_local(path: str, remote: bool, scheme: str | None) -> None:
    assert storage.is_remote(path) is remote
    assert storage.scheme_of(path) == scheme


@pytest.mark.parametrize(
    ("path", "dirname", "basename"),
    [
        pytest.param("s3a://b/logs/broker-1/orders-0/00000000000000000000.log", "s3a://b/logs/broker-1/orders-0",
                     "00000000000000000000.log", id="s3a-file"),
        pytest.param("s3a://b/logs/broker-1/", "s3a://b/logs", "broker-1", id="trailing-slash"),
        pytest.param("hdfs://nn:8020/logs/broker-1", "hdfs://nn:8020/logs", "broker-1", id="hdfs-host-port"),
    ],
)  # fmt: skip
def test_uri_arithmetic(path: str, dirname: str, basename: str) -> None:
    assert storage.dirname(path) == dirname
    assert storage.basename(path) == basename
    assert storage.join(dirname, basename) == dirname + "/" + basename
    assert storage.abspath(path) == path.rstrip("/")


def test_unknown_scheme_is_one_line() -> None:
    with pytest.raises(storage.StorageError) as e:
        storage.check_scheme("ftp://host/logs")
    assert str(e.value).startswith("ftp://host/logs: the ftp:// scheme is not supported; give a local path or a s3://")
    assert "\n" not in str(e.value)


def test_local_paths_behave_as_os(tmp_path) -> None:
    (tmp_path / "b" / "orders-0").mkdir(parents=True)
    (tmp_path / "b" / "orders-0" / "00000000000000000000.log").write_bytes(b"x" * 7)
    (tmp_path / "a.txt").write_text("hello")
    root = str(tmp_path)
    assert [e.name for e in storage.scandir(root)] == ["a.txt", "b"]
    assert storage.isdir(f"file://{root}/b") and storage.isfile(f"{root}/a.txt") and not storage.exists(f"{root}/c")
    assert storage.getsize(f"{root}/b/orders-0/00000000000000000000.log") == 7
    assert storage.read_bytes(f"file://{root}/a.txt", 4) == b"hell"
    assert list(storage.walk(root)) == list(os.walk(root))
    assert storage.realpath(root) == os.path.realpath(root)


def test_settings_never_show_their_values() -> None:
    s = storage.Settings.of({"s3.endpoint": "http://127.0.0.1:9000", "s3.secret_key": "planted", "s3.region": None})
    assert s.get("s3.endpoint") == "http://127.0.0.1:9000" and s.get("s3.region") is None
    assert "planted" not in repr(s) and "9000" not in repr(s)
    assert storage.Settings.of({"s3.secret_key": "planted"}) == s.of({"s3.secret_key": "planted"})


@contextmanager
def s3_bucket(tmp_path, monkeypatch, bucket: str) -> Iterator[Any]:
    """moto's S3 server with ``bucket``, no AWS_* environment, txnlog.sources.storage configured for it (and reset
    after): yields a pyarrow S3 filesystem on it for the test's own uploads and checks."""
    from pyarrow import fs as pafs

    from tests.moto_s3 import moto_server

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    with moto_server(tmp_path) as endpoint:
        s3 = pafs.S3FileSystem(
            endpoint_override=endpoint, scheme="http", region="us-east-1", access_key="a", secret_key="b",
            allow_bucket_creation=True,
        )  # fmt: skip
        s3.create_dir(bucket)
        storage.forget()
        storage.configure(
            {"s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access_key": "a", "s3.secret_key": "b"}
        )
        try:
            yield s3
        finally:
            storage.configure(None)
            storage.forget()


def test_discovery_and_reads_on_s3_are_the_local_ones(tmp_path, monkeypatch) -> None:
    """The sample cluster's log dirs (four partitions of each internal topic: each file is a round trip to the
    server) uploaded to moto's S3 server: ``discover`` over ``s3a://`` lists the
    same files with the same sizes and checkpoints as over the local copy (paths re-rooted), and every
    segment's bytes read back through ``txnlog.engine.segments.read_file_bytes`` (and a group's, through
    ``txnlog.engine.segment_group.read_logs``) are the local bytes."""
    from pyarrow import fs as pafs

    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.engine.segment_group import read_logs
    from txnlog.engine.segments import read_file_bytes
    from txnlog.sources.logdirs import discover

    write_scenario("sample", tmp_path / "logs", seed=7, internal_partitions=4)
    with s3_bucket(tmp_path, monkeypatch, "copies") as s3:
        pafs.copy_files(str(tmp_path / "logs"), "copies/logs", destination_filesystem=s3)
        remote = discover(["s3a://copies/logs"])
        local = discover([str(tmp_path / "logs")])
        root = str(tmp_path / "logs")

        def local_view(files):  # the remote listing with its paths re-rooted
            return [dataclasses.replace(f, path=f.path.replace("s3a://copies/logs", root)) for f in files]

        for kind in ("segments", "snapshots", "txn_state_segments"):
            assert local_view(getattr(remote, kind)) == list(getattr(local, kind)), kind
        assert remote.checkpoints == local.checkpoints and remote.brokers == local.brokers
        assert len(remote.segments) > 10
        for f in remote.segments[:20] + remote.snapshots[:5]:
            local_path = f.path.replace("s3a://copies/logs", root)
            assert read_file_bytes(f.path).tobytes() == open(local_path, "rb").read()
        # a task's small files read into one buffer (txnlog.engine.segment_group.read_logs), remote as local
        files = list(remote.segments[:20] + remote.snapshots[:5])
        buf, bounds, read, failed = read_logs(files)
        assert read == files and not failed
        for f, start, end in zip(files, bounds[:-1], bounds[1:], strict=True):
            assert buf[start:end].tobytes() == open(f.path.replace("s3a://copies/logs", root), "rb").read()


def test_delta_tables_on_s3_take_the_storage_settings(tmp_path, monkeypatch) -> None:
    """``--output s3a://…`` with the config's ``storage`` settings only (no AWS_* environment, an http://
    endpoint as a MinIO has): the deltalake writer commits there, a rerun of the same run replaces its rows,
    a second run appends, ``read_table`` filters by run and retention drops the older one, as on a local path."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from pyarrow import fs as pafs

    from txnlog.model.contract import RUNS
    from txnlog.output import delta
    from txnlog.output.delta_retention import drop_runs_before

    first, second = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)

    def runs_row(as_of: datetime, run_id: str) -> pa.Table:
        row = dict.fromkeys(RUNS.names) | {"cluster": "c", "as_of": as_of, "run_id": run_id, "status": "SUCCEEDED"}
        return pa.Table.from_pylist([row], schema=RUNS)

    with s3_bucket(tmp_path, monkeypatch, "txnlog") as s3:
        out = "s3a://txnlog/out"
        written = delta.write_tables(None, out, {"runs": runs_row(first, "r1")}, cluster="c", as_of=first)
        assert written == {"runs": 1}
        delta.write_tables(None, out, {"runs": runs_row(first, "r1-again")}, cluster="c", as_of=first)
        delta.write_tables(None, out, {"runs": runs_row(second, "r2")}, cluster="c", as_of=second)
        ids = sorted(delta.read_table(out, "runs").column("run_id").to_pylist())
        assert ids == ["r1-again", "r2"]
        assert delta.read_table(out, "runs", as_of=second).column("run_id").to_pylist() == ["r2"]
        assert drop_runs_before(out, {"c": second}) == {"runs": 1}
        assert delta.read_table(out, "runs").column("run_id").to_pylist() == ["r2"]
        assert s3.get_file_info("txnlog/out/runs/_delta_log").type == pafs.FileType.Directory


def test_a_run_with_its_scratch_on_s3_takes_the_storage_settings(tmp_path, monkeypatch) -> None:
    """``--output s3a://…`` puts the run's scratch directory (the staged transactions and coordinator records,
    txnlog.engine.staging) on S3 too. With the endpoint given only in the config's ``storage`` settings (no AWS_*
    environment), the staging writes and reads go through the one filesystem resolver (txnlog.sources.storage):
    the run, in this process without Spark, writes the same tables as with a local output, and leaves no scratch."""
    from pyarrow import fs as pafs

    from txnlog.brokerlog.scenarios import write_scenario
    from txnlog.model.config import load_config
    from txnlog.output import delta
    from txnlog.pipeline import run

    # four partitions of each internal topic (the run is told so): fewer staged files, each a round trip on S3
    truth = write_scenario("replicas_disagree", tmp_path / "logs", seed=3, internal_partitions=4)

    def job(out: str, settings: dict[str, str]) -> dict[str, list[str]]:
        given = {"logs": [str(tmp_path / "logs")], "output": out, "as_of": str(truth.as_of_ms), "cluster": "c"}
        given["transaction_state_partitions"] = str(truth.txn_state_partitions)
        config = load_config(None, {**given, "progress": False, "storage": settings, "driver_max_bytes": str(1 << 30)})
        run(config, progress=lambda _m: None)
        names = ("transactions", "coordinator_history", "findings", "partition_health")
        drop = {"cluster", "as_of", "source"}
        return {
            name: sorted(
                repr({k: v for k, v in r.items() if k not in drop}) for r in delta.read_table(out, name).to_pylist()
            )
            for name in names
        }

    local = job(str(tmp_path / "out"), {})
    assert local["transactions"] and local["coordinator_history"]
    with s3_bucket(tmp_path, monkeypatch, "txnlog") as s3:
        remote = job("s3a://txnlog/out", json.loads(storage.settings_option()))  # what s3_bucket configured
        scratch = s3.get_file_info(pafs.FileSelector("txnlog/out/_txnlog_scratch", allow_not_found=True))
    assert remote == local
    assert not [i.path for i in scratch if i.type == pafs.FileType.File]
