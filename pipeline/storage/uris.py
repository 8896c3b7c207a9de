"""Storage named by URI: ``file://`` (or an absolute path), ``hdfs://`` and ``s3://``, opened through fsspec.

What a fetch node hands to the link jobs (segments) lives at a URI that every machine of the fleet can
open: a node writes it, a ``crawlfleet links`` process on another machine lists it, a mapper on any
cluster node reads it. Nothing else in the project builds a client for these.

- ``file:///ABS`` or ``/ABS``: the local filesystem (one box, or a mount every machine shares).
- ``hdfs://NAMENODE[:RPC_PORT]/PATH``: HDFS. Hadoop's own tools (mrjob on YARN) use the URI as it is;
  Python opens it through WebHDFS (fsspec's ``webhdfs``, plain HTTP: no libhdfs/JNI): at ``cluster.webhdfs``
  when the URI names the settings' NameNode, else on the URI's host at 9870 (Hadoop 3's port), as user
  ``HADOOP_USER_NAME`` or the login (``pipeline.storage.clusterfs``). ``webhdfs://HOST:PORT/PATH`` names
  the gateway directly.
- ``s3://BUCKET/PATH``: S3 or an S3-compatible server (s3fs), at ``cluster.s3_endpoint`` or
  ``AWS_ENDPOINT_URL``, with ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (``clusterfs.s3_options``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import fsspec

from pipeline.settings.cluster import WEBHDFS_PORT
from pipeline.settings.fleet import STORAGE_SCHEMES as SCHEMES
from pipeline.storage import clusterfs


@dataclass(frozen=True, slots=True)
class Location:
    """A URI split into the filesystem that opens it and the path inside that filesystem."""

    fs: Any  # fsspec.AbstractFileSystem
    path: str
    uri: str


def check(uri: str) -> str:
    """``uri`` if it names storage this module opens; ValueError (naming it) otherwise."""
    if "\x00" in uri or "/../" in f"{uri}/" or uri.endswith("/.."):
        raise ValueError(f"storage URI {uri[:80]!r} must not contain '..' or NUL")
    if uri.startswith("/"):
        return uri
    scheme = urlsplit(uri).scheme
    if scheme not in SCHEMES:
        raise ValueError(f"storage URI {uri[:80]!r}: expected an absolute path or file://, hdfs://, s3://")
    parts = urlsplit(uri)
    if scheme == "file" and (parts.netloc or not parts.path.startswith("/")):
        raise ValueError(f"storage URI {uri[:80]!r}: file URIs are file:///ABSOLUTE/PATH")
    if scheme != "file" and not parts.netloc:
        raise ValueError(f"storage URI {uri[:80]!r} names no host or bucket")
    return uri


def is_local(uri: str) -> bool:
    return uri.startswith("/") or uri.startswith("file://")


def join(uri: str, *parts: str) -> str:
    out = uri.rstrip("/")
    for part in parts:
        out += "/" + part.strip("/")
    return out


def locate(uri: str) -> Location:
    """The filesystem and path for ``uri`` (instances are cached by fsspec: cheap to call per file)."""
    check(uri)
    if is_local(uri):
        return Location(fsspec.filesystem("file"), uri.removeprefix("file://"), uri)
    parts = urlsplit(uri)
    if parts.scheme in ("hdfs", "webhdfs"):
        opts = clusterfs.webhdfs_options()
        if parts.scheme == "webhdfs":
            host, port = parts.hostname, parts.port or WEBHDFS_PORT
        elif parts.hostname == urlsplit(clusterfs.namenode_uri()).hostname:
            host, port = opts["host"], opts["port"]
        else:
            host, port = parts.hostname, WEBHDFS_PORT
        fs = fsspec.filesystem("webhdfs", host=host, port=port, user=opts["user"])
        return Location(fs, parts.path or "/", uri)
    # No listings cache: segments are written, renamed and listed by processes on many machines, and a
    # listing cached before a PUT made s3fs answer "not found" for the object just written (a node's
    # commit of its .part then failed, and its batch went back to the dispatcher).
    fs = fsspec.filesystem("s3", use_listings_cache=False, **clusterfs.s3_options())
    return Location(fs, f"{parts.netloc}{parts.path}", uri)


def mtime(info: dict[str, Any]) -> float:
    """A listing entry's modification time in epoch seconds, whichever filesystem listed it."""
    if "mtime" in info:  # local
        return float(info["mtime"])
    if "modificationTime" in info:  # WebHDFS: milliseconds
        return float(info["modificationTime"]) / 1000.0
    stamp = info.get("LastModified")  # S3
    if isinstance(stamp, dt.datetime):
        return stamp.timestamp()
    return 0.0
