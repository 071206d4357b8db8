"""Where captures and datasets live: local paths or URIs, opened through ``pyarrow.fs``.

``s3://`` (and ``s3a://``), ``gs://``, ``hdfs://`` and ``file://`` URIs name files on shared
storage that the driver and every task open the same way.  S3's endpoint, region and
credentials come from the standard AWS environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``), as boto3 reads them, so one
setting points the job at AWS, MinIO or Ceph.  A plain path is a local path (every executor
must see it: local mode, or a shared mount).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

SCHEMES = ("s3", "s3a", "gs", "gcs", "hdfs", "viewfs", "file")


class StorageError(Exception):
    """A URI that cannot be used (unknown scheme, storage not reachable): one line."""


@dataclass(frozen=True)
class Location:
    """A file or directory: ``uri`` as a user would write it; ``path`` on ``fs``."""

    uri: str
    path: str

    @property
    def local(self) -> bool:
        return "://" not in self.uri or self.uri.startswith("file://")

    def fs(self):
        return filesystem(self.uri)

    def join(self, *parts: str) -> Location:
        sep = "/" if not self.local else os.sep
        return Location(self.uri.rstrip("/") + sep + sep.join(parts), posixpath.join(self.path, *parts))


def _s3():
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    kw = {}
    if endpoint:
        scheme, sep, rest = endpoint.partition("://")
        kw["endpoint_override"] = rest if sep else endpoint
        kw["scheme"] = scheme if sep else "https"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kw["region"] = region
    return fs.S3FileSystem(**kw)


_CACHE: dict = {}


def forget() -> None:
    """Drop the file systems made so far (the storage settings changed)."""
    _CACHE.clear()


def filesystem(uri: str):
    """The ``pyarrow.fs`` file system of ``uri`` (one per scheme and authority, per process)."""
    from pyarrow import fs

    scheme = uri.partition("://")[0].lower() if "://" in uri else "file"
    if scheme not in SCHEMES:
        raise StorageError(f"{uri}: unknown storage scheme {scheme}:// (use {', '.join(SCHEMES)} or a path)")
    key = scheme if scheme in ("file", "s3", "s3a") else "/".join(uri.split("/", 3)[:3])
    got = _CACHE.get(key)
    if got is None:
        try:
            if scheme == "file":
                got = fs.LocalFileSystem()
            elif scheme in ("s3", "s3a"):
                got = _s3()
            else:
                got = fs.FileSystem.from_uri(uri)[0]
        except Exception as e:  # pyarrow's ArrowInvalid / OSError: no HDFS library, no GCS, ...
            raise StorageError(f"{uri}: cannot open its storage ({_first_line(e)})") from None
        _CACHE[key] = got
    return got


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def locate(given: str) -> Location:
    """A path or URI as a Location (a local path made absolute: tasks run elsewhere)."""
    given = os.fspath(given)
    if "://" not in given:
        return Location(given, os.path.abspath(given))
    scheme, _, rest = given.partition("://")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise StorageError(
            f"{given}: unknown storage scheme {scheme}:// (use {', '.join(SCHEMES)} or a path)"
        )
    if scheme == "file":
        return Location(given, rest if rest.startswith("/") else "/" + rest)
    if scheme in ("s3", "s3a"):
        return Location(given, rest.rstrip("/"))
    return Location(given, _from_uri_path(given))


def _from_uri_path(uri: str) -> str:
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(uri)[1]
    except Exception as e:
        raise StorageError(f"{uri}: cannot open its storage ({_first_line(e)})") from None


def info(loc: Location):
    """``pyarrow.fs.FileInfo`` of ``loc`` (type NotFound when missing)."""
    try:
        return loc.fs().get_file_info(loc.path)
    except OSError as e:
        raise StorageError(f"{loc.uri}: {_first_line(e)}") from None


def listing(loc: Location) -> list:
    """Files under the directory ``loc``, recursively, sorted by path."""
    from pyarrow import fs

    sel = fs.FileSelector(loc.path, recursive=True)
    try:
        found = loc.fs().get_file_info(sel)
    except OSError as e:
        raise StorageError(f"{loc.uri}: {_first_line(e)}") from None
    return sorted((f for f in found if f.type == fs.FileType.File), key=lambda f: f.path)


def head(loc: Location, n: int) -> bytes:
    """The first ``n`` bytes of a file (fewer if it is shorter; empty if it cannot be read)."""
    try:
        with loc.fs().open_input_file(loc.path) as f:
            return f.read_at(n, 0) if f.size() else b""
    except OSError:
        return b""


def open_input(loc: Location):
    """A random-access file (``read_at(nbytes, offset)``, ``size()``)."""
    return loc.fs().open_input_file(loc.path)


def write_bytes(loc: Location, data: bytes) -> None:
    f = loc.fs()
    f.create_dir(posixpath.dirname(loc.path), recursive=True)
    with f.open_output_stream(loc.path) as out:
        out.write(data)


def read_bytes(loc: Location) -> bytes:
    with loc.fs().open_input_stream(loc.path) as f:
        return f.read()


def upload_dir(local_dir: str, dest: Location) -> None:
    """Copy a local directory tree to ``dest`` (tasks writing to remote storage)."""
    from pyarrow import fs

    fs.copy_files(
        local_dir, dest.path, source_filesystem=fs.LocalFileSystem(), destination_filesystem=dest.fs()
    )


def fetch(loc: Location, local_path: str) -> None:
    """Copy a remote file to a local one (whole captures are read by amqpcap's reader)."""
    from pyarrow import fs

    fs.copy_files(
        loc.path, local_path, source_filesystem=loc.fs(), destination_filesystem=fs.LocalFileSystem()
    )


def remove_tree(loc: Location) -> None:
    """Delete a directory tree, if it is there."""
    f = loc.fs()
    try:
        if f.get_file_info(loc.path).type.name != "NotFound":
            f.delete_dir(loc.path)
    except OSError:
        pass


def exists(loc: Location) -> bool:
    return info(loc).type.name != "NotFound"


def move(src: Location, dst: Location) -> None:
    """Rename (local: atomic; object stores: copy and delete)."""
    f = src.fs()
    f.create_dir(posixpath.dirname(dst.path), recursive=True)
    f.move(src.path, dst.path)
