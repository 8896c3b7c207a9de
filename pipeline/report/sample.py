"""A synthetic crawl directory in the engine's real formats, for tests and for trying the report.

It drives a real ``CrawlStats`` with a fake clock and writes ``stats.jsonl`` (tick rows),
``segments/segment-*.jsonl`` (``FetchResult.to_json()`` lines, with small bodies) and
``summary.json`` (``CrawlStats.summary()``), exactly as the crawl engine lays them out. Deterministic
for a given ``seed``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from fetchers.records import FetchResult, Timings
from pipeline.observe.stats import CrawlStats
from pipeline.report.data import SEGMENTS_DIR, STATS_FILE, SUMMARY_FILE

_ERRORS = ("timeout", "connect_error", "dns_nxdomain", "reset")


@dataclass(frozen=True, slots=True)
class SampleSpec:
    seconds: int = 30
    pages_per_s: int = 40
    hosts: int = 12
    fetchers: tuple[tuple[str, float], ...] = (("f1", 0.020), ("f2", 0.035), ("f3", 0.060))  # id, s/page
    k: int = 16
    error_rate: float = 0.03
    quota_per_s: float | None = 45.0
    segment_lines: int = 500
    seed: int = 7
    start: float = 1_790_000_000.0


def write_sample_crawl(crawl_dir: Path, spec: SampleSpec = SampleSpec()) -> Path:
    """Write a synthetic crawl under ``crawl_dir`` and return it."""
    rng = random.Random(spec.seed)
    crawl_dir.mkdir(parents=True, exist_ok=True)
    seg_dir = crawl_dir / SEGMENTS_DIR
    seg_dir.mkdir(exist_ok=True)
    now = [spec.start]
    stats = CrawlStats(clock=lambda: now[0])
    stats.set_quota_per_s(spec.quota_per_s)
    avg = sum(t for _, t in spec.fetchers) / len(spec.fetchers)
    t_i = {fid: t for fid, t in spec.fetchers}
    serial = 0
    batch_left = 0
    fid = spec.fetchers[0][0]
    queue = spec.pages_per_s * 20
    dns = {"hits": 0, "misses": 0, "negative_hits": 0, "inflight_joins": 0, "evictions": 0, "refreshes": 0}
    seg_index, seg_count = 0, 0
    seg = (seg_dir / f"segment-{seg_index:05d}.jsonl").open("w", encoding="utf-8")
    with (crawl_dir / STATS_FILE).open("w", encoding="utf-8") as stats_out:
        for sec in range(spec.seconds):
            # Ramp up for the first 3 seconds, drain in the last 2; flat (with noise) in between.
            scale = min(1.0, (sec + 1) / 3) * (0.4 if sec >= spec.seconds - 2 else 1.0)
            n_pages = max(0, int(rng.gauss(spec.pages_per_s * scale, spec.pages_per_s * 0.05)))
            for i in range(n_pages):
                # A batch runs on across second boundaries, as a real fetcher's would.
                if batch_left == 0:
                    fid, _ = spec.fetchers[serial % len(spec.fetchers)]
                    batch_left = max(1, round(spec.k * avg / t_i[fid]))
                    serial += 1
                    t_i[fid] = 0.8 * t_i[fid] + 0.2 * t_i[fid] * rng.uniform(0.8, 1.2)
                batch_left -= 1
                now[0] = spec.start + sec + i / max(n_pages, 1)
                result = _result(rng, spec, fid, serial, now[0])
                stats.on_result(result)
                seg.write(json.dumps(result.to_json()) + "\n")
                seg_count += 1
                if seg_count % spec.segment_lines == 0:
                    seg.close()
                    seg_index += 1
                    seg = (seg_dir / f"segment-{seg_index:05d}.jsonl").open("w", encoding="utf-8")
            discovered = n_pages * 3
            stats.on_discovered(discovered)
            queue = max(0, queue + discovered // 2 - n_pages)
            stats.set_queue(queue)
            if rng.random() < 0.2:
                stats.on_robots_blocked(rng.randint(1, 3))
            if rng.random() < 0.1:
                stats.on_quota_refusal("default", "quota")
            new_hosts = max(0, spec.hosts - sec * 4)
            dns["misses"] += min(n_pages, max(1, new_hosts))
            dns["hits"] += n_pages - min(n_pages, max(1, new_hosts))
            dns["negative_hits"] += rng.randint(0, 2)
            stats.set_dns(dns)
            stats.set_fetchers(
                {
                    fid: {"n_i": round(spec.k * avg / t), "t_i": t, "live": 1, "p": 1 / t, "q": 64}
                    for fid, t in t_i.items()
                }
            )
            now[0] = spec.start + sec + 1
            row = stats.tick()
            if row is not None:
                stats_out.write(json.dumps(row) + "\n")
    seg.close()
    (crawl_dir / SUMMARY_FILE).write_text(json.dumps(stats.summary(), indent=1), encoding="utf-8")
    return crawl_dir


def _result(rng: random.Random, spec: SampleSpec, fid: str, serial: int, at: float) -> FetchResult:
    host = f"site{rng.randrange(spec.hosts):02d}.crawl.test"
    depth = min(int(rng.expovariate(0.7)), 6)
    url = f"http://{host}/d{depth}/p{rng.randrange(10_000)}.html"
    if rng.random() < spec.error_rate:
        return FetchResult(
            url=url, url_id=rng.getrandbits(63), depth=depth, error_class=rng.choice(_ERRORS),
            timings=Timings(dns_s=rng.uniform(0.0005, 0.003), connect_s=0.0, ttfb_s=0.0, total_s=rng.uniform(0.5, 5)),
            fetcher_id=fid, serial=serial, fetched_at=at,
        )
    status = rng.choices((200, 301, 404, 500, 503), weights=(90, 4, 4, 1, 1))[0]
    body = (f"<html><body>page {url}</body></html>" * 4).encode()
    reused = rng.random() < 0.7  # connection reuse: no DNS, no connect
    return FetchResult(
        url=url, url_id=rng.getrandbits(63), depth=depth, final_url=url, status=status,
        content_type="text/html", body=body, wire_bytes=rng.randint(8_000, 30_000), body_bytes=len(body),
        timings=Timings(
            dns_s=0.0 if reused else rng.lognormvariate(-7, 0.6),
            connect_s=0.0 if reused else rng.lognormvariate(-7.5, 0.4),
            ttfb_s=rng.lognormvariate(-4.5, 0.5),
            total_s=rng.lognormvariate(-4, 0.5),
        ),
        ip="127.0.0.1", fetcher_id=fid, serial=serial, fetched_at=at,
    )
