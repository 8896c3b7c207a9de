"""The living testbed (issue #23 point 7): change classes, clock, versions, validators, 304, truth. Pure."""

from __future__ import annotations

import collections
import json

import pytest

from pipeline.harness.testbed.accesslog import AccessLog
from pipeline.harness.testbed.cli import main as run_testbed_cli
from pipeline.harness.testbed.fastserver import FastHTTP
from pipeline.harness.testbed.liverender import LiveRenderer, honours_conditional, page_bytes
from pipeline.harness.testbed.livetruth import digest_at, edition_of, locate, page_version, versions_at
from pipeline.harness.testbed.living import (
    ADVERT,
    CLASSES,
    CONTENT_CLASSES,
    COSMETIC_CLASSES,
    DATED,
    FAST,
    FORCE,
    MEAN_S,
    STATIC,
    Living,
    page_class,
    state,
    tick_s,
)
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.render import Renderer
from pipeline.harness.testbed.validators import digest, etag, http_date, not_modified, parse_http_date

EPOCH = 1_800_000_000.0


def living_web(hosts: int = 12, pages: int = 30, *, seed: int = 0, rate: float = 1.0) -> Web:
    return Web(hosts, pages, seed=seed, port=8080, living=Living(EPOCH, rate))


def pages_of(web: Web, cls: str) -> list[tuple[int, int]]:
    return [(i, m) for i in range(web.hosts) for m in range(web.pages) if page_class(web.seed, i, m) == cls]


def test_classes_are_deterministic_and_near_their_shares() -> None:
    counts = collections.Counter(page_class(5, i, m) for i in range(100) for m in range(100))
    assert counts == collections.Counter(page_class(5, i, m) for i in range(100) for m in range(100))
    shares = {STATIC: 0.4, "hourly": 0.2, FAST: 0.2, DATED: 0.1, ADVERT: 0.1}
    for cls in CLASSES:
        assert abs(counts[cls] / 10_000 - shares[cls]) < 0.02, (cls, counts)
    assert counts != collections.Counter(page_class(6, i, m) for i in range(100) for m in range(100))


def test_clock_maps_wall_to_test_time_and_back() -> None:
    living = Living(EPOCH, 600.0)
    assert living.test_time(EPOCH) == 0.0
    assert living.test_time(EPOCH + 2.0) == 1200.0
    assert living.wall_time(living.test_time(EPOCH + 7.25)) == pytest.approx(EPOCH + 7.25)
    for rate in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            Living(EPOCH, rate)


@pytest.mark.parametrize("cls", [FAST, "hourly", DATED, ADVERT])
def test_changes_come_at_the_class_mean_rate(cls: str) -> None:
    web = living_web(40, 40)
    pages = pages_of(web, cls)[:20]
    horizon = MEAN_S[cls] * 400
    step = tick_s(cls)
    changes = 0
    for i, m in pages:
        prev = state(web.seed, i, m, 0.0)
        longest = 0
        for k in range(1, int(horizon / step) + 1):
            cur = state(web.seed, i, m, k * step)
            assert (cur.version, cur.cosmetic) >= (prev.version, prev.cosmetic)  # versions only grow
            if cur != prev:
                changes += 1
                longest = 0
            else:
                longest += 1
            assert longest < FORCE  # never unchanged for more than FORCE ticks
            prev = cur
    expected = 400 * len(pages)
    assert abs(changes / expected - 1) < 0.1, (changes, expected)


def test_content_classes_move_the_version_cosmetic_ones_only_the_bytes() -> None:
    web = living_web()
    for cls in CLASSES:
        i, m = pages_of(web, cls)[0]
        a, b = state(web.seed, i, m, 0.0), state(web.seed, i, m, MEAN_S[FAST] * 200)
        ba, bb = page_bytes(web, i, m, 0.0), page_bytes(web, i, m, MEAN_S[FAST] * 200)
        if cls == STATIC:
            assert a == b and ba == bb
            assert ba == Renderer(Web(web.hosts, web.pages, seed=web.seed)).reply(i, web.page_path(m)).body
        elif cls in CONTENT_CLASSES and cls == FAST:
            assert b.version > a.version and a.cosmetic == b.cosmetic == 0 and ba != bb
        elif cls in COSMETIC_CLASSES:
            assert a.version == b.version == 0 and b.cosmetic > a.cosmetic and ba != bb


