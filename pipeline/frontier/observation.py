"""What one fetch result tells the re-crawl schedule (issue #23): an ``Observation`` made from a
``FetchResult``. Pure. Shared by the embedded crawl's core (``pipeline.crawl.revisits``) and the fleet's
crawl-db update job (``jobs/mr_update_crawldb.py``), so both scales classify a fetch the same way.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from email.utils import parsedate_to_datetime

from fetchers.records import FetchResult
from pipeline.frontier.schedule import Observation


def content_digest(body: bytes) -> str:
    """``sha1:`` + base32, the WARC payload-digest form (as ``pipeline.links.change.content_digest``)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def http_time(value: str) -> float:
    """An HTTP date as epoch seconds; 0 when absent or unparseable (hostile headers are common)."""
    if not value:
        return 0.0
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0


def observe(result: FetchResult, *, simhash: Callable[[bytes, str], int] | None = None) -> Observation:
    """What ``result`` tells the schedule. A result without a usable response (a fetch error, a 5xx) is a
    failure; any other status is an answer whose body is digested (a 404 is a page that changed too)."""
    failed = bool(result.error_class) or result.status == 0 or result.status >= 500
    body = result.body
    digest = content_digest(body) if body or result.body_bytes == 0 else ""
    lm = result.headers.get("last-modified", "")
    return Observation(
        fetched_at=result.fetched_at,
        status=result.status,
        failed=failed,
        etag=result.headers.get("etag", "")[:1024],
        last_modified=lm[:200],
        digest="" if failed or result.status == 304 else digest,
        simhash=simhash(body, result.content_type) if simhash is not None and body and not failed else 0,
        modified_at=http_time(lm),
    )
