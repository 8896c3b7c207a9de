"""Ground truth of a testbed web: what a correct crawler fetches, computed from the model (no HTML).

A BFS from the seeds (every host's home page) over ``Web.links``:

- robots.txt is honoured with protego for the user-agent token ``crawlfleet``; a disallowed
  link target goes to ``forbidden`` and is not fetched;
- ``rel=nofollow`` links and the links of a meta-nofollow page are not followed; their targets
  that nothing else reaches are ``nofollow_only``;
- redirects are followed to their final target at the same depth (a redirect hop adds no depth);
  the first URL of a chain is in ``fetch_urls``, later hops in ``redirect_hops`` (and
  ``fetch_urls``), the final 200 in ``pages``;
- depth = link hops from a seed, bounded by ``max_depth``;
- calendar (trap) pages are left out of ``pages`` and ``fetch_urls``: a crawler must stop somewhere,
  tests only assert it stops;
- ``server_errors``: the fetch URLs that answer 500 every time (``/error/{k}``); a crawler may ask
  for them again after each 500 as far as its own retry limit goes.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from protego import Protego

from pipeline.harness.testbed.model import Web, host_name

AGENT = "crawlfleet"
TRAP_PREFIX = "/calendar/"
# Final status of a path on a host with the matching feature; every other link target is a 200 page.
_SERVER_ERROR = "/error/"
_NON_200 = ("/missing/", _SERVER_ERROR)


def _redirect_chain(path: str) -> list[str]:
    """Later hops of a redirect chain starting at ``path`` ([] when ``path`` is not a redirect)."""
    if path.startswith("/r/"):
        k = path[3:]
        return [f"/r2/{k}", f"/moved/{k}"]
    if path == "/loop/a":
        return ["/loop/b"]  # then back to /loop/a: the chain never ends in a page
    return []


def compute_truth(web: Web, *, max_depth: int = 20) -> dict[str, Any]:
    """The ground truth as a JSON-able dict (see the module docstring for the keys)."""
    robots: dict[int, Protego | None] = {}
    robots_txt: dict[str, str] = {}
    for i in range(web.hosts):
        txt = web.robots_txt(i)
        robots[i] = Protego.parse(txt) if txt is not None else None
        if txt is not None:
            robots_txt[host_name(i)] = txt

    def allowed(i: int, path: str) -> bool:
        rp = robots[i]
        return rp is None or bool(rp.can_fetch(web.url(i, path), AGENT))

    pages: list[str] = []
    fetch: list[str] = []
    hops: list[str] = []
    errors: list[str] = []
    forbidden: set[str] = set()
    nofollow_targets: set[tuple[int, str]] = set()
    seen: set[tuple[int, str]] = set()
    queue: deque[tuple[int, str, int]] = deque()
    for i in range(web.hosts):
        seen.add((i, "/"))
        queue.append((i, "/", 0))

    def enqueue(i: int, path: str, depth: int) -> None:
        if (i, path) in seen or depth > max_depth:
            return
        seen.add((i, path))
        if not allowed(i, path):
            forbidden.add(web.url(i, path))
            return
        queue.append((i, path, depth))

    while queue:
        i, path, depth = queue.popleft()
        if path.startswith(TRAP_PREFIX):
            continue
        chain = _redirect_chain(path)
        if chain:
            fetch.append(web.url(i, path))
            is_r = path.startswith("/r/")
            for hop in chain[:-1] if is_r else chain:
                hops.append(web.url(i, hop))
                fetch.append(web.url(i, hop))
            final = chain[-1]
            if is_r and (i, final) not in seen and allowed(i, final):
                seen.add((i, final))
                _visit_page(web, i, final, depth, max_depth, pages, enqueue, nofollow_targets, fetch=fetch)
            continue
        if path.startswith(_NON_200):
            fetch.append(web.url(i, path))
            if path.startswith(_SERVER_ERROR):
                errors.append(web.url(i, path))
            continue
        _visit_page(web, i, path, depth, max_depth, pages, enqueue, nofollow_targets, fetch=fetch)

    page_set = set(pages)
    nofollow_only = sorted({web.url(i, p) for i, p in nofollow_targets} - page_set - forbidden)
    return {
        "seeds": web.seeds(),
        "pages": sorted(pages),
        "fetch_urls": sorted(set(fetch)),
        "redirect_hops": sorted(set(hops)),
        "server_errors": sorted(set(errors)),
        "forbidden": sorted(forbidden),
        "nofollow_only": nofollow_only,
        "trap_prefix": TRAP_PREFIX,
        "robots_txt": robots_txt,
        "params": {
            "hosts": web.hosts,
            "pages": web.pages,
            "seed": web.seed,
            "port": web.port,
            "max_depth": max_depth,
        },
    }


def _visit_page(
    web: Web,
    i: int,
    path: str,
    depth: int,
    max_depth: int,
    pages: list[str],
    enqueue: Any,
    nofollow_targets: set[tuple[int, str]],
    *,
    fetch: list[str] | None = None,
) -> None:
    """Record a 200 page and enqueue what it links to."""
    url = web.url(i, path)
    pages.append(url)
    if fetch is not None:
        fetch.append(url)
    m = web.page_number(path)
    if m >= 0:
        links = web.targets(i, m)
    elif path == "/metanf":
        nofollow_targets.update((x.host, x.path) for x in web.metanf_links(i))
        return
    elif path in ("/file.bin",):
        return
    else:
        links = [(x.host, x.path, x.nofollow) for x in web.leaf_links(i)]
    if depth >= max_depth:
        return
    for host, target, nofollow in links:
        if nofollow:
            nofollow_targets.add((host, target))
        else:
            enqueue(host, target, depth + 1)
