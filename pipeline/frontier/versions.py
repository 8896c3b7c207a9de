"""Page versions: whether a fetch brought a new version of its page, and so new items. Pure.

A page version is ``(URL, content digest)``: the crawl keeps one item set per version (issue #38). A fetch
of a URL the crawl holds a copy of is no new version when it confirms that copy: a 304, an answer that
failed (the stored copy stands), or a 200 whose body has the stored copy's exact digest. A near-duplicate
(other bytes, a close text simhash) is a new version: its bytes replace the copy, and its items are
written. Both scales ask ``same_version`` with the URL's stored re-crawl state (``Revisit``: the digest of
the copy its last scheduled fetch kept):

* the embedded crawl, as each result's outcome is made (``pipeline.crawl.revisits``): the outcome then
  carries no page, so neither the page store nor the item log is written. A result replayed from the
  journal on resume is compared with the state ``replayed_prev`` finds for it, as if it came in live;
* the fleet's extract job, before a segment's items are written (``jobs/plugged.py``, ``item_verdict``):
  the crawl-db row read for the segment's pages holds the re-crawl state the update job wrote for the
  URL's previous fetch (a round's update runs after its extract).
"""

from __future__ import annotations

import enum

from pipeline.frontier.schedule import Observation
from pipeline.storage.base import Revisit, UrlRecord

_SAME_TIME_S = 1e-6  # fetch times are compared as the crawl db keeps them (doubles, through JSON)


def same_version(prev: Revisit | None, obs: Observation) -> bool:
    """True when the fetch ``obs`` of a URL whose stored re-crawl state is ``prev`` confirms the stored
    copy (see the module docstring); False for the URL's first fetch and for a new version."""
    if prev is None:
        return False
    if obs.failed or obs.status == 304:
        return True
    return prev.fetches > 0 and bool(prev.digest) and obs.digest == prev.digest


def replayed_prev(stored: Revisit | None, page_fetched_at: float | None, fetched_at: float) -> Revisit | None:
    """The re-crawl state a fetch read back from the embedded crawl's journal on resume is compared with
    (the one the refill that leased it had noted): ``stored`` is the URL's state in the crawl db now,
    ``page_fetched_at`` the fetch time of its stored page (None: no page).

    * a state older than the fetch: the fetch's outcome never reached the store; that state is the one;
    * a state made from this very fetch: its outcome was applied before the kill, but its items (past the
      item log's commit) were cut back. The stored page tells which it was: this fetch's page (a new
      version: None, so that its items are written again) or an older one (the same version: the state,
      whose digest is this fetch's, so that none are)."""
    if stored is None or stored.fetched_at < fetched_at - _SAME_TIME_S:
        return stored
    if page_fetched_at is not None and abs(page_fetched_at - fetched_at) <= _SAME_TIME_S:
        return None
    return stored


class Verdict(enum.Enum):
    """What becomes of the items of one fetch in the fleet's extract job."""

    WRITE = "write"  # the fetch the crawl db recorded, a new page version: its items are written
    UNRECORDED = "unrecorded"  # the crawl db recorded another fetch of the URL (an adopted segment's copy)
    SAME_VERSION = "same_version"  # a re-fetch that confirmed the stored copy: its version's items stand
    DECIDED = "decided"  # the URL's re-crawl state already describes this fetch: a round over its segment
    # ran to its crawl-db update before (the round is run again), and wrote this fetch's items then


def item_verdict(recorded: UrlRecord | None, obs: Observation, *, check_recorded: bool = True) -> Verdict:
    """The fate of the items of the fetch ``obs``, given the URL's crawl-db row ``recorded`` (None: no
    row). ``check_recorded`` False (a job without a crawl db) writes every fetch's items."""
    if not check_recorded:
        return Verdict.WRITE
    if recorded is None or abs(recorded.fetched_at - obs.fetched_at) > _SAME_TIME_S:
        return Verdict.UNRECORDED
    prev = recorded.revisit
    if prev is not None and prev.fetched_at >= obs.fetched_at - _SAME_TIME_S:
        return Verdict.DECIDED
    return Verdict.SAME_VERSION if same_version(prev, obs) else Verdict.WRITE
