"""The Scrapy peer of ``crawlfleet bench peers``: a broad crawl of the testbed as Scrapy's users run one.

Runs in Scrapy's own virtualenv (``peers/tools.py`` installs it), never in crawlfleet's, and imports
nothing of crawlfleet. Settings follow Scrapy's "Broad Crawls" advice (scheduler queues in breadth-first
order, the downloader-aware priority queue, no cookies, no retries, INFO logging, a larger reactor
thread pool) at the bench's politeness: ``--per-host`` requests per host, robots.txt obeyed, no delay.
Names resolve through the testbed's DNS server (``--dns``) with Twisted's own resolver. Scrapy does not
verify server certificates (its default context factory accepts any), so https needs no CA here.

    python scrapy_spider.py --seeds FILE --dns HOST:PORT --per-host N --agent UA [--deny REGEXP ...]

Prints one JSON line at the end: {"visited": responses, "errors": failures}.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from twisted.internet.interfaces import IResolverSimple
from twisted.names import client
from zope.interface import implementer

ALLOW = r"^https?://site[0-9]+\.crawl\.test(:[0-9]+)?/"
DNS_SERVER: tuple[str, int] = ("127.0.0.1", 53)


@implementer(IResolverSimple)
class TestbedResolver:
    """Scrapy's DNS_RESOLVER: Twisted's DNS client asking the testbed's server, answers cached per name."""

    def __init__(self, reactor: Any = None) -> None:
        self._resolver = client.Resolver(servers=[DNS_SERVER])
        self._cache: dict[str, str] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> TestbedResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        from twisted.internet import reactor

        reactor.installResolver(self)  # type: ignore[attr-defined]

    def getHostByName(self, name: str, timeout: Any = None) -> Any:  # noqa: N802 - Twisted's interface
        from twisted.internet import defer

        if name in self._cache:
            return defer.succeed(self._cache[name])
        d = self._resolver.getHostByName(name)
        d.addCallback(self._keep, name)
        return d

    def _keep(self, address: str, name: str) -> str:
        self._cache[name] = address
        return address


class PeerSpider(Spider):
    name = "peer"

    def __init__(self, seeds: list[str], deny: list[str], **kw: Any) -> None:
        super().__init__(**kw)
        self.seeds = seeds
        self.links = LinkExtractor(allow=(ALLOW,), deny=tuple(deny), unique=True, canonicalize=False)
        self.deny = [re.compile(d) for d in deny]
        self.visited = 0
        self.errors = 0

    async def start(self) -> Any:
        for url in self.seeds:
            yield Request(url, callback=self.parse, errback=self.failed)

    def parse(self, response: Any) -> Any:
        self.visited += 1
        if not hasattr(response, "text"):
            return
        for link in self.links.extract_links(response):
            if not link.nofollow:
                yield Request(link.url, callback=self.parse, errback=self.failed)

    def failed(self, failure: Any) -> None:
        self.errors += 1


def main() -> None:
    global DNS_SERVER
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", required=True)
    p.add_argument("--dns", required=True)
    p.add_argument("--per-host", type=int, default=4)
    p.add_argument("--agent", default="crawlfleet-peer-scrapy")
    p.add_argument("--deny", action="append", default=[])
    args = p.parse_args()
    host, _, port = args.dns.rpartition(":")
    DNS_SERVER = (host, int(port))
    with open(args.seeds) as fh:
        seeds = [line.strip() for line in fh if line.strip()]
    process = CrawlerProcess(settings={
        "USER_AGENT": args.agent, "ROBOTSTXT_OBEY": True, "ROBOTSTXT_USER_AGENT": args.agent,
        "CONCURRENT_REQUESTS": 256, "CONCURRENT_REQUESTS_PER_DOMAIN": args.per_host, "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False, "COOKIES_ENABLED": False, "RETRY_ENABLED": False, "LOG_LEVEL": "INFO",
        "REACTOR_THREADPOOL_MAXSIZE": 20, "DOWNLOAD_TIMEOUT": 30, "DEPTH_LIMIT": 0, "REDIRECT_ENABLED": True,
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue", "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "DNS_RESOLVER": f"{__name__}.TestbedResolver" if __name__ != "__main__" else "__main__.TestbedResolver",
        "TELNETCONSOLE_ENABLED": False,
    })  # fmt: skip
    crawler = process.create_crawler(PeerSpider)
    process.crawl(crawler, seeds=seeds, deny=args.deny)
    process.start()
    spider = crawler.spider
    print(json.dumps({"visited": spider.visited, "errors": spider.errors}))


if __name__ == "__main__":
    main()
