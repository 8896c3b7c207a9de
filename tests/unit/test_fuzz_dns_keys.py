"""Fuzzing S2's DNS key (pipeline/dns/keys.py) and the caching resolver's input handling.

Contracts: ``normalize_name`` is idempotent; ``name_key`` of a normalized name is a 76-bit int, the
same for the same name, and lies inside ``prefix_range`` of its TLD and of its TLD+SLD (the property
S2's prefix counts rely on); ``CachingResolver.resolve`` raises only ``DnsError`` for bad names.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import Answer, DnsError
from pipeline.dns.keys import KEY_BITS, key_parts, name_key, normalize_name, prefix_range
from pipeline.dns.policy import TtlPolicy

SURROGATES: Literal["Cs"] = "Cs"  # lone surrogates: see tests/unit/test_fuzz_dns_keys.py

NO_SURROGATES = st.characters(blacklist_categories=(SURROGATES,))  # see test_surrogate_name_does_not_kill_the_process
ldh = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
tlds = st.sampled_from(["com", "org", "uk", "test", "de", "xn--p1ai", "zz-unknown", "local", ""])
names = st.tuples(st.lists(ldh, max_size=4), ldh, tlds).map(lambda t: ".".join([*t[0], t[1], t[2]]).strip("."))


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(names, st.sampled_from(["", ".", ".."]), st.booleans())
def test_key_layout_and_prefix_ranges(name: str, dots: str, upper: bool) -> None:
    raw = (name.upper() if upper else name) + dots
    norm = normalize_name(raw)
    assert normalize_name(norm) == norm
    key = name_key(norm)
    assert 0 <= key < 2**KEY_BITS and key == name_key(normalize_name(raw))
    tld_code, sld_hash, rest_hash = key_parts(key)
    assert key == (tld_code << 64) | (sld_hash << 32) | rest_hash
    labels = norm.split(".")
    if len(labels) >= 2:
        lo, hi = prefix_range(labels[-1])
        assert lo <= key < hi
        lo, hi = prefix_range(labels[-1], labels[-2])
        assert lo <= key < hi


@settings(max_examples=2000)
@given(st.text(alphabet=NO_SURROGATES, max_size=80))
def test_any_text_gives_a_key(text: str) -> None:
    key = name_key(normalize_name(text))
    assert 0 <= key < 2**KEY_BITS


class _Upstream:
    """An upstream that answers every query (the resolver's own input handling is under test)."""

    queries_sent = 0

    async def query(self, host: str, family: int = 2) -> Answer:
        self.queries_sent += 1
        return Answer(("127.0.10.1",), 60)

    async def aclose(self) -> None:
        return None


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet=NO_SURROGATES, max_size=40), min_size=1, max_size=8))
def test_resolver_raises_only_dns_error(hosts: list[str]) -> None:
    resolver = CachingResolver(_Upstream(), policy=TtlPolicy(), cache_size=64, negative=None)

    async def go() -> None:
        for host in hosts:
            try:
                out = await resolver.resolve(host)
            except DnsError as exc:
                assert exc.kind in ("malformed", "nxdomain", "no_address", "timeout", "servfail", "refused")
            else:
                assert out and all(isinstance(a, str) for a in out)

    asyncio.run(go())


SURROGATE_CRASH = (
    "mmh3 5.3.1 dereferences NULL when given a str that is not encodable as UTF-8 (a lone surrogate): "
    "SIGSEGV, the whole process dies. pipeline.dns.keys.name_key hashes host names with it, and a host with a "
    "lone surrogate reaches it from any Batch JSON (\\ud800 is valid JSON): a fetch worker running such a batch "
    "segfaults (tests/integration/test_security_messages.py). Fix (pipeline/dns/keys.py, pipeline/urls.py "
    "fingerprint): hash bytes, name.encode('utf-8', 'surrogatepass'), or reject non-ASCII names first; and "
    "validate task URLs in Batch.from_json (fetchers/records.py: normalize(url) == url, else SchemaError)."
)


def test_surrogate_name_does_not_kill_the_process() -> None:
    code = textwrap.dedent(
        """
        from pipeline.dns.keys import name_key
        try:
            name_key("\\ud800.crawl.test")
        except Exception:
            pass
        print("alive")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "alive" in proc.stdout, (proc.returncode, proc.stderr[-500:])
