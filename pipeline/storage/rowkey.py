"""Nutch-style row keys: the URL with its host reversed, so that one site's rows sit together.

``http://www.example.com/a?b``      -> ``com.example.www:http/a?b``
``https://www.example.com:8080/a``  -> ``com.example.www:https:8080/a``
``http://[2001:db8::1]:8080/``      -> ``[2001:db8::1]:http:8080/``  (IP literals are not reversed)

Contracts (property-tested in tests/unit/test_rowkey.py):
- ``url_of(row_key(u)) == u`` for every normalized URL (``pipeline.urls.normalize``: lower-case
  ASCII host, no userinfo, no default port, no fragment). A Unicode host is IDNA-encoded first, so
  its key equals the key of its ASCII form.
- Every row of a host name starts with ``host_prefix(name)``; no other host's row does. So a site
  is one contiguous prefix scan, and a registered domain with its subdomains is two
  (``domain_prefixes``).
- Within one authority (host and port) keys sort exactly as the URL strings do (by scheme, then by
  path and query), so a scan in key order is a scan in URL order.
- ``authority_key`` identifies a ``host_of(url)`` value (host[:port]) and never contains ``|``,
  which the pending table uses as its separator.
"""

from __future__ import annotations

import re
from functools import lru_cache

_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")  # four numeric labels: a literal, never reversed
_SCHEME_END = re.compile(r"[:/?#]")


@lru_cache(maxsize=65536)
def reverse_host(name: str) -> str:
    """``www.example.com`` -> ``com.example.www``; IP literals and bracketed IPv6 stay as they are.

    Its own inverse on ASCII names. Unicode names are IDNA-encoded (lower-case ASCII) first.
    """
    if name.startswith("[") or _IPV4.match(name):
        return name
    if not name.isascii():
        name = name.encode("idna").decode("ascii")
    return ".".join(reversed(name.lower().split(".")))


def _split_authority(authority: str) -> tuple[str, str]:
    """``host[:port]`` -> (host, port-or-empty); understands ``[v6]:port``."""
    if authority.startswith("["):
        end = authority.index("]") + 1
        port = authority[end + 1 :] if authority[end : end + 1] == ":" else ""
        return authority[:end], port
    host, _, port = authority.partition(":")
    return host, port


def row_key(url: str) -> bytes:
    """The row key of an absolute URL ``scheme://host[:port]rest``. Raises ValueError on userinfo."""
    sep = url.index("://")
    scheme = url[:sep]
    start = sep + 3
    end = start
    n = len(url)
    while end < n and url[end] not in "/?#":
        end += 1
    authority = url[start:end]
    if "@" in authority:
        raise ValueError(f"row_key: userinfo is not keyed (normalize first): {url!r}")
    host, port = _split_authority(authority)
    head = f"{reverse_host(host)}:{scheme}:{port}" if port else f"{reverse_host(host)}:{scheme}"
    return (head + url[end:]).encode("utf-8")


def url_of(key: bytes | str) -> str:
    """The URL of a row key: the inverse of :func:`row_key`."""
    text = key.decode("utf-8") if isinstance(key, bytes) else key
    host_end = text.index("]") + 1 if text.startswith("[") else text.index(":")
    rhost = text[:host_end]
    match = _SCHEME_END.search(text, host_end + 1)
    scheme_end = match.start() if match else len(text)
    scheme = text[host_end + 1 : scheme_end]
    rest_start = scheme_end
    port = ""
    if text[scheme_end : scheme_end + 1] == ":":
        rest_start = scheme_end + 1
        while rest_start < len(text) and text[rest_start].isdigit():
            rest_start += 1
        port = text[scheme_end + 1 : rest_start]
    host = reverse_host(rhost)
    authority = f"{host}:{port}" if port else host
    return f"{scheme}://{authority}{text[rest_start:]}"


def host_prefix(name: str) -> bytes:
    """Prefix of every row of host ``name`` (all schemes and ports), and of no other host's rows."""
    return (reverse_host(name) + ":").encode("ascii")


def domain_prefixes(domain: str) -> tuple[bytes, bytes]:
    """The two prefixes covering ``domain`` and all its subdomains (``com.example:``, ``com.example.``)."""
    base = reverse_host(domain)
    return (base + ":").encode("ascii"), (base + ".").encode("ascii")


def authority_key(authority: str) -> bytes:
    """Key of a ``host_of(url)`` value: ``www.example.com:8080`` -> ``com.example.www:8080``."""
    host, port = _split_authority(authority)
    rhost = reverse_host(host)
    return (f"{rhost}:{port}" if port else rhost).encode("ascii")


def authority_of(key: bytes) -> str:
    """Inverse of :func:`authority_key`."""
    host, port = _split_authority(key.decode("ascii"))
    name = reverse_host(host)
    return f"{name}:{port}" if port else name
