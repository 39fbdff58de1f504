"""Where the input files live: a local path, or a URI of shared storage read through ``pyarrow.fs``.

On a cluster the copied log dirs and kafka-dump-log.sh files lie on S3, HDFS, GCS or ABFS, written as
Spark users write them::

    s3://b/logs  s3a://b/logs  s3n://b/logs   -> pyarrow.fs.S3FileSystem (Hadoop's s3a/s3n are plain S3)
    gs://b/logs  gcs://b/logs                 -> pyarrow.fs.GcsFileSystem
    hdfs://nn:8020/logs  viewfs://…           -> pyarrow.fs.HadoopFileSystem (needs libhdfs and a JVM)
    abfs://container@account.dfs.core.windows.net/logs  abfss://… -> pyarrow.fs.AzureFileSystem
    /data/logs  file:///data/logs             -> the local disk, through ``os`` (the fast path)

Paths keep the form the user wrote (``s3a://b/logs/broker-1/orders-0/…log``): that is what a
quarantine row names and what a task opens. The functions here mirror ``os``/``os.path`` (``scandir``,
``isdir``, ``isfile``, ``exists``, ``getsize``, ``join``…) so that ``txnlog.sources.logdirs`` walks either the
same way; a remote directory's listing comes from one recursive listing of the root it was found under
(:func:`prefetch`: one paginated LIST on S3 instead of one request per directory).

S3 settings (:class:`Settings`), later wins: the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, ``~/.aws``), then the config's ``storage`` mapping
(``s3.endpoint``, ``s3.region``, ``s3.access_key``, ``s3.secret_key``, ``s3.session_token``,
``s3.anonymous``). The driver hands its settings to the Data Sources as one option
(:func:`settings_option`), so executors on other hosts reach the same endpoint; ``Config.to_dict``
redacts the secret ones.

A storage failure the driver meets (bucket missing, credentials refused, endpoint unreachable) is one
:class:`StorageError` line naming the path and the fix.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from pyarrow import fs as pafs

from txnlog.model.errors import UsageError

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
#: the URI schemes Spark users write -> the pyarrow filesystem family that reads them
SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "hdfs": "hdfs",
    "viewfs": "hdfs",
    "abfs": "abfs",
    "abfss": "abfs",
}


class StorageError(UsageError):
    """Shared storage refused or could not serve an input path; the message names the path and the fix."""


def scheme_of(path: str) -> str | None:
    """``s3a`` for ``s3a://b/k``; None for a plain local path."""
    m = _SCHEME.match(path)
    return m.group("scheme").lower() if m else None


def is_remote(path: str) -> bool:
    """Whether ``path`` names shared storage (any URI but ``file://``)."""
    scheme = scheme_of(path)
    return scheme is not None and scheme != "file"


def local_path(path: str) -> str:
    """A local path without its ``file://`` prefix."""
    return path[len("file://") :] if path.lower().startswith("file://") else path


def check_scheme(path: str) -> None:
    """A StorageError for a URI scheme txnlog cannot read."""
    scheme = scheme_of(path)
    if scheme is not None and scheme != "file" and scheme not in SCHEMES:
        raise StorageError(
            f"{path}: the {scheme}:// scheme is not supported; give a local path or a "
            f"{', '.join(s + '://' for s in SCHEMES)} URI"
        )


# --- settings -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The ``storage`` settings (module doc); empty values fall back to the AWS environment."""

    values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, Any] | None) -> Settings:
        return cls(tuple(sorted((str(k), str(v)) for k, v in (mapping or {}).items() if v not in (None, ""))))

    def get(self, key: str) -> str | None:
        return dict(self.values).get(key)

    def s3_endpoint(self) -> str | None:
        return self.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")

    def __repr__(self) -> str:  # never print a secret
        return f"Settings({sorted(k for k, _ in self.values)})"


_settings = Settings()
_lock = threading.Lock()


def configure(settings: Settings | Mapping[str, Any] | None) -> None:
    """Use ``settings`` for every later open in this process (the driver at start; a task from its option)."""
    global _settings
    chosen = settings if isinstance(settings, Settings) else Settings.of(settings)
    with _lock:
        if chosen != _settings:
            _settings = chosen
            _filesystems.clear()


