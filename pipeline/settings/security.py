"""The SSRF guard's exemptions, and how secrets are kept out of everything printed.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``. The fleet's
secrets themselves (broker password, message keys, TLS key paths) are in ``fleet.py``; this module
names how they are shown: ``redact`` (one setting's value), ``redact_url`` (a URL's password) and
``scrub`` (any text, given the secrets it must not contain). ``crawlfleet settings``, WARC warcinfo
and the reports print settings only through ``redact``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pipeline.settings.fleet import SECRET_FIELDS, URL_FIELDS

MASK = "***"


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    allow_networks: tuple[str, ...] = ()  # CIDRs exempt from the SSRF guard, e.g. 127.0.0.0/8 for the testbed


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; a URL that does not parse is masked whole
    when it holds an '@' (it may still carry a password)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return MASK if "@" in url else url
    if not password:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return parts._replace(netloc=f"{user}:{MASK}@{hostport}").geturl()


def redact(key: str, value: Any) -> Any:
    """The value of setting ``key`` ("section.field") as it may be printed: secrets masked (an empty
    secret stays empty, so "not set" stays visible), URLs without their password."""
    if key in SECRET_FIELDS:
        return MASK if value else value
    if key in URL_FIELDS and isinstance(value, str):
        return redact_url(value)
    return value


def redact_section(section: str, values: dict[str, Any]) -> dict[str, Any]:
    """``dataclasses.asdict`` of one section with every value passed through ``redact``."""
    return {name: redact(f"{section}.{name}", value) for name, value in values.items()}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each (non-empty) secret replaced by ``***``; longest first, so
    a secret that contains another is masked whole."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
