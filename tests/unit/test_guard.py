"""SSRF guard: the pure address check (every range, only as data: no traffic) and the resolver wrapper."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from fetchers.guard import GuardedResolver, SsrfBlocked, is_forbidden_ip


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.0.0.53", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("169.254.1.1", "link_local"),
        ("fe80::1", "link_local"),
        ("169.254.169.254", "cloud_metadata"),
        ("fd00:ec2::254", "cloud_metadata"),
        ("100.100.100.200", "cloud_metadata"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("100.64.0.1", "cgnat"),
        ("100.127.255.254", "cgnat"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6 is unwrapped
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "cloud_metadata"),
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", "cloud_metadata"),  # NAT64 of 169.254.169.254
        ("192.0.2.1", "private"),  # documentation range
        ("not-an-ip", "invalid_ip"),
        ("127.1", "invalid_ip"),  # legacy short forms are not addresses here
    ],
)
def test_forbidden(ip: str, reason: str) -> None:
    assert is_forbidden_ip(ip) == reason


@pytest.mark.parametrize("ip", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:93.184.216.34"])
def test_public_allowed(ip: str) -> None:
    assert is_forbidden_ip(ip) == ""


def test_allow_networks() -> None:
    allow = ["127.0.10.0/24"]
    assert is_forbidden_ip("127.0.10.7", allow) == ""
    assert is_forbidden_ip("::ffff:127.0.10.7", allow) == ""
    assert is_forbidden_ip("127.0.0.53", allow) == "loopback"  # private.crawl.test stays refused
    assert is_forbidden_ip("10.0.0.1", ["10.0.0.0/8"]) == ""
    assert is_forbidden_ip("169.254.169.254", allow) == "cloud_metadata"


class _Static(AbstractResolver):
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls = 0

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        self.calls += 1
        if host not in self.table:
            raise OSError(None, "nxdomain")
        return [
            ResolveResult(hostname=host, host=ip, port=port, family=socket.AF_INET, proto=0, flags=0)
            for ip in self.table[host]
        ]

    async def close(self) -> None:
        return None


def test_guarded_resolver_filters_and_refuses() -> None:
    inner = _Static({"mixed": ["10.0.0.1", "127.0.10.3"], "evil": ["169.254.169.254"], "ok": ["127.0.10.2"]})
    guard = GuardedResolver(inner, ["127.0.10.0/24"])

    async def go() -> None:
        mixed = await guard.resolve("mixed", 80)
        assert [r["host"] for r in mixed] == ["127.0.10.3"]  # only the checked address is handed on
        assert [r["host"] for r in await guard.resolve("ok", 80)] == ["127.0.10.2"]
        with pytest.raises(SsrfBlocked) as info:
            await guard.resolve("evil", 80)
        assert info.value.reason == "cloud_metadata" and isinstance(info.value, OSError)
        with pytest.raises(OSError):
            await guard.resolve("missing", 80)

    asyncio.run(go())
    assert guard.check("127.0.10.9") == "" and guard.check("10.9.9.9") == "private"
