"""The fleet's re-crawl scheduling, as plain functions for ``jobs/mr_update_crawldb.py`` (issue #23).

In the fleet a fetch node records each outcome itself (no re-crawl state), so the crawl-db update job,
which reads the round's segments as well as its link records, computes each fetched URL's next fetch with
the same functions as the embedded crawl: ``observe`` (with the same simhash when ``simhash_bits`` asks for
it) and ``pipeline.frontier.hostrates.plan``, reading the crawl's recrawl settings from the store's meta
(the dispatcher writes them, with the host budget resolved). The dispatcher's core then moves due URLs
back to pending.

Under ``recrawl.policy = "poisson"`` each host's ``mu`` comes from the host's histogram of estimated change
rates (``hostrates.HostRates``), which lives in the crawl db: ``HostBook`` loads the hosts of a batch,
the batch is planned in order exactly as the embedded crawl plans its results, and the book writes back
what changed. On HBase the counts are counters in the meta table (``hbase_revisits.add_host_rates``), so
two map tasks of one round add their moves rather than overwrite each other; any other store keeps one
JSON value per host in its meta (read, add the batch's moves, write: right with one writer, as the SQLite
store's fleet has). A batch's revisits are written before its moves: a task killed in between leaves the
host's histogram a few URLs short (the replay skips results already scheduled), never double-counted.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Container, Iterable, Sequence

from fetchers.records import FetchResult
from fetchers.report import RETRY_LATER
from jobs.sitemap_links import is_sitemap_like, sitemap_lastmods
from pipeline.frontier import hostrates, signals
from pipeline.frontier.hostrates import HostRates, decode_key, encode_key
from pipeline.frontier.observation import observe
from pipeline.frontier.schedule import RECRAWL_META, Change, Schedule
from pipeline.frontier.signals import HostSignals
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage import hbase_revisits
from pipeline.storage.base import Revisit, Store
from pipeline.storage.hbase import HBaseStore
from pipeline.urls import host_of, normalize

HOST_META = "hostrates:"  # + host: a non-HBase store's per-host histogram (JSON)
SIGNAL_PREFIX = "sig."  # a host's change-signal counters, beside its histogram's (pipeline.frontier.signals)


def recrawl_schedule(store: Store) -> Schedule | None:
    """The crawl's schedule from the store's meta (the dispatcher writes it), or None: re-crawling off."""
    raw = store.get_meta(RECRAWL_META)
    if not raw:
        return None
    known = {f.name for f in dataclasses.fields(RecrawlSettings)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(raw).items() if k in known}
    return Schedule(RecrawlSettings(**values))  # type: ignore[arg-type]


def simhash_of(schedule: Schedule) -> Callable[[bytes, str], int] | None:
    """The near-duplicate signature the embedded crawl uses for these settings (None: digest only)."""
    if schedule.cfg.simhash_bits <= 0:
        return None
    from pipeline.links.change import text_simhash  # numpy and the HTML parser only when asked for

    return text_simhash


class HostBook:
    """The per-host histograms of one batch's hosts, loaded from and saved to the store, with what the
    batch adds to each host's change-signal record (``pipeline.frontier.signals``: counters ``sig.NAME``
    in the same row, added, never overwritten)."""

    __slots__ = ("store", "hosts", "_loaded", "signals")

    def __init__(self, store: Store, hosts: Iterable[str]) -> None:
        self.store = store
        self.hosts: dict[str, HostRates] = {}
        self._loaded: dict[str, dict[hostrates.Key, int]] = {}
        self.signals: dict[str, HostSignals] = {}  # this batch's counts, added to the row on save
        names = list(dict.fromkeys(hosts))
        rows = _rows(store, names)
        for h in names:
            counts_text, mu, at, dirty = rows.get(h) or ({}, None, None, False)
            counts: dict[hostrates.Key, int] = {}
            for text, n in counts_text.items():
                key = decode_key(text)
                if not isinstance(key, str) and n > 0:
                    counts[key] = n
            self._loaded[h] = dict(counts)
            solved = at if at is not None else float("-inf")
            self.hosts[h] = HostRates(counts=counts, mu=mu, solved_at=solved, dirty=dirty)

    def rates(self, host: str) -> HostRates:
        got = self.hosts.get(host)
        if got is None:
            got = self.hosts[host] = HostRates()
            self._loaded[host] = {}
        return got

    def signals_of(self, host: str) -> HostSignals:
        got = self.signals.get(host)
        if got is None:
            got = self.signals[host] = HostSignals()
        return got

    def save(self) -> None:
        """Write the moves made since loading (counts as deltas), the signal counts and each host's solve
        state."""
        deltas: dict[str, dict[str, int]] = {}
        for h in dict.fromkeys([*self.hosts, *self.signals]):
            rates, before = self.hosts.get(h, HostRates()), self._loaded.get(h, {})
            moved = {
                encode_key(k): rates.counts.get(k, 0) - before.get(k, 0)
                for k in set(before) | set(rates.counts)
                if rates.counts.get(k, 0) != before.get(k, 0)
            }
            moved.update({SIGNAL_PREFIX + k: n for k, n in self.signals.get(h, HostSignals()).as_dict().items()})
            if moved:
                deltas[h] = moved
        solved = {h: (r.mu, r.solved_at, r.dirty) for h, r in self.hosts.items()}
        if isinstance(self.store, HBaseStore):
            hbase_revisits.add_host_rates(self.store, deltas, solved)
        else:
            for h in dict.fromkeys([*solved, *deltas]):
                counts, mu, at, dirty = _json_row(self.store.get_meta(HOST_META + h))
                if h in solved:
                    mu, solved_at, dirty = solved[h]
                    at = solved_at if solved_at != float("-inf") else None
                for k, n in deltas.get(h, {}).items():
                    counts[k] = max(0, counts.get(k, 0) + n)
                value = {"counts": {k: n for k, n in counts.items() if n}, "mu": mu, "dirty": dirty, "at": at}
                self.store.put_meta(HOST_META + h, json.dumps(value, sort_keys=True))
        self._loaded = {h: dict(r.counts) for h, r in self.hosts.items()}
        self.signals = {}


def _rows(store: Store, hosts: Sequence[str]) -> dict[str, tuple[dict[str, int], float | None, float | None, bool]]:
    if isinstance(store, HBaseStore):
        return hbase_revisits.get_host_rates(store, hosts)
    return {h: _json_row(store.get_meta(HOST_META + h)) for h in hosts}


def read_signals(store: Store, hosts: Sequence[str]) -> dict[str, HostSignals]:
    """Each host's change-signal record as the crawl db holds it (the fleet's update jobs write it; the
    dispatcher asks it which validators a re-fetch sends)."""
    out = {}
    for h, (counts, *_) in _rows(store, list(dict.fromkeys(hosts))).items():
        got = {k[len(SIGNAL_PREFIX) :]: n for k, n in counts.items() if k.startswith(SIGNAL_PREFIX)}
        if got:
            out[h] = HostSignals.from_dict(got)
    return out


def _json_row(raw: str | None) -> tuple[dict[str, int], float | None, float | None, bool]:
    """A non-HBase store's host row; anything unreadable is an empty histogram (the next save rewrites)."""
    try:
        obj = json.loads(raw) if raw else {}
    except ValueError:
        obj = {}
    if not isinstance(obj, dict):
        obj = {}
    counts = obj.get("counts")
    counts = (
        {str(k): int(n) for k, n in counts.items() if isinstance(n, int)} if isinstance(counts, dict) else {}
    )
    mu, at = obj.get("mu"), obj.get("at")
    return (
        counts,
        float(mu) if isinstance(mu, int | float) else None,
        float(at) if isinstance(at, int | float) else None,
        obj.get("dirty") is True,
    )


