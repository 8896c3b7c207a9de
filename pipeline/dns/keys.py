"""S2's BCTuple key: ``hash12(TLD) ‖ murmur3_32(SLD) ‖ murmur3_32(rest)``, 76 bits, as a Python int.

The key runs from the TLD downwards, so every name under one TLD (or one TLD+SLD) occupies one
contiguous key range: :func:`prefix_range` gives that range and a cache answers "how many .com
names?" by counting keys inside it, with no extra index.

Labels are split on dots, not on the public suffix list: for ``www.bbc.co.uk`` the TLD is ``uk``,
the SLD is ``co`` and the rest is ``www.bbc``. This keeps key computation to two string splits and
two murmur3 calls on the hot path. Names whose TLD is not in the table get code 0 and fold the TLD
into the rest hash, so ``a.foo`` and ``a.bar`` still get different keys.

Two different names collide only if TLD codes match and both 32-bit hashes collide; for n names
under one SLD the expected number of colliding pairs is about n²/2³³ (see the collision test).
"""

from __future__ import annotations

import mmh3

from pipeline.dns.tld import TLD_BITS, UNKNOWN, tld_table

SLD_BITS = 32
REST_BITS = 32
KEY_BITS = TLD_BITS + SLD_BITS + REST_BITS  # 76
_SLD_SHIFT = REST_BITS
_TLD_SHIFT = SLD_BITS + REST_BITS
_MASK32 = 0xFFFFFFFF
_TABLE = tld_table()


def normalize_name(host: str) -> str:
    """Lower-case, without a trailing dot: the form every cache keys on."""
    return host.rstrip(".").lower()


def _b(text: str) -> bytes:
    """UTF-8 bytes for mmh3, which segfaults on a str holding a lone surrogate (same hash otherwise)."""
    return text.encode("utf-8", "surrogatepass")


def name_key(name: str) -> int:
    """The 76-bit key of an already normalized name (see :func:`normalize_name`)."""
    rest, _, tld = name.rpartition(".")
    rest, _, sld = rest.rpartition(".")
    code = _TABLE.get(tld, UNKNOWN)
    if code == UNKNOWN:
        rest = f"{rest}\x00{tld}"
    return (
        (code << _TLD_SHIFT)
        | (mmh3.hash(_b(sld), 0, signed=False) << _SLD_SHIFT)
        | mmh3.hash(_b(rest), 0, signed=False)
    )


def key_parts(key: int) -> tuple[int, int, int]:
    """Split a key into (tld_code, sld_hash, rest_hash)."""
    return key >> _TLD_SHIFT, (key >> _SLD_SHIFT) & _MASK32, key & _MASK32


def prefix_range(tld: str, sld: str | None = None) -> tuple[int, int]:
    """Half-open key range ``[lo, hi)`` holding every name under ``tld`` (and ``sld`` if given).

    Unknown TLDs share code 0, so their range covers all unknown TLDs together.
    """
    code = _TABLE.get(tld.lower(), UNKNOWN)
    if sld is None:
        lo = code << _TLD_SHIFT
        return lo, lo + (1 << _TLD_SHIFT)
    lo = (code << _TLD_SHIFT) | (mmh3.hash(_b(sld.lower()), 0, signed=False) << _SLD_SHIFT)
    return lo, lo + (1 << _SLD_SHIFT)
