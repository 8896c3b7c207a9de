"""hostile.crawl.test: responses that misbehave (reliability suite). Filled in below."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web as aioweb

from pipeline.testbed.accesslog import AccessLog


@dataclass(slots=True)
class HostileSite:
    port: int

    async def handle(
        self, request: aioweb.BaseRequest, path: str, log: AccessLog, client: str
    ) -> aioweb.StreamResponse:
        log.record("hostile.crawl.test", path, client, 404)
        return aioweb.Response(status=404, text="not yet")
