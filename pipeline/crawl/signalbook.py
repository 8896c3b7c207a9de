"""Each host's change-signal record for one crawl (``pipeline.frontier.signals``), where the crawl decides
how to ask for re-fetches.

The embedded crawl counts the records itself as its results are planned (``counted``). A fleet's dispatcher
plans nothing (its nodes' results are scheduled by the link jobs' crawl-db update, which counts the same
records in the crawl db: ``jobs.recrawl.read_signals``), so it reads a host's record from the crawl db, at
most every ``REFRESH_S`` per host. Either way ``of(host)`` is what ``Recrawler.decorate`` asks.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from jobs.recrawl import read_signals
from pipeline.frontier.signals import HostSignals
from pipeline.storage.base import Store

REFRESH_S = 10.0  # a fleet dispatcher reads a host's record again after this long


class SignalBook:
    def __init__(self, store: Store, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._hosts: dict[str, HostSignals] = {}
        self._read_at: dict[str, float] = {}
        self.local = False  # records counted here (the embedded crawl): the crawl db has none to read

    def counted(self, host: str) -> HostSignals:
        """The host's record, to count a result into (the embedded crawl)."""
        self.local = True
        got = self._hosts.get(host)
        if got is None:
            got = self._hosts[host] = HostSignals()
        return got

    def of(self, host: str) -> HostSignals | None:
        """The host's record as far as this crawl knows it (None: nothing yet)."""
        if self.local:
            return self._hosts.get(host)
        now = self.clock()
        if now - self._read_at.get(host, -REFRESH_S) >= REFRESH_S:
            self._read_at[host] = now
            got = read_signals(self.store, [host]).get(host)
            if got is not None:
                self._hosts[host] = got
        return self._hosts.get(host)

    def summary(self) -> dict[str, object]:
        """Hosts per way of asking (conditional, full, plain), hosts whose sitemaps are trusted, and the
        counts summed over hosts."""
        modes = Counter(s.mode for s in self._hosts.values())
        total = HostSignals()
        for s in self._hosts.values():
            total.add(s)
        return {"hosts_by_mode": dict(modes), "hosts_skipping": sum(s.skips for s in self._hosts.values()),
                "counts": total.as_dict(),
                "full_or_plain_hosts": sorted(h for h, s in self._hosts.items() if s.mode != "conditional")[:100]}  # fmt: skip
