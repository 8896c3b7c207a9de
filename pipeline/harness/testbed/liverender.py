"""Replies of the living web (``testbed serve --mutate``): changing pages, sitemaps, validators, 304. Pure
given the wall time, which the caller passes in (the server reads its clock; tests inject one).

``LiveRenderer(web).reply(i, path, wall, if_none_match=..., if_modified_since=...)`` -> ``Reply``:

- normal pages: the body of their version at ``web.living.test_time(wall)`` (``living.py``): a content
  change redraws the page's text (same title, same links); a date/ad change inserts one line after
  ``<h1>``; static pages are the static web's bytes;
- sitemap files and sitemap-only pages (``sitemapgen.py``); everything else as the static web;
- every 200 carries ``ETag`` (``validators.etag`` of the body) and ``Last-Modified`` (the page's last
  byte change; for sitemap files, the time of the request, so only the ETag tells an unchanged one;
  other pages, ``living.STATIC_SINCE``: a year of test time before the epoch);
- a GET whose If-None-Match / If-Modified-Since matches gets ``304`` with the validators and no body,
  except on hosts where ``honours_conditional(i)`` is false (i % 6 == 5): they send validators and
  always answer 200, as servers that ignore conditional requests do.

``page_bytes(web, i, m, t)`` is the body of normal page m at test time t, for the truth.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from pipeline.harness.testbed.living import COSMETIC_CLASSES, DATED, MARKUP, STATIC_SINCE, PageState, state
from pipeline.harness.testbed.model import Rng, Web, host_name
from pipeline.harness.testbed.render import Renderer, Reply, _anchor
from pipeline.harness.testbed.sitemapgen import sitemap, w3c_datetime
from pipeline.harness.testbed.validators import etag, http_date, not_modified

_PRODUCTS = ("umbrellas", "kettles", "bicycles", "lamps", "teapots", "scarves", "gloves", "radios")


def honours_conditional(i: int) -> bool:
    """Whether host i answers 304 to a matching conditional GET (all but i % 6 == 5)."""
    return i % 6 != 5


def _cosmetic_line(cls: str, k: int, wall: float) -> str:
    if cls in (DATED, MARKUP):
        return f'<p class="updated">Updated {w3c_datetime(wall)}</p>\n'
    return f'<div class="ad">Sponsored: {_PRODUCTS[k % len(_PRODUCTS)]} at {k % 90 + 10}% off</div>\n'


_SYLLABLES = ("ka", "lo", "mi", "ren", "sta", "vo", "tur", "pel", "dan", "ise", "gor", "bru", "fen", "qui")
# 2,744 made-up words: a fresh text shares few word triples with another (a reader's change)
_VOCAB = tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES)
POOL_SIZE = 2048  # paragraphs; a page draws ~15-40, so two versions share about one


@functools.cache
def _pool() -> tuple[str, ...]:
    """Paragraphs of made-up words, built once (~0.2 s): a version picks paragraphs, not words, so a
    changed page costs a few dozen draws instead of thousands."""
    rng = Rng(0x11F3)
    below, vocab, n = rng.below, _VOCAB, len(_VOCAB)
    return tuple(
        "<p>" + " ".join([vocab[below(n)] for _ in range(60 + below(60))]) + ".</p>\n"
        for _ in range(POOL_SIZE)
    )


def _content_body(web: Web, i: int, m: int, version: int) -> bytes:
    """Page m's body at a content version: the static page's title, head, size and link lists, with
    every paragraph between them drawn anew (``_pool``) and an ``Edition N`` line."""
    rng = web.rng(i, -m - 1)
    size = rng.between(10_000, 28_000)
    head = f'<base href="{web.origin(i)}/">' if web.has_base(m) else ""
    title = f"{host_name(i)} {web.page_path(m)}"
    links = web.links(i, m)
    pool = _pool()
    below = Rng((web.seed * 1_000_003 + i) * 10_000_019 + m * 7_919 + version).below
    parts = [
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>{head}</head>\n'
        f'<body><h1>{title}</h1>\n<p class="edition">Edition {version}</p>\n'
    ]
    per = max(1, len(links) // 4)
    for start in range(0, len(links), per):
        parts.append("<ul>\n" + "".join([_anchor(x) for x in links[start : start + per]]) + "</ul>\n")
        parts.append(pool[below(POOL_SIZE)])
    total = sum(map(len, parts))
    while total < size:
        para = pool[below(POOL_SIZE)]
        parts.append(para)
        total += len(para)
    parts.append("</body></html>\n")
    return "".join(parts).encode()


def page_bytes(web: Web, i: int, m: int, t: float, *, static: Renderer | None = None) -> bytes:
    """The body of normal page m of host i at test time t (``web.living`` must be set)."""
    assert web.living is not None, "page_bytes needs a living web"
    return state_bytes(web, i, m, state(web.seed, i, m, t, mix=web.living.mix), static=static)


def state_bytes(web: Web, i: int, m: int, s: PageState, *, static: Renderer | None = None) -> bytes:
    """The body of normal page m of host i in state ``s``."""
    living = web.living
    assert living is not None, "page_bytes needs a living web"
    if s.version != 0:
        return _content_body(web, i, m, s.version)
    base = (static or Renderer(web, cache_size=1)).reply(i, web.page_path(m)).body
    if s.cls not in COSMETIC_CLASSES:
        return base
    line = _cosmetic_line(s.cls, s.cosmetic, living.wall_time(s.modified_at))
    return base.replace(b"</h1>\n", b"</h1>\n" + line.encode(), 1)


@dataclass(slots=True)
class LiveRenderer:
    web: Web
    cache_size: int = 4096
    static: Renderer = field(init=False)
    _bodies: functools._lru_cache_wrapper[tuple[bytes, str]] = field(init=False, repr=False)

    def change_robots(self, wall: float) -> float:
        """The changing robots.txt changes at ``wall`` unless it has already (``living.ROBOTS_CHANGE_HOST``);
        returns the wall time it changed at."""
        living = self.web.living
        assert living is not None
        living = living.robots_changing_at(wall)
        self.web = dataclasses.replace(self.web, living=living)
        return living.epoch + living.robots_change_s

    def __post_init__(self) -> None:
        if self.web.living is None:
            raise ValueError("LiveRenderer needs Web(..., living=Living(...))")
        self.static = Renderer(self.web, cache_size=self.cache_size)
        _pool()  # built before the first request, not during it
        self._bodies = functools.lru_cache(maxsize=self.cache_size)(self._body)

    def _body(self, i: int, m: int, s: PageState) -> tuple[bytes, str]:
        body = state_bytes(self.web, i, m, s, static=self.static)
        return body, etag(body)

    def reply(
        self,
        i: int,
        path: str,
        wall: float,
        *,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Reply:
        living = self.web.living
        assert living is not None
        t = living.test_time(wall)
        m = self.web.page_number(path)
        if m >= 0:
            s = state(self.web.seed, i, m, t, mix=living.mix)
            body, tag = self._bodies(i, m, s)
            modified = living.wall_time(s.modified_at)
            if self.web.lies(i):  # validators that never change (Living.lying_validators)
                tag, modified = f'"fixed-{i}-{m}"', living.epoch - 86_400.0
            base = Reply(200, body)
        else:
            base, modified = self._other(i, path, t)
            if base.status != 200 or base.delay_s:
                return base
            tag = etag(base.body)
        return self._validated(i, base, tag, modified, if_none_match, if_modified_since)

    def _other(self, i: int, path: str, t: float) -> tuple[Reply, float]:
        living = self.web.living
        assert living is not None
        since = living.wall_time(STATIC_SINCE)
        found = sitemap(self.web, i, path, t)
        if found is not None:  # regenerated on each request: only its ETag tells an unchanged file
            return Reply(200, found[0], found[1]), living.wall_time(t)
        if path in self.web.sitemap_only_paths(i):
            return self.static._leaf(i, path), since
        if path == "/robots.txt" and living.robots_changed(living.wall_time(t)):
            txt = self.web.robots_txt(i, changed=True)
            if txt is not None:
                return Reply(200, txt.encode(), "text/plain"), living.epoch + living.robots_change_s
        return self.static.reply(i, path), since

    @staticmethod
    def _validated(
        i: int,
        base: Reply,
        tag: str,
        modified: float,
        if_none_match: str | None,
        if_modified_since: str | None,
    ) -> Reply:
        validators = (("ETag", tag), ("Last-Modified", http_date(modified)))
        if honours_conditional(i) and not_modified(
            tag=tag, modified_wall=modified, if_none_match=if_none_match, if_modified_since=if_modified_since
        ):
            return Reply(304, b"", base.content_type, validators)
        return Reply(base.status, base.body, base.content_type, base.headers + validators, base.delay_s)
