"""The first Ctrl-C's grace is bounded (#21 point 4): a request still on the wire after 2 s plus the read
timeout is abandoned, named in the summary and left pending for ``--resume``.

A local server answers robots.txt at once and trickles "/" one byte at a time, each well within the read
timeout, so only the crawl's own deadline can end it. The embedded crawl runs in this process (no fetch
or parse processes); the stop comes once the server has seen the request.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from pipeline.embedded.engine import CrawlRequest, EmbeddedCrawl
from pipeline.settings import Settings

pytestmark = pytest.mark.integration
IP = "127.0.23.1"


class TrickleSite:
    def __init__(self) -> None:
        self.paths: list[bytes] = []
        self.trickling = asyncio.Event()
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, IP, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                self.paths.append(path)
                if path == b"/robots.txt":
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
                self.trickling.set()
                for _ in range(100_000):  # until the client hangs up
                    writer.write(b"x")
                    await writer.drain()
                    await asyncio.sleep(0.2)
        writer.close()


def test_a_request_still_on_the_wire_after_the_grace_is_abandoned_and_named(tmp_path: Path) -> None:
    settings = Settings().with_overrides(
        {
            "security": {"allow_networks": ("127.0.23.0/24",)},
            "politeness": {"min_host_delay_s": 0.0},
            "fetch": {"read_timeout_s": 1.0, "total_timeout_s": 120.0, "retries": 0, "processes": 0,
                      "parse_processes": 0},
        }
    )  # fmt: skip
    site = TrickleSite()

    async def go() -> tuple[EmbeddedCrawl, dict[str, Any]]:
        await site.start()
        seed = f"http://{IP}:{site.port}/"
        crawl = EmbeddedCrawl(settings, CrawlRequest([seed], tmp_path / "out"))
        task = asyncio.create_task(crawl.run())
        try:
            await asyncio.wait_for(site.trickling.wait(), 60)
            crawl.stop()  # the first Ctrl-C
            return crawl, await asyncio.wait_for(task, 90)  # a hang guard; the grace is 3 s
        finally:
            await site.stop()

    crawl, summary = asyncio.run(go())
    seed = f"http://{IP}:{site.port}/"
    assert crawl.interrupt.grace_s == 3.0
    assert summary["interrupted"] is True
    assert summary["abandoned"] == [seed]
    assert summary["store"]["pending"] == 1  # left for --resume
    assert site.paths == [b"/robots.txt", b"/"]
