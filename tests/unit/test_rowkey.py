"""Row keys: round-trip, host contiguity, URL order within a host, IDNA, ports, IPv6 (hypothesis)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.storage.rowkey import (
    authority_key,
    authority_of,
    domain_prefixes,
    host_prefix,
    reverse_host,
    row_key,
    url_of,
)
from pipeline.urls import host_of, normalize

LABEL = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
DNS_NAME = st.lists(LABEL, min_size=1, max_size=4).map(".".join).filter(lambda h: not h.replace(".", "").isdigit())
IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(lambda a: f"[{a.compressed}]")
HOST = st.one_of(DNS_NAME, DNS_NAME, IPV4, IPV6)
PORT = st.one_of(st.none(), st.integers(1, 65535).filter(lambda p: p not in (80, 443)))
SEGMENT = st.from_regex(r"[A-Za-z0-9\-._~%!$&'()*+,;=:@]{0,8}", fullmatch=True)
PATH = st.lists(SEGMENT, max_size=4).map(lambda segs: "/" + "/".join(segs))
QUERY = st.one_of(st.just(""), st.from_regex(r"\?[A-Za-z0-9=&%._\-/:]{0,12}", fullmatch=True))


@st.composite
def urls(draw: st.DrawFn, host: str | None = None, port: int | None | bool = False) -> str:
    scheme = draw(st.sampled_from(["http", "https"]))
    h = host if host is not None else draw(HOST)
    p = draw(PORT) if port is False else port
    authority = f"{h}:{p}" if p else h
    return f"{scheme}://{authority}{draw(PATH)}{draw(QUERY)}"


def test_examples() -> None:
    assert row_key("http://www.example.com/a?b") == b"com.example.www:http/a?b"
    assert row_key("https://www.example.com:8080/a") == b"com.example.www:https:8080/a"
    assert row_key("http://[2001:db8::1]:8080/") == b"[2001:db8::1]:http:8080/"
    assert row_key("http://10.0.0.1/x") == b"10.0.0.1:http/x"
    assert url_of(b"com.example.www:https:8080/a") == "https://www.example.com:8080/a"
    assert url_of(row_key("http://example.com")) == "http://example.com"
    assert authority_key("www.example.com:8080") == b"com.example.www:8080"
    assert authority_of(b"[::1]:81") == "[::1]:81"


def test_userinfo_is_refused() -> None:
    with pytest.raises(ValueError):
        row_key("http://user:pw@example.com/")


@given(urls())
def test_round_trip(url: str) -> None:
    assert url_of(row_key(url)) == url


@given(urls())
def test_round_trip_of_normalized(url: str) -> None:
    norm = normalize(url)
    assume(norm is not None)
    assert norm is not None
    assert url_of(row_key(norm)) == norm
    assert authority_of(authority_key(host_of(norm))) == host_of(norm)


@given(st.lists(st.tuples(DNS_NAME, st.integers(0, 30)), min_size=2, max_size=30), st.data())
def test_a_hosts_rows_are_one_contiguous_prefix_block(hosts: list[tuple[str, int]], data: st.DataObject) -> None:
    keyed = sorted((row_key(data.draw(urls(host=h))), h) for h, _ in hosts)
    for name in {h for _, h in keyed}:
        prefix = host_prefix(name)
        flags = [k.startswith(prefix) for k, _ in keyed]
        assert [h == name for _, h in keyed] == flags  # the prefix matches exactly this host's rows
        first, last = flags.index(True), len(flags) - 1 - flags[::-1].index(True)
        assert all(flags[first : last + 1])  # and they are contiguous in key order


@given(DNS_NAME, PORT, st.lists(st.tuples(st.sampled_from(["http", "https"]), PATH, QUERY), min_size=2, max_size=20))
def test_key_order_is_url_order_within_an_authority(host: str, port: int | None, parts: list[tuple[str, str, str]]) -> None:
    authority = f"{host}:{port}" if port else host
    batch = [f"{s}://{authority}{p}{q}" for s, p, q in parts]
    assert sorted(batch) == sorted(batch, key=row_key)


@given(DNS_NAME, DNS_NAME)
def test_domain_prefixes_cover_subdomains_only(sub: str, other: str) -> None:
    domain = "example.com"
    inside = [f"http://{domain}/", f"http://{sub}.{domain}/x", f"https://{domain}:8443/"]
    assume(other != domain and not other.endswith("." + domain))
    outside = [f"http://{other}/", f"http://{domain}2/", f"http://x{domain}/"]
    prefixes = domain_prefixes(domain)
    assert all(row_key(u).startswith(prefixes) for u in inside)
    assert not any(row_key(u).startswith(prefixes) for u in outside)


UNICODE_LABEL = st.text(alphabet="abcxyzäöüéñçøßåλдж中文日本", min_size=1, max_size=8)


@settings(max_examples=200)
@given(st.lists(UNICODE_LABEL, min_size=1, max_size=3), st.sampled_from(["com", "de", "xn--p1ai"]), PATH)
def test_unicode_hosts_key_as_their_idna_form(labels: list[str], tld: str, path: str) -> None:
    name = ".".join([*labels, tld])
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        assume(False)
        return
    key = row_key(f"http://{name}{path}")
    assert key == row_key(f"http://{ascii_name}{path}")
    assert key.isascii()
    assert url_of(key) == f"http://{ascii_name}{path}"
    norm = normalize(f"http://{name}{path}")
    if norm is not None:  # the normalizer agrees on the host
        assert row_key(norm).split(b":")[0] == key.split(b":")[0]


@given(st.ip_addresses(v=6), PORT, PATH)
def test_ipv6_hosts(addr: ipaddress.IPv6Address, port: int | None, path: str) -> None:
    host = f"[{addr.compressed}]"
    url = f"http://{host}:{port}{path}" if port else f"http://{host}{path}"
    key = row_key(url)
    assert key.startswith(host_prefix(host))
    assert url_of(key) == url
    assert authority_of(authority_key(host_of(url))) == host_of(url)


@given(DNS_NAME)
def test_reverse_host_is_an_involution(name: str) -> None:
    assert reverse_host(reverse_host(name)) == name
    assert b"|" not in authority_key(name)
