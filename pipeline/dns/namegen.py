"""Synthetic but real-looking host names (tests and benchmarks of the key and the caches).

The mix is skewed like a crawl's: half the names under .com, many ``www``/``blog``-style hosts,
and 20% crowded under a few platform SLDs (blogspot, github, wordpress) that hold huge numbers of
hosts. Deterministic for a given seed.
"""

from __future__ import annotations

import random

_TLDS = (
    ["com"] * 50
    + ["net"] * 8
    + ["org"] * 8
    + ["de", "uk", "ru", "cn", "jp", "fr", "io", "info", "br", "it"] * 2
)
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "tor",
    "web",
    "shop",
    "net",
    "data",
    "blog",
    "news",
    "tech",
    "ar",
    "zu",
    "qi",
]
_SUBS = ["www", "blog", "shop", "m", "api", "cdn", "mail", "news", "static", "img"]
_PLATFORMS = ["blogspot", "github", "wordpress"]


def real_looking_names(n: int, *, seed: int = 7) -> list[str]:
    """``n`` distinct host names, sorted."""
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        sld = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if rng.random() < 0.3:
            sld += str(rng.randint(0, 999))
        tld = rng.choice(_TLDS)
        if tld == "uk":
            sld += ".co"
        r = rng.random()
        if r < 0.3:
            out.add(f"{sld}.{tld}")
        elif r < 0.8:
            out.add(f"{rng.choice(_SUBS)}.{sld}.{tld}")
        else:
            out.add(f"u{rng.randint(0, 200_000)}.{rng.choice(_PLATFORMS)}.{tld}")
    return sorted(out)