def schedule_results(
    store: Store, schedule: Schedule, results: Iterable[FetchResult], *, unparsed: Container[str] = ()
) -> int:
    """The crawl-db update's other half on the fleet: each final fetch result's URL gets its next fetch
    (``hostrates.plan``, the embedded crawl's function) from the store's previous state; robots refusals
    and retry-later results are not scheduled. Idempotent: a result not newer than the stored state's fetch
    is skipped (a replayed segment, or a URL the dispatcher already scheduled). Returns how many were
    written. A page in ``unparsed`` (the link service's quarantine: its parse killed extract tasks) gets
    the exact digest only, no text simhash: parsing it here would kill this job as it killed those."""
    todo: Sequence[FetchResult] = [
        r for r in results if r.error_class not in RETRY_LATER and r.error_class != "robots_blocked"
    ]
    if not todo:
        return 0
    simhash = simhash_of(schedule)
    files = schedule.for_sitemaps()  # robots.txt and sitemap files: their own interval, as the embedded crawl
    book = HostBook(store, (host_of(r.url) for r in todo))
    budget = schedule.cfg.host_budget_rps
    out: dict[str, Revisit] = {}
    stored = _revisits(store, [normalize(r.url) or r.url for r in todo])
    for result in todo:
        url = normalize(result.url) or result.url
        prev = out.get(url) or stored.get(url)
        if prev is not None and prev.fetched_at >= result.fetched_at:
            continue
        host = host_of(url)
        rates = book.rates(host) if schedule.poisson else HostRates()
        obs = observe(result, simhash=None if result.url in unparsed else simhash)
        plan_with = files if is_sitemap_like(result) else schedule
        change, out[url] = hostrates.plan(plan_with, rates, prev, obs, url=url, host=host, budget_rps=budget)
        signals.observe(book.signals_of(host), prev, status=obs.status, etag=obs.etag,
                        last_modified=obs.last_modified, digest=obs.digest, changed=change is Change.CHANGED)  # fmt: skip
    written = store.put_revisits(list(out.items())) if out else 0
    book.save()
    return written


def apply_lastmods(store: Store, schedule: Schedule, results: Iterable[FetchResult]) -> int:
    """Sitemap ``lastmod`` into the schedule (issue #23 point 4): for each sitemap result among
    ``results``, every known URL it lists whose lastmod is after its stored copy's fetch becomes due at the
    sitemap's fetch time (``Schedule.on_lastmod``; not already due, else left). Idempotent: a replayed
    sitemap finds those URLs due already. Returns how many states were written."""
    due: dict[str, Revisit] = {}
    for result in results:
        found = sitemap_lastmods(result)
        stored = _revisits(store, [url for url, _ in found]) if found else {}
        for url, lastmod in found:
            prev = due.get(url) or stored.get(url)
            if prev is None:
                continue  # not in the crawl db yet: the link job adds it as a new URL
            moved = schedule.on_lastmod(prev, lastmod, now=result.fetched_at)
            if moved is not None:
                due[url] = moved
    return store.put_revisits(list(due.items())) if due else 0


def _revisits(store: Store, urls: Sequence[str]) -> dict[str, Revisit]:
    """The stored states of ``urls``: one round trip on HBase, one lookup per URL elsewhere."""
    if isinstance(store, HBaseStore):
        return hbase_revisits.get_revisits(store, urls)
    return {u: rv for u in dict.fromkeys(urls) if (rv := store.get_revisit(u)) is not None}