def test_a_content_change_keeps_title_and_links() -> None:
    web = living_web()
    i, m = pages_of(web, FAST)[0]
    static = Renderer(Web(web.hosts, web.pages, seed=web.seed)).reply(i, web.page_path(m)).body.decode()
    changed = page_bytes(web, i, m, 1000.0).decode()
    title = static[static.index("<title>") : static.index("</title>")]
    assert title in changed
    for link in web.links(i, m):
        assert f'href="{link.href}"' in changed
    assert "Edition" in changed


def test_static_web_has_no_validators_no_sitemaps_and_ignores_conditionals() -> None:
    web = Web(12, 30, seed=0, port=8080)
    assert all(web.sitemap_urls(i) == [] and web.sitemap_only_paths(i) == [] for i in range(12))
    assert "Sitemap" not in (web.robots_txt(1) or "")
    http = FastHTTP(web, AccessLog(None))
    r = http.reply_for(b"site0.crawl.test", b"/p/1", "127.0.0.1", if_none_match="*")
    assert r.status == 200 and not r.headers


def test_live_replies_carry_validators_and_answer_304() -> None:
    web = living_web()
    live = LiveRenderer(web)
    i, m = next((i, m) for i, m in pages_of(web, FAST) if honours_conditional(i))
    path = web.page_path(m)
    wall = EPOCH + 10.0
    r = live.reply(i, path, wall)
    headers = dict(r.headers)
    assert r.status == 200 and headers["ETag"] == etag(r.body)
    modified = parse_http_date(headers["Last-Modified"])
    assert modified is not None and modified <= wall
    for inm in (headers["ETag"], f"W/{headers['ETag']}", f'"x", {headers["ETag"]}', "*"):
        nm = live.reply(i, path, wall, if_none_match=inm)
        assert nm.status == 304 and nm.body == b"" and dict(nm.headers)["ETag"] == headers["ETag"]
    assert live.reply(i, path, wall, if_none_match='"other"').status == 200
    # If-None-Match wins over If-Modified-Since
    assert live.reply(i, path, wall, if_none_match='"other"', if_modified_since=http_date(wall)).status == 200
    assert live.reply(i, path, wall, if_modified_since=headers["Last-Modified"]).status == 304
    assert live.reply(i, path, wall, if_modified_since=http_date(modified - 1)).status == 200
    assert live.reply(i, path, wall, if_modified_since="yesterday-ish").status == 200
    later = wall + MEAN_S[FAST] * 100
    assert live.reply(i, path, later, if_none_match=headers["ETag"]).status == 200  # it changed since


def test_hosts_that_ignore_conditionals_send_validators_and_200() -> None:
    web = living_web()
    live = LiveRenderer(web)
    i = 5
    assert not honours_conditional(i)
    r = live.reply(i, "/", EPOCH)
    tag = dict(r.headers)["ETag"]
    assert live.reply(i, "/", EPOCH, if_none_match=tag).status == 200


def test_other_pages_get_validators_and_statuses_stay() -> None:
    web = living_web()
    live = LiveRenderer(web)
    robots = live.reply(1, "/robots.txt", EPOCH)
    assert robots.status == 200 and "ETag" in dict(robots.headers)
    assert live.reply(1, "/robots.txt", EPOCH, if_none_match=dict(robots.headers)["ETag"]).status == 304
    assert live.reply(1, "/missing/0", EPOCH).status == 404
    assert live.reply(0, "/r/0", EPOCH).status == 301
    assert live.reply(0, "/only/1", EPOCH).status == 200
    assert live.reply(2, "/only/1", EPOCH).status == 404  # i % 3 == 2 has no sitemap


