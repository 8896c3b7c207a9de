"""The bottom server's wire format (pipeline.dns.wire) and the negative cache's flood guard, as pure values."""

from __future__ import annotations

import json
import socket

from dnslib import CLASS, QTYPE, DNSRecord

from pipeline.dns.negative import NegativeCache
from pipeline.dns.wire import STATS_NAME, answer_reply, error_reply, parse_query, reply_bytes, stats_reply


def test_junk_and_replies_are_not_queries() -> None:
    assert parse_query(b"") is None
    assert parse_query(b"\x00\x01junk") is None
    reply = DNSRecord.question("a.crawl.test").reply()
    assert parse_query(bytes(reply.pack())) is None  # QR set: a reply sent to a server is dropped


def test_a_and_aaaa_map_to_families_and_the_stats_name_is_chaos_txt() -> None:
    a = parse_query(bytes(DNSRecord.question("A.Crawl.Test.", "A").pack()))
    v6 = parse_query(bytes(DNSRecord.question("a.crawl.test", "AAAA").pack()))
    mx = parse_query(bytes(DNSRecord.question("a.crawl.test", "MX").pack()))
    stats = parse_query(bytes(DNSRecord.question(STATS_NAME, "TXT", "CH").pack()))
    assert a is not None and a.family == socket.AF_INET and a.name == "A.Crawl.Test"
    assert v6 is not None and v6.family == socket.AF_INET6
    assert mx is not None and mx.family is None
    assert stats is not None and stats.is_stats and stats.qclass == CLASS.CH


def test_a_long_udp_reply_is_truncated_and_whole_over_tcp() -> None:
    query = parse_query(bytes(DNSRecord.question("many.crawl.test").pack()))
    assert query is not None and query.udp_limit == 512
    reply = answer_reply(query, [f"127.0.21.{i}" for i in range(100)], 300)
    udp, cut = reply_bytes(reply, udp_limit=query.udp_limit)
    tcp, whole = reply_bytes(reply, udp_limit=None)
    assert cut and not whole and len(udp) <= 512
    parsed = DNSRecord.parse(udp)
    assert parsed.header.tc == 1 and not parsed.rr and parsed.header.id == query.record.header.id
    assert len(DNSRecord.parse(tcp).rr) == 100


def test_error_kinds_become_rcodes() -> None:
    query = parse_query(bytes(DNSRecord.question("x.crawl.test").pack()))
    assert query is not None
    codes = {
        kind: error_reply(query, kind).header.rcode
        for kind in ("nxdomain", "no_address", "timeout", "malformed")
    }
    assert codes == {"nxdomain": 3, "no_address": 0, "timeout": 2, "malformed": 2}


def test_stats_reply_carries_json_longer_than_one_txt_string() -> None:
    query = parse_query(bytes(DNSRecord.question(STATS_NAME, "TXT", "CH").pack()))
    assert query is not None
    counters = {f"counter_{i}": i for i in range(40)}
    reply = DNSRecord.parse(reply_bytes(stats_reply(query, counters), udp_limit=None)[0])
    assert reply.rr[0].rtype == QTYPE.TXT
    assert json.loads(b"".join(bytes(p) for p in reply.rr[0].rdata.data)) == counters


def test_the_negative_cache_clears_early_rather_than_overfill() -> None:
    now = [0.0]
    neg = NegativeCache(capacity=100, fp_rate=0.01, ttl_s=3600, clock=lambda: now[0])
    for i in range(1_000):
        neg.add(f"nx{i}.flood.test", socket.AF_INET, "nxdomain")
    assert neg.flood_clears == 9 and neg.added == 100
    good = sum(neg.get(f"good{i}.test", socket.AF_INET) is not None for i in range(10_000))
    assert good < 300  # ~1% as sized; an overfilled filter (1,000 in 100's room) would say ~60% failed
