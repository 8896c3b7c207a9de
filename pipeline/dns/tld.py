"""S2's ``hash12`` table: every top-level domain numbered in order, in 12 bits.

Built from the public suffix list snapshot bundled with tldextract (never downloaded at run time):
the last label of every ICANN suffix, plus the special-use names of RFC 6761/2606/9476 that a
crawler meets in test beds (``test``, ``example``, ``invalid``, ``localhost``, ...). Internationalized
TLDs are listed in both their Unicode and their ``xn--`` form, and both forms share one code, so a
prefix count over ``.рф`` also counts names written as ``.xn--p1ai``.

Codes start at 1 in sorted order of the ASCII form; 0 means "not in the table". The numbering is a
function of the bundled snapshot, so every node of a fleet that shares cache keys must run the same
tldextract version.
"""

from __future__ import annotations

import functools

TLD_BITS = 12
MAX_CODE = (1 << TLD_BITS) - 1
UNKNOWN = 0

# Special-use TLDs that are not (or not all) in the PSL but are the ones a test bed and intranets use.
_SPECIAL = (
    "test",
    "example",
    "invalid",
    "localhost",
    "local",
    "onion",
    "internal",
    "alt",
    "arpa",
    "home",
    "lan",
)


def _ascii(tld: str) -> str:
    if tld.isascii():
        return tld
    try:
        return tld.encode("idna").decode("ascii")
    except UnicodeError:
        return "xn--" + tld.encode("punycode").decode("ascii")


@functools.lru_cache(maxsize=1)
def tld_table() -> dict[str, int]:
    """Map of TLD (lower case, Unicode and ``xn--`` forms) to its 12-bit code (1..4095)."""
    from pipeline.urls import extractor  # one trie per process

    suffixes = extractor()._get_tld_extractor().tlds_excl_private  # the bundled ICANN snapshot
    forms: dict[str, set[str]] = {}
    for suffix in suffixes:
        last = suffix.rsplit(".", 1)[-1].lower()
        if last.startswith("*") or not last:
            continue
        forms.setdefault(_ascii(last), set()).add(last)
    for name in _SPECIAL:
        forms.setdefault(name, set()).add(name)
    ordered = sorted(forms)
    if len(ordered) > MAX_CODE:
        raise RuntimeError(f"{len(ordered)} TLDs do not fit in {TLD_BITS} bits")
    table: dict[str, int] = {}
    for code, ascii_form in enumerate(ordered, start=1):
        table[ascii_form] = code
        for form in forms[ascii_form]:
            table[form] = code
    return table


def tld_code(tld: str) -> int:
    """The 12-bit code of ``tld`` (lower case, no dots), or :data:`UNKNOWN` (0)."""
    return tld_table().get(tld, UNKNOWN)


def distinct_codes() -> int:
    """How many distinct TLDs the table numbers (its names include IDN aliases)."""
    return len(set(tld_table().values()))