def test_validators() -> None:
    assert digest(b"abc").startswith("sha1:") and len(digest(b"abc")) == 37
    assert etag(b"abc") == '"' + digest(b"abc")[5:25] + '"'
    assert parse_http_date(http_date(EPOCH + 0.7)) == EPOCH
    for junk in ("", "not a date", "Mon, 99 Foo 2020 00:00:00 GMT", "\x00"):
        assert parse_http_date(junk) is None
    assert not not_modified(tag='"a"', modified_wall=EPOCH, if_none_match=None, if_modified_since=None)


def test_truth_digests_are_what_the_server_sends() -> None:
    web = living_web(6, 12)
    live = LiveRenderer(web)
    for t in (0.0, 37.5, 4000.0):
        truth = versions_at(web, t)
        assert len(truth) == 6 * 12
        for url, v in truth.items():
            where = locate(web, url)
            assert where is not None
            r = live.reply(where[0], web.page_path(where[1]), web.living.wall_time(t))  # type: ignore[union-attr]
            assert digest(r.body) == v.digest and dict(r.headers)["ETag"] == v.etag
            pv = page_version(web, url, t)
            assert pv is not None and (pv.version, pv.cosmetic, pv.cls) == (v.version, v.cosmetic, v.cls)


def test_locate_refuses_what_is_not_a_normal_page() -> None:
    web = living_web(3, 5)
    assert locate(web, "http://site1.crawl.test:8080/p/2") == (1, 3)
    for url in (
        "http://site1.crawl.test:8081/p/2",
        "https://site1.crawl.test:8080/p/2",
        "http://site9.crawl.test:8080/",
        "http://site1.crawl.test:8080/p/9",
        "http://site1.crawl.test:8080/p/1?x=1",
        "http://[::1:8080/",
        "junk",
    ):
        assert locate(web, url) is None and page_version(web, url, 0.0) is None


