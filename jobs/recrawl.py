"""The fleet's re-crawl scheduling, as plain functions for ``jobs/mr_update_crawldb.py`` (issue #23).

In the fleet a fetch node records each outcome itself (no re-crawl state), so the crawl-db update job,
which reads the round's segments as well as its link records, computes each fetched URL's next fetch with
the same schedule and observation rule as the embedded crawl (``pipeline.frontier``), reading the crawl's
recrawl settings from the store's meta. The dispatcher's core then moves due URLs back to pending.

Under ``recrawl.policy = "poisson"`` the job schedules with the policy's default marginal value
(``Schedule.default_mu``: a page changing once per ``initial_interval_s`` comes back after about that
long): it sees one round's results, not each host's whole collection, so it does not solve a per-host
``mu`` from the host's budget as the embedded crawl's ``pipeline.crawl.revisits`` does.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

from fetchers.records import FetchResult
from fetchers.report import RETRY_LATER
from pipeline.frontier.observation import observe
from pipeline.frontier.schedule import RECRAWL_META, Schedule
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit, Store
from pipeline.urls import host_of, normalize


def recrawl_schedule(store: Store) -> Schedule | None:
    """The crawl's schedule from the store's meta (the dispatcher writes it), or None: re-crawling off."""
    raw = store.get_meta(RECRAWL_META)
    if not raw:
        return None
    known = {f.name for f in dataclasses.fields(RecrawlSettings)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(raw).items() if k in known}
    return Schedule(RecrawlSettings(**values))  # type: ignore[arg-type]


def schedule_results(store: Store, schedule: Schedule, results: Iterable[FetchResult]) -> int:
    """The crawl-db update's other half on the fleet: each final fetch result's URL gets its next fetch
    (``pipeline.frontier.schedule``) from the store's previous state; robots refusals and retry-later
    results are not scheduled. Idempotent: a result not newer than the stored state's fetch is skipped
    (a replayed segment, or a URL the dispatcher already scheduled). Returns how many were written."""
    out: dict[str, Revisit] = {}
    for result in results:
        if result.error_class in RETRY_LATER or result.error_class == "robots_blocked":
            continue
        url = normalize(result.url) or result.url
        prev = out.get(url) or store.get_revisit(url)
        if prev is not None and prev.fetched_at >= result.fetched_at:
            continue
        _, out[url] = schedule.plan(prev, observe(result), url=url, host=host_of(url))
    return store.put_revisits(list(out.items())) if out else 0
