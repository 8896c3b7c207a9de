"""The compact positive cache: behaviour, CLOCK eviction, prefix counts, and a dict model (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dns.keys import name_key, prefix_range
from pipeline.dns.positive import PositiveCache


def test_put_get_replace_delete() -> None:
    c = PositiveCache(100)
    k = name_key("www.example.com")
    assert c.get(k) is None
    c.put(k, [0x7F000001], born_s=5, ttl_min=10)
    assert c.get(k) == ((0x7F000001,), 5, 10)
    c.put(k, [1, 2, 3], born_s=6, ttl_min=11)
    assert c.get(k) == ((1, 2, 3), 6, 11)
    c.put(k, [4], born_s=7, ttl_min=12)
    assert c.get(k) == ((4,), 7, 12)
    assert len(c) == 1
    assert c.delete(k)
    assert not c.delete(k)
    assert c.get(k) is None and len(c) == 0


def test_ipv6_addresses_are_128_bit() -> None:
    c = PositiveCache(10, ipv6=True)
    k = name_key("v6.crawl.test")
    big = (0x2001_0DB8 << 96) | 1
    c.put(k, [big, 1], born_s=0, ttl_min=1)
    assert c.get(k) == ((big, 1), 0, 1)


def test_an_entry_is_20_bytes_in_the_segment_and_within_24_with_the_delta() -> None:
    c = PositiveCache(16_000)
    for i in range(16_000):
        c.put(name_key(f"h{i}.example.com"), [i], born_s=0, ttl_min=1)
    c.compact()
    assert len(c) == 16_000
    segment_bytes = c.nbytes() - 20 * (c.slots - 16_000)  # the delta's slots are 20 bytes each too
    assert segment_bytes == 20 * 16_000
    assert c.nbytes() / c.capacity <= 24


def test_prefix_count_is_exact_across_compactions_tombstones_and_the_delta() -> None:
    import random

    rng = random.Random(3)
    c = PositiveCache(2_000, delta_fraction=8)
    tlds = ["com", "com", "com", "org", "net", "de", "uk"]
    live: dict[int, str] = {}
    for step in range(6_000):
        name = f"h{rng.randrange(3_000)}.s{rng.randrange(40)}.{rng.choice(tlds)}"
        key = name_key(name)
        if rng.random() < 0.2:
            c.delete(key)
            live.pop(key, None)
        else:
            c.put(key, [step], born_s=0, ttl_min=1)
            live[key] = name
        if step % 500 == 0:
            alive = {k: n for k, n in live.items() if c.get(k, touch=False) is not None}  # some were evicted
            assert set(c.keys()) == set(alive)
            for tld in ("com", "org", "de", "uk", "fr"):
                assert c.count_range(*prefix_range(tld)) == sum(n.endswith("." + tld) for n in alive.values())
            assert c.count_range(*prefix_range("com", "s7")) == sum(
                n.endswith(".s7.com") for n in alive.values()
            )
            live = alive
    assert c.compactions > 0 and c.evictions > 0


def test_clock_evicts_unreferenced_first() -> None:
    c = PositiveCache(3)
    keys = [name_key(f"h{i}.example.com") for i in range(4)]
    for k in keys[:3]:
        c.put(k, [1], born_s=0, ttl_min=1)
    # A full sweep clears all reference bits, then h0 (first in hand order after clearing) goes;
    # touching h1 and h2 afterwards protects them from the next eviction.
    c.put(keys[3], [1], born_s=0, ttl_min=1)
    assert len(c) == 3 and c.evictions == 1
    survivors = [k for k in keys if c.get(k) is not None]
    assert len(survivors) == 3 and keys[3] in survivors


def test_prefix_count() -> None:
    c = PositiveCache(1000)
    names = ["a.example.com", "b.example.com", "x.other.com", "example.org", "www.bbc.co.uk"]
    for n in names:
        c.put(name_key(n), [1], born_s=0, ttl_min=1)
    assert c.count_range(*prefix_range("com")) == 3
    assert c.count_range(*prefix_range("com", "example")) == 2
    assert c.count_range(*prefix_range("org")) == 1
    assert c.count_range(*prefix_range("uk", "co")) == 1
    assert c.count_range(*prefix_range("de")) == 0


ops = st.lists(
    st.tuples(st.sampled_from(["put", "get", "del"]), st.integers(0, 60), st.integers(0, 2**32 - 1)),
    max_size=400,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_matches_dict_model_without_eviction(script: list[tuple[str, int, int]]) -> None:
    c = PositiveCache(64, load_factor=0.9, delta_fraction=4)  # a 16-entry delta: compactions happen
    model: dict[int, tuple[int, ...]] = {}
    keys = [name_key(f"n{i}.ex{i % 7}.com") for i in range(61)]
    for op, i, ip in script:
        k = keys[i]
        if op == "put":
            ips = (ip,) if ip % 3 else (ip, ip ^ 1)
            c.put(k, ips, born_s=i, ttl_min=ip % 65536)
            model[k] = ips
        elif op == "get":
            got = c.get(k)
            assert (got[0] if got else None) == model.get(k)
        else:
            assert c.delete(k) == (model.pop(k, None) is not None)
        assert len(c) == len(model)
    assert sorted(c.keys()) == sorted(model)


@settings(max_examples=100, deadline=None)
@given(ops, st.integers(1, 20))
def test_bounded_and_never_wrong_with_eviction(script: list[tuple[str, int, int]], capacity: int) -> None:
    c = PositiveCache(capacity)
    model: dict[int, tuple[int, ...]] = {}
    keys = [name_key(f"h{i}.site.org") for i in range(61)]
    for op, i, ip in script:
        k = keys[i]
        if op == "put":
            c.put(k, (ip,), born_s=0, ttl_min=1)
            model[k] = (ip,)
        elif op == "get":
            got = c.get(k)
            assert got is None or got[0] == model[k]  # evicted is fine, wrong is not
        else:
            c.delete(k)
            model.pop(k, None)
        assert len(c) <= capacity
        assert set(c.keys()) <= set(model)
    assert len(c) == len(c.keys())
