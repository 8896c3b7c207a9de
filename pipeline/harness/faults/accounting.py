"""Judge one fault trial from outside the crawler: pages lost, pages fetched more than once, and why.

Pure. The inputs are only what a user could see without the crawler's word:

- the web's truth (``truth``): the pages a correct crawl stores, and the URLs that answer 500 every
  time (``server_errors``), which a fetcher may ask again after each 500 up to its retry limit;
- the testbed's access log (``log``): for every request, when the server had its head (``t``), when
  it had written the reply (``end``), its status (499: the client left first) and its User-Agent, whose
  ``pid/<n>`` suffix (``fetch.identify_process``) names the process that sent it;
- the fault injector's own record (``Strike``): which processes the signal reached, which signal,
  when it was sent, and when the process was restarted or continued;
- the store, read at the end (``stored_urls``).

Nothing comes from the crawler's events, journal or logs.

Figures:

- **repeats**: requests for a URL beyond the first (beyond ``1 + retries`` for a URL that answers 500
  every time). A request after a 5xx is a repeat like any other; robots.txt is counted apart.
- **in flight on the struck process**: its requests (by pid) that the server had started before the
  fault and not completed then; a request the server saw only after the signal was sent before it (a
  stopped or dead process sends nothing), so it is in flight too. A zero-length request holds the
  ``TICK_S`` it was logged in. A URL that answers 500 every time is one fetch of ``1 + retries``
  requests (the fetcher backs off between them, and reports once, after the last): a struck process
  that had made fewer of them, or made the last one in flight or within ``RECENT_S``, had that fetch
  in flight or recent, every request of it.
- **recent**: its requests completed within ``RECENT_S`` before the fault. A node makes a finished
  result durable within ``fleet.progress_s`` (0.5 s) plus one store write (issue 37, point 1): those
  may be lost with it and fetched again.
- A repeat is **excused** only if the struck process made the earlier request (in flight or recent)
  and another process made the later one, after the fault. A process that fetches nothing (its
  ``Strike.pids`` empty) excuses nothing. **woken_repeats**: repeats made by a stopped process after
  it was continued; never excused.
- **lost**: truth pages never answered (no completed request in the log: ``lost_unanswered``), plus
  pages answered but missing from the store (``lost_unstored``).
- **robots_extra**: robots.txt requests beyond one per host, but those excused as a page's repeat is: the
  struck process had the host's earlier robots.txt request in flight or recent, another process asked
  after the fault (``robots_in_flight``). A crawl shares a host's answer as soon as it has it
  (``fetchers.robots.RobotsShare``); one it had not yet written dies with the process.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pipeline.settings import FetchSettings

Key = tuple[str, str]  # (host without port, path + query), as the testbed access log writes them
ROBOTS = "/robots.txt"
RECENT_S = 1.0  # a node's promise: a finished result durable within this (progress_s 0.5 + one write)
TICK_S = 0.001  # the resolution a zero-length request is held for (nginx-style millisecond logs)
GONE = 499  # the testbed's status for a request whose client left before the reply
RETRIES = FetchSettings().retries  # the crawl's fetch.retries: extra asks a 500 may get
_PID = re.compile(r"\bpid/(\d+)$")


def url_key(url: str) -> Key:
    """The access-log key of ``url``: lower-case host without port, path plus query."""
    parts = urlsplit(url)
    path = parts.path or "/"
    return (parts.hostname or "", path + (f"?{parts.query}" if parts.query else ""))


def pid_of(user_agent: str) -> int | None:
    """The process a request names in its User-Agent (``fetch.identify_process``), None if it names none."""
    m = _PID.search(user_agent or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class Strike:
    """The fault injector's own record of one fault.

    ``process``: what was struck (worker, dispatcher, ...); ``signal``: SIGKILL or SIGSTOP; ``pids``: the
    processes the signal reached that fetch (empty for one that fetches nothing: no repeat is excused);
    ``fault_t``: when the signal was sent; ``back_t``: when the process was restarted or continued (or
    its service was back); ``end_t``: when the crawl finished (0 = unknown)."""

    process: str
    signal: str
    fault_t: float
    back_t: float
    pids: frozenset[int] = frozenset()
    end_t: float = 0.0

    @property
    def stop(self) -> bool:
        return self.signal == "SIGSTOP"


@dataclass(slots=True)
class TrialAccount:
    """The figures of one trial; ``ok`` is the promise: nothing lost, no repeat left unexcused."""

    process: str
    signal: str
    truth_pages: int
    stored_pages: int
    lost: int
    lost_unanswered: int
    lost_unstored: int
    requests: int
    repeats: int  # every request beyond a URL's first (beyond 1 + retries for an always-500 URL)
    repeats_unexcused: int
    in_flight_at_fault: int  # the struck process's requests in flight at the fault, as the server saw them
    recent_at_fault: int  # its requests completed within RECENT_S before the fault
    in_flight_repeats: int  # repeats excused: the struck process had the request in flight
    recent_repeats: int  # repeats excused: the struck process completed it within RECENT_S
    woken_repeats: int  # repeats made by a stopped process after it was continued
    robots_requests: int
    robots_extra: int  # robots.txt requests beyond one per host, not excused
    recovery_s: float | None
    fault_t: float = 0.0
    lost_sample: list[str] = field(default_factory=list)
    repeated_sample: list[str] = field(default_factory=list)
    robots_sample: list[str] = field(default_factory=list)
    robots_in_flight: int = 0  # robots.txt repeats excused: the struck process had the earlier one in flight
    # Each sampled host's robots.txt requests as the server logged them: "pid start..end status", times in
    # seconds from the fault (from the crawl's first request without one); "struck" marks the struck pid.
    robots_detail: dict[str, list[str]] = field(default_factory=dict)
    repeated_detail: dict[str, list[str]] = field(default_factory=dict)  # the sample's requests, as robots_detail

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.repeats_unexcused == 0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


@dataclass(frozen=True, slots=True)
class _Req:
    start: float
    end: float
    status: int
    pid: int | None


def _requests(log: Sequence[Mapping[str, Any]]) -> tuple[dict[Key, list[_Req]], dict[str, list[_Req]]]:
    pages: dict[Key, list[_Req]] = defaultdict(list)
    robots: dict[str, list[_Req]] = defaultdict(list)
    for e in log:
        host, path = str(e["host"]), str(e["path"])
        t = float(e["t"])
        req = _Req(t, float(e.get("end", t)), int(e.get("status", 0)), pid_of(str(e.get("ua", ""))))
        (robots[host] if path == ROBOTS else pages[(host, path)]).append(req)
    for reqs in (*pages.values(), *robots.values()):
        reqs.sort(key=lambda r: r.start)
    return pages, robots


def account(
    *,
    truth: Mapping[str, Any],
    log: Sequence[Mapping[str, Any]],
    stored_urls: set[str],
    strike: Strike | None,
    retries: int = RETRIES,
    sample: int = 10,
) -> TrialAccount:
    """Figures for one trial (see the module docstring). ``strike`` None: a crawl without a fault, in
    which every repeat is unexcused. ``retries``: the crawl's ``fetch.retries``."""
    pages, robots = _requests(log)
    errors = {url_key(u) for u in truth.get("server_errors", ())}
    struck = strike.pids if strike is not None else frozenset()
    fault_t = strike.fault_t if strike is not None else float("inf")
    back_t = strike.back_t if strike is not None else float("inf")

    stop = strike is not None and strike.stop

    def woken(r: _Req) -> bool:  # sent by a stopped process after it was continued
        return stop and r.pid in struck and r.start >= back_t

    def in_flight(r: _Req) -> bool:  # started before the fault and not completed then, or seen only after it
        return r.pid in struck and not woken(r) and max(r.end, r.start + TICK_S) > fault_t

    def recent(r: _Req) -> bool:  # completed less than RECENT_S before the fault (a slow page may start earlier)
        return r.pid in struck and not in_flight(r) and fault_t - RECENT_S <= max(r.end, r.start) < fault_t

    repeats = unexcused = by_flight = by_recent = n_woken = n_flight = n_recent = 0
    repeated: list[Key] = []
    for k, reqs in pages.items():
        n_flight += sum(1 for r in reqs if in_flight(r))
        n_recent += sum(1 for r in reqs if recent(r))
        expected = 1 + retries if k in errors else 1
        extra = len(reqs) - expected
        if extra <= 0:
            continue
        repeats += extra
        woken_k = sum(1 for i, r in enumerate(reqs) if i >= len(reqs) - extra and woken(r))
        later = sum(1 for r in reqs if r.start >= fault_t and r.pid not in struck)
        mine = [r for r in reqs if r.pid in struck and r.start < fault_t]
        if k in errors and mine and (len(mine) < expected or in_flight(mine[-1]) or recent(mine[-1])):
            flight = len(mine)  # one fetch of a 500, retries and all: not over, or over in the last second
        else:
            flight = sum(1 for r in reqs if in_flight(r))
        rec = sum(1 for r in reqs if recent(r))
        f = min(extra, flight, later)
        g = min(extra - f, rec, later - f)
        by_flight += f
        by_recent += g
        n_woken += woken_k
        if extra - f - g > 0:
            unexcused += extra - f - g
            repeated.append(k)
    robots_excused: Counter[str] = Counter()
    for host, reqs in robots.items():
        later = sum(1 for r in reqs if r.start >= fault_t and r.pid not in struck)
        robots_excused[host] = min(len(reqs) - 1, sum(1 for r in reqs if in_flight(r) or recent(r)), later)
    robots_left = {h: len(reqs) - 1 - robots_excused[h] for h, reqs in robots.items()}
    robots_sample = sorted(h for h, n in robots_left.items() if n > 0)[:sample]
    starts = [r.start for reqs in (*pages.values(), *robots.values()) for r in reqs]
    zero = fault_t if strike is not None else min(starts, default=0.0)
    answered = {k for k, reqs in pages.items() if any(r.status != GONE for r in reqs)}
    truth_pages: list[str] = list(truth["pages"])
    unanswered = sorted(u for u in truth_pages if url_key(u) not in answered)
    unstored = sorted(u for u in truth_pages if url_key(u) in answered and u not in stored_urls)
    recovery = None
    if strike is not None:
        after = [r.start for reqs in pages.values() for r in reqs if r.start >= strike.back_t]
        if after:
            recovery = round(min(after) - strike.fault_t, 3)
        elif strike.end_t:
            recovery = round(strike.end_t - strike.fault_t, 3)
    return TrialAccount(
        process=strike.process if strike is not None else "",
        signal=strike.signal if strike is not None else "",
        truth_pages=len(truth_pages),
        stored_pages=len(set(truth_pages) & stored_urls),
        lost=len(unanswered) + len(unstored),
        lost_unanswered=len(unanswered),
        lost_unstored=len(unstored),
        requests=sum(len(r) for r in pages.values()),
        repeats=repeats,
        repeats_unexcused=unexcused,
        in_flight_at_fault=n_flight,
        recent_at_fault=n_recent,
        in_flight_repeats=by_flight,
        recent_repeats=by_recent,
        woken_repeats=n_woken,
        robots_requests=sum(len(r) for r in robots.values()),
        robots_extra=sum(robots_left.values()),
        recovery_s=recovery,
        fault_t=fault_t if strike is not None else 0.0,
        lost_sample=(unanswered + unstored)[:sample],
        repeated_sample=[f"{h}{p}" for h, p in sorted(repeated)[:sample]],
        robots_sample=robots_sample,
        robots_in_flight=sum(robots_excused.values()),
        robots_detail={h: [_said(r, zero, struck) for r in robots[h]] for h in robots_sample},
        repeated_detail={f"{h}{p}": [_said(r, zero, struck, woken(r)) for r in pages[(h, p)]] for h, p in sorted(repeated)[:sample]},
    )


def _said(r: _Req, zero: float, struck: frozenset[int], woken: bool = False) -> str:
    """One logged request for a failure's message: who (pid; "struck", "woken" once continued), when (from
    ``zero``) and its status."""
    who = f"{r.pid}{' struck' if r.pid in struck else ''}{' woken' if woken else ''}"
    return f"{who} {r.start - zero:+.3f}..{r.end - zero:+.3f} {r.status}"
