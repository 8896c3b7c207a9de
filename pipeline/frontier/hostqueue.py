"""A compact FIFO of one host's URLs, for the frontier's RAM window (issue #11).

A Python ``str`` plus a task object costs 150+ bytes per URL; here a URL costs its path length + 1
(one shared ``bytearray``), 8 bytes of fingerprint and 2 bytes of depth, scheme and uncharged mark
(``array``s). The host part is not stored at all: every URL of the queue shares it. The rare URL inside
a redirect chain keeps its hop count in a side table, and the rare URL a plugin's link with meta found
keeps that meta (``UrlTask.link_meta``) in another.
"""

from __future__ import annotations

from array import array
from collections import deque

from fetchers.records import UrlTask
from pipeline.storage.base import UrlRecord

_HTTPS = 1 << 15  # the scheme rides in the depth word's top bit
_UNCHARGED = 1 << 14  # and UrlTask.uncharged in the next one: depths are clamped below it
_DEPTH = _UNCHARGED - 1
_COMPACT_AT = 4096


class HostQueue:
    """FIFO of (url, url_id, depth, redirect_hops, uncharged, link_meta) for URLs of one authority
    (``host[:port]``)."""

    __slots__ = ("authority", "_blob", "_pos", "_ids", "_meta", "_head", "_front", "_hops", "_notes")

    def __init__(self, authority: str) -> None:
        self.authority = authority
        self._blob = bytearray()
        self._pos = 0  # read offset into _blob
        self._ids = array("q")
        self._meta = array("H")  # depth | https flag
        self._head = 0  # read index into _ids/_meta
        self._front: deque[UrlTask] | None = None  # URLs given back (requeue), served first
        # url_id -> redirect hops, for the few queued URLs that are redirect targets (0 is not stored)
        self._hops: dict[int, int] | None = None
        self._notes: dict[int, str] | None = None  # url_id -> link meta, for the few URLs that have one

    def append(
        self, url: str, url_id: int, depth: int, *, redirect_hops: int = 0, uncharged: bool = False,
        link_meta: str = "",
    ) -> None:
        https = url.startswith("https://")
        path = url[(8 if https else 7) + len(self.authority) :] or "/"
        self._blob += path.encode("utf-8", "surrogateescape")
        self._blob += b"\n"
        self._ids.append(url_id)
        self._meta.append(min(depth, _DEPTH) | (_HTTPS if https else 0) | (_UNCHARGED if uncharged else 0))
        if redirect_hops:
            if self._hops is None:
                self._hops = {}
            self._hops[url_id] = redirect_hops
        if link_meta:
            if self._notes is None:
                self._notes = {}
            self._notes[url_id] = link_meta

    def push(self, rec: UrlRecord | UrlTask, *, uncharged: bool = False) -> None:
        """``append`` a crawl-db row's or a task's URL."""
        self.append(rec.url, rec.url_id, rec.depth, redirect_hops=rec.redirect_hops, uncharged=uncharged,
                    link_meta=rec.link_meta)  # fmt: skip

    def appendleft(self, task: UrlTask) -> None:
        if self._front is None:
            self._front = deque()
        self._front.appendleft(task)

    def head_uncharged(self) -> bool:
        """True when the URL ``popleft`` returns next is not charged to the host cap (False for an empty
        queue): a re-fetch, or a robots.txt or sitemap file."""
        if self._front:
            return self._front[0].uncharged
        return self._head < len(self._ids) and bool(self._meta[self._head] & _UNCHARGED)

    def popleft(self) -> UrlTask:
        if self._front:
            return self._front.popleft()
        if self._head >= len(self._ids):
            raise IndexError("pop from an empty HostQueue")
        end = self._blob.index(b"\n", self._pos)
        path = self._blob[self._pos : end].decode("utf-8", "surrogateescape")
        self._pos = end + 1
        url_id, meta = self._ids[self._head], self._meta[self._head]
        self._head += 1
        if self._head >= len(self._ids):
            self._reset()
        elif self._head >= _COMPACT_AT and self._head * 2 >= len(self._ids):
            self._compact()
        scheme = "https://" if meta & _HTTPS else "http://"
        hops = self._hops.pop(url_id, 0) if self._hops else 0
        note = self._notes.pop(url_id, "") if self._notes else ""
        return UrlTask(
            f"{scheme}{self.authority}{path}", url_id, meta & _DEPTH, redirect_hops=hops, uncharged=bool(meta & _UNCHARGED),
            link_meta=note,
        )

    def clear(self) -> None:
        self._reset()
        self._front = None
        self._hops = None
        self._notes = None

    def __len__(self) -> int:
        return len(self._ids) - self._head + (len(self._front) if self._front else 0)

    def __bool__(self) -> bool:
        return self._head < len(self._ids) or bool(self._front)  # no __len__ call: asked per host per round

    def nbytes(self) -> int:
        """Bytes held for queued URLs (buffers, not the fixed object headers)."""
        front = sum(100 + len(t.url) for t in self._front) if self._front else 0
        return (
            len(self._blob) - self._pos
            + (len(self._ids) - self._head) * (self._ids.itemsize + self._meta.itemsize)
            + front
            + (len(self._hops) * 100 if self._hops else 0)
            + (sum(100 + len(n) for n in self._notes.values()) if self._notes else 0)
        )

    def _reset(self) -> None:
        self._blob = bytearray()
        self._pos = 0
        self._ids = array("q")
        self._meta = array("H")
        self._head = 0

    def _compact(self) -> None:
        del self._blob[: self._pos]
        self._pos = 0
        del self._ids[: self._head]
        del self._meta[: self._head]
        self._head = 0
