"""Streaming readers for a crawl directory.

A crawl directory (written by the crawl engine) holds ``stats.jsonl`` (one ``CrawlStats.tick()``
row per line), ``segments/segment-*.jsonl`` (one ``FetchResult.to_json()`` per line), ``summary.json``
(``CrawlStats.summary()``) and ``crawl.db``. Everything here reads line by line, so a crawl of any
size is reported in constant memory; page bodies (``body_z``) are never decoded.

A crawl that died mid-write leaves a torn last line: readers skip lines that are not JSON objects and
count them in ``ReadErrors`` rather than failing the whole report.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATS_FILE = "stats.jsonl"
SUMMARY_FILE = "summary.json"
SEGMENTS_DIR = "segments"
SEGMENT_GLOB = "segment-*.jsonl"
DUPLICATES_FILE = (
    "duplicates.json"  # written by `crawlfleet duplicates CRAWL_DIR --write` (jobs/dupreport.py)
)
NODE_SEGMENTS_DIR = "node-segments"  # pipeline/transport/node/sink.py (the report must not import the fleet)


@dataclass(slots=True)
class ReadErrors:
    """Lines skipped while reading, by file name (torn writes, foreign junk)."""

    bad_lines: dict[str, int] = field(default_factory=dict)

    def add(self, name: str) -> None:
        self.bad_lines[name] = self.bad_lines.get(name, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.bad_lines.values())


@dataclass(slots=True)
class SegmentRecord:
    """The few fields of a stored FetchResult the report needs (no body)."""

    url: str
    status: int
    error_class: str
    wire_bytes: int
    body_bytes: int
    dns_s: float
    connect_s: float
    ttfb_s: float
    total_s: float
    depth: int
    fetcher_id: str
    serial: int
    fetched_at: float
    sent: list[Any] = field(default_factory=list)  # [[start, status], ...]: the requests the result made
    robots: list[Any] = field(default_factory=list)  # robots.txt notes (fetchers.robotsnote JSON)


def _iter_json_lines(path: Path, errors: ReadErrors) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                errors.add(path.name)
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                errors.add(path.name)


def iter_stats_rows(crawl_dir: Path, errors: ReadErrors) -> Iterator[dict[str, Any]]:
    """Rows of stats.jsonl in file order; nothing if the file is missing."""
    path = crawl_dir / STATS_FILE
    if path.is_file():
        yield from _iter_json_lines(path, errors)


def segment_paths(crawl_dir: Path) -> list[Path]:
    """The crawl's journal segments, then (a fleet crawl on the design card's loop) the closed segments
    its fetch nodes wrote, processed or not: those hold the results the journal does not."""
    seg = crawl_dir / SEGMENTS_DIR
    nodes = crawl_dir / NODE_SEGMENTS_DIR
    own = sorted(seg.glob(SEGMENT_GLOB)) if seg.is_dir() else []
    return own + (sorted(nodes.glob("**/*.jsonl")) if nodes.is_dir() else [])


def iter_segment_records(crawl_dir: Path, errors: ReadErrors) -> Iterator[SegmentRecord]:
    """Every stored fetch result, as a ``SegmentRecord``; malformed records are counted and skipped."""
    for path in segment_paths(crawl_dir):
        for obj in _iter_json_lines(path, errors):
            rec = _to_record(obj)
            if rec is None:
                errors.add(path.name)
            else:
                yield rec


def _to_record(obj: dict[str, Any]) -> SegmentRecord | None:
    try:
        timings = obj.get("timings") or [0.0, 0.0, 0.0, 0.0]
        dns_s, connect_s, ttfb_s, total_s = (float(x) for x in timings)
        return SegmentRecord(
            url=str(obj["url"]),
            status=int(obj.get("status", 0)),
            error_class=str(obj.get("error_class", "")),
            wire_bytes=int(obj.get("wire_bytes", 0)),
            body_bytes=int(obj.get("body_bytes", 0)),
            dns_s=dns_s,
            connect_s=connect_s,
            ttfb_s=ttfb_s,
            total_s=total_s,
            depth=int(obj.get("depth", 0)),
            fetcher_id=str(obj.get("fetcher_id", "")),
            serial=int(obj.get("serial", 0)),
            fetched_at=float(obj.get("fetched_at", 0.0)),
            sent=obj["sent"] if isinstance(obj.get("sent"), list) else [],
            robots=obj["robots"] if isinstance(obj.get("robots"), list) else [],
        )
    except (KeyError, TypeError, ValueError):
        return None


def read_summary(crawl_dir: Path) -> dict[str, Any]:
    """summary.json as a dict; {} when missing or unreadable (the report then derives what it can)."""
    path = crawl_dir / SUMMARY_FILE
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_duplicates(crawl_dir: Path) -> dict[str, Any] | None:
    """duplicates.json (which stored URLs share content, #23) as a dict; None when missing or unreadable."""
    try:
        obj = json.loads((crawl_dir / DUPLICATES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("exact"), list) else None


# pipeline/transport/links/quarantine.py's META_PREFIX and HOST_KEY (the report must not import the fleet)
PARSE_FAILED_META, PARSE_FAILED_HOST = "parse_failed:", "host:"
MAX_PARSE_FAILED = 1000


def read_parse_failed(crawl_dir: Path) -> list[dict[str, str]]:
    """Pages kept without their links because parsing them killed parser processes (``parse_failed``):
    the rows of the crawl's SQLite db that say so (embedded crawls), and the records the fleet's link
    services keep in its meta table (pages, and hosts whose pages are no longer parsed). At most
    ``MAX_PARSE_FAILED``; [] when there are none or nothing to read."""
    out: list[dict[str, str]] = []
    db = crawl_dir / "crawl.db"
    if not db.exists():
        return out
    with contextlib.suppress(sqlite3.Error):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            rows = conn.execute("SELECT url, error FROM urls WHERE error LIKE 'parse_failed:%' LIMIT ?",
                                (MAX_PARSE_FAILED,)).fetchall()  # fmt: skip
            out += [{"url": str(url), "error": str(error)} for url, error in rows]
            rows = conn.execute("SELECT key, value FROM meta WHERE key >= ? AND key < ? LIMIT ?",
                                (PARSE_FAILED_META, PARSE_FAILED_META[:-1] + ";", MAX_PARSE_FAILED)).fetchall()  # fmt: skip
        finally:
            conn.close()
        for key, value in rows:
            what = str(key).removeprefix(PARSE_FAILED_META)
            host = what.removeprefix(PARSE_FAILED_HOST)
            out.append({"url": f"every page of {host}" if host != what else what, "error": str(value)})
    return out[:MAX_PARSE_FAILED]



SETTINGS_FILE = "crawl-settings.json"  # pipeline/crawl/remember.py (the report must not import the crawl)


def read_settings_section(crawl_dir: Path, section: str) -> dict[str, Any]:
    """One section of the crawl's remembered settings; {} when missing or unreadable."""
    try:
        obj = json.loads((crawl_dir / SETTINGS_FILE).read_text(encoding="utf-8"))
        got = obj["settings"][section]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return got if isinstance(got, dict) else {}
