"""Ground truth of the living web at an instant: each page's current version and digest (issue #23).

Stable interface (used by the freshness bench and tests):

- ``page_version(web, url, t) -> PageVersion | None``: the state of one URL at test time t, without
  rendering (no digest); None when the URL is not a normal page of this web. Cheap: call it per sample.
- ``versions_at(web, t, *, digests=True) -> dict[url, PageVersion]``: every normal page; with digests
  (``sha1:BASE32`` of the body as served, uncompressed; the WARC payload-digest form) and ETags.
- ``digest_at(web, url, t) -> str | None``: one page's digest at t (renders that page only, ~0.1 ms).
- ``edition_of(body) -> int``: the content version a served body shows (its ``Edition N`` line; 0 when
  it has none), equal to ``page_version(...).version`` at the time it was served: a bench can judge a
  stored copy's freshness from its bytes alone.
- ``living_truth(web, t) -> dict``: the JSON of ``crawlfleet testbed truth --at T``: ``at``, ``epoch``,
  ``rate``, ``pages`` {url: {class, version, cosmetic, changed_at, modified_at, digest, etag}} and
  ``sitemaps`` (``sitemapgen.sitemap_truth``).

A stored copy is *fresh* at t when its content version equals ``page_version(...).version`` (for date/ad
pages the version never moves: their copies stay fresh, though their digest changes; compare digests
for byte-exact freshness). Times: ``t`` is test time, ``Living.test_time(wall)`` converts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pipeline.harness.testbed.liverender import state_bytes
from pipeline.harness.testbed.living import CLASSIC, state
from pipeline.harness.testbed.model import Web, host_index
from pipeline.harness.testbed.render import Renderer
from pipeline.harness.testbed.sitemapgen import sitemap_truth
from pipeline.harness.testbed.validators import digest, etag


@dataclass(frozen=True, slots=True)
class PageVersion:
    url: str
    cls: str
    version: int
    cosmetic: int
    changed_at: float  # test time of the last content change
    modified_at: float  # test time of the last byte change
    digest: str = ""
    etag: str = ""


def locate(web: Web, url: str) -> tuple[int, int] | None:
    """(host index, page number) of a normal page's URL of this web, or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or port != web.port:
        return None
    i = host_index((parts.hostname or "").lower(), web.hosts)
    m = web.page_number(parts.path or "/") if i >= 0 and not parts.query else -1
    return (i, m) if m >= 0 else None


def page_version(web: Web, url: str, t: float) -> PageVersion | None:
    where = locate(web, url)
    if where is None:
        return None
    i, m = where
    s = state(web.seed, i, m, t, mix=web.living.mix if web.living is not None else CLASSIC)
    return PageVersion(url, s.cls, s.version, s.cosmetic, s.changed_at, s.modified_at)


def digest_at(web: Web, url: str, t: float) -> str | None:
    where = locate(web, url)
    if where is None or web.living is None:
        return None
    i, m = where
    return digest(state_bytes(web, i, m, state(web.seed, i, m, t, mix=web.living.mix)))


_EDITION = re.compile(rb'<p class="edition">Edition (-?[0-9]{1,20})</p>')


def edition_of(body: bytes) -> int:
    found = _EDITION.search(body, 0, 4096)
    return int(found.group(1)) if found else 0


def versions_at(web: Web, t: float, *, digests: bool = True) -> dict[str, PageVersion]:
    if web.living is None:
        raise ValueError("versions_at needs a living web")
    living = web.living
    static = Renderer(web, cache_size=0) if digests else None
    out: dict[str, PageVersion] = {}
    for i in range(web.hosts):
        for m in range(web.pages):
            url = web.url(i, web.page_path(m))
            s = state(web.seed, i, m, t, mix=living.mix)
            d = tag = ""
            if static is not None:
                body = state_bytes(web, i, m, s, static=static)
                d, tag = digest(body), etag(body)
            out[url] = PageVersion(url, s.cls, s.version, s.cosmetic, s.changed_at, s.modified_at, d, tag)
    return out


def living_truth(web: Web, t: float) -> dict[str, Any]:
    living = web.living
    if living is None:
        raise ValueError("living_truth needs a living web")
    pages = {
        url: {
            "class": v.cls,
            "version": v.version,
            "cosmetic": v.cosmetic,
            "changed_at": v.changed_at,
            "modified_at": v.modified_at,
            "digest": v.digest,
            "etag": v.etag,
        }
        for url, v in versions_at(web, t).items()
    }
    return {
        "at": t,
        "epoch": living.epoch,
        "rate": living.rate,
        "mix": living.mix,
        "pages": pages,
        "sitemaps": sitemap_truth(web),
    }
