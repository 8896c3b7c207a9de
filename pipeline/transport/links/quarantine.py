"""Pages that kill the fleet's extract job: found, counted and set aside, so the link path goes on.

A hostile page in a segment (a parser crash, or a parse past ``fetch.parse_cpu_limit_s`` of CPU:
``pipeline.links.guard``) ends the extract task that parses it. Without this the round fails, is run
again on the same segments, fails again, and no link of the crawl reaches the store any more.

The extract job's tasks write markers under ``WORK/guard/.guard/`` (the service's ``--work-dir``) (``jobs.mr_extract_links``); a task
that finishes removes its own. After a failed round the service calls ``LinkQuarantine.blame``: each
marker left names the page its task died on, and gives that page a strike. A page with ``STRIKES``
strikes goes into ``WORK/guard/.quarantine.jsonl``, which every later extract job reads and does not parse
(its body stays stored; only its links are lost). The crawl's store records it too, as meta
``parse_failed:URL``. A host with ``fetch.parse_failed_per_host`` such pages is listed too: the jobs do
not parse its pages any more (each hostile page costs the link path two failed rounds). Strikes are
kept in ``WORK/guard/.strikes.jsonl`` (one line per death, written after the marker is gone: a kill in
between loses a strike, never counts one twice), so a restarted service goes on counting.
Markers are files where a task ran, so this works on the runners whose tasks run beside the service
(inline, local, and Spark or Hadoop on the service's own machine), not on a cluster's other nodes, where a
failed round is only retried. Each service keeps its own list; the store's ``parse_failed:`` records are
the crawl's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from jobs.logic import open_store, read_quarantine
from jobs.runner import JobArgs
from pipeline.links.guard import STRIKES, culprit, host_error
from pipeline.urls import host_of

log = logging.getLogger(__name__)

GUARD_DIR = ".guard"
QUARANTINE_FILE = ".quarantine.jsonl"
STRIKES_FILE = ".strikes.jsonl"
META_PREFIX = "parse_failed:"
HOST_KEY = "host:"  # META_PREFIX + HOST_KEY + host: a host whose pages are no longer parsed


class LinkQuarantine:
    """The link service's side of the extract job's parse guard, for one segments directory."""

    def __init__(self, directory: Path, *, store: str, cpu_limit_s: float, host_limit: int = 3) -> None:
        """``directory``: this service's own (local) state: the markers its tasks leave, strikes and the list."""
        directory.mkdir(parents=True, exist_ok=True)
        self.guard_dir = directory / GUARD_DIR
        self.file = directory / QUARANTINE_FILE
        self.store = store
        self.cpu_limit_s = cpu_limit_s
        self.host_limit = host_limit  # fetch.parse_failed_per_host
        self.strikes_file = directory / STRIKES_FILE
        self.strikes: Counter[str] = _read_strikes(self.strikes_file)  # from earlier runs of the service
        self.quarantined = 0  # pages this process set aside

    def job_args(self, args: JobArgs) -> JobArgs:
        """``args`` with the guard on: the extract job's tasks mark their pages and skip the quarantined."""
        return replace(args, guard_dir=str(self.guard_dir), quarantine=str(self.file),
                       parse_cpu_limit_s=self.cpu_limit_s)  # fmt: skip

    def blame(self) -> list[str]:
        """After a failed round: a strike for each page a dead task had in hand; returns the pages that
        reached ``STRIKES`` now (written to the quarantine file and the store). Markers are removed."""
        if not self.guard_dir.is_dir():
            return []
        named: list[str] = []
        for marker in sorted(self.guard_dir.glob("*.marker")):
            hand = culprit(marker)
            with contextlib.suppress(OSError):
                marker.unlink()
            if hand is not None:
                named.append(hand.url)
        if named:
            _append(self.strikes_file, [{"url": url, "t": time.time()} for url in named])
        already = read_quarantine(str(self.file)).urls
        out: list[str] = []
        for url in named:
            self.strikes[url] += 1
            log.error("links: an extract task died parsing %s (strike %d)", url, self.strikes[url])
            if self.strikes[url] >= STRIKES and url not in already and url not in out:
                out.append(url)
        if out:
            self._set_aside(out)
        return out

    def _set_aside(self, urls: list[str]) -> None:
        error = (f"parse_failed: an extract task died parsing it (a parser crash, or more than "
                 f"{self.cpu_limit_s:g} s of CPU), {STRIKES} times; its links were not extracted")  # fmt: skip
        listed = read_quarantine(str(self.file))
        by_host = Counter(host_of(u) for u in [*listed.urls, *urls])
        hosts = [h for h, n in by_host.items() if self.host_limit and n >= self.host_limit and h not in listed.hosts]
        # before the store: the jobs read this file; a host's later pages are not parsed at all
        _append(self.file, [{"url": url, "error": error, "t": time.time()} for url in urls]
                + [{"host": h, "error": host_error(by_host[h]), "t": time.time()} for h in hosts])  # fmt: skip
        for host in hosts:
            log.error("links: %s: %d pages killed extract tasks; its pages are no longer parsed", host, by_host[host])
        self.quarantined += len(urls)
        for url in urls:
            log.error("links: quarantined %s: %s", url, error)
        try:
            store = open_store(self.store)
            try:
                for url in urls:
                    store.put_meta(META_PREFIX + url, error)
                for host in hosts:  # the crawl report lists both (pipeline/report/data.py)
                    store.put_meta(f"{META_PREFIX}{HOST_KEY}{host}", host_error(by_host[host]))
            finally:
                store.close()
        except Exception:  # the file holds it; the store's copy is for the crawl's record only
            log.exception("links: could not record the quarantined pages in the store")


def _read_strikes(path: Path) -> Counter[str]:
    """Deaths per page from a strikes file; unreadable lines (a torn last write) and a missing file count nothing."""
    strikes: Counter[str] = Counter()
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    strikes[str(json.loads(line)["url"])] += 1
    except OSError:
        pass
    return strikes


def _append(path: Path, items: list[dict[str, object]]) -> None:
    """Append JSON lines, on a line of their own even after a torn last line (a write a kill cut short),
    which readers skip: the new lines must not be glued to it."""
    with open(path, "a+b") as fh:  # appends go to the end whatever was read
        torn = False
        if fh.seek(0, os.SEEK_END):
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
        fh.write((b"\n" if torn else b"") + b"".join(json.dumps(x).encode() + b"\n" for x in items))
