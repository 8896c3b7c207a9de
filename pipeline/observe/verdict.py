"""What a finished crawl says of itself in one line when it fetched nothing: a failure, the host cap, or a
re-crawl with nothing due yet.

Pure functions of a crawl's summary (the ``CrawlCore`` summary both scales print), so that
``crawlfleet crawl`` and ``crawlfleet dispatcher`` judge an empty run alike.
"""

from __future__ import annotations

from typing import Any

from pipeline.observe.errors import top_errors


def zero_pages(summary: dict[str, Any]) -> str:
    """Why a finished, not interrupted crawl fetched nothing, in one line; '' when it fetched a page."""
    if summary.get("pages_fetched") or summary.get("interrupted"):
        return ""
    errors = dict(summary.get("errors_by_class") or {})
    if summary.get("robots_blocked"):
        errors.setdefault("robots_blocked", int(summary["robots_blocked"]))
    return f"crawl: no page fetched; top errors: {top_errors(errors)}"


def held_by_cap(summary: dict[str, Any], *, cap: int) -> str:
    """Why a finished crawl fetched nothing when the host cap is the reason, in one line; '' otherwise.

    Every host with URLs left has taken ``scope.max_pages_per_host`` URLs (in this run or the crawl's
    earlier ones) and no URL it took is due again: the crawl did as told, so this is no failure
    (``zero_pages`` reports the rest)."""
    frontier = summary.get("frontier") or {}
    waiting = int((summary.get("store") or {}).get("pending", 0))
    if summary.get("pages_fetched") or summary.get("interrupted") or summary.get("errors_by_class"):
        return ""
    if not (cap and waiting and frontier.get("hosts_capped")):
        return ""
    return (f"crawl: nothing to fetch: {frontier['hosts_capped']} host(s) have taken scope.max_pages_per_host "
            f"= {cap} URLs and {waiting} URL(s) wait for a larger cap; raise it to go on")  # fmt: skip


def nothing_due(summary: dict[str, Any], *, continuous: bool) -> str:
    """Why a finished re-crawl run fetched nothing when no URL came due, in one line; '' otherwise. Its
    URLs are all fetched and scheduled: the crawl did as told, so this is no failure. ``continuous``: the
    run waited for due URLs until its stop file or Ctrl-C."""
    recrawl = summary.get("recrawl") or {}
    store = summary.get("store") or {}
    if summary.get("pages_fetched") or summary.get("interrupted") or summary.get("errors_by_class"):
        return ""
    if not recrawl or recrawl.get("requeued") or store.get("pending"):
        return ""
    if continuous:
        return "crawl: stopped before any URL came due for a re-fetch (every URL is fetched and scheduled)"
    return ("crawl: nothing is due for a re-fetch yet (every URL is fetched and scheduled); "
            "run with --continuous to wait for the next one")
