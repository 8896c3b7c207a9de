"""Both fetchers over HTTPS against the testbed's TLS port (its own CA, SNI, bad-certificate hosts).

Judged from the testbed's access log: what reached the server over which scheme. The testbed's CA is
trusted only through ``fetch.tls_ca_bundle``; without it every certificate is untrusted.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from typing import Any

import pytest

from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.testing import bed_resolver, bed_settings, run_urls
from fetchers.threaded import ThreadedFetcher
from fetchers.tls import cert_error_class
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import EXPIRED_HOST, WRONGNAME_HOST

pytestmark = pytest.mark.integration
KINDS = [AioFetcher, ThreadedFetcher, H1Fetcher]


@pytest.fixture(scope="module")
def disallow_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    """The plain port serves the http web under a robots.txt that disallows everything."""
    with TestbedProcess(4, 6, tls=True, plain_http="disallow", workdir=tmp_path_factory.mktemp("tls-dis")) as tb:
        yield tb


@pytest.fixture(scope="module")
def redirect_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    """The plain port answers every request with a 301 to the same path over https."""
    with TestbedProcess(4, 6, tls=True, plain_http="redirect", workdir=tmp_path_factory.mktemp("tls-red")) as tb:
        yield tb


def _fetch(kind: type, tb: TestbedProcess, urls: list[str], **fetch: Any) -> dict[str, Any]:
    settings = bed_settings(tb.dns_server, fetch={"retries": 0, **fetch}, politeness={"min_host_delay_s": 0.0})

    async def go() -> Any:
        async with kind(settings, fetcher_id="tls", resolver=bed_resolver(settings)) as f:
            return await run_urls(f, urls)

    results, report = asyncio.run(go())
    assert not report.unfinished
    return results


def _log(tb: TestbedProcess) -> collections.Counter[tuple[str, str, str]]:
    tb.wait_log_flush()
    return collections.Counter((e.get("scheme", "http"), e["host"], e["path"]) for e in tb.read_access_log())


@pytest.mark.parametrize("kind", KINDS, ids=["aio", "threaded", "h1"])
def test_certificate_failures_are_their_own_classes(kind: type, disallow_bed: TestbedProcess) -> None:
    tb = disallow_bed
    before = _log(tb)
    # site0 and site1 carry the two SAN-list certificates, site2 the wildcard one (tlscerts.py)
    good = [tb.url(i, "/p/1", scheme="https") for i in range(3)]
    bad = {tb.bad_cert_url(EXPIRED_HOST): "tls_cert_expired", tb.bad_cert_url(WRONGNAME_HOST): "tls_cert_hostname"}
    results = _fetch(kind, tb, [*good, *bad], tls_ca_bundle=tb.ca_file)
    for url in good:
        assert results[url].status == 200 and not results[url].error_class, (url, results[url].error_message)
    for url, error_class in bad.items():
        r = results[url]
        assert (r.status, r.error_class) == (0, error_class), (url, r.error_message)
    after = _log(tb)
    new = after - before
    assert all(new[("https", f"site{i}.crawl.test", "/p/1")] == 1 for i in range(3))
    assert [k for k in new if k[1] in (EXPIRED_HOST, WRONGNAME_HOST)] == []  # no HTTP request got through


@pytest.mark.parametrize("kind", KINDS, ids=["aio", "threaded", "h1"])
def test_without_the_ca_every_certificate_is_untrusted_and_unverified_fetches_all(
    kind: type, disallow_bed: TestbedProcess
) -> None:
    tb = disallow_bed
    urls = [tb.url(3, "/p/2", scheme="https"), tb.bad_cert_url(EXPIRED_HOST)]
    untrusted = _fetch(kind, tb, urls)
    assert {u: r.error_class for u, r in untrusted.items()} == dict.fromkeys(urls, "tls_cert_untrusted")
    anyway = _fetch(kind, tb, urls, tls_verify=False)
    assert {u: (r.status, r.error_class) for u, r in anyway.items()} == dict.fromkeys(urls, (200, ""))


@pytest.mark.parametrize("kind", KINDS, ids=["aio", "threaded", "h1"])
def test_robots_txt_is_per_scheme(kind: type, disallow_bed: TestbedProcess) -> None:
    """RFC 9309: http://host and https://host are two origins with a robots.txt each. The plain side
    disallows everything, the TLS side allows /p/: a fetcher keying robots by host would get one wrong."""
    tb = disallow_bed
    before = _log(tb)
    http_url, https_url = tb.url(1, "/p/3"), tb.url(1, "/p/3", scheme="https")
    results = _fetch(kind, tb, [http_url, https_url], tls_ca_bundle=tb.ca_file)
    assert results[http_url].error_class == "robots_blocked"
    assert results[https_url].status == 200 and not results[https_url].error_class
    new = _log(tb) - before
    assert new[("http", "site1.crawl.test", "/robots.txt")] == 1 and new[("https", "site1.crawl.test", "/robots.txt")] == 1
    assert new[("http", "site1.crawl.test", "/p/3")] == 0 and new[("https", "site1.crawl.test", "/p/3")] == 1


@pytest.mark.parametrize("kind", KINDS, ids=["aio", "threaded", "h1"])
def test_http_redirects_to_https(kind: type, redirect_bed: TestbedProcess) -> None:
    tb = redirect_bed
    url = tb.url(2, "/p/4")
    r = _fetch(kind, tb, [url], tls_ca_bundle=tb.ca_file)[url]
    assert r.status == 200 and r.final_url == tb.url(2, "/p/4", scheme="https") and r.redirects == [url]
    assert b"https://" in r.body


def test_cert_error_class_reads_wrapped_errors() -> None:
    import ssl

    def verify_error(code: int) -> ssl.SSLCertVerificationError:
        err = ssl.SSLCertVerificationError(1, "certificate verify failed")
        err.verify_code = code
        return err

    assert cert_error_class(verify_error(10)) == "tls_cert_expired"
    assert cert_error_class(verify_error(62)) == "tls_cert_hostname"
    assert cert_error_class(verify_error(20)) == "tls_cert_untrusted"
    assert cert_error_class(verify_error(23)) == "tls_cert_invalid"  # revoked
    wrapped = RuntimeError("connection failed")
    wrapped.__cause__ = verify_error(9)
    assert cert_error_class(wrapped) == "tls_cert_expired"
    assert cert_error_class(ssl.SSLError(1, "handshake failure")) == ""
    assert cert_error_class(None) == ""
