"""Conditional GET (issue #23 point 2): the validators a re-fetch sends, and how they reach the transport.

A re-fetched URL's task carries the ETag and Last-Modified its stored copy came with (``UrlTask.etag``,
``UrlTask.last_modified``). The engine sets ``REQUEST_HEADERS`` around the first hop's exchange only (a
redirect target is another resource), and each transport adds those headers to its request. A context
variable rather than a parameter: the engine's hop loop, its retries and both transports stay as they are,
and robots.txt fetches (made outside that window) never carry them. A server that ignores the headers
answers 200 as before; the crawl's content digest then decides whether the page changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

from fetchers.records import UrlTask

REQUEST_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("crawlfleet_request_headers", default=None)


def conditional_headers(task: UrlTask) -> dict[str, str] | None:
    """If-None-Match / If-Modified-Since for ``task``, or None when it has no validators. Header values
    are the server's own, with line breaks refused (a hostile ETag must not inject a header)."""
    out = {}
    if task.etag and _clean(task.etag):
        out["If-None-Match"] = task.etag
    if task.last_modified and _clean(task.last_modified):
        out["If-Modified-Since"] = task.last_modified
    return out or None


def _clean(value: str) -> bool:
    return len(value) <= 1024 and "\r" not in value and "\n" not in value and "\x00" not in value
