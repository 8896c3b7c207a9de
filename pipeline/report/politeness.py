"""Each host's politeness as the server felt it, from the crawl's own records (the result segments).

Every result lists the requests it made (``sent``: start time and status, redirect hops and retries
included) and the robots.txt loads its fetcher made for its origin (``robots``: when, the status, the
Crawl-delay, the directive lines that changed). Per host, sorted in time, those are the requests the site
received; from them:

- the gaps between consecutive request starts, against the delay the crawl owed the host at that moment:
  ``politeness.min_host_delay_s`` or the robots.txt Crawl-delay in force (capped at
  ``max_crawl_delay_s``), whichever is longer: the least gap, the 5th percentile, and how many gaps were
  shorter than ``SLACK`` of the delay owed. A changed Crawl-delay is owed once every fetcher's cached
  answer has expired (``robots_ttl_s`` after the load that brought it: ``owed_crawl_delay``);
- 429 and 503 answers, and the back-off after each (the gap to the host's next request);
- robots.txt requests (a load taken from the robots share is no request), and its changes: when, what.

A host's request times are kept to sort them (8 bytes each, at most ``MAX_REQUESTS`` per host: beyond it
the host's figures cover its first ones, and say so).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.urls import host_of

SLACK = 0.9  # a gap under 90 % of the delay owed counts as too short (the clocks are the fetcher's)
MAX_REQUESTS = 200_000  # request times kept per host
MAX_HOSTS_SHOWN = 200


@dataclass(slots=True)
class HostLog:
    starts: array[float] = field(default_factory=lambda: array("d"))
    statuses: array[int] = field(default_factory=lambda: array("H"))
    robots_fetches: int = 0
    delays: list[tuple[float, float]] = field(default_factory=list)  # (since, Crawl-delay) per robots load
    changes: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def add(self, t: float, status: int) -> None:
        if len(self.starts) >= MAX_REQUESTS:
            self.truncated = True
            return
        self.starts.append(t)
        self.statuses.append(max(0, min(status, 65535)))


class PolitenessFold:
    """Per host, its requests and robots.txt loads, fed one result at a time (``add``)."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostLog] = {}

    def add(self, url: str, sent: Iterable[Any], robots: Iterable[Any]) -> None:
        """One result's ``sent`` ([start, status] pairs) and ``robots`` notes (their JSON dicts)."""
        if not sent and not robots:
            return
        try:
            log = self.hosts.setdefault(host_of(url), HostLog())
        except ValueError:
            return
        for item in sent or ():
            if isinstance(item, list | tuple) and len(item) == 2:
                log.add(float(item[0]), int(item[1]))
        for note in robots or ():
            if not isinstance(note, Mapping):
                continue
            at = float(note.get("at", 0.0))
            if note.get("fetched"):
                log.robots_fetches += 1
                log.add(at, int(note.get("status", 0)))
            log.delays.append((at, float(note.get("crawl_delay", 0.0))))
            if note.get("changed"):
                log.changes.append({"at": round(at, 3), "changed": list(note["changed"]),
                                    "crawl_delay": note.get("crawl_delay", 0.0)})  # fmt: skip


def fold(records: Iterable[Mapping[str, Any]]) -> dict[str, HostLog]:
    """``PolitenessFold`` over result records (``FetchResult.to_json`` dicts)."""
    out = PolitenessFold()
    for rec in records:
        url = rec.get("url")
        if isinstance(url, str):
            out.add(url, rec.get("sent") or (), rec.get("robots") or ())
    return out.hosts


def owed_crawl_delay(delays: list[tuple[float, float]], since: list[float], t: float, ttl_s: float) -> float:
    """The Crawl-delay owed at ``t``: a robots.txt load binds every fetcher of the crawl once each one's
    cached answer has expired, ``ttl_s`` after it; until then the laxest answer loaded in that span and
    the one before it may still be in force somewhere."""
    at = bisect.bisect_right(since, t) - 1
    if at < 0:
        return 0.0
    owed = delays[at][1]
    k = at
    while k > 0 and delays[k][0] > t - ttl_s:  # loaded within the cache's age: the one before may hold
        k -= 1
        owed = min(owed, delays[k][1])
    return owed


def host_figures(log: HostLog, *, delay_s: float, max_crawl_delay_s: float, ttl_s: float) -> dict[str, Any]:
    """One host's figures (module docstring)."""
    order = sorted(range(len(log.starts)), key=log.starts.__getitem__)
    starts = [log.starts[k] for k in order]
    statuses = [log.statuses[k] for k in order]
    delays = sorted(log.delays)
    since = [d[0] for d in delays]
    gaps, short = [], 0
    backoff: list[float] = []
    for k in range(1, len(starts)):
        gap = starts[k] - starts[k - 1]
        gaps.append(gap)
        crawl_delay = owed_crawl_delay(delays, since, starts[k - 1], ttl_s)
        owed = max(delay_s, min(crawl_delay, max_crawl_delay_s))
        short += gap < SLACK * owed
        if statuses[k - 1] in (429, 503):
            backoff.append(gap)
    gaps.sort()
    return {
        "requests": len(starts),
        "robots_fetches": log.robots_fetches,
        "crawl_delay_s": delays[-1][1] if delays else 0.0,
        "min_gap_s": round(gaps[0], 4) if gaps else None,
        "p5_gap_s": round(gaps[len(gaps) // 20], 4) if gaps else None,
        "gaps_below_delay": short,
        "status_429": statuses.count(429),
        "status_503": statuses.count(503),
        "backoff_after_429_503_s": {"min": round(min(backoff), 3), "max": round(max(backoff), 3)} if backoff else None,
        "robots_changes": log.changes,
        **({"truncated": True} if log.truncated else {}),
    }  # fmt: skip


def politeness_json(logs: Mapping[str, HostLog], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``politeness`` section: totals and the busiest hosts' figures. ``settings``: the
    crawl's remembered ``politeness`` section (defaults when absent)."""
    delay = float(settings.get("min_host_delay_s", 0.25))
    cap = float(settings.get("max_crawl_delay_s", 30.0))
    ttl = float(settings.get("robots_ttl_s", 3600.0))
    per = {h: host_figures(log, delay_s=delay, max_crawl_delay_s=cap, ttl_s=ttl) for h, log in logs.items()}
    shown = sorted(per, key=lambda h: (-per[h]["requests"], h))[:MAX_HOSTS_SHOWN]
    return {
        "min_host_delay_s": delay,
        "max_crawl_delay_s": cap,
        "totals": {
            "hosts": len(per),
            "requests": sum(v["requests"] for v in per.values()),
            "robots_fetches": sum(v["robots_fetches"] for v in per.values()),
            "robots_changes": sum(len(v["robots_changes"]) for v in per.values()),
            "gaps_below_delay": sum(v["gaps_below_delay"] for v in per.values()),
            "status_429": sum(v["status_429"] for v in per.values()),
            "status_503": sum(v["status_503"] for v in per.values()),
        },
        "hosts": {h: per[h] for h in shown},
    }
