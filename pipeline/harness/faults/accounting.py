"""Judge one fault trial from the web's side: pages lost, pages fetched twice, and why, and recovery time.

Pure: the inputs are the testbed's ground truth, its access log (one entry per request the server
received, with the server's clock), what the crawl had journaled when the fault hit, what the store
holds at the end, and the fault's timestamps. Nothing here trusts the crawler's own counters.

A request *in flight at the fault* is one the server received before the fault whose result the crawl
had not journaled yet: after a SIGKILL nobody can know whether it was served, so fetching it again is
the correct recovery, not a duplicate. "Received" is read from the server's log with ``LOG_LAG_S`` of
slack: the testbed logs a request when its loop gets to it, which on a loaded machine can be just
after the fault for a request sent just before it. Every other repeat is a real duplicate. robots.txt is kept out
of the page figures (a restarted fetcher has an empty robots cache by design) and counted apart.

The window alone excuses too much: a request a live process made just before the fault is no more
"in flight on the killed process" than any other. A trial names the killed process (``Killed``) and
what it itself had in flight; a repeat is excused only if its URL is in that set, so a trial that kills
a process that fetches nothing (dispatcher, broker, HBase, link jobs, unbound, the parse process)
excuses no repeat at all. Every fault trial names its process; ``killed=None`` (the window alone) is
left for callers that judge something else (e.g. loss only).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

Key = tuple[str, str]  # (host without port, path + query), as the testbed access log writes them
ROBOTS = "/robots.txt"
# Seen once (fleet worker/kill): three URLs the worker asked for just before its SIGKILL were logged by
# the testbed a few ms after the fault time, and their re-fetch counted as duplicates. A process cannot
# send anything after its SIGKILL, so a request logged this soon after was sent before it. The price: a
# request another, live process makes in those 0.2 s and that is then asked again counts as in flight.
LOG_LAG_S = 0.2


def url_key(url: str) -> Key:
    """The access-log key of ``url``: lower-case host without port, path plus query."""
    parts = urlsplit(url)
    path = parts.path or "/"
    return (parts.hostname or "", path + (f"?{parts.query}" if parts.query else ""))


@dataclass(frozen=True, slots=True)
class FaultTimes:
    """When the fault hit (the process was dead or stopped) and when the component was back."""

    fault_t: float
    back_t: float
    end_t: float = 0.0  # when the crawl finished (0 = unknown)


@dataclass(frozen=True, slots=True)
class Killed:
    """The process a fault struck and the keys whose request that process itself had made and not
    journaled when it died (``in_flight``). Only those may be fetched once more."""

    name: str
    in_flight: frozenset[Key] = frozenset()

    @classmethod
    def fetches_nothing(cls, name: str) -> Killed:
        """A process that makes no request to the web: no repeat is ever excused by its fault."""
        return cls(name, frozenset())


@dataclass(slots=True)
class TrialAccount:
    """The figures of one trial; ``ok`` is the exactly-once promise (in-flight repeats excepted)."""

    truth_pages: int
    stored_pages: int
    lost: int
    duplicated: int  # repeats that are NOT explained by being in flight at the fault
    duplicated_known: int  # of those, how many a known cause explains (``causes``; see account())
    duplicated_causes: dict[str, int]  # known cause -> duplicates it explains
    in_flight_repeats: int  # repeats of requests in flight at the fault (reported, allowed)
    in_flight_at_fault: int  # requests received before the fault and not journaled by then
    requests: int
    robots_refetched: int
    recovery_s: float | None
    lost_sample: list[str] = field(default_factory=list)
    duplicated_sample: list[str] = field(default_factory=list)
    killed: str = ""  # the process named by the trial ("" = not named: the time window alone decides)
    excused: dict[str, int] = field(
        default_factory=dict
    )  # cause -> repeats excused (in flight on ``killed``)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _retryable(status: int) -> bool:
    """A status after which the fetcher itself asks again (5xx but 501), as fetchers.engine does."""
    return 500 <= status < 600 and status != 501


def journaled_keys(results: Iterable[Mapping[str, Any]]) -> set[Key]:
    """Keys of every URL a journaled result requested: the task URL, each redirect hop, the final URL,
    except a final URL the result stopped at without requesting it (a 3xx whose target was left to the
    link path, ``fetchers.redirects``): that one is fetched later as a URL of its own."""
    keys: set[Key] = set()
    for r in results:
        hops = list(r.get("redirects") or ())
        final = str(r.get("final_url") or "")
        stopped = (
            not r.get("error_class")
            and int(r.get("status") or 0) in _REDIRECTS
            and hops
            and final not in hops
        )
        for u in (r.get("url", ""), "" if stopped else final, *hops):
            if u:
                keys.add(url_key(u))
    return keys


def account(
    *,
    truth: Mapping[str, Any],
    log: Sequence[Mapping[str, Any]],
    journaled_at_fault: set[Key] | None,
    stored_urls: set[str],
    times: FaultTimes | None,
    causes: Mapping[str, set[Key]] | None = None,
    killed: Killed | None = None,
    sample: int = 10,
) -> TrialAccount:
    """Figures for one trial (see the module docstring).

    ``journaled_at_fault``: keys of the results the crawl had journaled when the fault hit (None: none).
    A URL asked for before the fault, not journaled by then and fetched once more after it was in
    flight; any other second fetch is a duplicate, and so is any request after the fault for a URL
    journaled before it. A 5xx answer followed by another request is the fetcher's own retry, not a
    second fetch. ``times`` None means a run without a fault (every repeat is a duplicate).
    ``causes``: for each known, separately pinned bug, the keys it may fetch twice. They are still
    counted as duplicates; ``duplicated_causes`` says how many each explains (first cause wins).
    ``killed``: the process the fault struck; in flight then means also "in ``killed.in_flight``".
    """
    pages: list[str] = list(truth["pages"])
    lost = sorted(u for u in pages if u not in stored_urls)
    fetches: Counter[Key] = Counter()  # requests that are not a 5xx retry of the one before
    requests = 0
    first: dict[Key, float] = {}
    last: dict[Key, float] = {}
    retryable_before: dict[Key, bool] = {}
    robots: Counter[str] = Counter()
    for e in sorted(log, key=lambda e: float(e["t"])):
        k = (str(e["host"]), str(e["path"]))
        if k[1] == ROBOTS:
            robots[k[0]] += 1
            continue
        requests += 1
        t = float(e["t"])
        if not retryable_before.get(k, False):
            fetches[k] += 1  # the fetcher retries a 5xx itself: that is one fetch, not a repeat
        retryable_before[k] = _retryable(int(e.get("status", 0)))
        first.setdefault(k, t)
        last[k] = t
    fault_t = times.fault_t if times is not None else None
    in_flight: set[Key] = set()
    journaled = journaled_at_fault or set()
    if fault_t is not None:
        in_flight = {k for k, t in first.items() if t < fault_t + LOG_LAG_S and k not in journaled}
        if killed is not None:
            in_flight &= killed.in_flight
    explained, real = [], set()
    for k, n in fetches.items():
        if n < 2:
            continue
        # In flight at the fault: asked before it, not journaled by then, fetched once more, after it.
        if k in in_flight and n == 2 and fault_t is not None and last[k] >= fault_t:
            explained.append(k)
        else:
            real.add(k)
    if fault_t is not None:
        # Journaled before the fault and asked for again after it: a duplicate, 5xx or not.
        real |= {k for k in journaled if k in last and last[k] > fault_t and first[k] < fault_t}
    by_cause: dict[str, int] = {}
    left = set(real)
    for cause, keys in (causes or {}).items():
        hit = left & keys
        if hit:
            by_cause[cause] = len(hit)
            left -= hit
    recovery = None
    if times is not None:
        after = [float(e["t"]) for e in log if float(e["t"]) >= times.back_t]
        if after:
            recovery = round(min(after) - times.fault_t, 3)
        elif times.end_t:
            recovery = round(times.end_t - times.fault_t, 3)
    return TrialAccount(
        truth_pages=len(pages),
        stored_pages=len(set(pages) & stored_urls),
        lost=len(lost),
        duplicated=len(real),
        duplicated_known=sum(by_cause.values()),
        duplicated_causes=by_cause,
        in_flight_repeats=len(explained),
        in_flight_at_fault=len(in_flight),
        requests=requests,
        robots_refetched=sum(n - 1 for n in robots.values() if n > 1),
        recovery_s=recovery,
        lost_sample=lost[:sample],
        duplicated_sample=[f"{h}{p}" for h, p in sorted(left)[:sample] + sorted(real - left)[:sample]][
            :sample
        ],
        killed=killed.name if killed is not None else "",
        excused={f"in_flight_on_{killed.name if killed else 'any'}": len(explained)} if explained else {},
    )
