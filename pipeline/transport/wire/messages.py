"""Wire format of the fleet's own messages (the fetch task itself is a Celery JSON message).

Every message is a JSON object with ``"v": 1`` and a ``"kind"``:

- ``results``: a node's one reply per batch (replies.py): ``{"node", "incarnation", "stored": true,
  "segment", "results": [FetchResult without body or headers...], "reports": [BatchReport]}``. The
  node has recorded the batch's final outcomes and pages in the store and closed its segment first.
- ``heartbeat``: S1's fields (successes, failures, rate p, free slots q) plus ``incarnation``
  (``<process>/<lease epoch>``: the process part changes when the worker process restarts, the epoch
  each time its lease lapses, ``same_process``), ``slots`` (batches it runs at once),
  ``active`` (batches running), ``held`` (the batches it runs, fetching or storing) and
  ``free_by_service`` (q for each crawl the node serves, "" for a crawl it has no fetcher for yet).
- ``submit``: ``{"service", "urls": [...]}`` from a client.
- ``links``: from the fleet's link jobs (replies.py): segments processed, new pending URLs per host.

Bodies are UTF-8 JSON, optionally deflated as a whole (``content_encoding="deflate"``). ``decode`` never trusts sizes: the raw body and the inflated
body are both bounded by ``max_bytes``, and any violation raises ``BadMessage`` with a reason.
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import FetchResult, Timings
from fetchers.report import BatchReport
from fetchers.schema import SchemaError
from pipeline.dispatch.protocols import Heartbeat

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/json"
DEFLATE = "deflate"
VERSION = 1
MAX_HELD = 4096  # batches one heartbeat may name as held (a node runs slots + prefetch of them)
MAX_SERVICES = 256  # crawls (wire service names) one heartbeat may give a q for


def same_process(a: str, b: str) -> bool:
    """Whether two incarnations ``<process>/<lease epoch>`` are one worker process on either side of a
    lease lapse (a stop, a starved loop): a restart changes the process part."""
    return a.rpartition("/")[0] == b.rpartition("/")[0] != ""


def lease_epoch(incarnation: str) -> int:
    """The lease epoch of an incarnation ``<process>/<lease epoch>`` (0 when it names none)."""
    tail = incarnation.rpartition("/")[2]
    return int(tail) if tail.isdigit() else 0


class BadMessage(ValueError):
    """A message that must go to the dead-letter queue; ``str(exc)`` is the logged reason."""


@dataclass(slots=True)
class Encoded:
    body: bytes
    content_type: str = CONTENT_TYPE
    content_encoding: str = "utf-8"


def encode(obj: dict[str, Any], *, compress: bool = False) -> Encoded:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return wrap(raw, compress=compress)


def wrap(raw: bytes, *, compress: bool) -> Encoded:
    if compress:
        return Encoded(zlib.compress(raw, 1), CONTENT_TYPE, DEFLATE)
    return Encoded(raw)


def decode(
    body: bytes | str, *, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> dict[str, Any]:
    """Parse one message body into a JSON object, or raise BadMessage saying why."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if len(body) > max_bytes:
        raise BadMessage(f"oversized: {len(body)} bytes > limit {max_bytes}")
    if (content_type or "") != CONTENT_TYPE:
        raise BadMessage(f"content_type {content_type!r} is not {CONTENT_TYPE}")
    if content_encoding == DEFLATE:
        inflater = zlib.decompressobj()
        try:
            body = inflater.decompress(body, max_bytes)
        except zlib.error as exc:
            raise BadMessage(f"bad deflate body: {exc}") from exc
        if inflater.unconsumed_tail:
            raise BadMessage(f"oversized: inflates beyond limit {max_bytes}")
    elif content_encoding not in (None, "", "utf-8", "utf8"):
        raise BadMessage(f"unknown content_encoding {content_encoding!r}")
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadMessage(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise BadMessage("not a JSON object")
    if obj.get("v") != VERSION:
        raise BadMessage(f"unknown version {obj.get('v')!r}")
    return obj


# --- results ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class ResultsPack:
    node: str
    incarnation: str
    results: list[FetchResult] = field(default_factory=list)
    reports: list[BatchReport] = field(default_factory=list)
    # A node's one reply per batch (replies.py): its final results are recorded in the store already,
    # and ``segment`` names the closed segment holding them with their bodies, for the link jobs.
    stored: bool = False
    segment: str = ""


def parse_results(obj: dict[str, Any], *, max_body_bytes: int) -> ResultsPack:
    if obj.get("kind") != "results":
        raise BadMessage(f"expected kind 'results', got {obj.get('kind')!r}")
    try:
        node, inc = obj["node"], obj["incarnation"]
        if not isinstance(node, str) or not isinstance(inc, str):
            raise SchemaError("node/incarnation must be strings")
        raw_results, raw_reports = obj["results"], obj["reports"]
        if not isinstance(raw_results, list) or not isinstance(raw_reports, list):
            raise SchemaError("results/reports must be lists")
        results = [_slim_result(r, max_body_bytes) for r in raw_results]
        reports = [_parse_report(r) for r in raw_reports]
        stored, segment = obj.get("stored", False), obj.get("segment", "")
        if not isinstance(stored, bool) or not isinstance(segment, str):
            raise SchemaError("stored must be a boolean and segment a string")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # SchemaError is a ValueError
        raise BadMessage(f"wrong schema: {exc!r}") from exc
    return ResultsPack(node, inc, results, reports, stored=stored, segment=segment)


_SLIM_INTS = ("url_id", "depth", "status", "wire_bytes", "body_bytes", "serial")
_SLIM_STRS = ("content_type", "ip", "error_class", "error_message", "fetcher_id")
_NUMBER = (int, float)


def _slim_result(r: Any, max_body_bytes: int) -> FetchResult:
    """One result of a reply. A node's reply carries no body and no headers (replies.slim): such a
    result is checked here in one pass, with the same rules as ``FetchResult.from_json`` (which took
    ~9% of the dispatcher's CPU, most of it per-field calls); anything else, and anything that fails a
    check, goes through ``from_json``, so a bad result raises the same ``SchemaError`` either way."""
    if type(r) is not dict or r.get("body_z") != "" or "body_lz4" in r or r.get("headers") != {}:
        return FetchResult.from_json(r, max_body_bytes=max_body_bytes)
    try:
        url, final_url, redirects, timings = r["url"], r["final_url"], r["redirects"], r["timings"]
        fetched_at, retry_after, truncated = r["fetched_at"], r.get("retry_after_s"), r["truncated"]
        ok = (
            all(type(r[k]) is int for k in _SLIM_INTS) and all(type(r[k]) is str for k in _SLIM_STRS)
            and type(url) is str and type(final_url) is str and url.isascii() and final_url.isascii()
            and type(redirects) is list and all(type(x) is str for x in redirects)
            and type(timings) is list and len(timings) == 4 and all(type(t) in _NUMBER and _finite(t) for t in timings)
            and type(fetched_at) in _NUMBER and _finite(fetched_at) and type(truncated) is bool
            and (retry_after is None or (type(retry_after) in _NUMBER and _finite(retry_after)))
            and type(hops := r.get("redirect_hops", 0)) is int and 0 <= hops < 1 << 15
        )  # fmt: skip
    except (KeyError, OverflowError):
        ok = False
    if not ok:
        return FetchResult.from_json(r, max_body_bytes=max_body_bytes)
    return FetchResult(
        url=url, url_id=r["url_id"], depth=r["depth"], final_url=final_url, redirects=redirects,
        status=r["status"], content_type=r["content_type"], truncated=truncated, wire_bytes=r["wire_bytes"],
        body_bytes=r["body_bytes"], timings=Timings(*map(float, timings)), ip=r["ip"],
        error_class=r["error_class"], error_message=r["error_message"], serial=r["serial"],
        fetcher_id=r["fetcher_id"], fetched_at=float(fetched_at),
        retry_after_s=None if retry_after is None else float(retry_after),
        noindex=bool(r.get("noindex", False)), nofollow=bool(r.get("nofollow", False)),
        redirect_hops=hops,
    )  # fmt: skip


def _finite(x: float) -> bool:
    return math.isfinite(x)


def _parse_report(obj: Any) -> BatchReport:
    if not isinstance(obj, dict):
        raise SchemaError("report must be an object")
    report = BatchReport.from_json(obj)
    if report.pages < 0 or report.elapsed_s < 0:
        raise SchemaError("report pages/elapsed_s must be >= 0")
    return report


# --- heartbeats ------------------------------------------------------------------------------------
@dataclass(slots=True)
class NodeHeartbeat:
    """S1 heartbeat of one fetch node plus what the fleet dispatcher needs to route to it."""

    node: str
    incarnation: str
    sent_at: float
    successes: int
    failures: int
    rate: float
    free_slots: int
    slots: int
    active: int
    address: str = ""
    # (service, serial, fetcher id) of each batch the node is running now, storing included: the
    # dispatcher renews those batches' leases (pipeline.dispatch.ledger). Optional on the wire.
    held: list[tuple[str, int, str]] = field(default_factory=list)
    # S1's q per crawl the node serves (wire service name -> the free slots of the fetcher its batches
    # use; "" -> what a crawl without a fetcher here yet would get). ``free_slots`` sums the crawls'
    # fetchers. Optional on the wire: without it every crawl reads ``free_slots``.
    free_by_service: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": VERSION, "kind": "heartbeat", "node": self.node, "incarnation": self.incarnation,
            "sent_at": self.sent_at, "successes": self.successes, "failures": self.failures,
            "rate": self.rate, "free_slots": self.free_slots, "slots": self.slots,
            "active": self.active, "address": self.address, "held": [list(h) for h in self.held],
            "free_by_service": dict(self.free_by_service),
        }  # fmt: skip

    def free_for(self, service: str | None) -> int:
        """q as the crawl ``service`` sees it (None: the node's whole q)."""
        if service is None or not self.free_by_service:
            return self.free_slots
        return self.free_by_service.get(service, self.free_by_service.get("", self.free_slots))

    def for_fetcher(self, fetcher_id: str, *, share: int, service: str | None = None) -> Heartbeat:
        """The S1 heartbeat of one of the node's ``share`` virtual fetchers (p and q split evenly), q as
        the crawl ``service`` sees it."""
        share = max(1, share)
        return Heartbeat(
            fetcher_id=fetcher_id, sent_at=self.sent_at, successes=self.successes, failures=self.failures,
            rate=self.rate / share, free_slots=self.free_for(service) // share, address=self.address,
        )  # fmt: skip


