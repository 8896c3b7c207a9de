"""scripts/svc-unbound.sh end to end: start a fleet-tier unbound on free ports in front of a test bed."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest

from pipeline.dns.blocking import GetaddrinfoResolver
from pipeline.dns.resolver import AresResolver
from pipeline.dns.unbound import free_port
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import ip_for_host
from tests.services import need_unbound

pytestmark = pytest.mark.integration
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "svc-unbound.sh"


def test_service_script_start_status_stop(dns_testbed: TestbedProcess, tmp_path: Path) -> None:
    need_unbound()
    env: dict[str, str] = {}

    def svc(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(SCRIPT), action], env=env, capture_output=True, text=True, timeout=120)

    for _ in range(5):  # a port found free may be taken by another test before unbound binds it
        port = free_port()
        env = {**os.environ, "CRAWLFLEET_UNBOUND_PORT": str(port), "CRAWLFLEET_UNBOUND_DIR": str(tmp_path),
               "CRAWLFLEET_TESTBED_DNS_PORT": str(dns_testbed.dns_port)}
        started = svc("start")
        if started.returncode == 0 or "already in use" not in started.stderr:
            break
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        assert svc("start").returncode == 0  # idempotent
        assert svc("status").returncode == 0
        conf = (tmp_path / "unbound.conf").read_text()
        assert f"127.0.0.1@{dns_testbed.dns_port}" in conf and f"port: {port}" in conf

        async def ask() -> tuple[str, ...]:
            r = AresResolver([f"127.0.0.1:{port}"], timeout_s=1.0, tries=2)
            try:
                return (await r.query("site1.crawl.test")).addresses
            finally:
                await r.aclose()

        assert asyncio.run(ask()) == (ip_for_host(1, dns_testbed.web.hosts),)
    finally:
        assert svc("stop").returncode == 0
    assert svc("status").returncode != 0


def test_getaddrinfo_resolver_on_localhost() -> None:
    # /etc/hosts only: the system resolver must never be sent a query from the tests.
    answer = asyncio.run(GetaddrinfoResolver(threads=1).query("localhost", socket.AF_INET))
    assert "127.0.0.1" in answer.addresses and answer.ttl_s is None
