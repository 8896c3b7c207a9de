"""The frontier's leases: which fetcher holds which hosts, how many URLs are out, how many hosts each IP
has leased. Pure.

A host is leased to one fetcher at a time, so per-host limits hold fleet-wide. A host's IP, once a
fetcher has reported it (``HostState.ip``), caps how many of that IP's hosts may be leased at once
(``hosts_per_ip``: the per-IP limit). A lease's own state lives on the host (``leased_to``,
``leased_count``); this book holds what spans hosts.
"""

from __future__ import annotations

from pipeline.frontier.hoststate import HostState


class LeaseBook:
    def __init__(self, hosts_per_ip: int) -> None:
        self.hosts_per_ip = hosts_per_ip
        self.urls = 0  # URLs out under every lease
        self._hosts: dict[str, list[str]] = {}  # fetcher_id -> hosts
        self._per_ip: dict[str, int] = {}  # IP -> hosts of it leased

    def ip_full(self, hs: HostState) -> bool:
        """True when ``hs`` has a known IP which already has ``hosts_per_ip`` hosts leased."""
        return bool(hs.ip) and self._per_ip.get(hs.ip, 0) >= self.hosts_per_ip

    def start(self, fetcher_id: str, hs: HostState, urls: int) -> None:
        """Lease ``hs`` to ``fetcher_id`` with ``urls`` of its URLs."""
        hs.leased_to = fetcher_id
        hs.leased_count = urls
        self.urls += urls
        self._hosts.setdefault(fetcher_id, []).append(hs.host)
        if hs.ip:
            self._per_ip[hs.ip] = self._per_ip.get(hs.ip, 0) + 1

    def take_all(self, fetcher_id: str) -> list[str]:
        """The hosts leased to ``fetcher_id``, out of the book: the caller ends each (``end``)."""
        return self._hosts.pop(fetcher_id, [])

    def take(self, fetcher_id: str, host: str) -> bool:
        """Take ``host`` out of ``fetcher_id``'s leases (the caller ends it); False when not leased to it."""
        hosts = self._hosts.get(fetcher_id)
        if not hosts or host not in hosts:
            return False
        hosts.remove(host)
        return True

    def end(self, hs: HostState, ip: str) -> None:
        """``hs``'s lease is over; ``ip``: the address its fetcher resolved for it ("" = none reported)."""
        if hs.ip:
            self._per_ip[hs.ip] -= 1
        if ip:
            hs.ip = ip
        hs.leased_to = ""
        self.urls -= hs.leased_count
        hs.leased_count = 0

    def note_ip(self, hs: HostState, ip: str) -> None:
        """A fetcher resolved ``hs`` to ``ip``; a leased host without an IP until now counts against it."""
        if not hs.leased_to:
            hs.ip = ip
        elif not hs.ip:
            hs.ip = ip
            self._per_ip[ip] = self._per_ip.get(ip, 0) + 1  # count the lease it is under
