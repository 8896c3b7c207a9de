"""robots.txt per RFC 9309, parsed with protego, cached per origin with expiry.

The cache does no I/O itself: ``get`` takes the fetch function (the fetcher's own HTTP session, so robots
requests share its connection pool, SSRF guard and pacing). Concurrent ``get`` calls for one origin join
a single fetch.

Status handling (RFC 9309 section 2.3.1):
- 2xx: parse; cached for ``robots_ttl_s``.
- 4xx other than 429 (and too many redirects): "unavailable" in the RFC's sense, so everything is
  allowed; cached for ``robots_ttl_s``.
- 429, 5xx, network errors: "unreachable": the whole origin is treated as disallowed for
  ``robots_5xx_retry_s``, after which robots.txt is fetched again. URLs refused this way are to be
  retried later, not recorded as blocked.
- a failure that every request to the origin would meet the same way (the fetch function raises
  ``OriginFailed``: an HTTPS certificate the fetcher does not trust): "failed", kept for
  ``robots_5xx_retry_s``; each URL of the origin ends with that failure's error class, not retried.
An origin is ``scheme://host[:port]``: the http and https sides of one host have a robots.txt each.
Crawl-delay (and Request-rate, as seconds per request) of the matching group is honoured, capped at
``max_crawl_delay_s``.

Shared answers: a fleet's nodes each keep their own cache, so without help every node that gets a host
fetches its robots.txt again (measured: a 2-node fleet fetched 41 of 60 hosts' robots.txt twice). With a
``RobotsShare`` (the crawl's store; ``pipeline/storage/hbase_robots.py``) a node first asks the share for the
origin's last answer and uses it while it is fresh by its age, and puts every HTTP answer it fetches there.
No-answer results (status 0) stay local: they may be this node's own network trouble.

What each load said reaches the crawl (``fetchers.robotsnote``): ``take_news(origin)`` gives the
``RobotsNote`` of the origin's last load (fetched or shared) once, and the engine puts it on the next
result of that origin. A load whose directives differ from the answer it replaces (this cache's, or the
share's expired one when a host came to this node after another had it) is logged as the event
``robots.changed`` (origin, the directive lines added and gone, the Crawl-delay before and after): in a
continuous crawl a robots.txt that changes takes effect when its cached answer expires, within
``robots_ttl_s``, and the crawl's log says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from protego import Protego

from fetchers.robotsnote import MAX_CHANGED, MAX_SITEMAPS, RobotsNote
from pipeline.settings import PolitenessSettings

MAX_ROBOTS_BYTES = 512 * 1024  # RFC 9309: parse at least 500 KiB
MAX_ROBOTS_REDIRECTS = 5  # RFC 9309: follow at least five consecutive redirects

log = logging.getLogger(__name__)

# status 0 = no HTTP answer (connect error, timeout, refused by the SSRF guard, ...); a third item, when
# given, is the wall time the request started (after the pacer's wait), for the note (robotsnote.py)
RobotsFetch = Callable[[str], Awaitable[tuple[int, bytes] | tuple[int, bytes, float]]]


class OriginFailed(Exception):
    """Raised by a robots fetch function when the origin fails in a way each of its URLs would (a TLS
    certificate error): ``error_class`` becomes every such URL's outcome."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(slots=True)
class RobotsRules:
    """What one origin's robots.txt says for our agent. ``state``: parsed | allow_all | unreachable | failed
    (``error_class`` and ``message`` say why)."""

    state: str
    expires: float
    status: int = 0
    crawl_delay: float = 0.0
    parser: Protego | None = None
    agent: str = ""
    error_class: str = ""
    message: str = ""
    sitemaps: tuple[str, ...] = ()  # the Sitemap: lines (at most MAX_SITEMAPS)
    digest: str = ""  # sha1 of the body, for telling a changed robots.txt
    directives: tuple[str, ...] = ()  # its rule lines, normalised ("disallow: /x"), for logging a change

    def allows(self, url: str) -> bool:
        """May ``url`` (on this origin) be fetched? Unreachable robots disallow everything."""
        if self.parser is not None:
            return bool(self.parser.can_fetch(url, self.agent))
        return self.state == "allow_all"

    @property
    def unreachable(self) -> bool:
        return self.state == "unreachable"


@dataclass(frozen=True, slots=True)
class SharedAnswer:
    """A robots.txt answer as a share keeps it: status, body (at most ``MAX_ROBOTS_BYTES``), and when it was
    fetched (wall-clock seconds, comparable across nodes)."""

    status: int
    body: bytes
    fetched_at: float


class RobotsShare(Protocol):
    """Robots.txt answers shared by a fleet's nodes. Blocking calls (a cache runs them in a thread); may raise."""

    def get_robots(self, origin: str) -> SharedAnswer | None: ...
    def put_robots(self, origin: str, answer: SharedAnswer) -> None: ...


