"""The one place settings are read, checked, and traced to where each value came from.

Order of precedence, lowest first: dataclass defaults, a crawl directory's remembered settings (on
``--resume``), a TOML file, ``CRAWLFLEET_*`` environment variables, then explicit overrides (CLI
flags). Every value is checked by one rule table, whichever layer gave it (``check_value``; flags use
the same rules at parse time through ``arg_type``). Nothing below this module reads the environment;
components receive the typed section they need.

Module map: one module per section's dataclass (crawling: fetch, politeness, scope; dns; security;
dispatch; store; fleet; recrawl; plugins; cluster); this module composes them and reads the layers.

May import: nothing of the project (the vocabulary's bottom).

Environment names are ``CRAWLFLEET_<SECTION>_<FIELD>`` upper-cased, e.g.
``CRAWLFLEET_FETCH_USER_AGENT``; the broker and HBase URLs also have the short forms
``CRAWLFLEET_BROKER_URL`` and ``CRAWLFLEET_HBASE_HOST``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import ipaddress
import os
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.settings.cluster import ClusterSettings
from pipeline.settings.crawling import DEFAULT_UA, FetchSettings, PolitenessSettings, ScopeSettings
from pipeline.settings.dispatch import DispatchSettings
from pipeline.settings.dns import DnsSettings
from pipeline.settings.fleet import FleetSettings, storage_uri_ok
from pipeline.settings.plugins import PluginSettings
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.settings.security import SecuritySettings
from pipeline.settings.store import StoreSettings

__all__ = ["DEFAULT_UA", "ClusterSettings", "DispatchSettings", "DnsSettings", "FetchSettings", "FleetSettings", "Loaded",
           "PluginSettings", "PolitenessSettings", "ScopeSettings", "SecuritySettings", "Settings", "SettingsError", "StoreSettings",
           "load_settings", "load_settings_traced"]  # fmt: skip


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
    recrawl: RecrawlSettings = field(default_factory=RecrawlSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)

    def with_overrides(
        self, overrides: Mapping[str, Mapping[str, Any]], *, where: str = "setting"
    ) -> Settings:
        """A copy with ``{section: {field: value}}`` applied (None = unchanged), values coerced to the field
        types; SettingsError names an unknown key or a value of the wrong type, prefixed with ``where``."""
        changes = {
            s: dataclasses.replace(getattr(self, s), **v) for s, v in _validated(overrides, where).items()
        }
        return dataclasses.replace(self, **changes)


_SHORT_ENV = {"CRAWLFLEET_BROKER_URL": ("fleet", "broker_url"), "CRAWLFLEET_HBASE_HOST": ("store", "hbase_host"),
              "CRAWLFLEET_HBASE_PORT": ("store", "hbase_port")}  # fmt: skip


class SettingsError(ValueError):
    """A key or value the user gave is wrong; the one-line message names it, its source and what was expected."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """Settings and, for every ``section.field``, where its value came from, one of (lowest precedence
    first) ``default``, ``crawl-dir``, ``file:PATH``, ``env:NAME``, ``flag``."""

    settings: Settings
    sources: dict[str, str]


def sections() -> dict[str, type]:
    """Section name -> its dataclass, in declaration order."""
    return dict(_sections())


@functools.cache
def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(Settings)  # resolving type hints is slow: once per process, not per call
    return {f.name: hints[f.name] for f in dataclasses.fields(Settings)}


@functools.cache
def _hints_of(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def field_keys() -> list[str]:
    """Every ``section.field`` of Settings, in declaration order."""
    return [f"{s}.{f.name}" for s, cls in sections().items() for f in dataclasses.fields(cls)]


def _section_hints(section: str, where: str = "setting") -> dict[str, Any]:
    if section not in (known := sections()):
        raise SettingsError(f"{where}: unknown section [{section}] (expected one of: {', '.join(known)})")
    return _hints_of(known[section])


def _validated(overrides: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """``overrides`` checked for known sections and fields and coerced to the fields' types."""
    out: dict[str, dict[str, Any]] = {}
    for section, values in overrides.items():
        hints = _section_hints(section, where)
        if not isinstance(values, Mapping):
            raise SettingsError(f"{where}: [{section}] must be a table of settings, got {values!r}")
        for name, value in values.items():
            if name not in hints:
                raise SettingsError(
                    f"{where}: unknown setting {section}.{name} (expected one of: {', '.join(hints)})"
                )
            if value is not None:
                out.setdefault(section, {})[name] = _coerce(hints[name], value, f"{where}: {section}.{name}")
    return out


