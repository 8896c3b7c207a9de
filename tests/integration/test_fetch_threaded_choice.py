"""``fetchers.choice`` (#21 point 8): the fetcher kinds a crawl or a fleet worker may run, on the testbed.

``worker_factory("threaded")`` is what a worker's runtime calls per node: it must give the requests-futures
fetcher behind the process's one caching resolver, fetching the testbed's pages and following its
redirects; an unknown kind is refused with the choices named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fetchers.aio import AioFetcher
from fetchers.choice import KINDS, check_kind, make_fetcher, worker_factory
from fetchers.testing import bed_settings, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.integration


def test_unknown_kind_names_the_choices() -> None:
    assert KINDS[0] == "aio" and check_kind("threaded") == "threaded"
    with pytest.raises(ValueError, match="unknown fetcher 'curl'; expected one of: aio, threaded"):
        make_fetcher("curl", bed_settings("127.0.0.1:53"), fetcher_id="x")


def test_worker_factory_threaded_fetches_the_testbed(testbed_small: TestbedProcess) -> None:
    tb = testbed_small
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0})
    shared: dict[str, Any] = {}
    make = worker_factory("threaded")
    page = tb.url(1, "/")
    hop = next(u for u in tb.truth()["fetch_urls"] if "/r/" in u)  # the start of a redirect chain

    async def go() -> dict[str, Any]:
        first, second = make(settings, "n1", None, shared), make(settings, "n2", None, shared)
        assert isinstance(first, ThreadedFetcher) and isinstance(second, ThreadedFetcher)
        assert first._given_resolver is second._given_resolver is shared["resolver"]  # one DNS cache per process
        assert isinstance(worker_factory("aio")(settings, "n3", None, shared), AioFetcher)
        async with first:
            res, _ = await run_urls(first, [page, hop])
        await shared["caching"].aclose()
        return res

    res = asyncio.run(go())
    assert res[page].ok and res[page].body.startswith(b"<")
    # A fleet node does not follow a redirect (no seen-set at hand, fetchers.redirects): the 3xx is the
    # result, naming its target for the link jobs.
    assert res[hop].status in (301, 302) and res[hop].redirects == [hop] and res[hop].final_url != hop
