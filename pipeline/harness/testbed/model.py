"""The testbed web as a pure, deterministic model: hosts, addresses, robots.txt and the link graph.

Everything here is a function of ``(hosts, pages, seed, port)``; nothing is pre-rendered. The HTTP
server renders from it (``render.py``) and the ground truth walks it (``truth.py``) without parsing
HTML, so the two can never disagree about what a page links to.

Hosts are ``site{i}.crawl.test`` for i in 0..H-1. Each host has the home page ``/`` and ``/p/{n}``
for n in 0..P-2 (P pages). Page ``m`` (0 = home, m >= 1 = ``/p/{m-1}``) links to page m+1, so every
page is reachable from its home; ~16 further on-site random links and 1-3 cross-site ones keep the
BFS depth small.

Special pages live on fixed hosts, chosen by index modulo H (so a 1-host web has them all on host 0):

======================  ====================================================================
host index (mod H)      what it serves (all linked from that host's home page)
======================  ====================================================================
i % 4 == 1              robots.txt ``Disallow: /private/`` for ``*``; pages link ``/private/{k}``
2                       robots.txt with a ``crawlfleet`` group that differs from ``*``:
                        ``*`` disallows /private/, ``crawlfleet`` disallows /agentonly/ only
3                       robots.txt ``Crawl-delay: 0.2``
0                       ``/r/{k}`` -301-> ``/r2/{k}`` -302-> ``/moved/{k}``; ``/loop/a`` <-> ``/loop/b``
1                       ``/missing/{k}`` 404, ``/error/{k}`` 500
4                       ``/slow`` (1.5 s), ``/gzip`` (Content-Encoding: gzip)
5                       ``/big`` (5 MB HTML), ``/file.bin`` (100 KB octet-stream)
6                       ``/latin1`` (iso-8859-1 body)
7                       ``/calendar/{year}/{month}`` endless link trap
8                       ``rel=nofollow`` links to ``/nf/{k}``; ``/metanf`` (meta nofollow) -> ``/mnf/{k}``
others                  robots.txt 404 (allow all)
======================  ====================================================================

With ``living`` set (``testbed serve --mutate``, issue #23) pages change over time (``living.py``) and
hosts publish sitemaps (``sitemapgen.py``): robots.txt gains ``Sitemap:`` lines (``sitemap_urls``),
never a rule, so robots truth is unchanged. Without it the web is the static one, byte for byte.

Normal pages whose page number is 3 mod 7 carry ``<base href="http://host:port/">``, so their
relative links resolve against the root, not against ``/p/``.

``scheme`` "https" is the same web as the testbed's TLS port serves it (``testbed serve --tls``): every
absolute link, base and redirect says ``https://`` and the TLS port; nothing else differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipeline.harness.testbed.living import Living

DOMAIN = "crawl.test"
# Hosts outside the web whose TLS certificate is bad on purpose (tlscerts.py); each answers "/" only.
EXPIRED_HOST = f"expired.{DOMAIN}"
WRONGNAME_HOST = f"wrongname.{DOMAIN}"
IP_PREFIX = "127.0.10."
MAX_IPS = 64
N_SPECIAL = 3  # /r/0..2, /missing/0..2, /nf/0..2, /private/0..2 ...
CALENDAR_START = (2024, 1)

# Slots of the special hosts (taken modulo H).
REDIRECT_SLOT = 0
STATUS_SLOT = 1
AGENT_GROUP_SLOT = 2
CRAWL_DELAY_SLOT = 3
SLOW_SLOT = 4
BIG_SLOT = 5
LATIN1_SLOT = 6
CALENDAR_SLOT = 7
NOFOLLOW_SLOT = 8
HOSTILE_SITEMAP_SLOT = 9  # living web only: hostile sitemap files (sitemapgen.HOSTILE)
ROBOTS_CHANGE_SLOT = 10  # living web with robots_change_s: its robots.txt changes then (robots_txt(changed=))
THROTTLE_SLOT = 11  # living web with throttle_every: every Nth request answered 429 (fastserver)
CHANGED_DISALLOW = "/p/1"  # what the changed robots.txt newly disallows (a normal page)
CHANGED_CRAWL_DELAY_S = 0.5  # and the Crawl-delay it newly asks for
THROTTLE_RETRY_AFTER_S = 1  # the throttling host's Retry-After
LYING_EVERY, LYING_AT = 12, 7  # living web with lying_validators: hosts i % 12 == 7

CRAWL_DELAY_S = 0.2
# Living web only: the hostile sitemap files on host HOSTILE_SITEMAP_SLOT, all listed in its robots.txt;
# what each does is in sitemapgen.py's table.
HOSTILE_SITEMAPS = (
    "/hs/huge.xml", "/hs/big.xml.gz", "/hs/bomb.xml.gz", "/hs/chain/0.xml", "/hs/loop.xml", "/hs/bad.xml",
    "/hs/laughs.xml", "/hs/offscope.xml", "/hs/notsitemap.xml", "/hs/missing.xml",
)  # fmt: skip
TTL_CHOICES = (30, 60, 120, 300, 600, 900, 1800, 3600)


def n_ips(hosts: int) -> int:
    """How many loopback addresses a web of ``hosts`` hosts uses (about 3 hosts per address)."""
    return min(MAX_IPS, max(1, math.ceil(hosts / 3)))


def ip_for_host(i: int, hosts: int) -> str:
    """The address host ``i`` resolves to; hosts i and i + n_ips(H) share one."""
    return f"{IP_PREFIX}{1 + i % n_ips(hosts)}"


def all_ips(hosts: int) -> list[str]:
    return [f"{IP_PREFIX}{1 + k}" for k in range(n_ips(hosts))]


def host_name(i: int) -> str:
    return f"site{i}.{DOMAIN}"


def host_index(name: str, hosts: int) -> int:
    """Index of a lower-case ``site{i}.crawl.test`` name, or -1 when it is not a host of this web."""
    if not (name.startswith("site") and name.endswith(".crawl.test")):
        return -1
    digits = name[4:-11]
    if not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return -1
    i = int(digits)
    return i if i < hosts else -1


class Rng:
    """A tiny deterministic generator (64-bit LCG, splitmix-seeded): far cheaper than random.Random
    to create, which matters because every rendered page makes one. Not for anything but the testbed."""

    __slots__ = ("x",)

    def __init__(self, seed: int) -> None:
        z = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        self.x = z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A number in [0, n)."""
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) & _MASK
        return ((self.x >> 32) * n) >> 32

    def between(self, lo: int, hi: int) -> int:
        """A number in [lo, hi]."""
        return lo + self.below(hi - lo + 1)


