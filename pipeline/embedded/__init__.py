"""The embedded default: one command, no services, the whole loop in one process tree.

- ``engine``: ``EmbeddedCrawl``, CrawlCore and the aiohttp fetcher joined by calls on one event loop.
- ``fetchproc`` and ``fetchchild``: fetch processes on other cores; ``parseproc`` and ``parsechild``: parse processes.
- ``childproc``: how those helper processes are started.
- ``cli``: ``crawlfleet crawl``.

May import: pipeline.crawl and everything below it; never pipeline.transport or the harness.
"""
