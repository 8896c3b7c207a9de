"""A page's change rate from its fetch history: the Poisson policy's estimator. Pure.

Changes are a Poisson process per page (Cho & Garcia-Molina, "Estimating frequency of change", TOIT 2003;
Brewington & Cybenko, WWW9 2000). Looking back from each fetch over the window since the previous one,
the time to the page's last change is exponential, censored at the window: a window with no change adds
its whole length to the *exposure* E; a window that ends on a changed page adds a change to X and, when
the server's Last-Modified dates the new version inside the window, that version's age (fetch time -
Last-Modified; the change is then seen exactly), else half the window. X / E is the maximum-likelihood
rate. With Last-Modified a page changing far faster than any revisit shows it at its first changed fetch.

Three things make the estimate useful from the first fetch on, where a crawler needs it most:

- **the time before the first fetch.** Looking back from the first fetch, the page has not changed since
  its Last-Modified: the header's age is exposure without a change (censored: the change the header
  dates may be the page's creation, which is no change to follow). A page last modified a year ago is
  known to be slow before it is fetched twice. It counts while the header is believed (``first_window``):
  it must not be "now" (``LM_NOW_S``: a generated page's header says nothing), and from the second fetch
  on only when the header proved to follow the content (``lm_follows``: it moved exactly when the content
  changed; a page whose header moves on a date line or an advert while its text stays, or stays while its
  text changes, has its first window dropped and no header age used in any window where it strays).
- **a prior** of ``PRIOR_CHANGES`` pseudo-changes at the prior rate (1 / ``initial_interval_s``), added to
  X and their exposure to E: (X + a) / (E + a / prior). One short age does not make a page "changing
  every second" (and given up).
- **pages that never change.** About half of the pages that survive a year never change at all (Ntoulas,
  Cho & Olston, "What's new on the Web?", WWW 2004): the prior gives a page that share
  (``STATIC_SHARE``) of never changing. A page not yet seen changing is then worth its chance of changing
  at all times the rate above: after a year without a change that chance is small, and the budget goes
  to the pages that do change, as an oracle's would; the first change seen makes it 1.

State (``Revisit`` under the Poisson policy): ``changes`` = X, ``interval`` = E (seconds of exposure),
``fetches``, and the last fetch's ``fetched_at`` and ``last_modified``, from which the first window is
computed. So the estimate is a function of the stored state alone, which both crawl scales rely on
(``pipeline.frontier.hostrates``).
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from pipeline.storage.base import Revisit

PRIOR_CHANGES = 1.0  # pseudo-changes at the prior rate: the weight of the prior
STATIC_SHARE = 0.5  # prior probability that a page never changes (Ntoulas, Cho & Olston, WWW 2004)
LM_NOW_S = 2.0  # a Last-Modified within this of the fetch says "generated now" (HTTP dates: 1 s resolution)
LM_SLACK_S = 1.0  # a header "moved" when it is later by more than this (whole-second dates)


def http_time(value: str) -> float:
    """An HTTP date as epoch seconds; 0 when absent or unparseable (hostile headers are common)."""
    if not value:
        return 0.0
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0


def rate_of(changes: float, exposure: float, prior_rate: float) -> float:
    """The estimated rate after ``changes`` over ``exposure`` s (module docstring): (X + a) / (E + a /
    prior), times the chance the page changes at all while none is seen."""
    if prior_rate <= 0:
        return changes / exposure if exposure > 0 else 0.0
    b = PRIOR_CHANGES / prior_rate
    e = max(exposure, 0.0)
    rate = (changes + PRIOR_CHANGES) / (e + b)
    if changes > 0:
        return rate
    # never seen changing: the chance it changes at all, against the prior's never-changing share
    seen_still = (b / (b + e)) ** PRIOR_CHANGES  # P(no change over e | it changes), under the prior
    changing = (1 - STATIC_SHARE) * seen_still / (STATIC_SHARE + (1 - STATIC_SHARE) * seen_still)
    return rate * changing


def first_window(rv: Revisit) -> float:
    """The exposure before a page's only fetch: its version's age when Last-Modified dates it at least
    ``LM_NOW_S`` before the fetch; 0 otherwise, and after the second fetch (then it is in the counts or
    was dropped)."""
    lm = http_time(rv.last_modified) if rv.fetches == 1 else 0.0
    age = rv.fetched_at - lm
    return age if lm > 0 and age >= LM_NOW_S else 0.0


def revisit_rate(rv: Revisit, prior_rate: float) -> float:
    """The change rate (changes/s) a Poisson-policy state says, its first window included."""
    return rate_of(rv.changes, rv.interval + first_window(rv), prior_rate)


def lm_follows(prev_lm: float, modified_at: float, *, changed: bool) -> bool:
    """Whether Last-Modified followed the content over one window: it moved exactly when the content
    changed (both dates known)."""
    if prev_lm <= 0 or modified_at <= 0:
        return False
    return (modified_at > prev_lm + LM_SLACK_S) == changed


def exposure(gap: float, *, changed: bool, fetched_at: float, modified_at: float) -> float:
    """What one observed window of ``gap`` seconds adds to a page's exposure: all of it when unchanged;
    when changed, the age of the new version (``fetched_at - modified_at``) if the Last-Modified time lies
    inside the window (a server's clock or a stale header outside it tells nothing), else half of it."""
    if not changed:
        return gap
    age = fetched_at - modified_at
    if modified_at > 0 and 0 <= age <= gap:
        return max(age, 1e-3)  # HTTP dates have 1 s resolution: 0 means "within the second"
    return gap / 2


def advance(
    prev: Revisit | None, *, fetched_at: float, modified_at: float, changed: bool
) -> tuple[int, float]:
    """(X, E) after one more fetch of a page whose stored state is ``prev`` (None: its first fetch)."""
    if prev is None or prev.fetches <= 0:
        return 0, 0.0
    x, e = prev.changes, prev.interval
    gap = max(fetched_at - prev.fetched_at, 0.0) if prev.fetched_at > 0 else 0.0
    follows = lm_follows(http_time(prev.last_modified), modified_at, changed=changed)
    x += changed
    e += exposure(gap, changed=changed, fetched_at=fetched_at, modified_at=modified_at if follows else 0.0)
    if follows:  # the header proved itself: the time before the first fetch counts
        e += first_window(prev)
    return x, e
