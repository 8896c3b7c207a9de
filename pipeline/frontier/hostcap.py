"""The host cap (``scope.max_pages_per_host``) as the frontier keeps it: the distinct pages each host has
given, over every run of a crawl. Pure.

A host's own count lives on its ``HostState`` (``issued``); this object holds the cap and the counts
earlier runs left for hosts this run has not met yet (``charge``), so that a resumed crawl or a restarted
dispatcher counts from where the last one stopped. What is not charged (a re-fetch, a robots.txt or
sitemap file) is the frontier's to decide (``UrlTask.uncharged``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pipeline.frontier.hoststate import HostState


class HostCap:
    def __init__(self, cap: int) -> None:
        """``cap``: pages per host, 0 = no cap."""
        self.cap = cap
        self._before: dict[str, int] = {}  # host -> pages earlier runs took, for hosts not met yet

    def full(self, issued: int) -> bool:
        """True when a host that has given ``issued`` pages may give no new one."""
        return bool(self.cap) and issued >= self.cap

    def capped(self, host: str, hs: HostState | None) -> bool:
        """``host`` (its state ``hs``, None if this run has not met it) has given the cap."""
        return self.full(hs.issued if hs is not None else self._before.get(host, 0))

    def charge(self, taken: Mapping[str, int], hosts: Mapping[str, HostState]) -> None:
        """Pages each host gave in earlier runs (``Store.taken_per_host``, on resume): a known host's
        count grows now, another's when it is met (``met``). Without a cap there is nothing to count."""
        if not self.cap:
            return
        for host, n in taken.items():
            hs = hosts.get(host)
            if hs is not None:
                hs.issued += n
            elif n > 0:
                self._before[host] = n

    def met(self, hs: HostState) -> None:
        """``hs`` was just made: it starts from what earlier runs took from its host."""
        if self._before:
            hs.issued = self._before.pop(hs.host, 0)

    def capped_hosts(self, states: Iterable[HostState]) -> int:
        """Hosts that gave the cap, in this run (``states``) or, hosts not met yet, in earlier ones."""
        counts = [*(hs.issued for hs in states), *self._before.values()]
        return sum(1 for n in counts if self.full(n))