def settings_option(settings: Settings | None = None) -> str:
    """The Data Source option that carries the settings to the executors (JSON)."""
    return json.dumps(dict((settings or _settings).values))


def configure_from_options(options: Mapping[str, str]) -> None:
    """In a task: the settings the driver put in the ``storage`` option (none: the environment's)."""
    raw = options.get("storage")
    if raw:
        configure(json.loads(raw))


# --- filesystems ------------------------------------------------------------------------------------------

_filesystems: dict[tuple[str, str], Any] = {}


def filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for ``uri``: a local path (or ``file://``) as it is; for a remote one,
    one filesystem per scheme and host, made once per process (a task reads many files: an HDFS or Azure client
    is not set up for each) from the configured settings (:func:`configure`)."""
    check_scheme(uri)
    if not is_remote(uri):
        return pafs.LocalFileSystem(), local_path(uri)
    scheme = scheme_of(uri) or "file"
    family = SCHEMES.get(scheme, "file")
    parts = urlsplit(uri)
    key = (family, "") if family in ("s3", "gs") else (scheme, parts.netloc)
    with _lock:
        cached = _filesystems.get(key)
    if cached is None:
        try:
            if family == "s3":
                made: Any = _s3(pafs)
                prefix = None  # bucket/key
            elif family == "gs":
                made, _ = pafs.FileSystem.from_uri(f"gs://{parts.netloc}{parts.path}")
                prefix = None
            else:  # hdfs: the path; abfs: container/path: what from_uri puts before the URI's path
                made, inner = pafs.FileSystem.from_uri(uri)
                prefix = inner[: len(inner) - len(parts.path)] if inner.endswith(parts.path) else ""
        except (OSError, ValueError, ImportError) as e:
            raise StorageError(f"{uri}: cannot open {scheme}:// storage ({_first_line(e)}){_fix_for(family)}") from e
        cached = (made, prefix)
        with _lock:
            _filesystems[key] = cached
    made, prefix = cached
    inner = parts.netloc + parts.path if prefix is None else prefix + parts.path
    return made, inner.rstrip("/") or inner


def delta_options(uri: str) -> dict[str, str]:
    """delta-rs ``storage_options`` for an output ``uri`` from the same settings the inputs use (the writer
    and readers of the Delta tables, txnlog.output.delta). S3 only; other stores take their own environment."""
    if SCHEMES.get(scheme_of(uri) or "") != "s3":
        return {}
    v = _s3_values()
    names = {
        "region": "AWS_REGION",
        "access_key": "AWS_ACCESS_KEY_ID",
        "secret_key": "AWS_SECRET_ACCESS_KEY",
        "session_token": "AWS_SESSION_TOKEN",
    }
    options = {name: str(v[k]) for k, name in names.items() if v[k]}
    if v["endpoint"]:
        options["AWS_ENDPOINT_URL"] = v["endpoint"]
        if v["endpoint"].startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"  # delta-rs refuses plain HTTP unless told (a MinIO, a test server)
    if v["anonymous"]:
        options["AWS_SKIP_SIGNATURE"] = "true"
    return options


def _s3_values() -> dict[str, Any]:
    """The S3 settings in effect (the config's ``storage``, else the AWS environment's endpoint and region;
    keys not given are left to each library's own lookup of the environment and ~/.aws)."""
    s = _settings
    values: dict[str, Any] = {k: s.get(f"s3.{k}") for k in ("access_key", "secret_key", "session_token")}
    values["endpoint"] = s.s3_endpoint()
    values["region"] = s.get("s3.region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    values["anonymous"] = (s.get("s3.anonymous") or "").lower() in ("1", "true", "yes")
    return values


def _s3(pafs: Any) -> Any:
    v = _s3_values()
    kwargs: dict[str, Any] = {k: v[k] for k in ("region", "access_key", "secret_key", "session_token") if v[k]}
    if v["endpoint"]:
        kwargs["endpoint_override"] = v["endpoint"]
        if v["endpoint"].startswith("http://"):
            kwargs["scheme"] = "http"
    if v["anonymous"]:
        kwargs["anonymous"] = True
    return pafs.S3FileSystem(**kwargs)


def _fix_for(family: str) -> str:
    return {
        "s3": "; check the bucket name and the S3 settings (AWS_ENDPOINT_URL / storage s3.endpoint, AWS_REGION / "
        "s3.region, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY / s3.access_key and s3.secret_key)",
        "gs": "; check the bucket name and GOOGLE_APPLICATION_CREDENTIALS",
        "hdfs": "; pyarrow needs libhdfs and a JVM: set HADOOP_HOME, ARROW_LIBHDFS_DIR and CLASSPATH "
        "(hadoop classpath --glob)",
        "abfs": "; check the account and container names and AZURE_STORAGE_ACCOUNT_KEY or your Azure login",
    }.get(family, "")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return re.sub(r"\s*\(Request ID: [^)]*\)", "", text)


def explain(path: str, e: BaseException) -> StorageError:
    """A one-line StorageError for ``e``, raised by storage while reading ``path``."""
    family = SCHEMES.get(scheme_of(path) or "", "file")
    text = str(e)
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        bucket = urlsplit(path).netloc
        return StorageError(f"{path}: bucket '{bucket}' does not exist{_fix_for(family)}")
    if any(w in text for w in ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403")):
        return StorageError(f"{path}: the storage refused the credentials ({_first_line(e)}){_fix_for(family)}")
    if any(w in text for w in ("NETWORK_CONNECTION", "curlCode", "Could not resolve", "Connection refused")):
        return StorageError(f"{path}: cannot reach the storage endpoint ({_first_line(e)}){_fix_for(family)}")
    return StorageError(f"{path}: cannot read it ({_first_line(e)}){_fix_for(family)}")


# --- os / os.path for both --------------------------------------------------------------------------------


class _Stat:
    __slots__ = ("st_size",)

    def __init__(self, size: int) -> None:
        self.st_size = size


class RemoteEntry:
    """A remote directory entry with the ``os.DirEntry`` methods txnlog uses."""

    __slots__ = ("name", "path", "_dir", "_size")

    def __init__(self, name: str, path: str, is_dir: bool, size: int) -> None:
        self.name, self.path, self._dir, self._size = name, path, is_dir, size

    def is_dir(self) -> bool:
        return self._dir

    def is_file(self) -> bool:
        return not self._dir

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _Stat:
        return _Stat(self._size)


#: remote listings (prefetch): directory URI -> its entries by name; file URI -> size
_dirs: dict[str, dict[str, RemoteEntry]] = {}
_files: dict[str, int] = {}
_listed_roots: set[str] = set()


def _split(uri: str) -> tuple[str, str]:
    """(``scheme://netloc``, path inside) of a URI, the path without a trailing ``/``."""
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")


def _strip(uri: str) -> str:
    base, inner = _split(uri)
    return base + inner


def _under(uri: str) -> bool:
    return any(uri == root or uri.startswith(root + "/") for root in _listed_roots)


def prefetch(root: str) -> None:
    """List everything below the remote ``root`` once (recursive), so that later calls answer from memory."""
    root = _strip(root)
    if not is_remote(root) or _under(root):
        return

    filesystem_, inner = filesystem(root)
    try:
        info = filesystem_.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            return
        if info.type == pafs.FileType.File:
            _files[root] = info.size
            return
        infos = filesystem_.get_file_info(pafs.FileSelector(inner, recursive=True))
    except OSError as e:
        raise explain(root, e) from e
    _dirs.setdefault(root, {})
    inner = inner.rstrip("/")
    for fi in infos:
        # the filesystem's paths (bucket/key on S3, /path on HDFS) below ``inner`` -> the URI as the user wrote it
        uri = root + fi.path.rstrip("/")[len(inner) :]
        parent, name = uri.rsplit("/", 1)
        is_dir = fi.type == pafs.FileType.Directory
        _dirs.setdefault(parent, {})[name] = RemoteEntry(name, uri, is_dir, 0 if is_dir else int(fi.size or 0))
        if is_dir:
            _dirs.setdefault(uri, {})
        else:
            _files[uri] = int(fi.size or 0)
    _listed_roots.add(root)


def _info(uri: str) -> tuple[str, int]:
    """("file" | "dir" | "missing", size) of a remote URI."""
    uri = _strip(uri)
    if _under(uri):
        if uri in _files:
            return "file", _files[uri]
        return ("dir", 0) if uri in _dirs else ("missing", 0)

    filesystem_, inner = filesystem(uri)
    try:
        info = filesystem_.get_file_info(inner)
    except OSError as e:
        raise explain(uri, e) from e
    if info.type == pafs.FileType.File:
        return "file", int(info.size or 0)
    if info.type == pafs.FileType.Directory:
        return "dir", 0
    return "missing", 0


def missing_reason(path: str) -> str:
    """Why ``path`` is not there, as a clause: a missing bucket is named (S3/GCS)."""
    if is_remote(path) and SCHEMES.get(scheme_of(path) or "") in ("s3", "gs"):
        bucket = urlsplit(path).netloc
        if _info(f"{scheme_of(path)}://{bucket}")[0] == "missing":
            return f"bucket '{bucket}' does not exist{_fix_for(SCHEMES[scheme_of(path) or 's3'])}"
    return "no such file or directory"


def exists(path: str) -> bool:
    if not is_remote(path):
        return os.path.exists(local_path(path))
    return _info(path)[0] != "missing"


def isdir(path: str) -> bool:
    if not is_remote(path):
        return os.path.isdir(local_path(path))
    return _info(path)[0] == "dir"


def isfile(path: str) -> bool:
    if not is_remote(path):
        return os.path.isfile(local_path(path))
    return _info(path)[0] == "file"


def getsize(path: str) -> int:
    if not is_remote(path):
        return os.path.getsize(local_path(path))
    kind, size = _info(path)
    if kind != "file":
        raise FileNotFoundError(path)
    return size


def scandir(path: str, *, sort: bool = True) -> list[Any]:
    """The entries of a directory (``os.DirEntry`` locally, :class:`RemoteEntry` remotely), by name
    (``sort`` false: in the order the directory lists them)."""
    if not is_remote(path):
        with os.scandir(local_path(path)) as it:
            return sorted(it, key=lambda e: e.name) if sort else list(it)
    uri = _strip(path)
    if not _under(uri):
        prefetch(uri)
    if uri not in _dirs:
        raise FileNotFoundError(path)
    return sorted(_dirs[uri].values(), key=lambda e: e.name)


def walk(path: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` (top-down; callers may prune the directory list in place)."""
    if not is_remote(path):
        yield from os.walk(local_path(path))
        return
    uri = _strip(path)
    prefetch(uri)
    stack = [uri]
    while stack:
        top = stack.pop()
        entries = sorted(_dirs.get(top, {}).values(), key=lambda e: e.name)
        dirs = [e.name for e in entries if e.is_dir()]
        yield top, dirs, [e.name for e in entries if not e.is_dir()]
        stack.extend(join(top, d) for d in reversed(dirs))


def abspath(path: str) -> str:
    return _strip(path) if is_remote(path) else os.path.abspath(local_path(path))


def realpath(path: str) -> str:
    return _strip(path) if is_remote(path) else os.path.realpath(local_path(path))


def join(path: str, *names: str) -> str:
    return posixpath.join(path, *names) if is_remote(path) else os.path.join(path, *names)


def dirname(path: str) -> str:
    if is_remote(path):
        base, inner = _split(path)
        return base + posixpath.dirname(inner)
    return os.path.dirname(path)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if is_remote(path) else os.path.basename(path.rstrip(os.sep))


def open_input(path: str) -> IO[bytes]:
    """A binary stream of the file (local: ``open``; remote: pyarrow's input stream)."""
    if not is_remote(path):
        return open(local_path(path), "rb")
    filesystem_, inner = filesystem(path)
    try:
        return filesystem_.open_input_stream(inner)
    except FileNotFoundError:
        raise
    except OSError as e:
        if "NOT_FOUND" in str(e) or "does not exist" in str(e) or "NoSuchKey" in str(e):
            raise FileNotFoundError(path) from e
        raise


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes (its first ``limit`` bytes when given)."""
    with open_input(path) as f:
        return f.read() if limit is None else f.read(limit)


def forget() -> None:
    """Drop the remote listings (a new run lists afresh)."""
    _dirs.clear()
    _files.clear()
    _listed_roots.clear()
