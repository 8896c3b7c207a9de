"""The freshness bench's web: the living testbed with a named change mix, and the figures its own access
log gives.

- ``MixedTestbed``: ``TestbedProcess(mutate=True)`` serving ``living.MIXES[mix]`` (``testbed serve
  --mutate-mix``). Everything else (ports, ready file, access log, validators, the one host in six that
  ignores them) is the testbed's, unchanged.
- ``conditional_figures``: from the access log, every re-fetch of a normal page whose bytes had not changed
  since the previous fetch of that URL (judged by the testbed's truth at both instants), and the share of
  those answered 304, overall and on the hosts that honour validators (``liverender.honours_conditional``).
- ``wire_figures``: the bytes the server sent for the web's normal pages in a window (the log's ``bytes``:
  head and body of each answer), the 304s' bytes against the 200 each replaced (the same URL's previous
  200), and the validators' request bytes.

May import: pipeline (bench room).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.liverender import honours_conditional
from pipeline.harness.testbed.livetruth import locate
from pipeline.harness.testbed.living import Living, state
from pipeline.harness.testbed.model import Web

_TESTBED_CLI = "pipeline.harness.testbed.cli"


class MixedTestbed(TestbedProcess):
    """A living testbed whose pages follow change mix ``mix`` (``living.MIXES``)."""

    __test__ = False

    def __init__(self, hosts: int, pages: int, *, mix: str, **kwargs: Any) -> None:
        Living(0.0, mix=mix)  # ValueError now for an unknown mix, not from the server process
        super().__init__(hosts, pages, mutate=True, mutate_mix=mix, **kwargs)
        self.mix = mix

    def __enter__(self) -> MixedTestbed:
        self.start()
        return self


def conditional_figures(
    web: Web, log: Iterable[Mapping[str, Any]], *, since: float, until: float
) -> dict[str, Any]:
    """304 share of byte-unchanged re-fetches in ``[since, until]`` (wall s), overall and on the hosts that
    honour validators; a re-fetch's bytes are unchanged when the page's state (content and cosmetic
    version) is the same at its fetch and at the previous fetch of the same URL."""
    living = web.living
    assert living is not None
    last: dict[str, float] = {}
    counts = {"honouring": [0, 0], "ignoring": [0, 0]}  # [byte-unchanged re-fetches, of which 304]
    for e in sorted(log, key=lambda e: float(e["t"])):
        status = int(e["status"])
        if status not in (200, 304):
            continue
        url = f"http://{e['host']}:{web.port}{e['path']}"
        where = locate(web, url)
        if where is None:
            continue
        t = float(e["t"])
        prev, last[url] = last.get(url), t
        if prev is None or not since <= t <= until:
            continue
        i, m = where
        a = state(web.seed, i, m, living.test_time(prev), mix=living.mix)
        b = state(web.seed, i, m, living.test_time(t), mix=living.mix)
        if (a.version, a.cosmetic) != (b.version, b.cosmetic):
            continue
        group = counts["honouring" if honours_conditional(i) else "ignoring"]
        group[0] += 1
        group[1] += status == 304
    h, g = counts["honouring"], counts["ignoring"]
    both = [h[0] + g[0], h[1] + g[1]]
    return {
        "byte_unchanged_refetches": both[0],
        "share_304_all_hosts": round(both[1] / both[0], 4) if both[0] else None,
        "share_304_honouring_hosts": round(h[1] / h[0], 4) if h[0] else None,
        "byte_unchanged_refetches_honouring_hosts": h[0],
        "status_304": both[1],
    }


# If-None-Match and If-Modified-Since with the testbed's validators (a 22-byte ETag, an IMF-fixdate):
# what one conditional request adds to the plain GET.
VALIDATOR_REQUEST_BYTES = len('If-None-Match: "12345678901234567890"\r\n') + len(
    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
)


def wire_figures(
    web: Web, log: Iterable[Mapping[str, Any]], *, since: float, until: float, conditional_sent: int
) -> dict[str, Any]:
    """Bytes the server sent for normal pages in ``[since, until]``, and what conditional GET saved: each
    304 against the size of the same URL's previous 200, less the validators' request bytes over the
    ``conditional_sent`` conditional requests (the crawler's count, whole run, scaled to the window's
    share of requests)."""
    last_200: dict[str, int] = {}
    sent = n_304 = saved = requests = run_requests = 0
    for e in sorted(log, key=lambda e: float(e["t"])):
        url = f"http://{e['host']}:{web.port}{e['path']}"
        if "bytes" not in e or locate(web, url) is None:
            continue
        run_requests += 1
        size, status, t = int(e["bytes"]), int(e["status"]), float(e["t"])
        inside = since <= t <= until
        if inside:
            requests += 1
            sent += size
        if status == 200:
            last_200[url] = size
        elif status == 304 and inside:
            n_304 += 1
            saved += last_200.get(url, size) - size
    validators = int(conditional_sent * VALIDATOR_REQUEST_BYTES * requests / max(run_requests, 1))
    return {
        "requests": requests,
        "wire_bytes": sent,
        "status_304": n_304,
        "wire_bytes_saved_by_304": saved - validators,
        "validators_request_bytes": validators,
    }
