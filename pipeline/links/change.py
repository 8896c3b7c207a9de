"""Change detection as pure functions of page bytes: exact digest, near-duplicate simhash, grouping (#23).

Stable interface (the recrawl work calls it; nothing here stores anything):

- ``content_digest(body) -> str``: ``sha1:`` + base32 of the body, the form of a WARC
  ``WARC-Payload-Digest`` (``pipeline.storage.warcwire``), so a same-digest 200 can become an
  "identical-payload-digest" revisit by comparing strings. Records carry no digest today.
- ``visible_text(body, content_type="") -> str``: the words a reader sees (lexbor; script, style,
  noscript and template dropped; charset as ``extract`` decides it).
- ``simhash(text, *, shingle=3) -> int``: 64-bit Charikar simhash over the word shingles (``shingle``
  consecutive words of the lower-cased text split on whitespace and ASCII punctuation, every digit
  written ``0``, so dates, times, counters and prices are not content). Each word is hashed with mmh3 (x64, first 64 bits), a shingle's hash is a
  polynomial of its words' hashes through the splitmix64 finaliser, and every occurrence votes (a
  shingle weighs as often as it occurs). A text of fewer words than ``shingle`` is one shingle; no words at all gives 0.
- ``fingerprint(body, content_type="") -> Fingerprint`` (digest + simhash + word count).
- ``hamming(a, b) -> int``.
- ``compare(old, new, *, near_bits=NEAR_BITS) -> str``: "new" (no old), "same" (equal digest), "near"
  (different bytes, simhash within ``near_bits`` bits: a date or an ad changed), "changed".
  ``is_changed(old, new, *, ignore_near_duplicates)`` is the yes/no a schedule wants: with
  ``ignore_near_duplicates=True`` a "near" counts as unchanged.
- ``duplicate_groups(items, *, near_bits=0) -> list[list[str]]``: URLs that share content: equal
  digests (``near_bits=0``) or, with ``near_bits > 0``, simhashes within that distance (transitively),
  found with the pigeonhole index (``near_bits + 1`` bit blocks; two hashes within k bits agree exactly
  on one block), not all pairs; pages without words join only by digest. Groups of two or more, each
  sorted, sorted by first URL.

``NEAR_BITS`` = 6. Measured on the living testbed (60 hosts x 60 pages, seed 3, one change each): a
date-only change 0 bits (digits do not count), an ad-slot change 0-3 bits, a content change 15-44.
Two unrelated texts differ in ~32 +- 4 bits; P(<= 6) by chance is ~1e-11. (Manku, Jain and Das Sarma
use 3 for 8e9 pages, where every false match costs; grouping by ``near_bits`` pays bucket sizes of
2^(64/(k+1)): keep k small there.) tests/unit/test_change_detect.py holds these figures.
"""

from __future__ import annotations

import base64
import hashlib
import string
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import mmh3
import numpy as np
from selectolax.lexbor import LexborHTMLParser

from pipeline.links.extract import _decoded  # the charset rule link extraction uses, kept in one place

NEAR_BITS = 6
SHINGLE = 3
# Words: split on whitespace and ASCII punctuation, every digit written 0 (str.translate: ~3x a regex).
_TOKENS = str.maketrans({c: " " for c in string.punctuation} | {d: "0" for d in string.digits})
_HIDDEN = ["script", "style", "noscript", "template"]
_POLY = np.uint64(0x100000001B3)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    digest: str
    simhash: int
    words: int