def robots_url(origin: str) -> str:
    return origin + "/robots.txt"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a normalized URL: robots.txt applies per origin."""
    end = url.find("/", url.index("//") + 2)
    return url if end < 0 else url[:end]


class RobotsCache:
    """Per-origin robots rules with expiry; bounded to ``max_entries`` origins (oldest dropped first)."""

    def __init__(
        self,
        politeness: PolitenessSettings,
        *,
        agent: str,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 20_000,
        share: RobotsShare | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._p = politeness
        self.agent = agent.strip().lower()
        self._clock = clock
        self._max = max_entries
        self._rules: dict[str, RobotsRules] = {}
        self._inflight: dict[str, asyncio.Future[RobotsRules]] = {}  # fetch tasks, joined by waiters
        self.fetches = 0  # robots.txt downloads started (tests and stats)
        self._share = share
        self._wall = wall
        self.shared_hits = 0  # answers taken from the share instead of fetched
        self._news: dict[str, RobotsNote] = {}  # origin -> its last load, until the engine reports it
        self.changes = 0  # loads whose directives differed from the answer they replaced

    def fresh(self, origin: str) -> RobotsRules | None:
        """Cached, unexpired rules for ``origin`` or None. Synchronous: the per-URL fast path."""
        rules = self._rules.get(origin)
        if rules is not None and rules.expires > self._clock():
            return rules
        return None

    async def get(self, origin: str, fetch: RobotsFetch) -> RobotsRules:
        """Rules for ``origin``, fetching robots.txt at most once at a time per origin. Never raises
        for fetch failures (they become 'unreachable' rules). The fetch runs in its own task, so a
        cancelled caller does not cancel it for the others that joined."""
        rules = self.fresh(origin)
        if rules is not None:
            return rules
        task = self._inflight.get(origin)
        if task is None:
            task = asyncio.ensure_future(self._fetch(origin, fetch))
            self._inflight[origin] = task
        return await asyncio.shield(task)

    async def _fetch(self, origin: str, fetch: RobotsFetch) -> RobotsRules:
        try:
            shared = await self._shared(origin)
            if shared is not None and shared[0].expires > self._clock():
                rules, at = shared
                log.debug("robots share: %s from the share", origin)
                self.shared_hits += 1
                self._loaded(origin, rules, at=at, fetched=False)
                return rules
            prior = shared[0] if shared is not None else None  # the crawl's last answer, expired
            self.fetches += 1
            log.debug("robots: fetching %s/robots.txt (share: %s)", origin, self._share is not None)
            at = self._wall()
            try:
                got = await fetch(origin)
                status, body = got[0], got[1]
                if len(got) > 2:
                    at = got[2]  # type: ignore[misc]
            except OriginFailed as failed:
                rules = RobotsRules("failed", self._clock() + self._p.robots_5xx_retry_s, agent=self.agent,
                                    error_class=failed.error_class, message=str(failed))  # fmt: skip
                self._store(origin, rules)  # not shared: another node may reach the origin another way
                return rules
            except Exception:  # a fetch function must not fail the cache; treat as unreachable
                status, body = 0, b""
            rules = self.from_response(status, body)
            if self._share is not None and status:  # shared before the rules show: once the crawl hears the
                # load (its Sitemap: lines on a result), another process given the host finds it in the share
                await self._call_share(self._share.put_robots, origin,
                                       SharedAnswer(status, body[:MAX_ROBOTS_BYTES], self._wall()))  # fmt: skip
            self._loaded(origin, rules, at=at, fetched=True, prior=prior)
            return rules
        finally:
            self._inflight.pop(origin, None)

    async def _shared(self, origin: str) -> tuple[RobotsRules, float] | None:
        """The share's answer for ``origin`` as rules (expiring by its age), with when it was fetched, when
        the share has one."""
        if self._share is None:
            return None
        got = await self._call_share(self._share.get_robots, origin)
        if not isinstance(got, SharedAnswer):
            return None
        rules = self.from_response(got.status, got.body, age=max(0.0, self._wall() - got.fetched_at))
        return rules, got.fetched_at

    def _loaded(
        self, origin: str, rules: RobotsRules, *, at: float, fetched: bool, prior: RobotsRules | None = None
    ) -> None:
        """Keep a load's rules, note it for the crawl, and log it when it changed the origin's rules: against
        this cache's last answer, or, when it has none (the host came to this node after another had it),
        the share's expired one (``prior``)."""
        old = self._rules.get(origin) or prior
        changed = _changed(old, rules) if old is not None and old.state != "failed" else ()
        self._store(origin, rules)
        self._news[origin] = RobotsNote(origin, rules.status, at, fetched, rules.sitemaps, rules.crawl_delay,
                                        rules.digest, changed)  # fmt: skip
        if changed:
            self.changes += 1
            assert old is not None
            log.info("robots.changed", extra={"fields": {
                "origin": origin, "changed": list(changed), "crawl_delay_was": old.crawl_delay,
                "crawl_delay": rules.crawl_delay, "status_was": old.status, "status": rules.status,
                "source": "fetched" if fetched else "share"}})  # fmt: skip

    def take_news(self, origin: str) -> RobotsNote | None:
        """The note of ``origin``'s last load, once (None when it was taken or there was none)."""
        return self._news.pop(origin, None) if self._news else None

    async def _call_share(self, fn: Callable[..., object], *args: object) -> object:
        """Run a blocking share call in a thread; a failing share only costs the fetch it would have saved."""
        try:
            return await asyncio.to_thread(fn, *args)
        except Exception as exc:
            log.warning("robots share: %s failed for %s: %s", getattr(fn, "__name__", fn), args[0], exc)
            return None

    def from_response(self, status: int, body: bytes, *, age: float = 0.0) -> RobotsRules:
        """Pure mapping of a robots.txt answer to rules (expiry from the injected clock, less the answer's
        ``age`` in seconds when it comes from a share)."""
        now = self._clock() - age
        ttl = self._p.robots_ttl_s
        if 200 <= status < 300:
            text = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace").lstrip("\ufeff")
            parser = Protego.parse(text)
            return RobotsRules(
                "parsed", now + ttl, status, crawl_delay=self._delay_of(parser), parser=parser, agent=self.agent,
                sitemaps=_sitemaps(parser), digest=hashlib.sha1(body[:MAX_ROBOTS_BYTES]).hexdigest(),
                directives=_directives(text),
            )  # fmt: skip
        if 400 <= status < 500 and status != 429 or 300 <= status < 400:
            return RobotsRules("allow_all", now + ttl, status, agent=self.agent)
        return RobotsRules("unreachable", now + self._p.robots_5xx_retry_s, status, agent=self.agent)

    def _delay_of(self, parser: Protego) -> float:
        delay = parser.crawl_delay(self.agent) or 0.0
        rate = parser.request_rate(self.agent)
        if rate is not None and rate.requests > 0:
            delay = max(delay, rate.seconds / rate.requests)
        return max(0.0, min(float(delay), self._p.max_crawl_delay_s))

    def _store(self, origin: str, rules: RobotsRules) -> None:
        rules_map = self._rules
        rules_map.pop(origin, None)
        if len(rules_map) >= self._max:
            now = self._clock()
            for key in [k for k, v in rules_map.items() if v.expires <= now]:
                del rules_map[key]
            while len(rules_map) >= self._max:
                del rules_map[next(iter(rules_map))]
        rules_map[origin] = rules

    def remaining_block(self, origin: str) -> float:
        """Seconds until an unreachable origin's robots.txt may be tried again (0 if not blocked)."""
        rules = self._rules.get(origin)
        if rules is None or not rules.unreachable:
            return 0.0
        return max(0.0, rules.expires - self._clock())


