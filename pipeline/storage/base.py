"""The storage interface: crawl database, page store, pending set, seen-set and serial ids.

Two implementations pass the same contract suite (tests/contract/): SQLite (the embedded default)
and HBase over Thrift. Every method that touches many URLs takes a sequence so that a remote store
makes one round trip per call, never one per URL (S5: dedup traffic dominates).

Exactly-once: ``record_results`` applies a result only while its URL is still PENDING, so a replayed
or re-delivered result never stores a page twice; it returns how many it applied.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Revisit:
    """A URL's re-crawl state in the crawl db (issue #23): when to fetch it next and what the last fetch saw.

    ``next_fetch`` and ``fetched_at`` are epoch seconds, ``interval`` seconds. ``etag``/``last_modified``
    are the validators the server sent (replayed as If-None-Match / If-Modified-Since); ``digest`` the exact
    content digest and ``simhash`` the near-duplicate signature of the stored copy. ``changes``/``fetches``
    count the fetches that found the page changed, and all fetches. Computed by
    ``pipeline.frontier.schedule``; the store only keeps it.
    """

    next_fetch: float
    interval: float
    etag: str = ""
    last_modified: str = ""
    digest: str = ""
    simhash: int = 0
    changes: int = 0
    fetches: int = 0
    fetched_at: float = 0.0


class UrlState(enum.IntEnum):
    PENDING = 0
    DONE = 1  # fetched, any HTTP status
    FAILED = 2  # gave up after retries (network error, bad DNS, SSRF refusal, ...)
    BLOCKED = 3  # robots.txt forbids it
    SKIPPED = 4  # dropped by a limit discovered at fetch time (max pages per host, ...)


# A fetcher took the URL and finished it: what --max-pages and scope.max_pages_per_host count as pages.
SETTLED_STATES = (UrlState.DONE, UrlState.FAILED, UrlState.BLOCKED)


# ``discovered_from`` of the URLs a crawl fetches to find pages rather than as pages: a seed site's
# robots.txt read for its Sitemap: lines, and the sitemap files (pipeline.crawl.sitemapfeed,
# jobs/sitemap_links.py). ``scope.max_pages_per_host`` counts pages, so these are never charged to it.
ROBOTS_SOURCE = "sitemaps:robots"
SITEMAP_SOURCE = "sitemaps"
INFRA_SOURCES = (ROBOTS_SOURCE, SITEMAP_SOURCE)


def settled(counts: Mapping[str, int]) -> int:
    """The URLs ``Store.counts()`` shows settled (``SETTLED_STATES``)."""
    return sum(counts.get(s.name.lower(), 0) for s in SETTLED_STATES)


@dataclass(slots=True)
class UrlRecord:
    """One row of the crawl database. ``url_id`` must be ``pipeline.urls.fingerprint(url)``."""

    url: str
    url_id: int
    host: str
    depth: int
    state: UrlState = UrlState.PENDING
    discovered_from: str = ""
    inlinks: int = 0
    fetched_at: float = 0.0
    status: int = 0
    signature: str = ""
    retries: int = 0
    error: str = ""
    # The re-crawl state, when the URL has been fetched with re-crawling on (``pending`` returns it for a
    # due URL, so the fetch can be conditional); None otherwise.
    revisit: Revisit | None = None
    # Redirects that led here from a linked URL (``fetchers.records.UrlTask.redirect_hops``): 0 for a link.
    # A URL keeps the count of its first discovery (the seen-set decides which discovery is kept).
    redirect_hops: int = 0
    # The meta of the plugin link that added the URL (fetchers/linkmeta.py: JSON text; "" = none). Written
    # with the row, never after: the first discovery's stands, as ``redirect_hops`` does.
    link_meta: str = ""

    @property
    def infra(self) -> bool:
        """A robots.txt or sitemap file, fetched to find pages (``INFRA_SOURCES``): not charged to the host cap."""
        return self.discovered_from in INFRA_SOURCES


@dataclass(slots=True)
class PageRecord:
    """One fetched response as kept by the page store."""

    url: str
    url_id: int
    final_url: str
    status: int
    content_type: str
    body: bytes
    fetched_at: float
    headers: dict[str, str] = field(default_factory=dict)
    ip: str = ""
    serial: int = 0
    truncated: bool = False
    redirects: list[str] = field(default_factory=list)
    # ``body`` as the journal compressed it (lz4.block, size stored), when the crawl has it at hand: a
    # store may keep these bytes instead of compressing again. Not part of the page's identity.
    body_lz4: bytes = field(default=b"", compare=False, repr=False)


@dataclass(slots=True)
class Outcome:
    """What became of one URL: the new state, the crawl-db fields, and the page if one was kept."""

    url: str
    url_id: int
    state: UrlState
    status: int = 0
    fetched_at: float = 0.0
    signature: str = ""
    error: str = ""
    retries: int = 0
    page: PageRecord | None = None
    # The URL's new re-crawl state (None: not scheduled; the URL stays DONE for good). With a revisit
    # and no page (a 304, or an unchanged body), the stored page is kept as it is.
    revisit: Revisit | None = None


class Store(ABC):
    """Crawl state. Implementations are used from one thread at a time."""

    # --- crawl database and seen-set -------------------------------------------------------------
    @abstractmethod
    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        """Insert the records whose URL is unknown (as PENDING) and return exactly those.

        Known URLs only get their in-link count raised by the record's ``inlinks`` (at least 1), or,
        with ``count_inlinks=False``, are not written at all (a look-up: for callers that keep no
        in-link counts, whose writes to a large seen-set would be random-page writes for nothing).
        Duplicates inside ``records`` count once. One round trip for the whole sequence.
        """

    @property
    def blind_inlinks(self) -> bool:
        """True when ``raise_inlinks`` writes without reading, so callers may hold increments back and send
        them once per URL (a store whose counts are tagged per link-jobs round: HBase)."""
        return False

    def raise_inlinks(self, records: Sequence[UrlRecord]) -> None:
        """Raise the in-link counts of known URLs by each record's ``inlinks`` (at least 1).

        For URLs the caller knows the store holds (a seen-cache hit). The default is ``add_urls``.
        """
        self.add_urls(records, count_inlinks=True)

    @abstractmethod
    def seen(self, urls: Sequence[str]) -> set[str]:
        """The subset of ``urls`` the crawl database knows, in one round trip."""

    @abstractmethod
    def get_url(self, url: str) -> UrlRecord | None: ...

    def get_urls(self, urls: Sequence[str]) -> dict[str, UrlRecord]:
        """The rows of those of ``urls`` the crawl db knows. One round trip where the store allows (the
        default asks ``get_url`` for each)."""
        out = {}
        for url in urls:
            rec = self.get_url(url)
            if rec is not None:
                out[url] = rec
        return out

    def iter_url_ids(self) -> Iterator[int]:
        """Fingerprints of known URLs, to warm a local seen-table at start-up; any order.

        Never a fingerprint the store lacks; it may yield fewer than all of them (a remote seen-set
        too large to pull yields none), since the table then only asks the store more often.
        """
        return iter(())

    # --- pending set -----------------------------------------------------------------------------
    @abstractmethod
    def pending(
        self, host: str, limit: int, *, after: tuple[int, str] | None = None, refetches_only: bool = False
    ) -> list[UrlRecord]:
        """Up to ``limit`` PENDING URLs of ``host``, shallowest first (then by URL).

        ``after`` is the (depth, url) of the last record already taken, for paging without state changes.
        ``refetches_only``: only URLs ``requeue_due`` made PENDING again (each with its ``revisit``) and
        PENDING robots.txt and sitemap files (``UrlRecord.infra``), in a store-defined order, never a new
        page; what a host at ``scope.max_pages_per_host`` may still fetch in a re-crawl. Both stores read
        indexes of just those, so the read never walks the new pages a capped host will not take.
        """

    @abstractmethod
    def pending_hosts(self, limit: int = 1_000_000) -> list[tuple[str, int]]:
        """Hosts that have PENDING URLs, with their counts (used to rebuild the frontier on resume)."""

    @abstractmethod
    def taken_per_host(self) -> dict[str, int]:
        """URLs per host that a fetcher took and finished (DONE, FAILED or BLOCKED) or that are PENDING
        again as due re-fetches, hosts with none left out, robots.txt and sitemap files (``UrlRecord.infra``)
        not counted: what ``scope.max_pages_per_host`` has counted so far (distinct pages), for a resumed
        crawl or restarted dispatcher. One pass over the crawl db
        (resume only, and only with a cap)."""

    # --- results ---------------------------------------------------------------------------------
    @abstractmethod
    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        """Apply the outcomes whose URL is still PENDING (state, fields, page); return how many applied."""

    @abstractmethod
    def get_page(self, url: str) -> PageRecord | None: ...

    # --- re-crawling (issue #23) -----------------------------------------------------------------
    @abstractmethod
    def requeue_due(self, now: float, limit: int, *, hosts: Mapping[str, int] | None = None) -> dict[str, int]:
        """Make up to ``limit`` DONE URLs whose ``Revisit.next_fetch <= now`` PENDING again, earliest due
        first; return how many per host. With ``hosts``, only URLs of those hosts, at most ``hosts[h]``
        of host h. Their revisit stays (``pending`` returns it). Idempotent: a URL already PENDING is not
        counted again."""

    @abstractmethod
    def get_revisit(self, url: str) -> Revisit | None:
        """The URL's stored re-crawl state, or None."""

    @abstractmethod
    def put_revisits(self, items: Sequence[tuple[str, Revisit]]) -> int:
        """Write the re-crawl state of known URLs, whatever their state (the fleet's crawl-db update job
        schedules URLs a fetch node already recorded); unknown URLs are skipped. Returns how many were
        written. One round trip per call where the store allows."""

    @abstractmethod
    def iter_pages(self) -> Iterator[PageRecord]: ...

    def reconcile_counts(self) -> None:  # noqa: B027 - most stores keep exact counts
        """Make ``counts`` exact again after faults. A store whose counters change in the same transaction
        as the rows they count (SQLite) has nothing to do; one that keeps them by increments (HBase) may
        have drifted in the faults a resume follows, and recounts (one scan)."""

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Number of URLs per state name (lower-case), plus 'pages' for stored pages."""

    # --- serial ids and metadata -----------------------------------------------------------------
    @abstractmethod
    def reserve_serials(self, n: int) -> range:
        """Reserve ``n`` serial ids above every id ever reserved before, durably (survives restarts)."""

    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def put_meta(self, key: str, value: str) -> None: ...

    # --- shared records for processes that coordinate (leases, link-round claims) ----------------
    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        """Set ``key`` to ``new`` only if it holds ``expected`` now (None: only if absent), atomically
        against every other process using this store; True when it was set. A reply lost to a connection
        failure may be retried and then answer False for a swap that happened: callers put a token of
        their own in ``new`` and read the key back (``pipeline.storage.leases`` does)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no shared records")

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        """``(key, value)`` of every meta key starting with ``prefix``, in key order."""
        raise NotImplementedError(f"{type(self).__name__} keeps no shared records")

    def delete_meta(self, keys: Sequence[str]) -> None:
        """Remove these meta keys (absent ones are ignored)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no shared records")

    def flush(self) -> None:  # noqa: B027 - optional for stores that write through
        """Make every write so far durable."""

    @abstractmethod
    def close(self) -> None: ...