def _kind(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return "a list of strings (or one comma-separated string)"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def _coerce(hint: Any, value: Any, where: str = "setting") -> Any:
    """``value`` as the field type ``hint`` (text from env or a flag is parsed); else SettingsError."""
    if typing.get_origin(hint) is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, list | tuple) and all(isinstance(v, str) for v in items):
            return tuple(v for v in (p.strip() for p in items) if v)
    elif hint is bool:
        if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE):
            return value if isinstance(value, bool) else value.strip().lower() in _TRUE
    elif hint in (int, float) and isinstance(value, int | float | str) and not isinstance(value, bool):
        try:
            number = hint(value)
        except ValueError:
            number = None
        if number is not None and not (isinstance(value, float) and number != value):
            return number
    elif hint is str and not isinstance(value, dict | list | tuple):
        return str(value)
    elif hint not in (bool, int, float, str):
        return value
    raise SettingsError(f"{where}: expected {_kind(hint)}, got {value!r}")


# Value rules, one table for a settings file, the environment and the flags (``arg_type``). A number
# not listed in _AT_LEAST or _POSITIVE must be >= 0.
_AT_LEAST: dict[str, float] = {
    "fetch.concurrency": 1, "fetch.processes": -1, "fetch.parse_processes": -1, "fetch.max_body_bytes": 1,
    "fetch.max_header_bytes": 1, "politeness.per_host_concurrency": 1, "politeness.per_ip_concurrency": 1,
    "scope.max_url_length": 1, "dns.tries": 1, "dns.max_inflight": 1, "dns.cache_size": 1,
    "dispatch.k": 1, "dispatch.n_min": 1, "dispatch.n_max": 1, "dispatch.history_window": 1,
    "dispatch.missed_heartbeats": 1, "dispatch.shards": 1, "dispatch.shard_block_urls": 1,
    "dispatch.shard_window": 1, "store.hbase_port": 1, "store.hbase_batch_size": 1,
    "store.warc_max_bytes": 1, "fleet.max_message_bytes": 1, "fleet.segment_retention_s": float("-inf"),
    "fleet.link_lease_s": 5, "plugins.items_file_bytes": 1, "plugins.item_max_bytes": 1,
}  # fmt: skip
_POSITIVE = frozenset({
    "fetch.connect_timeout_s", "fetch.read_timeout_s", "fetch.total_timeout_s", "dns.timeout_s",
    "dispatch.heartbeat_s", "dispatch.lease_s", "dispatch.shard_heartbeat_s", "dns.negative_fp_rate",
    "recrawl.min_interval_s", "recrawl.max_interval_s", "recrawl.initial_interval_s",
})  # fmt: skip
_AT_MOST: dict[str, float] = {"store.hbase_port": 65535, "dns.negative_fp_rate": 0.5, "recrawl.recrawl_share": 1,
                               "recrawl.simhash_bits": 64, "fleet.node_nice": 19}  # fmt: skip