_MASK = (1 << 64) - 1


@dataclass(slots=True)  # not frozen: frozen __init__ is measurably slower, and pages make ~20 each
class Link:
    """One ``<a>`` in a page: ``href`` as written, ``host``/``path`` of its target, and its rel."""

    href: str
    host: int
    path: str
    nofollow: bool = False


@dataclass(frozen=True, slots=True)
class HostFeatures:
    private: bool  # '*' disallows /private/
    agent_group: bool  # a 'crawlfleet' group that differs from '*'
    crawl_delay: bool
    redirects: bool
    statuses: bool
    slow: bool
    big: bool
    latin1: bool
    calendar: bool
    nofollow: bool


@dataclass(frozen=True, slots=True)
class Web:
    """The synthetic web. Pure and cheap to construct; all methods are deterministic."""

    hosts: int
    pages: int
    seed: int = 0
    port: int = 8080
    living: Living | None = None  # None: the static web (issue #23's mutating web is opt-in)
    scheme: str = "http"  # "https": the web as its TLS port serves it (links and redirects say https)
    products: bool = False  # product markup on some normal pages (products.py); links are the same either way

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.pages < 1:
            raise ValueError("hosts and pages must be >= 1")

    # --- names and addresses -------------------------------------------------------------
    def origin(self, i: int) -> str:
        return f"{self.scheme}://{host_name(i)}:{self.port}"

    def url(self, i: int, path: str) -> str:
        """Canonical URL (the form pipeline.urls.normalize returns) of ``path`` on host ``i``."""
        return f"{self.scheme}://{host_name(i)}:{self.port}{path}"

    def seeds(self) -> list[str]:
        return [self.url(i, "/") for i in range(self.hosts)]

    def ttl(self, i: int) -> int:
        """DNS TTL of host i: deterministic, varied 30 s .. 1 h."""
        return TTL_CHOICES[(i * 2654435761 + self.seed * 40503) % len(TTL_CHOICES)]

    # --- per-host features ---------------------------------------------------------------
    def _is(self, i: int, slot: int) -> bool:
        return i == slot % self.hosts

    def features(self, i: int) -> HostFeatures:
        return HostFeatures(
            private=i % 4 == 1 or self._is(i, AGENT_GROUP_SLOT),
            agent_group=self._is(i, AGENT_GROUP_SLOT),
            crawl_delay=self._is(i, CRAWL_DELAY_SLOT),
            redirects=self._is(i, REDIRECT_SLOT),
            statuses=self._is(i, STATUS_SLOT),
            slow=self._is(i, SLOW_SLOT),
            big=self._is(i, BIG_SLOT),
            latin1=self._is(i, LATIN1_SLOT),
            calendar=self._is(i, CALENDAR_SLOT),
            nofollow=self._is(i, NOFOLLOW_SLOT),
        )

    def robots_txt(self, i: int, *, changed: bool = False) -> str | None:
        """robots.txt of host i, or None when the host answers 404 (allow all). ``changed``: as the living
        web's changing host (``ROBOTS_CHANGE_SLOT``) serves it after ``Living.robots_change_s``: every group
        also disallows ``CHANGED_DISALLOW`` and asks for ``CHANGED_CRAWL_DELAY_S``."""
        f = self.features(i)
        sitemaps = [f"Sitemap: {u}" for u in self.sitemap_urls(i)]
        changed = changed and self._is(i, ROBOTS_CHANGE_SLOT)
        more = [f"Disallow: {CHANGED_DISALLOW}", f"Crawl-delay: {CHANGED_CRAWL_DELAY_S}"] if changed else []
        if not (f.private or f.crawl_delay or changed):
            if sitemaps:
                return "\n".join([f"# robots.txt for {host_name(i)} (crawlfleet testbed)", *sitemaps, ""])
            return None
        star = ["User-agent: *"]
        if f.private:
            star.append("Disallow: /private/")
        if f.crawl_delay and not changed:
            star.append(f"Crawl-delay: {CRAWL_DELAY_S}")
        lines = [f"# robots.txt for {host_name(i)} (crawlfleet testbed)", *star, *more, ""]
        if f.agent_group:
            lines += ["User-agent: crawlfleet", "Disallow: /agentonly/", "Allow: /", *more]
            if f.crawl_delay and not changed:
                lines.append(f"Crawl-delay: {CRAWL_DELAY_S}")
            lines.append("")
        if sitemaps:
            lines += [*sitemaps, ""]
        return "\n".join(lines)

    def sitemap_urls(self, i: int) -> list[str]:
        """The ``Sitemap:`` URLs in host i's robots.txt: none on the static web; on the living web
        ``/sitemap.xml`` (a urlset) when i % 3 == 0, ``/sitemap_index.xml`` (an index of a gzip and a
        plain part) when i % 3 == 1, none when i % 3 == 2; plus the hostile files on its slot's host."""
        if self.living is None:
            return []
        out = []
        if i % 3 == 0:
            out.append(self.url(i, "/sitemap.xml"))
        elif i % 3 == 1:
            out.append(self.url(i, "/sitemap_index.xml"))
        if self.living.hostile_sitemaps and self._is(i, HOSTILE_SITEMAP_SLOT):
            out += [self.url(i, path) for path in HOSTILE_SITEMAPS]
        return out

    def lies(self, i: int) -> bool:
        """Whether host i's validators never change (``Living.lying_validators``: i % 12 == 7)."""
        return self.living is not None and self.living.lying_validators and i % LYING_EVERY == LYING_AT

    def throttles(self, i: int) -> bool:
        """Whether host i answers every ``Living.throttle_every``-th request with 429 (``THROTTLE_SLOT``)."""
        return self.living is not None and self.living.throttle_every > 0 and self._is(i, THROTTLE_SLOT)

    def has_sitemap(self, i: int) -> bool:
        """Whether host i publishes a sitemap of its pages (living web, i % 3 != 2)."""
        return self.living is not None and i % 3 != 2

    def sitemap_only_paths(self, i: int) -> list[str]:
        """Pages of host i that only its sitemap lists (no link anywhere): ``/only/{k}``."""
        return [f"/only/{k}" for k in range(N_SPECIAL)] if self.has_sitemap(i) else []

    # --- the link graph ------------------------------------------------------------------
    def page_path(self, m: int) -> str:
        """Path of normal page m: 0 is the home page, m >= 1 is /p/{m-1}."""
        return "/" if m == 0 else f"/p/{m - 1}"

    def page_number(self, path: str) -> int:
        """Inverse of page_path; -1 when ``path`` is not a normal page of this web."""
        if path == "/":
            return 0
        if path.startswith("/p/"):
            digits = path[3:]
            if digits.isdigit() and (len(digits) == 1 or digits[0] != "0"):
                n = int(digits)
                if n <= self.pages - 2:
                    return n + 1
        return -1

    def rng(self, i: int, m: int) -> Rng:
        return Rng((self.seed * 1_000_003 + i) * 10_000_019 + m)

    def has_base(self, m: int) -> bool:
        return m >= 1 and (m - 1) % 7 == 3

    def _draws(self, i: int, m: int) -> list[tuple[int, int]]:
        """(target host, draw) per ordinary link of page m; draw = page * 100 + form * 10 + fragment."""
        below = self.rng(i, m).below
        P, H = self.pages, self.hosts
        draws = [(i, below(P * 100)) for _ in range(14 + below(5))]
        if H > 1:
            for _ in range(1 + below(3)):
                j = below(H - 1)
                draws.append((j + 1 if j >= i else j, below(min(P, 8) * 100) if below(2) else below(100)))
        if m + 1 < P:  # the chain that makes every page reachable
            draws.insert(below(len(draws) + 1), (i, (m + 1) * 100 + below(100)))
        draws.insert(below(len(draws) + 1), draws[below(len(draws))])  # a duplicate link
        return draws

    def links(self, i: int, m: int) -> list[Link]:
        """The links of normal page m on host i, in document order (duplicates included)."""
        dir_ = "/" if (m == 0 or self.has_base(m)) else "/p/"
        href, page_path = self._href, self.page_path
        out = []
        for j, v in self._draws(i, m):
            path = page_path(v // 100)
            out.append(Link(href((v // 10) % 10, v % 10 == 0, i, j, path, dir_), j, path))
        out += self._special_links(i, m)
        return out

    def targets(self, i: int, m: int) -> list[tuple[int, str, bool]]:
        """(host, path, nofollow) of every link of page m: ``links`` without writing the hrefs
        (the ground truth walks a million pages through this)."""
        page_path = self.page_path
        out = [(j, page_path(v // 100), False) for j, v in self._draws(i, m)]
        out += [(x.host, x.path, x.nofollow) for x in self._special_links(i, m)]
        return out

    def _href(self, form: int, fragment: bool, i: int, j: int, path: str, dir_: str) -> str:
        """Write a link to (j, path) from a page of host i whose base directory is ``dir_``."""
        frag = "#sec" if fragment else ""
        if j != i or form <= 1:
            if form == 0:
                return f"{self.scheme}://{host_name(j).upper()}:{self.port}{path}{frag}"
            if form == 1 and j != i:
                return f"//{host_name(j)}:{self.port}{path}{frag}"
            return f"{self.scheme}://{host_name(j)}:{self.port}{path}{frag}"
        if form <= 4:
            return f"{path}{frag}"
        # relative forms
        if dir_ == "/":
            rel = path[1:]
            return (rel or "./") + frag if form <= 6 else f"./{rel}{frag}" if form <= 8 else f"../{rel}{frag}"
        if path.startswith("/p/"):
            rel = path[3:]
            return f"{rel}{frag}" if form <= 6 else f"./{rel}{frag}" if form <= 8 else f"../p/{rel}{frag}"
        return f"..{path}{frag}"

    def _special_links(self, i: int, m: int) -> list[Link]:
        """Links from normal pages to the special pages of host i (root-relative)."""
        f = self.features(i)
        out: list[Link] = []
        if f.private:
            k = m % N_SPECIAL
            out.append(Link(f"/private/{k}", i, f"/private/{k}"))
            if f.agent_group:
                out.append(Link(f"/agentonly/{k}", i, f"/agentonly/{k}"))
        if m != 0:
            return out
        paths: list[str] = []
        if f.redirects:
            paths += [f"/r/{k}" for k in range(N_SPECIAL)] + ["/loop/a"]
        if f.statuses:
            paths += [f"/missing/{k}" for k in range(N_SPECIAL)] + [f"/error/{k}" for k in range(N_SPECIAL)]
        if f.slow:
            paths += ["/slow", "/gzip"]
        if f.big:
            paths += ["/big", "/file.bin"]
        if f.latin1:
            paths.append("/latin1")
        if f.calendar:
            paths.append("/calendar/{}/{}".format(*CALENDAR_START))
        if f.nofollow:
            paths.append("/metanf")
            out += [Link(f"/nf/{k}", i, f"/nf/{k}", nofollow=True) for k in range(N_SPECIAL)]
        out += [Link(p, i, p) for p in paths]
        return out

    def leaf_links(self, i: int) -> list[Link]:
        """Links of a leaf page (special targets): back to the home page and the first page."""
        return [
            Link("/", i, "/"),
            Link(
                self.url(i, self.page_path(min(1, self.pages - 1))), i, self.page_path(min(1, self.pages - 1))
            ),
        ]

    def metanf_links(self, i: int) -> list[Link]:
        """Links of /metanf: only /mnf/{k}, which nothing else links to."""
        return [Link(f"/mnf/{k}", i, f"/mnf/{k}") for k in range(N_SPECIAL)]

    @staticmethod
    def calendar_next(year: int, month: int) -> tuple[int, int]:
        return (year + 1, 1) if month >= 12 else (year, month + 1)
