"""Pure helpers of the fetch engine: DNS error mapping, host splitting, IP-literal detection, records."""

from __future__ import annotations

from fetchers.exchange import dns_error_class, is_ip_literal, split_host
from fetchers.guard import SsrfBlocked
from fetchers.records import UrlTask
from fetchers.report import RETRY_LATER, BatchReport
from pipeline.dns.aiohttp_resolver import DnsLookupError
from pipeline.dns.errors import DnsError


def test_dns_error_class() -> None:
    assert dns_error_class(SsrfBlocked("h", "10.0.0.1", "private")) == "ssrf_blocked"
    assert dns_error_class(DnsLookupError(DnsError("nxdomain", host="x"))) == "dns_nxdomain"
    assert dns_error_class(DnsLookupError(DnsError("timeout", host="x"))) == "dns_timeout"
    assert dns_error_class(DnsLookupError(DnsError("servfail", host="x"))) == "dns_servfail"
    assert dns_error_class(DnsLookupError(DnsError("no_address", host="x"))) == "dns_nxdomain"
    assert dns_error_class(TimeoutError()) == "dns_timeout"
    assert dns_error_class(OSError(None, "Temporary failure in name resolution")) == "dns_timeout"
    assert dns_error_class(OSError(None, "Name or service not known")) == "dns_nxdomain"


def test_split_host_and_ip_literals() -> None:
    assert split_host("a.test:8080") == ("a.test", 8080)
    assert split_host("a.test") == ("a.test", 80)
    assert split_host("[::1]:81") == ("::1", 81)
    assert split_host("[::1]") == ("::1", 80)
    assert is_ip_literal("127.0.0.1") and is_ip_literal("::1") and is_ip_literal("2130706433") and is_ip_literal("0x7f.1")
    assert not is_ip_literal("site1.crawl.test") and not is_ip_literal("localhost")


def test_batch_report_json_round_trip() -> None:
    rep = BatchReport(3, "f", 2, 1.5, {"a:1": 0.2}, {"a:1": "127.0.10.1"}, [UrlTask("http://a:1/", 7, 2)])
    assert BatchReport.from_json(rep.to_json()) == rep
    assert {"robots_unavailable", "throttled", "deferred", "dns_timeout"} <= set(RETRY_LATER)


def test_batch_report_from_json_rejects_malformed() -> None:
    import pytest

    from fetchers.schema import SchemaError

    good = BatchReport(3, "f", 2, 1.5, {"a:1": 0.2}, {"a:1": "127.0.10.1"}, [UrlTask("http://a:1/", 7, 2)]).to_json()
    for key, bad in [("pages", float("inf")), ("pages", "1"), ("elapsed_s", 10**400),
                     ("serial", True), ("host_delays", {"h": float("nan")}), ("unfinished", [["u", 1]]),
                     ("host_ips", {"h": 1}), ("fetcher_id", None)]:  # fmt: skip
        obj = dict(good, **{key: bad})
        with pytest.raises(SchemaError):
            BatchReport.from_json(obj)
    with pytest.raises(SchemaError):
        BatchReport.from_json({"serial": 1})
