"""The one place settings are read.

Order of precedence, lowest first: dataclass defaults, a TOML file, ``CRAWLFLEET_*`` environment
variables, then explicit overrides (CLI flags). Nothing below this module reads the environment;
components receive the typed section they need.

Environment names are ``CRAWLFLEET_<SECTION>_<FIELD>`` upper-cased, e.g.
``CRAWLFLEET_FETCH_USER_AGENT``; the broker and HBase URLs also have the short forms
``CRAWLFLEET_BROKER_URL`` and ``CRAWLFLEET_HBASE_HOST``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_UA = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet; crawl-ops@crawlfleet.invalid)"


@dataclass(frozen=True, slots=True)
class FetchSettings:
    user_agent: str = DEFAULT_UA
    robots_agent: str = "crawlfleet"  # the product token matched against robots.txt groups
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    total_timeout_s: float = 30.0
    max_redirects: int = 5
    max_body_bytes: int = 2 * 1024 * 1024  # decompressed; larger bodies are truncated and marked
    max_header_bytes: int = 16 * 1024
    retries: int = 2  # only for retryable errors (connect errors, timeouts, 5xx)
    retry_backoff_s: float = 0.5
    concurrency: int = 256  # sockets in flight per fetcher process
    processes: int = 0  # embedded crawl: fetch processes (pipeline/embedded/fetchproc.py); 0 = fetch in the crawl process, -1 = one per spare core
    parse_processes: int = -1  # embedded crawl without fetch processes: link/journal-line processes (pipeline/embedded/parseproc.py); -1 = one per spare core (max 2)
    parse_content_types: tuple[str, ...] = ("text/html", "application/xhtml+xml")
    keep_body: bool = True


@dataclass(frozen=True, slots=True)
class PolitenessSettings:
    per_host_concurrency: int = 2
    per_ip_concurrency: int = 8
    min_host_delay_s: float = 0.25  # gap between request starts to one host
    min_ip_delay_s: float = 0.0
    max_crawl_delay_s: float = 30.0  # Crawl-delay above this is capped (as Nutch/Heritrix do)
    robots_ttl_s: float = 3600.0
    robots_5xx_retry_s: float = 600.0  # host treated as disallowed this long after a 5xx robots.txt
    obey_robots: bool = True
    max_retry_after_s: float = 600.0


@dataclass(frozen=True, slots=True)
class ScopeSettings:
    max_depth: int = 20
    max_pages: int = 0  # 0 = unlimited
    max_pages_per_host: int = 0
    max_url_length: int = 2048
    max_path_depth: int = 16
    max_repeated_segments: int = 2
    allowed_domains: tuple[str, ...] = ()  # empty = the seeds' registered domains
    allow_regex: tuple[str, ...] = ()
    deny_regex: tuple[str, ...] = ()
    sort_query: bool = False


@dataclass(frozen=True, slots=True)
class DnsSettings:
    servers: tuple[str, ...] = ()  # "HOST:PORT"; empty = system resolver
    timeout_s: float = 2.0
    tries: int = 3
    min_ttl_s: int = 300
    max_ttl_s: int = 86400
    refresh_period_s: int = 1800  # S4
    negative_ttl_s: int = 300
    negative_fp_rate: float = 1e-6
    negative_capacity: int = 1_000_000
    cache_size: int = 50_000  # S4
    max_inflight: int = 256


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    allow_networks: tuple[str, ...] = ()  # CIDRs exempt from the SSRF guard, e.g. 127.0.0.0/8 for the testbed


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    k: int = 64  # S3 base batch size
    n_min: int = 8
    n_max: int = 512
    history_window: int = 16  # S3 vertical comparison: mean of the last N rounds
    heartbeat_s: float = 2.0
    missed_heartbeats: int = 2  # S1
    lease_s: float = 120.0
    quotas_file: str = ""
    service: str = "default"
    # Hosts the frontier works on at once, at least; more are activated whenever none of them is ready
    # (pipeline/frontier/activehosts.py). 0 = every host with pending URLs.
    active_hosts: int = 64
    # An active host yields its place to a waiting one after this many URLs (0 = only when drained).
    host_session_urls: int = 2048


@dataclass(frozen=True, slots=True)
class StoreSettings:
    kind: str = "sqlite"  # sqlite | hbase
    hbase_host: str = "127.0.0.1"
    hbase_port: int = 9090
    hbase_prefix: str = "crawlfleet"
    hbase_batch_size: int = 200
    warc: bool = False
    warc_max_bytes: int = 1024 * 1024 * 1024
    # The seen-set in front of the store: S5's LRU of recent fingerprints, then an exact table of up to
    # this many fingerprints at 8 B each (64 MiB at the default; 0 turns it off). See pipeline/frontier/dedup.py.
    seen_lru_size: int = 200_000
    seen_table_max_urls: int = 8_000_000
    # Embedded crawl: apply result writes on a thread of their own (pipeline/storage/writebehind.py),
    # so SQLite and the body log's writes can overlap fetching and parsing on a second core. Off: on
    # the 10k bench it cost more CPU per page (thread hand-offs) than it moved off the crawl's thread.
    write_behind: bool = False


@dataclass(frozen=True, slots=True)
class FleetSettings:
    broker_url: str = "amqp://guest:guest@127.0.0.1:5672//"
    results_exchange: str = "crawlfleet.results"
    heartbeat_exchange: str = "crawlfleet.heartbeats"
    max_message_bytes: int = 64 * 1024 * 1024
    # Celery task events make the workers visible to Flower; off by default because they add about
    # three broker messages per batch (roughly doubling the fleet's message rate).
    task_events: bool = False
    # The design card's loop (docs/FLEET.md): "jobs" = each node stores its pages (store, segments) and
    # replies once per batch without bodies, and the link jobs (`crawlfleet links`) feed the pending
    # set; "dispatcher" = bodies cross the broker and the dispatcher extracts links itself.
    link_path: str = "jobs"
    # Where the dispatcher tells nodes to write segments ("" = OUT/node-segments).
    segments_dir: str = ""
    # A node's own view of the store and the segments (when its mount point or the HBase address it
    # sees differ from the dispatcher's); "" = as the dispatcher says.
    node_store: str = ""
    node_segments_dir: str = ""


@dataclass(frozen=True, slots=True)
class Settings:
    fetch: FetchSettings = field(default_factory=FetchSettings)
    politeness: PolitenessSettings = field(default_factory=PolitenessSettings)
    scope: ScopeSettings = field(default_factory=ScopeSettings)
    dns: DnsSettings = field(default_factory=DnsSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    dispatch: DispatchSettings = field(default_factory=DispatchSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> Settings:
        """Return a copy with ``{section: {field: value}}`` applied; values are coerced to the field type."""
        changes = {}
        for section, values in overrides.items():
            current = getattr(self, section)
            hints = typing.get_type_hints(type(current))
            coerced = {name: _coerce(hints[name], value) for name, value in values.items() if value is not None}
            changes[section] = dataclasses.replace(current, **coerced)
        return dataclasses.replace(self, **changes)


_SHORT_ENV = {
    "CRAWLFLEET_BROKER_URL": ("fleet", "broker_url"),
    "CRAWLFLEET_HBASE_HOST": ("store", "hbase_host"),
    "CRAWLFLEET_HBASE_PORT": ("store", "hbase_port"),
}


def _coerce(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is tuple:
        if isinstance(value, str):
            return tuple(v for v in (p.strip() for p in value.split(",")) if v)
        return tuple(value)
    if hint is bool and isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    if hint in (int, float, str) and not isinstance(value, hint):
        return hint(value)
    return value


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for env_name, (section, name) in _SHORT_ENV.items():
        if env_name in environ:
            out.setdefault(section, {})[name] = environ[env_name]
    for f in dataclasses.fields(Settings):
        section_cls = typing.get_type_hints(Settings)[f.name]
        for sf in dataclasses.fields(section_cls):
            env_name = f"CRAWLFLEET_{f.name}_{sf.name}".upper()
            if env_name in environ:
                out.setdefault(f.name, {})[sf.name] = environ[env_name]
    return out


def load_settings(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Build Settings from defaults, then the TOML file at ``path``, then env, then ``overrides``."""
    settings = Settings()
    if path:
        with open(path, "rb") as fh:
            settings = settings.with_overrides(tomllib.load(fh))
    settings = settings.with_overrides(_env_overrides(os.environ if environ is None else environ))
    if overrides:
        settings = settings.with_overrides(overrides)
    return settings