_CHOICES: dict[str, tuple[str, ...]] = {
    "store.kind": ("sqlite", "hbase"),
    "fleet.amqp_client": ("kombu", "pika"),
    "recrawl.policy": ("nutch", "poisson"),
    "dispatch.priority": ("inlinks", "depth"),
    "fetch.event_loop": ("asyncio", "uvloop", "auto"),
    "plugins.items_format": ("jsonl", "parquet", "both"),
    "cluster.spark_app": ("long", "per-round"),
    "cluster.hadoop_mode": ("auto", "yarn", "local"),
}


_ITEM_WANTED = {
    "dns.servers": "an IP address with an optional port, like 127.0.0.1:5353 or [::1]:53",
    "security.allow_networks": "a network in CIDR form, like 127.0.0.0/8",
    "scope.allow_regex": "a regular expression", "scope.deny_regex": "a regular expression",
    "recrawl.overrides": "PATTERN=MIN:MAX with 0 < MIN <= MAX seconds, like *.example.org=60:86400",
}  # fmt: skip


def _check_item(key: str, item: str) -> str | None:
    """What one item of a list setting should have been, or None when it is fine."""
    try:
        if key == "dns.servers":  # IP[:PORT] or [IPv6][:PORT], as c-ares takes it
            host, port = (item[1:].partition("]")[::2] if item.startswith("[")
                          else item.partition(":")[::2] if item.count(":") == 1 else (item, ""))  # fmt: skip
            ipaddress.ip_address(host)
            if port and not (port.removeprefix(":").isdigit() and 0 < int(port.removeprefix(":")) < 65536):
                raise ValueError(item)
        elif key == "security.allow_networks":
            ipaddress.ip_network(item.strip(), strict=False)
        elif key in ("scope.allow_regex", "scope.deny_regex"):
            re.compile(item)
        elif key == "recrawl.overrides":  # the form pipeline.frontier.schedule.parse_override reads
            pattern, sep, bounds = item.rpartition("=")
            low, colon, high = bounds.partition(":")
            if not (sep and pattern and colon and 0 < float(low) <= float(high)):
                raise ValueError(item)
            if pattern.startswith("re:"):
                re.compile(pattern[3:])
    except (ValueError, re.error):
        return _ITEM_WANTED[key]
    return None


def parquet_available() -> bool:
    """Whether Parquet files can be written here (pyarrow, the ``parquet`` extra, is installed)."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def check_value(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the setting ``key`` ("section.field"), as "expected ...", or None."""
    if isinstance(value, tuple):
        bad = [(item, wanted) for item in value if (wanted := _check_item(key, item)) is not None]
        return f"expected {bad[0][1]}, got {bad[0][0]!r}" if bad else None
    if key in ("fleet.segments_dir", "fleet.node_segments_dir") and value and not storage_uri_ok(value):
        return f"expected a directory or a file:///, hdfs:// or s3:// URI, got {value!r}"
    if key == "plugins.items_format" and value in ("parquet", "both") and not parquet_available():
        return f"expected jsonl: {value} needs pyarrow (pip install 'crawlfleet[parquet]'), got {value!r}"
    if key in _CHOICES and value not in _CHOICES[key]:
        return f"expected one of {', '.join(_CHOICES[key])}, got {value!r}"
    if key == "fetch.tls_ca_bundle" and value and not os.path.isfile(value):
        return f"expected a PEM file of CA certificates, got {value!r} (no such file)"
    if key == "scope.sort_query" and value is True:
        # Refused rather than ignored: seeds, links, redirects and sitemaps would all have to sort alike, on
        # both scales, or one page would be fetched under two URLs.
        return "expected false (sorting query parameters is not implemented yet), got True"
    if isinstance(value, int | float) and not isinstance(value, bool):
        what = "an integer" if isinstance(value, int) else "a number"
        if key in _POSITIVE and not value > 0:
            return f"expected {what} > 0, got {value!r}"
        low = _AT_LEAST.get(key, 0)
        if value < low:
            return f"expected {what} >= {low:g}, got {value!r}"
        if key in _AT_MOST and value > _AT_MOST[key]:
            return f"expected {what} <= {_AT_MOST[key]:g}, got {value!r}"
    return None


