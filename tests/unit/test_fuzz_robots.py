"""Fuzzing robots.txt handling (fetchers/robots.py) with a robots grammar and with raw bytes.

Contracts: ``RobotsCache.from_response`` maps any (status, body) to rules without raising; the rules
answer ``allows`` for any normalized URL of the origin; the crawl delay is a finite number in
[0, max_crawl_delay_s]; 2xx parses, 3xx/4xx (not 429) allow all, anything else is unreachable;
``x_robots_tag`` never raises.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fetchers.robots import MAX_ROBOTS_BYTES, RobotsCache, x_robots_tag
from pipeline.settings import PolitenessSettings

POL = PolitenessSettings(max_crawl_delay_s=30.0)
AGENT = "crawlfleet"
paths = st.lists(st.sampled_from(["a", "b", "*", "$", "%2F", "%", "\u00e9", "?q=1", "..", ""]), max_size=5).map(
    lambda s: "/" + "/".join(s)
)
numbers = st.sampled_from(["1", "0", "-5", "2.5", "nan", "inf", "-inf", "1e309", "abc", "", "0x10", "1/0", "0/5",
                           "3/60", "1/2m", "10/0s", " 7 "])  # fmt: skip
agents = st.sampled_from(["*", "crawlfleet", "CrawlFleet", "crawlfleet/0.1", "other", "", "craw*", "\u00e9bot"])
directive = st.one_of(
    st.tuples(st.sampled_from(["User-agent", "user-AGENT", "useragent", "User-agent "]), agents),
    st.tuples(st.sampled_from(["Disallow", "Allow", "disallow", "ALLOW"]), paths),
    st.tuples(st.sampled_from(["Crawl-delay", "crawl-delay", "Request-rate"]), numbers),
    st.tuples(st.sampled_from(["Sitemap", "Host", "Noindex", "#", "junk", ""]), st.text(max_size=20)),
)
robots_text = st.lists(
    st.tuples(directive, st.sampled_from([":", ": ", " : ", "", "::"]), st.sampled_from(["\n", "\r\n", "\r", "  # c\n"])),
    max_size=25,
).map(lambda lines: "".join(f"{k}{sep}{v}{end}" for (k, v), sep, end in lines))


def check_rules(status: int, body: bytes) -> None:
    cache = RobotsCache(POL, agent=AGENT, clock=lambda: 100.0)
    rules = cache.from_response(status, body)
    assert math.isfinite(rules.crawl_delay) and 0.0 <= rules.crawl_delay <= POL.max_crawl_delay_s
    for path in ("/", "/a", "/a/b?q=1", "/%C3%A9", "/robots.txt"):
        assert isinstance(rules.allows(f"http://h.test{path}"), bool)
    if 200 <= status < 300:
        assert rules.state == "parsed"
    elif 300 <= status < 500 and status != 429:
        assert rules.state == "allow_all" and rules.allows("http://h.test/x")
    else:
        assert rules.unreachable and not rules.allows("http://h.test/x")


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(robots_text)
@example("User-agent: crawlfleet\nCrawl-delay: nan\n")
@example("User-agent: *\nRequest-rate: 1/0\nCrawl-delay: 1e309\n")
def test_grammar(text: str) -> None:
    check_rules(200, text.encode())


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 999), st.binary(max_size=2000))
def test_any_status_any_bytes(status: int, body: bytes) -> None:
    check_rules(status, body)


def test_huge_robots_is_capped() -> None:
    body = b"User-agent: *\nDisallow: /private\n" + b"# filler\n" * (MAX_ROBOTS_BYTES // 9 + 10) + b"Disallow: /\n"
    rules = RobotsCache(POL, agent=AGENT).from_response(200, body)
    assert not rules.allows("http://h.test/private") and rules.allows("http://h.test/public")


@settings(max_examples=1500)
@given(st.lists(st.sampled_from(["noindex", "nofollow", "none", "all", "googlebot:", "crawlfleet:", "unavailable_after:",
                                 " 25 Jun 2010", ",", "\n", ":", "max-snippet:", "-1", "NOINDEX", ""]), max_size=12).map("".join),
       st.sampled_from(["crawlfleet", "CrawlFleet", "", "x"]))  # fmt: skip
def test_x_robots_tag(value: str, agent: str) -> None:
    noindex, nofollow = x_robots_tag(value, agent)
    assert isinstance(noindex, bool) and isinstance(nofollow, bool)
