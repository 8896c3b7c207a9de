"""The fields of a crawl's ``warcinfo`` record: who crawled, with what, how, under which settings.

The fields archivists look for (as Heritrix writes them): ``software`` (name/version and the HTTP and
WARC libraries), ``hostname``, ``operator`` (the contact the user-agent string gives), the exact
``http-header-user-agent``, ``robots`` (obey/ignore) and the robots token, ``format``/``conformsTo``,
``isPartOf``, and ``crawlfleet-settings``: the crawl-relevant settings sections as one JSON line
(fetch, politeness, scope, dns, security; never store or fleet, which may hold credentials), every
value passed through ``pipeline.settings.security.redact`` as well, so a secret field added to one of
those sections later is masked rather than archived.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from importlib import metadata

from pipeline.settings import Settings
from pipeline.settings.security import redact_section

FORMAT = "WARC File Format 1.1"
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_SECTIONS = ("fetch", "politeness", "scope", "dns", "security")


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def software() -> str:
    libs = "; ".join(f"{d}/{version_of(d)}" for d in ("warcio", "aiohttp", "requests"))
    return f"crawlfleet/{version_of('crawlfleet')} ({libs})"


def operator_of(user_agent: str) -> str:
    """The contact in a user-agent's comment, e.g. "+https://example.org/bot; ops@example.org"."""
    comment = re.search(r"\(([^)]*)\)", user_agent)
    if not comment:
        return ""
    parts = [p.strip() for p in comment.group(1).split(";")]
    return "; ".join(p for p in parts if p.startswith("+") or "@" in p or "://" in p)


def crawl_info(settings: Settings, *, is_part_of: str = "crawlfleet", description: str = "") -> dict[str, str]:
    f, p = settings.fetch, settings.politeness
    crawl = {name: redact_section(name, dataclasses.asdict(getattr(settings, name))) for name in _SECTIONS}
    info = {
        "software": software(),
        "format": FORMAT,
        "conformsTo": CONFORMS_TO,
        "isPartOf": is_part_of,
        "hostname": socket.gethostname(),
        "operator": operator_of(f.user_agent) or "unknown",
        "http-header-user-agent": f.user_agent,
        "robots": "obey" if p.obey_robots else "ignore",
        "robots-agent": f.robots_agent,
        "crawlfleet-settings": json.dumps(crawl, sort_keys=True, separators=(",", ":")),
    }
    if description:
        info["description"] = description
    return info
