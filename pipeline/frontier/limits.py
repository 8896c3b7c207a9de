"""What the frontier may do (``FrontierLimits``) and the order a refill loads a host's URLs in.

Priority (issue #23 point 5, ``FrontierLimits.priority``): a refill orders the URLs it loads into a host's
window by score = the URL's in-link count as the crawl db knows it (``UrlRecord.inlinks``; the fleet's link
jobs count them in their crawl-db update step), highest first, depth as the tie-break, then the store's
order (one stable sort per refill by ``refill_order``, O(log window) per URL; the window stays the compact
``HostQueue``, so RAM per URL is unchanged). The store hands a refill the host's shallowest
``window_per_host + 1`` pending URLs (``Store.pending``'s contract), so the score orders exactly a host
whose pending set fits its window, and within that look-ahead otherwise. URLs ``Frontier.add`` appends to
an open window (new links, one in-link each) queue behind it in arrival order; scores are re-read at the
next refill. Priority picks *which* of a host's URLs a lease takes, never *when*: the host's politeness
clock, its single lease, per-IP limits and the active-host set are the same as without it.

How priority composes with the re-crawl budget rule (``pipeline.crawl.revisits.Revisits.due``): that rule
decides how many due URLs come back to the pending set per check (``recrawl_share`` of ``requeue_batch``
while new URLs wait); once pending, a due URL is one more URL of its host and takes its place in the window
by the same score as a new one (a re-fetched page keeps its in-link count, so an important page is
re-fetched before an unimportant new one of the same host, and new URLs of other hosts are not delayed).

The host cap (``max_pages_per_host``) counts distinct URLs: a due URL's re-fetch is not charged, and with
``recrawl`` a capped host keeps re-fetching the URLs it took (frontier.py says how its refills read them).

May import: pipeline.storage (records). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.storage.base import UrlRecord


@dataclass(frozen=True, slots=True)
class FrontierLimits:
    window_per_host: int = 256  # URLs of one host kept in RAM
    max_urls_per_host_batch: int = 64  # a batch takes at most this many URLs from one host
    hosts_per_ip: int = 4  # hosts of one IP leased at once (per-IP politeness)
    max_pages_per_host: int = 0  # 0 = unlimited
    # Due URLs come back (re-crawling on): a host at max_pages_per_host keeps re-fetching the URLs it took.
    recrawl: bool = False
    active_hosts: int = 0  # hosts worked on at once, at least (more when none is ready); 0 = all
    session_urls: int = 0  # an active host with others waiting yields its place after this many; 0 = never
    # A refill orders a host's window by in-link count, then depth (False: the store's order).
    priority: bool = True


DEFAULT_LIMITS = FrontierLimits()  # frozen: one shared instance is safe


def refill_order(r: UrlRecord) -> tuple[int, int]:
    """The refill's sort key: more in-links first, then shallower."""
    return (-r.inlinks, r.depth)
