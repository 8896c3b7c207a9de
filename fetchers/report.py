"""What a fetcher says about a finished batch (besides the per-URL results it has already streamed).

Contract with the dispatcher:
- ``on_result`` was called exactly once for every task of the batch.
- ``unfinished`` lists the tasks to put back in the pending set. Each of them also had a result, with an
  ``error_class`` in ``RETRY_LATER``: such a result is not an outcome, do not record it as one.
- ``host_delays``: host -> seconds (from the end of the batch) before that host may be contacted again:
  its crawl-delay / minimum gap, a Retry-After, or a robots.txt back-off. Use it when leasing the host next.
- ``host_ips``: host -> the IP address used for it (per-IP leasing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fetchers.records import UrlTask

# error_class values that mean "not done, try again later" rather than an outcome.
ROBOTS_UNAVAILABLE = "robots_unavailable"  # robots.txt answered 5xx/429 or was unreachable
THROTTLED = "throttled"  # the server answered 429 or 503 with Retry-After
DEFERRED = "deferred"  # not attempted: the host is in a back-off longer than the fetcher waits
DNS_TRANSIENT = frozenset({"dns_timeout", "dns_servfail", "dns_refused"})  # the resolver, not the name, failed
DNS_RETRY_S = 5.0  # back-off for a host whose name failed transiently
RETRY_LATER = frozenset({ROBOTS_UNAVAILABLE, THROTTLED, DEFERRED}) | DNS_TRANSIENT


@dataclass(slots=True)
class BatchReport:
    serial: int
    fetcher_id: str
    pages: int  # tasks that got a final result (len(batch.tasks) - len(unfinished))
    elapsed_s: float
    host_delays: dict[str, float] = field(default_factory=dict)
    host_ips: dict[str, str] = field(default_factory=dict)
    unfinished: list[UrlTask] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1,
            "serial": self.serial,
            "fetcher_id": self.fetcher_id,
            "pages": self.pages,
            "elapsed_s": self.elapsed_s,
            "host_delays": self.host_delays,
            "host_ips": self.host_ips,
            "unfinished": [[t.url, t.url_id, t.depth] for t in self.unfinished],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BatchReport:
        return cls(
            serial=int(obj["serial"]),
            fetcher_id=str(obj["fetcher_id"]),
            pages=int(obj["pages"]),
            elapsed_s=float(obj["elapsed_s"]),
            host_delays={str(k): float(v) for k, v in obj.get("host_delays", {}).items()},
            host_ips={str(k): str(v) for k, v in obj.get("host_ips", {}).items()},
            unfinished=[UrlTask(str(u), int(i), int(d)) for u, i, d in obj.get("unfinished", [])],
        )
