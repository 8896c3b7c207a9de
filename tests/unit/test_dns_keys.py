"""S2 BCTuple keys and the hash12 TLD table."""

from __future__ import annotations

import mmh3

from pipeline.dns.keys import KEY_BITS, key_parts, name_key, normalize_name, prefix_range
from pipeline.dns.namegen import real_looking_names
from pipeline.dns.tld import MAX_CODE, UNKNOWN, distinct_codes, tld_code, tld_table


def test_tld_table_is_large_ordered_and_fits_12_bits() -> None:
    table = tld_table()
    assert len(table) > 1500  # names, IDN TLDs in both forms
    assert distinct_codes() > 1450
    assert max(table.values()) <= MAX_CODE
    assert UNKNOWN not in table.values()
    ascii_names = sorted(n for n in table if n.isascii())
    codes = [table[n] for n in ascii_names]
    assert codes == sorted(codes)  # numbered in order
    for name in ("com", "org", "uk", "de", "test", "example", "localhost"):
        assert tld_code(name) != UNKNOWN
    assert tld_code("xn--p1ai") == tld_code("рф") != UNKNOWN
    assert tld_code("no-such-tld") == UNKNOWN


def test_key_layout_is_76_bits_tld_sld_rest() -> None:
    key = name_key("www.example.com")
    assert KEY_BITS == 76
    assert key < 1 << 76
    tld, sld, rest = key_parts(key)
    assert tld == tld_code("com")
    assert sld == mmh3.hash("example", 0, signed=False)
    assert rest == mmh3.hash("www", 0, signed=False)
    assert key == (tld << 64) | (sld << 32) | rest


def test_prefix_property() -> None:
    lo, hi = prefix_range("com")
    lo2, hi2 = prefix_range("com", "example")
    for name in ("example.com", "a.b.example.com", "www.example.com"):
        assert lo <= name_key(name) < hi
        assert lo2 <= name_key(name) < hi2
    assert lo <= name_key("other.com") < hi
    assert not lo2 <= name_key("other.com") < hi2
    assert not lo <= name_key("example.org") < hi
    assert lo <= lo2 < hi2 <= hi


def test_unknown_tlds_do_not_collide_with_each_other() -> None:
    assert key_parts(name_key("a.foo.zzunknown"))[0] == UNKNOWN
    assert name_key("a.foo.zzunknown") != name_key("a.foo.yyunknown")


def test_normalize_name() -> None:
    assert normalize_name("WWW.Example.COM.") == "www.example.com"


def expected_collisions(names: list[str]) -> float:
    """Birthday estimate for the key: two names collide when they share the TLD and one of the
    other two parts, and the 32-bit hashes of the differing part collide (both differing: 2^-64)."""
    by_sld: dict[tuple[str, str], int] = {}
    by_rest: dict[tuple[str, str], int] = {}
    for n in names:
        rest, _, tld = n.rpartition(".")
        rest, _, sld = rest.rpartition(".")
        by_sld[(tld, sld)] = by_sld.get((tld, sld), 0) + 1
        by_rest[(tld, rest)] = by_rest.get((tld, rest), 0) + 1
    pairs = sum(c * (c - 1) / 2 for c in by_sld.values()) + sum(c * (c - 1) / 2 for c in by_rest.values())
    return pairs / 2**32


def test_key_collisions_on_1m_real_looking_names_match_the_birthday_bound() -> None:
    names = real_looking_names(1_000_000)
    keys = {name_key(n) for n in names}
    collisions = len(names) - len(keys)
    expected = expected_collisions(names)
    print(f"1M names: {collisions} key collisions, birthday estimate {expected:.2f}")
    # The 76-bit key is not collision-free at crawl scale: ~150k bare "www.<sld>.com" names share
    # (com, www), so their 32-bit SLD hashes meet at the birthday rate. Counted, not hidden: the
    # observed number must stay of the order of the estimate (a few per million names).
    assert collisions <= 3 * expected + 3
    assert collisions / len(names) < 1e-5
