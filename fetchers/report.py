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

import math
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import UrlTask, task_from_json, task_json
from fetchers.schema import SchemaError

# error_class values that mean "not done, try again later" rather than an outcome.
ROBOTS_UNAVAILABLE = "robots_unavailable"  # robots.txt answered 5xx/429 or was unreachable
THROTTLED = "throttled"  # the server answered 429 or 503 with Retry-After
DEFERRED = "deferred"  # not attempted: the host is in a back-off longer than the fetcher waits
DNS_TRANSIENT = frozenset({"dns_timeout", "dns_servfail", "dns_refused"})  # the resolver, not the name, failed
DNS_RETRY_S = 5.0  # back-off for a host whose name failed transiently
LEASE_LAPSED = "lease_lapsed"  # not attempted: the worker missed its heartbeats, the batch may be re-issued
RETRY_LATER = frozenset({ROBOTS_UNAVAILABLE, THROTTLED, DEFERRED, LEASE_LAPSED}) | DNS_TRANSIENT


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
            "unfinished": [task_json(t) for t in self.unfinished],
        }

    @classmethod
    def from_json(cls, obj: Any) -> BatchReport:
        """Validate and build; raises ``SchemaError`` (never OverflowError/TypeError) on a malformed report."""
        if not isinstance(obj, dict):
            raise SchemaError("report must be an object")
        try:
            host_delays = obj.get("host_delays", {})
            host_ips = obj.get("host_ips", {})
            unfinished = obj.get("unfinished", [])
            if not isinstance(host_delays, dict) or not isinstance(host_ips, dict) or not isinstance(unfinished, list):
                raise SchemaError("host_delays/host_ips must be objects, unfinished a list")
            # as the batch sent them (validators, redirect hops): a task given back is fetched as it would have been
            tasks = [task_from_json(item) for item in unfinished]
            return cls(
                serial=_int(obj["serial"]),
                fetcher_id=_str(obj["fetcher_id"]),
                pages=_int(obj["pages"]),
                elapsed_s=_num(obj["elapsed_s"]),
                host_delays={_str(k): _num(v) for k, v in host_delays.items()},
                host_ips={_str(k): _str(v) for k, v in host_ips.items()},
                unfinished=tasks,
            )
        except KeyError as exc:
            raise SchemaError(f"missing field {exc}") from exc


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise SchemaError(f"expected an integer, got {type(v).__name__}")
    return v


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise SchemaError(f"expected a number, got {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError as exc:
        raise SchemaError("number out of range") from exc
    if not math.isfinite(f):
        raise SchemaError("number must be finite")
    return f


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise SchemaError(f"expected a string, got {type(v).__name__}")
    return v
