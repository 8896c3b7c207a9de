"""The Prometheus exposition of a live crawl: a collector that reads the stats at scrape time.

``StatsCollector`` yields every ``crawlfleet_*`` family from ``CrawlStats`` (pages, bytes, failures by
class, statuses, quota refusals, queue, uptime, fetch-phase latency histograms, DNS cache counters) and
per fetcher from ``fetcher_rows``; with a fleet snapshot also batches and URLs in flight, the last serial,
refusals and dropped completions by reason. Nothing is counted twice and the crawl's hot path never
touches prometheus-client: the collector only reads. Registered by ``metrics.MetricsServer``.

May import: this room (observe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from pipeline.observe.fleetview import FleetView, fetcher_rows
from pipeline.observe.stats import LATENCY_BOUNDS_S, CrawlStats, dns_hit_rate

NS = "crawlfleet"


class StatsCollector:
    """A prometheus-client collector that reads the live stats at scrape time."""

    def __init__(
        self, stats: CrawlStats, fleet: Callable[[], FleetView | None] | None, clock: Callable[[], float]
    ) -> None:
        self._stats = stats
        self._fleet = fleet
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        yield _counter("pages", "Results with an HTTP response", s.pages)
        yield _counter("bytes", "Bytes fetched (wire bytes when measured)", s.bytes)
        yield _counter("urls_discovered", "New URLs discovered", s.discovered)
        yield _counter("robots_blocked", "URLs not fetched because robots.txt forbids them", s.robots_blocked)
        failures = CounterMetricFamily(
            f"{NS}_fetch_failures", "Results without a response, by class", labels=["class"]
        )
        for cls, n in sorted(s.errors_by_class().items()):
            failures.add_metric([cls], n)
        yield failures
        status = CounterMetricFamily(f"{NS}_responses", "HTTP responses by status code", labels=["code"])
        for code, n in sorted(s.status_mix().items()):
            status.add_metric([str(code)], n)
        yield status
        quota = CounterMetricFamily(
            f"{NS}_quota_refusals", "Admission refusals (S1)", labels=["service", "reason"]
        )
        for (service, reason), n in sorted(s.quota_refusals_by().items()):
            quota.add_metric([service, reason], n)
        yield quota
        yield GaugeMetricFamily(f"{NS}_queue_urls", "URLs pending in the frontier", value=s.queue)
        yield GaugeMetricFamily(
            f"{NS}_uptime_seconds", "Seconds since the stats started", value=self._clock() - s.started_at
        )
        yield from self._latency()
        yield from self._dns()
        yield from self._fetchers()

    def _latency(self) -> Iterator[Metric]:
        hist = HistogramMetricFamily(f"{NS}_fetch_phase_seconds", "Fetch latency by phase", labels=["phase"])
        sums = self._stats.latency_sums()
        for phase, counts in self._stats.latency_histograms().items():
            buckets, acc = [], 0
            for bound, c in zip((*LATENCY_BOUNDS_S, float("inf")), counts, strict=True):
                acc += c
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), acc))
            hist.add_metric([phase], buckets, sums[phase])
        yield hist

    def _dns(self) -> Iterator[Metric]:
        dns = self._stats.dns()
        events = CounterMetricFamily(f"{NS}_dns_cache_events", "DNS cache counters", labels=["event"])
        for key, n in sorted(dns.items()):
            events.add_metric([key], n)
        yield events
        rate = dns_hit_rate(dns)
        if rate is not None:
            yield GaugeMetricFamily(f"{NS}_dns_cache_hit_ratio", "Cumulative DNS cache hit ratio", value=rate)

    def _fetchers(self) -> Iterator[Metric]:
        fleet = self._fleet() if self._fleet is not None else None
        rows = fetcher_rows(self._stats, fleet, self._clock())
        gauges = {
            "n_i": ("fetcher_batch_size", "S3 batch size n_i"),
            "t_i": ("fetcher_seconds_per_page", "S3 running mean seconds per page t_i"),
            "live": ("fetcher_live", "1 while the fetcher's heartbeats are current (S1)"),
            "p": ("fetcher_rate", "Download rate p from the last heartbeat (URLs/s)"),
            "q": ("fetcher_free_slots", "Free download slots q from the last heartbeat"),
            "batches_out": ("fetcher_batches_in_flight", "Batches issued and not completed"),
            "heartbeat_age_s": ("fetcher_heartbeat_age_seconds", "Seconds since the last heartbeat"),
        }
        for key, (name, doc) in gauges.items():
            fam = GaugeMetricFamily(f"{NS}_{name}", doc, labels=["fetcher"])
            for row in rows:
                value = row.get(key)
                if isinstance(value, int | float):
                    fam.add_metric([row["fetcher"]], float(value))
            yield fam
        results = CounterMetricFamily(
            f"{NS}_fetcher_results", "Results received per fetcher", labels=["fetcher"]
        )
        for row in rows:
            results.add_metric([row["fetcher"]], row["results"])
        yield results
        if fleet is not None:
            yield GaugeMetricFamily(f"{NS}_batches_in_flight", "Batches outstanding", value=fleet.in_flight)
            yield GaugeMetricFamily(
                f"{NS}_urls_in_flight", "URLs in outstanding batches", value=fleet.in_flight_urls
            )
            yield GaugeMetricFamily(
                f"{NS}_last_serial", "Last download serial id issued (S1)", value=fleet.last_serial
            )
            ref = CounterMetricFamily(
                f"{NS}_dispatch_refusals", "Dispatcher refusals by reason", labels=["reason"]
            )
            for reason, n in sorted(fleet.refusals.items()):
                ref.add_metric([reason], n)
            yield ref
            drop = CounterMetricFamily(
                f"{NS}_completions_dropped", "Completions dropped by reason", labels=["reason"]
            )
            for reason, n in sorted(fleet.dropped.items()):
                drop.add_metric([reason], n)
            yield drop


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{NS}_{name}", doc, value=value)
