"""The fleet's segments at a storage URI: how a node commits one and how the link jobs find and retire them.

Layout under the root URI (``pipeline.storage.uris``: a local directory, ``hdfs://`` or ``s3://``):

- ``NODE/NAME.jsonl.part``: a segment being committed (written whole, then renamed);
- ``NODE/NAME.jsonl``: a closed segment, ready for the link jobs;
- ``.done/NODE/NAME.jsonl``: a merged segment kept for ``fleet.segment_retention_s`` (else deleted).

A node writes a segment whole (one PUT on S3, one CREATE on HDFS) under its ``.part`` name, records its
outcomes in the store, then renames it: a rename on a filesystem, copy-and-delete on S3, whose object
appears whole or not at all. A ``.part`` left by a killed node is adopted (its torn tail cut off) by the
node when it starts again or, once ``ABANDON_S`` old, by the link jobs. Keys are ``NODE/NAME``, the same on
every machine whatever the URI it mounts the root at.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipeline.storage import uris

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"
PART_SUFFIX = ".part"
DONE_DIR = ".done"
ABANDON_S = 120.0  # a .part this old belongs to a node that died (a node writes its .part whole at once)
RESERVED = frozenset({DONE_DIR, ".rounds", ".guard", ".items"})  # directories of the root that hold no node


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    key: str  # NODE/NAME.jsonl
    size: int
    mtime: float  # epoch seconds, as the storage says


def key_of(uri_or_path: str) -> str:
    """``NODE/NAME`` of a segment's URI or path, whatever its root."""
    node, _, name = uri_or_path.rstrip("/").rpartition("/")
    return f"{node.rpartition('/')[2]}/{name}"


class Segments:
    """The segments under one root URI. Stateless apart from the filesystem client: safe to make per use."""

    def __init__(self, root: str) -> None:
        self.root = uris.check(root).rstrip("/")
        self._loc = uris.locate(self.root)
        self.fs = self._loc.fs
        self.base = self._loc.path.rstrip("/")

    @property
    def local(self) -> bool:
        """The segments are on this machine's file system (listing them costs no request)."""
        return "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def uri(self, key: str) -> str:
        """The URI a mapper on any machine opens for segment ``key``."""
        return uris.join(self.root, key)

    def _path(self, key: str) -> str:
        return f"{self.base}/{key}"

    # --- a node's side ----------------------------------------------------------------------------
    def write_part(self, node: str, name: str, data: bytes) -> str:
        """Write segment ``NODE/NAME`` whole under its ``.part`` name; returns the part's key."""
        key = f"{node}/{name}{PART_SUFFIX}"
        self.fs.makedirs(f"{self.base}/{node}", exist_ok=True)
        self.fs.pipe_file(self._path(key), data)
        return key

    def close_part(self, part_key: str) -> str:
        """Rename a ``.part`` into place (closed: the link jobs take it); returns the segment's key."""
        key = part_key.removesuffix(PART_SUFFIX)
        self.fs.mv(self._path(part_key), self._path(key))
        return key

    def parts(self, node: str) -> list[str]:
        """Keys of the ``.part`` segments of ``node`` (a killed life's, when the node starts)."""
        return [key_of(p) for p in self._ls(f"{self.base}/{node}") if p.endswith(SEGMENT_SUFFIX + PART_SUFFIX)]

    def adopt(self, part_key: str) -> str:
        """Close a ``.part`` a killed node left: a torn last line is cut off, then it is renamed into place
        (its URLs may not be settled in the store: the dispatcher re-issues them, the store keeps the first
        outcome). Returns the segment's key."""
        data = self.fs.cat_file(self._path(part_key))
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) != len(data):
            self.fs.pipe_file(self._path(part_key), whole)
        key = self.close_part(part_key)
        log.warning("adopted %s (%d bytes) left by a killed node", self.uri(key), len(whole))
        return key

    # --- the link jobs' side ----------------------------------------------------------------------
    def closed(self, *, now: float | None = None) -> list[SegmentInfo]:
        """Closed segments not yet retired, oldest first. With ``now``, a ``.part`` at least ``ABANDON_S``
        old (its node died and never came back) is adopted first."""
        found: list[SegmentInfo] = []
        for node_dir in self._ls(self.base, dirs_only=True):
            if node_dir.rstrip("/").rpartition("/")[2] in RESERVED:
                continue
            for info in self._infos(node_dir):
                name = str(info["name"])
                if now is not None and name.endswith(SEGMENT_SUFFIX + PART_SUFFIX):
                    if now - uris.mtime(info) >= ABANDON_S:
                        key = self.adopt(key_of(name))
                        found.append(SegmentInfo(key, int(info.get("size") or 0), now))
                elif name.endswith(SEGMENT_SUFFIX):
                    found.append(SegmentInfo(key_of(name), int(info.get("size") or 0), uris.mtime(info)))
        return sorted(found, key=lambda s: (s.mtime, s.key))

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self._path(key)))

    def read_lines(self, key: str) -> Iterator[bytes]:
        with self.fs.open(self._path(key), "rb") as fh:
            yield from fh

    def retire(self, key: str, *, keep: bool) -> None:
        """A merged segment leaves the closed set: kept under ``.done/`` (``keep``) or deleted."""
        if not self.exists(key):
            return
        if keep:
            self.fs.makedirs(f"{self.base}/{DONE_DIR}/{key.partition('/')[0]}", exist_ok=True)
            self.fs.mv(self._path(key), f"{self.base}/{DONE_DIR}/{key}")
        else:
            self.fs.rm_file(self._path(key))

    def expire_done(self, *, older_than: float) -> int:
        """Delete kept segments whose retention has run out (modified before ``older_than``)."""
        gone = 0
        for node_dir in self._ls(f"{self.base}/{DONE_DIR}", dirs_only=True):
            for info in self._infos(node_dir):
                if uris.mtime(info) < older_than:
                    self.fs.rm_file(info["name"])
                    gone += 1
        return gone

    def _infos(self, path: str) -> list[dict[str, Any]]:
        try:
            self.fs.invalidate_cache(path)
            return [i for i in self.fs.ls(path, detail=True) if i.get("type") == "file"]
        except FileNotFoundError:
            return []

    def _ls(self, path: str, *, dirs_only: bool = False) -> list[str]:
        try:
            self.fs.invalidate_cache(path)
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [str(e["name"]) for e in entries if not dirs_only or e.get("type") == "directory"]
