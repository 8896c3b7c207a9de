"""What a fetcher tells the crawl about a robots.txt it loaded, and which requests a result cost.

A fetcher loads an origin's robots.txt once per ``politeness.robots_ttl_s`` (fetched itself, or taken from
the crawl's robots share), whichever process or node it is. The crawl needs what it said: its
``Sitemap:`` lines (every host's sitemaps are read however its robots.txt reached the crawl), its
Crawl-delay, whether it changed, and, for the politeness report, when it was requested. So the first
result the fetcher returns for a URL of that origin after loading it carries a ``RobotsNote``; the crawl
core (embedded) and the link jobs (fleet) read the sitemaps from it, the report reads the rest from the
crawl's records.

``sent`` on a result: each request the fetch made (redirect hops and retries, a 429 or 503 included), as
(wall time it started, status; 0 = no answer): the politeness the server felt.

Plain JSON both ways; ``from_json`` checks every field and its size and raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_SITEMAPS = 100  # Sitemap: lines one note carries (a robots.txt may list thousands)
MAX_CHANGED = 64  # changed directive lines one note carries
MAX_SENT = 64  # requests one result lists (redirects x retries stay far below)
MAX_TEXT = 8192


@dataclass(frozen=True, slots=True)
class RobotsNote:
    """One robots.txt load. ``at``: wall time it was requested (``fetched``) or, from the share, when the
    shared answer was fetched. ``changed``: directive lines added (``+``) or gone (``-``) against the
    answer it replaced in this fetcher (empty for a first load or the same text)."""

    origin: str
    status: int
    at: float
    fetched: bool
    sitemaps: tuple[str, ...] = ()
    crawl_delay: float = 0.0
    digest: str = ""
    changed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin, "status": self.status, "at": self.at, "fetched": self.fetched}
        if self.sitemaps:
            out["sitemaps"] = list(self.sitemaps)
        if self.crawl_delay:
            out["crawl_delay"] = self.crawl_delay
        if self.digest:
            out["digest"] = self.digest
        if self.changed:
            out["changed"] = list(self.changed)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> RobotsNote:
        _check(isinstance(obj, dict), "robots note must be an object")
        origin, status, at, fetched = obj.get("origin"), obj.get("status"), obj.get("at"), obj.get("fetched")
        _check(isinstance(origin, str) and 0 < len(origin) <= MAX_TEXT, "robots note origin")
        _check(type(status) is int and 0 <= status < 1000, "robots note status")
        _check(_number(at), "robots note at")
        _check(type(fetched) is bool, "robots note fetched")
        delay = obj.get("crawl_delay", 0.0)
        _check(_number(delay) and delay >= 0, "robots note crawl_delay")
        digest = obj.get("digest", "")
        _check(isinstance(digest, str) and len(digest) <= 128, "robots note digest")
        return cls(
            origin, status, float(at), fetched, _texts(obj.get("sitemaps", []), MAX_SITEMAPS, "sitemaps"),
            float(delay), digest, _texts(obj.get("changed", []), MAX_CHANGED, "changed"),
        )  # fmt: skip


def sent_to_json(sent: Sequence[tuple[float, int]]) -> list[list[float | int]]:
    return [[round(t, 6), s] for t, s in sent]


def sent_from_json(obj: Any) -> list[tuple[float, int]]:
    _check(isinstance(obj, list) and len(obj) <= MAX_SENT, "sent must be a list of [t, status]")
    out = []
    for item in obj:
        _check(isinstance(item, list) and len(item) == 2 and _number(item[0]), "sent entry")
        _check(type(item[1]) is int and 0 <= item[1] < 1000, "sent status")
        out.append((float(item[0]), int(item[1])))
    return out


def _texts(obj: Any, limit: int, what: str) -> tuple[str, ...]:
    _check(isinstance(obj, list) and len(obj) <= limit, f"robots note {what}")
    _check(all(isinstance(x, str) and len(x) <= MAX_TEXT for x in obj), f"robots note {what}")
    return tuple(obj)


def _number(x: Any) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)
