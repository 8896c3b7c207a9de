"""Turn a (host, path) of the model into a response: status, headers and body bytes. Pure.

Bodies are assembled from a few pre-generated filler blocks, so a 10-30 KB page costs a handful of
string joins. ``Renderer.reply`` keeps a bounded LRU of rendered replies; nothing goes to disk.
Slow and streamed answers are only *described* here (``Reply.delay_s``); the server does the I/O.
"""

from __future__ import annotations

import functools
import gzip
import random
from dataclasses import dataclass, field

from pipeline.harness.testbed import products
from pipeline.harness.testbed.model import N_SPECIAL, Link, Web, host_name

HTML = "text/html; charset=utf-8"
_WORDS = [
    "crawler",
    "frontier",
    "politeness",
    "fetch",
    "queue",
    "batch",
    "robots",
    "sitemap",
    "anchor",
    "domain",
    "resolver",
    "cache",
    "latency",
    "throughput",
    "heartbeat",
    "quota",
    "slave",
    "master",
    "dispatcher",
    "partition",
    "shard",
    "replica",
    "lease",
    "canonical",
    "fragment",
    "redirect",
    "status",
    "header",
    "encoding",
    "charset",
    "payload",
    "archive",
    "record",
    "index",
]


def _make_blocks(n: int = 48, size: int = 900) -> tuple[str, ...]:
    rng = random.Random(20240601)
    blocks = []
    for _ in range(n):
        words: list[str] = []
        length = 0
        while length < size:
            w = rng.choice(_WORDS)
            words.append(w)
            length += len(w) + 1
        blocks.append("<p>" + " ".join(words) + ".</p>\n")
    return tuple(blocks)


BLOCKS = _make_blocks()


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = HTML
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0


def _anchor(link: Link) -> str:
    rel = ' rel="nofollow"' if link.nofollow else ""
    return f'<li><a href="{link.href}"{rel}>{link.path}</a></li>\n'