def content_digest(body: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def visible_text(body: bytes, content_type: str = "") -> str:
    try:
        tree = LexborHTMLParser(_decoded(body, content_type))
        tree.strip_tags(_HIDDEN)
        root = tree.body or tree.root
        return "" if root is None else root.text(separator=" ")
    except Exception:  # noqa: BLE001 - hostile bytes give no text, never an exception
        return ""


def simhash(text: str, *, shingle: int = SHINGLE) -> int:
    words = text.lower().translate(_TOKENS).split()
    if not words:
        return 0
    k = max(1, min(shingle, len(words)))
    # mmh3 once per distinct word; a shingle's hash is a polynomial of its words' hashes, finalised
    # (splitmix64) in numpy: ~10x faster than hashing each joined shingle string.
    ids: dict[str, int] = {}
    order = np.fromiter((ids.setdefault(w, len(ids)) for w in words), dtype=np.intp, count=len(words))
    table = np.fromiter((mmh3.hash64(w, signed=False)[0] for w in ids), dtype=np.uint64, count=len(ids))
    h = table[order]
    n = len(words) - k + 1
    grams = h[:n].copy()
    for j in range(1, k):
        grams = grams * _POLY + h[j : j + n]  # uint64 arithmetic wraps, as intended
    grams ^= grams >> np.uint64(30)
    grams *= _MIX1
    grams ^= grams >> np.uint64(27)
    grams *= _MIX2
    grams ^= grams >> np.uint64(31)
    bits = np.unpackbits(grams.view(np.uint8), bitorder="little").reshape(-1, 64)
    majority = bits.sum(axis=0, dtype=np.int64) * 2 > n  # every occurrence votes: repeats weigh more
    return int(np.packbits(majority, bitorder="little").view(np.uint64)[0])


def text_simhash(body: bytes, content_type: str = "") -> int:
    """The re-crawl schedule's near-duplicate signature of a page: ``simhash`` of its visible text (the
    embedded crawl and the fleet's crawl-db update job both use this one)."""
    return simhash(visible_text(body, content_type))


def fingerprint(body: bytes, content_type: str = "") -> Fingerprint:
    text = visible_text(body, content_type)
    return Fingerprint(content_digest(body), simhash(text), len(text.split()))


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def compare(old: Fingerprint | None, new: Fingerprint, *, near_bits: int = NEAR_BITS) -> str:
    if old is None:
        return "new"
    if old.digest == new.digest:
        return "same"
    if hamming(old.simhash, new.simhash) <= near_bits:
        return "near"
    return "changed"


def is_changed(
    old: Fingerprint | None, new: Fingerprint, *, ignore_near_duplicates: bool, near_bits: int = NEAR_BITS
) -> bool:
    verdict = compare(old, new, near_bits=near_bits)
    return verdict in ("new", "changed") or (verdict == "near" and not ignore_near_duplicates)


def _blocks(bits: int) -> list[tuple[int, int]]:
    """(shift, width) of ``bits`` + 1 blocks covering 64 bits as evenly as possible."""
    n = bits + 1
    out, shift = [], 0
    for j in range(n):
        width = 64 // n + (1 if j < 64 % n else 0)
        out.append((shift, width))
        shift += width
    return out


def duplicate_groups(items: Iterable[tuple[str, Fingerprint]], *, near_bits: int = 0) -> list[list[str]]:
    if not 0 <= near_bits < 64:
        raise ValueError(f"near_bits must be in 0..63, got {near_bits}")
    urls: list[str] = []
    prints: list[Fingerprint] = []
    for url, fp in items:
        urls.append(url)
        prints.append(fp)
    parent = list(range(len(urls)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    by_digest: dict[str, int] = {}
    for j, fp in enumerate(prints):
        union(j, by_digest.setdefault(fp.digest, j))
    if near_bits:
        by_hash: dict[int, int] = {}  # equal simhashes join in linear time; pairs only among distinct ones
        for j, fp in enumerate(prints):
            if fp.words:  # a page without words (binary, empty) is no near-duplicate of anything
                union(j, by_hash.setdefault(fp.simhash, j))
        distinct = list(by_hash.items())
        for shift, width in _blocks(near_bits):
            mask = (1 << width) - 1
            buckets: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for h, j in distinct:
                buckets[(h >> shift) & mask].append((h, j))
            for members in buckets.values():
                for pos, (ha, a) in enumerate(members):
                    for hb, b in members[pos + 1 :]:
                        if hamming(ha, hb) <= near_bits:
                            union(a, b)
    groups: dict[int, list[str]] = defaultdict(list)
    for j, url in enumerate(urls):
        groups[find(j)].append(url)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])
