"""The design card's loop on the wire: one JSON reply per batch from a node, one report per round
from the link jobs. Both travel on the service's results queue (messages.py has the envelope).

- A **reply** is a ``results`` message holding the last results of one batch, then its report; the
  results before them came in **progress** packs of the same form without a report, about one a
  second (node/chunks.py). The node has recorded the final outcomes and pages in the store and written
  each chunk's segment before sending it, so a result carries no body and no headers: about 300-600
  bytes a URL.
- A **links** message says which segments the link jobs have processed and how many new PENDING
  URLs each host gained, so the dispatcher's frontier refills those hosts from the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import FetchResult
from fetchers.report import BatchReport
from pipeline.transport.wire.messages import VERSION, BadMessage

MAX_LINKS_HOSTS = 1_000_000  # hosts in one links message; a round never reports more


def slim(result: FetchResult) -> dict[str, Any]:
    """``result`` as a reply carries it: no body, no headers (both are in the store and the segment)."""
    obj = result.to_json()
    obj["body_z"] = ""
    obj["headers"] = {}
    obj.pop("link_meta", None)  # read where the page is parsed (the segment), not by the dispatcher
    obj["body_bytes"] = result.body_bytes or len(result.body)
    return obj


def reply_text(node: str, incarnation: str, results: Sequence[FetchResult], report: BatchReport, *,
               segment: str) -> str:
    """The one reply of a batch (a ``results`` message with ``stored`` and ``segment``)."""
    return json.dumps({
        "v": VERSION, "kind": "results", "node": node, "incarnation": incarnation, "stored": True,
        "segment": segment, "results": [slim(r) for r in results], "reports": [report.to_json()],
    }, separators=(",", ":"))  # fmt: skip


def progress_text(node: str, incarnation: str, results: Sequence[FetchResult], *, segment: str) -> str:
    """A chunk of a running batch, stored (a ``results`` message with ``stored`` and ``segment`` and no
    report: the batch's reply carries it, node/chunks.py)."""
    return json.dumps({
        "v": VERSION, "kind": "results", "node": node, "incarnation": incarnation, "stored": True,
        "segment": segment, "results": [slim(r) for r in results], "reports": [],
    }, separators=(",", ":"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class LinksReport:
    """One round of the link jobs: the segments it processed and the new PENDING URLs per host.

    ``found_by`` (not on the wire) names, for each host, the host of a page that linked to it: where the link
    was found, for dispatcher shards (``pipeline.transport.links.routing``: "at home")."""

    segments: tuple[str, ...]
    hosts: Mapping[str, int]
    found_by: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"v": VERSION, "kind": "links", "segments": list(self.segments), "hosts": dict(self.hosts)}


def parse_links(obj: dict[str, Any]) -> LinksReport:
    if obj.get("kind") != "links":
        raise BadMessage(f"expected kind 'links', got {obj.get('kind')!r}")
    segments, hosts = obj.get("segments"), obj.get("hosts")
    if not isinstance(segments, list) or not all(isinstance(s, str) for s in segments):
        raise BadMessage("wrong schema: links.segments must be a list of strings")
    if not isinstance(hosts, dict) or len(hosts) > MAX_LINKS_HOSTS:
        raise BadMessage("wrong schema: links.hosts must be an object of host -> count")
    for host, count in hosts.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0 or not host or len(host) > 300:
            raise BadMessage(f"wrong schema: links.hosts[{str(host)[:80]!r}]")
    return LinksReport(tuple(segments), hosts)