_RULE_KEYS = frozenset({"user-agent", "allow", "disallow", "crawl-delay", "request-rate"})


def _directives(text: str, *, limit: int = 2000) -> tuple[str, ...]:
    """A robots.txt's rule lines as ``key: value`` (key lower-cased, comments and blanks dropped)."""
    out: dict[str, None] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("#")[0].partition(":")
        key = key.strip().lower()
        if sep and key in _RULE_KEYS:
            out[f"{key}: {value.strip()}"] = None
            if len(out) >= limit:
                break
    return tuple(out)


def _sitemaps(parser: Protego) -> tuple[str, ...]:
    out: list[str] = []
    try:
        for url in parser.sitemaps:
            out.append(str(url).strip()[:8192])
            if len(out) >= MAX_SITEMAPS:
                break
    except Exception:  # noqa: BLE001 - protego on hostile text: no sitemaps rather than a crash
        pass
    return tuple(dict.fromkeys(out))


def _changed(old: RobotsRules, new: RobotsRules) -> tuple[str, ...]:
    """Directive lines added (``+``) and gone (``-``), and a status that moved, from ``old`` to ``new``."""
    if old.digest == new.digest and old.status == new.status:
        return ()
    gone = set(old.directives) - set(new.directives)
    added = set(new.directives) - set(old.directives)
    out = [f"+{d}" for d in new.directives if d in added] + [f"-{d}" for d in old.directives if d in gone]
    if old.status != new.status:
        out.insert(0, f"status: {old.status} -> {new.status}")
    return tuple(out[:MAX_CHANGED])


_VALUE_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})


def x_robots_tag(value: str, agent: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from X-Robots-Tag header value(s) (several headers joined by newlines).

    ``googlebot: noindex`` style prefixes scope the directives after them (within one header) to that
    agent; directives for other agents are ignored. ``none`` means both.
    """
    noindex = nofollow = False
    agent = agent.lower()
    for header in value.lower().split("\n"):
        target = ""
        for part in header.split(","):
            part = part.strip()
            head, colon, rest = part.partition(":")
            if colon and head.strip() not in _VALUE_DIRECTIVES:
                target, part = head.strip(), rest.strip()
            if target and target != agent:
                continue
            if part in ("noindex", "none"):
                noindex = True
            if part in ("nofollow", "none"):
                nofollow = True
    return noindex, nofollow
