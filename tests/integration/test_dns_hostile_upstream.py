"""Bad answers from the upper layer: every one is a clean per-name error at the node, and none poisons the
shared dqcache. Real processes: a node's CachingResolver (c-ares) -> ``crawlfleet dns serve`` -> a hostile
DNS server on a free loopback port (tests/fixtures/dns.py's HostileUpstream)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.dns import CachingResolver, DnsError
from pipeline.dns.unbound import free_port
from pipeline.settings import DnsSettings
from tests.fixtures.dns import (
    HOSTILE_ZONE,
    POISON_IP,
    VICTIM_IP,
    DqServerProc,
    HostileUpstream,
    start_dq_server,
    stop_dq_server,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dq(hostile_upstream: HostileUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DqServerProc]:
    server = start_dq_server(hostile_upstream.address, tmp_path_factory.mktemp("dq_hostile"))
    try:
        yield server
    finally:
        stop_dq_server(server)


def resolve_all(server: str, names: list[str]) -> dict[str, list[str] | str]:
    """Each name through a fresh node resolver that remembers no failure: [ips] or "error:KIND"."""

    async def main() -> dict[str, list[str] | str]:
        node = CachingResolver.from_settings(DnsSettings(servers=(server,), timeout_s=1.0, tries=2))
        node._transient_ttl_s = 0.0  # the node must ask again each time: the server is under test here
        out: dict[str, list[str] | str] = {}
        try:
            results = await asyncio.gather(*(node.resolve(n) for n in names), return_exceptions=True)
        finally:
            await node.aclose()
        for name, result in zip(names, results, strict=True):
            if isinstance(result, DnsError):
                out[name] = f"error:{result.kind}"
            elif isinstance(result, BaseException):
                raise result
            else:
                out[name] = sorted(result)
        return out

    return asyncio.run(main())


def h(label: str) -> str:
    return f"{label}.{HOSTILE_ZONE}"


def assert_victim_true(dq: DqServerProc) -> None:
    assert resolve_all(dq.address, [h("victim")])[h("victim")] == [VICTIM_IP]


def test_truncated_answers_are_asked_again_over_tcp(
    dq: DqServerProc, hostile_upstream: HostileUpstream
) -> None:
    assert resolve_all(dq.address, [h("trunc")]) == {h("trunc"): ["127.0.20.1"]}
    assert hostile_upstream.asked["trunc"] >= 2  # once over UDP (truncated), again over TCP


def test_an_answer_too_long_for_udp_reaches_the_node_over_tcp(dq: DqServerProc) -> None:
    before = dq.stats()["truncated"]
    got = resolve_all(dq.address, [h("many")])[h("many")]
    assert got == sorted(f"127.0.21.{i}" for i in range(100))
    assert dq.stats()["truncated"] > before  # the server cut its UDP reply and the node came back on TCP


def test_replies_with_a_wrong_id_are_ignored(dq: DqServerProc) -> None:
    got = resolve_all(dq.address, [h("wrongid"), h("race")])
    assert got[h("wrongid")] in ("error:timeout", "error:servfail")
    assert got[h("race")] == ["127.0.20.3"]  # the spoofed reply that came first was not taken
    again = resolve_all(dq.address, [h("race")])  # from the shared cache now: still the right one
    assert again[h("race")] == ["127.0.20.3"]


def test_answers_for_another_name_are_not_taken_for_it_nor_cached(dq: DqServerProc) -> None:
    got = resolve_all(dq.address, [h("other"), h("otherq")])
    assert got[h("other")] == "error:no_address"  # the only A record was for another name
    assert got[h("otherq")] in ("error:timeout", "error:servfail")  # a reply to another question
    assert_victim_true(dq)
    assert POISON_IP not in str(resolve_all(dq.address, [h("victim"), h("other")]))


def test_servfail_and_garbage_are_errors_never_cached(
    dq: DqServerProc, hostile_upstream: HostileUpstream
) -> None:
    for label, kinds in (("servfail", {"error:servfail"}), ("garbage", {"error:servfail", "error:timeout"})):
        first = resolve_all(dq.address, [h(label)])[h(label)]
        asked = hostile_upstream.asked[label]
        second = resolve_all(dq.address, [h(label)])[h(label)]
        assert first in kinds and second in kinds, (label, first, second)
        assert hostile_upstream.asked[label] > asked, label  # the server asked again: nothing was cached


def test_an_oversized_ttl_is_cut_to_the_maximum(dq: DqServerProc) -> None:
    from dnslib import DNSRecord

    assert resolve_all(dq.address, [h("bigttl")]) == {h("bigttl"): ["127.0.20.4"]}
    reply = DNSRecord.parse(DNSRecord.question(h("bigttl"), "A").send("127.0.0.1", dq.port, timeout=5))
    assert reply.rr and 0 < reply.rr[0].ttl <= DnsSettings().max_ttl_s


def test_an_nxdomain_flood_leaves_good_names_resolvable(
    hostile_upstream: HostileUpstream, tmp_path: Path
) -> None:
    """With a negative cache sized for 50 names, 300 failing names clear it early (the flood guard) instead of
    driving its false-positive rate up; every flooded name is a clean NXDOMAIN and the victim still resolves."""
    config = tmp_path / "small-negative.toml"
    config.write_text("[dns]\nnegative_capacity = 50\nnegative_fp_rate = 0.01\n")
    server = start_dq_server(hostile_upstream.address, tmp_path / "dq", "--config", str(config))
    try:
        flood = [h(f"nx{i}") for i in range(300)]
        got = resolve_all(server.address, flood)
        assert set(got.values()) == {"error:nxdomain"}
        assert server.stats()["negative_flood_clears"] >= 5
        assert resolve_all(server.address, [h("victim")]) == {h("victim"): [VICTIM_IP]}
        assert server.proc.poll() is None
    finally:
        stop_dq_server(server)


def test_a_dead_upper_layer_is_a_clean_error_and_leaves_nothing_behind(
    hostile_upstream: HostileUpstream, tmp_path: Path
) -> None:
    """The server's upstream is a port nobody listens on: each name fails cleanly (SERVFAIL), the server stays
    up, and once the upper layer is back (here: another server pointed at the live one) nothing was remembered."""
    dead = free_port()
    server = start_dq_server(
        f"127.0.0.1:{dead}", tmp_path / "dq", "--upstream-timeout", "0.2", "--upstream-tries", "2"
    )
    try:
        got = resolve_all(server.address, [h("victim"), h("nx1")])
        assert set(got.values()) <= {"error:servfail", "error:timeout", "error:refused"}, got
        stats = server.stats()
        assert stats["servfail"] >= 2 and stats["cache_hits"] == 0 and stats["negative_hits"] == 0
        again = resolve_all(server.address, [h("victim")])
        assert again[h("victim")] != [VICTIM_IP] and server.stats()["negative_hits"] == 0  # not remembered
        assert server.proc.poll() is None
    finally:
        stop_dq_server(server)


def test_aaaa_for_a_v4_only_name_is_nodata_not_an_outage(dq: DqServerProc) -> None:
    async def ask() -> str:
        node = CachingResolver.from_settings(DnsSettings(servers=(dq.address,), timeout_s=1.0, tries=2))
        try:
            await node.resolve(h("victim"), family=socket.AF_INET6)
        except DnsError as exc:
            return exc.kind
        finally:
            await node.aclose()
        return "resolved"

    assert asyncio.run(ask()) == "no_address"
