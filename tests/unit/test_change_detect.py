"""pipeline/links/change.py: digests, simhash, the near-duplicate rule on the testbed's own pages, groups."""

from __future__ import annotations

import collections
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.harness.testbed.liverender import page_bytes
from pipeline.harness.testbed.living import (
    ADVERT,
    DATED,
    FAST,
    HOURLY,
    STATIC,
    Living,
    page_class,
    state,
    tick_s,
)
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.validators import digest as served_digest
from pipeline.links.change import (
    NEAR_BITS,
    Fingerprint,
    compare,
    content_digest,
    duplicate_groups,
    fingerprint,
    hamming,
    is_changed,
    simhash,
    visible_text,
)
from pipeline.storage.warcwire import sha1_of

EPOCH = 1_800_000_000.0


def test_digest_is_the_warc_payload_digest_form() -> None:
    for body in (b"", b"abc", bytes(range(256)) * 10):
        assert content_digest(body) == sha1_of([body]) == served_digest(body)


def test_visible_text_drops_markup_scripts_and_styles() -> None:
    html = b"<html><head><title>T</title><style>p{x:1}</style></head><body><p>Hello <b>world</b></p>" \
        b"<script>var secret=1</script><noscript>ns</noscript></body></html>"  # fmt: skip
    text = visible_text(html)
    assert "Hello" in text and "world" in text and "secret" not in text and "x:1" not in text
    assert visible_text(b"\xff\xfe\x00garbage<<<") is not None
    assert visible_text("café".encode("latin-1"), "text/html; charset=iso-8859-1").strip() == "café"


def test_simhash_basics() -> None:
    text = "the quick brown fox jumps over the lazy dog " * 20
    assert simhash(text) == simhash(text.upper()) == simhash(text.replace(" ", ",  "))
    assert simhash("") == 0 and simhash("   ...  ") == 0
    assert simhash("one") != 0 and simhash("one two") != simhash("two one")
    assert simhash("price 10 on 2026-11-24") == simhash("price 99 on 2027-01-05")  # digits are not content
    assert hamming(0, (1 << 64) - 1) == 64 and hamming(5, 5) == 0
    assert 0 <= simhash(text) < 1 << 64


def test_compare_and_is_changed() -> None:
    a = Fingerprint("sha1:A", 0b1111, 10)
    same = Fingerprint("sha1:A", 0b1111, 10)
    near = Fingerprint("sha1:B", 0b1110, 10)
    far = Fingerprint("sha1:C", ~0b1111 & ((1 << 64) - 1), 10)
    assert compare(None, a) == "new" and compare(a, same) == "same"
    assert compare(a, near) == "near" and compare(a, far) == "changed"
    assert compare(a, near, near_bits=0) == "changed"
    assert is_changed(a, near, ignore_near_duplicates=False)
    assert not is_changed(a, near, ignore_near_duplicates=True)
    assert not is_changed(a, same, ignore_near_duplicates=False)
    assert is_changed(a, far, ignore_near_duplicates=True) and is_changed(
        None, a, ignore_near_duplicates=True
    )


def test_testbed_date_and_ad_changes_are_near_content_changes_are_not() -> None:
    """The rule on the living testbed's own pages: every date/ad-only change is "near", every text
    change "changed" (each page against its next version)."""
    web = Web(12, 30, seed=0, port=8080, living=Living(EPOCH))
    verdicts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for i, m in itertools.product(range(web.hosts), range(web.pages)):
        cls = page_class(web.seed, i, m)
        first = state(web.seed, i, m, 0.0)
        t = 0.0
        while cls != STATIC and state(web.seed, i, m, t) == first:
            t += tick_s(cls)
        if cls == STATIC:
            t = 10_000.0
        old, new = fingerprint(page_bytes(web, i, m, 0.0)), fingerprint(page_bytes(web, i, m, t))
        verdicts[cls][compare(old, new)] += 1
    assert set(verdicts[STATIC]) == {"same"}
    assert set(verdicts[DATED]) == {"near"} and set(verdicts[ADVERT]) == {"near"}
    assert set(verdicts[FAST]) == {"changed"} and set(verdicts[HOURLY]) == {"changed"}
    assert all(sum(verdicts[c].values()) >= 20 for c in (DATED, ADVERT, FAST, HOURLY)), verdicts


def test_duplicate_groups_exact_and_near() -> None:
    fp = {
        "http://a/1": Fingerprint("sha1:X", 0b0, 5),
        "http://b/1": Fingerprint("sha1:X", 0b0, 5),
        "http://c/1": Fingerprint("sha1:Y", 0b11, 5),  # 2 bits from X's simhash
        "http://d/1": Fingerprint("sha1:Z", (1 << 64) - 1, 5),
        "http://e/1": Fingerprint("sha1:E1", 0, 0),  # no words: joins only by digest
        "http://e/2": Fingerprint("sha1:E2", 0, 0),
    }
    assert duplicate_groups(fp.items()) == [["http://a/1", "http://b/1"]]
    assert duplicate_groups(fp.items(), near_bits=2) == [["http://a/1", "http://b/1", "http://c/1"]]
    assert duplicate_groups([]) == []


_hash = st.integers(min_value=0, max_value=(1 << 64) - 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_hash, st.integers(0, 3)), max_size=25), st.integers(0, 8))
def test_near_groups_match_all_pairs(base: list[tuple[int, int]], k: int) -> None:
    """The pigeonhole index finds exactly the transitive closure of "within k bits" (all pairs); k = 0
    groups by digest only (all digests differ here)."""
    items = []
    for n, (h, flips) in enumerate(base):
        items.append((f"u{n:03d}", Fingerprint(f"d{n}", h, 1)))
        for f in range(flips):  # near copies: a few bits flipped
            bit = (h >> f) % 64
            items.append((f"u{n:03d}n{f}", Fingerprint(f"d{n}n{f}", h ^ (1 << bit) ^ (1 << f), 1)))
    parent = {u: u for u, _ in items}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for (ua, fa), (ub, fb) in itertools.combinations(items, 2):
        if k and hamming(fa.simhash, fb.simhash) <= k:
            parent[find(ua)] = find(ub)
    groups = collections.defaultdict(list)
    for u, _ in items:
        groups[find(u)].append(u)
    want = sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])
    assert duplicate_groups(items, near_bits=k) == want


def test_near_bits_default_is_documented() -> None:
    assert NEAR_BITS == 6
