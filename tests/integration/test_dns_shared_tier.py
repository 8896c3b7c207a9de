"""S1's three DNS layers on real processes: node CachingResolver -> ``crawlfleet dns serve`` -> unbound -> zone.

Queries are counted at every layer: each node's own upstream counter, the bottom server's counters
(read over DNS, ``stats.dqcache.`` CH TXT) and unbound's own query log.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from dnslib import QTYPE, DNSRecord

from tests.fixtures.dns import logged_queries, node_resolve, start_dq_server, stop_dq_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dq(counted_unbound: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = start_dq_server(f"127.0.0.1:{counted_unbound.unbound_port}", tmp_path_factory.mktemp("dq"))
    try:
        yield server
    finally:
        stop_dq_server(server)


def test_a_name_one_node_resolved_is_answered_to_another_from_the_shared_cache(
    dq: Any, counted_unbound: Any
) -> None:
    names = ["site0.crawl.test", "site1.crawl.test", "site2.crawl.test"]
    before = dq.stats()

    first = node_resolve(dq.address, names)
    assert all(
        isinstance(v, list) and v and v[0].startswith("127.0.10.") for v in first["answers"].values()
    ), first
    assert first["queries_sent"] == 3  # node 1 had nothing: it asked the bottom layer for each name
    mid = dq.stats()
    assert mid["upstream_queries"] - before["upstream_queries"] == 3
    assert mid["cache_misses"] - before["cache_misses"] == 3
    assert [logged_queries(counted_unbound, n) for n in names] == [1, 1, 1]  # unbound saw each once

    second = node_resolve(dq.address, names)  # another node process, with an empty cache of its own
    assert second["answers"] == first["answers"]
    assert second["queries_sent"] == 3  # node 2 asked the bottom layer too...
    after = dq.stats()
    assert after["cache_hits"] - mid["cache_hits"] == 3  # ...which answered from the shared dqcache
    assert after["upstream_queries"] == mid["upstream_queries"]
    assert [logged_queries(counted_unbound, n) for n in names] == [1, 1, 1]  # nothing more reached unbound


def test_nxdomain_is_answered_from_the_negative_cache_for_the_second_node(
    dq: Any, counted_unbound: Any
) -> None:
    name = "nosuchhost.crawl.test"
    first = node_resolve(dq.address, [name])
    assert first["answers"][name] == "error:nxdomain"
    mid = dq.stats()
    second = node_resolve(dq.address, [name])
    assert second["answers"][name] == "error:nxdomain"
    after = dq.stats()
    assert after["negative_hits"] - mid["negative_hits"] == 1
    assert after["upstream_queries"] == mid["upstream_queries"]
    assert logged_queries(counted_unbound, name) == 1


def test_ttl_is_clamped_and_counts_down(dq: Any) -> None:
    """longttl.crawl.test has a 7-day TTL: unbound cuts it to 3600, the dqcache to its max (86400 by default,
    so unbound's lower cut shows); shortttl's 1 s is raised to at least the min TTL (300)."""
    answers = {}
    for name in ("longttl.crawl.test", "shortttl.crawl.test"):
        reply = _ask(dq.port, name, "A")
        assert reply.header.rcode == 0 and reply.rr, reply
        answers[name] = reply.rr[0].ttl
    assert answers["longttl.crawl.test"] <= 3600
    assert answers["shortttl.crawl.test"] >= 60  # unbound's min in this fixture; our clamp stores >= 300
    assert _ask(dq.port, "shortttl.crawl.test", "A").rr[0].ttl >= 240


def test_aaaa_and_multi_protocol(dq: Any) -> None:
    v6 = node_resolve(dq.address, ["v6.crawl.test"], family=socket.AF_INET6)
    assert v6["answers"]["v6.crawl.test"] == ["::1"]
    reply = _ask(dq.port, "site3.crawl.test", "A", tcp=True)
    assert reply.header.rcode == 0 and len(reply.rr) == 1


def test_other_types_are_notimp_and_junk_is_dropped(dq: Any) -> None:
    assert _ask(dq.port, "site0.crawl.test", "MX").header.rcode == 4  # NOTIMP
    before = dq.stats()["dropped_junk"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\x00\x01junk", ("127.0.0.1", dq.port))
    assert _ask(dq.port, "site0.crawl.test", "A").header.rcode == 0  # still serving, in order after the junk
    assert dq.stats()["dropped_junk"] == before + 1


def _ask(port: int, name: str, qtype: str, *, tcp: bool = False) -> DNSRecord:
    query = DNSRecord.question(name, qtype)
    data = query.send("127.0.0.1", port, tcp=tcp, timeout=5)
    reply = DNSRecord.parse(data)
    assert reply.header.id == query.header.id
    assert reply.q.qtype == getattr(QTYPE, qtype)
    return reply


def test_served_from_the_procfile_command_line(tmp_path: Path) -> None:
    """The Procfile's `dns` line parses with the real CLI (the unit test checks the rest of the stack)."""
    from pipeline.cli import build_parser

    args = build_parser("dns").parse_args(
        ["dns", "serve", "--listen", "127.0.0.1:5336", "--upstream", "127.0.0.1:5335"]
    )
    assert args.listen == ("127.0.0.1", 5336) and callable(args.func)
