"""Settings shared by the crawl benchmarks: the product's defaults, with bench politeness on the testbed."""

from __future__ import annotations

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import Settings, load_settings


def testbed_crawl_settings(tb: TestbedProcess) -> Settings:
    """Defaults everywhere, except: the testbed's DNS and network, 8 connections per host, no minimum gap,
    Crawl-delay capped to 0 and no back-off between retries of a 5xx (the bare loop honours none of
    these waits either), and the slow and huge pages skipped, so that the figures measure the crawler,
    not a 1.5 s sleep or a 5 MB body. Retries still happen (same requests as the default), only without
    the sleeps: the testbed's error pages otherwise hold their host for 1.5 s each, which at the end of
    a 10k crawl left one host's last ~80 URLs waiting for up to 20% of the run (measured 2026-11-22)."""
    return load_settings(overrides={
        "dns": {"servers": (f"127.0.0.1:{tb.dns_port}",)},
        "security": {"allow_networks": ("127.0.10.0/24",)},
        "politeness": {"per_host_concurrency": 8, "per_ip_concurrency": 64, "min_host_delay_s": 0.0,
                       "max_crawl_delay_s": 0.0},
        "scope": {"deny_regex": (r"/slow$", r"/big$")},
        "fetch": {"retry_backoff_s": 0.0},
    })  # fmt: skip