def test_truth_command_at_an_instant(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["truth", "--hosts", "4", "--pages", "6", "--seed", "3", "--at", "120"]
    assert run_testbed_cli([*args, "--mutate-epoch", str(EPOCH), "--mutate-rate", "10"]) == 0
    got = json.loads(capsys.readouterr().out)
    web = Web(4, 6, seed=3, port=8080, living=Living(EPOCH, 10.0))
    want = versions_at(web, 120.0)
    assert got["at"] == 120.0 and got["epoch"] == EPOCH and got["rate"] == 10.0
    assert {u: (p["version"], p["digest"]) for u, p in got["pages"].items()} == {
        u: (v.version, v.digest) for u, v in want.items()
    }
    assert got["sitemaps"]["sitemap_only"]


def test_digest_at_and_edition_of_judge_a_copy_from_its_bytes() -> None:
    web = living_web(6, 12)
    live = LiveRenderer(web)
    for t in (0.0, 99.0, 7200.0):
        wall = web.living.wall_time(t)  # type: ignore[union-attr]
        for url, v in versions_at(web, t, digests=False).items():
            i, m = locate(web, url)  # type: ignore[misc]
            body = live.reply(i, web.page_path(m), wall).body
            assert edition_of(body) == v.version
            assert digest_at(web, url, t) == digest(body)
    assert digest_at(web, "http://elsewhere/", 0.0) is None and edition_of(b"") == 0


def test_fast_server_reads_conditionals_and_takes_an_injected_clock() -> None:
    from pipeline.harness.testbed.fastserver import _head, _parse

    web = living_web()
    clock = [EPOCH]
    http = FastHTTP(web, AccessLog(None), now=lambda: clock[0])
    i, m = next((i, m) for i, m in pages_of(web, FAST) if honours_conditional(i))
    host, target = f"site{i}.crawl.test:8080".encode(), web.page_path(m).encode()
    first = http.reply_for(host, target, "127.0.0.1")
    tag = dict(first.headers)["ETag"]
    head = (
        b"GET / HTTP/1.1\r\nHost: x\r\nIf-None-Match: "
        + tag.encode()
        + b"\r\nIf-Modified-Since: Thu, 01 Jan 2026"
    )
    parsed = _parse(head)
    assert parsed is not None and parsed[6] == tag and parsed[7] == "Thu, 01 Jan 2026"
    not_mod = http.reply_for(host, target, "127.0.0.1", if_none_match=tag)
    assert not_mod.status == 304
    wire = _head(not_mod, close=False)
    assert wire.startswith(b"HTTP/1.1 304 Not Modified\r\n") and b"Content-Length" not in wire
    clock[0] = EPOCH + MEAN_S[FAST] * 100  # the server's clock moves: the page has changed
    assert http.reply_for(host, target, "127.0.0.1", if_none_match=tag).status == 200


def test_the_changing_robots_txt_and_the_throttling_host() -> None:
    from protego import Protego

    from pipeline.harness.testbed.model import (
        CHANGED_CRAWL_DELAY_S,
        CHANGED_DISALLOW,
        ROBOTS_CHANGE_SLOT,
        THROTTLE_RETRY_AFTER_S,
        THROTTLE_SLOT,
    )

    web = Web(12, 10, seed=0, port=8080, living=Living(EPOCH, 1.0, robots_change_s=30.0, throttle_every=3))
    clock = [EPOCH + 10.0]
    http = FastHTTP(web, AccessLog(None), now=lambda: clock[0])
    host = f"site{ROBOTS_CHANGE_SLOT}.crawl.test:8080".encode()
    before = http.reply_for(host, b"/robots.txt", "127.0.0.1")
    clock[0] = EPOCH + 30.0
    after = http.reply_for(host, b"/robots.txt", "127.0.0.1")
    assert before.body != after.body and after.status == 200
    rules = Protego.parse(after.body.decode())
    url = f"http://site{ROBOTS_CHANGE_SLOT}.crawl.test:8080{CHANGED_DISALLOW}"
    assert Protego.parse(before.body.decode() if before.status == 200 else "").can_fetch(url, "crawlfleet")
    assert not rules.can_fetch(url, "crawlfleet") and rules.crawl_delay("crawlfleet") == CHANGED_CRAWL_DELAY_S
    other = http.reply_for(b"site0.crawl.test:8080", b"/robots.txt", "127.0.0.1")
    assert b"Crawl-delay: 0.5" not in other.body  # only that host changes
    slow = f"site{THROTTLE_SLOT}.crawl.test:8080".encode()
    statuses = [http.reply_for(slow, b"/", "127.0.0.1").status for _ in range(9)]
    assert statuses == [200, 200, 429] * 3
    throttled = http.reply_for(slow, b"/", "127.0.0.1")
    assert throttled.status == 200
    assert [http.reply_for(b"site0.crawl.test:8080", b"/", "127.0.0.1").status for _ in range(6)] == [200] * 6
    assert ("Retry-After", str(THROTTLE_RETRY_AFTER_S)) in [
        h for _ in range(2) for h in http.reply_for(slow, b"/", "127.0.0.1").headers
    ]


def test_the_robots_change_request_changes_robots_txt_once() -> None:
    """A web started with no change time changes its robots.txt when asked (``ROBOTS_CHANGE_HOST``), once:
    a second request keeps the first change's time."""
    from pipeline.harness.testbed.living import ROBOTS_CHANGE_HOST
    from pipeline.harness.testbed.model import ROBOTS_CHANGE_SLOT

    web = Web(12, 10, seed=0, port=8080, living=Living(EPOCH, 1.0))
    clock = [EPOCH + 10.0]
    http = FastHTTP(web, AccessLog(None), now=lambda: clock[0])
    host = f"site{ROBOTS_CHANGE_SLOT}.crawl.test:8080".encode()
    before = http.reply_for(host, b"/robots.txt", "127.0.0.1")
    clock[0] = EPOCH + 500.0
    assert http.reply_for(host, b"/robots.txt", "127.0.0.1").body == before.body  # no change time: never
    first = http.reply_for(ROBOTS_CHANGE_HOST.encode(), b"/", "127.0.0.1")
    assert first.status == 200 and float(first.body.split()[1]) == EPOCH + 500.0
    clock[0] = EPOCH + 600.0
    again = http.reply_for(ROBOTS_CHANGE_HOST.encode(), b"/", "127.0.0.1")
    assert float(again.body.split()[1]) == EPOCH + 500.0
    assert http.reply_for(host, b"/robots.txt", "127.0.0.1").body != before.body
