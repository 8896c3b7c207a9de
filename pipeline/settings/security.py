"""The SSRF guard's exemptions and the fleet's credentials.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    allow_networks: tuple[str, ...] = ()  # CIDRs exempt from the SSRF guard, e.g. 127.0.0.0/8 for the testbed
