"""The crawl's side of redirects: a redirect target goes through the seen-set and scope like a link.

Two ways a hop is decided (``fetchers.redirects``):

- in the embedded crawl the fetcher runs in the crawl's process and asks ``RedirectBook.gate`` before
  each hop: a target the crawl has never seen, in scope and no trap, is followed and *claimed* (links
  to it found meanwhile are dropped); any other target stops the chain, and the redirect is recorded
  as its URL's outcome with ``final_url`` = the target, without a request;
- a fetch process or a fleet node has no seen-set at hand: it never follows (``stop_at_redirects``),
  and the target goes through the link path here (or in the link jobs, ``jobs.logic``), like any link.
  The target carries the chain's hop count (``target_hops``), so a chain of distinct redirects ends
  after ``fetch.max_redirects`` hops here too (``too_many_redirects``), not at the host's page cap, and
  the link meta of the URL the chain began at (a plugin's ``Link.meta`` follows redirects, as Scrapy's
  ``Request.meta`` does).

Either way, once a chain's result is final, every URL it requested (its hops and the page it ended
on) is written to the crawl db as settled (``SKIPPED``, the reason in ``error``): a later link to one
of them, before or after a resume, is known and never fetched again. ``split`` is pure; the book's
state is the claims of chains in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fetchers.records import FetchResult, UrlTask
from fetchers.redirects import stopped_target, target_hops
from pipeline.storage.base import Outcome, UrlRecord, UrlState
from pipeline.urls import Scope, TrapRules, fingerprint, host_of, trap_reason


@dataclass(frozen=True, slots=True)
class ChainUrls:
    """The URLs a final result's redirect chain touched, besides its own: ``requested`` (hops and the
    page the chain ended on) and ``target`` (a hop not followed: to go through the link path)."""

    requested: tuple[str, ...] = ()
    target: str = ""


def split(result: FetchResult) -> ChainUrls:
    """Which URLs of ``result``'s chain were requested, and which target was left to the link path."""
    chain = result.redirects
    if not chain:
        return ChainUrls()
    final = result.final_url or result.url
    target = stopped_target(result)
    requested = [u for u in chain[1:] if u != result.url]
    if not target and result.status and final != result.url and final not in requested:
        requested.append(final)  # the page (or error page) the chain ended on
    return ChainUrls(tuple(dict.fromkeys(requested)), target)


@dataclass(slots=True)
class RedirectBook:
    """Claims of redirect targets being fetched, and the records a finished chain leaves.

    ``known(url_id, url)``: the seen-set and the store know the URL; ``publish()``: buffered
    discoveries reach the seen-set (so ``known`` sees them). Both belong to the crawl core."""

    scope: Scope
    traps: TrapRules
    known: Callable[[int, str], bool]
    publish: Callable[[], None]
    # Told of each hop followed: (task, the chain's URLs answered so far, the target about to be asked)
    # (pipeline/crawl/hopjournal.py journals it, so a kill between hops costs only the hop in flight).
    on_hop: Callable[[UrlTask, list[str], str], None] | None = None
    _claims: dict[int, int] = field(default_factory=dict)  # target url_id -> url_id of the claiming task
    _by_task: dict[int, list[int]] = field(default_factory=dict)
    _targets: dict[int, list[str]] = field(default_factory=dict)  # task url_id -> targets followed, in order

    def gate(self, task: UrlTask, target: str) -> bool:
        """``fetchers.redirects.RedirectGate``: follow ``target`` only if the crawl would fetch it as a
        new link (in scope, no trap, never seen, not claimed by another chain); claim it then. (The
        fetcher refuses a target out of its scope before asking: ``fetchers.redirects.next_hop``.)"""
        if not self.scope.allows(target) or trap_reason(target, self.traps):
            return False
        tid = fingerprint(target)
        if tid in self._claims:
            return False
        self.publish()
        if self.known(tid, target):
            return False
        self._claims[tid] = task.url_id
        self._by_task.setdefault(task.url_id, []).append(tid)
        followed = self._targets.setdefault(task.url_id, [])
        if self.on_hop is not None:
            self.on_hop(task, [task.url, *followed], target)
        followed.append(target)
        return True

    def in_flight(self) -> bool:
        """A chain has followed a hop and not ended."""
        return bool(self._targets)

    def claimed(self, url_id: int) -> bool:
        """A chain in flight fetches this URL: a link to it is dropped."""
        return url_id in self._claims

    def release(self, url_ids: Iterable[int]) -> None:
        """The chains of these tasks ended (a result came, or their batch is gone)."""
        for uid in url_ids:
            self._targets.pop(uid, None)
            for tid in self._by_task.pop(uid, ()):
                self._claims.pop(tid, None)

    def settled(self, result: FetchResult) -> tuple[list[UrlRecord], list[Outcome], UrlRecord | None]:
        """For a final ``result``: crawl-db rows for the URLs its chain requested, their outcomes
        (``SKIPPED``: the page is stored under the task's URL), and the record of a target it stopped
        at, when that target is a link the crawl may follow (scope, traps; the seen-set decides later)."""
        urls = split(result)
        depth = result.depth  # a redirect hop adds no depth
        rows = [
            UrlRecord(u, fingerprint(u), host_of(u), depth, discovered_from=result.url)
            for u in urls.requested
        ]
        why = f"redirect: requested in the chain of {result.url}"[:500]
        outcomes = [
            Outcome(r.url, r.url_id, UrlState.SKIPPED, fetched_at=result.fetched_at, error=why) for r in rows
        ]
        link = None
        t = urls.target
        if t and self.scope.allows(t) and not trap_reason(t, self.traps):
            link = UrlRecord(t, fingerprint(t), host_of(t), depth, discovered_from=result.url, inlinks=1,
                             redirect_hops=target_hops(result), link_meta=result.link_meta)  # fmt: skip
        return rows, outcomes, link
