"""Re-crawling (issue #23): whether fetched URLs come back, how often, and how re-fetches are made.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``. Off by default:
a crawl fetches each URL once and ends, as before. The schedule's rules live in
``pipeline.frontier.schedule`` (Nutch's AdaptiveFetchSchedule); these are its knobs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecrawlSettings:
    enabled: bool = False  # schedule every fetched URL for a re-fetch (also on with `crawl --continuous`)
    # Do not end when nothing is pending: wait for due URLs until Ctrl-C or the stop file (`--continuous`).
    continuous: bool = False
    adaptive: bool = True  # false: uniform revisiting, every URL every initial_interval_s
    # With adaptive: "poisson" (the default: each page's change rate estimated from its fetches and its
    # Last-Modified, freshness-optimal intervals that spend the host's budget and give up on pages changing
    # faster than it can follow; pipeline.frontier.schedule, docs/bench/freshness.md says why) or "nutch"
    # (Nutch's AdaptiveFetchSchedule: unchanged stretches, changed shrinks the interval).
    policy: str = "poisson"
    # Poisson policy: fetches per second one host's re-fetches spend (0 = what uniform revisiting every
    # initial_interval_s would spend: the host's URLs / initial_interval_s).
    host_budget_rps: float = 0.0
    # Poisson policy: windows between fetches seen before a page's own rate is used (0: from its first
    # fetch, when Last-Modified dates it; until then every initial_interval_s)
    min_observations: int = 0
    # When the frontier runs dry, bring back the URLs due soonest before they are due, so re-crawling
    # spends the whole fetch budget (uniform revisiting then runs at the budget's own cycle).
    work_conserving: bool = False
    initial_interval_s: float = 3600.0  # a newly fetched URL's first interval
    min_interval_s: float = 60.0
    max_interval_s: float = 30 * 86400.0
    inc_rate: float = 0.4  # unchanged fetch: interval *= 1 + inc_rate
    dec_rate: float = 0.2  # changed fetch: interval *= 1 - dec_rate
    # Changed pages: count from when the page changed (Last-Modified / sitemap lastmod) rather than from
    # the fetch, so the next fetch is not later than the page's own rhythm (Nutch's sync delta).
    sync_delta: bool = True
    sync_delta_rate: float = 0.3
    failed_interval_s: float = 600.0  # a failed re-fetch is tried again after this long (not adapted)
    # Per-host or per-pattern bounds, each "PATTERN=MIN:MAX" in seconds: PATTERN is a host
    # ("news.example.org"), a domain with its subdomains ("*.example.org") or "re:REGEX" on the URL. The
    # first match wins; MIN = MAX pins the interval.
    overrides: tuple[str, ...] = ()
    conditional_get: bool = True  # send If-None-Match / If-Modified-Since on re-fetches
    # Per-host trust in change signals (pipeline/frontier/signals.py): full GETs for a host whose 304s hid
    # changes, plain GETs where validators are ignored, an audit re-fetch without them now and then, and
    # a trusted sitemap's listed pages waiting for their lastmod. false: validators always, nothing skipped.
    signal_trust: bool = True
    # Read robots.txt Sitemap: lines and the sitemaps they name (pipeline/crawl/sitemapfeed.py): pages
    # listed only there are crawled, lastmod makes a stored page due. The embedded crawl then keeps the
    # bodies of text/plain, XML and gzip responses.
    sitemaps: bool = True
    # robots.txt and sitemap files come back on their own schedule, every this many seconds (not the pages')
    sitemap_interval_s: float = 3600.0
    # Near-duplicate: a re-fetched page whose simhash is within this many bits of the stored copy's
    # counts as unchanged (0: only an identical digest does).
    simhash_bits: int = 0
    # Budget rule: at most this share of each batch's URLs are re-fetches while new URLs wait; the rest is
    # left to new URLs, and either takes the whole batch when the other has none.
    recrawl_share: float = 0.5
    requeue_batch: int = 1000  # due URLs moved back to pending per check
    check_interval_s: float = 1.0  # how often the crawl looks for due URLs
    stop_file: str = ""  # `crawl --continuous` ends cleanly once this file exists

    @property
    def on(self) -> bool:
        """Fetched URLs come back when due: re-crawling was asked for, or by a continuous crawl."""
        return self.enabled or self.continuous
