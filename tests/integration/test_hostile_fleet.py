"""The fleet (real dispatcher, two Celery workers, ``crawlfleet links`` on the real link jobs, RabbitMQ, SQLite)
against hostile.crawl.test: every misbehaving path ends as a clean outcome in the store, the crawl finishes,
the normal web on the same testbed is crawled in full and stored once, and the page that kills parsers
(/nested: about 8 s of lexbor CPU, past this test's 1.5 s limit) costs its own links only: the link service
sets it aside after two dead extract tasks, records why in the store, and the link path goes on.

Fleet nodes stop at redirects (a target is a link), as the embedded crawl's fetch processes do, so the
redirect paths end as 3xx pages; the SSRF target is refused when its link is fetched.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.harness.faults import results
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.hostile import PATHS
from pipeline.report.build import build_report
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.quarantine import META_PREFIX, QUARANTINE_FILE
from tests.fixtures.rabbitmq import stored_pages
from tests.integration.test_hostile_crawl import EXPECTED as EMBEDDED_EXPECTED

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MAX_DEPTH = 6
PARSE_CPU_S = 1.5  # /nested needs about 8 s of CPU; every other page well under 0.5 s
ENV = {
    "CRAWLFLEET_SECURITY_ALLOW_NETWORKS": "127.0.10.0/24",  # the testbed's sites, not private.crawl.test
    "CRAWLFLEET_FETCH_TOTAL_TIMEOUT_S": "5.0", "CRAWLFLEET_FETCH_READ_TIMEOUT_S": "3.0",
    "CRAWLFLEET_FETCH_RETRIES": "1", "CRAWLFLEET_FETCH_RETRY_BACKOFF_S": "0.1",
    "CRAWLFLEET_FETCH_MAX_BODY_BYTES": str(2 * 1024 * 1024), "CRAWLFLEET_FETCH_PARSE_CPU_LIMIT_S": str(PARSE_CPU_S),
    # As the embedded crawl's config: the 1M-link page's targets are extracted (capped), not worth 10k
    # fetches, and the cap is only a backstop, so the hostile host's pages (the redirect chain's too) all
    # fit under it: whether a page is fetched never depends on the order the host's URLs were leased in.
    "CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST": "60", "CRAWLFLEET_SCOPE_DENY_REGEX": "/m/[0-9]+$",
}  # fmt: skip
# As the embedded crawl (its table), except: redirects are pages whose targets are links (see above), and
# /nested is fetched and stored by a node; what its parse costs is the link service's (a test below).
EXPECTED = {**EMBEDDED_EXPECTED, "/deep-redirect/0": ("DONE", ""), "/ssrf-redirect": ("DONE", ""), "/nested": ("DONE", "")}


@pytest.fixture(scope="module")
def crawl(rabbitmq: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.fixtures.rabbitmq import Fleet

    work = tmp_path_factory.mktemp("hostile-fleet")
    with TestbedProcess(3, 10, seed=2, hostile=True, workdir=work / "tb") as tb:
        f = Fleet(rabbitmq, tb, work, max_depth=MAX_DEPTH, host_delay=0.0, extra_env=ENV)
        try:
            f.start_worker(1)
            f.start_worker(2)
            f.start_dispatcher(*tb.seeds, tb.hostile_seed, seeds=False)
            summary = f.wait_dispatcher(timeout_s=300)
        finally:
            links_summary: dict[str, Any] = {}
            if f.links is not None:
                if f.links.poll() is None:
                    os.kill(f.links.pid, signal.SIGTERM)
                f.links.wait(60)
                for line in reversed((work / "links.log").read_text(errors="replace").splitlines()):
                    if line.startswith("{"):
                        links_summary = json.loads(line)
                        break
            f.stop()
        yield {"tb": tb, "out": f.out, "work": work, "summary": summary, "links": links_summary,
               "truth": tb.truth(max_depth=MAX_DEPTH), "log": f.log_tail("links.log")}  # fmt: skip


def outcome(store: SqliteStore, url: str) -> tuple[str, str, int]:
    rec = store.get_url(url)
    if rec is None:
        return "UNKNOWN", "", 0
    return rec.state.name, rec.error.partition(":")[0], rec.status


def test_fleet_records_each_hostile_path_and_finishes(crawl: dict[str, Any]) -> None:
    tb = crawl["tb"]
    with SqliteStore(crawl["out"] / "crawl.db") as store:
        got = {path: outcome(store, tb.hostile_url(path)) for path in PATHS}
    for path, (state, error, status) in got.items():
        results.append({"type": "hostile", "mode": "fleet", "input": path, "outcome": f"{state} {status}",
                        "error_class": error, "crawl_ok": True, "peak_rss_mb": None, "note": ""})  # fmt: skip
    assert {p: got[p][:2] for p in EXPECTED} == EXPECTED
    assert all(error != "internal_error" for _, error, _ in got.values())


def test_fleet_crawls_the_rest_of_the_web_once(crawl: dict[str, Any]) -> None:
    counted, reached = stored_pages(crawl["out"])
    assert [u for u, n in counted.items() if n > 1] == []
    missing = [u for u in crawl["truth"]["pages"] if u not in reached]
    assert not missing, missing[:10]


def test_the_page_that_kills_extract_tasks_is_set_aside(crawl: dict[str, Any]) -> None:
    """/nested ended two extract tasks (SIGPROF at the CPU limit): the link service listed it, recorded
    why in the store, and went on (every other page's links arrived: the test above)."""
    url = crawl["tb"].hostile_url("/nested")
    assert crawl["links"].get("quarantined") == 1, (crawl["links"], crawl["log"])
    listed = [json.loads(line)["url"] for line in (crawl["work"] / "jobs-work" / "guard" / QUARANTINE_FILE).open()]
    assert listed == [url]
    with SqliteStore(crawl["out"] / "crawl.db") as store:
        why = store.get_meta(META_PREFIX + url)
        page = store.get_page(url)
    assert why is not None and why.startswith("parse_failed: an extract task died parsing it")
    assert page is not None and page.body.count(b"<div>") == 100_000  # the page itself is kept
    build_report(crawl["out"], crawl["out"] / "report")  # the user's view lists it, with why
    listed = json.loads((crawl["out"] / "report" / "report.json").read_text())["parse_failed"]
    assert listed == [{"url": url, "error": why}]


def test_the_ssrf_target_is_never_fetched(crawl: dict[str, Any]) -> None:
    with SqliteStore(crawl["out"] / "crawl.db") as store:
        pages = list(store.iter_pages())
        targets = {p.final_url for p in pages if p.url.endswith("/ssrf-redirect")}
        rows = [store.get_url(u) for u in targets]
    assert len(targets) == 1 and "private.crawl.test" in next(iter(targets))
    assert [p.final_url for p in pages if "private.crawl.test" in p.final_url and p.status < 300] == []
    assert all(r is None or r.state is not UrlState.DONE for r in rows), rows


def test_a_redirect_chain_ends_after_max_redirects(crawl: dict[str, Any]) -> None:
    """/deep-redirect/0 redirects 10,000 times, each time to a new URL. A node stops at each redirect, the
    link jobs make its target a link one hop deeper (``redirect_hops``), and the node holding the sixth
    hop fails it as ``too_many_redirects`` (fetch.max_redirects = 5), as the crawl's own fetcher would:
    /0../5 are requested once each, /6 never. Before redirect_hops the chain ran on to the host's cap."""
    tb = crawl["tb"]
    tb.wait_log_flush()
    requested = Counter(e["path"] for e in tb.read_access_log() if e["path"].startswith("/deep-redirect/"))
    with SqliteStore(crawl["out"] / "crawl.db") as store:
        got = {k: outcome(store, tb.hostile_url(f"/deep-redirect/{k}"))[:2] for k in range(7)}
    results.append({"type": "hostile", "mode": "fleet", "input": "/deep-redirect/5 (the chain's 6th URL)",
                    "outcome": got[5][0], "error_class": got[5][1], "crawl_ok": True, "peak_rss_mb": None,
                    "note": f"{len(requested)} URLs of the chain requested"})  # fmt: skip
    assert requested == {f"/deep-redirect/{k}": 1 for k in range(6)}, requested
    want = {k: ("DONE", "") for k in range(5)} | {5: ("FAILED", "too_many_redirects"), 6: ("UNKNOWN", "")}
    assert got == want
