"""The S1 quota list: service name -> URLs allowed per second, loaded once at start-up.

File format (``quotas.toml``; see ``quotas.example.toml`` at the repository root)::

    [services]
    default = 200      # URLs per second
    news = 12.5        # fractions are allowed; the minute budget is floor(s * m)
    paused = 0         # known service, refused every time

    [pace]             # optional: how the dispatcher, as S1's client, spends a quota (see Pace)
    slice_s = 0.2      # a request is at most this share of a second's quota; 0 = one whole second's
    burst_s = 0.5      # at most this many seconds' quota ahead of a steady m/s line; 0 = no pacing

A crawl without a quota file uses ``Quotas.unlimited()``: every service is known and has no limit.
A quota file without ``[pace]`` gets the defaults above (``Pace()``); ``Quotas(...)`` built in code
gets no pacing (``Pace.off()``), S1's rule alone.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class QuotaError(ValueError):
    """The quota file is malformed."""


@dataclass(frozen=True, slots=True)
class Pace:
    """The client's pacing of a quota (ours; S1 leaves when and how much to ask to the client).

    S1's rule lets a whole second's quota go at the first instant of the second, and every unused
    second of the minute at once after a dip. Both reach the web server as bursts: a burst granted at
    the turn of a second lands in two seconds at the server when the trip to the node varies. So the
    dispatcher asks in slices of ``slice_s`` seconds' quota and keeps its grants within ``burst_s``
    seconds' quota of a steady line of m URLs/s (a token bucket: m tokens/s, at most
    ``max(slice, m*burst_s)``). S1's own bound ``t + n <= s*m`` still decides every request: the pace
    only ever asks for less, or later."""

    slice_s: float = 0.2
    burst_s: float = 0.5

    def __post_init__(self) -> None:
        for name in ("slice_s", "burst_s"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or not 0 <= v <= 60
            ):
                raise QuotaError(f"[pace] {name} must be a number in 0..60, got {v!r}")

    @classmethod
    def off(cls) -> Pace:
        return cls(0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Quotas:
    """Per-service quotas. ``quota(service)`` is m, ``math.inf`` when unlimited, None when unknown."""

    per_second: Mapping[str, float] = field(default_factory=dict)
    unlimited_all: bool = False
    pace: Pace = field(default_factory=Pace.off)

    def __post_init__(self) -> None:
        for name, m in self.per_second.items():
            if not isinstance(name, str) or not name:
                raise QuotaError(f"bad service name {name!r}")
            if isinstance(m, bool) or not isinstance(m, int | float) or not math.isfinite(m) or m < 0:
                raise QuotaError(f"quota for {name!r} must be a finite number >= 0, got {m!r}")

    @classmethod
    def unlimited(cls) -> Quotas:
        return cls({}, unlimited_all=True)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Quotas:
        """Build from a parsed TOML document (``{"services": {name: m}}``)."""
        unexpected = set(data) - {"services", "pace"}
        if unexpected:
            raise QuotaError(f"unexpected top-level keys {sorted(unexpected)}; put quotas under [services]")
        services = data.get("services", {})
        if not isinstance(services, Mapping):
            raise QuotaError("[services] must be a table of name = URLs per second")
        pace = data.get("pace", {})
        if not isinstance(pace, Mapping) or set(pace) - {"slice_s", "burst_s"}:
            raise QuotaError("[pace] may hold only slice_s and burst_s")
        return cls({str(k): v for k, v in services.items()}, pace=Pace(**pace))  # type: ignore[misc,arg-type]

    @classmethod
    def load(cls, path: str | Path) -> Quotas:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise QuotaError(f"{path}: {exc}") from exc
        return cls.from_mapping(data)

    @classmethod
    def from_settings_file(cls, quotas_file: str) -> Quotas:
        """The quota file named by DispatchSettings.quotas_file, or unlimited when it is empty."""
        return cls.load(quotas_file) if quotas_file else cls.unlimited()

    def quota(self, service: str) -> float | None:
        if self.unlimited_all:
            return math.inf
        return self.per_second.get(service)

    def services(self) -> list[str]:
        return sorted(self.per_second)


def quota_line(quotas_file: str, per_s: float | None) -> str:
    """What a crawl's summary says about S1's quota: m and the file, or that there is none (unlimited)."""
    if not quotas_file:
        return "unlimited (no quota file)"
    return (
        f"{per_s:g} URLs/s from {quotas_file}"
        if per_s is not None
        else f"service not in {quotas_file}: refused"
    )
