"""Fuzzing URL hygiene (pipeline/urls.py) with a URL grammar, not just random text.

Contracts under test (from the module's docstrings): ``normalize`` never raises and gives None for
junk; it is idempotent; its output is an absolute http(s) URL of safe ASCII within ``max_length``;
``join`` never raises; ``host_of``, ``fingerprint``, ``trap_reason`` and ``Scope.allows`` accept every
normalized URL.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.urls import Scope, TrapRules, fingerprint, host_of, is_canonical, join, normalize, trap_reason

SAFE = re.compile(r"^[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]*$")

schemes = st.sampled_from(["http", "https", "HTTP", "HtTpS", "ftp", "javascript", "data", "", "http:", "h\u0442tp"])
label_chars = st.sampled_from(list("abcxyz019-_") + ["\u00fc", "\u00e9", "\u0431", "\u4e2d", "%41", "%00", "\x00", " ", ".", "\u3002", "\uff0e", "\u00df", "\u200d", "\ufffd", "A", "Z"])
labels = st.one_of(
    st.lists(label_chars, min_size=0, max_size=12).map("".join),
    st.sampled_from(["xn--", "xn--bcher-kva", "xn--zz", "a" * 63, "a" * 64, "a" * 70, "-a", "a-", "xn--80ak6aa92e"]),
)
hostnames = st.lists(labels, min_size=1, max_size=5).map(".".join)
ipv4 = st.tuples(*[st.integers(0, 300)] * 4).map(lambda t: ".".join(map(str, t)))
ipv6 = st.sampled_from(["[::1]", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]", "[2001:db8::1]", "[::]", "[zz::1]", "[::1"])
odd_hosts = st.sampled_from(["2130706433", "0x7f.0.0.1", "0177.0.0.1", "127.1", "localhost", "", "%2e%2e", "[]"])
hosts = st.one_of(hostnames, ipv4, ipv6, odd_hosts)
ports = st.one_of(st.none(), st.integers(0, 70000).map(str), st.sampled_from(["", "abc", "-1", "080", "65535", " 80"]))
segments = st.sampled_from(["a", "b", ".", "..", "%2e", "%2E%2E", "%", "%zz", "%41", "\u00e9", " ", "\x00", "a b", "~", ";p", "@", ":"])
paths = st.lists(segments, max_size=8).map(lambda s: "/" + "/".join(s))
queries = st.one_of(st.none(), st.lists(st.sampled_from(["a=1", "b=", "=c", "a=2", "%zz", "\u00e9=1", "x y", "&", "?"]),
                                        max_size=5).map("&".join))  # fmt: skip
fragments = st.one_of(st.none(), st.sampled_from(["", "top", "a b", "\u00e9"]))
userinfo = st.one_of(st.none(), st.sampled_from(["user", "user:pass", "u@x", ":"]))


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme, host, port, path = draw(schemes), draw(hosts), draw(ports), draw(paths)
    user, query, frag = draw(userinfo), draw(queries), draw(fragments)
    text = f"{scheme}://" if scheme else "//"
    if user is not None:
        text += user + "@"
    text += host
    if port is not None:
        text += ":" + port
    text += path
    if query is not None:
        text += "?" + query
    if frag is not None:
        text += "#" + frag
    return text


def check_normalized(out: str, *, max_length: int = 8192) -> None:
    assert out.startswith(("http://", "https://")), out
    assert SAFE.match(out), out
    assert len(out) <= max_length
    assert "#" not in out
    host = host_of(out)
    assert host and host == host.lower(), out
    assert -(2**63) <= fingerprint(out) < 2**63


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(urls())
@example("http://a\u3002./")  # IDNA turned the ideographic full stop into a trailing dot after the strip
@example("http://[::1]:0/")
@example("http://a.b/%2e%2e/%2E/x")
@example("HTTP://User:Pass@Example.COM:80/a/../b?q#f")
def test_normalize_grammar(url: str) -> None:
    out = normalize(url)
    if out is None:
        return
    check_normalized(out)
    assert normalize(out) == out, (url, out)  # idempotent
    assert normalize(out, sort_query=True) == normalize(normalize(out, sort_query=True) or "", sort_query=True)
    if is_canonical(out):
        assert normalize(out) == out


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_normalize_never_raises_on_text(text: str) -> None:
    out = normalize(text)
    if out is not None:
        check_normalized(out)
        assert normalize(out) == out


@settings(max_examples=1000)
@given(urls(), st.integers(10, 200))
def test_normalize_respects_max_length(url: str, limit: int) -> None:
    out = normalize(url, max_length=limit)
    assert out is None or len(out) <= limit


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(urls(), st.one_of(urls(), paths, st.text(max_size=60)))
def test_join_then_normalize(base: str, href: str) -> None:
    joined = join(base, href)
    assert isinstance(joined, str)
    out = normalize(joined)
    if out is not None:
        check_normalized(out)
        assert normalize(out) == out


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(urls(), st.integers(1, 64), st.integers(1, 20), st.integers(0, 4))
def test_scope_and_traps_accept_every_normalized_url(url: str, length: int, depth: int, repeats: int) -> None:
    out = normalize(url)
    if out is None:
        return
    assert trap_reason(out, TrapRules(length, depth, repeats)) in ("", "url_too_long", "path_too_deep", "repeated_segments")
    scope = Scope.build(["http://example.test/"], deny_regex=(r"\.pdf$",))
    assert isinstance(scope.allows(out), bool)
