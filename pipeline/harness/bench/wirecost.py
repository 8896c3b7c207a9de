"""What a 304 really costs on the wire against the 200 it replaced (#23 point 8: bytes saved by
conditional GET, measured, not estimated).

The testbed's access log has no sizes, and the fetcher's ``wire_bytes`` counts body bytes only (0 for a
304), so the freshness bench measures the two answers itself after each run, on the same testbed: per
normal page that the run's log shows answered 304, one plain GET and one conditional GET (the validators
the 200 carried) over a raw socket, with the crawler's own request headers (User-Agent, Accept,
Accept-Encoding). Each answer's size is every byte read: status line, headers and body as sent.
``saved_figures`` then sums, over the run's 304s, the measured 200 size of that URL against the measured
304 size, and the extra request bytes the validators cost on every conditional request.

The 200 is measured at the probe's instant, so its body is that page's current version, not the one the
304 stood for; the living web's versions of one page differ by a few bytes (a date, a counter), which is
the only approximation. A host that ignores validators answers the probe's conditional GET with a 200:
its URLs' costs say so (``status_conditional``) and are not counted as 304 savings (the log has no 304s
from it).

May import: pipeline, fetchers (bench room).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fetchers.body import ACCEPT_ENCODING
from pipeline.harness.testbed.livetruth import locate
from pipeline.harness.testbed.model import Web, host_index, ip_for_host
from pipeline.settings.crawling import DEFAULT_UA

MAX_RESPONSE = 8 << 20  # a probe answer larger than this is cut (the testbed's pages are far smaller)


@dataclass(frozen=True, slots=True)
class WireCost:
    """One URL's measured answers: bytes of the plain 200 and of the conditional answer (a 304 from a host
    honouring validators), and the request sizes without and with validators."""

    url: str
    status_plain: int
    bytes_plain: int
    status_conditional: int
    bytes_conditional: int
    request_plain: int
    request_conditional: int


def build_request(host: str, path: str, *, user_agent: str, validators: Mapping[str, str]) -> bytes:
    """The GET the crawler sends (its header set), plus ``validators`` (If-None-Match, ...)."""
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", f"User-Agent: {user_agent}", "Accept: */*",
             f"Accept-Encoding: {ACCEPT_ENCODING}", *(f"{k}: {v}" for k, v in validators.items()),
             "Connection: close"]  # fmt: skip
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """(status, lower-cased header names -> last value) of a response head; status 0 when malformed."""
    text = head.decode("latin-1")
    first, _, rest = text.partition("\r\n")
    parts = first.split(" ", 2)
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    headers: dict[str, str] = {}
    for line in rest.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers


async def _exchange(
    ip: str, port: int, request: bytes, *, timeout_s: float
) -> tuple[int, dict[str, str], int]:
    """Send ``request``, read the whole answer: (status, headers, bytes read)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout_s)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
        status, headers = parse_head(head[:-4])
        length = headers.get("content-length", "")
        if length.isdigit():
            body = await asyncio.wait_for(reader.readexactly(min(int(length), MAX_RESPONSE)), timeout_s)
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:  # no length: the server closes after the body (we asked for Connection: close)
            body = await asyncio.wait_for(reader.read(MAX_RESPONSE), timeout_s)
        return status, headers, len(head) + len(body)
    finally:
        writer.close()


async def _probe_one(web: Web, url: str, sem: asyncio.Semaphore, *, timeout_s: float) -> WireCost | None:
    parts = urlsplit(url)
    i = host_index((parts.hostname or "").lower(), web.hosts)
    if i < 0:
        return None
    host, path = parts.netloc, parts.path or "/"
    ip = ip_for_host(i, web.hosts)
    plain = build_request(host, path, user_agent=DEFAULT_UA, validators={})
    async with sem:
        try:
            s1, h1, n1 = await _exchange(ip, web.port, plain, timeout_s=timeout_s)
            validators = {k: h1[v] for k, v in (("If-None-Match", "etag"), ("If-Modified-Since", "last-modified"))
                          if v in h1}  # fmt: skip
            cond = build_request(host, path, user_agent=DEFAULT_UA, validators=validators)
            s2, _, n2 = await _exchange(ip, web.port, cond, timeout_s=timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return None
    return WireCost(url, s1, n1, s2, n2, len(plain), len(cond))


def probe_costs(
    web: Web, urls: Iterable[str], *, concurrency: int = 8, timeout_s: float = 10.0
) -> dict[str, WireCost]:
    """Measured wire costs of ``urls`` (each once; a URL whose probe failed is left out)."""

    async def main() -> list[WireCost | None]:
        sem = asyncio.Semaphore(concurrency)
        return await asyncio.gather(
            *(_probe_one(web, u, sem, timeout_s=timeout_s) for u in dict.fromkeys(urls))
        )

    return {c.url: c for c in asyncio.run(main()) if c is not None}


def log_url(web: Web, entry: Mapping[str, Any]) -> str:
    return f"http://{entry['host']}:{web.port}{entry['path']}"


def saved_figures(
    web: Web, log: Sequence[Mapping[str, Any]], costs: Mapping[str, WireCost], *, conditional_sent: int
) -> dict[str, Any]:
    """Over the 304s of ``log``: their measured wire bytes, what the 200s they replaced measure, the
    difference, and the validators' extra request bytes over ``conditional_sent`` conditional requests
    (the crawler's count, 304 or not). Only the web's normal pages count (the collection the bench
    measures; special pages such as huge ones are cut by the fetcher's body limit, so their full 200 is not
    what a re-fetch would cost); 304s of other URLs, or whose URL has no measured 304, are counted apart."""
    got_304 = got_200 = n = missing = 0
    for e in log:
        if int(e["status"]) != 304:
            continue
        url = log_url(web, e)
        c = costs.get(url) if locate(web, url) is not None else None
        if c is None or c.status_conditional != 304 or c.status_plain != 200:
            missing += 1
            continue
        n += 1
        got_304 += c.bytes_conditional
        got_200 += c.bytes_plain
    extra = [c.request_conditional - c.request_plain for c in costs.values() if c.status_conditional == 304]
    extra_mean = statistics.fmean(extra) if extra else 0.0
    request_overhead = int(conditional_sent * extra_mean)
    return {
        "status_304_measured": n,
        "status_304_unmeasured": missing,
        "wire_bytes_304": got_304,
        "wire_bytes_as_200": got_200,
        "mean_wire_bytes_304": round(got_304 / n, 1) if n else None,
        "mean_wire_bytes_200": round(got_200 / n, 1) if n else None,
        "validators_request_bytes": request_overhead,
        "wire_bytes_saved": got_200 - got_304 - request_overhead,
        "urls_probed": len(costs),
    }
