"""Redirect hops: what the fetch engine does with a 3xx answer, and the gate a crawl puts in front of it.

A redirect target is a URL like any link: the crawl must know whether it was already seen before a
request goes to it, or a target that is also linked (``/r/x`` -> ``/x``) is fetched twice and a loop
(``a -> b -> a``) refetches ``a`` before it is recognised. The fetcher holds no seen-set, so it asks
a ``RedirectGate`` before each hop:

- ``follow_all`` (the default: a bare fetcher, benches, ``crawlfleet fetch``): every hop is followed,
  up to ``fetch.max_redirects``, loops within the chain caught;
- ``stop_at_redirects``: no hop is followed (a fleet node, a fetch process: they have no seen-set
  at hand). The result is the 3xx itself, with ``final_url`` = the target; the crawl sends the target
  through its link path (scope, traps, seen-set) like any link, as Nutch does with redirects it does
  not follow at once. The target's task carries the hops so far (``target_hops``), so the chain is
  bounded by ``fetch.max_redirects`` across tasks as within one;
- a crawl's own gate (``pipeline.crawl.redirects``): follows a target the crawl has never seen and
  claims it, stops at one it knows.

A stopped hop is recorded as the redirect's outcome: status 3xx, ``final_url`` = the target, no second
request. ``next_hop`` is the pure decision for one 3xx answer; the engine performs it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from fetchers.records import FetchResult, UrlTask
from pipeline.urls import join, normalize

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

RedirectGate = Callable[[UrlTask, str], bool]
"""``gate(task, target)``: True to request ``target`` (normalized) as the next hop of ``task``'s chain;
False to stop there and record the redirect itself with ``final_url`` = ``target``. Called once per
hop, from the fetcher's event loop; must not block on I/O for long."""


def follow_all(task: UrlTask, target: str) -> bool:
    """The gate of a fetcher outside a crawl: every hop is followed."""
    return True


def stop_at_redirects(task: UrlTask, target: str) -> bool:
    """The gate of a fetcher without a seen-set at hand: no hop is followed; the target becomes a link."""
    return False


@dataclass(frozen=True, slots=True)
class Hop:
    """What to do after a 3xx answer from ``url``. Exactly one of: ``follow`` (request it next),
    ``stop_at`` (record the redirect with this ``final_url``, no request), ``error_class`` (a failed
    result: bad target, loop, too many hops; ``target`` then names where it pointed, for the result's
    ``final_url``, when there is one)."""

    follow: str = ""
    stop_at: str = ""
    error_class: str = ""
    error_message: str = ""
    target: str = ""


def next_hop(
    task: UrlTask, url: str, location: str, *, chain: Collection[str], hops: int, max_redirects: int,
    gate: RedirectGate, in_scope: Callable[[str], bool] | None = None,
) -> Hop:  # fmt: skip
    """The decision for a 3xx from ``url`` with header ``location``, ``hops`` hops into ``task``'s chain
    whose URLs so far (the task's URL included) are ``chain``. A target back into the chain is a loop,
    caught before the request; a target ``in_scope`` refuses fails the URL with ``out_of_scope`` (a
    redirect off the crawl, e.g. to an internal address, stays a recorded refusal whatever the gate);
    the gate is asked only about the other targets."""
    target = normalize(join(url, location))
    if target is None:
        return Hop(error_class="invalid_url", error_message=f"bad redirect target {location[:200]!r}")
    if target in chain:
        return Hop(error_class="redirect_loop", error_message=f"{url} redirects back to {target}", target=target)
    if in_scope is not None and not in_scope(target):
        return Hop(error_class="out_of_scope", error_message=f"redirect to {target[:200]}, out of scope",
                   target=target)  # fmt: skip
    if hops >= max_redirects:
        return Hop(error_class="too_many_redirects", error_message=f"more than {max_redirects} redirects")
    if not gate(task, target):
        return Hop(stop_at=target)
    return Hop(follow=target)


def stopped_target(result: FetchResult) -> str:
    """The target of a redirect ``result`` stopped at without requesting it ("" if none): a link for
    the crawl's link path (the crawl core, or the fleet's link jobs)."""
    chain, final = result.redirects, result.final_url
    if result.error_class or result.status not in REDIRECT_STATUSES or not chain or not final:
        return ""
    return "" if final in chain else final


def target_hops(result: FetchResult) -> int:
    """The ``redirect_hops`` of the target ``result`` stopped at: the hops that led to the task's URL plus
    the ones its own chain made (one, where the fetcher stops at every redirect). When that target
    answers with a redirect in turn, ``next_hop`` counts on from there (the engine starts a task's
    count at its ``redirect_hops``), so a chain spread over many tasks ends after
    ``fetch.max_redirects`` hops, as one fetcher's chain does."""
    return result.redirect_hops + len(result.redirects)
