"""How a crawl core opens: the seeds it remembers, the frontier's limits from the settings, and the
frontier and seen-table rebuilt from the store on resume. Functions of their arguments; the core calls
them once, from its constructor (pipeline/crawl/core.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pipeline.frontier.dedup import SeenFilter
from pipeline.frontier.frontier import Frontier
from pipeline.frontier.limits import FrontierLimits
from pipeline.settings import Settings
from pipeline.storage.base import Store
from pipeline.urls import normalize


def store_seeds(store: Store, seeds: Sequence[str], *, resume: bool) -> list[str]:
    """The crawl's seeds: on resume without seeds, the stored ones; else the valid given ones merged with
    the stored ones and stored back. ValueError when there is none at all."""
    stored = store.get_meta("seeds")
    if resume and stored and not seeds:
        return list(json.loads(stored))
    clean = [u for u in (normalize(s) for s in seeds) if u]
    if not clean and not stored:
        raise ValueError("no valid seed URL")
    merged = sorted(set(clean) | set(json.loads(stored) if stored else []))
    store.put_meta("seeds", json.dumps(merged))
    return merged


def frontier_limits(settings: Settings) -> FrontierLimits:
    sc, pol, d = settings.scope, settings.politeness, settings.dispatch
    return FrontierLimits(
        # The window is the largest batch (S3's n_max); 16 at least, so a small n_max does not turn every
        # lease into a store read.
        window_per_host=max(16, d.n_max), max_urls_per_host_batch=max(1, d.k // 4),
        hosts_per_ip=max(1, pol.per_ip_concurrency // max(1, pol.per_host_concurrency)),
        max_pages_per_host=sc.max_pages_per_host, active_hosts=d.active_hosts, session_urls=d.host_session_urls,
        priority=d.priority == "inlinks", recrawl=settings.recrawl.on,
    )  # fmt: skip


def rebuild_from_store(store: Store, seen: SeenFilter, frontier: Frontier) -> None:
    """After the journal's replay: every known URL into the exact seen-table, with a host cap the URLs each
    host took in earlier runs, and every host's pending count into the frontier (its URLs stay in the
    store until a refill)."""
    if seen.table is not None:
        seen.table.load(store.iter_url_ids())
    if frontier.limits.max_pages_per_host:
        frontier.charge_taken(store.taken_per_host())
    for host, count in store.pending_hosts():
        frontier.restore(host, count)
