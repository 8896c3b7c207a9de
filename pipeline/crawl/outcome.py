"""What one fetch result makes of its URL in the crawl db. Pure: a function of the result alone.

Shared by the crawl core (which records outcomes itself in the embedded crawl) and a fleet fetch node
(which records the outcomes of its own batch before it replies, so no page body crosses the broker).
"""

from __future__ import annotations

from fetchers.records import FetchResult
from fetchers.report import RETRY_LATER
from pipeline.storage.base import Outcome, PageRecord, UrlState

# Results that are not outcomes: the fetcher hands the URL back (BatchReport.unfinished) to be tried
# again after a back-off; the core decides when a URL has been retried enough to fail for good.
NOT_FINAL = RETRY_LATER


def is_final(result: FetchResult) -> bool:
    """True when ``result`` settles its URL (a page, a permanent error, a robots refusal)."""
    return result.error_class not in NOT_FINAL


def state_of(result: FetchResult) -> UrlState:
    if result.error_class == "robots_blocked":
        return UrlState.BLOCKED
    return UrlState.FAILED if result.error_class else UrlState.DONE


def outcome_of(result: FetchResult, *, keep_body: bool, packed: bytes = b"") -> Outcome:
    """The crawl-db outcome of a final ``result``; a DONE one carries its page.

    ``packed``: the body as ``pack_lz4`` compressed it, when the caller has it (the store keeps those
    bytes instead of compressing again). ``keep_body`` False keeps the page's metadata only.
    """
    state = state_of(result)
    page = None
    # A 304 answers a conditional re-fetch (issue #23): the stored copy stands, so no page replaces it.
    if state is UrlState.DONE and result.status != 304:
        page = PageRecord(
            url=result.url,
            url_id=result.url_id,
            final_url=result.final_url or result.url,
            status=result.status,
            content_type=result.content_type,
            body=result.body if keep_body else b"",
            fetched_at=result.fetched_at,
            headers=result.headers,
            ip=result.ip,
            serial=result.serial,
            truncated=result.truncated,
            redirects=result.redirects,
            body_lz4=packed if keep_body else b"",
        )
    return Outcome(
        url=result.url,
        url_id=result.url_id,
        state=state,
        status=result.status,
        fetched_at=result.fetched_at,
        error=f"{result.error_class}: {result.error_message}" if result.error_class else "",
        page=page,
    )
