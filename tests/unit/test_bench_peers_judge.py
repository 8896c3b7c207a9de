"""The pure figures of `crawlfleet bench peers` (pipeline/harness/bench/peers/judge.py) and its commands."""

from __future__ import annotations

from pathlib import Path

from pipeline.harness.bench.peers import runners
from pipeline.harness.bench.peers.judge import fastest, interleaved, judge_run, ratios, summarize

PAGES = {("http", "a.test", "/"), ("http", "a.test", "/p/0"), ("http", "b.test", "/")}
FETCH = PAGES | {("http", "a.test", "/r/0")}


def _line(t: float, host: str, path: str, status: int = 200, scheme: str | None = None) -> dict[str, object]:
    line: dict[str, object] = {"t": t, "host": host, "path": path, "client": "127.0.0.1", "status": status}
    if scheme:
        line["scheme"] = scheme
    return line


def test_a_run_is_judged_from_its_log_lines() -> None:
    lines = [
        _line(10.0, "a.test", "/robots.txt", 404), _line(10.5, "a.test", "/"), _line(11.0, "a.test", "/p/0"),
        _line(11.5, "a.test", "/p/0"), _line(12.0, "a.test", "/r/0", 301), _line(12.0, "a.test", "/calendar/1"),
        _line(12.5, "a.test", "/nowhere", 404), _line(14.0, "a.test", "/robots.txt", 404),
    ]  # fmt: skip
    fig = judge_run(lines, PAGES, truth_fetch=FETCH, cpu_s=0.5, wall_s=6.0)
    assert fig["pages"] == 2 and fig["coverage"] == round(2 / 3, 4)
    assert fig["requests"] == 8 and fig["robots_requests"] == 2
    assert fig["duplicates"] == 1  # /p/0 twice; robots.txt twice is not a duplicate page
    assert fig["extra"] == 1  # /nowhere (the trap and the redirect are not extra)
    assert fig["window_s"] == 4.0 and fig["pages_per_s"] == 0.5
    assert fig["cpu_s_per_1k_pages"] == 250.0


def test_scheme_matters_and_an_empty_run_has_zero_rates() -> None:
    https = [_line(1.0, "a.test", "/", scheme="https")]
    assert judge_run(https, PAGES, truth_fetch=FETCH, cpu_s=0.1, wall_s=1.0)["pages"] == 0
    empty = judge_run([], PAGES, truth_fetch=FETCH, cpu_s=0.1, wall_s=1.0)
    assert empty["pages_per_s"] == 0.0 and empty["cpu_s_per_1k_pages"] == 0.0 and empty["window_s"] == 0.0


def test_summaries_fastest_setting_and_ratios() -> None:
    def runs(pps: list[float], cpu: list[float]) -> list[dict[str, float]]:
        return [{"pages_per_s": p, "cpu_s_per_1k_pages": c, "coverage": 1.0, "duplicates": 0, "requests": 10,
                 "pages": 9, "window_s": 1.0, "wall_s": 2.0, "cpu_s": 0.1} for p, c in zip(pps, cpu, strict=True)]  # fmt: skip

    s = {
        "crawlfleet": summarize(runs([300, 200, 250], [0.5, 0.7, 0.6])),
        "colly-perhost": summarize(runs([100, 120, 110], [1.0, 1.0, 1.0])),
        "colly-global": summarize(runs([200, 150, 210], [0.8, 0.9, 1.2])),
    }
    assert s["crawlfleet"]["pages_per_s"] == {"median": 250.0, "min": 200.0, "max": 300.0, "spread": 0.4}
    assert s["crawlfleet"]["repeats"] == 3
    assert fastest(s, "colly-") == "colly-global"
    r = ratios(s, "crawlfleet", {"colly": "colly-global", "scrapy": "scrapy"})
    assert r == {"colly_pages_per_s": 1.25, "colly_cpu_per_page": 0.667}  # no scrapy runs: no scrapy ratio


def test_runs_interleave() -> None:
    names = ["a", "b", "c"]
    assert [interleaved(names, r) for r in range(4)] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], names]
    assert interleaved([], 2) == []


def test_every_peer_gets_the_same_politeness(tmp_path: Path) -> None:
    plan = runners.Plan(tmp_path, ["http://site0.crawl.test:1/"], ["http://site0.crawl.test:1/"], 2, "127.0.0.1:53",
                        "", 3, binaries={"colly": Path("/x/colly"), "scrapy_python": Path("/x/python")})  # fmt: skip
    config = runners.crawlfleet_config(plan)
    assert "per_host_concurrency = 3" in config and "min_host_delay_s = 0.0" in config
    assert "tls_ca_bundle" not in config
    colly = runners.command("colly-perhost", plan, tmp_path)
    assert colly[colly.index("-parallelism") + 1] == "3" and colly[colly.index("-mode") + 1] == "perhost"
    assert runners.command("colly-global", plan, tmp_path)[colly.index("-mode") + 1] == "global"
    scrapy = runners.command("scrapy", plan, tmp_path)
    assert scrapy[scrapy.index("--per-host") + 1] == "3"
    for cmd in (colly, scrapy):
        assert sum(1 for a in cmd if a in runners.DENY) == len(runners.DENY)
    assert (tmp_path / "seeds.txt").read_text() == "http://site0.crawl.test:1/\n"
