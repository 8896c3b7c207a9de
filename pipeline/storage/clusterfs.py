"""The storage clients' addresses: HDFS (RPC and WebHDFS) and the S3 endpoint with its keys, in one place.

From the ``[cluster]`` settings section (``CRAWLFLEET_CLUSTER_*``; defaults: the dev stack's services on
``cluster.addr``, see scripts/lib-cluster.sh) and, for S3's keys, the standard ``AWS_*`` variables, else the
client file ``scripts/svc-s3.sh`` writes, else its dev pair. ``pipeline.storage.uris`` opens storage URIs
with these; ``jobs.cluster`` adds YARN's and Spark's addresses for the runners. No network I/O here.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pipeline.settings import ClusterSettings, load_settings
from pipeline.settings.cluster import HDFS_RPC_PORT, S3_PORT, WEBHDFS_PORT

# svc-s3.sh's dev key pair: the server listens on a loopback address unless told otherwise.
DEV_S3_KEY, DEV_S3_SECRET = "crawlfleet", "crawlfleet-dev-secret"


def settings(cs: ClusterSettings | None = None) -> ClusterSettings:
    return cs if cs is not None else load_settings().cluster


def _host_port(text: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(text if "//" in text else f"//{text}")
    return parts.hostname or "", parts.port or default_port


def namenode_uri(cs: ClusterSettings | None = None) -> str:
    """``hdfs://HOST:PORT``: the NameNode's RPC (fs.defaultFS; what mappers and ``hadoop fs`` use)."""
    cs = settings(cs)
    return (cs.hdfs_uri or f"hdfs://{cs.addr}:{HDFS_RPC_PORT}").rstrip("/")


def webhdfs_address(cs: ClusterSettings | None = None) -> tuple[str, int]:
    """(host, port) of the NameNode's HTTP server, which serves WebHDFS (pure HTTP; data via redirects)."""
    cs = settings(cs)
    return _host_port(cs.webhdfs, WEBHDFS_PORT) if cs.webhdfs else (cs.addr, WEBHDFS_PORT)


def webhdfs_options(cs: ClusterSettings | None = None, *, user: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``fsspec.filesystem("webhdfs", ...)`` (``HADOOP_USER_NAME`` or the login)."""
    host, port = webhdfs_address(cs)
    return {"host": host, "port": port, "user": user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()}


def s3_client_file(environ: Mapping[str, str] | None = None) -> Path:
    """The client settings ``scripts/svc-s3.sh`` writes (AWS_* lines)."""
    env = os.environ if environ is None else environ
    state = env.get("CRAWLFLEET_STATE_DIR") or str(Path.home() / ".cache" / "crawlfleet" / "state")
    return Path(env.get("CRAWLFLEET_S3_DATA") or Path(state) / "s3") / "client.env"


def _client_file_values(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def s3_endpoint(cs: ClusterSettings | None = None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    cs = settings(cs)
    return cs.s3_endpoint or env.get("AWS_ENDPOINT_URL") or f"http://{cs.addr}:{S3_PORT}"


def s3_options(cs: ClusterSettings | None = None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``s3fs.S3FileSystem(...)``: the endpoint and the key pair, from ``AWS_*``
    variables, else svc-s3.sh's client file (a process that cannot see it, e.g. in a mount namespace of
    its own, gets the variables), else the dev pair. (With the variables set, plain
    ``fsspec.filesystem("s3")`` reaches the same server: boto reads them itself.)"""
    env = os.environ if environ is None else environ
    saved = _client_file_values(s3_client_file(env))

    def pick(name: str, dev: str) -> str:
        return env.get(name) or saved.get(name) or dev

    return {
        "endpoint_url": s3_endpoint(cs, env),
        "key": pick("AWS_ACCESS_KEY_ID", DEV_S3_KEY),
        "secret": pick("AWS_SECRET_ACCESS_KEY", DEV_S3_SECRET),
        "client_kwargs": {"region_name": pick("AWS_DEFAULT_REGION", "us-east-1")},
    }