def _page(
    title: str, links: list[Link], *, filler_seed: int, size: int, head_extra: str = "", body_extra: str = ""
) -> str:
    """An HTML page: the links in four lists between filler paragraphs, padded to ~``size`` chars."""
    parts = [
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>{head_extra}</head>\n'
        f"<body><h1>{title}</h1>\n{body_extra}"
    ]
    k = filler_seed
    n_blocks = len(BLOCKS)
    per = max(1, len(links) // 4)
    for start in range(0, len(links), per):
        parts.append("<ul>\n" + "".join([_anchor(x) for x in links[start : start + per]]) + "</ul>\n")
        parts.append(BLOCKS[k % n_blocks])
        k = k * 31 + 7
    total = sum(map(len, parts))
    while total < size:
        block = BLOCKS[k % n_blocks]
        parts.append(block)
        total += len(block)
        k = k * 31 + 7
    parts.append("</body></html>\n")
    return "".join(parts)


@dataclass(slots=True)
class Renderer:
    """Renders the pages of one ``Web``; ``reply`` is memoised in an LRU of ``cache_size`` entries."""

    web: Web
    cache_size: int = 4096
    _cached: functools._lru_cache_wrapper[Reply] = field(init=False, repr=False)
    _big: bytes | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._cached = functools.lru_cache(maxsize=self.cache_size)(self._render)

    def reply(self, i: int, path: str) -> Reply:
        """The reply for ``path`` (path + query, as requested) on host ``i``."""
        return self._cached(i, path)

    # --- dispatch ------------------------------------------------------------------------
    def _render(self, i: int, path: str) -> Reply:
        web = self.web
        m = web.page_number(path)
        if m >= 0:
            return self._normal(i, m)
        if path == "/robots.txt":
            txt = web.robots_txt(i)
            if txt is None:
                return _not_found()
            return Reply(200, txt.encode(), "text/plain; charset=utf-8")
        f = web.features(i)
        head, _, rest = path[1:].partition("/")
        k = int(rest) if rest.isdigit() and len(rest) == 1 and int(rest) < N_SPECIAL else -1
        if head in ("private", "agentonly") and k >= 0 and (f.private or f.agent_group):
            return self._leaf(i, path)
        if f.redirects:
            if head == "r" and k >= 0:
                return _redirect(301, web.url(i, f"/r2/{k}"))
            if head == "r2" and k >= 0:
                return _redirect(302, f"/moved/{k}")
            if head == "moved" and k >= 0:
                return self._leaf(i, path)
            if path == "/loop/a":
                return _redirect(302, "/loop/b")
            if path == "/loop/b":
                return _redirect(302, web.url(i, "/loop/a"))
        if f.statuses and k >= 0:
            if head == "missing":
                return _not_found()
            if head == "error":
                return Reply(500, b"<html><body>internal error</body></html>")
        if f.slow and path == "/slow":
            r = self._leaf(i, path)
            return Reply(200, r.body, delay_s=1.5)
        if f.slow and path == "/gzip":
            body = self._leaf(i, path).body
            return Reply(200, gzip.compress(body, mtime=0), headers=(("Content-Encoding", "gzip"),))
        if f.big and path == "/big":
            return Reply(200, self._big_body(i))
        if f.big and path == "/file.bin":
            data = random.Random(i).randbytes(100 * 1024)
            return Reply(200, data, "application/octet-stream")
        if f.latin1 and path == "/latin1":
            return self._latin1(i)
        if f.calendar and head == "calendar":
            return self._calendar(i, rest)
        if f.nofollow:
            if head in ("nf", "mnf") and k >= 0:
                return self._leaf(i, path)
            if path == "/metanf":
                html = _page(
                    f"{host_name(i)} meta nofollow",
                    web.metanf_links(i),
                    filler_seed=i,
                    size=4000,
                    head_extra='<meta name="robots" content="nofollow">',
                )
                return Reply(200, html.encode())
        return _not_found()

    # --- page kinds ----------------------------------------------------------------------
    def _normal(self, i: int, m: int) -> Reply:
        web = self.web
        rng = web.rng(i, -m - 1)
        size = rng.between(10_000, 28_000)
        head = f'<base href="{web.origin(i)}/">' if web.has_base(m) else ""
        title = f"{host_name(i)} {web.page_path(m)}"
        body = ""
        if web.products:
            extra, body = products.markup(web, i, m)
            head += extra
        html = _page(title, web.links(i, m), filler_seed=rng.below(1 << 20), size=size, head_extra=head,
                     body_extra=body)  # fmt: skip
        return Reply(200, html.encode())

    def _leaf(self, i: int, path: str) -> Reply:
        html = _page(f"{host_name(i)} {path}", self.web.leaf_links(i), filler_seed=len(path) + i, size=3000)
        return Reply(200, html.encode())

    def _big_body(self, i: int) -> bytes:
        if self._big is None:
            html = _page(f"{host_name(i)} /big", self.web.leaf_links(i), filler_seed=i, size=5 * 1024 * 1024)
            self._big = html.encode()
        return self._big

    def _latin1(self, i: int) -> Reply:
        links = "".join(_anchor(x) for x in self.web.leaf_links(i))
        text = (
            '<!DOCTYPE html>\n<html><head><meta charset="iso-8859-1"><title>Café crème</title></head>\n'
            f"<body><h1>Déjà vu à {host_name(i)}</h1><p>Señor Müller ½ £ ¥ ©</p><ul>\n{links}</ul>\n"
            "<p>Ærøskøbing · naïve façade</p></body></html>\n"
        )
        return Reply(200, text.encode("iso-8859-1"), "text/html; charset=iso-8859-1")

    def _calendar(self, i: int, rest: str) -> Reply:
        y, _, mo = rest.partition("/")
        if not (y.isdigit() and mo.isdigit() and 1 <= int(mo) <= 12 and len(y) <= 6):
            return _not_found()
        ny, nm = Web.calendar_next(int(y), int(mo))
        links = [Link(f"/calendar/{ny}/{nm}", i, f"/calendar/{ny}/{nm}"), Link("/", i, "/")]
        html = _page(f"{host_name(i)} calendar {y}-{mo}", links, filler_seed=int(mo), size=2000)
        return Reply(200, html.encode())


def _redirect(status: int, location: str) -> Reply:
    return Reply(status, b"", headers=(("Location", location),))


_NOT_FOUND = b"<html><body>not found</body></html>"


def _not_found() -> Reply:
    return Reply(404, _NOT_FOUND)
