"""The embedded crawler against hostile.crawl.test: every misbehaving path ends as a clean outcome in
the store (an error class, or a page capped at max_body_bytes), the crawl finishes, the normal web on
the same testbed is still crawled in full, and the crawler's peak RSS stays bounded (1 GiB bombs).
/nested (100,000 nested <div>, about 8 s of lexbor CPU, quadratic in depth) runs past this test's
parse CPU limit: the page is kept, without its links, and its row says parse_failed.

Each input's outcome is recorded (pipeline.harness.faults.results) for RELIABILITY.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.faults import results
from pipeline.harness.faults.procs import Managed, peak_rss_mb
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.hostile import PATHS
from pipeline.links import extract
from pipeline.report.build import build_report
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.integration

MAX_DEPTH = 6
MAX_BODY = 2 * 1024 * 1024
PARSE_CPU_S = 1.5  # /nested needs about 8 s of CPU; every other page well under 0.5 s
RSS_LIMIT_MB = 512  # the bombs inflate to 1 GiB each; capped decoding must keep far below that
CONFIG = f"""
[fetch]
total_timeout_s = 5.0
read_timeout_s = 3.0
retries = 1
retry_backoff_s = 0.1
max_body_bytes = {MAX_BODY}
parse_cpu_limit_s = {PARSE_CPU_S}
[scope]
max_pages_per_host = 60
deny_regex = ["/m/[0-9]+$"]  # the 1M-link page's targets: extracted (capped), not worth 10k fetches
"""
# What each path must end as: (state, error class or "" for a page).
EXPECTED = {
    "/bomb": ("DONE", ""), "/brbomb": ("DONE", ""), "/zstdbomb": ("DONE", ""), "/endless": ("DONE", ""), "/manylinks": ("DONE", ""),
    "/nested": ("DONE", "parse_failed"), "/badutf8": ("DONE", ""), "/trickle": ("FAILED", "timeout"),
    "/deep-redirect/0": ("FAILED", "too_many_redirects"), "/badlen": ("FAILED", "incomplete_body"),
    "/hugeheaders": ("FAILED", "headers_too_large"), "/ssrf-redirect": ("FAILED", "ssrf_blocked"),
    "/ip-redirect": ("FAILED", "out_of_scope"), "/rawbad/status": ("FAILED", "bad_status_line"),
    "/rawbad/garbage": ("FAILED", "bad_status_line"), "/rawbad/chunked": ("FAILED", "bad_response"),
    "/rawbad/latechunk": ("FAILED", "bad_response"),
    "/rawbad/header": ("FAILED", "bad_response"), "/rawbad/close": ("FAILED", "server_disconnected"),
}  # fmt: skip


# The default (pages parsed in a parse process), two fetch processes that parse their own pages, and the
# default on a machine with one core (the crawl pinned to CPU 0: it still gets one parse process).
MODES = {"embedded": {}, "embedded-fetchproc": {"CRAWLFLEET_FETCH_PROCESSES": "2"}, "embedded-1core": {}}
PREFIX = {"embedded-1core": ["taskset", "-c", "0"]}


# Fetch processes stop at redirects (as fleet nodes do): the 3xx is the URL's page and its target a link,
# refused when that link is fetched (test_fetch_processes_refuse_the_redirect_targets).
MODE_EXPECTED = {"embedded-fetchproc": {"/deep-redirect/0": ("DONE", ""), "/ssrf-redirect": ("DONE", "")}}


@pytest.fixture(scope="module", params=sorted(MODES))
def crawl(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    mode = request.param
    work = tmp_path_factory.mktemp("hostile-crawl")
    (work / "hostile.toml").write_text(CONFIG)
    with TestbedProcess(3, 10, seed=2, hostile=True, workdir=work / "tb") as tb:
        out = work / "out"
        cmd = [
            *PREFIX.get(mode, []), sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, tb.hostile_seed, "--out", str(out),
            "--dns-server", tb.dns_server, "--allow-network", "127.0.10.0/24", "--max-depth", str(MAX_DEPTH),
            "--host-delay", "0", "--json", "--no-progress", "--config", str(work / "hostile.toml"),
        ]  # fmt: skip
        env = {**os.environ, **MODES[mode]}
        proc = Managed("crawler", cmd, env, work / "crawl.log", stdout_path=work / "crawl.out").start()
        peak = 0.0
        while proc.running:
            peak = max(peak, peak_rss_mb(proc.pid) or 0.0)
            time.sleep(0.05)
        code = proc.wait(300)
        text = (work / "crawl.out").read_text()
        summary = json.loads(text.strip().splitlines()[-1]) if code == 0 and text.strip() else {}
        yield {"mode": mode, "tb": tb, "out": out, "code": code, "summary": summary, "peak": peak, "log": proc.log_tail(),
               "truth": tb.truth(max_depth=MAX_DEPTH)}  # fmt: skip


def outcome(store: SqliteStore, url: str) -> tuple[str, str, int, bool]:
    rec = store.get_url(url)
    if rec is None:
        return "UNKNOWN", "", 0, False
    page = store.get_page(url) if rec.state is UrlState.DONE else None
    return rec.state.name, rec.error.partition(":")[0], rec.status, bool(page and page.truncated)


def test_crawl_survives_and_records_each_hostile_path(crawl: dict[str, Any]) -> None:
    assert crawl["code"] == 0, crawl["log"]
    tb = crawl["tb"]
    store = SqliteStore(crawl["out"] / "crawl.db")
    got = {}
    try:
        for path in PATHS:
            state, error, status, truncated = got[path] = outcome(store, tb.hostile_url(path))
            note = "truncated at max_body_bytes" if truncated else ""
            results.append({"type": "hostile", "mode": crawl["mode"], "input": path, "outcome": f"{state} {status}",
                            "error_class": error, "crawl_ok": crawl["code"] == 0, "peak_rss_mb": crawl["peak"],
                            "note": note})  # fmt: skip
    finally:
        store.close()
    for path, (state, error, _status, _trunc) in got.items():
        assert error != "internal_error" and state not in ("PENDING", "UNKNOWN"), (path, state, error)
    assert {p: got[p][:2] for p in EXPECTED} == {**EXPECTED, **MODE_EXPECTED.get(crawl["mode"], {})}
    for path in ("/bomb", "/brbomb", "/zstdbomb", "/endless", "/manylinks"):
        assert got[path][3], f"{path} must be kept truncated at max_body_bytes"
    assert crawl["summary"]["parse_failed"] == 1, crawl["summary"]
    if crawl["mode"] == "embedded-1core":  # the parse process that took /nested's deaths
        assert crawl["summary"]["parse_processes"]["processes"] == 1, crawl["summary"]


def test_a_page_that_kills_parsers_is_kept_with_why(crawl: dict[str, Any]) -> None:
    """/nested ended two parse processes (SIGPROF at the CPU limit); its body is stored whole."""
    store = SqliteStore(crawl["out"] / "crawl.db")
    try:
        rec = store.get_url(crawl["tb"].hostile_url("/nested"))
        page = store.get_page(crawl["tb"].hostile_url("/nested"))
    finally:
        store.close()
    assert rec is not None and page is not None
    assert rec.error == (f"parse_failed: the parse used more than {PARSE_CPU_S:g} s of CPU, 2 times; "
                         "its links were not extracted")  # fmt: skip
    assert page.body.count(b"<div>") == 100_000 and not page.truncated
    report = build_report(crawl["out"], crawl["out"] / "report")  # the user's view lists it, with why
    listed = json.loads((crawl["out"] / "report" / "report.json").read_text())["parse_failed"]
    assert listed == [{"url": crawl["tb"].hostile_url("/nested"), "error": rec.error}]
    assert "Pages kept without links" in report.html.read_text()


def test_rest_of_the_web_is_crawled(crawl: dict[str, Any]) -> None:
    store = SqliteStore(crawl["out"] / "crawl.db")
    try:
        stored = {p.url for p in store.iter_pages()} | {p.final_url for p in store.iter_pages()}
    finally:
        store.close()
    missing = [u for u in crawl["truth"]["pages"] if u not in stored]
    assert not missing, missing[:10]


def test_peak_rss_bounded(crawl: dict[str, Any]) -> None:
    assert 0 < crawl["peak"] < RSS_LIMIT_MB, crawl["peak"]


def test_odd_links_of_badutf8_end_cleanly(crawl: dict[str, Any]) -> None:
    """NUL bytes, raw bytes, bad punycode, an IDN and a 70-char label, as links of /badutf8."""
    tb = crawl["tb"]
    store = SqliteStore(crawl["out"] / "crawl.db")
    try:
        page = store.get_page(tb.hostile_url("/badutf8"))
        assert page is not None
        found = extract.extract(page.body, base_url=page.final_url, content_type=page.content_type).links
        seen = []
        for link in found:
            state, error, status, _ = outcome(store, link.url)
            seen.append((link.url, state, error))
            parts = urlsplit(link.url)  # the port changes from run to run; the report keys on the rest
            results.append({"type": "hostile", "mode": crawl["mode"], "input": f"link {parts.hostname}{parts.path}",
                            "outcome": f"{state} {status}", "error_class": error, "crawl_ok": True,
                            "note": "discovered on /badutf8"})  # fmt: skip
    finally:
        store.close()
    assert all(ch not in url for url, _, _ in seen for ch in ("\x00", " ", "\xff")), seen  # normalized
    assert all(state in ("DONE", "FAILED") for _, state, _ in seen), seen
    assert all(err != "internal_error" for _, _, err in seen), seen


def test_fetch_processes_refuse_the_redirect_targets(crawl: dict[str, Any]) -> None:
    """Where redirects are links (fetch processes), the private target is never fetched."""
    if crawl["mode"] != "embedded-fetchproc":
        pytest.skip("the crawl's own fetcher follows redirects: covered by the table above")
    store = SqliteStore(crawl["out"] / "crawl.db")
    try:
        pages = list(store.iter_pages())
        # a 3xx page names its target as final_url (the redirect was not followed): only 2xx are fetches
        private = [r.final_url for r in pages if "private.crawl.test" in r.final_url and r.status < 300]
        targets = {r.final_url for r in pages if r.url.endswith("/ssrf-redirect")}
        target_rows = [store.get_url(u) for u in targets]
    finally:
        store.close()
    assert private == [] and len(targets) == 1
    assert all(row is None or row.state is not UrlState.DONE for row in target_rows), target_rows


def test_a_redirect_chain_ends_after_max_redirects_in_both_modes(crawl: dict[str, Any]) -> None:
    """/deep-redirect/0 redirects 10,000 times, each time to a new URL. The crawl's own fetcher follows
    fetch.max_redirects (5) hops and fails the first URL; where redirects are links (fetch processes, as
    fleet nodes) each hop is a task one hop deeper than the last (``redirect_hops``), and the sixth URL
    fails the same way. Either way /0../5 are requested and /6 never (the access log). Before
    redirect_hops the fetch processes' chain went on to the host's page cap (39 hops under a cap of 60)."""
    tb = crawl["tb"]
    tb.wait_log_flush()
    requested = Counter(e["path"] for e in tb.read_access_log() if e["path"].startswith("/deep-redirect/"))
    store = SqliteStore(crawl["out"] / "crawl.db")
    try:
        got = {k: outcome(store, tb.hostile_url(f"/deep-redirect/{k}"))[:2] for k in range(7)}
    finally:
        store.close()
    results.append({"type": "hostile", "mode": crawl["mode"], "input": "/deep-redirect/5 (the chain's 6th URL)",
                    "outcome": got[5][0], "error_class": got[5][1], "crawl_ok": crawl["code"] == 0,
                    "peak_rss_mb": crawl["peak"], "note": f"{len(requested)} URLs of the chain requested"})  # fmt: skip
    if crawl["mode"] == "embedded-fetchproc":
        # /nested kills two fetch processes, and a batch of a dead one is fetched again: a hop in it twice
        assert set(requested) == {f"/deep-redirect/{k}" for k in range(6)}, requested
    else:
        assert requested == {f"/deep-redirect/{k}": 1 for k in range(6)}, requested
    if crawl["mode"] == "embedded-fetchproc":  # each hop a page of its own: the 302, its target a link
        want = {k: ("DONE", "") for k in range(5)} | {5: ("FAILED", "too_many_redirects")}
    else:  # one task's chain: the hops are settled under it
        want = {0: ("FAILED", "too_many_redirects")} | {k: ("SKIPPED", "redirect") for k in range(1, 6)}
    assert got == {**want, 6: ("UNKNOWN", "")}