def check_settings(settings: Settings, sources: Mapping[str, str] | None = None) -> None:
    """Raise SettingsError for the first value no rule allows, naming it and where it came from."""
    for section, cls in sections().items():
        current = getattr(settings, section)
        for f in dataclasses.fields(cls):
            key = f"{section}.{f.name}"
            if (problem := check_value(key, getattr(current, f.name))) is not None:
                raise SettingsError(f"{key} (from {(sources or {}).get(key, 'default')}): {problem}")
    if (d := settings.dispatch).n_max < d.n_min:
        where = (sources or {}).get("dispatch.n_max", "default")
        raise SettingsError(
            f"dispatch.n_max (from {where}): expected >= dispatch.n_min ({d.n_min}), got {d.n_max}"
        )
    if d.shard >= d.shards:
        where = (sources or {}).get("dispatch.shard", "default")
        raise SettingsError(f"dispatch.shard (from {where}): expected 0..{d.shards - 1} (dispatch.shards), got {d.shard}")
    if d.shards > 1 and settings.store.kind != "hbase":
        where = (sources or {}).get("dispatch.shards", "default")
        raise SettingsError(f"dispatch.shards (from {where}): expected 1 with store.kind = {settings.store.kind!r} "
                            f"(shards share one HBase store), got {d.shards}")  # fmt: skip


def arg_type(key: str) -> Callable[[str], Any]:
    """An argparse ``type=`` for the setting ``key``: the text parsed and checked by the rules a settings
    file obeys; for a list setting, one item. A bad value raises ArgumentTypeError naming it."""
    section, _, name = key.partition(".")
    hint = _section_hints(section)[name]
    item = typing.get_origin(hint) is tuple

    def parse(text: str) -> Any:
        try:
            value = _coerce(str if item else hint, text, key)
        except SettingsError:
            raise argparse.ArgumentTypeError(f"expected {_kind(hint)}, got {text!r}") from None
        if (problem := check_value(key, (value,) if item else value)) is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    return parse


def _env_overrides(environ: Mapping[str, str]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """One layer per variable set, as ``(env:NAME, {section: {field: text}})``."""
    names = dict(_SHORT_ENV) | {
        f"CRAWLFLEET_{k.replace('.', '_')}".upper(): tuple(k.split(".")) for k in field_keys()
    }
    return [(f"env:{n}", {s: {f: environ[n]}}) for n, (s, f) in names.items() if n in environ]


def _read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise SettingsError(
            f"--config {path}: {exc.strerror or exc} (expected a readable TOML file)"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"--config {path}: not valid TOML ({exc})") from None


def load_settings_traced(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    remembered: Mapping[str, Mapping[str, Any]] | None = None,
) -> Loaded:
    """Settings from the layers (defaults, ``remembered`` = a crawl directory's saved settings, the TOML
    file at ``path``, the environment, ``overrides`` = flags; a None override is a flag not given), with
    every field's source. Raises SettingsError for an unknown key, a malformed file or a bad value."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if remembered:
        layers.append(("crawl-dir", remembered))
    if path:
        layers.append((f"file:{path}", _read_toml(path)))
    layers += _env_overrides(os.environ if environ is None else environ)
    if overrides:
        layers.append(("flag", overrides))
    settings = Settings()
    sources = dict.fromkeys(field_keys(), "default")
    for source, layer in layers:
        where = "flag" if source == "flag" else source.replace("file:", "--config ")
        checked = _validated(layer, where)
        settings = settings.with_overrides(checked)
        sources.update({f"{s}.{n}": source for s, values in checked.items() for n in values})
    check_settings(settings, sources)
    return Loaded(settings, sources)


def load_settings(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Build Settings from defaults, then the TOML file at ``path``, then env, then ``overrides``."""
    return load_settings_traced(path, environ=environ, overrides=overrides).settings