def parse_heartbeat(obj: dict[str, Any]) -> NodeHeartbeat:
    if obj.get("kind") != "heartbeat":
        raise BadMessage(f"expected kind 'heartbeat', got {obj.get('kind')!r}")
    spec: dict[str, type | tuple[type, ...]] = {
        "node": str, "incarnation": str, "sent_at": (int, float), "successes": int, "failures": int,
        "rate": (int, float), "free_slots": int, "slots": int, "active": int, "address": str,
    }  # fmt: skip
    for name, kind in spec.items():
        value = obj.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise BadMessage(f"wrong schema: heartbeat field {name!r}")
    if obj["slots"] < 1 or obj["slots"] > 4096 or obj["active"] < 0:
        raise BadMessage("wrong schema: heartbeat slots/active out of range")
    return NodeHeartbeat(**{name: obj[name] for name in spec}, held=_held(obj.get("held", [])),  # type: ignore[arg-type]
                         free_by_service=_free_by_service(obj.get("free_by_service", {})))  # fmt: skip


def _free_by_service(value: Any) -> dict[str, int]:
    if not isinstance(value, dict) or len(value) > MAX_SERVICES:
        raise BadMessage("wrong schema: heartbeat field 'free_by_service'")
    for name, free in value.items():
        if not isinstance(name, str) or isinstance(free, bool) or not isinstance(free, int) or free < 0:
            raise BadMessage("wrong schema: heartbeat field 'free_by_service'")
    return dict(value)


def _held(value: Any) -> list[tuple[str, int, str]]:
    if not isinstance(value, list) or len(value) > MAX_HELD:
        raise BadMessage("wrong schema: heartbeat field 'held'")
    out = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str)
                or isinstance(item[1], bool) or not isinstance(item[1], int) or not isinstance(item[2], str)):  # fmt: skip
            raise BadMessage("wrong schema: heartbeat field 'held'")
        out.append((item[0], item[1], item[2]))
    return out


# --- submit ----------------------------------------------------------------------------------------
def submit_message(service: str, urls: list[str]) -> dict[str, Any]:
    return {"v": VERSION, "kind": "submit", "service": service, "urls": list(urls)}


def parse_submit(obj: dict[str, Any]) -> tuple[str, list[str]]:
    if obj.get("kind") != "submit":
        raise BadMessage(f"expected kind 'submit', got {obj.get('kind')!r}")
    service, urls = obj.get("service"), obj.get("urls")
    if (
        not isinstance(service, str)
        or not isinstance(urls, list)
        or not all(isinstance(u, str) for u in urls)
    ):
        raise BadMessage("wrong schema: submit needs service (str) and urls (list of str)")
    return service, urls
