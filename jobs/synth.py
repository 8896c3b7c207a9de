"""Synthetic fetch results and segments for tests and benchmarks (deterministic for a seed).

Pages look like a small site's: a navigation bar repeated on every page of a host (crawl locality:
the same URLs come back again and again), article links deeper into the host, a few links to other
hosts, some nofollow/javascript/mailto links and filler text up to ``page_bytes``. A fraction of
results are errors (404/500/timeouts) so host stats have something to count.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

from fetchers.records import FetchResult
from pipeline.urls import fingerprint

FILLER = "<p>" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. " * 6 + "</p>\n"


def host_name(i: int) -> str:
    return f"site{i:03d}.crawl.test"


def page_html(rng: random.Random, host: str, page: int, *, links: int, hosts: int, pages_per_host: int,
              page_bytes: int) -> str:
    nav = "".join(f'<li><a href="/section/{s}/">Section {s}</a></li>' for s in range(6))
    items = []
    for j in range(max(0, links - 6)):
        kind = j % 7
        target = rng.randrange(pages_per_host)
        if kind == 0 and hosts > 1:
            other = host_name(rng.randrange(hosts))
            items.append(f'<a href="http://{other}/p/{target}.html">Elsewhere {target}</a>')
        elif kind == 1:
            items.append(f'<a href="../p/{target}.html?ref=rel&amp;x=1">Related &amp; more {target}</a>')
        elif kind == 2:
            items.append(f'<a href="//{host}/p/{target}.html#c">Comments</a>')
        elif kind == 3:
            items.append(f'<a rel="nofollow" href="/login?next=/p/{target}.html">Log in</a>')
        elif kind == 4:
            items.append('<a href="javascript:void(0)">menu</a>' if j % 2 else '<a href="mailto:a@b.test">mail</a>')
        else:
            items.append(f'<a href="/p/{target}.html">Article {target}</a>')
    head = f"<!doctype html><html><head><title>{host} page {page}</title></head><body><ul>{nav}</ul>"
    body = [head]
    size = len(head)
    while size < page_bytes - 200 * len(items):
        body.append(FILLER)
        size += len(FILLER)
    body.append("<div>" + "\n".join(items) + "</div></body></html>")
    return "".join(body)


def make_results(pages: int, *, hosts: int = 10, links: int = 20, page_bytes: int = 20_000, seed: int = 0,
                 error_rate: float = 0.05) -> Iterator[FetchResult]:
    """``pages`` fetch results spread round-robin over ``hosts`` hosts (deterministic for ``seed``)."""
    rng = random.Random(seed)
    per_host = max(1, pages // max(1, hosts))
    for i in range(pages):
        host = host_name(i % hosts)
        n = i // hosts
        url = f"http://{host}/p/{n}.html"
        base = dict(url=url, url_id=fingerprint(url), depth=1 + n % 3, final_url=url, serial=i // 50,
                    fetcher_id=f"f{i % 3}", fetched_at=1_700_000_000.0 + i, ip="127.0.0.1")
        roll = rng.random()
        if roll < error_rate / 2:
            yield FetchResult(**base, error_class="timeout", error_message="read timeout")  # type: ignore[arg-type]
            continue
        if roll < error_rate:
            status = 404 if rng.random() < 0.7 else 500
            body = b"<html><body>not here</body></html>"
            yield FetchResult(**base, status=status, content_type="text/html", body=body,  # type: ignore[arg-type]
                              body_bytes=len(body), wire_bytes=len(body) + 200)
            continue
        html = page_html(rng, host, n, links=links, hosts=hosts, pages_per_host=per_host, page_bytes=page_bytes)
        body = html.encode()
        yield FetchResult(**base, status=200, content_type="text/html; charset=utf-8", body=body,  # type: ignore[arg-type]
                          body_bytes=len(body), wire_bytes=len(body) // 3 + 200,
                          headers={"content-type": "text/html; charset=utf-8"})


def write_segment(path: Path, results: Iterable[FetchResult]) -> int:
    """Write results as a segment (JSON lines); returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r.to_json(), separators=(",", ":")))
            fh.write("\n")
            n += 1
    return n
